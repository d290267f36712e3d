// oneDNN peers, on halfmap's operands in place (same bits: IEEE f32 and bf16), every tensor plain row-major
// (format tag ab, as halfmap stores them):
//
//   onednn_f32_dense_fwd__peer   matmul Y = X·W (+ b), f32 X, W, b, Y (mode f32).
//   onednn_bf16_dense_fwd__peer  the same on bf16, f32 accumulation inside (mode bf16_f32acc, like halfmap's
//                                bf16_f32acc kernels). Its AVX512-BF16/AMX kernels flush subnormals whatever
//                                MXCSR says (vdpbf16ps reads subnormal inputs as zero; f32-to-bf16 conversion
//                                flushes subnormal results); MXCSR is left unchanged.
//   onednn_{f32,bf16}_softmax__peer  softmax_v2 forward (inference), algorithm softmax_accurate (the max
//                                subtracted first, halfmap's stable softmax) over axis 1 of rows × cols, with
//                                oneDNN's own exp.
//   onednn_{f32,bf16}_sum__peer     reduction_sum of the 1×n vector into 1×1 (f32 accumulation inside).
//   onednn_{f32,bf16}_sumsq__peer   reduction_norm_lp_power_p_sum with p = 2, eps = 0: Σ|x|², halfmap's sumsq
//                                (the L2 norm itself, reduction_norm_lp_sum, is its square root: no halfmap op).
//   onednn_{f32,bf16}_maxabs__peer  eltwise_abs into a scratch vector, then reduction_max: max|x| (reduction_max
//                                alone is max x, which no halfmap op computes).
//   onednn_{f32,bf16}_layernorm__peer  layer_normalization forward_training over axis 1 of rows × cols with
//                                use_scale | use_shift (γ, β in f32, widened exactly from bf16), its f32 mean and
//                                variance written to NormArgs::mean and var; the backward (prop_kind backward,
//                                hinted by that forward) for dx, dγ, dβ, the last two computed in f32 by oneDNN
//                                and rounded once to the storage type here. oneDNN 2.6 has no RMS variant of its
//                                layer normalisation: rmsnorm is listed as refused.
//   onednn_{f32,bf16}_attention_{prescale,postscale}__peer  one head composed of oneDNN primitives as a framework
//                                composes it, every intermediate a tensor of the storage type: eltwise_linear for
//                                the 1/√d (on Q before the product, or on the scores after it), matmul for Q·Kᵀ
//                                (Kᵀ a transposed view, format ba, of K in place), the causal mask written as -inf
//                                above the diagonal (masked_fill's exact step), softmax_v2 forward_training
//                                (softmax_accurate) and matmul for P·V; backward: matmul for dV = Pᵀ·dO and
//                                dP = dO·Vᵀ, softmax_v2 backward for dS, eltwise_linear for the 1/√d, matmul for
//                                dQ and dK. oneDNN has no attention primitive in 2.6.
//
// Per call: each primitive is created (oneDNN's primitive cache returns the JIT kernel of a seen shape) and run on
// a stream of this call. Threads: Debian's libdnnl uses OpenMP; omp_set_num_threads(1) is called on the calling
// thread before each use, since oneDNN sizes its parallel regions by that thread's omp_get_max_threads() and a
// new thread starts from the default. Act relu, which the sweep does not use, is applied after, on the stored Y.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

template <dt type>
void matmul(const DenseArgs& a) {
  omp_set_num_threads(1);
  const auto m = static_cast<dnnl::memory::dim>(a.m), n = static_cast<dnnl::memory::dim>(a.n),
             k = static_cast<dnnl::memory::dim>(a.k);
  const dnnl::memory::desc x_md({m, k}, type, tag::ab), w_md({k, n}, type, tag::ab), b_md({1, n}, type, tag::ab),
      y_md({m, n}, type, tag::ab);
  const dnnl::matmul::desc d = a.b != nullptr ? dnnl::matmul::desc(x_md, w_md, b_md, y_md)
                                              : dnnl::matmul::desc(x_md, w_md, y_md);
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(d, engine()));
  dnnl::stream stream(engine());
  // oneDNN only reads src, weights and bias: the const_casts never lead to a write.
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(x_md, engine(), const_cast<void*>(a.x))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(w_md, engine(), const_cast<void*>(a.w))},
      {DNNL_ARG_DST, dnnl::memory(y_md, engine(), a.y)}};
  if (a.b != nullptr) args.emplace(DNNL_ARG_BIAS, dnnl::memory(b_md, engine(), const_cast<void*>(a.b)));
  prim.execute(stream, args);
  stream.wait();
  if (a.act == Act::relu) {
    for (std::size_t i = 0; i < a.m * a.n; ++i) {
      if constexpr (type == dt::f32) {
        float& v = static_cast<float*>(a.y)[i];
        v = v < 0 ? 0.0f : v;
      } else {
        bf16& v = static_cast<bf16*>(a.y)[i];
        v = to_f32(v) < 0 ? bf16{} : v;
      }
    }
  }
}

/// A memory object over halfmap's buffer; oneDNN only reads a source, so the const_cast never leads to a write.
dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, engine(), const_cast<void*>(p));
}

template <dt type>
void softmax(const SoftmaxArgs& a) {
  omp_set_num_threads(1);
  const dnnl::memory::desc md({dnnl::memory::dim(a.rows), dnnl::memory::dim(a.cols)}, type, tag::ab);
  const dnnl::softmax_v2_forward prim(dnnl::softmax_v2_forward::primitive_desc(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md, md, 1),
      engine()));
  dnnl::stream stream(engine());
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(md, a.x)}, {DNNL_ARG_DST, dnnl::memory(md, engine(), a.y)}});
  stream.wait();
}

enum class Reduce { sum, sumsq, maxabs };

template <dt type, Reduce which>
float reduce(const void* x, const void*, std::size_t n) {
  omp_set_num_threads(1);
  const dnnl::memory::desc src({1, dnnl::memory::dim(n)}, type, tag::ab), dst({1, 1}, type, tag::ab);
  dnnl::stream stream(engine());
  dnnl::memory in = wrap(src, x);
  std::vector<std::uint16_t> scratch;  // |x|, for maxabs: 2 or 4 bytes per element
  if constexpr (which == Reduce::maxabs) {
    scratch.resize(n * (type == dt::f32 ? 2 : 1));
    const dnnl::memory abs(src, engine(), scratch.data());
    const dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_abs, src), engine()));
    prim.execute(stream, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, abs}});
    in = abs;
  }
  const dnnl::algorithm alg = which == Reduce::sum     ? dnnl::algorithm::reduction_sum
                              : which == Reduce::sumsq ? dnnl::algorithm::reduction_norm_lp_power_p_sum
                                                       : dnnl::algorithm::reduction_max;
  const dnnl::reduction prim(dnnl::reduction::primitive_desc(dnnl::reduction::desc(alg, src, dst, 2.0f, 0.0f),
                                                             engine()));
  std::uint32_t out = 0;
  prim.execute(stream, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, dnnl::memory(dst, engine(), &out)}});
  stream.wait();
  if constexpr (type == dt::f32) return std::bit_cast<float>(out);
  return to_f32(bf16{std::uint16_t(out)});
}

template <dt type>
void layernorm(const NormArgs& a) {
  omp_set_num_threads(1);
  using dim = dnnl::memory::dim;
  const dnnl::memory::desc md({dim(a.rows), dim(a.cols)}, type, tag::ab), stat_md({dim(a.rows)}, dt::f32, tag::a),
      ss_md({dim(a.cols)}, dt::f32, tag::a);
  auto widen = [&](const void* p, float fill) {
    std::vector<float> v(a.cols, fill);
    for (std::size_t j = 0; p != nullptr && j < a.cols; ++j) {
      v[j] = type == dt::f32 ? static_cast<const float*>(p)[j] : to_f32(static_cast<const bf16*>(p)[j]);
    }
    return v;
  };
  std::vector<float> gamma = widen(a.gamma, 1.0f), beta = widen(a.beta, 0.0f), mean(a.rows), var(a.rows);
  std::vector<std::uint32_t> y_scratch;  // y when the caller asks for the backward only
  void* y = a.y;
  if (y == nullptr) {
    y_scratch.resize(a.rows * a.cols);
    y = y_scratch.data();
  }
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const dnnl::layer_normalization_forward::primitive_desc fwd_pd(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, md, stat_md, a.eps, flags), engine());
  dnnl::stream stream(engine());
  dnnl::memory mean_m(stat_md, engine(), mean.data()), var_m(stat_md, engine(), var.data()),
      gamma_m(ss_md, engine(), gamma.data()), beta_m(ss_md, engine(), beta.data());
  dnnl::layer_normalization_forward(fwd_pd).execute(
      stream, {{DNNL_ARG_SRC, wrap(md, a.x)}, {DNNL_ARG_DST, dnnl::memory(md, engine(), y)}, {DNNL_ARG_MEAN, mean_m},
               {DNNL_ARG_VARIANCE, var_m}, {DNNL_ARG_SCALE, gamma_m}, {DNNL_ARG_SHIFT, beta_m}});
  stream.wait();
  for (std::size_t i = 0; i < a.rows; ++i) {
    if (a.mean != nullptr) a.mean[i] = mean[i];
    if (a.var != nullptr) a.var[i] = var[i];
  }
  if (a.dy == nullptr) return;
  std::vector<float> dgamma(a.cols), dbeta(a.cols);
  const dnnl::layer_normalization_backward::primitive_desc bwd_pd(
      dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, md, md, stat_md, a.eps, flags), engine(),
      fwd_pd);
  dnnl::layer_normalization_backward(bwd_pd).execute(
      stream, {{DNNL_ARG_SRC, wrap(md, a.x)}, {DNNL_ARG_MEAN, mean_m}, {DNNL_ARG_VARIANCE, var_m},
               {DNNL_ARG_DIFF_DST, wrap(md, a.dy)}, {DNNL_ARG_SCALE, gamma_m}, {DNNL_ARG_SHIFT, beta_m},
               {DNNL_ARG_DIFF_SRC, dnnl::memory(md, engine(), a.dx)},
               {DNNL_ARG_DIFF_SCALE, dnnl::memory(ss_md, engine(), dgamma.data())},
               {DNNL_ARG_DIFF_SHIFT, dnnl::memory(ss_md, engine(), dbeta.data())}});
  stream.wait();
  auto store = [&](void* out, const std::vector<float>& v) {
    for (std::size_t j = 0; out != nullptr && j < a.cols; ++j) {
      if constexpr (type == dt::f32) {
        static_cast<float*>(out)[j] = v[j];
      } else {
        static_cast<bf16*>(out)[j] = to_bf16(v[j]);
      }
    }
  };
  store(a.dgamma, dgamma);
  store(a.dbeta, dbeta);
}

/// C = A·B on oneDNN's matmul, each operand a plain 2-D tensor (a transposed operand: its desc with format ba).
void run_matmul(dnnl::stream& stream, const dnnl::memory::desc& a_md, const void* a, const dnnl::memory::desc& b_md,
                const void* b, const dnnl::memory::desc& c_md, void* c) {
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(a_md, a)}, {DNNL_ARG_WEIGHTS, wrap(b_md, b)},
                        {DNNL_ARG_DST, dnnl::memory(c_md, engine(), c)}});
}

/// dst = alpha·src elementwise (eltwise_linear, beta 0), rounded to dst's type.
void run_scale(dnnl::stream& stream, const dnnl::memory::desc& md, const void* src, void* dst, float alpha) {
  const dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, md, alpha,
                                  0.0f),
      engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(md, src)}, {DNNL_ARG_DST, dnnl::memory(md, engine(), dst)}});
}

template <dt type, bool kPrescale>
void attention(const AttentionArgs& a) {
  omp_set_num_threads(1);
  if (a.len == 0) return;
  using dim = dnnl::memory::dim;
  using Elem = std::conditional_t<type == dt::f32, float, std::uint16_t>;
  const dim L = dim(a.len), D = dim(a.dim);
  const std::size_t ld = a.len * a.dim, ll = a.len * a.len;
  const dnnl::memory::desc ld_md({L, D}, type, tag::ab), ll_md({L, L}, type, tag::ab),
      ldt_md({D, L}, type, tag::ba),  // the transpose of an L × D tensor, in place
      llt_md({L, L}, type, tag::ba);  // the transpose of an L × L tensor, in place
  const float c = 1.0f / std::sqrt(static_cast<float>(a.dim));
  dnnl::stream stream(engine());
  std::vector<Elem> qs(kPrescale ? ld : 0), s(ll), p(ll);
  // Forward: prescale S = (c·Q)·Kᵀ; postscale S = c·(Q·Kᵀ), T = Q·Kᵀ stored first.
  if constexpr (kPrescale) {
    run_scale(stream, ld_md, a.q, qs.data(), c);
    run_matmul(stream, ld_md, qs.data(), ldt_md, a.k, ll_md, s.data());
  } else {
    std::vector<Elem> t(ll);
    run_matmul(stream, ld_md, a.q, ldt_md, a.k, ll_md, t.data());
    run_scale(stream, ll_md, t.data(), s.data(), c);
  }
  stream.wait();
  if (a.scores != nullptr) std::memcpy(a.scores, s.data(), ll * sizeof(Elem));
  if (a.causal) {
    Elem minus_inf;
    if constexpr (type == dt::f32) {
      minus_inf = -INFINITY;
    } else {
      minus_inf = 0xFF80;  // bf16 -inf
    }
    for (std::size_t i = 0; i < a.len; ++i) {
      std::fill(s.begin() + std::ptrdiff_t(i * a.len + i + 1), s.begin() + std::ptrdiff_t((i + 1) * a.len), minus_inf);
    }
  }
  const dnnl::softmax_v2_forward::primitive_desc sm_pd(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, ll_md,
                                     ll_md, 1),
      engine());
  dnnl::softmax_v2_forward(sm_pd).execute(
      stream, {{DNNL_ARG_SRC, wrap(ll_md, s.data())}, {DNNL_ARG_DST, dnnl::memory(ll_md, engine(), p.data())}});
  std::vector<Elem> o_scratch(a.o == nullptr ? ld : 0);
  run_matmul(stream, ll_md, p.data(), ld_md, a.v, ld_md, a.o != nullptr ? a.o : o_scratch.data());
  stream.wait();
  if (a.dout == nullptr) return;
  // Backward: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = softmax's backward, then the scale and dQ, dK.
  std::vector<Elem> dp(ll), ds(ll), tmp(std::max(ll, ld));
  run_matmul(stream, llt_md, p.data(), ld_md, a.dout, ld_md, a.dv);
  run_matmul(stream, ld_md, a.dout, ldt_md, a.v, ll_md, dp.data());
  stream.wait();
  dnnl::softmax_v2_backward(dnnl::softmax_v2_backward::primitive_desc(
                                dnnl::softmax_v2_backward::desc(dnnl::algorithm::softmax_accurate, ll_md, ll_md, ll_md, 1),
                                engine(), sm_pd))
      .execute(stream, {{DNNL_ARG_DST, wrap(ll_md, p.data())}, {DNNL_ARG_DIFF_DST, wrap(ll_md, dp.data())},
                        {DNNL_ARG_DIFF_SRC, dnnl::memory(ll_md, engine(), ds.data())}});
  stream.wait();
  if constexpr (kPrescale) {  // dQ̃ = dS·K, dK = dSᵀ·Q̃, dQ = c·dQ̃
    run_matmul(stream, ll_md, ds.data(), ld_md, a.k, ld_md, tmp.data());
    run_matmul(stream, llt_md, ds.data(), ld_md, qs.data(), ld_md, a.dk);
    stream.wait();
    run_scale(stream, ld_md, tmp.data(), a.dq, c);
  } else {  // dT = c·dS, dQ = dT·K, dK = dTᵀ·Q
    run_scale(stream, ll_md, ds.data(), tmp.data(), c);
    stream.wait();
    run_matmul(stream, ll_md, tmp.data(), ld_md, a.k, ld_md, a.dq);
    run_matmul(stream, llt_md, tmp.data(), ld_md, a.q, ld_md, a.dk);
  }
  stream.wait();
}

}  // namespace

LibraryList onednn_list() {
  const dnnl_version_t* v = dnnl_version();
  return {"onednn",
          fmt::format("oneDNN {}.{}.{} (git {}); matmul, softmax_v2, reduction, layer_normalization and eltwise "
                      "primitives per call (attention composed of them), plain row-major tensors; 1 thread "
                      "(omp_set_num_threads(1) on the calling thread)",
                      v->major, v->minor, v->patch, v->hash),
          {dense_peer("onednn_f32_dense_fwd__peer", Mode::f32, DType::f32, matmul<dt::f32>, 1e-5),
           dense_peer("onednn_bf16_dense_fwd__peer", Mode::bf16_f32acc, DType::bf16, matmul<dt::bf16>, 2e-2),
           softmax_peer("onednn_f32_softmax__peer", Mode::f32, DType::f32, softmax<dt::f32>, 1e-5),
           softmax_peer("onednn_bf16_softmax__peer", Mode::bf16_f32acc, DType::bf16, softmax<dt::bf16>, 2e-2),
           reduce_peer("onednn_f32_sum__peer", Op::sum, Mode::f32, DType::f32, reduce<dt::f32, Reduce::sum>, 1e-5),
           reduce_peer("onednn_bf16_sum__peer", Op::sum, Mode::bf16_f32acc, DType::bf16, reduce<dt::bf16, Reduce::sum>,
                       2e-2),
           reduce_peer("onednn_f32_sumsq__peer", Op::sumsq, Mode::f32, DType::f32, reduce<dt::f32, Reduce::sumsq>,
                       1e-5),
           reduce_peer("onednn_bf16_sumsq__peer", Op::sumsq, Mode::bf16_f32acc, DType::bf16,
                       reduce<dt::bf16, Reduce::sumsq>, 2e-2),
           reduce_peer("onednn_f32_maxabs__peer", Op::maxabs, Mode::f32, DType::f32, reduce<dt::f32, Reduce::maxabs>,
                       0),
           reduce_peer("onednn_bf16_maxabs__peer", Op::maxabs, Mode::bf16_f32acc, DType::bf16,
                       reduce<dt::bf16, Reduce::maxabs>, 0),
           norm_peer("onednn_f32_layernorm__peer", Op::layernorm, Mode::f32, DType::f32, layernorm<dt::f32>, 1e-4),
           norm_peer("onednn_bf16_layernorm__peer", Op::layernorm, Mode::bf16_f32acc, DType::bf16,
                     layernorm<dt::bf16>, 5e-2),
           attention_peer("onednn_f32_attention_prescale__peer", Op::attention_prescale, Mode::f32, DType::f32,
                          attention<dt::f32, true>, 1e-4),
           attention_peer("onednn_f32_attention_postscale__peer", Op::attention_postscale, Mode::f32, DType::f32,
                          attention<dt::f32, false>, 1e-4),
           attention_peer("onednn_bf16_attention_prescale__peer", Op::attention_prescale, Mode::bf16_f32acc,
                          DType::bf16, attention<dt::bf16, true>, 5e-2),
           attention_peer("onednn_bf16_attention_postscale__peer", Op::attention_postscale, Mode::bf16_f32acc,
                          DType::bf16, attention<dt::bf16, false>, 5e-2)},
          {{"onednn_rmsnorm__peer", "oneDNN 2.6's layer normalisation has no RMS variant (no rmsnorm peer)."}}};
}

}  // namespace halfmap::peers
