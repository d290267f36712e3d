// The SVE primitives (ARMv8.2-A +sve, with FEAT_FP16's scalar fp16): vector-length agnostic, so a register
// holds svcntw() f32 or svcnth() fp16 lanes, 4 to 64 or 8 to 128, known only at run time. Sizeless types cannot
// be struct members, array elements or compile-time widths, so the common algorithms (their ops.hpp roles need a
// constexpr kW and arrays of V) do not apply; the kernels (sve/kernels.cpp) are written here on these helpers.
//
// Vector-length independence: every reduction accumulates into a fixed number of *logical* lanes (kF32Lanes f32
// lanes, kF16Lanes fp16 lanes), element i into logical lane i % lanes, whatever the vector length: a block of
// that many elements is spread over Regs(vl) registers, register r holding logical lanes [r·vl, (r + 1)·vl) under
// the predicate whilelt(r·vl, lanes) (at 2048 bits one fp16 register is wider than the block and runs half
// predicated). So the order of operations, and with it every result bit, is the same at every vector length.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::sve, the kernels in an anonymous namespace, and the scalar steps (fold, rounding,
// dense epilogues) are the out-of-line functions of kernels/common/, compiled without ISA flags. No std::
// container or algorithm is instantiated (their inline code would be compiled with +sve).
#pragma once

#include <arm_sve.h>

#include <cstddef>
#include <cstdint>

namespace halfmap::paths::sve {

struct Tag {};

/// The logical lane counts: f32 and f16_f32acc reductions (as neonfhm's 8 f32x4 registers), f16 reductions (as
/// neonfp16's 8 float16x8 registers), so the kernels are bit-identical to those paths' orders.
inline constexpr unsigned kF32Lanes = 32, kF16Lanes = 64;

/// Registers needed to hold `lanes` logical lanes at `vl` lanes per register: 1, 2, 4 or 8 (vl >= lanes / 8,
/// since vl >= 4 f32 or 8 fp16 lanes and lanes = 8 · 4 or 8 · 8).
inline constexpr unsigned regs_for(unsigned lanes, std::uint64_t vl) {
  return vl >= lanes ? 1 : 2 * vl >= lanes ? 2 : 4 * vl >= lanes ? 4 : 8;
}

/// fp16 bits to/from SVE fp16 vectors; fp16 widened exactly to f32 (the value in the low half of each 32-bit
/// container: ld1h into .s lanes, then fcvt .s from .h).
inline svfloat16_t load_f16(svbool_t pg, const std::uint16_t* p) { return svreinterpret_f16_u16(svld1_u16(pg, p)); }
inline void store_f16(svbool_t pg, std::uint16_t* p, svfloat16_t v) { svst1_u16(pg, p, svreinterpret_u16_f16(v)); }
inline svfloat32_t load_f16_as_f32(svbool_t pg, const std::uint16_t* p) {
  return svcvt_f32_f16_x(pg, svreinterpret_f16_u32(svld1uh_u32(pg, p)));
}
inline svfloat32_t dup_f16_as_f32(std::uint16_t bits) {
  return svcvt_f32_f16_x(svptrue_b32(), svreinterpret_f16_u32(svdup_n_u32(bits)));
}
inline svfloat16_t dup_f16(std::uint16_t bits) { return svreinterpret_f16_u16(svdup_n_u16(bits)); }

}  // namespace halfmap::paths::sve
