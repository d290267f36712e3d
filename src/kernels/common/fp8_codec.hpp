// The fp8 and MX element conversions on kW values at once, each written once: over an ISA's 32-bit integer lanes
// (mini_encode, mini_decode: Fp8EncodeFn, Fp8DecodeFn), through fp16 (half_encode, half_decode) and onto a format's
// grid in float32 (grid_round, mini_round); bit-exact to include/halfmap/fp8.hpp's to_fp8 and from_fp8 and mx.hpp's
// element conversions (tests/fp8_convert_test.cpp: every float32 pattern). fp8_convert.hpp makes them a path's
// entries.
//
// On the integer lanes, encoding |x| (a = its float32 bits without the sign) into a format with M mantissa bits and
// bias B, in two candidate results computed on every lane and one picked:
//   normal results (a >= the bits of 2^emin): round to nearest even at bit 23 - M of a itself, by adding
//     2^(22-M) - 1 and the kept bit's parity, then shifting; subtracting (127 - B) << M rebiases the exponent. A
//     carry out of the mantissa moves up a binade, as it should, and past the largest binade the result simply
//     exceeds the largest finite encoding (so does an infinity's).
//   subnormal results (a below 2^emin): the float32 sum |x| + 2^(emin - M + 23) has an ulp of exactly the
//     format's subnormal unit 2^(emin - M), so the FPU's round to nearest even rounds |x| onto that unit and the
//     sum's bits minus the constant's are the encoding (2^M: the carry into the smallest normal). This needs the
//     default rounding mode and no denormals-are-zero, which halfmap never changes (docs/numerics.md).
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
//   fadd(a, b), fmul(a, b)            the float32 sum / product of two bit patterns, rounded to nearest even
//   i2f_scaled(v, c)                  float(v) · c as bits (v a small non-negative integer, c a power of two)
// Tails shorter than kW go through the model itself.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "halfmap/fp8.hpp"
#include "halfmap/mx.hpp"

namespace halfmap::detail {

/// A small float format as the conversions see it: fp8 in either overflow mode, or an MX element type.
struct MiniSpec {
  int mant_bits, emin, bias;
  std::uint32_t max_bits;   // the largest finite encoding (positive)
  int bits;                 // storage bits, the top one the sign: 8 (fp8), 6 (FP6), 4 (FP4)
  std::uint32_t overflow;   // a value past the largest finite (or ±inf) becomes this, signed
  std::uint32_t nan;        // a NaN becomes this
  bool nan_signed;          // ... with the input's sign (fp8), or as it is (MX elements: +0)
  std::uint32_t inf_bits;   // decoding: the infinity's magnitude (E5M2), or 0: none
  std::uint32_t nan_above;  // decoding: magnitudes above this are NaN (the largest magnitude: none)
};

constexpr MiniSpec fp8_spec(Fp8 f, Fp8Overflow o) {
  const Fp8Format F = fp8_format(f);
  const std::uint32_t overflow = o == Fp8Overflow::saturate ? F.max_bits : f == Fp8::e4m3 ? F.nan_bits : F.inf_bits;
  return {F.mant_bits, F.emin,     F.bias, F.max_bits, 8,
          overflow,    F.nan_bits, true,   F.inf_bits, f == Fp8::e4m3 ? 0x7Eu : 0x7Cu};
}
/// MX elements: saturating, a NaN as +0 (mx.hpp's mx_round_elem; a block holding one gets the NaN scale). The MXFP8
/// elements are fp8's saturating conversions but for the NaN.
constexpr MiniSpec mx_spec(MxElem t) {
  MiniSpec s{};
  if (t == MxElem::e4m3 || t == MxElem::e5m2) {
    s = fp8_spec(t == MxElem::e4m3 ? Fp8::e4m3 : Fp8::e5m2, Fp8Overflow::saturate);
  } else {
    const MxElemFormat F = mx_format(t);
    s = {F.mant_bits, F.emin, F.bias, F.max_bits, F.bits,
         F.max_bits,  0,      false,  0,          (std::uint32_t{1} << (F.bits - 1)) - 1u};  // no infinity, no NaN
  }
  s.nan = 0;
  s.nan_signed = false;
  return s;
}

constexpr float pow2f(int e) {
  float v = 1.0f;
  for (int k = 0; k < (e < 0 ? -e : e); ++k) v *= e < 0 ? 0.5f : 2.0f;
  return v;
}

/// float32 -> the format, every value bit-exact to kScalar (the model), which also converts the tail.
template <class O, MiniSpec S, auto kScalar>
void mini_encode(const float* x, std::uint8_t* y, std::size_t n) {
  constexpr int kShift = 23 - S.mant_bits;
  constexpr std::uint32_t kNormalMin = std::uint32_t(S.emin + 127) << 23;
  constexpr std::uint32_t kMagic = std::uint32_t(S.emin - S.mant_bits + 23 + 127) << 23;
  constexpr std::uint32_t kRebias = std::uint32_t(127 - S.bias) << S.mant_bits;
  using I = typename O::I;
  const I abs_mask = O::set1(0x7FFFFFFFu), sign_bit = O::set1(std::uint32_t{1} << (S.bits - 1)), one = O::set1(1u);
  const I round_bias = O::set1((std::uint32_t{1} << (kShift - 1)) - 1u), rebias = O::set1(kRebias);
  const I normal_min = O::set1(kNormalMin), magic = O::set1(kMagic), max_bits = O::set1(S.max_bits);
  const I overflow = O::set1(S.overflow), inf = O::set1(0x7F800000u), nan = O::set1(S.nan);
  std::size_t i = 0;
  for (; i + O::kW <= n; i += O::kW) {
    const I u = O::load(x + i);
    const I a = O::and_(u, abs_mask);
    const I odd = O::and_(O::template srl<kShift>(a), one);
    const I normal = O::sub(O::template srl<kShift>(O::add(O::add(a, round_bias), odd)), rebias);
    const I subnormal = O::sub(O::fadd(a, magic), magic);
    I enc = O::select(O::gt(normal_min, a), subnormal, normal);
    enc = O::select(O::gt(enc, max_bits), overflow, enc);
    const I sign = O::and_(O::template srl<32 - S.bits>(u), sign_bit);
    if constexpr (S.nan_signed) {
      enc = O::or_(O::select(O::gt(a, inf), nan, enc), sign);
    } else {
      enc = O::select(O::gt(a, inf), nan, O::or_(enc, sign));
    }
    O::store_bytes(y + i, enc);
  }
  for (; i < n; ++i) y[i] = kScalar(x[i]);
}

/// The format -> float32, exact; a NaN pattern gives 0x7FC00000, as the models do.
template <class O, MiniSpec S, auto kScalar>
void mini_decode(const std::uint8_t* x, float* y, std::size_t n) {
  constexpr std::uint32_t kSignBit = std::uint32_t{1} << (S.bits - 1);
  constexpr std::uint32_t kMantMask = (std::uint32_t{1} << S.mant_bits) - 1u;
  constexpr std::uint32_t kRebias = std::uint32_t(127 - S.bias) << 23;
  constexpr float kUnit = pow2f(S.emin - S.mant_bits);  // the subnormal unit, a normal float32 for every format
  using I = typename O::I;
  const I mag_mask = O::set1(kSignBit - 1u), sign_bit = O::set1(kSignBit), mant_mask = O::set1(kMantMask);
  const I rebias = O::set1(kRebias), nan_f32 = O::set1(0x7FC00000u), inf_f32 = O::set1(0x7F800000u);
  const I inf_bits = O::set1(S.inf_bits), nan_above = O::set1(S.nan_above);
  std::size_t i = 0;
  for (; i + O::kW <= n; i += O::kW) {
    const I b = O::load_bytes(x + i);
    const I mag = O::and_(b, mag_mask), sign = O::template sll<32 - S.bits>(O::and_(b, sign_bit));
    const I normal = O::add(O::template sll<23 - S.mant_bits>(mag), rebias);
    const I subnormal = O::i2f_scaled(O::and_(mag, mant_mask), kUnit);
    I v = O::select(O::gt(mag, mant_mask), normal, subnormal);  // exponent field >= 1: normal
    if constexpr (S.inf_bits != 0) v = O::select(O::eq(mag, inf_bits), inf_f32, v);
    v = O::or_(v, sign);
    if constexpr (S.nan_above < kSignBit - 1u) v = O::select(O::gt(mag, nan_above), nan_f32, v);
    O::store(y + i, v);
  }
  for (; i < n; ++i) y[i] = kScalar(x[i]);
}

// ---- through fp16 (the neonfp16 path) ------------------------------------------------------------------------
// Every one of these formats sits inside fp16: a value of a format with bias B, times c = 2^(B - 15), is an fp16
// whose exponent field is the format's and whose mantissa is the format's followed by k = 10 - M zero bits, its
// subnormals fp16 subnormals (E5M2 has fp16's bias: c = 1, its byte is the top byte of the fp16; E4M3: c = 2^-8).
//   encoding: h = fp16(x · c) by the hardware's round to nearest even (x · c is exact wherever the result is not
//     zero), then round h to nearest even at bit k by integer arithmetic. Rounding twice differs from rounding
//     once only where the first rounding lands exactly on a midpoint of the second (a midpoint is an fp16 value, so
//     it is never crossed): when h's low k bits are 1 followed by zeros and x · c != h, h is first moved one fp16
//     ulp towards x · c, then rounded. Past the largest finite (h = inf included) the overflow encoding; a NaN the
//     NaN encoding (with the input's sign for fp8, as it is for the MX elements); the sign bit from h.
//   decoding: the element's bits placed in fp16's (a NaN as the quiet fp16 NaN 0x7E00, so that no signalling NaN
//     is converted), widened exactly to float32 and multiplied by 1/c.
// H, the ISA's primitives on kW values at once (neonfp16 ops.hpp's H16):
//   U, the kW 16-bit lanes; F, the same kW values as float32
//   load(const float*) -> F, store(float*, F), scale(F, c) = F · c, to_f16(F) -> U (nearest even), to_f32(U) -> F
//   above(a, b) = |a| > |b|, differ(a, b) = a != b (a NaN differs), each a lane mask in U
//   load_bytes(const uint8_t*) -> U, store_bytes(uint8_t*, U) (each lane's low byte)
//   set1(u16), and_, or_, add, sub, srl<s>, sll<s>, gt (unsigned), eq, select(m, a, b) = m ? a : b
// Tails shorter than kW go through the model.
/// Whether half_encode/half_decode can take the format: at most fp16's exponent field and bias, at most 3 mantissa
/// bits (so that 10 - M bits are dropped).
constexpr bool inside_fp16(const MiniSpec& s) {
  return s.bias <= 15 && s.mant_bits <= 3 && s.bits - 1 - s.mant_bits <= 5;
}

template <class H, MiniSpec S, auto kScalar>
void half_encode(const float* x, std::uint8_t* y, std::size_t n) {
  static_assert(inside_fp16(S), "a format inside fp16");
  constexpr int kDrop = 10 - S.mant_bits;
  constexpr float kScale = pow2f(S.bias - 15);
  using U = typename H::U;
  const U half = H::set1(std::uint16_t(1u << (kDrop - 1))), low = H::set1(std::uint16_t((1u << kDrop) - 1u));
  const U one = H::set1(1), round_bias = H::set1(std::uint16_t((1u << (kDrop - 1)) - 1u));
  const U abs_mask = H::set1(0x7FFF), sign_mask = H::set1(0x8000), inf = H::set1(0x7C00);
  const U max_bits = H::set1(std::uint16_t(S.max_bits));
  const U overflow = H::set1(std::uint16_t(S.overflow)), nan = H::set1(std::uint16_t(S.nan));
  std::size_t i = 0;
  for (; i + H::kW <= n; i += H::kW) {
    auto v = H::load(x + i);
    if constexpr (kScale != 1.0f) v = H::scale(v, kScale);
    const U h = H::to_f16(v);
    const auto back = H::to_f32(h);
    const U mag = H::and_(h, abs_mask);
    const U tie = H::and_(H::eq(H::and_(mag, low), half), H::differ(v, back));
    const U a = H::select(tie, H::select(H::above(v, back), H::add(mag, one), H::sub(mag, one)), mag);
    U enc = H::template srl<kDrop>(H::add(H::add(a, round_bias), H::and_(H::template srl<kDrop>(a), one)));
    enc = H::select(H::gt(enc, max_bits), overflow, enc);
    const U is_nan = H::gt(mag, inf);
    const U sign = H::template srl<16 - S.bits>(H::and_(h, sign_mask));
    if constexpr (S.nan_signed) {
      enc = H::or_(H::select(is_nan, nan, enc), sign);
    } else {
      enc = H::select(is_nan, nan, H::or_(enc, sign));
    }
    H::store_bytes(y + i, enc);
  }
  // The tail as a count from here: written as `for (; i < n; ++i)`, GCC 12 inlined a call with n = 32 (an MX
  // block, no tail) and warned of an iteration 2^62 - 1 of the dead loop (-Waggressive-loop-optimizations).
  const std::size_t rest = n - i;
  for (std::size_t k = 0; k < rest; ++k) y[i + k] = kScalar(x[i + k]);
}

template <class H, MiniSpec S, auto kScalar>
void half_decode(const std::uint8_t* x, float* y, std::size_t n) {
  static_assert(inside_fp16(S), "a format inside fp16");
  constexpr int kDrop = 10 - S.mant_bits;
  constexpr float kUnscale = pow2f(15 - S.bias);
  constexpr std::uint16_t kSignBit = std::uint16_t(1u << (S.bits - 1));
  using U = typename H::U;
  const U mag_mask = H::set1(kSignBit - 1u), sign_bit = H::set1(kSignBit);
  const U nan_above = H::set1(std::uint16_t(S.nan_above)), quiet_nan = H::set1(0x7E00);
  std::size_t i = 0;
  for (; i + H::kW <= n; i += H::kW) {
    const U b = H::load_bytes(x + i);
    const U mag = H::and_(b, mag_mask);
    U h = H::or_(H::template sll<kDrop>(mag), H::template sll<16 - S.bits>(H::and_(b, sign_bit)));
    if constexpr (S.nan_above < kSignBit - 1u) h = H::select(H::gt(mag, nan_above), quiet_nan, h);
    auto v = H::to_f32(h);
    if constexpr (kUnscale != 1.0f) v = H::scale(v, kUnscale);
    H::store(y + i, v);
  }
  for (; i < n; ++i) y[i] = kScalar(x[i]);
}

// ---- onto a format's grid in float32 (the scaled modes' casts, Fp8RoundFn and MxRoundFn) -------------------
// The value mini_decode(mini_encode(x)) gives in the saturating modes, computed without the byte in between: the
// same rounding, kept in float32's fields.
//   normal results: round to nearest even at bit 23 - M of a as mini_encode does, then clear the bits below it:
//     those are the float32 bits of the rounded value (a carry moves it up a binade).
//   subnormal results: (|x| + 2^(emin - M + 23)) - 2^(emin - M + 23), two float32 sums: the first rounds |x| onto
//     the subnormal unit as mini_encode's does, the second is exact.
//   past the largest finite value (an infinity too): the largest finite; the sign put back; a NaN: 0x7FC00000 for
//     fp8 (from_fp8's NaN), +0 for the MX elements (mx_round_elem's), as decoding the encoding gives.
// tests/fp8_convert_test.cpp checks it against from_fp8(to_fp8(x)) on every float32 pattern.

/// One register of float32 bits onto S's grid (saturating).
template <class O, MiniSpec S>
typename O::I grid_round(typename O::I u) {
  static_assert(S.overflow == S.max_bits, "the grid rounding saturates");
  constexpr int kShift = 23 - S.mant_bits;
  constexpr std::uint32_t kNormalMin = std::uint32_t(S.emin + 127) << 23;
  constexpr std::uint32_t kMagic = std::uint32_t(S.emin - S.mant_bits + 23 + 127) << 23;
  constexpr std::uint32_t kMaxValue = (S.max_bits << kShift) + (std::uint32_t(127 - S.bias) << 23);
  using I = typename O::I;
  const I a = O::and_(u, O::set1(0x7FFFFFFFu));
  const I odd = O::and_(O::template srl<kShift>(a), O::set1(1u));
  const I round_bias = O::set1((std::uint32_t{1} << (kShift - 1)) - 1u);
  const I normal = O::and_(O::add(O::add(a, round_bias), odd), O::set1(~((std::uint32_t{1} << kShift) - 1u)));
  const I subnormal = O::fadd(O::fadd(a, O::set1(kMagic)), O::set1(kMagic | 0x80000000u));
  I r = O::select(O::gt(O::set1(kNormalMin), a), subnormal, normal);
  r = O::select(O::gt(r, O::set1(kMaxValue)), O::set1(kMaxValue), r);
  r = O::or_(r, O::and_(u, O::set1(0x80000000u)));
  return O::select(O::gt(a, O::set1(0x7F800000u)), O::set1(S.nan_signed ? 0x7FC00000u : 0u), r);
}

/// y_i = grid(x_i · scale) · unscale, each product in float32 (Fp8RoundFn); in place allowed.
template <class O, MiniSpec S>
void mini_round(const float* x, std::size_t n, float scale, float unscale, float* y) {
  using I = typename O::I;
  const I pre = O::set1(std::bit_cast<std::uint32_t>(scale)), post = O::set1(std::bit_cast<std::uint32_t>(unscale));
  auto one = [&](const float* p, float* q) { O::store(q, O::fmul(grid_round<O, S>(O::fmul(O::load(p), pre)), post)); };
  std::size_t i = 0;
  for (; i + O::kW <= n; i += O::kW) one(x + i, y + i);
  if (i < n) {
    float t[O::kW] = {};
    std::copy(x + i, x + n, t);
    one(t, t);
    std::copy(t, t + (n - i), y + i);
  }
}

}  // namespace halfmap::detail
