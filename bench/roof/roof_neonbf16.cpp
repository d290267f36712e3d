// roof/fma/neonbf16: BFMMLA (FEAT_BF16), a 2 × 4 by 4 × 2 bf16 block into 4 f32 lanes: 16 multiply-adds, 32
// flops per instruction (the dense kernels' instruction; the reductions' BFDOT does 8 multiply-adds).
#include <arm_neon.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // acc += 4 · x·x per lane with x = 2^-7 (bf16 0x3C00): 2^-12 per step; rounded to odd, a lane stops growing
  // in value near 2^12 (the addend falls below an ulp) and stays normal and finite however long the run.
  const bfloat16x8_t x = vreinterpretq_bf16_u16(vdupq_n_u16(0x3C00));
  float32x4_t acc[kAcc];
  for (auto& v : acc) v = vdupq_n_f32(0.0f);
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (int a = 0; a < kAcc; ++a) acc[a] = vbfmmlaq_f32(acc[a], x, x);
  }
  float32x4_t s = vdupq_n_f32(0.0f);
  for (auto& v : acc) s = vaddq_f32(s, v);
  return vaddvq_f32(s);
}

}  // namespace

IsaLoops loops_neonbf16() {
  return {"bfmmla .4s (2x4 by 4x2 bf16 into f32)", 32.0 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr};
}

}  // namespace halfmap::bench::roof
