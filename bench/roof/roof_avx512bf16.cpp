// roof/fma/avx512bf16: vdpbf16ps on zmm. Each of its 16 f32 lanes adds two bf16 products to the accumulator:
// 2 products + 2 additions = 4 flops per f32 lane, i.e. 2 per bf16 product, the counting of the dense
// benchmarks' 2·M·N·K.
#include <immintrin.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // Products of 2^-15 * 2^-15 (bf16 0x3800 = 2^-15, normal: vdpbf16ps would flush subnormals): each step adds
  // 2^-29, so the accumulators stay far from overflow however long the run.
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3800);
  __m512 acc[kAcc];
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, x, x);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace

// No read loop: the avx512 one has the same loads.
IsaLoops loops_avx512bf16() {
  return {"vdpbf16ps zmm (bf16 pairs into f32)", 16.0 * 4 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr};
}

}  // namespace halfmap::bench::roof
