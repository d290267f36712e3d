// roof/fma/avx2: vfmadd*ps on ymm (8 f32 lanes, 2 flops each); the read loop with 32-byte loads.
#include <immintrin.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

// 12 chains: Zen 4 and recent Intel cores issue 2 FMAs a cycle at 4 cycles' latency, so 8 are needed; 12 plus the
// two operands fit AVX2's 16 registers without spilling.
constexpr int kAcc = 12;

float fma(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 converges to 1 from 0: always normal and finite.
  const __m256 a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(0.5f);
  __m256 acc[kAcc];
  for (auto& v : acc) v = _mm256_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm_cvtss_f32(_mm256_castps256_ps128(s));
}

std::uint64_t read(const unsigned char* p, std::size_t bytes) {
  __m256i acc[8];
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (std::size_t i = 0; i < bytes; i += 256) {
    for (int a = 0; a < 8; ++a) {
      acc[a] = _mm256_add_epi64(acc[a], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * a)));
    }
  }
  for (int a = 1; a < 8; ++a) acc[0] = _mm256_add_epi64(acc[0], acc[a]);
  // Lanes summed as unsigned (a signed 64-bit sum may overflow: undefined behaviour; these sums wrap by design).
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

IsaLoops loops_avx2() { return {"vfmadd*ps ymm (f32)", 8.0 * 2 * kAcc, fma, read, 32}; }

}  // namespace halfmap::bench::roof
