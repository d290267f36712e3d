// The portable scalar kernels (isa ref): the f32 reference; the portable models of f16_f32acc and bf16_f32acc
// (f32 arithmetic on widened inputs, sequential sums, one rounding at each output); and the f16 model (mode
// f16_model: every operation rounded to fp16, strictly sequential, fused multiply-add; src/models/).
// Contracts: registry.hpp.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "kernels/common/fp8_convert.hpp"
#include "kernels/common/fp8_modes.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/attention.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/ref/ops.hpp"

namespace halfmap::paths::ref {
namespace {

// ---- reductions

/// Sequential f32 accumulation over inputs widened by `widen`; the result is rounded to the mode's output.
template <class Elem, Op kOp, Mode kMode, class Widen>
float f32acc_scalar(const void* xv, const void* yv, std::size_t n, Widen widen) {
  const auto* x = static_cast<const Elem*>(xv);
  const auto* y = static_cast<const Elem*>(yv);
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float xi = widen(x[i]);
    if constexpr (kOp == Op::sum) acc += xi;
    if constexpr (kOp == Op::sumsq) acc += xi * xi;  // products of f16/bf16 values are exact in f32
    if constexpr (kOp == Op::dot) acc += xi * widen(y[i]);
  }
  return detail::f32acc_finish(kMode, acc);
}

template <Op kOp>
float f32_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<float, kOp, Mode::f32>(x, y, n, [](float v) { return v; });
}
template <Op kOp>
float f16_f32acc_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<f16, kOp, Mode::f16_f32acc>(x, y, n, [](f16 v) { return to_f32(v); });
}
template <Op kOp>
float bf16_f32acc_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<bf16, kOp, Mode::bf16_f32acc>(x, y, n, [](bf16 v) { return to_f32(v); });
}
template <Op kOp>
float f16_model_ref(const void* x, const void* y, std::size_t n) {
  return to_f32(f16_model_reduce(kOp, static_cast<const f16*>(x), static_cast<const f16*>(y), n, 1,
                                 FmaKind::fused));
}

// ---- dense layers

/// out (rows × cols) = A · B in f32, sequential over the inner index. The operands are widened once, and the j loop
/// is innermost: the outputs of a row advance together, each still summing a(i,p)·b(p,j) over p in order from +0.
template <class Elem>
void f32_gemm(std::size_t rows, std::size_t cols, std::size_t inner, const Elem* a, std::size_t a_rs,
              std::size_t a_cs, const Elem* b, std::size_t b_rs, std::size_t b_cs, float* out) {
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

template <Op o, Mode m, class Fn>
constexpr Kernel k(Fn fn, FmaKind fma = FmaKind::none) {
  return entry<o, m, Isa::ref>(fn, {1, fma});
}
constexpr FmaKind kModelFma = FmaKind::fused;  // the f16 model (mode f16_model): sequential, fused

// Attention (kernels/common/attention.hpp) composed of the dense and softmax kernels above, mode by mode.
using detail::attention;
using detail::AttentionKernels;
constexpr AttentionKernels kAttF32{Mode::f32, f32acc_dense_fwd<float>, f32acc_dense_bwd<float>,
                                   f32acc_softmax<float, true>, 1, FmaKind::none};
constexpr AttentionKernels kAttF16F32Acc{Mode::f16_f32acc, f32acc_dense_fwd<f16>, f32acc_dense_bwd<f16>,
                                         f32acc_softmax<f16, true>, 1, FmaKind::none};
constexpr AttentionKernels kAttF16Model{Mode::f16_model, f16_model_fwd, f16_model_bwd,
                                        f16_model_softmax_ref, 1, kModelFma};
constexpr AttentionKernels kAttBf16{Mode::bf16_f32acc, f32acc_dense_fwd<bf16>, f32acc_dense_bwd<bf16>,
                                    f32acc_softmax<bf16, true>, 1, FmaKind::none};

const Kernel kList[] = {
    k<Op::sum, Mode::f32>(f32_ref<Op::sum>),
    k<Op::sumsq, Mode::f32>(f32_ref<Op::sumsq>),
    k<Op::maxabs, Mode::f32>(detail::maxabs_reduce<Tag, std::uint32_t, DType::f32>),
    k<Op::dot, Mode::f32>(f32_ref<Op::dot>),
    k<Op::sum, Mode::f16_f32acc>(f16_f32acc_ref<Op::sum>),
    k<Op::sumsq, Mode::f16_f32acc>(f16_f32acc_ref<Op::sumsq>),
    k<Op::maxabs, Mode::f16_f32acc>(detail::maxabs_reduce<Tag, std::uint16_t, DType::f16>),
    k<Op::dot, Mode::f16_f32acc>(f16_f32acc_ref<Op::dot>),
    k<Op::sum, Mode::f16_model>(f16_model_ref<Op::sum>, kModelFma),
    k<Op::sumsq, Mode::f16_model>(f16_model_ref<Op::sumsq>, kModelFma),
    k<Op::maxabs, Mode::f16_model>(f16_model_ref<Op::maxabs>, kModelFma),
    k<Op::dot, Mode::f16_model>(f16_model_ref<Op::dot>, kModelFma),
    k<Op::sum, Mode::bf16_f32acc>(bf16_f32acc_ref<Op::sum>),
    k<Op::sumsq, Mode::bf16_f32acc>(bf16_f32acc_ref<Op::sumsq>),
    k<Op::maxabs, Mode::bf16_f32acc>(detail::maxabs_reduce<Tag, std::uint16_t, DType::bf16>),
    k<Op::dot, Mode::bf16_f32acc>(bf16_f32acc_ref<Op::dot>),

    k<Op::dense_fwd, Mode::f32>(f32acc_dense_fwd<float>),
    k<Op::dense_bwd, Mode::f32>(f32acc_dense_bwd<float>),
    k<Op::dense_fwd, Mode::f16_f32acc>(f32acc_dense_fwd<f16>),
    k<Op::dense_bwd, Mode::f16_f32acc>(f32acc_dense_bwd<f16>),
    k<Op::dense_fwd, Mode::f16_model>(f16_model_fwd, kModelFma),
    k<Op::dense_bwd, Mode::f16_model>(f16_model_bwd, kModelFma),
    k<Op::dense_fwd, Mode::bf16_f32acc>(f32acc_dense_fwd<bf16>),
    k<Op::dense_bwd, Mode::bf16_f32acc>(f32acc_dense_bwd<bf16>),

    k<Op::mse, Mode::f32>(f32acc_mse<float>),
    k<Op::softmax, Mode::f32>(f32acc_softmax<float, true>),
    k<Op::softmax_naive, Mode::f32>(f32acc_softmax<float, false>),
    k<Op::xent, Mode::f32>(f32acc_xent<float>),
    k<Op::mse, Mode::f16_f32acc>(f32acc_mse<f16>),
    k<Op::softmax, Mode::f16_f32acc>(f32acc_softmax<f16, true>),
    k<Op::softmax_naive, Mode::f16_f32acc>(f32acc_softmax<f16, false>),
    k<Op::xent, Mode::f16_f32acc>(f32acc_xent<f16>),
    k<Op::mse, Mode::f16_model>(f16_model_mse_ref, kModelFma),
    k<Op::softmax, Mode::f16_model>(f16_model_softmax_ref, kModelFma),
    k<Op::softmax_naive, Mode::f16_model>(f16_model_softmax_naive_ref, kModelFma),
    k<Op::xent, Mode::f16_model>(f16_model_xent_ref, kModelFma),
    k<Op::mse, Mode::bf16_f32acc>(f32acc_mse<bf16>),
    k<Op::softmax, Mode::bf16_f32acc>(f32acc_softmax<bf16, true>),
    k<Op::softmax_naive, Mode::bf16_f32acc>(f32acc_softmax<bf16, false>),
    k<Op::xent, Mode::bf16_f32acc>(f32acc_xent<bf16>),

    k<Op::layernorm, Mode::f32>(f32acc_norm<float, false>),
    k<Op::rmsnorm, Mode::f32>(f32acc_norm<float, true>),
    k<Op::layernorm, Mode::f16_f32acc>(f32acc_norm<f16, false>),
    k<Op::rmsnorm, Mode::f16_f32acc>(f32acc_norm<f16, true>),
    k<Op::layernorm, Mode::f16_model>(f16_model_layernorm_ref, kModelFma),
    k<Op::rmsnorm, Mode::f16_model>(f16_model_rmsnorm_ref, kModelFma),
    k<Op::layernorm, Mode::bf16_f32acc>(f32acc_norm<bf16, false>),
    k<Op::rmsnorm, Mode::bf16_f32acc>(f32acc_norm<bf16, true>),

    k<Op::gelu, Mode::f32>(f32acc_gelu<float, false>),
    k<Op::gelu_tanh, Mode::f32>(f32acc_gelu<float, true>),
    k<Op::gelu, Mode::f16_f32acc>(f32acc_gelu<f16, false>),
    k<Op::gelu_tanh, Mode::f16_f32acc>(f32acc_gelu<f16, true>),
    k<Op::gelu, Mode::f16_model>(f16_model_gelu_ref, kModelFma),
    k<Op::gelu_tanh, Mode::f16_model>(f16_model_gelu_tanh_ref, kModelFma),
    k<Op::gelu, Mode::bf16_f32acc>(f32acc_gelu<bf16, false>),
    k<Op::gelu_tanh, Mode::bf16_f32acc>(f32acc_gelu<bf16, true>),
    k<Op::attention_prescale, Mode::f32>(attention<kAttF32, true>),
    k<Op::attention_postscale, Mode::f32>(attention<kAttF32, false>),
    k<Op::attention_prescale, Mode::f16_f32acc>(attention<kAttF16F32Acc, true>),
    k<Op::attention_postscale, Mode::f16_f32acc>(attention<kAttF16F32Acc, false>),
    k<Op::attention_prescale, Mode::f16_model>(attention<kAttF16Model, true>, kModelFma),
    k<Op::attention_postscale, Mode::f16_model>(attention<kAttF16Model, false>, kModelFma),
    k<Op::attention_prescale, Mode::bf16_f32acc>(attention<kAttBf16, true>),
    k<Op::attention_postscale, Mode::bf16_f32acc>(attention<kAttBf16, false>),
};

// fp8 conversions (kernels/common/fp8_convert.hpp) on this path's 32-bit integer lanes.
const Fp8Conversion kFp8List[] = {
    detail::fp8_conversion<I32, Fp8::e4m3, Isa::ref>(),
    detail::fp8_conversion<I32, Fp8::e5m2, Isa::ref>(),
};
constexpr auto kMxList = detail::mx_conversions_of<I32, Isa::ref>();

// The scaled fp8 modes (kernels/common/fp8_modes.hpp): this path's fp8 conversions feeding its f32 kernels.
constexpr detail::ScaledParts kScaled = detail::scaled_parts<I32>(
    f32_ref<Op::sum>, f32_ref<Op::sumsq>, detail::maxabs_reduce<Tag, std::uint32_t, DType::f32>, f32_ref<Op::dot>,
    f32acc_dense_fwd<float>, f32acc_dense_bwd<float>, f32acc_mse<float>, f32acc_softmax<float, true>);
constexpr auto kScaledList = scaled_kernels<kScaled, Isa::ref>();

}  // namespace

PathLists lists() { return {kList, kScaledList, kFp8List, kMxList}; }

}  // namespace halfmap::paths::ref
