// The per-operation fp16 model: portable scalar fp16 arithmetic that rounds after every operation.
//
// It is the bit-exact reference for every kernel that accumulates in fp16, when run with the same order of
// operations (see `lanes` below). Why each operation is exact (docs/numerics.md, "Rounding through float32"):
//   * add, mul: f32 has 24 >= 2*11+2 significand bits, so computing in f32 and rounding once to fp16 gives the
//     correctly rounded fp16 result, i.e. what a native fp16 instruction gives;
//   * fused multiply-add comes in two flavours, because the paths differ:
//       FmaKind::fused     a*b+c computed in f64 and rounded once to fp16: a native fp16 FMA (vfmadd...ph on
//                          AVX512-FP16, fmla on NEON fp16);
//       FmaKind::f32_round a*b+c fused in f32 (std::fma, itself correctly rounded), then rounded to fp16: what an
//                          F16C path computes when it emulates fp16 accumulation (vfmadd...ps then vcvtps2ph),
//                          as XNNPACK's f16 GEMM does on AVX2. It rounds twice, so it can differ from `fused`.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "halfmap/half.hpp"

namespace halfmap {

/// `none`: the kernel has no fp16 FMA (f32-accumulating kernels); f16_model::fma treats it as fused.
enum class FmaKind : std::uint8_t { fused, f32_round, none };

namespace f16_model {

inline f16 add(f16 a, f16 b) { return to_f16(to_f32(a) + to_f32(b)); }
inline f16 sub(f16 a, f16 b) { return to_f16(to_f32(a) - to_f32(b)); }
inline f16 mul(f16 a, f16 b) { return to_f16(to_f32(a) * to_f32(b)); }

inline f16 fma(f16 a, f16 b, f16 c, FmaKind kind) {
  if (kind == FmaKind::f32_round) return to_f16(std::fma(to_f32(a), to_f32(b), to_f32(c)));
  // The product of two fp16 values is exact in f64 (22 significant bits), so std::fma and a*b+c agree; the
  // single rounding to f64 of the sum never moves an fp16 rounding decision (docs/numerics.md).
  return to_f16(std::fma(to_f64(a), to_f64(b), to_f64(c)));
}

/// to_f64(to_f16(x)) for a finite x, without the bit patterns: the fp16 value nearest x (ties to even), inf beyond
/// the largest finite one, a signed zero below half the smallest subnormal. Adding C = 1.5 · 2^(e+42), with e
/// x's binade clamped to fp16's normal range, rounds |x| to a multiple of its fp16 ulp 2^(e-10) (the sum lies in
/// [2^(e+42), 2^(e+43)), where the f64 ulp is that), ties to even as C / ulp is even; subtracting C is exact. It
/// assumes the default rounding mode (to nearest), like to_bf16_exact; flush-to-zero cannot touch it (C and the
/// sum are normal, and a subnormal |x| only ever rounds to 0). half_test compares it with to_f16 exhaustively.
inline double round_finite(double x) {
  const double ax = std::fabs(x);
  if (ax >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), x);
  int e = int(std::bit_cast<std::uint64_t>(ax) >> 52) - 1023;
  if (e < -14) e = -14;
  const double c = std::bit_cast<double>((std::uint64_t(e + 42 + 1023) << 52) | (std::uint64_t{1} << 51));
  return std::copysign((ax + c) - c, x);
}

/// |x| as the ordering key of max|x|: for fp16 bit patterns with the sign cleared, unsigned order is numeric
/// order, and every NaN sorts above inf. So the integer max of the keys is exact max|x| and propagates NaN,
/// whatever the order of the comparisons.
constexpr std::uint16_t abs_key(f16 x) { return static_cast<std::uint16_t>(x.bits & 0x7FFFu); }

/// Folds per-lane accumulators into one, halving the lane count each step: acc[j] += acc[j + w] for
/// w = L/2, L/4, ..., 1. `acc.size()` must be a power of two. This is the one horizontal order that every
/// fp16-accumulating kernel uses, SIMD or not.
inline f16 fold_lanes(std::span<f16> acc) {
  for (std::size_t w = acc.size() / 2; w >= 1; w /= 2) {
    for (std::size_t j = 0; j < w; ++j) acc[j] = add(acc[j], acc[j + w]);
  }
  return acc.empty() ? f16{} : acc[0];
}

}  // namespace f16_model
}  // namespace halfmap
