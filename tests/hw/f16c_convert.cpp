// Compiled with -mavx -mf16c only (AVX2 is not needed: the patterns are generated with SSE2 integer adds).
#include <immintrin.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void f16c_narrow_range(std::uint32_t first, std::size_t count, std::uint16_t* out) {
  const __m128i step = _mm_set1_epi32(8);
  __m128i lo = _mm_add_epi32(_mm_set1_epi32(int(first)), _mm_setr_epi32(0, 1, 2, 3));
  __m128i hi = _mm_add_epi32(lo, _mm_set1_epi32(4));
  for (std::size_t i = 0; i < count; i += 8) {
    const __m256 v = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_castsi128_ps(lo)), _mm_castsi128_ps(hi), 1);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    lo = _mm_add_epi32(lo, step);
    hi = _mm_add_epi32(hi, step);
  }
}

void f16c_widen_all(std::uint32_t* out) {
  __m128i h = _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7);
  const __m128i step = _mm_set1_epi16(8);
  for (std::size_t i = 0; i < 65536; i += 8) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out + i), _mm256_cvtph_ps(h));
    h = _mm_add_epi16(h, step);
  }
}

}  // namespace halfmap::test::hw
