// Portable logic of the reductions, written once and instantiated per ISA.
//
// Every template here takes the ISA's own traits type (defined in an anonymous namespace of the ISA's source
// file), so each ISA gets its own instantiation compiled with its own flags: an inline function shared between
// files compiled with different -m flags could otherwise be merged by the linker into one copy that uses the
// higher ISA. For the same reason the scalar finishing steps (tails, lane folding, the final rounding) are
// out-of-line functions compiled without ISA flags (src/core/finish.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

/// Finishes an fp16-accumulating reduction in the order of operations of f16_model_reduce: accumulates the
/// tail x[0..count), y[0..count) into lanes 0..count-1 with the model's scalar operations, folds the `lanes`
/// accumulators (fp16 bit patterns, modified in place) and returns the result widened to f32.
float f16acc_finish(Op op, std::uint16_t* lane_bits, unsigned lanes, const std::uint16_t* x, const std::uint16_t* y,
                    std::size_t count, FmaKind fma);

/// Rounds an f32-accumulated result to the mode's output type and widens it back (see ReduceFn).
float f32acc_finish(Mode mode, float acc);

/// max|x| result from its ordering key (bit pattern with the sign cleared) for the given storage type.
float maxabs_from_key(DType storage, std::uint32_t key);

/// fp16-accumulating reduction. T supplies: kWidth (fp16 lanes per register), kRegs (independent accumulator
/// registers), Vec, zero(), load(const uint16_t*), add(Vec, Vec), fma(Vec a, Vec b, Vec c) = a*b+c, each rounding
/// to fp16 as the kernel's FmaKind says, and store(uint16_t*, Vec) writing fp16 bit patterns. Element i goes to
/// lane i % (kWidth*kRegs), exactly as in the model.
template <class T, Op kOp>
float f16acc_reduce(const void* xv, const void* yv, std::size_t n) {
  static_assert(kOp != Op::maxabs, "max|x| is exact in any order: use maxabs_reduce");
  constexpr std::size_t W = T::kWidth, R = T::kRegs, L = W * R;
  const auto* x = static_cast<const std::uint16_t*>(xv);
  const auto* y = static_cast<const std::uint16_t*>(yv);
  typename T::Vec acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = T::zero();
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    for (std::size_t r = 0; r < R; ++r) {
      const auto xr = T::load(x + i + r * W);
      if constexpr (kOp == Op::sum) {
        acc[r] = T::add(acc[r], xr);
      } else if constexpr (kOp == Op::sumsq) {
        acc[r] = T::fma(xr, xr, acc[r]);
      } else {
        acc[r] = T::fma(xr, T::load(y + i + r * W), acc[r]);
      }
    }
  }
  std::uint16_t lanes[L];
  for (std::size_t r = 0; r < R; ++r) T::store(lanes + r * W, acc[r]);
  return f16acc_finish(kOp, lanes, L, x + i, kOp == Op::dot ? y + i : nullptr, n - i, T::kFma);
}

/// f32-accumulating reduction over xsimd batches. T supplies: Batch (xsimd::batch<float, A>), Elem (storage
/// element), load(const Elem*) -> Batch (widening to f32), fma(a, b, c) = a*b+c fused, kMode. (fma is the
/// traits' own because xsimd 8.1 has no fused multiply-add for avx512f: its generic fallback is x*y+z.) Four independent accumulators hide the FMA
/// latency; the tail is widened from a zero-padded copy, so no load reads past n.
template <class T, Op kOp>
float f32acc_reduce(const void* xv, const void* yv, std::size_t n) {
  static_assert(kOp != Op::maxabs, "max|x| is exact in any order: use maxabs_reduce");
  using Batch = typename T::Batch;
  using Elem = typename T::Elem;
  constexpr std::size_t W = Batch::size, R = 4;
  const auto* x = static_cast<const Elem*>(xv);
  const auto* y = static_cast<const Elem*>(yv);
  Batch acc[R] = {Batch(0.0f), Batch(0.0f), Batch(0.0f), Batch(0.0f)};
  auto step = [&](Batch& a, const Elem* xp, const Elem* yp) {
    const Batch xb = T::load(xp);
    if constexpr (kOp == Op::sum) {
      a += xb;
    } else if constexpr (kOp == Op::sumsq) {
      a = T::fma(xb, xb, a);
    } else {
      a = T::fma(xb, T::load(yp), a);
    }
  };
  std::size_t i = 0;
  for (; i + R * W <= n; i += R * W) {
    for (std::size_t r = 0; r < R; ++r) step(acc[r], x + i + r * W, kOp == Op::dot ? y + i + r * W : nullptr);
  }
  for (; i + W <= n; i += W) step(acc[0], x + i, kOp == Op::dot ? y + i : nullptr);
  if (i < n) {
    Elem xt[W] = {}, yt[W] = {};
    for (std::size_t k = 0; i + k < n; ++k) {
      xt[k] = x[i + k];
      if constexpr (kOp == Op::dot) yt[k] = y[i + k];
    }
    step(acc[1], xt, yt);
  }
  // Horizontal sum in lane order through memory: xsimd's hadd for avx512f needs AVX512-DQ, which the avx512
  // path does not require.
  alignas(64) float lanes[W];
  ((acc[0] + acc[1]) + (acc[2] + acc[3])).store_aligned(lanes);
  float total = 0.0f;
  for (std::size_t k = 0; k < W; ++k) total += lanes[k];
  return f32acc_finish(T::kMode, total);
}

/// max|x| on ordering keys (bit patterns with the sign cleared; see f16_model::abs_key). Written as a plain
/// loop over unsigned keys, which the compiler vectorises with the ISA of the file that instantiates it (the tag
/// type only keeps each ISA's instantiation apart).
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
