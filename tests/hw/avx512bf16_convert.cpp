// Compiled with -mavx512f -mavx512vl -mavx512bf16 only.
#include <immintrin.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void avx512bf16_narrow_range(std::uint32_t first, std::size_t count, std::uint16_t* out) {
  __m512i v = _mm512_add_epi32(_mm512_set1_epi32(int(first)),
                               _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i step = _mm512_set1_epi32(16);
  for (std::size_t i = 0; i < count; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_castsi512_ps(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(h));
    v = _mm512_add_epi32(v, step);
  }
}

}  // namespace halfmap::test::hw
