// Baseline arm64 Advanced SIMD: fcvtn / fcvtl need no extra flags.
#include <arm_neon.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void neon_narrow(const std::uint32_t* patterns, std::size_t count, std::uint16_t* out) {
  for (std::size_t i = 0; i < count; i += 4) {
    const float32x4_t v = vreinterpretq_f32_u32(vld1q_u32(patterns + i));
    vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(v)));
  }
}

void neon_widen_all(std::uint32_t* out) {
  const uint16_t init[4] = {0, 1, 2, 3};
  uint16x4_t h = vld1_u16(init);
  const uint16x4_t step = vdup_n_u16(4);
  for (std::size_t i = 0; i < 65536; i += 4) {
    vst1q_u32(out + i, vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(h))));
    h = vadd_u16(h, step);
  }
}

}  // namespace halfmap::test::hw
