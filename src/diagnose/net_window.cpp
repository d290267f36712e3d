// `halfmap diagnose --model` (include/halfmap/diagnose_model.hpp, NetWindow): the loss-scale window, measured on
// a sample of the batches with the gradients of each path's backward at S = 2^0 .. 2^40 against the baseline's.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "diagnose/internal.hpp"
#include "diagnose/net_runner.hpp"
#include "halfmap/diagnose_model.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::diagnose {

std::vector<bool> window_sample(std::size_t batches) {
  std::vector<bool> in(batches, false);
  const std::size_t k = std::min(batches, kModelWindowBatches);
  for (std::size_t i = 0; i < k; ++i) in[i * batches / k] = true;
  return in;
}

BatchWindows scan_window(NetRunner& run, const PathForward& f, std::size_t r0, std::size_t mb,
                         const std::vector<std::vector<double>>& ref_params,
                         const std::vector<std::vector<double>>& ref_inputs, double share) {
  const std::size_t layers = f.grads.size();
  BatchWindows w{std::vector<std::optional<int>>(layers), std::vector<std::optional<int>>(layers)};
  std::vector<bool> overflowed(layers, false);
  for (int e = 0; e <= kWindowMaxLog2; ++e) {
    const double S = std::ldexp(1.0, e);
    (void)run.backward(r0, mb, float(S));
    bool all_over = true;
    for (std::size_t l = 0; l < layers; ++l) {
      const LayerGrads& g = f.grads[l];
      if (!g.has_params && !g.has_input) continue;
      if (overflowed[l]) continue;
      std::size_t nf = 0;
      std::vector<double> p = g.has_params ? run.param_grads(l, nf) : std::vector<double>();
      std::vector<double> x = g.has_input ? run.input_grads(l, nf) : std::vector<double>();
      if (nf > 0) {
        overflowed[l] = true;
        if (e > 0) w.S_max[l] = e - 1;
        continue;
      }
      all_over = false;
      const GradStats st = g.has_params ? compare_grads(p, 0, ref_params[l], S, f.path.storage)
                                        : compare_grads(x, 0, ref_inputs[l], S, f.path.storage);
      if (!w.S_min[l] && st.underflow_share() <= share) w.S_min[l] = e;
    }
    if (all_over) break;
  }
  for (std::size_t l = 0; l < layers; ++l)
    if (!overflowed[l]) w.S_max[l] = kWindowMaxLog2;  // finite over the whole search
  return w;
}

void fold_window(PathForward& f, const BatchWindows& w, bool first) {
  for (std::size_t l = 0; l < f.grads.size(); ++l) {
    LayerWindow& lw = f.grads[l].window;
    if (first) {
      lw.S_min_log2 = w.S_min[l];
      lw.S_max_log2 = w.S_max[l];
      continue;
    }
    lw.S_min_log2 =
        lw.S_min_log2 && w.S_min[l] ? std::optional<int>(std::max(*lw.S_min_log2, *w.S_min[l])) : std::nullopt;
    lw.S_max_log2 =
        lw.S_max_log2 && w.S_max[l] ? std::optional<int>(std::min(*lw.S_max_log2, *w.S_max[l])) : std::nullopt;
  }
}

NetWindow net_window(const PathForward& f, std::size_t batches) {
  NetWindow n;
  n.batches = batches;
  const LayerGrads *lower = nullptr, *upper = nullptr, *no_lower = nullptr, *no_upper = nullptr;
  for (const LayerGrads& g : f.grads) {
    if (!g.has_params && !g.has_input) continue;
    if (!g.window.S_min_log2) {
      if (no_lower == nullptr) no_lower = &g;
    } else if (lower == nullptr || *g.window.S_min_log2 > *lower->window.S_min_log2) {
      lower = &g;
    }
    if (!g.window.S_max_log2) {
      if (no_upper == nullptr) no_upper = &g;
    } else if (upper == nullptr || *g.window.S_max_log2 < *upper->window.S_max_log2) {
      upper = &g;
    }
  }
  if (no_lower != nullptr) {
    n.lower_layer = no_lower->name;
  } else if (lower != nullptr) {
    n.lower_layer = lower->name;
    n.S_min_log2 = lower->window.S_min_log2;
  }
  if (no_upper != nullptr) {
    n.upper_layer = no_upper->name;
  } else if (upper != nullptr) {
    n.upper_layer = upper->name;
    n.S_max_log2 = upper->window.S_max_log2;
  }
  // Ends that no layer limits (2^0 below, the search's 2^40 above) are set by none.
  if (n.S_min_log2 == 0) n.lower_layer.clear();
  if (n.S_max_log2 == kWindowMaxLog2) n.upper_layer.clear();
  n.empty = !n.S_min_log2 || !n.S_max_log2 || *n.S_min_log2 > *n.S_max_log2;
  auto inside = [&](int e) { return !n.empty && *n.S_min_log2 <= e && e <= *n.S_max_log2; };
  n.keras_inside = inside(loss_scale::kKerasInitialLog2);
  n.pytorch_inside = inside(loss_scale::kPytorchInitialLog2);
  return n;
}

}  // namespace halfmap::diagnose
