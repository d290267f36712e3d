// The OCP microscaling (MX) formats (OCP Microscaling Formats (MX) Specification v1.0; docs/numerics.md, "fp8
// and MX"): blocks of kMxBlock = 32 elements sharing one E8M0 scale. The model every MX kernel of halfmap is
// tested against, bit for bit.
//
// Element types (sign, exponent bits, mantissa bits; bias; largest; smallest subnormal):
//   MXFP8  E4M3 and E5M2, as fp8.hpp (converted saturating: an MX element never overflows to inf or NaN);
//   MXFP6  E3M2: bias 3, largest 28, smallest subnormal 2^-4;   E2M3: bias 1, largest 7.5, smallest 2^-3;
//   MXFP4  E2M1: bias 1, largest 6, values 0, 0.5, 1, 1.5, 2, 3, 4, 6.
//   FP6 and FP4 have no infinity and no NaN.
// The scale is E8M0: an unsigned biased exponent, X = 2^(bits − 127) for bits 0 .. 254, 0xFF is NaN.
//
// Quantising a block V (mx_quantize), as the specification's conversion: shared_exp = ⌊log2(max |V_i|)⌋ −
// emax(element type), clamped to the scale's range [−127, 127]; X = 2^shared_exp; P_i = V_i / X (exact: X is a
// power of two, unless the quotient leaves float32's range) rounded to the element type to nearest even with
// subnormals kept and saturating at its largest finite. So the block's largest element lands in the element
// type's top binade, [2^emax, 2^(emax+1)), which its largest finite does not cover: a block maximum whose
// mantissa is above the element type's largest one is clipped (E2M1: 1.99·2^k stores as 1.5·2^k, −25 %).
// Where this model chooses what the specification leaves open:
//   a block holding a NaN or an infinity gets the NaN scale 0xFF (every element of it then reads as NaN), its
//   elements written as +0;
//   a block of zeros gets the smallest scale, 2^−127, and zero elements.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "halfmap/fp8.hpp"

namespace halfmap {

inline constexpr std::size_t kMxBlock = 32;

enum class MxElem { e4m3, e5m2, e3m2, e2m3, e2m1 };

constexpr std::string_view mx_name(MxElem t) {
  switch (t) {
    case MxElem::e4m3:
      return "mxfp8_e4m3";
    case MxElem::e5m2:
      return "mxfp8_e5m2";
    case MxElem::e3m2:
      return "mxfp6_e3m2";
    case MxElem::e2m3:
      return "mxfp6_e2m3";
    case MxElem::e2m1:
      return "mxfp4_e2m1";
  }
  return "?";
}

/// An element type's layout: mantissa bits, bias, normal exponents emin .. emax, the largest finite encoding
/// (positive, without the sign bit) and the sign bit's position (bits − 1).
struct MxElemFormat {
  int mant_bits, bias, emin, emax;
  std::uint32_t max_bits;
  int bits;
  float max;
};

constexpr MxElemFormat mx_format(MxElem t) {
  switch (t) {
    case MxElem::e4m3:
      return {3, 7, -6, 8, 0x7E, 8, 448.0f};
    case MxElem::e5m2:
      return {2, 15, -14, 15, 0x7B, 8, 57344.0f};
    case MxElem::e3m2:
      return {2, 3, -2, 4, 0x1F, 6, 28.0f};
    case MxElem::e2m3:
      return {3, 1, 0, 2, 0x1F, 6, 7.5f};
    case MxElem::e2m1:
      return {1, 1, 0, 2, 0x7, 4, 6.0f};
  }
  return {};
}

/// An element's value (its bits in the low mx_format(t).bits bits; the top one the sign), without the scale. The
/// FP8 types' NaN and infinity patterns decode as fp8.hpp says; mx_quantize never writes them.
constexpr float mx_elem_value(std::uint8_t bits, MxElem t) {
  if (t == MxElem::e4m3) return from_fp8(bits, Fp8::e4m3);
  if (t == MxElem::e5m2) return from_fp8(bits, Fp8::e5m2);
  const MxElemFormat F = mx_format(t);
  const std::uint32_t sign_bit = std::uint32_t{1} << (F.bits - 1), mag = bits & (sign_bit - 1);
  const int field = int(mag >> F.mant_bits), mant = int(mag & ((1u << F.mant_bits) - 1));
  const int significand = field == 0 ? mant : mant | (1 << F.mant_bits);
  const int exponent = (field == 0 ? F.emin : field - F.bias) - F.mant_bits;
  float scale = 1.0f;
  for (int k = 0; k < (exponent < 0 ? -exponent : exponent); ++k) scale *= exponent < 0 ? 0.5f : 2.0f;
  return ((bits & sign_bit) ? -1.0f : 1.0f) * float(significand) * scale;
}

/// The element type's rounding thresholds (fp8.hpp's RoundingThresholds), on a value already divided by the scale.
constexpr RoundingThresholds mx_thresholds(MxElem t) {
  const MxElemFormat F = mx_format(t);
  return rounding_thresholds({F.mant_bits, F.emin, F.emax, F.max_bits});
}

/// float32 -> element, round to nearest even, subnormals kept, saturating at the largest finite (an infinity
/// too); a NaN gives +0 (a block holding one has the NaN scale).
constexpr std::uint8_t mx_round_elem(float x, MxElem t) {
  const MxElemFormat F = mx_format(t);
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x), a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;
  const std::uint32_t sign = (u >> 31) << (F.bits - 1);
  if (a == 0x7F800000u) return static_cast<std::uint8_t>(sign | F.max_bits);
  const std::uint32_t enc = detail::round_mini(a, {F.mant_bits, F.emin, F.emax, F.max_bits});
  return static_cast<std::uint8_t>(sign | (enc > F.max_bits ? F.max_bits : enc));
}

inline constexpr std::uint8_t kE8M0Nan = 0xFF;

/// 2^(bits − 127), NaN for 0xFF.
constexpr float e8m0_value(std::uint8_t bits) {
  if (bits == kE8M0Nan) return std::numeric_limits<float>::quiet_NaN();
  float v = 1.0f;
  for (int k = 0; k < (bits < 127 ? 127 - bits : bits - 127); ++k) v *= bits < 127 ? 0.5f : 2.0f;
  return v;
}

struct MxBlock {
  std::uint8_t scale = 0;                      // E8M0
  std::array<std::uint8_t, kMxBlock> elems{};  // each in its low mx_format(t).bits bits
};

/// The shared exponent of a block whose largest magnitude is amax (finite, non-negative), as the specification
/// computes it: ⌊log2 amax⌋ − emax, clamped to [−127, 127]; −127 for amax = 0. ⌊log2⌋ is read from the float32
/// bits: the exponent field of a normal, the bit width of a subnormal's mantissa (value = bits · 2^-149).
constexpr int mx_shared_exp_of(float amax, MxElem t) {
  const std::uint32_t a = std::bit_cast<std::uint32_t>(amax) & 0x7FFFFFFFu;
  if (a == 0) return -127;
  const int log2_amax = a >= 0x00800000u ? int(a >> 23) - 127 : int(std::bit_width(a)) - 1 - 149;
  const int e = log2_amax - mx_format(t).emax;
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

/// The block's shared exponent. Precondition: every value is finite.
inline int mx_shared_exp(std::span<const float, kMxBlock> v, MxElem t) {
  float amax = 0;
  for (float x : v) amax = std::max(amax, std::abs(x));
  return mx_shared_exp_of(amax, t);
}

/// 2^-e for a shared exponent e in [−127, 127], from its bits: a normal float32 for e <= 126, the subnormal 2^-127
/// for e = 127. Multiplying by it divides by the scale exactly (rounded as ldexp rounds where the quotient leaves
/// the normal range).
constexpr float mx_unscale(int e) {
  return std::bit_cast<float>(e <= 126 ? std::uint32_t(127 - e) << 23 : 0x00400000u);
}

/// Quantises one block (the header's rule).
inline MxBlock mx_quantize(std::span<const float, kMxBlock> v, MxElem t) {
  MxBlock b;
  for (float x : v)
    if (!std::isfinite(x)) {
      b.scale = kE8M0Nan;
      return b;
    }
  const int e = mx_shared_exp(v, t);
  b.scale = static_cast<std::uint8_t>(e + 127);
  for (std::size_t i = 0; i < kMxBlock; ++i) b.elems[i] = mx_round_elem(std::ldexp(v[i], -e), t);
  return b;
}

/// Element i's value: X · P_i (NaN under the NaN scale).
inline float mx_value(const MxBlock& b, std::size_t i, MxElem t) {
  if (b.scale == kE8M0Nan) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(mx_elem_value(b.elems[i], t), int(b.scale) - 127);
}

}  // namespace halfmap
