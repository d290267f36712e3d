// Compiled with -march=armv8.2-a+fp16+fp16fml only: FMLAL and FMLAL2 on raw bit patterns.
#include <arm_neon.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void neonfhm_fmlal(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                   std::uint32_t* out) {
  for (std::size_t i = 0; i < count; i += 8) {
    const float16x8_t av = vreinterpretq_f16_u16(vld1q_u16(a + i));
    const float16x8_t bv = vreinterpretq_f16_u16(vld1q_u16(b + i));
    const float32x4_t lo = vfmlalq_low_f16(vreinterpretq_f32_u32(vld1q_u32(acc + i)), av, bv);
    const float32x4_t hi = vfmlalq_high_f16(vreinterpretq_f32_u32(vld1q_u32(acc + i + 4)), av, bv);
    vst1q_u32(out + i, vreinterpretq_u32_f32(lo));
    vst1q_u32(out + i + 4, vreinterpretq_u32_f32(hi));
  }
}

}  // namespace halfmap::test::hw
