// Attention of one head (AttentionArgs in registry.hpp) as the frameworks compose it: the path's own dense,
// dense_bwd and softmax kernels of one mode, joined by elementwise steps (the 1/√d, the causal mask, the softmax
// backward, the transposes) that are the same code on every path. An ISA's kernels.cpp names its three kernels of
// a mode in an AttentionKernels and lists attention<kThem, prescale>; the composition itself
// (kernels/common/attention_compose.hpp) is compiled once, without ISA flags, in kernels/common/attention.cpp. The
// f16 model (src/models/attention.cpp) is a composition of its own over the f16 models, which checks this one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

/// The kernels of one path and mode that an attention kernel is made of (the storage type is the mode's). lanes
/// and fma: the f16 modes' softmax lanes (δ's fp16 dot runs in the same order) and the fp16 FMA of the dense
/// kernels; 1 and none otherwise. widen16 and narrow16: the path's conversions of many values of the mode's 16-bit
/// storage type (fp16 or bf16) to f32 and back (round to nearest even), which the composition's elementwise steps
/// use in place of half.hpp's scalar ones, giving the same bits (fp16: exhaustive_conversion_test pins the
/// hardware's conversions to half.hpp's for every pattern; bf16: a shift, and avx512bf16's to_bf16_exact, not
/// vcvtneps2bf16, which flushes); null where the path has none (the scalar ones then). f16_dot, required in the
/// f16 modes: δ = Σ P ∘ dP, the path's fp16 dot in f16_model_reduce's order over `lanes` lanes with `fma` (its
/// f16acc_reduce at the softmax's registers; on the ref path the f16_model dot). softmax_bwd_f32: the
/// f32-computing modes' softmax backward on one row in f32, p[j] = p[j] · (dp[j] − δ) with δ = Σ p ∘ dp, on the
/// path's vectors (softmax_bwd_row below: δ in its lanes' order, fused; the f32 modes are bounded, not bit-pinned,
/// so the order is the path's); null: the composition's scalar loop (δ in index order).
struct AttentionKernels {
  Mode mode;
  DenseFn fwd;
  DenseBwdFn bwd;
  SoftmaxFn softmax;
  unsigned lanes;
  FmaKind fma;
  void (*widen16)(const std::uint16_t* src, float* dst, std::size_t n) = nullptr;
  void (*narrow16)(const float* src, std::uint16_t* dst, std::size_t n) = nullptr;
  ReduceFn f16_dot = nullptr;
  void (*softmax_bwd_f32)(float* p, const float* dp, std::size_t n) = nullptr;
};

/// AttentionKernels::softmax_bwd_f32 on an ISA's f32 ops O (load, store, set1, zero, add, sub, mul, fma, kW): δ over
/// four registers of lanes, then their lanes in order, then the tail in index order; then p · (dp − δ) per element
/// (the composition's two roundings: the difference, then the product).
template <class O>
void softmax_bwd_row(float* p, const float* dp, std::size_t n) {
  constexpr std::size_t W = O::kW;
  typename O::V acc[4] = {O::zero(), O::zero(), O::zero(), O::zero()};
  std::size_t j = 0;
  for (; j + 4 * W <= n; j += 4 * W) {
    for (std::size_t r = 0; r < 4; ++r) acc[r] = O::fma(O::load(p + j + r * W), O::load(dp + j + r * W), acc[r]);
  }
  alignas(64) float lanes[W];
  O::store(lanes, O::add(O::add(acc[0], acc[1]), O::add(acc[2], acc[3])));
  float delta = 0;
  for (std::size_t l = 0; l < W; ++l) delta += lanes[l];
  for (; j < n; ++j) delta += p[j] * dp[j];
  const typename O::V dv = O::set1(delta);
  j = 0;
  for (; j + W <= n; j += W) O::store(p + j, O::mul(O::load(p + j), O::sub(O::load(dp + j), dv)));
  for (; j < n; ++j) p[j] = p[j] * (dp[j] - delta);
}

/// Runs AttentionArgs' recipe with these kernels (kernels/common/attention.cpp).
void attention_run(const AttentionArgs& a, const AttentionKernels& parts, bool prescale);

/// The AttentionFn of a path: kParts names its kernels.
template <const AttentionKernels& kParts, bool kPrescale>
void attention(const AttentionArgs& a) {
  attention_run(a, kParts, kPrescale);
}

}  // namespace halfmap::detail
