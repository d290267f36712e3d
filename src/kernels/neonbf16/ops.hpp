// The FEAT_BF16 primitives (ARMv8.2-A +bf16): BFDOT (vbfdotq_f32) adds to each of 4 f32 lanes the dot product of
// one bf16 pair of each operand, BFMMLA (vbfmmlaq_f32) adds to a 2 × 2 f32 block the product of a 2 × 4 and a
// 4 × 2 bf16 block, as two chained BFDotAdd steps per element (pairs 0-1, then 2-3). BFDotAdd rounds to odd,
// reads subnormal inputs as zero, flushes tiny results and gives the default NaN whatever FPCR says (without
// FEAT_EBF16, or with FPCR.EBF = 0: Linux leaves it 0); src/models/bfdot.cpp is its model. BFCVT is not used:
// the outputs are rounded to bf16 by bf16_round below, round to nearest even with subnormals kept, exactly as
// the portable to_bf16.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::neonbf16, and the scalar steps (fold, final rounding, bias add) are the out-of-line
// functions of kernels/common/, compiled without ISA flags.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace halfmap::paths::neonbf16 {

struct Tag {};

inline bfloat16x8_t load_bf16(const std::uint16_t* p) { return vreinterpretq_bf16_u16(vld1q_u16(p)); }
/// All lanes `bits`, through a general register: GCC 12 would otherwise materialise a constant such as 0x3F80
/// with `fmov v.8h, #imm`, an FP16 instruction that this folder's flags (and a CPU without FEAT_FP16) lack.
inline bfloat16x8_t set1_bf16(std::uint16_t bits) {
  std::uint32_t r = bits;
  __asm__("" : "+r"(r));
  return vreinterpretq_bf16_u16(vdupq_n_u16(std::uint16_t(r)));
}

/// lane l += BFDotAdd(a[2l], a[2l+1], b[2l], b[2l+1]).
inline float32x4_t bfdot(float32x4_t acc, bfloat16x8_t a, bfloat16x8_t b) { return vbfdotq_f32(acc, a, b); }

/// f32 -> bf16 bits, 4 lanes, round to nearest even (integer ops: subnormals kept, a NaN keeps its sign and top
/// payload bits and is made quiet), the portable to_bf16's result.
inline uint16x4_t bf16_round(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7FFF)), lsb), 16);
  const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x0040));
  const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7FFFFFFF)), vdupq_n_u32(0x7F800000));
  return vmovn_u32(vbslq_u32(nan, quiet, rounded));
}

}  // namespace halfmap::paths::neonbf16
