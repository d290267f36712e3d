// roof/fma/neonfhm: FMLAL / FMLAL2 (FEAT_FHM), 4 f32 lanes each fed by an fp16 product, 2 flops per lane.
#include <arm_neon.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // acc = acc + x·x with x = 2^-7 (fp16 0x2000): each step adds 2^-14 to an f32 lane, which stops growing at
  // 2^10 (the addend falls below half an ulp): normal and finite however long the run.
  const float16x8_t x = vreinterpretq_f16_u16(vdupq_n_u16(0x2000));
  float32x4_t acc[kAcc];
  for (auto& v : acc) v = vdupq_n_f32(0.0f);
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (int a = 0; a < kAcc; a += 2) {
      acc[a] = vfmlalq_low_f16(acc[a], x, x);
      acc[a + 1] = vfmlalq_high_f16(acc[a + 1], x, x);
    }
  }
  float32x4_t s = vdupq_n_f32(0.0f);
  for (auto& v : acc) s = vaddq_f32(s, v);
  return vaddvq_f32(s);
}

}  // namespace

IsaLoops loops_neonfhm() {
  return {"fmlal/fmlal2 .4s (fp16 products into f32)", 4.0 * 2 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr};
}

}  // namespace halfmap::bench::roof
