// Compiled with -march=armv8.2-a+bf16 only: BFDOT and BFMMLA on raw bit patterns.
#include <arm_neon.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void neonbf16_bfdot(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                    std::uint32_t* out) {
  for (std::size_t i = 0; i < count; i += 4) {
    const bfloat16x8_t av = vreinterpretq_bf16_u16(vld1q_u16(a + 2 * i));
    const bfloat16x8_t bv = vreinterpretq_bf16_u16(vld1q_u16(b + 2 * i));
    vst1q_u32(out + i, vreinterpretq_u32_f32(vbfdotq_f32(vreinterpretq_f32_u32(vld1q_u32(acc + i)), av, bv)));
  }
}

void neonbf16_bfmmla(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t blocks,
                     std::uint32_t* out) {
  for (std::size_t i = 0; i < blocks; ++i) {
    const bfloat16x8_t av = vreinterpretq_bf16_u16(vld1q_u16(a + 8 * i));
    const bfloat16x8_t bv = vreinterpretq_bf16_u16(vld1q_u16(b + 8 * i));
    const float32x4_t c = vreinterpretq_f32_u32(vld1q_u32(acc + 4 * i));
    vst1q_u32(out + 4 * i, vreinterpretq_u32_f32(vbfmmlaq_f32(c, av, bv)));
  }
}

}  // namespace halfmap::test::hw
