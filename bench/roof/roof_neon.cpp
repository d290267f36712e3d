// roof/fma/neon: fmla on .4s (4 f32 lanes, 2 flops each). The read roof's baseline 16-byte loop already uses
// NEON's widest registers.
#include <arm_neon.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

// 16 chains of 32 registers: enough for 4 FMA pipes at 4 cycles' latency (Neoverse V1/V2).
constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // acc = acc + x * x with x * x = 2^-30: an accumulator grows to at most 2^-6 (then the addend is below half
  // an ulp), normal and finite however long the run.
  const float32x4_t x = vdupq_n_f32(0x1p-15f);
  float32x4_t acc[kAcc];
  for (auto& v : acc) v = vdupq_n_f32(0.0f);
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = vfmaq_f32(v, x, x);
  }
  float32x4_t s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = vaddq_f32(s, acc[i]);
  return vaddvq_f32(s);
}

}  // namespace

IsaLoops loops_neon() { return {"fmla .4s (f32)", 4.0 * 2 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr}; }

}  // namespace halfmap::bench::roof
