// The paths of a network and its runner (src/diagnose/net_runner.hpp).
#include "diagnose/net_runner.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "halfmap/math.hpp"

namespace halfmap::diagnose {

namespace {

/// The registry op a layer runs on, or nullopt for the elementwise ones (computed here).
std::optional<Op> layer_op(const onnx::Layer& l) {
  switch (l.kind) {
    case onnx::LayerKind::attention:
      return l.prescale ? Op::attention_prescale : Op::attention_postscale;
    case onnx::LayerKind::dense:
      return Op::dense_fwd;
    case onnx::LayerKind::gelu:
      return Op::gelu;
    case onnx::LayerKind::gelu_tanh:
      return Op::gelu_tanh;
    case onnx::LayerKind::layernorm:
      return Op::layernorm;
    case onnx::LayerKind::rmsnorm:
      return Op::rmsnorm;
    case onnx::LayerKind::softmax:
      return Op::softmax;
    default:
      return std::nullopt;
  }
}

/// The enabled kernel of (op, mode) on `isa`, else on the highest ISA before it in kAllIsas that has one.
const Kernel* find_at_or_below(Op op, Mode mode, Isa isa) {
  const auto top = std::find(kAllIsas.begin(), kAllIsas.end(), isa);
  for (auto it = top + 1; it != kAllIsas.begin();) {
    --it;
    for (const Kernel& k : kernels())
      if (k.op == op && k.mode == mode && k.isa == *it && kernel_enabled(k) && !k.forward_only) return &k;
  }
  return nullptr;
}

std::optional<NetPath> make_net_path(const onnx::Network& net, Loss loss, Mode mode, Isa isa) {
  const Kernel* dense = nullptr;
  for (const Kernel& k : kernels())
    if (k.op == Op::dense_fwd && k.mode == mode && k.isa == isa && kernel_enabled(k)) dense = &k;
  if (dense == nullptr) return std::nullopt;
  NetPath p;
  for (const onnx::Layer& l : net.layers) {
    const std::optional<Op> op = layer_op(l);
    const Kernel* k = op ? find_at_or_below(*op, mode, isa) : nullptr;
    if (op && k == nullptr) return std::nullopt;
    p.kernels.push_back(k);
    const Kernel* bwd = nullptr;
    if (loss != Loss::none && l.kind == onnx::LayerKind::dense) {
      bwd = find_at_or_below(Op::dense_bwd, mode, isa);
      if (bwd == nullptr) return std::nullopt;
    }
    p.dense_bwd.push_back(bwd);
  }
  if (loss != Loss::none) {
    p.loss = find_at_or_below(loss == Loss::mse ? Op::mse : Op::xent, mode, isa);
    if (p.loss == nullptr) return std::nullopt;
  }
  p.info.name = fmt::format("{}/{}", mode_name(mode), isa_name(isa));
  p.info.mode = mode;
  p.info.isa = isa;
  p.info.storage = dense->storage;
  return p;
}

}  // namespace

NetPath baseline_net_path(const onnx::Network& net, Loss loss) {
  std::optional<NetPath> best;
  for (Isa isa : kAllIsas)
    if (auto p = make_net_path(net, loss, Mode::f32, isa)) best = p;
  if (!best) throw std::runtime_error("no enabled f32 kernels for this network's layers");
  return *best;
}

std::vector<NetPath> low_precision_net_paths(const onnx::Network& net, Loss loss, const Options& o) {
  std::vector<NetPath> out;
  std::optional<NetPath> first;
  std::string names;
  for (Mode mode : {Mode::f16_f32acc, Mode::f16, Mode::bf16_f32acc}) {
    std::vector<NetPath> mode_paths;
    for (Isa isa : kAllIsas)
      if (auto p = make_net_path(net, loss, mode, isa)) mode_paths.push_back(*p);
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
      throw std::invalid_argument(
          fmt::format("--path {} is not a low-precision path this CPU runs for this network "
                      "(it runs {}).",
                      o.path_first, names));
    std::erase_if(out, [&](const NetPath& p) { return p.info.name == o.path_first; });
    out.insert(out.begin(), *first);
  }
  return out;
}

namespace {

TypedBuffer rounded(const onnx::Param& p, DType t) {
  TypedBuffer b(t, p.values.size());
  for (std::size_t i = 0; i < p.values.size(); ++i) b.set(i, double(p.values[i]));
  return b;
}

const void* offset(const TypedBuffer& b, std::size_t elems) { return b.at(elems); }
void* offset(TypedBuffer& b, std::size_t elems) { return const_cast<void*>(b.at(elems)); }

void widen_into(const TypedBuffer& b, std::size_t n, std::vector<double>& out, std::size_t& nonfinite) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = b.get(i);
    if (!std::isfinite(v)) ++nonfinite;
    out.push_back(v);
  }
}

}  // namespace

NetRunner::NetRunner(const onnx::Network& net, NetPath p, Loss loss, std::size_t max_rows, std::size_t max_batch,
                     unsigned threads)
    : net_(net), p_(std::move(p)), loss_(loss), threads_(threads) {
  const DType t = p_.info.storage;
  x_.resize(t, max_rows * net.features);
  const std::size_t out = net.layers.back().out;
  if (loss == Loss::mse) labels_.resize(t, max_rows * out);
  if (loss == Loss::xent) classes_.resize(max_rows);
  for (const onnx::Layer& l : net.layers) {
    y_.emplace_back(t, max_rows * l.out);
    w_.push_back(rounded(l.weight, t));
    b_.push_back(rounded(l.bias, t));
    const bool grads = loss != Loss::none;
    dx_.emplace_back(t, grads ? max_batch * l.in : 0);
    extra_.emplace_back(t, grads ? max_batch * l.in : 0);
    dw_.emplace_back(t, grads ? l.weight.values.size() : 0);
    db_.emplace_back(t, grads ? l.bias.values.size() : 0);
  }
  last_bw_ = net.layers.size() - 1;
  if (loss == Loss::xent && net.layers.back().kind == onnx::LayerKind::softmax && last_bw_ > 0) --last_bw_;
  dloss_.resize(t, loss != Loss::none ? max_batch * net.layers[last_bw_].out : 0);
  product_max_.assign(net.layers.size(), 0.0);
  for (const onnx::Layer& l : net.layers)
    if (l.kind == onnx::LayerKind::attention) {
      const std::size_t n = net.seq * l.out;
      for (TypedBuffer* b : {&q_, &k_, &v_, &dq_, &dk_, &dv_})
        if (b->size() < n) b->resize(t, n);
      if (scores_.size() < net.seq * net.seq) scores_.resize(t, net.seq * net.seq);
    }
}

/// One attention layer over rows r0 .. r0 + m - 1 (whole sequences): each sequence's q, k and v are copied out of
/// the [q | k | v] rows, the head runs (forward into y, or backward from dy into the [dq | dk | dv] rows of dx).
void NetRunner::attention(std::size_t l, std::size_t r0, std::size_t m, const void* dy, void* dx) {
  const onnx::Layer& layer = net_.layers[l];
  const std::size_t L = net_.seq, d = layer.out, es = dtype_size(p_.info.storage);
  const auto* in = static_cast<const unsigned char*>(input_of(l, r0));
  TypedBuffer* const parts[3] = {&q_, &k_, &v_};
  TypedBuffer* const grads[3] = {&dq_, &dk_, &dv_};
  const std::size_t part = d * es;  // bytes of one token's q (or k, or v)
  auto bytes = [](TypedBuffer* b) { return static_cast<unsigned char*>(b->data()); };
  for (std::size_t s0 = 0; s0 < m; s0 += L) {
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t k = 0; k < 3; ++k) std::copy_n(in + ((s0 + t) * 3 + k) * part, part, bytes(parts[k]) + t * part);
    AttentionArgs a{L,       d,       layer.causal, q_.data(), k_.data(), v_.data(), nullptr,
                    nullptr, nullptr, nullptr,      nullptr,   nullptr,   threads_};
    if (dy == nullptr) {
      a.o = offset(y_[l], (r0 + s0) * d);
      a.scores = scores_.data();
    } else {
      a.dout = static_cast<const unsigned char*>(dy) + s0 * part;
      a.dq = dq_.data();
      a.dk = dk_.data();
      a.dv = dv_.data();
    }
    p_.kernels[l]->attention(a);
    if (dy == nullptr) {
      // S as stored; the postscale product is S / c (c = 1/√d), within one rounding of the stored T.
      // Under the causal mask only the products the mask keeps (j <= i).
      double mx = 0;
      for (std::size_t i = 0; i < L; ++i)
        for (std::size_t j = 0; j <= (layer.causal ? i : L - 1); ++j) {
          const double s = std::abs(scores_.get(i * L + j));
          if (std::isfinite(s)) mx = std::max(mx, s);
        }
      product_max_[l] = std::max(product_max_[l], layer.prescale ? mx : mx * std::sqrt(double(d)));
      continue;
    }
    if (dx == nullptr) continue;
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t k = 0; k < 3; ++k)
        std::copy_n(bytes(grads[k]) + t * part, part, static_cast<unsigned char*>(dx) + ((s0 + t) * 3 + k) * part);
  }
}

void NetRunner::set_params(const onnx::Network& w) {
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const onnx::Layer& x = w.layers[l];
    for (std::size_t i = 0; i < x.weight.values.size(); ++i) w_[l].set(i, double(x.weight.values[i]));
    for (std::size_t i = 0; i < x.bias.values.size(); ++i) b_[l].set(i, double(x.bias.values[i]));
  }
}

void NetRunner::load(const Table& x, const Table* y, std::size_t row0, std::size_t m) {
  m_ = m;
  const std::size_t d = net_.features;
  for (std::size_t c = 0; c < d; ++c)
    for (std::size_t r = 0; r < m; ++r) x_.set(r * d + c, x.at(row0 + r, c));
  if (y == nullptr) return;
  if (loss_ == Loss::mse) {
    for (std::size_t c = 0; c < y->cols(); ++c)
      for (std::size_t r = 0; r < m; ++r) labels_.set(r * y->cols() + c, y->at(row0 + r, c));
  } else if (loss_ == Loss::xent) {
    for (std::size_t r = 0; r < m; ++r) classes_[r] = std::int32_t(y->at(row0 + r, 0));
  }
}

const void* NetRunner::input_of(std::size_t l, std::size_t r0) const {
  return l == 0 ? offset(x_, r0 * net_.features) : offset(y_[l - 1], r0 * net_.layers[l - 1].out);
}

void NetRunner::forward() {
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const onnx::Layer& l = net_.layers[i];
    const void* in = input_of(i, 0);
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
        k->norm(
            NormArgs{m_, l.out, in, w, b, float(l.epsilon), y, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr});
        break;
      case onnx::LayerKind::softmax:
        k->softmax(SoftmaxArgs{m_, l.out, in, y});
        break;
      case onnx::LayerKind::add:
        add_rounded(in, input_of(l.skip, 0), y, m_ * l.out);
        break;
      case onnx::LayerKind::attention:
        attention(i, 0, m_, nullptr, nullptr);
        break;
      default:
        elementwise(l.kind, in, y, m_ * l.out);
    }
  }
}

/// out = a + b, each element added in f32 and rounded once to the storage type (a residual Add, and the sum of
/// two gradients of one value); out may be a or b.
void NetRunner::add_rounded(const void* a, const void* b, void* out, std::size_t n) const {
  const DType t = p_.info.storage;
  for (std::size_t i = 0; i < n; ++i)
    halfmap::store(t, out, i, double(float(halfmap::load(t, a, i)) + float(halfmap::load(t, b, i))));
}

void NetRunner::elementwise(onnx::LayerKind kind, const void* in, void* out, std::size_t n) const {
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

/// relu, sigmoid, tanh and softmax backward from the stored x or y, in f32, each dx rounded once:
/// relu dy·[x > 0]; sigmoid dy·y·(1 − y); tanh dy·(1 − y²); softmax y_j·(dy_j − Σ_k dy_k·y_k) per row.
void NetRunner::elementwise_backward(std::size_t l, std::size_t r0, std::size_t m, const void* dy, void* dx) const {
  const DType t = p_.info.storage;
  const onnx::Layer& layer = net_.layers[l];
  const std::size_t w = layer.out;
  const void* x = input_of(l, r0);
  const void* y = offset(y_[l], r0 * w);
  for (std::size_t r = 0; r < m; ++r) {
    float dot = 0;
    if (layer.kind == onnx::LayerKind::softmax)
      for (std::size_t c = 0; c < w; ++c)
        dot += float(halfmap::load(t, dy, r * w + c)) * float(halfmap::load(t, y, r * w + c));
    for (std::size_t c = 0; c < w; ++c) {
      const std::size_t i = r * w + c;
      const float g = float(halfmap::load(t, dy, i)), yv = float(halfmap::load(t, y, i));
      float d = g;
      switch (layer.kind) {
        case onnx::LayerKind::relu:
          d = float(halfmap::load(t, x, i)) > 0 ? g : 0.0f;
          break;
        case onnx::LayerKind::sigmoid:
          d = g * yv * (1.0f - yv);
          break;
        case onnx::LayerKind::tanh:
          d = g * (1.0f - yv * yv);
          break;
        case onnx::LayerKind::softmax:
          d = yv * (g - dot);
          break;
        default:
          break;
      }
      halfmap::store(t, dx, i, double(d));
    }
  }
}

double NetRunner::loss(std::size_t r0, std::size_t m, float S) {
  const std::size_t out = net_.layers.back().out;
  if (loss_ == Loss::mse)
    return p_.loss->loss(LossArgs{m * out, offset(y_.back(), r0 * out), offset(labels_, r0 * out), S, dloss_.data()});
  // Under xent a final softmax is the loss's own: the logits are its input, as the frameworks' fused loss.
  const std::size_t w = net_.layers[last_bw_].out;
  return p_.loss->xent(XentArgs{m, w, offset(y_[last_bw_], r0 * w), classes_.data() + r0, S, nullptr, dloss_.data()});
}

double NetRunner::backward(std::size_t r0, std::size_t m, float S) {
  bm_ = m;
  const double loss = this->loss(r0, m, S);
  has_extra_.assign(net_.layers.size(), false);
  for (std::size_t i = last_bw_ + 1; i-- > 0;) {
    const onnx::Layer& l = net_.layers[i];
    const void* dy = i == last_bw_ ? dloss_.data() : dx_[i + 1].data();
    void* dx = i == 0 ? nullptr : dx_[i].data();
    if (l.kind == onnx::LayerKind::add) {
      // Both operands get dy: the previous layer's output here, the skip's into its extra term (added to that
      // value's gradient when the backward reaches it).
      const std::size_t n = m * l.out;
      if (dx != nullptr)
        std::copy_n(static_cast<const unsigned char*>(dy), n * dtype_size(p_.info.storage),
                    static_cast<unsigned char*>(dx));
      if (l.skip > 0) {
        if (has_extra_[l.skip]) {
          add_rounded(extra_[l.skip].data(), dy, extra_[l.skip].data(), n);
        } else {
          std::copy_n(static_cast<const unsigned char*>(dy), n * dtype_size(p_.info.storage),
                      static_cast<unsigned char*>(extra_[l.skip].data()));
          has_extra_[l.skip] = true;
        }
      }
      if (dx != nullptr && has_extra_[i]) add_rounded(dx, extra_[i].data(), dx, m * l.in);
      continue;
    }
    const void* x = input_of(i, r0);
    const void* w = w_[i].size() ? w_[i].data() : nullptr;
    const void* b = b_[i].size() ? b_[i].data() : nullptr;
    switch (l.kind) {
      case onnx::LayerKind::dense:
        p_.dense_bwd[i]->dense_bwd(DenseBwdArgs{m, l.out, l.in, x, w, dy, dx, dw_[i].data(),
                                                db_[i].size() ? db_[i].data() : nullptr, threads_});
        break;
      case onnx::LayerKind::gelu:
      case onnx::LayerKind::gelu_tanh:
        if (dx != nullptr) p_.kernels[i]->gelu(GeluArgs{m * l.out, x, nullptr, dy, dx});
        break;
      case onnx::LayerKind::layernorm:
      case onnx::LayerKind::rmsnorm: {
        // The kernel's backward needs a dx; the first layer's input gradient goes to scratch of its own size.
        TypedBuffer scratch;
        if (dx == nullptr) {
          scratch.resize(p_.info.storage, m * l.in);
          dx = scratch.data();
        }
        p_.kernels[i]->norm(NormArgs{m, l.out, x, w, b, float(l.epsilon), nullptr, nullptr, nullptr, dy, dx,
                                     dw_[i].size() ? dw_[i].data() : nullptr, db_[i].size() ? db_[i].data() : nullptr});
        break;
      }
      case onnx::LayerKind::attention:
        attention(i, r0, m, dy, dx);
        break;
      default:
        if (dx != nullptr) elementwise_backward(i, r0, m, dy, dx);
    }
    // This layer's input also feeds a residual Add further on: its gradient is the sum of both.
    if (dx != nullptr && has_extra_[i]) add_rounded(dx, extra_[i].data(), dx, m * l.in);
  }
  return loss;
}

std::vector<double> NetRunner::param_grads(std::size_t l, std::size_t& nonfinite) const {
  std::vector<double> g;
  if (l > last_bw_) return g;
  widen_into(dw_[l], dw_[l].size(), g, nonfinite);
  widen_into(db_[l], db_[l].size(), g, nonfinite);
  return g;
}

std::vector<double> NetRunner::input_grads(std::size_t l, std::size_t& nonfinite) const {
  std::vector<double> g;
  if (l == 0 || l > last_bw_) return g;
  widen_into(dx_[l], bm_ * net_.layers[l].in, g, nonfinite);
  return g;
}

}  // namespace halfmap::diagnose
