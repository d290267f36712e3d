// oneDNN's attention peers: one head composed of matmul, eltwise_linear and softmax_v2 primitives, each created per
// call (onednn_{f32,bf16}_attention_{prescale,postscale}__peer; what each computes: src/peers/onednn.cpp's top).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "peers/onednn.hpp"

namespace halfmap::peers::onednn {
namespace {

/// C = A·B on oneDNN's matmul, each operand a plain 2-D tensor (a transposed operand: its desc with format ba).
void run_matmul(dnnl::stream& stream, const dnnl::memory::desc& a_md, const void* a, const dnnl::memory::desc& b_md,
                const void* b, const dnnl::memory::desc& c_md, void* c) {
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(a_md, a)},
                        {DNNL_ARG_WEIGHTS, wrap(b_md, b)},
                        {DNNL_ARG_DST, dnnl::memory(c_md, engine(), c)}});
}

/// dst = alpha·src elementwise (eltwise_linear, beta 0), rounded to dst's type.
void run_scale(dnnl::stream& stream, const dnnl::memory::desc& md, const void* src, void* dst, float alpha) {
  const dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, md, alpha, 0.0f),
      engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(md, src)}, {DNNL_ARG_DST, dnnl::memory(md, engine(), dst)}});
}

}  // namespace

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
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, ll_md, ll_md,
                                     1),
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
  dnnl::softmax_v2_backward(
      dnnl::softmax_v2_backward::primitive_desc(
          dnnl::softmax_v2_backward::desc(dnnl::algorithm::softmax_accurate, ll_md, ll_md, ll_md, 1), engine(), sm_pd))
      .execute(stream, {{DNNL_ARG_DST, wrap(ll_md, p.data())},
                        {DNNL_ARG_DIFF_DST, wrap(ll_md, dp.data())},
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

template void attention<dt::f32, true>(const AttentionArgs&);
template void attention<dt::f32, false>(const AttentionArgs&);
template void attention<dt::bf16, true>(const AttentionArgs&);
template void attention<dt::bf16, false>(const AttentionArgs&);

}  // namespace halfmap::peers::onednn
