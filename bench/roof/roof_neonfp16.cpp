// roof/fma/neonfp16: fmla on .8h (8 fp16 lanes, 2 flops each).
#include <arm_neon.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // acc = acc + x * x with x = 2^-7 (fp16 0x2000): each step adds 2^-14, so an accumulator grows to 2^-3 and
  // stops there (the addend falls below half an ulp): normal and finite however long the run.
  const float16x8_t x = vreinterpretq_f16_u16(vdupq_n_u16(0x2000));
  float16x8_t acc[kAcc];
  for (auto& v : acc) v = vreinterpretq_f16_u16(vdupq_n_u16(0));
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = vfmaq_f16(v, x, x);
  }
  float32x4_t s = vdupq_n_f32(0.0f);
  for (auto& v : acc) s = vaddq_f32(s, vcvt_f32_f16(vget_low_f16(v)));
  return vaddvq_f32(s);
}

}  // namespace

IsaLoops loops_neonfp16() { return {"fmla .8h (fp16)", 8.0 * 2 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr}; }

}  // namespace halfmap::bench::roof
