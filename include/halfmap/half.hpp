// fp16 (IEEE binary16) and bfloat16 storage types and their exact scalar conversions.
//
// Contract of every conversion here (see docs/numerics.md):
//   * narrowing rounds to nearest, ties to even, and handles overflow (to inf), underflow (to a subnormal or
//     to a signed zero) and NaN (it stays a NaN: quiet bit set, upper payload bits kept, sign kept) exactly as
//     the hardware conversions do (F16C vcvtps2ph, arm64 fcvt with FPCR.DN = 0);
//   * widening (f16 -> f32, bf16 -> f32, f16 -> f64) is exact.
// Nothing here depends on the floating-point environment: it is integer arithmetic on bit patterns (and one exact
// f32 product of normal values), so it gives the same bits with flush-to-zero on or off and under any rounding
// mode (to_bf16_exact aside, which says why).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace halfmap {

/// IEEE binary16, kept as its bit pattern. Arithmetic lives in f16_model.hpp, never in operators here, so that
/// every rounding step is explicit.
struct f16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(f16, f16) = default;
};

/// bfloat16 (the upper half of an f32), kept as its bit pattern.
struct bf16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(bf16, bf16) = default;
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2, "storage types must be exactly 16 bits");

namespace detail {

/// Rounds a binary32 or binary64 value to binary16 bits (round to nearest even). One template serves both so
/// that the f64 path used by the fused multiply-add model is the same code as the tested f32 path.
template <class F>
constexpr std::uint16_t round_to_f16_bits(F value) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
  using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  constexpr int kWidth = int(sizeof(F)) * 8;
  constexpr int kMant = std::numeric_limits<F>::digits - 1;        // 23 or 52 stored significand bits
  constexpr int kBias = std::numeric_limits<F>::max_exponent - 1;  // 127 or 1023
  constexpr U kAbsMask = ~(U{1} << (kWidth - 1));
  constexpr U kExpMask = kAbsMask & ~((U{1} << kMant) - 1);

  const U u = std::bit_cast<U>(value);
  const auto sign = static_cast<std::uint16_t>((u >> (kWidth - 16)) & 0x8000u);
  const U a = u & kAbsMask;
  if (a > kExpMask) {  // NaN: quiet it, keep the top 9 payload bits like vcvtps2ph and fcvt do
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> (kMant - 10)) & 0x3FFu));
  }
  const int e = int(a >> kMant) - kBias;  // unbiased exponent; subnormal inputs land far below -25
  if (e > 15) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65536 (and inf): inf
  if (e < -25) return sign;                                       // < 2^-25: rounds to zero
  const U m = (a & ((U{1} << kMant) - 1)) | (U{1} << kMant);      // significand with the implicit bit
  // Units of the result: 2^(e-10) for fp16 normals (e >= -14), 2^-24 for fp16 subnormals.
  const int shift = e >= -14 ? kMant - 10 : kMant - 24 - e;
  U q = m >> shift;
  const U rem = m & ((U{1} << shift) - 1);
  const U half = U{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  // For normals q is in [1024, 2048]; adding it to the exponent field lets a carry bump the exponent
  // (and 65520 and above reach 0x7C00, inf). For subnormals q <= 1024 is the whole encoding.
  const U enc = e >= -14 ? (U(e + 14) << 10) + q : q;
  return static_cast<std::uint16_t>(sign | (enc >= 0x7C00u ? 0x7C00u : enc));
}

}  // namespace detail

/// f32 -> fp16, round to nearest even.
constexpr f16 to_f16(float v) { return f16{detail::round_to_f16_bits(v)}; }
/// f64 -> fp16, rounded once (not through f32: that would round twice).
constexpr f16 to_f16(double v) { return f16{detail::round_to_f16_bits(v)}; }

/// fp16 -> f32, exact.
constexpr float to_f32(f16 h) {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1Fu;
  const std::uint32_t mant = h.bits & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN (payload kept)
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: value = mant * 2^-24, an exact f32 product (a normal f32, or +0), whatever the rounding
  // mode or flush-to-zero setting; the sign is or-ed in.
  return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(float(mant) * 0x1p-24f));
}

/// fp16 -> f64, exact.
constexpr double to_f64(f16 h) { return static_cast<double>(to_f32(h)); }

/// f32 -> bf16, round to nearest even; a NaN stays a quiet NaN with its upper payload. Subnormal f32 inputs are
/// rounded like any other value (vcvtneps2bf16 instead treats them as zero: see docs/numerics.md).
constexpr bf16 to_bf16(float v) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  const std::uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // carries into the exponent, up to inf
  return bf16{static_cast<std::uint16_t>(rounded >> 16)};
}

/// bf16 -> f32, exact.
constexpr float to_f32(bf16 b) { return std::bit_cast<float>(std::uint32_t(b.bits) << 16); }

/// f64 -> bf16 rounded once (to nearest even). Going through f32 with the hardware conversion would round twice:
/// a double just above a bf16 midpoint can round to the f32 midpoint itself and then tie to even, downwards.
/// So the f64 -> f32 step rounds to odd instead (truncate, then set the last bit if anything was dropped): f32
/// keeps 16 more bits than bf16, and rounding to odd with at least two extra bits makes the second rounding
/// exact (Boldo & Melquiond, "When double rounding is odd"). Overflow, underflow (f32 subnormals included) and
/// NaN follow: beyond FLT_MAX truncation gives FLT_MAX|1, which rounds to bf16 inf; below 2^-149 it gives the
/// smallest f32 subnormal, which rounds to a bf16 zero. Unlike the rest of this file it uses the hardware f64 -> f32
/// conversion, so it assumes the default rounding mode (to nearest), the one every halfmap program runs in.
inline bf16 to_bf16_exact(double v) {
  if (v != v) return to_bf16(float(v));
  float f = float(v);  // round to nearest even
  if (double(f) != v) {
    std::uint32_t b = std::bit_cast<std::uint32_t>(f);
    if (std::fabs(double(f)) > std::fabs(v)) --b;  // step back towards zero: truncation (inf -> FLT_MAX)
    b |= 1u;                                       // sticky bit: round to odd
    f = std::bit_cast<float>(b);
  }
  return to_bf16(f);
}

constexpr bool is_nan(f16 h) { return (h.bits & 0x7FFFu) > 0x7C00u; }
constexpr bool is_inf(f16 h) { return (h.bits & 0x7FFFu) == 0x7C00u; }
constexpr bool is_finite(f16 h) { return (h.bits & 0x7C00u) != 0x7C00u; }
constexpr bool is_subnormal(f16 h) { return (h.bits & 0x7C00u) == 0 && (h.bits & 0x3FFu) != 0; }
constexpr bool is_nan(bf16 b) { return (b.bits & 0x7FFFu) > 0x7F80u; }

/// The fp16 constants of docs/numerics.md, so tests and the sweep name them rather than retype them.
namespace f16_limits {
inline constexpr float kMax = 65504.0f;           // 0x7BFF
inline constexpr float kOverflowFrom = 65520.0f;  // rounds to inf from here up
inline constexpr float kMinNormal = 0x1p-14f;     // 6.10e-5
inline constexpr float kMinSubnormal = 0x1p-24f;  // 5.96e-8
inline constexpr float kEpsilon = 0x1p-10f;
inline constexpr std::uint16_t kInfBits = 0x7C00;
}  // namespace f16_limits

namespace bf16_limits {
inline constexpr float kEpsilon = 0x1p-7f;
}  // namespace bf16_limits

}  // namespace halfmap
