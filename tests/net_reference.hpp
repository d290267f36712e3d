// A network read by the ONNX reader (include/halfmap/onnx.hpp), evaluated in float64 from the layers' definitions,
// independent of halfmap's kernels: the reference of onnx_test (against PyTorch's output) and diagnose_net_test
// (the runner's gradients against its finite differences).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "halfmap/onnx.hpp"

namespace halfmap::onnx::testing {

/// Every value of the network on `rows` rows of x (row-major): values[0] is x, values[k] layers[k - 1]'s output.
inline std::vector<std::vector<double>> forward64(const Network& net, const std::vector<double>& x, std::size_t rows) {
  std::vector<std::vector<double>> values{x};
  std::size_t width = net.features;
  for (const Layer& l : net.layers) {
    const std::vector<double>& a = values.back();
    std::vector<double> y(rows * l.out);
    if (l.kind == LayerKind::attention) {
      // Per sequence of net.seq rows: softmax(q·kᵀ/√d [causal]) · v, q, k, v side by side in each input row.
      const std::size_t L = net.seq, d = l.out;
      for (std::size_t s0 = 0; s0 < rows; s0 += L)
        for (std::size_t i = 0; i < L; ++i) {
          const double* q = a.data() + (s0 + i) * 3 * d;
          const std::size_t keys = l.causal ? i + 1 : L;
          std::vector<double> p(keys);
          double mx = -INFINITY, se = 0;
          for (std::size_t j = 0; j < keys; ++j) {
            const double* k = a.data() + (s0 + j) * 3 * d + d;
            double t = 0;
            for (std::size_t e = 0; e < d; ++e) t += q[e] * k[e];
            mx = std::max(mx, p[j] = t / std::sqrt(double(d)));
          }
          for (double& e : p) se += (e = std::exp(e - mx));
          for (std::size_t e = 0; e < d; ++e) {
            double o = 0;
            for (std::size_t j = 0; j < keys; ++j) o += p[j] / se * a[(s0 + j) * 3 * d + 2 * d + e];
            y[(s0 + i) * d + e] = o;
          }
        }
      values.push_back(std::move(y));
      width = l.out;
      continue;
    }
    for (std::size_t r = 0; r < rows; ++r) {
      const double* in = a.data() + r * width;
      double* out = y.data() + r * l.out;
      double mean = 0, ss = 0, mx = -INFINITY, se = 0;
      switch (l.kind) {
        case LayerKind::dense:
          for (std::size_t j = 0; j < l.out; ++j) {
            double s = l.bias.empty() ? 0.0 : double(l.bias.values[j]);
            for (std::size_t i = 0; i < l.in; ++i) s += in[i] * double(l.weight.values[i * l.out + j]);
            out[j] = s;
          }
          break;
        case LayerKind::layernorm:
        case LayerKind::rmsnorm:
          if (l.kind == LayerKind::layernorm) {
            for (std::size_t j = 0; j < width; ++j) mean += in[j];
            mean /= double(width);
          }
          for (std::size_t j = 0; j < width; ++j) ss += (in[j] - mean) * (in[j] - mean);
          for (std::size_t j = 0; j < width; ++j)
            out[j] = (in[j] - mean) / std::sqrt(ss / double(width) + l.epsilon) *
                         (l.weight.empty() ? 1.0 : double(l.weight.values[j])) +
                     (l.bias.empty() ? 0.0 : double(l.bias.values[j]));
          break;
        case LayerKind::softmax:
          for (std::size_t j = 0; j < width; ++j) mx = std::max(mx, in[j]);
          for (std::size_t j = 0; j < width; ++j) se += std::exp(in[j] - mx);
          for (std::size_t j = 0; j < width; ++j) out[j] = std::exp(in[j] - mx) / se;
          break;
        case LayerKind::add:
          for (std::size_t j = 0; j < width; ++j) out[j] = in[j] + values[l.skip][r * width + j];
          break;
        default:
          for (std::size_t j = 0; j < width; ++j) {
            const double v = in[j];
            switch (l.kind) {
              case LayerKind::relu:
                out[j] = v < 0 ? 0 : v;
                break;
              case LayerKind::sigmoid:
                out[j] = 1 / (1 + std::exp(-v));
                break;
              case LayerKind::tanh:
                out[j] = std::tanh(v);
                break;
              case LayerKind::gelu:
                out[j] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
                break;
              case LayerKind::gelu_tanh:
                out[j] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                break;
              default:
                break;
            }
          }
      }
    }
    values.push_back(std::move(y));
    width = l.out;
  }
  return values;
}

}  // namespace halfmap::onnx::testing
