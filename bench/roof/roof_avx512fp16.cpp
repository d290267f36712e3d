// roof/fma/avx512fp16: vfmadd*ph on zmm (32 fp16 lanes, 2 flops each).
#include <immintrin.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

constexpr int kAcc = 16;

float fma(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 (fp16 0x3800) converges to 1 from 0: always normal and finite in fp16 too. Set from
  // the bit pattern, as the kernels do, so no _Float16 arithmetic is needed.
  const __m512h a = _mm512_castsi512_ph(_mm512_set1_epi16(0x3800));
  __m512h acc[kAcc];
  for (auto& v : acc) v = _mm512_setzero_ph();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm512_fmadd_ph(v, a, a);
  }
  __m512 s = _mm512_setzero_ps();
  for (auto& v : acc) s = _mm512_add_ps(s, _mm512_cvtxph_ps(_mm512_castph512_ph256(v)));
  return _mm512_reduce_add_ps(s);
}

}  // namespace

IsaLoops loops_avx512fp16() { return {"vfmadd*ph zmm (fp16)", 32.0 * 2 * kAcc, fma, {}, 0, {}, nullptr, 0, nullptr}; }

}  // namespace halfmap::bench::roof
