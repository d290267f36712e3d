// The portable scalar kernels (isa ref): the f32 reference; the portable models of f16_f32acc and bf16_f32acc
// (f32 arithmetic on widened inputs, sequential sums, one rounding at each output); and the f16 model (mode
// f16_model: every operation rounded to fp16, strictly sequential, fused multiply-add; src/models/).
// Contracts: registry.hpp.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "halfmap/models.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/common/scalar_storage.hpp"
#include "kernels/ref/ops.hpp"

namespace halfmap::paths::ref {
namespace {

using detail::dtype_of;
using detail::give;
using detail::mode_of;
using detail::narrow;
using detail::widen;

// ---- reductions

/// Sequential f32 accumulation over the widened inputs; the result is rounded to the mode's output.
template <class Elem, Op kOp>
float f32acc_ref(const void* xv, const void* yv, std::size_t n) {
  const auto* x = static_cast<const Elem*>(xv);
  const auto* y = static_cast<const Elem*>(yv);
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float xi = widen(x[i]);
    if constexpr (kOp == Op::sum) acc += xi;
    if constexpr (kOp == Op::sumsq) acc += xi * xi;  // products of f16/bf16 values are exact in f32
    if constexpr (kOp == Op::dot) acc += xi * widen(y[i]);
  }
  return detail::f32acc_finish(mode_of<Elem>(), acc);
}

template <Op kOp>
float f16_model_ref(const void* x, const void* y, std::size_t n) {
  return to_f32(f16_model_reduce(kOp, static_cast<const f16*>(x), static_cast<const f16*>(y), n, 1, FmaKind::fused));
}

// ---- dense layers

/// out (rows × cols) = A · B in f32, sequential over the inner index. The operands are widened once, and the j loop
/// is innermost: the outputs of a row advance together, each still summing a(i,p)·b(p,j) over p in order from +0.
template <class Elem>
void f32_gemm(std::size_t rows, std::size_t cols, std::size_t inner, const Elem* a, std::size_t a_rs, std::size_t a_cs,
              const Elem* b, std::size_t b_rs, std::size_t b_cs, float* out) {
  std::vector<float> wa(rows * inner), wb(inner * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t p = 0; p < inner; ++p) wa[i * inner + p] = widen(a[i * a_rs + p * a_cs]);
  }
  for (std::size_t p = 0; p < inner; ++p) {
    for (std::size_t j = 0; j < cols; ++j) wb[p * cols + j] = widen(b[p * b_rs + j * b_cs]);
  }
  for (std::size_t i = 0; i < rows; ++i) {
    float* row = out + i * cols;
    for (std::size_t j = 0; j < cols; ++j) row[j] = 0.0f;
    for (std::size_t p = 0; p < inner; ++p) {
      const float av = wa[i * inner + p];
      const float* brow = &wb[p * cols];
      for (std::size_t j = 0; j < cols; ++j) row[j] = row[j] + av * brow[j];
    }
  }
}

template <class Elem>
void f32acc_dense_fwd(const DenseArgs& d) {
  const auto* x = static_cast<const Elem*>(d.x);
  const auto* w = static_cast<const Elem*>(d.w);
  const auto* b = static_cast<const Elem*>(d.b);
  auto* y = static_cast<Elem*>(d.y);
  std::vector<float> acc(d.m * d.n);
  f32_gemm(d.m, d.n, d.k, x, d.k, 1, w, d.n, 1, acc.data());
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; ++j) {
      float v = b != nullptr ? acc[i * d.n + j] + widen(b[j]) : acc[i * d.n + j];
      if (d.act == Act::relu) v = v < 0.0f ? 0.0f : v;
      y[i * d.n + j] = narrow<Elem>(v);
    }
  }
}

template <class Elem>
void f32acc_dense_bwd(const DenseBwdArgs& d) {
  const auto* x = static_cast<const Elem*>(d.x);
  const auto* w = static_cast<const Elem*>(d.w);
  const auto* dy = static_cast<const Elem*>(d.dy);
  std::vector<float> acc;
  auto store = [&](void* out, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) static_cast<Elem*>(out)[i] = narrow<Elem>(acc[i]);
  };
  if (d.dx != nullptr) {
    acc.assign(d.m * d.k, 0.0f);
    f32_gemm(d.m, d.k, d.n, dy, d.n, 1, w, 1, d.n, acc.data());
    store(d.dx, d.m * d.k);
  }
  if (d.dw != nullptr) {
    acc.assign(d.k * d.n, 0.0f);
    f32_gemm(d.k, d.n, d.m, x, 1, d.k, dy, d.n, 1, acc.data());
    store(d.dw, d.k * d.n);
  }
  if (d.db != nullptr) {
    acc.assign(d.n, 0.0f);
    for (std::size_t i = 0; i < d.m; ++i) {
      for (std::size_t j = 0; j < d.n; ++j) acc[j] += widen(dy[i * d.n + j]);
    }
    store(d.db, d.n);
  }
}

void f16_model_fwd(const DenseArgs& d) { f16_model_dense_fwd(d, FmaKind::fused); }
void f16_model_bwd(const DenseBwdArgs& d) { f16_model_dense_bwd(d, FmaKind::fused); }

// ---- losses and softmax

template <class Elem>
float f32acc_mse(const LossArgs& a) {
  const auto* p = static_cast<const Elem*>(a.p);
  const auto* y = static_cast<const Elem*>(a.y);
  auto* dp = static_cast<Elem*>(a.dp);
  const float c = (2.0f * a.loss_scale) / float(a.n);
  float sum = 0.0f;
  for (std::size_t i = 0; i < a.n; ++i) {
    const float d = widen(p[i]) - widen(y[i]);
    sum += d * d;
    if (dp != nullptr) dp[i] = narrow<Elem>(c * d);
  }
  return detail::f32acc_finish(mode_of<Elem>(), sum / float(a.n));
}

template <class Elem>
void f32acc_softmax_row(const Elem* x, Elem* y, std::size_t cols, bool stable, std::vector<float>& e) {
  float m = 0.0f;
  if (stable) {
    m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (std::size_t j = 0; j < cols; ++j) {
      const float v = widen(x[j]);
      nan = nan || v != v;
      m = v > m ? v : m;
    }
    if (nan) m = std::numeric_limits<float>::quiet_NaN();
  }
  e.resize(cols);
  float s = 0.0f;
  for (std::size_t j = 0; j < cols; ++j) {
    e[j] = exp_f32(stable ? widen(x[j]) - m : widen(x[j]));
    s += e[j];
  }
  for (std::size_t j = 0; j < cols; ++j) y[j] = narrow<Elem>(e[j] / s);
}

template <class Elem, bool kStable>
void f32acc_softmax(const SoftmaxArgs& a) {
  std::vector<float> e;
  for (std::size_t i = 0; i < a.rows; ++i) {
    f32acc_softmax_row(static_cast<const Elem*>(a.x) + i * a.cols, static_cast<Elem*>(a.y) + i * a.cols, a.cols,
                       kStable, e);
  }
}

template <class Elem>
float f32acc_xent(const XentArgs& a) {
  std::vector<float> e;
  std::vector<Elem> prow(a.cols), plab(a.rows);
  const float c = a.loss_scale / float(a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* x = static_cast<const Elem*>(a.logits) + i * a.cols;
    Elem* p = a.probs != nullptr ? static_cast<Elem*>(a.probs) + i * a.cols : prow.data();
    f32acc_softmax_row(x, p, a.cols, true, e);
    const auto label = static_cast<std::size_t>(a.labels[i]);
    plab[i] = p[label];
    if (a.dlogits == nullptr) continue;
    Elem* dl = static_cast<Elem*>(a.dlogits) + i * a.cols;
    for (std::size_t j = 0; j < a.cols; ++j) dl[j] = narrow<Elem>(c * (widen(p[j]) - (j == label ? 1.0f : 0.0f)));
  }
  return detail::xent_loss(mode_of<Elem>(), dtype_of<Elem>(), plab.data(), a.rows);
}

// ---- normalisation

/// Sequential f32 layernorm / rmsnorm (NormArgs), each output rounded once.
template <class Elem, bool kRms>
void f32acc_norm(const NormArgs& a) {
  const std::size_t cols = a.cols;
  const auto* x = static_cast<const Elem*>(a.x);
  const auto* gm = static_cast<const Elem*>(a.gamma);
  const auto* bt = kRms ? nullptr : static_cast<const Elem*>(a.beta);
  const auto* dy = static_cast<const Elem*>(a.dy);
  auto gamma = [&](std::size_t j) { return gm != nullptr ? widen(gm[j]) : 1.0f; };
  auto beta = [&](std::size_t j) { return bt != nullptr ? widen(bt[j]) : 0.0f; };
  std::vector<float> xh(cols), g(cols), dg(cols), db(cols);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* xi = x + i * cols;
    float mu = 0.0f;
    if (!kRms) {
      for (std::size_t j = 0; j < cols; ++j) mu += widen(xi[j]);
      mu /= float(cols);
    }
    float v = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) {
      const float d = widen(xi[j]) - mu;
      v = std::fma(d, d, v);
    }
    v /= float(cols);
    const float r = 1.0f / std::sqrt(v + a.eps);
    if (a.mean != nullptr) a.mean[i] = mu;
    if (a.var != nullptr) a.var[i] = v;
    for (std::size_t j = 0; j < cols; ++j) xh[j] = (widen(xi[j]) - mu) * r;
    if (a.y != nullptr) {
      Elem* yi = static_cast<Elem*>(a.y) + i * cols;
      for (std::size_t j = 0; j < cols; ++j) {
        yi[j] = narrow<Elem>(kRms ? xh[j] * gamma(j) : std::fma(xh[j], gamma(j), beta(j)));
      }
    }
    if (dy == nullptr) continue;
    const Elem* dyi = dy + i * cols;
    float ga = 0.0f, gb = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) {
      g[j] = widen(dyi[j]) * gamma(j);
      ga += g[j];
      gb = std::fma(g[j], xh[j], gb);
    }
    ga = kRms ? 0.0f : ga / float(cols);
    gb /= float(cols);
    Elem* dxi = static_cast<Elem*>(a.dx) + i * cols;
    for (std::size_t j = 0; j < cols; ++j) {
      dxi[j] = narrow<Elem>(std::fma(xh[j], -gb, g[j] - ga) * r);
      dg[j] = std::fma(widen(dyi[j]), xh[j], dg[j]);
      db[j] += widen(dyi[j]);
    }
  }
  if (dy == nullptr) return;
  for (std::size_t j = 0; j < cols; ++j) {
    if (a.dgamma != nullptr) static_cast<Elem*>(a.dgamma)[j] = narrow<Elem>(dg[j]);
    if (!kRms && a.dbeta != nullptr) static_cast<Elem*>(a.dbeta)[j] = narrow<Elem>(db[j]);
  }
}

// ---- GELU

/// GELU in f32 (GeluArgs), the steps of kernels/common/gelu.hpp on scalars, each output rounded once.
template <class Elem, bool kTanh>
void f32acc_gelu(const GeluArgs& a) {
  namespace c = detail::gelu_consts;
  const auto* x = static_cast<const Elem*>(a.x);
  const auto* dy = static_cast<const Elem*>(a.dy);
  for (std::size_t i = 0; i < a.n; ++i) {
    const float xv = widen(x[i]), h = xv * 0.5f;
    float fa, d = 0.0f;
    if constexpr (kTanh) {
      const float x2 = xv * xv;
      const float t = tanh_f32(c::kK0 * std::fma(c::kC, x2 * xv, xv));
      fa = 1.0f + t;
      if (dy != nullptr) d = std::fma(h, (1.0f - t * t) * (c::kK0 * std::fma(c::kC3, x2, 1.0f)), fa * 0.5f);
    } else {
      const float z = xv * c::kK1;
      fa = 1.0f + erf_f32(z);
      if (dy != nullptr) d = std::fma(xv * c::kK2, exp_f32(0.0f - z * z), fa * 0.5f);
    }
    if (a.y != nullptr) static_cast<Elem*>(a.y)[i] = narrow<Elem>(h * fa);
    if (dy != nullptr) static_cast<Elem*>(a.dx)[i] = narrow<Elem>(widen(dy[i]) * d);
  }
}

void f16_model_gelu_ref(const GeluArgs& a) { f16_model_gelu(a, false, FmaKind::fused); }
void f16_model_gelu_tanh_ref(const GeluArgs& a) { f16_model_gelu(a, true, FmaKind::fused); }

void f16_model_layernorm_ref(const NormArgs& a) { f16_model_norm(a, false, 1, FmaKind::fused); }
void f16_model_rmsnorm_ref(const NormArgs& a) { f16_model_norm(a, true, 1, FmaKind::fused); }

float f16_model_mse_ref(const LossArgs& a) { return f16_model_mse(a, 1, FmaKind::fused); }
void f16_model_softmax_ref(const SoftmaxArgs& a) { f16_model_softmax(a, true, 1); }
void f16_model_softmax_naive_ref(const SoftmaxArgs& a) { f16_model_softmax(a, false, 1); }
float f16_model_xent_ref(const XentArgs& a) { return f16_model_xent(a, 1); }

/// The ref path's traits (kernels/common/rows.hpp): no vectors, its fp8 and MX conversions on one 32-bit lane.
struct Traits : detail::PathTypes<Isa::ref, Tag> {
  using Conversions = detail::IntegerConversions<I32, kIsa>;
};

/// An f32-computing mode on storage Elem (float, f16, bf16): the sequential f32 kernels above.
template <class Elem>
struct ScalarF32AccRows {
  using Bits = std::conditional_t<sizeof(Elem) == 4, std::uint32_t, std::uint16_t>;
  static constexpr Mode kMode = mode_of<Elem>();
  static constexpr Order order(Op) { return {}; }
  // clang-format off
  static constexpr detail::ModeKernels kKernels{
      give<Op::sum>(f32acc_ref<Elem, Op::sum>), give<Op::sumsq>(f32acc_ref<Elem, Op::sumsq>),
      give<Op::maxabs>(detail::maxabs_reduce<Tag, Bits, dtype_of<Elem>()>), give<Op::dot>(f32acc_ref<Elem, Op::dot>),
      give<Op::dense_fwd>(f32acc_dense_fwd<Elem>), give<Op::dense_bwd>(f32acc_dense_bwd<Elem>),
      give<Op::mse>(f32acc_mse<Elem>), give<Op::softmax>(f32acc_softmax<Elem, true>),
      give<Op::softmax_naive>(f32acc_softmax<Elem, false>), give<Op::xent>(f32acc_xent<Elem>),
      give<Op::layernorm>(f32acc_norm<Elem, false>), give<Op::rmsnorm>(f32acc_norm<Elem, true>),
      give<Op::gelu>(f32acc_gelu<Elem, false>), give<Op::gelu_tanh>(f32acc_gelu<Elem, true>)};
  // clang-format on
};

/// The f16 model (mode f16_model): every operation rounded to fp16, strictly sequential, fused multiply-add.
struct F16ModelRows {
  static constexpr Mode kMode = Mode::f16_model;
  static constexpr Order order(Op) { return {1, FmaKind::fused}; }
  // clang-format off
  static constexpr detail::ModeKernels kKernels{
      give<Op::sum>(f16_model_ref<Op::sum>), give<Op::sumsq>(f16_model_ref<Op::sumsq>),
      give<Op::maxabs>(f16_model_ref<Op::maxabs>), give<Op::dot>(f16_model_ref<Op::dot>),
      give<Op::dense_fwd>(f16_model_fwd), give<Op::dense_bwd>(f16_model_bwd),
      give<Op::mse>(f16_model_mse_ref), give<Op::softmax>(f16_model_softmax_ref),
      give<Op::softmax_naive>(f16_model_softmax_naive_ref), give<Op::xent>(f16_model_xent_ref),
      give<Op::layernorm>(f16_model_layernorm_ref), give<Op::rmsnorm>(f16_model_rmsnorm_ref),
      give<Op::gelu>(f16_model_gelu_ref), give<Op::gelu_tanh>(f16_model_gelu_tanh_ref)};
  // clang-format on
  // attention's δ: this mode's own dot (attention.hpp requires one)
  static constexpr detail::AttentionExtras kExtras{.f16_dot = f16_model_ref<Op::dot>};
};

}  // namespace

PathLists lists() {
  return detail::kPathLists<Traits, ScalarF32AccRows<float>, ScalarF32AccRows<f16>, F16ModelRows,
                            ScalarF32AccRows<bf16>>;
}

}  // namespace halfmap::paths::ref
