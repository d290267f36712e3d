// The FEAT_FHM primitives (ARMv8.2-A +fp16fml): FMLAL and FMLAL2 take the low and the high four fp16 lanes of two
// q registers, multiply them exactly and add each product into a 32-bit lane with one rounding (FPMulAddH; see
// src/models/f32acc.cpp for why that is fmaf on the widened operands). Eight fp16 elements so feed two f32x4
// accumulators: elements 0-3 the "low" one, 4-7 the "high" one, which keeps element i in f32 lane i % 8.
// fp16 subnormal operands are kept while FPCR.FZ16 is off and f32 subnormals while FPCR.FZ is off, the Linux
// defaults; halfmap never sets either.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::neonfhm, and the scalar steps (fold, final rounding, dense epilogue) are the
// out-of-line functions of kernels/common/, compiled without ISA flags.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace halfmap::paths::neonfhm {

struct Tag {};

/// Two f32x4 accumulators fed by one q register of fp16 values.
struct Fhm {
  static constexpr std::size_t kW = 8;  // fp16 elements per step
  float32x4_t lo, hi;
  static Fhm zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
  static float16x8_t load(const std::uint16_t* p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
  static float16x8_t set1(std::uint16_t bits) { return vreinterpretq_f16_u16(vdupq_n_u16(bits)); }
  /// lane l += a[l]·b[l] for l = 0..7 (FMLAL on lanes 0-3, FMLAL2 on lanes 4-7), one rounding each.
  void fmlal(float16x8_t a, float16x8_t b) {
    lo = vfmlalq_low_f16(lo, a, b);
    hi = vfmlalq_high_f16(hi, a, b);
  }
  /// The 8 f32 lanes, element order.
  void store(float* p) const {
    vst1q_f32(p, lo);
    vst1q_f32(p + 4, hi);
  }
};

}  // namespace halfmap::paths::neonfhm
