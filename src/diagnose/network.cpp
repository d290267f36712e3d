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
    case DType::f32:
      std::copy_n(static_cast<const float*>(buf) + first, n, out);
      break;
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
    case Loss::none:
      return "none";
    case Loss::mse:
      return "mse";
    case Loss::xent:
      return "xent";
  }
  return "?";
}

std::string check_model_inputs(const onnx::Network& net, const Table& features, Loss loss, const Table* labels) {
  if (features.rows() == 0) return "the features hold no rows.";
  if (features.cols() != net.features)
    return fmt::format("the network's input '{}' takes {} features per row, and the features have {} columns.",
                       net.input, net.features, features.cols());
  if (net.seq != 0 && features.rows() % net.seq != 0)
    return fmt::format(
        "the network's input '{}' takes sequences of {} tokens, one token per row, and the features' "
        "{} rows are not whole sequences.",
        net.input, net.seq, features.rows());
  if (loss == Loss::none) return {};
  if (labels == nullptr) return fmt::format("--loss {} needs --labels.", loss_name(loss));
  if (labels->rows() != features.rows())
    return fmt::format("the labels have {} rows and the features {}.", labels->rows(), features.rows());
  const std::size_t out = net.layers.back().out;
  if (loss == Loss::mse) {
    if (labels->cols() != out)
      return fmt::format(
          "--loss mse compares the network's {} outputs per row with the labels, which have {} "
          "columns.",
          out, labels->cols());
    return {};
  }
  if (labels->cols() != 1)
    return fmt::format("--loss xent takes one class per row; the labels have {} columns.", labels->cols());
  const std::size_t classes = net.layers.back().kind == onnx::LayerKind::softmax && net.layers.size() > 1
                                  ? net.layers[net.layers.size() - 2].out
                                  : out;
  for (std::size_t r = 0; r < labels->rows(); ++r) {
    const double c = labels->at(r, 0);
    if (!(c >= 0 && c < double(classes) && c == std::floor(c)))
      return fmt::format(
          "--loss xent: label {} of row {} is not a class of the network's {} outputs (an integer in "
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
    n.warning = fmt::format(
        "without loss scaling (S = 1) on {}, {:.1f} % of the parameter gradients of layer '{}' "
        "that are non-zero in f32 are zero ({:.1f} % at 2^15, {:.1f} % at 2^16): train with dynamic "
        "loss scaling (Keras LossScaleOptimizer, which mixed_float16 adds to fit; PyTorch "
        "GradScaler).",
        path_label(p->path), 100 * n.underflow_share, worst->name, 100 * worst->params[1].underflow_share(),
        100 * worst->params[2].underflow_share());
  return n;
}

/// The report's options and data section: the features' columns and the network's weights, checked.
ModelReport start_model(const onnx::Network& net, const std::string& file, const Table& features, Loss loss,
                        const Options& o, std::size_t samples) {
  ModelReport r;
  r.options = o;
  begin_progress(o);
  r.loss = loss;
  r.file = file;
  r.net = net;
  r.data.rows = features.rows();
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
  return r;
}

/// The baseline's and each low-precision path's records before any row: their layers' kernels and, with a loss,
/// their losses and (the paths') gradients from the last layer the backward starts from, `last_bw`, down.
void start_paths(const onnx::Network& net, const NetPath& base_path, const std::vector<NetPath>& low, Loss loss,
                 std::size_t last_bw, ModelReport& r) {
  r.baseline = start_report(net, base_path, true);
  for (const NetPath& p : low) r.paths.push_back(start_report(net, p, false));
  if (loss != Loss::none) {
    r.baseline.loss = PathLoss{};
    for (PathForward& p : r.paths) {
      p.loss = PathLoss{};
      p.grads = start_grads(net, last_bw);
    }
  }
}

/// The passes over the rows, chunk by chunk: every path's forward against the baseline's, then with a loss each
/// batch's backward at S = 1, 2^15 and 2^16 against the baseline's gradients, and the window on the sampled
/// batches; then the totals. One object holds what every step shares (the runners, the reference gradients).
class ModelPasses {
 public:
  ModelPasses(const onnx::Network& net, const Table& features, const Table* labels, Loss loss, const Options& o,
              std::size_t batch, std::size_t chunk, unsigned threads, NetRunner& base, std::vector<NetRunner>& runs,
              ModelReport& r)
      : net_(net),
        features_(features),
        labels_(labels),
        loss_(loss),
        o_(o),
        batch_(batch),
        chunk_(chunk),
        threads_(threads),
        base_(base),
        runs_(runs),
        r_(r),
        ref_params_(net.layers.size()),
        ref_inputs_(net.layers.size()),
        sampled_(window_sample(r.data.batches)) {}

  /// Every chunk forward and (with a loss) backward, with progress; then the totals.
  void run() {
    for (std::size_t row0 = 0; row0 < features_.rows(); row0 += chunk_) {
      const std::size_t m = std::min(chunk_, features_.rows() - row0);
      forward(row0, m);
      if (loss_ != Loss::none) backward(row0, m);
      progress(o_, "rows", row0 + m, features_.rows());
    }
    finish();
  }

 private:
  /// Rows row0 .. row0 + m - 1 forward on the baseline, then on each path, its layers' outputs against the
  /// baseline's.
  void forward(std::size_t row0, std::size_t m) {
    base_.set_threads(threads_);
    for (NetRunner& run : runs_) run.set_threads(threads_);
    base_.load(features_, labels_, row0, m);
    base_.forward();
    accumulate(net_, r_.baseline, base_, base_, batch_, row0, threads_);
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      runs_[i].load(features_, labels_, row0, m);
      runs_[i].forward();
      accumulate(net_, r_.paths[i], runs_[i], base_, batch_, row0, threads_);
    }
  }

  /// Each batch of the chunk (rows row0 .. row0 + m - 1) backward: the baseline's loss and gradients, the
  /// reference, then every path's.
  void backward(std::size_t row0, std::size_t m) {
    base_.set_threads(1);
    for (NetRunner& run : runs_) run.set_threads(1);
    for (std::size_t r0 = 0; r0 < m; r0 += batch_) {
      const std::size_t mb = std::min(batch_, m - r0), b = (row0 + r0) / batch_;
      add_loss(*r_.baseline.loss, base_.backward(r0, mb, 1.0f), b);
      for (std::size_t l = 0; l < net_.layers.size(); ++l) {
        std::size_t nf = 0;
        ref_params_[l] = base_.param_grads(l, nf);
        ref_inputs_[l] = base_.input_grads(l, nf);
      }
      // The paths' backward passes of a batch are independent: one path per thread, each kernel on one thread
      // (a batch of 32 rows is too small to split; teams of threads on it mostly wait at their barriers).
      parallel_for(runs_.size(), threads_, [&](std::size_t i) { backward_path(i, r0, mb, b); });
      if (sampled_[b]) ++windows_done_;
    }
  }

  /// Path i on batch b (rows r0 .. r0 + mb - 1 of the chunk): its loss, its gradients at S = 1, 2^15 and 2^16
  /// against the baseline's, and its window when the batch is sampled.
  void backward_path(std::size_t i, std::size_t r0, std::size_t mb, std::size_t b) {
    PathForward& f = r_.paths[i];
    for (int k = 0; k < 3; ++k) {
      const double L = runs_[i].backward(r0, mb, float(kScales[k]));
      if (k == 0) add_loss(*f.loss, L, b);
      for (std::size_t l = 0; l < net_.layers.size(); ++l) {
        std::size_t nf = 0;
        if (f.grads[l].has_params) {
          const std::vector<double> g = runs_[i].param_grads(l, nf);
          f.grads[l].params[k].add(compare_grads(g, nf, ref_params_[l], kScales[k], f.path.storage));
          nf = 0;
        }
        if (f.grads[l].has_input) {
          const std::vector<double> g = runs_[i].input_grads(l, nf);
          f.grads[l].input[k].add(compare_grads(g, nf, ref_inputs_[l], kScales[k], f.path.storage));
        }
      }
    }
    for (std::size_t l = 0; l < net_.layers.size(); ++l)
      for (int k = 0; k < 3; ++k) {
        f.grads[l].params[k].scale = kScales[k];
        f.grads[l].input[k].scale = kScales[k];
      }
    if (sampled_[b])
      fold_window(f, scan_window(runs_[i], f, r0, mb, ref_params_, ref_inputs_, o_.underflow_share),
                  windows_done_ == 0);
  }

  /// After the last chunk: the attention layers' largest products, the mean losses and the paths' windows.
  void finish() {
    for (std::size_t l = 0; l < net_.layers.size(); ++l) {
      r_.baseline.layers[l].product_max_abs = base_.product_max(l);
      for (std::size_t i = 0; i < runs_.size(); ++i) r_.paths[i].layers[l].product_max_abs = runs_[i].product_max(l);
    }
    if (loss_ != Loss::none) {
      r_.baseline.loss->loss /= double(r_.data.batches);
      for (PathForward& p : r_.paths) {
        p.loss->loss /= double(r_.data.batches);
        p.window = net_window(p, windows_done_);
      }
    }
  }

  const onnx::Network& net_;
  const Table& features_;
  const Table* labels_;
  const Loss loss_;
  const Options& o_;
  const std::size_t batch_, chunk_;
  const unsigned threads_;
  NetRunner& base_;
  std::vector<NetRunner>& runs_;
  ModelReport& r_;
  std::vector<std::vector<double>> ref_params_, ref_inputs_;  // the baseline's gradients of the current batch
  const std::vector<bool> sampled_;                           // the batches the window is measured on
  std::size_t windows_done_ = 0;
};

}  // namespace

ModelReport run_model(const onnx::Network& net, const std::string& file, const Table& features, Loss loss,
                      const Table* labels, const Options& o) {
  if (std::string e = validate(o); !e.empty()) throw std::invalid_argument(e);
  if (std::string e = check_model_inputs(net, features, loss, labels); !e.empty()) throw std::invalid_argument(e);
  // A batch is --batch samples: rows, or sequences of net.seq rows for a rank-3 input.
  const std::size_t seq = std::max<std::size_t>(net.seq, 1), samples = features.rows() / seq;
  ModelReport r = start_model(net, file, features, loss, o, samples);

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
  start_paths(net, base_path, low, loss, base.last_backward_layer(), r);
  ModelPasses(net, features, labels, loss, o, batch, chunk, threads, base, runs, r).run();
  if (loss != Loss::none && o.steps) simulate_model(net, features, labels, loss, base_path, low, batch, o, r);
  end_progress(o);
  r.no_loss_scaling = no_loss_scaling(r);
  r.verdict = decide_model(r);
  return r;
}

}  // namespace halfmap::diagnose
