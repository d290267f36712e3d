// Compiled with -mavx512f -mavx512bf16 only: vdpbf16ps on raw bit patterns (bf16_test.cpp).
#include <immintrin.h>

#include "hw/hw_convert.hpp"

namespace halfmap::test::hw {

void avx512bf16_dpbf16ps(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                         std::uint32_t* out) {
  for (std::size_t i = 0; i < count; i += 16) {
    const __m512 c = _mm512_castsi512_ps(_mm512_loadu_si512(acc + i));
    const __m512bh av = (__m512bh)_mm512_loadu_si512(a + 2 * i), bv = (__m512bh)_mm512_loadu_si512(b + 2 * i);
    _mm512_storeu_si512(out + i, _mm512_castps_si512(_mm512_dpbf16_ps(c, av, bv)));
  }
}

}  // namespace halfmap::test::hw
