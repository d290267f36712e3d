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
#include "halfmap/diagnose_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

std::optional<std::size_t> PathForward::first_nonfinite_layer() const {
  for (std::size_t l = 0; l < layers.size(); ++l)
    if (layers[l].nonfinite > 0) return l;
  return std::nullopt;
}

double PathForward::headroom_log2(std::size_t layer) const {
  const double m = layers[layer].max_abs;
  if (m == 0) return std::numeric_limits<double>::infinity();
  return std::log2(max_finite(path.storage)) - std::log2(m);
}

namespace {

/// The registry op a layer runs on, or nullopt for the elementwise ones (computed here).
std::optional<Op> layer_op(onnx::LayerKind k) {
  switch (k) {
    case onnx::LayerKind::dense: return Op::dense_fwd;
    case onnx::LayerKind::gelu: return Op::gelu;
    case onnx::LayerKind::gelu_tanh: return Op::gelu_tanh;
    case onnx::LayerKind::layernorm: return Op::layernorm;
    case onnx::LayerKind::rmsnorm: return Op::rmsnorm;
    case onnx::LayerKind::softmax: return Op::softmax;
    default: return std::nullopt;
  }
}

/// The enabled kernel of (op, mode) on `isa`, else on the highest ISA before it in kAllIsas that has one.
const Kernel* find_at_or_below(Op op, Mode mode, Isa isa) {
  const auto top = std::find(kAllIsas.begin(), kAllIsas.end(), isa);
  for (auto it = top + 1; it != kAllIsas.begin();) {
    --it;
    for (const Kernel& k : kernels())
      if (k.op == op && k.mode == mode && k.isa == *it && kernel_enabled(k)) return &k;
  }
  return nullptr;
}

struct NetPath {
  PathInfo info;
  std::vector<const Kernel*> kernels;  // per layer; null for the elementwise layers
};

/// A path exists where the mode's dense_fwd runs on that very ISA and every other op of the network on it or
/// below it.
std::optional<NetPath> make_path(const onnx::Network& net, Mode mode, Isa isa) {
  const Kernel* dense = nullptr;
  for (const Kernel& k : kernels())
    if (k.op == Op::dense_fwd && k.mode == mode && k.isa == isa && kernel_enabled(k)) dense = &k;
  if (dense == nullptr) return std::nullopt;
  NetPath p;
  for (const onnx::Layer& l : net.layers) {
    const std::optional<Op> op = layer_op(l.kind);
    const Kernel* k = op ? find_at_or_below(*op, mode, isa) : nullptr;
    if (op && k == nullptr) return std::nullopt;
    p.kernels.push_back(k);
  }
  p.info.name = fmt::format("{}/{}", mode_name(mode), isa_name(isa));
  p.info.mode = mode;
  p.info.isa = isa;
  p.info.storage = dense->storage;
  return p;
}

NetPath baseline_net_path(const onnx::Network& net) {
  std::optional<NetPath> best;
  for (Isa isa : kAllIsas)
    if (auto p = make_path(net, Mode::f32, isa)) best = p;
  if (!best) throw std::runtime_error("no enabled f32 kernels for this network's layers");
  return *best;
}

std::vector<NetPath> low_precision_net_paths(const onnx::Network& net, const Options& o) {
  std::vector<NetPath> out;
  std::optional<NetPath> first;
  std::string names;
  for (Mode mode : {Mode::f16_f32acc, Mode::f16, Mode::bf16_f32acc}) {
    std::vector<NetPath> mode_paths;
    for (Isa isa : kAllIsas)
      if (auto p = make_path(net, mode, isa)) mode_paths.push_back(*p);
    if (mode_paths.empty()) continue;
    if (mode == Mode::f16_f32acc) mode_paths.back().info.keras_like = true;
    for (const NetPath& p : mode_paths) {
      if (p.info.name == o.path_first) first = p;
      names += fmt::format("{}{}", names.empty() ? "" : ", ", p.info.name);
    }
    if (o.all_paths) {
      out.insert(out.end(), mode_paths.begin(), mode_paths.end());
    } else {
      out.push_back(mode_paths.back());
    }
  }
  if (!o.path_first.empty()) {
    if (!first)
      throw std::invalid_argument(fmt::format("--path {} is not a low-precision path this CPU runs for this network "
                                              "(it runs {}).",
                                              o.path_first, names));
    std::erase_if(out, [&](const NetPath& p) { return p.info.name == o.path_first; });
    out.insert(out.begin(), *first);
  }
  return out;
}

/// One path of the network on one batch at a time; allocates once, for `max_rows` rows.
class NetRunner {
 public:
  NetRunner(const onnx::Network& net, NetPath p, std::size_t max_rows, unsigned threads)
      : net_(net), p_(std::move(p)), threads_(threads) {
    const DType t = p_.info.storage;
    x_.resize(t, max_rows * net.features);
    for (const onnx::Layer& l : net.layers) {
      y_.emplace_back(t, max_rows * l.out);
      w_.push_back(rounded(l.weight, t));
      b_.push_back(rounded(l.bias, t));
    }
  }

  /// Stores rows row0 .. row0 + m - 1 of the table, rounded once to the storage type.
  void load(const Table& x, std::size_t row0, std::size_t m) {
    m_ = m;
    const std::size_t d = net_.features;
    for (std::size_t c = 0; c < d; ++c)
      for (std::size_t r = 0; r < m; ++r) x_.set(r * d + c, x.at(row0 + r, c));
  }

  void forward() {
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      const onnx::Layer& l = net_.layers[i];
      const void* in = i == 0 ? x_.data() : y_[i - 1].data();
      const Kernel* k = p_.kernels[i];
      void* y = y_[i].data();
      const void* w = w_[i].size() ? w_[i].data() : nullptr;
      const void* b = b_[i].size() ? b_[i].data() : nullptr;
      switch (l.kind) {
        case onnx::LayerKind::dense:
          k->dense(DenseArgs{m_, l.out, l.in, in, w, b, y, Act::identity, threads_});
          break;
        case onnx::LayerKind::gelu:
        case onnx::LayerKind::gelu_tanh:
          k->gelu(GeluArgs{m_ * l.out, in, y, nullptr, nullptr});
          break;
        case onnx::LayerKind::layernorm:
        case onnx::LayerKind::rmsnorm:
          k->norm(NormArgs{m_, l.out, in, w, b, float(l.epsilon), y, nullptr, nullptr, nullptr, nullptr, nullptr,
                           nullptr});
          break;
        case onnx::LayerKind::softmax:
          k->softmax(SoftmaxArgs{m_, l.out, in, y});
          break;
        default:
          elementwise(l.kind, in, y, m_ * l.out);
      }
    }
  }

  std::size_t rows() const { return m_; }
  const TypedBuffer& out(std::size_t layer) const { return y_[layer]; }
  const NetPath& path() const { return p_; }

 private:
  static TypedBuffer rounded(const onnx::Param& p, DType t) {
    TypedBuffer b(t, p.values.size());
    for (std::size_t i = 0; i < p.values.size(); ++i) b.set(i, double(p.values[i]));
    return b;
  }

  void elementwise(onnx::LayerKind kind, const void* in, void* out, std::size_t n) const {
    const DType t = p_.info.storage;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = float(halfmap::load(t, in, i));
      float y = v;
      if (kind == onnx::LayerKind::relu) y = v < 0 ? 0.0f : v;
      if (kind == onnx::LayerKind::sigmoid) y = 1.0f / (1.0f + exp_f32(-v));
      if (kind == onnx::LayerKind::tanh) y = std::tanh(v);
      halfmap::store(t, out, i, double(y));
    }
  }

  const onnx::Network& net_;
  NetPath p_;
  unsigned threads_;
  std::size_t m_ = 0;
  TypedBuffer x_;
  std::vector<TypedBuffer> y_, w_, b_;
};

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
    for (std::size_t row = 0; row < run.rows(); ++row) {
      widen(t, run.out(l).data(), row * width, width, y.data());
      widen(base.path().info.storage, base.out(l).data(), row * width, width, ref.data());
      float ref_max = 0;
      for (const float r : ref)
        if (std::isfinite(r)) ref_max = std::max(ref_max, std::abs(r));
      const double floor = double(ref_max) * half_ulp;
      for (std::size_t c = 0; c < width; ++c) {
        const float v = y[c], r = ref[c];
        if (!std::isfinite(v)) {
          if (s.nonfinite++ == 0) s.first_nonfinite = Where{(row0 + row) / batch, row0 + row, c, v};
          continue;
        }
        s.max_abs = std::max(s.max_abs, double(std::abs(v)));
        // A zero is a loss only where f32's value matters at this precision: larger than half an ulp of its
        // row's largest |y| in the storage type, and non-zero when stored in it. The tails that fp16 arithmetic
        // rounds away (GELU's 1 + erf(x) for x < -4 cancels to 0) or that no fp16 can hold are not counted.
        if (r != 0 && std::isfinite(r) && std::abs(r) > floor) {
          std::uint32_t word = 0;
          if (halfmap::store(t, &word, 0, r) != 0) {
            ++s.reference_nonzero;
            if (v == 0) ++s.flushed;
          }
        }
      }
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

std::string check_model_inputs(const onnx::Network& net, const Table& features) {
  if (features.rows() == 0) return "the features hold no rows.";
  if (features.cols() != net.features)
    return fmt::format("the network's input '{}' takes {} features per row, and the features have {} columns.",
                       net.input, net.features, features.cols());
  return {};
}

ModelReport run_model(const onnx::Network& net, const std::string& file, const Table& features, const Options& o) {
  if (std::string e = validate(o); !e.empty()) throw std::invalid_argument(e);
  if (std::string e = check_model_inputs(net, features); !e.empty()) throw std::invalid_argument(e);
  ModelReport r;
  r.options = o;
  r.file = file;
  r.net = net;
  r.data.rows = features.rows();
  r.data.batches = batch_count(features.rows(), o);
  r.data.features.resize(features.cols());
  parallel_for(features.cols(), o.threads, [&](std::size_t c) {
    r.data.features[c] = features.is_f32()
                             ? column_stats(fmt::format("x{}", c), features.column_f32(c), features.rows())
                             : column_stats(fmt::format("x{}", c), features.column_f64(c), features.rows());
  });
  for (const onnx::Layer& l : net.layers) {
    if (!l.weight.empty()) r.weights.push_back(check_weight(l.weight));
    if (!l.bias.empty()) r.weights.push_back(check_weight(l.bias));
  }

  const NetPath base_path = baseline_net_path(net);
  const std::vector<NetPath> low = low_precision_net_paths(net, o);
  const std::size_t batch = o.batch == 0 ? features.rows() : std::min(o.batch, features.rows());
  // Every layer works on rows independently and every kernel computes a row the same way whatever the number of
  // rows it is given (tests/diagnose_model_test.py checks that --batch changes no number but the batch indices),
  // so the forward runs in chunks of whole batches of about kChunkRows rows: the dense kernels pack their
  // weights once per chunk, not once per batch of 32.
  constexpr std::size_t kChunkRows = 4096;
  const std::size_t chunk = std::min(features.rows(), std::max<std::size_t>(1, kChunkRows / batch) * batch);
  const unsigned threads = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  NetRunner base(net, base_path, chunk, threads);
  std::vector<NetRunner> runs;
  for (const NetPath& p : low) runs.emplace_back(net, p, chunk, threads);
  r.baseline = start_report(net, base_path, true);
  for (const NetPath& p : low) r.paths.push_back(start_report(net, p, false));

  for (std::size_t row0 = 0; row0 < features.rows(); row0 += chunk) {
    const std::size_t m = std::min(chunk, features.rows() - row0);
    base.load(features, row0, m);
    base.forward();
    accumulate(net, r.baseline, base, base, batch, row0, threads);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      runs[i].load(features, row0, m);
      runs[i].forward();
      accumulate(net, r.paths[i], runs[i], base, batch, row0, threads);
    }
    progress(o, "rows", row0 + m, features.rows());
  }
  r.verdict = decide_model(r);
  return r;
}

}  // namespace halfmap::diagnose
