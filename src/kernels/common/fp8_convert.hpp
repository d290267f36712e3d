// fp8 conversions (Fp8EncodeFn, Fp8DecodeFn), written once over an ISA's 32-bit integer lanes, bit-exact to
// include/halfmap/fp8.hpp's to_fp8 and from_fp8 (tests/fp8_convert_test.cpp: every float32 pattern).
//
// Encoding |x| (a = its float32 bits without the sign) into a format with M mantissa bits and bias B, in two
// candidate results computed on every lane and one picked:
//   normal results (a >= the bits of 2^emin): round to nearest even at bit 23 - M of a itself, by adding
//     2^(22-M) - 1 and the kept bit's parity, then shifting; subtracting (127 - B) << M rebiases the exponent. A
//     carry out of the mantissa moves up a binade, as it should, and past the largest binade the result simply
//     exceeds the largest finite encoding (so does an infinity's).
//   subnormal results (a below 2^emin): the float32 sum |x| + 2^(emin - M + 23) has an ulp of exactly the
//     format's subnormal unit 2^(emin - M), so the FPU's round to nearest even rounds |x| onto that unit and the
//     sum's bits minus the constant's are the encoding (2^M: the carry into the smallest normal). This needs the
//     default rounding mode and no denormals-are-zero, which halfmap never changes (NUMERICS.md).
//   then: above the largest finite encoding -> the overflow encoding of the Fp8Overflow mode; a NaN -> the NaN
//   encoding; the sign bit put back.
// Decoding: normals are the byte's magnitude shifted into float32's fields with the exponent rebiased; subnormals
// (exponent field 0) are float(mantissa) · 2^(emin - M), exact; infinities and NaNs are selected last.
//
// O, the ISA's primitives (avx2, avx512, neon ops.hpp's I32T; ref's scalar one), on lanes of 32 bits:
//   I, M, kW                          the lane vector, a lane mask, lanes per vector
//   load(const float*), store(float*, I)        float32 bits in and out
//   load_bytes(const uint8_t*), store_bytes(uint8_t*, I)   kW bytes widened to lanes / each lane's low byte
//   set1(u32), and_, or_, add, sub, srl<s>, sll<s>   integer lanes (srl logical)
//   gt(a, b) signed, eq(a, b) -> M;  select(M, a, b) = m ? a : b
//   fadd(a, b)                        the float32 sum of two bit patterns, rounded to nearest even, as bits
//   i2f_scaled(v, c)                  float(v) · c as bits (v a small non-negative integer, c a power of two)
// Tails shorter than kW go through the model itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "halfmap/fp8.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"

namespace halfmap::detail {

template <class O, Fp8 kF, Fp8Overflow kO>
void fp8_encode(const float* x, std::uint8_t* y, std::size_t n) {
  constexpr Fp8Format F = fp8_format(kF);
  constexpr int kShift = 23 - F.mant_bits;
  constexpr std::uint32_t kNormalMin = std::uint32_t(F.emin + 127) << 23;
  constexpr std::uint32_t kMagic = std::uint32_t(F.emin - F.mant_bits + 23 + 127) << 23;
  constexpr std::uint32_t kRebias = std::uint32_t(127 - F.bias) << F.mant_bits;
  constexpr std::uint32_t kOverflow =
      kO == Fp8Overflow::saturate ? F.max_bits : kF == Fp8::e4m3 ? F.nan_bits : F.inf_bits;
  using I = typename O::I;
  const I abs_mask = O::set1(0x7FFFFFFFu), sign_byte = O::set1(0x80u), one = O::set1(1u);
  const I round_bias = O::set1((std::uint32_t{1} << (kShift - 1)) - 1u), rebias = O::set1(kRebias);
  const I normal_min = O::set1(kNormalMin), magic = O::set1(kMagic), max_bits = O::set1(F.max_bits);
  const I overflow = O::set1(kOverflow), inf = O::set1(0x7F800000u), nan = O::set1(F.nan_bits);
  std::size_t i = 0;
  for (; i + O::kW <= n; i += O::kW) {
    const I u = O::load(x + i);
    const I a = O::and_(u, abs_mask);
    const I odd = O::and_(O::template srl<kShift>(a), one);
    const I normal = O::sub(O::template srl<kShift>(O::add(O::add(a, round_bias), odd)), rebias);
    const I subnormal = O::sub(O::fadd(a, magic), magic);
    I enc = O::select(O::gt(normal_min, a), subnormal, normal);
    enc = O::select(O::gt(enc, max_bits), overflow, enc);
    enc = O::select(O::gt(a, inf), nan, enc);
    O::store_bytes(y + i, O::or_(enc, O::and_(O::template srl<24>(u), sign_byte)));
  }
  for (; i < n; ++i) y[i] = to_fp8(x[i], kF, kO);
}

template <class O, Fp8 kF>
void fp8_decode(const std::uint8_t* x, float* y, std::size_t n) {
  constexpr Fp8Format F = fp8_format(kF);
  constexpr std::uint32_t kMantMask = (std::uint32_t{1} << F.mant_bits) - 1u;
  constexpr std::uint32_t kRebias = std::uint32_t(127 - F.bias) << 23;
  // 2^(emin - M): the subnormal unit, a normal float32 for both formats.
  constexpr float kUnit = kF == Fp8::e4m3 ? 0x1p-9f : 0x1p-16f;
  using I = typename O::I;
  const I mag_mask = O::set1(0x7Fu), sign_byte = O::set1(0x80u), mant_mask = O::set1(kMantMask);
  const I rebias = O::set1(kRebias), nan_f32 = O::set1(0x7FC00000u), inf_f32 = O::set1(0x7F800000u);
  const I inf_bits = O::set1(F.inf_bits), nan_above = O::set1(kF == Fp8::e4m3 ? 0x7Eu : 0x7Cu);
  std::size_t i = 0;
  for (; i + O::kW <= n; i += O::kW) {
    const I b = O::load_bytes(x + i);
    const I mag = O::and_(b, mag_mask), sign = O::template sll<24>(O::and_(b, sign_byte));
    const I normal = O::add(O::template sll<23 - F.mant_bits>(mag), rebias);
    const I subnormal = O::i2f_scaled(O::and_(mag, mant_mask), kUnit);
    I v = O::select(O::gt(mag, mant_mask), normal, subnormal);  // exponent field >= 1: normal
    if constexpr (kF == Fp8::e5m2) v = O::select(O::eq(mag, inf_bits), inf_f32, v);
    v = O::select(O::gt(mag, nan_above), nan_f32, O::or_(v, sign));
    O::store(y + i, v);
  }
  for (; i < n; ++i) y[i] = from_fp8(x[i], kF);
}

/// The composed name <format>_convert__<isa>, stored once per (format, isa).
template <Fp8 kF, Isa kIsa>
struct Fp8ConversionName {
  static constexpr std::string_view kParts[2] = {fp8_name(kF), paths::name_isa(kIsa)};
  static constexpr std::string_view kMiddle = "_convert__";
  static constexpr std::size_t kSize = kParts[0].size() + kMiddle.size() + kParts[1].size();
  static constexpr std::array<char, kSize> kChars = [] {
    std::array<char, kSize> c{};
    std::size_t n = 0;
    for (std::string_view s : {kParts[0], kMiddle, kParts[1]})
      for (char ch : s) c[n++] = ch;
    return c;
  }();
  static constexpr std::string_view value{kChars.data(), kSize};
};

/// One path's entry for one format.
template <class O, Fp8 kF, Isa kIsa>
constexpr Fp8Conversion fp8_conversion() {
  return {Fp8ConversionName<kF, kIsa>::value, kF, kIsa, fp8_encode<O, kF, Fp8Overflow::saturate>,
          fp8_encode<O, kF, Fp8Overflow::nonsaturating>, fp8_decode<O, kF>};
}

}  // namespace halfmap::detail

