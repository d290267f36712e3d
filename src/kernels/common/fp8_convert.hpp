// The fp8 and MX conversions as a path's entries (include/halfmap/conversions.hpp's Fp8Conversion and
// MxConversion), over the element conversions of fp8_codec.hpp: the MX blocks (each block's scale, then its 32
// elements), the models that convert the tails, the composed names, and a path's lists (rows.hpp's Conversions):
// IntegerConversions on its 32-bit integer lanes, or HalfConversions through fp16.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string_view>

#include "halfmap/conversions.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/fp8_codec.hpp"
#include "kernels/common/list.hpp"

namespace halfmap::detail {

/// The halves 2^lo, 2^hi of a shared scale 2^e (lo + hi = e): element · 2^lo · 2^hi, two multiplications by
/// normal powers of two (e >= -127 splits into halves >= -64), is exact in the first and rounds once in the second
/// where the value is a float32 subnormal, and no operand is subnormal (the scale 2^-127 itself is one).
struct ScaleHalves {
  float lo, hi;
};
constexpr ScaleHalves scale_halves(int e) {
  const int lo = e / 2, hi = e - lo;
  return {std::bit_cast<float>(std::uint32_t(lo + 127) << 23), std::bit_cast<float>(std::uint32_t(hi + 127) << 23)};
}

/// Calls f(v, out) for each MX block of x (n values; the last block padded with zeros, v and out then a copy),
/// with its amax's bits, and writes the copy's first values back to y.
template <class F>
void for_each_mx_block(const float* x, std::size_t n, float* y, F f) {
  for (std::size_t b = 0; b < n; b += kMxBlock) {
    const std::size_t len = std::min(kMxBlock, n - b);
    // Zeroed only for a partial block: zeroing it for every block (a rep stos) took longer than the block's rounding.
    float t[kMxBlock];
    const float* v = x + b;
    float* out = y + b;
    if (len < kMxBlock) {
      std::fill(std::copy(v, v + len, t), t + kMxBlock, 0.0f);
      v = out = t;
    }
    // amax as the largest magnitude's bits: non-negative float32 patterns order like their values, and every
    // NaN and inf pattern is at least 0x7F800000 (an integer max, which the compiler vectorises).
    std::uint32_t amax_bits = 0;
    for (std::size_t i = 0; i < kMxBlock; ++i)
      amax_bits = std::max(amax_bits, std::bit_cast<std::uint32_t>(v[i]) & 0x7FFFFFFFu);
    if (amax_bits >= 0x7F800000u) {
      std::fill(y + b, y + b + len, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    f(v, out, amax_bits);
    if (len < kMxBlock) std::copy(t, t + len, y + b);
  }
}

/// MX blocks along x read back exactly (MxRoundFn): each value as its element times the block's scale, a block
/// holding a NaN or an inf as NaNs; the block's scale as mx_quantize_blocks finds it; in place allowed.
template <class O, MiniSpec S, MxElem kT>
void mini_round_blocks(const float* x, std::size_t n, float* y) {
  static_assert(kMxBlock % O::kW == 0, "whole registers per block");
  using I = typename O::I;
  for_each_mx_block(x, n, y, [](const float* v, float* out, std::uint32_t amax_bits) {
    const int e = mx_shared_exp_of(std::bit_cast<float>(amax_bits), kT);
    const ScaleHalves h = scale_halves(e);
    const I pre = O::set1(std::bit_cast<std::uint32_t>(mx_unscale(e)));
    const I lo = O::set1(std::bit_cast<std::uint32_t>(h.lo)), hi = O::set1(std::bit_cast<std::uint32_t>(h.hi));
    for (std::size_t j = 0; j < kMxBlock; j += O::kW)
      O::store(out + j, O::fmul(O::fmul(grid_round<O, S>(O::fmul(O::load(v + j), pre)), lo), hi));
  });
}

/// The same two through a path's encoder and decoder (the paths that convert through fp16), in chunks on the stack.
template <Fp8EncodeFn kEncode, Fp8DecodeFn kDecode>
void round_via(const float* x, std::size_t n, float scale, float unscale, float* y) {
  constexpr std::size_t kChunk = 256;
  float t[kChunk];
  std::uint8_t b[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    for (std::size_t j = 0; j < m; ++j) t[j] = x[i + j] * scale;
    kEncode(t, b, m);
    kDecode(b, t, m);
    for (std::size_t j = 0; j < m; ++j) y[i + j] = t[j] * unscale;
  }
}
template <MxQuantizeFn kQuantize, Fp8DecodeFn kDecode>
void mx_round_via(const float* x, std::size_t n, float* y) {
  for_each_mx_block(x, n, y, [](const float* v, float* out, std::uint32_t) {
    std::uint8_t scale, elems[kMxBlock];
    kQuantize(v, 1, &scale, elems);
    kDecode(elems, out, kMxBlock);
    const ScaleHalves h = scale_halves(int(scale) - 127);
    for (std::size_t j = 0; j < kMxBlock; ++j) out[j] = out[j] * h.lo * h.hi;
  });
}

template <Fp8 kF, Fp8Overflow kO>
std::uint8_t fp8_model(float x) {
  return to_fp8(x, kF, kO);
}
template <Fp8 kF>
float fp8_value_model(std::uint8_t b) {
  return from_fp8(b, kF);
}
template <MxElem kT>
std::uint8_t mx_model(float x) {
  return mx_round_elem(x, kT);
}
template <MxElem kT>
float mx_value_model(std::uint8_t b) {
  return mx_elem_value(b, kT);
}

template <class O, Fp8 kF, Fp8Overflow kO>
void fp8_encode(const float* x, std::uint8_t* y, std::size_t n) {
  mini_encode<O, fp8_spec(kF, kO), fp8_model<kF, kO>>(x, y, n);
}
template <class O, Fp8 kF>
void fp8_decode(const std::uint8_t* x, float* y, std::size_t n) {
  mini_decode<O, fp8_spec(kF, Fp8Overflow::saturate), fp8_value_model<kF>>(x, y, n);
}

/// MX blocks: each block's amax and finiteness in float32, its scale by mx.hpp's rule (mx_shared_exp_of), the 32
/// values divided by the scale (mx_unscale), then encoded by the path's element conversion.
template <Fp8EncodeFn kEncode, MxElem kT>
void mx_quantize_blocks(const float* x, std::size_t blocks, std::uint8_t* scales, std::uint8_t* elems) {
  for (std::size_t b = 0; b < blocks; ++b) {
    const float* v = x + b * kMxBlock;
    std::uint8_t* q = elems + b * kMxBlock;
    // amax as the largest magnitude's bits: non-negative float32 patterns order like their values, and every
    // NaN and inf pattern is at least 0x7F800000 (an integer max, which the compiler vectorises).
    std::uint32_t amax_bits = 0;
    for (std::size_t i = 0; i < kMxBlock; ++i)
      amax_bits = std::max(amax_bits, std::bit_cast<std::uint32_t>(v[i]) & 0x7FFFFFFFu);
    if (amax_bits >= 0x7F800000u) {
      scales[b] = kE8M0Nan;
      std::fill(q, q + kMxBlock, std::uint8_t{0});
      continue;
    }
    const int e = mx_shared_exp_of(std::bit_cast<float>(amax_bits), kT);
    scales[b] = static_cast<std::uint8_t>(e + 127);
    const float unscale = mx_unscale(e);
    float scaled[kMxBlock];
    for (std::size_t i = 0; i < kMxBlock; ++i) scaled[i] = v[i] * unscale;
    kEncode(scaled, q, kMxBlock);
  }
}

template <class O, MxElem kT>
void mx_encode(const float* x, std::uint8_t* y, std::size_t n) {
  mini_encode<O, mx_spec(kT), mx_model<kT>>(x, y, n);
}
template <class O, MxElem kT>
void mx_decode(const std::uint8_t* x, float* y, std::size_t n) {
  mini_decode<O, mx_spec(kT), mx_value_model<kT>>(x, y, n);
}

template <Fp8 kF>
constexpr std::string_view fp8_name_of() {
  return fp8_name(kF);
}
template <MxElem kT>
constexpr std::string_view mx_name_of() {
  return mx_name(kT);
}

/// The composed name <format>_convert__<isa>, stored once per (format, isa).
template <std::string_view (*kFormat)(), Isa kIsa>
struct ConversionName {
  static constexpr std::string_view kParts[3] = {kFormat(), "_convert__", paths::name_isa(kIsa)};
  static constexpr std::size_t kSize = kParts[0].size() + kParts[1].size() + kParts[2].size();
  static constexpr std::array<char, kSize> kChars = [] {
    std::array<char, kSize> c{};
    std::size_t n = 0;
    for (std::string_view s : kParts)
      for (char ch : s) c[n++] = ch;
    return c;
  }();
  static constexpr std::string_view value{kChars.data(), kSize};
};

/// One path's entry for one format.
template <class O, Fp8 kF, Isa kIsa>
constexpr Fp8Conversion fp8_conversion() {
  return {ConversionName<fp8_name_of<kF>, kIsa>::value,
          kF,
          kIsa,
          fp8_encode<O, kF, Fp8Overflow::saturate>,
          fp8_encode<O, kF, Fp8Overflow::nonsaturating>,
          fp8_decode<O, kF>,
          mini_round<O, fp8_spec(kF, Fp8Overflow::saturate)>};
}

/// The decoders through fp16 of one fp8 format and of one MX element type (half_decode with their fields): the
/// half entries' below, and a path's whose encoding stays on its integer lanes (avx512).
template <class H, Fp8 kF>
inline constexpr Fp8DecodeFn fp8_half_decoder =
    half_decode<H, fp8_spec(kF, Fp8Overflow::saturate), fp8_value_model<kF>>;
template <class H, MxElem kT>
inline constexpr Fp8DecodeFn mx_half_decoder = half_decode<H, mx_spec(kT), mx_value_model<kT>>;

/// One path's entry for one format, through fp16 (half_encode, half_decode).
template <class H, Fp8 kF, Isa kIsa>
constexpr Fp8Conversion fp8_half_conversion() {
  constexpr MiniSpec kSat = fp8_spec(kF, Fp8Overflow::saturate), kNonsat = fp8_spec(kF, Fp8Overflow::nonsaturating);
  constexpr Fp8EncodeFn kEncode = half_encode<H, kSat, fp8_model<kF, Fp8Overflow::saturate>>;
  return {ConversionName<fp8_name_of<kF>, kIsa>::value,
          kF,
          kIsa,
          kEncode,
          half_encode<H, kNonsat, fp8_model<kF, Fp8Overflow::nonsaturating>>,
          fp8_half_decoder<H, kF>,
          round_via<kEncode, fp8_half_decoder<H, kF>>};
}

/// One path's MX entry for one element type, through fp16.
template <class H, MxElem kT, Isa kIsa>
constexpr MxConversion mx_half_conversion() {
  constexpr MiniSpec kS = mx_spec(kT);
  constexpr MxQuantizeFn kQuantize = mx_quantize_blocks<half_encode<H, kS, mx_model<kT>>, kT>;
  return {ConversionName<mx_name_of<kT>, kIsa>::value,
          kT,
          kIsa,
          half_encode<H, kS, mx_model<kT>>,
          mx_half_decoder<H, kT>,
          kQuantize,
          mx_round_via<kQuantize, mx_half_decoder<H, kT>>};
}

template <class O, MxElem kT, Isa kIsa>
constexpr MxConversion mx_conversion() {
  return {ConversionName<mx_name_of<kT>, kIsa>::value,
          kT,
          kIsa,
          mx_encode<O, kT>,
          mx_decode<O, kT>,
          mx_quantize_blocks<mx_encode<O, kT>, kT>,
          mini_round_blocks<O, mx_spec(kT), kT>};
}

/// One path's MX list: the five element types.
template <class O, Isa kIsa>
constexpr std::array<MxConversion, 5> mx_conversions_of() {
  return {mx_conversion<O, MxElem::e4m3, kIsa>(), mx_conversion<O, MxElem::e5m2, kIsa>(),
          mx_conversion<O, MxElem::e3m2, kIsa>(), mx_conversion<O, MxElem::e2m3, kIsa>(),
          mx_conversion<O, MxElem::e2m1, kIsa>()};
}
/// The same through fp16.
template <class H, Isa kIsa>
constexpr std::array<MxConversion, 5> mx_half_conversions_of() {
  return {mx_half_conversion<H, MxElem::e4m3, kIsa>(), mx_half_conversion<H, MxElem::e5m2, kIsa>(),
          mx_half_conversion<H, MxElem::e3m2, kIsa>(), mx_half_conversion<H, MxElem::e2m3, kIsa>(),
          mx_half_conversion<H, MxElem::e2m1, kIsa>()};
}

/// A path's fp8 and MX lists (rows.hpp's Conversions): the integer algorithm on its 32-bit lanes O ...
template <class O, Isa kIsa>
struct IntegerConversions {
  static constexpr std::array<Fp8Conversion, 2> kFp8{fp8_conversion<O, Fp8::e4m3, kIsa>(),
                                                     fp8_conversion<O, Fp8::e5m2, kIsa>()};
  static constexpr std::array<MxConversion, 5> kMx = mx_conversions_of<O, kIsa>();
};
/// ... or through fp16 on its H.
template <class H, Isa kIsa>
struct HalfConversions {
  static constexpr std::array<Fp8Conversion, 2> kFp8{fp8_half_conversion<H, Fp8::e4m3, kIsa>(),
                                                     fp8_half_conversion<H, Fp8::e5m2, kIsa>()};
  static constexpr std::array<MxConversion, 5> kMx = mx_half_conversions_of<H, kIsa>();
};

}  // namespace halfmap::detail
