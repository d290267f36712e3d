// The OCP 8-bit floating-point storage types (OCP 8-bit Floating Point Specification (OFP8), rev. 1.0; docs/numerics.md
// "fp8 and microscaling"): E4M3 and E5M2, their exact decoding and their rounding from float32. This is the model
// every fp8 conversion kernel of halfmap is tested against, bit for bit.
//
//   E4M3  sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities; S.1111.111 is NaN (one pattern per
//         sign). Largest finite 448 (S.1111.110), smallest normal 2^-6, smallest subnormal 2^-9.
//   E5M2  sign, 5 exponent bits (bias 15), 2 mantissa bits: the upper byte of an IEEE binary16. Infinities
//         S.11111.00, NaNs S.11111.{01,10,11}. Largest finite 57344 (S.11110.11), smallest subnormal 2^-16.
//
// Rounding from float32 (to_fp8): round to nearest, ties to even, as if the exponent range were unbounded above;
// subnormal results are kept (never flushed), the sign of zero is kept. What each conversion does where the
// rounded value does not fit (|x| > 464 for E4M3, where 448 + half its ulp ties to 448, the even one; |x| >=
// 61440 for E5M2, whose tie goes up to 2^16), with an infinity and with a NaN:
//
//                        finite past the largest   ±inf              NaN
//   E4M3 saturating      ±448                      ±448              NaN (S.1111.111, the input's sign)
//   E4M3 non-saturating  NaN (S.1111.111)          NaN (S.1111.111)  NaN (S.1111.111)
//   E5M2 saturating      ±57344                    ±57344            NaN (S.11111.10, quiet)
//   E5M2 non-saturating  ±inf                      ±inf              NaN (S.11111.10, quiet)
//
// Saturating is what the fp8 GEMMs' output conversions and Transformer Engine's casts do (NVIDIA's cvt with
// .satfinite: "inf and values past the largest finite become the largest finite"); non-saturating is IEEE-style
// overflow, the OCP specification's other mode.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace halfmap {

enum class Fp8 { e4m3, e5m2 };
enum class Fp8Overflow { saturate, nonsaturating };

constexpr std::string_view fp8_name(Fp8 f) { return f == Fp8::e4m3 ? "e4m3" : "e5m2"; }

/// The parameters of a format.
struct Fp8Format {
  int mant_bits;  // stored mantissa bits
  int bias;
  int emin, emax;         // unbiased exponents of the smallest and largest normal binade
  std::uint8_t max_bits;  // the largest finite (positive)
  std::uint8_t nan_bits;  // the NaN written (positive; the sign is the input's)
  std::uint8_t inf_bits;  // the infinity (E5M2), or 0 where there is none
  float max;
};

constexpr Fp8Format fp8_format(Fp8 f) {
  return f == Fp8::e4m3 ? Fp8Format{3, 7, -6, 8, 0x7E, 0x7F, 0x00, 448.0f}
                        : Fp8Format{2, 15, -14, 15, 0x7B, 0x7E, 0x7C, 57344.0f};
}

constexpr bool fp8_is_nan(std::uint8_t bits, Fp8 f) {
  return f == Fp8::e4m3 ? (bits & 0x7F) == 0x7F : (bits & 0x7F) > 0x7C;
}
constexpr bool fp8_is_inf(std::uint8_t bits, Fp8 f) { return f == Fp8::e5m2 && (bits & 0x7F) == 0x7C; }

/// The exact value of an fp8 pattern (NaN for the NaN patterns).
constexpr float from_fp8(std::uint8_t bits, Fp8 f) {
  const Fp8Format F = fp8_format(f);
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  if (fp8_is_nan(bits, f)) return std::numeric_limits<float>::quiet_NaN();
  if (fp8_is_inf(bits, f)) return sign * std::numeric_limits<float>::infinity();
  const int field = (bits & 0x7F) >> F.mant_bits;
  const int mant = bits & ((1 << F.mant_bits) - 1);
  // value = significand · 2^(exponent − mant_bits), the significand with its implicit bit for normals.
  const int significand = field == 0 ? mant : mant | (1 << F.mant_bits);
  const int exponent = (field == 0 ? F.emin : field - F.bias) - F.mant_bits;
  float scale = 1.0f;
  for (int k = 0; k < (exponent < 0 ? -exponent : exponent); ++k) scale *= exponent < 0 ? 0.5f : 2.0f;
  return sign * float(significand) * scale;
}

namespace detail {

/// A small binary float format, by its magnitude: mant_bits stored mantissa bits, normal exponents emin .. emax,
/// the largest finite encoding max_bits (positive). The rounding shared by fp8.hpp and mx.hpp's element types.
struct MiniFormat {
  int mant_bits, emin, emax;
  std::uint32_t max_bits;
};

/// |x| (finite, its float32 bits without the sign) rounded to nearest even into the format: the positive encoding,
/// or a value above max_bits when it does not fit (as if the exponent range were unbounded above).
constexpr std::uint32_t round_mini(std::uint32_t a, MiniFormat F) {
  const int e = int(a >> 23) - 127;  // unbiased; float32 subnormals are far below every value of these formats
  if (e > F.emax + 1) return F.max_bits + 1;
  if (e < F.emin - F.mant_bits - 1) return 0;           // below half the smallest subnormal: zero
  const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u;  // significand with the implicit bit
  // Units of the result: 2^(e − mant_bits) for normals, 2^(emin − mant_bits) for subnormals.
  const int shift = e >= F.emin ? 23 - F.mant_bits : 23 - F.mant_bits + (F.emin - e);
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((std::uint32_t{1} << shift) - 1), half = std::uint32_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  // Normals: q in [2^M, 2^(M+1)], and the exponent field added below it lets a carry move up a binade;
  // subnormals: q <= 2^M is the whole encoding (2^M: the smallest normal).
  return e >= F.emin ? (std::uint32_t(e - F.emin) << F.mant_bits) + q : q;
}

/// The smallest positive float32 pattern whose rounding into F is at least `enc` (round_mini is monotone).
constexpr std::uint32_t first_rounding_to(MiniFormat F, std::uint32_t enc) {
  std::uint32_t lo = 0, hi = 0x7F800000u;  // the largest finite float32 rounds past every format's largest finite
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (round_mini(mid, F) >= enc) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace detail

/// What rounding a magnitude y (float32, non-negative) to nearest even into a small format does, as three
/// thresholds, since the rounding is monotone: y at or below flush_max rounds to zero, y below normal_min to a
/// subnormal, y at or above clip_min past the largest finite (where a saturating conversion clips it).
struct RoundingThresholds {
  float flush_max, normal_min, clip_min;
};

constexpr RoundingThresholds rounding_thresholds(detail::MiniFormat F) {
  return {std::bit_cast<float>(detail::first_rounding_to(F, 1) - 1),
          std::bit_cast<float>(detail::first_rounding_to(F, std::uint32_t{1} << F.mant_bits)),
          std::bit_cast<float>(detail::first_rounding_to(F, F.max_bits + 1))};
}
constexpr RoundingThresholds fp8_thresholds(Fp8 f) {
  const Fp8Format F = fp8_format(f);
  return rounding_thresholds({F.mant_bits, F.emin, F.emax, F.max_bits});
}

/// What rounding n values, each multiplied by s in float32, does: how many round past the largest finite (an
/// infinity too), how many non-zero ones round to zero, how many to a subnormal; a zero and a NaN count nowhere.
/// Branch-free, in chunks with 32-bit counters, so that the compiler vectorises it.
struct RoundingCounts {
  std::size_t clipped = 0, flushed = 0, subnormal = 0;
};
inline RoundingCounts count_rounding(const float* x, std::size_t n, float s, const RoundingThresholds& t) {
  constexpr std::size_t kChunk = std::size_t{1} << 24;
  RoundingCounts r;
  for (std::size_t c = 0; c < n; c += kChunk) {
    std::uint32_t clipped = 0, flushed = 0, subnormal = 0;
    const std::size_t end = n - c < kChunk ? n : c + kChunk;
    for (std::size_t i = c; i < end; ++i) {
      const float y = (x[i] < 0 ? -x[i] : x[i]) * s;
      clipped += y >= t.clip_min;
      flushed += (x[i] != 0.0f) & (y <= t.flush_max);
      subnormal += (y > t.flush_max) & (y < t.normal_min);
    }
    r.clipped += clipped;
    r.flushed += flushed;
    r.subnormal += subnormal;
  }
  return r;
}

/// float32 -> fp8, round to nearest even, overflow as the table above says.
constexpr std::uint8_t to_fp8(float x, Fp8 f, Fp8Overflow o) {
  const Fp8Format F = fp8_format(f);
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint8_t overflow = static_cast<std::uint8_t>(sign | (o == Fp8Overflow::saturate ? F.max_bits
                                                                  : f == Fp8::e4m3           ? F.nan_bits
                                                                                             : F.inf_bits));
  if (a > 0x7F800000u) return static_cast<std::uint8_t>(sign | F.nan_bits);  // NaN
  if (a == 0x7F800000u) return overflow;                                     // ±inf
  const std::uint32_t enc = detail::round_mini(a, {F.mant_bits, F.emin, F.emax, F.max_bits});
  if (enc > F.max_bits) return overflow;
  return static_cast<std::uint8_t>(sign | enc);
}

}  // namespace halfmap
