// The fp8 and MX storage conversions of every path (src/kernels/common/fp8_convert.hpp), listed apart from the
// kernels of registry.hpp: they convert storage, they are not ops of a precision mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "halfmap/fp8.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/registry.hpp"  // Isa, isa_enabled

namespace halfmap {

/// n float32 values rounded to fp8: y[i] = to_fp8(x[i], format, overflow) (include/halfmap/fp8.hpp) bit for bit.
/// Arrays need no alignment; nothing is read or written past n.
using Fp8EncodeFn = void (*)(const float* x, std::uint8_t* y, std::size_t n);
/// n fp8 values widened exactly to float32: y[i] = from_fp8(x[i], format) bit for bit, every NaN pattern giving the
/// quiet NaN 0x7FC00000 (no sign, no payload), as from_fp8 does.
using Fp8DecodeFn = void (*)(const std::uint8_t* x, float* y, std::size_t n);
/// n float32 values onto the fp8 grid, saturating, as the scaled modes cast: y[i] = from_fp8(to_fp8(x[i] · scale,
/// format, saturate), format) · unscale, each product in float32, bit for bit (a NaN: 0x7FC00000 · unscale), with
/// no fp8 byte in between. y may be x; nothing is read or written past n.
using Fp8RoundFn = void (*)(const float* x, std::size_t n, float scale, float unscale, float* y);

/// One path's conversions between float32 and one fp8 format, named <format>_convert__<isa> (e4m3_convert__avx2).
/// Listed apart from the Kernels: they are storage conversions, not ops of a precision mode.
struct Fp8Conversion {
  std::string_view name;
  Fp8 format;
  Isa isa;
  Fp8EncodeFn encode_saturate;       // Fp8Overflow::saturate
  Fp8EncodeFn encode_nonsaturating;  // Fp8Overflow::nonsaturating
  Fp8DecodeFn decode;
  Fp8RoundFn round;  // saturating, onto the grid in float32
  Fp8EncodeFn encode(Fp8Overflow o) const {
    return o == Fp8Overflow::saturate ? encode_saturate : encode_nonsaturating;
  }
};
/// Every fp8 conversion compiled into this build, ref first, whether or not this CPU can run it.
std::span<const Fp8Conversion> fp8_conversions();
inline bool conversion_enabled(const Fp8Conversion& c) { return isa_enabled(c.isa); }

/// `blocks` OCP MX blocks of kMxBlock float32 values each (x, contiguous) quantised as mx.hpp's mx_quantize does,
/// bit for bit: scales[b] the E8M0 scale of block b, elems[32·b + i] its elements (one per byte, in the low
/// mx_format(t).bits bits).
using MxQuantizeFn = void (*)(const float* x, std::size_t blocks, std::uint8_t* scales, std::uint8_t* elems);
/// n float32 values in MX blocks of kMxBlock along x (the last block padded with zeros), read back exactly with no
/// byte in between: y[i] = mx_value(mx_quantize(x[i]'s block), i's place) bit for bit (NaN for every value of a
/// block holding a NaN or an inf). y may be x; nothing is read or written past n.
using MxRoundFn = void (*)(const float* x, std::size_t n, float* y);

/// One path's conversions for one MX element type, named <mx format>_convert__<isa> (mxfp4_e2m1_convert__avx2):
/// encode is mx_round_elem elementwise (a value already divided by its scale, to nearest even, saturating, NaN as
/// +0), decode mx_elem_value (the element's value without the scale; the FP8 elements' NaN patterns as
/// 0x7FC00000), quantize whole blocks, round blocks along an array read back in float32.
struct MxConversion {
  std::string_view name;
  MxElem elem;
  Isa isa;
  Fp8EncodeFn encode;
  Fp8DecodeFn decode;
  MxQuantizeFn quantize;
  MxRoundFn round;  // quantised and read back in float32
};
/// Every MX conversion compiled into this build, ref first.
std::span<const MxConversion> mx_conversions();
inline bool conversion_enabled(const MxConversion& c) { return isa_enabled(c.isa); }

}  // namespace halfmap
