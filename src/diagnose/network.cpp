// `halfmap diagnose --model` (include/halfmap/diagnose_model.hpp): the network's paths, a runner that takes one
// batch through every layer in a path's storage type with that mode's kernels, and the per-layer statistics.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "diagnose/internal.hpp"
#include "diagnose/net_runner.hpp"
#include "halfmap/diagnose_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/loss_scale.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

std::optional<std::size_t> PathForward::first_nonfinite_layer() const {
  for (std::size_t l = 0; l < layers.size(); ++l)
    if (layers[l].nonfinite > 0) return l;
  return std::nullopt;
}

double PathForward::headroom_log2(std::size_t layer) const {
  const double m = std::max(layers[layer].max_abs, layers[layer].product_max_abs);
  if (m == 0) return std::numeric_limits<double>::infinity();
  return std::log2(max_finite(path.storage)) - std::log2(m);
}

namespace {

/// Widens n elements of a buffer of type t into `out`, exactly.
void widen(DType t, const void* buf, std::size_t first, std::size_t n, float* out) {
  switch (t) {
    case DType::f32: std::copy_n(static_cast<const float*>(buf) + first, n, out); break;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = to_f32(static_cast<const f16*>(buf)[first + i]);
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) out[i] = to_f32(static_cast<const bf16*>(buf)[first + i]);
      break;
  }
}

/// Adds one chunk of rows (row0 ..) of a path's layer outputs to its statistics, against the baseline's outputs of
/// the same rows; a row's batch is its index / `batch`. Layers on `threads` threads.
void accumulate(const onnx::Network& net, PathForward& f, const NetRunner& run, const NetRunner& base,
                std::size_t batch, std::size_t row0, unsigned threads) {
  const DType t = run.path().info.storage;
  // Half an ulp of 1 in the storage type: 2^-11 (fp16), 2^-8 (bf16), 2^-24 (f32).
  const double half_ulp = t == DType::f16 ? 0x1p-11 : t == DType::bf16 ? 0x1p-8 : 0x1p-24;
  parallel_for(f.layers.size(), threads, [&](std::size_t l) {
    LayerForward& s = f.layers[l];
    const std::size_t width = net.layers[l].out;
    std::vector<float> y(width), ref(width);
    s.count += run.rows() * width;
    // Locals, not the members: the compiler keeps them in registers (a member updated through `s` is stored and
    // reloaded every element).
    float max_abs = float(s.max_abs);
    std::size_t reference_nonzero = 0, flushed = 0;
    for (std::size_t row = 0; row < run.rows(); ++row) {
      widen(t, run.out(l).data(), row * width, width, y.data());
      widen(base.path().info.storage, base.out(l).data(), row * width, width, ref.data());
      float ref_max = 0;
      for (const float r : ref)
        if (std::isfinite(r)) ref_max = std::max(ref_max, std::abs(r));
      // A zero is a loss only where f32's value matters at this precision: larger than half an ulp of its row's
      // largest |y| in the storage type, and non-zero when stored in it (above half the type's smallest
      // subnormal: exactly half rounds to the even zero). The tails that fp16 arithmetic rounds away (GELU's
      // 1 + erf(x) for x < -4 cancels to 0) or that no fp16 can hold are not counted.
      const double floor = std::max(double(ref_max) * half_ulp, min_subnormal(t) / 2);
      for (std::size_t c = 0; c < width; ++c) {
        const float v = y[c], r = ref[c];
        if (!std::isfinite(v)) {
          if (s.nonfinite++ == 0) s.first_nonfinite = Where{(row0 + row) / batch, row0 + row, c, v};
          continue;
        }
        max_abs = std::max(max_abs, std::abs(v));
        const bool matters = std::isfinite(r) && double(std::abs(r)) > floor;
        reference_nonzero += matters;
        flushed += matters && v == 0;
      }
    }
    s.max_abs = max_abs;
    s.reference_nonzero += reference_nonzero;
    s.flushed += flushed;
    if (f.baseline) {  // the fp8 casts of the f32 outputs, batch by batch (chunks hold whole batches)
      const auto* out = static_cast<const float*>(run.out(l).data());
      for (std::size_t r0 = 0; r0 < run.rows(); r0 += batch)
        add_fp8_effects(out + r0 * width, std::min(batch, run.rows() - r0), width, s.fp8);
    }
  });
}

PathForward start_report(const onnx::Network& net, const NetPath& p, bool baseline) {
  PathForward f;
  f.path = p.info;
  f.baseline = baseline;
  for (std::size_t l = 0; l < net.layers.size(); ++l) {
    LayerForward s;
    s.name = net.layers[l].name;
    s.kernel = p.kernels[l] ? std::string(p.kernels[l]->name)
                            : fmt::format("elementwise {} (f32, rounded once)", dtype_name(p.info.storage));
    f.layers.push_back(std::move(s));
  }
  return f;
}

WeightCheck check_weight(const onnx::Param& p) {
  WeightCheck w;
  w.name = p.name;
  w.stored = p.stored;
  w.count = p.values.size();
  for (std::size_t i = 0; i < p.values.size(); ++i) {
    const float v = p.values[i];
    if (!std::isfinite(v)) {
      (std::isnan(v) ? w.nan : w.inf)++;
      if (!w.first_nonfinite) w.first_nonfinite = i;
      continue;
    }
    w.abs_max = std::max(w.abs_max, double(std::abs(v)));
    if (std::isinf(to_f32(to_f16(v)))) ++w.f16_overflow;
    if (std::isinf(to_f32(to_bf16(v)))) ++w.bf16_overflow;
  }
  return w;
}

}  // namespace

std::string_view loss_name(Loss l) {
  switch (l) {
    case Loss::none: return "none";
    case Loss::mse: return "mse";
    case Loss::xent: return "xent";
  }
  return "?";
}

std::string check_model_inputs(const onnx::Network& net, const Table& features, Loss loss, const Table* labels) {
  if (features.rows() == 0) return "the features hold no rows.";
  if (features.cols() != net.features)
    return fmt::format("the network's input '{}' takes {} features per row, and the features have {} columns.",
                       net.input, net.features, features.cols());
  if (net.seq != 0 && features.rows() % net.seq != 0)
    return fmt::format("the network's input '{}' takes sequences of {} tokens, one token per row, and the features' "
                       "{} rows are not whole sequences.",
                       net.input, net.seq, features.rows());
  if (loss == Loss::none) return {};
  if (labels == nullptr) return fmt::format("--loss {} needs --labels.", loss_name(loss));
  if (labels->rows() != features.rows())
    return fmt::format("the labels have {} rows and the features {}.", labels->rows(), features.rows());
  const std::size_t out = net.layers.back().out;
  if (loss == Loss::mse) {
    if (labels->cols() != out)
      return fmt::format("--loss mse compares the network's {} outputs per row with the labels, which have {} "
                         "columns.",
                         out, labels->cols());
    return {};
  }
  if (labels->cols() != 1) return fmt::format("--loss xent takes one class per row; the labels have {} columns.", labels->cols());
  const std::size_t classes = net.layers.back().kind == onnx::LayerKind::softmax && net.layers.size() > 1
                                  ? net.layers[net.layers.size() - 2].out
                                  : out;
  for (std::size_t r = 0; r < labels->rows(); ++r) {
    const double c = labels->at(r, 0);
    if (!(c >= 0 && c < double(classes) && c == std::floor(c)))
      return fmt::format("--loss xent: label {} of row {} is not a class of the network's {} outputs (an integer in "
                         "[0, {})).",
                         num(c), r, classes, classes);
  }
  return {};
}

namespace {

constexpr double kScales[3] = {1.0, loss_scale::kKerasInitial, loss_scale::kPytorchInitial};

void add_loss(PathLoss& pl, double loss, std::size_t batch) {
  pl.loss += loss;
  if (!std::isfinite(loss)) {
    ++pl.nonfinite_batches;
    if (!pl.first_nonfinite_batch) pl.first_nonfinite_batch = batch;
  }
}

std::vector<LayerGrads> start_grads(const onnx::Network& net, std::size_t last_bw) {
  std::vector<LayerGrads> g(net.layers.size());
  for (std::size_t l = 0; l < g.size(); ++l) {
    g[l].name = net.layers[l].name;
    g[l].has_params = l <= last_bw && !(net.layers[l].weight.empty() && net.layers[l].bias.empty());
    g[l].has_input = l > 0 && l <= last_bw;
  }
  return g;
}

/// The Keras-like path's (else the first low-precision path's) layer whose parameter gradients underflow most at
/// S = 1, and the warning when that passes the share.
ModelNoLossScaling no_loss_scaling(const ModelReport& r) {
  ModelNoLossScaling n;
  const PathForward* p = nullptr;
  for (const PathForward& x : r.paths)
    if (p == nullptr || (x.path.keras_like && !p->path.keras_like)) p = &x;
  if (p == nullptr || p->grads.empty()) return n;
  n.path = p->path.name;
  const LayerGrads* worst = nullptr;
  for (const LayerGrads& g : p->grads)
    if (g.has_params && (worst == nullptr || g.params[0].underflow_share() > worst->params[0].underflow_share()))
      worst = &g;
  if (worst == nullptr) return n;
  n.layer = worst->name;
  n.underflow_share = worst->params[0].underflow_share();
  if (n.underflow_share > r.options.underflow_share)
    n.warning = fmt::format("without loss scaling (S = 1) on {}, {:.1f} % of the parameter gradients of layer '{}' "
                            "that are non-zero in f32 are zero ({:.1f} % at 2^15, {:.1f} % at 2^16): train with dynamic "
                            "loss scaling (Keras LossScaleOptimizer, which mixed_float16 adds to fit; PyTorch "
                            "GradScaler).",
                            path_label(p->path), 100 * n.underflow_share, worst->name,
                            100 * worst->params[1].underflow_share(), 100 * worst->params[2].underflow_share());
  return n;
}

/// The batches the window is measured on: at most kModelWindowBatches, evenly spaced from the first.
std::vector<bool> window_sample(std::size_t batches) {
  std::vector<bool> in(batches, false);
  const std::size_t k = std::min(batches, kModelWindowBatches);
  for (std::size_t i = 0; i < k; ++i) in[i * batches / k] = true;
  return in;
}

/// One batch's window per layer: scans S = 2^0 .. 2^40 on `run` (forward already done for the chunk).
struct BatchWindows {
  std::vector<std::optional<int>> S_min, S_max;
};

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

/// Folds one batch's windows into the layers' (the window that holds for every batch so far).
void fold_window(PathForward& f, const BatchWindows& w, bool first) {
  for (std::size_t l = 0; l < f.grads.size(); ++l) {
    LayerWindow& lw = f.grads[l].window;
    if (first) {
      lw.S_min_log2 = w.S_min[l];
      lw.S_max_log2 = w.S_max[l];
      continue;
    }
    lw.S_min_log2 = lw.S_min_log2 && w.S_min[l] ? std::optional<int>(std::max(*lw.S_min_log2, *w.S_min[l])) : std::nullopt;
    lw.S_max_log2 = lw.S_max_log2 && w.S_max[l] ? std::optional<int>(std::min(*lw.S_max_log2, *w.S_max[l])) : std::nullopt;
  }
}

/// The network's window: the intersection of its layers', and the layers that set its ends (a layer without an
/// S_min (never under the share) or without an S_max (not finite even at S = 1) sets that end by itself).
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

}  // namespace

ModelReport run_model(const onnx::Network& net, const std::string& file, const Table& features, Loss loss,
                      const Table* labels, const Options& o) {
  if (std::string e = validate(o); !e.empty()) throw std::invalid_argument(e);
  if (std::string e = check_model_inputs(net, features, loss, labels); !e.empty()) throw std::invalid_argument(e);
  ModelReport r;
  r.options = o;
  begin_progress(o);
  r.loss = loss;
  r.file = file;
  r.net = net;
  r.data.rows = features.rows();
  // A batch is --batch samples: rows, or sequences of net.seq rows for a rank-3 input.
  const std::size_t seq = std::max<std::size_t>(net.seq, 1), samples = features.rows() / seq;
  r.data.batches = batch_count(samples, o);
  r.data.features.resize(features.cols());
  parallel_for(features.cols(), o.threads, [&](std::size_t c) {
    r.data.features[c] = features.is_f32()
                             ? column_stats(fmt::format("x{}", c), features.column_f32(c), features.rows())
                             : column_stats(fmt::format("x{}", c), features.column_f64(c), features.rows());
  });
  for (const onnx::Layer& l : net.layers) {
    for (const onnx::Param& p : l.sources) r.weights.push_back(check_weight(p));
    if (!l.sources.empty()) continue;
    if (!l.weight.empty()) r.weights.push_back(check_weight(l.weight));
    if (!l.bias.empty()) r.weights.push_back(check_weight(l.bias));
  }

  const NetPath base_path = baseline_net_path(net, loss);
  const std::vector<NetPath> low = low_precision_net_paths(net, loss, o);
  const std::size_t batch = (o.batch == 0 ? samples : std::min(o.batch, samples)) * seq;
  // Every layer works on rows (attention on sequences) independently and every kernel computes a row the same way
  // whatever the number of rows it is given (tests/diagnose_model_test.py checks that --batch changes no number
  // but the batch indices), so the forward runs in chunks of whole batches of about kChunkRows rows: the dense
  // kernels pack their weights once per chunk, not once per batch of 32. The loss and the gradients are per batch.
  constexpr std::size_t kChunkRows = 4096;
  const std::size_t chunk = std::min(features.rows(), std::max<std::size_t>(1, kChunkRows / batch) * batch);
  const unsigned threads = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  NetRunner base(net, base_path, loss, chunk, batch, threads);
  std::vector<NetRunner> runs;
  for (const NetPath& p : low) runs.emplace_back(net, p, loss, chunk, batch, threads);
  r.baseline = start_report(net, base_path, true);
  for (const NetPath& p : low) r.paths.push_back(start_report(net, p, false));
  if (loss != Loss::none) {
    r.baseline.loss = PathLoss{};
    for (PathForward& p : r.paths) {
      p.loss = PathLoss{};
      p.grads = start_grads(net, base.last_backward_layer());
    }
  }

  std::vector<std::vector<double>> ref_params(net.layers.size()), ref_inputs(net.layers.size());
  const std::vector<bool> sampled = window_sample(r.data.batches);
  std::size_t windows_done = 0;
  for (std::size_t row0 = 0; row0 < features.rows(); row0 += chunk) {
    const std::size_t m = std::min(chunk, features.rows() - row0);
    base.set_threads(threads);
    for (NetRunner& run : runs) run.set_threads(threads);
    base.load(features, labels, row0, m);
    base.forward();
    accumulate(net, r.baseline, base, base, batch, row0, threads);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      runs[i].load(features, labels, row0, m);
      runs[i].forward();
      accumulate(net, r.paths[i], runs[i], base, batch, row0, threads);
    }
    if (loss != Loss::none) {
      base.set_threads(1);
      for (NetRunner& run : runs) run.set_threads(1);
      for (std::size_t r0 = 0; r0 < m; r0 += batch) {
        const std::size_t mb = std::min(batch, m - r0), b = (row0 + r0) / batch;
        add_loss(*r.baseline.loss, base.backward(r0, mb, 1.0f), b);
        for (std::size_t l = 0; l < net.layers.size(); ++l) {
          std::size_t nf = 0;
          ref_params[l] = base.param_grads(l, nf);
          ref_inputs[l] = base.input_grads(l, nf);
        }
        // The paths' backward passes of a batch are independent: one path per thread, each kernel on one thread
        // (a batch of 32 rows is too small to split; teams of threads on it mostly wait at their barriers).
        parallel_for(runs.size(), threads, [&](std::size_t i) {
          PathForward& f = r.paths[i];
          for (int k = 0; k < 3; ++k) {
            const double L = runs[i].backward(r0, mb, float(kScales[k]));
            if (k == 0) add_loss(*f.loss, L, b);
            for (std::size_t l = 0; l < net.layers.size(); ++l) {
              std::size_t nf = 0;
              if (f.grads[l].has_params) {
                const std::vector<double> g = runs[i].param_grads(l, nf);
                f.grads[l].params[k].add(compare_grads(g, nf, ref_params[l], kScales[k], f.path.storage));
                nf = 0;
              }
              if (f.grads[l].has_input) {
                const std::vector<double> g = runs[i].input_grads(l, nf);
                f.grads[l].input[k].add(compare_grads(g, nf, ref_inputs[l], kScales[k], f.path.storage));
              }
            }
          }
          for (std::size_t l = 0; l < net.layers.size(); ++l)
            for (int k = 0; k < 3; ++k) {
              f.grads[l].params[k].scale = kScales[k];
              f.grads[l].input[k].scale = kScales[k];
            }
          if (sampled[b])
            fold_window(f, scan_window(runs[i], f, r0, mb, ref_params, ref_inputs, o.underflow_share),
                        windows_done == 0);
        });
        if (sampled[b]) ++windows_done;
      }
    }
    progress(o, "rows", row0 + m, features.rows());
  }
  for (std::size_t l = 0; l < net.layers.size(); ++l) {
    r.baseline.layers[l].product_max_abs = base.product_max(l);
    for (std::size_t i = 0; i < runs.size(); ++i) r.paths[i].layers[l].product_max_abs = runs[i].product_max(l);
  }
  if (loss != Loss::none) {
    r.baseline.loss->loss /= double(r.data.batches);
    for (PathForward& p : r.paths) {
      p.loss->loss /= double(r.data.batches);
      p.window = net_window(p, windows_done);
    }
  }
  if (loss != Loss::none && o.steps) simulate_model(net, features, labels, loss, base_path, low, batch, o, r);
  end_progress(o);
  r.no_loss_scaling = no_loss_scaling(r);
  r.verdict = decide_model(r);
  return r;
}

}  // namespace halfmap::diagnose
