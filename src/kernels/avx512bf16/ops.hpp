// The AVX512-BF16 primitives: bf16 storage on AVX-512F f32 (avx512::F32T), widened exactly (a 16-bit shift) and
// rounded with vcvtneps2bf16 (round to nearest even, NaN kept quiet; per Intel's SDM it ignores MXCSR and
// flushes f32-subnormal results to zero, unlike the portable to_bf16: that is this path's semantics), or with
// the portable rounding written in integer ops (to_bf16_exact) where the dense path keeps subnormals. The pair
// dot product vdpbf16ps has no common shape and is used directly by kernels.cpp.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::avx512bf16, the avx512 templates are instantiated with this namespace's Tag, and
// the common templates only with these types (see avx512/ops.hpp).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/avx512/ops.hpp"

namespace halfmap::paths::avx512bf16 {

struct Tag {};

/// AVX-512F f32, plus bf16 loads and stores (storage_traits.hpp's Bf16Storage).
struct F32 : avx512::F32T<Tag> {
  /// 16 bf16 values widened exactly (a 16-bit shift).
  static V load_bf16(const std::uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  /// 16 values rounded with vcvtneps2bf16 (flushes f32-subnormal results to zero, see above).
  static void store_bf16(std::uint16_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v));
  }
};

/// f32 -> bf16, round to nearest even, exactly as the portable to_bf16 (half.hpp): subnormal results are kept
/// (vcvtneps2bf16 would flush them) and a NaN keeps its sign and top payload bits, made quiet.
inline __m256i to_bf16_exact(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

/// n bf16 values widened to f32 exactly (a 16-bit shift, NaNs as they are), any n (masked tail).
inline void bf16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, F32::load_bf16(src + i));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
}

/// n f32 values rounded to bf16 with to_bf16_exact, any n (masked tail).
inline void f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), to_bf16_exact(_mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(dst + i, m, to_bf16_exact(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

}  // namespace halfmap::paths::avx512bf16
