// Portable logic of the reductions, written once and instantiated per ISA.
//
// Every template here takes the ISA's own types (from its ops.hpp, in a namespace of its own), so each ISA gets
// its own instantiation compiled with its own flags: an inline function shared between files compiled with
// different -m flags could otherwise be merged by the linker into one copy that uses the higher ISA. For the same
// reason the scalar finishing steps (tails, lane folding, the final rounding) are out-of-line functions compiled
// without ISA flags (src/kernels/common/finish.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "halfmap/registry.hpp"
#include "kernels/common/storage_traits.hpp"

namespace halfmap::detail {

/// Finishes an fp16-accumulating reduction in the order of operations of f16_model_reduce: accumulates the
/// tail x[0..count), y[0..count) into lanes 0..count-1 (acc + x, fma(x, x, acc), fma(x, y, acc) with `fma`'s
/// rounding, or the larger |.| as its ordering key), folds the `lanes` accumulators (fp16 bit patterns, modified in
/// place; lane j += lane j + w for w = lanes/2, ..., 1) and returns the result widened to f32.
float f16acc_finish(Op op, std::uint16_t* lane_bits, unsigned lanes, const std::uint16_t* x, const std::uint16_t* y,
                    std::size_t count, FmaKind fma);

/// Rounds an f32-accumulated result to the mode's output type and widens it back (see ReduceFn).
float f32acc_finish(Mode mode, float acc);

/// a + b in f32 with the NaN that Arm's FADD returns, whatever operand order a C++ add gets: the first signalling
/// NaN of (a, b), quieted, else the first quiet one; inf - inf the default NaN 0x7FC00000. The fixed-order f32
/// kernels' scalar adds (bias, folds), so that they meet f32acc_model_add's contract (registry.hpp).
float arm_fadd(float a, float b);
/// Folds `lanes` f32 accumulators (a power of two, modified in place) with arm_fadd, acc[j] += acc[j + w] for
/// w = lanes/2, ..., 1; returns acc[0].
float arm_fadd_fold(float* acc, unsigned lanes);
/// arm_fadd_fold, then the result rounded like f32acc_finish: the fixed-order f32 kernels' finish
/// (FixedOrder::f32).
float f32lanes_finish(Mode mode, float* acc, unsigned lanes);

/// max|x| result from its ordering key (bit pattern with the sign cleared) for the given storage type.
float maxabs_from_key(DType storage, std::uint32_t key);

/// fp16-accumulating reduction over R independent accumulator registers (R a power of two). T (an ISA's fp16 ops)
/// supplies: kW (fp16 lanes per register, a power of two), V, kFma, zero(), load(const uint16_t*), add(V, V),
/// fma(V a, V b, V c) = a*b+c, each rounding to fp16 as kFma says, rot(V, w) (lane j gets lane (j + w) mod kW) and
/// lane0(V) (lane 0's fp16 bits). Element i goes to lane i % (kW*R), exactly as in the model (so the kernel's
/// `lanes` is kW*R), and the lanes are folded in f16_model::fold_lanes's order, all in registers: a short input
/// costs a few vector operations more than its loop, not L - 1 scalar steps.
template <class T, std::size_t R, Op kOp>
float f16acc_reduce(const void* xv, const void* yv, std::size_t n) {
  static_assert(kOp != Op::maxabs, "max|x| is exact in any order: use maxabs_reduce");
  static_assert(R >= 1 && (R & (R - 1)) == 0 && (T::kW & (T::kW - 1)) == 0, "the fold needs powers of two");
  constexpr std::size_t W = T::kW, L = W * R;
  const auto* x = static_cast<const std::uint16_t*>(xv);
  const auto* y = static_cast<const std::uint16_t*>(yv);
  typename T::V acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = T::zero();
  auto step = [](typename T::V a, const std::uint16_t* xp, const std::uint16_t* yp) {
    const auto xr = T::load(xp);
    if constexpr (kOp == Op::sum) {
      return T::add(a, xr);
    } else if constexpr (kOp == Op::sumsq) {
      return T::fma(xr, xr, a);
    } else {
      return T::fma(xr, T::load(yp), a);
    }
  };
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    for (std::size_t r = 0; r < R; ++r) acc[r] = step(acc[r], x + i + r * W, kOp == Op::dot ? y + i + r * W : nullptr);
  }
  if (i < n) {
    // The tail, element i + k into lane k, from a copy padded with x = -0, y = +0. A padded lane is left exactly
    // as it was: sum adds -0, the identity of a round-to-nearest add (-0 + -0 = -0, +0 + -0 = +0); sumsq and dot
    // add the product (-0)·(-0) = +0 or (-0)·(+0) = -0 once, fused or rounded, so sumsq adds +0 to an accumulator
    // that is never -0 (its terms are never negative) and dot adds -0. A NaN accumulator is already quiet.
    alignas(64) std::uint16_t xt[L], yt[L];
    const std::size_t count = n - i;
    for (std::size_t k = 0; k < L; ++k) {
      xt[k] = k < count ? x[i + k] : std::uint16_t{0x8000};
      yt[k] = kOp == Op::dot && k < count ? y[i + k] : std::uint16_t{0};
    }
    for (std::size_t r = 0; r * W < count; ++r) acc[r] = step(acc[r], xt + r * W, yt + r * W);
  }
  // f16_model::fold_lanes: lane j += lane j + w for w = L/2, ..., 1. While w >= W, lane j + w is lane j's
  // position in register j/W + w/W; below W, it is lane j + w of register 0.
  for (std::size_t h = R / 2; h >= 1; h /= 2) {
    for (std::size_t r = 0; r < h; ++r) acc[r] = T::add(acc[r], acc[r + h]);
  }
  for (unsigned w = W / 2; w >= 1; w /= 2) acc[0] = T::add(acc[0], T::rot(acc[0], w));
  std::uint16_t folded = T::lane0(acc[0]);
  return f16acc_finish(kOp, &folded, 1, nullptr, nullptr, 0, T::kFma);
}

/// (acc[0] + acc[1]) + (acc[2] + acc[3]), then its lanes summed in lane order through memory (no horizontal-add
/// instruction needed: AVX-512's needs AVX512-DQ, which the avx512 path does not require).
template <class M>
float hsum(const typename M::V (&acc)[4]) {
  alignas(64) float lanes[M::kW];
  M::store(lanes, M::add(M::add(acc[0], acc[1]), M::add(acc[2], acc[3])));
  float s = 0.0f;
  for (std::size_t k = 0; k < M::kW; ++k) s += lanes[k];
  return s;
}

/// Calls step(x', y') once on zero-padded copies of x[i, n) and, for dot, y[i, n), kW elements each (nothing if
/// i == n): a tail that reads nothing past n, and whose padding the caller's step adds as +0.
template <std::size_t kW, Op kOp, class Elem, class Step>
void padded_tail(const Elem* x, const Elem* y, std::size_t i, std::size_t n, Step step) {
  if (i >= n) return;
  Elem xt[kW] = {}, yt[kW] = {};
  for (std::size_t k = 0; i + k < n; ++k) {
    xt[k] = x[i + k];
    if constexpr (kOp == Op::dot) yt[k] = y[i + k];
  }
  step(xt, yt);
}

/// Calls step(x', y') on each whole step of kStep 16-bit elements of x (and of y for dot; null otherwise), then on
/// the padded tail: the fixed-order reductions of neonfhm and neonbf16.
template <std::size_t kStep, Op kOp, class Step>
void padded_steps(const void* xv, const void* yv, std::size_t n, Step step) {
  const auto* x = static_cast<const std::uint16_t*>(xv);
  const auto* y = static_cast<const std::uint16_t*>(yv);
  std::size_t i = 0;
  for (; i + kStep <= n; i += kStep) step(x + i, kOp == Op::dot ? y + i : nullptr);
  padded_tail<kStep, kOp>(x, y, i, n, step);
}

/// f32-accumulating reduction. S (storage_traits.hpp over an ISA's f32 ops M) supplies Elem, kMode and
/// load(const Elem*) -> M::V (widening to f32); M supplies V, kW, set1, add, fma (fused), store. Four independent
/// accumulators hide the FMA latency; the tail is widened from a zero-padded copy, so no load reads past n.
template <class S, Op kOp>
float f32acc_reduce(const void* xv, const void* yv, std::size_t n) {
  static_assert(kOp != Op::maxabs, "max|x| is exact in any order: use maxabs_reduce");
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, R = 4;
  const auto* x = static_cast<const Elem*>(xv);
  const auto* y = static_cast<const Elem*>(yv);
  V acc[R] = {M::set1(0.0f), M::set1(0.0f), M::set1(0.0f), M::set1(0.0f)};
  auto step = [&](V& a, const Elem* xp, const Elem* yp) {
    const V xb = S::load(xp);
    if constexpr (kOp == Op::sum) {
      a = M::add(a, xb);
    } else if constexpr (kOp == Op::sumsq) {
      a = M::fma(xb, xb, a);
    } else {
      a = M::fma(xb, S::load(yp), a);
    }
  };
  std::size_t i = 0;
  for (; i + R * W <= n; i += R * W) {
    for (std::size_t r = 0; r < R; ++r) step(acc[r], x + i + r * W, kOp == Op::dot ? y + i + r * W : nullptr);
  }
  for (; i + W <= n; i += W) step(acc[0], x + i, kOp == Op::dot ? y + i : nullptr);
  padded_tail<W, kOp>(x, y, i, n, [&](const Elem* xt, const Elem* yt) { step(acc[1], xt, yt); });
  return f32acc_finish(S::kMode, hsum<M>(acc));
}

/// max|x| on ordering keys (bit patterns with the sign cleared; see f16_model::abs_key). Written as a plain
/// loop over unsigned keys, which the compiler vectorises with the ISA of the file that instantiates it (the tag,
/// an ISA's ops.hpp Tag, only keeps each ISA's instantiation apart).
template <class IsaTag, class Key, DType kStorage>
float maxabs_reduce(const void* xv, const void*, std::size_t n) {
  constexpr Key kMask = Key(~Key(0)) >> 1;
  const auto* x = static_cast<const Key*>(xv);
  Key m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Key k = Key(x[i] & kMask);
    m = k > m ? k : m;
  }
  return maxabs_from_key(kStorage, m);
}

}  // namespace halfmap::detail
