// The AVX-512F/BW/VL primitives: every intrinsic the avx512 kernels use, for the algorithms written once in
// kernels/common/ (F32 is nn.hpp's M, the f32 tile of microkernel.hpp and reduce.hpp's vector; F16 is nn.hpp's
// H, the fp16 tile and reduce.hpp's fp16 vector). avx512bf16 and avx512fp16 build on F32T too.
//
// Why no code compiled with higher-ISA flags can be merged into this folder's object, nor this folder's into a
// lower one: everything here is a template over a tag type, and each folder that includes this header
// (avx512, avx512bf16, avx512fp16) instantiates it with a tag of its own namespace (halfmap::paths::<isa>::Tag)
// and the common templates (vec_ops.hpp's bases too) only with its tag or those instantiations. So every inline
// function compiled with a folder's flags has a mangled name that names that folder's ISA, and the linker can only
// fold it with copies made under the same flags. Nothing in this header may be a plain (non-template) inline
// function.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "halfmap/f16_model.hpp"
#include "kernels/common/vec_ops.hpp"

namespace halfmap::paths::avx512 {

/// f32 on one zmm register (16 lanes).
template <class Tag>
struct F32T : detail::F32Operators<Tag> {
  using V = __m512;
  using Packed = float;  // GEMM panels
  using Acc = float;     // GEMM accumulator
  static constexpr std::size_t kW = 16;
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_packed(const float* p) { return _mm512_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  // vscalefps: p·2^n rounded once (overflow to inf, subnormal results rounded), the same bits as the two-step
  // scaling of the other paths, whose first product is exact.
  static V scale2n(V p, V n) { return _mm512_scalef_ps(p, n); }
  static V nan_pass(V x, V y) { return _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x); }
  /// |mag| with the sign bit of sgn (integer logic: _mm512_and_ps would need AVX512DQ).
  static V copysign(V mag, V sgn) {
    const __m512i m = _mm512_set1_epi32(int(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(m, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(m, _mm512_castps_si512(sgn))));
  }
  /// 16 fp16 values widened exactly / rounded to fp16 (round to nearest even).
  static V load_f16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store_f16(std::uint16_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  /// n fp16 values widened / n f32 values rounded, any n (masked tails read and write nothing past n).
  static void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_f16(src + i));
    if (i < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
  }
  static void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) store_f16(dst + i, _mm512_loadu_ps(src + i));
    if (i < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      _mm256_mask_storeu_epi16(dst + i, m,
                               _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT));
    }
  }
};

/// fp16 arithmetic per operation through conversions (detail::F16ViaF32 on F32T): every add, sub and f32 FMA is
/// rounded back to fp16 with vcvtps2ph.
template <class Tag>
struct F16T : detail::F16ViaF32<F32T<Tag>, F16T<Tag>> {
  using V = __m512;
  static V round(V v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static V set1(std::uint16_t bits) { return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(bits))); }
  /// NaN lanes become the f32 quiet NaN 0x7FC00000, which narrows to fp16's canonical 0x7E00.
  static V canon(V v) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v,
                                _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  }
  // store() narrows with vcvtps2ph, so an unrounded f32 result is rounded once on its way to memory.
  template <class ExpF32>
  static V exp_store_with(std::uint16_t* p, V t, ExpF32 exp) {
    const __m256i e = _mm512_cvtps_ph(exp(t), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), e);
    return _mm512_cvtph_ps(e);
  }
  static V rot(V v, unsigned w) {
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx = _mm512_and_si512(_mm512_add_epi32(iota, _mm512_set1_epi32(int(w))), _mm512_set1_epi32(15));
    return _mm512_permutexvar_ps(idx, v);
  }
  static std::uint16_t lane0(V v) {
    return static_cast<std::uint16_t>(
        _mm_extract_epi16(_mm256_castsi256_si128(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)), 0));
  }
};

/// 32-bit integer lanes on one zmm register (16 lanes): the fp8 conversions (kernels/common/fp8_codec.hpp).
template <class Tag>
struct I32T : detail::IntOperators<Tag, detail::VecOf<std::uint32_t, 64>, detail::VecOf<std::int32_t, 64>> {
  using I = __m512i;
  using M = __mmask16;
  static constexpr std::size_t kW = 16;
  static I load(const float* p) { return _mm512_castps_si512(_mm512_loadu_ps(p)); }
  static void store(float* p, I v) { _mm512_storeu_ps(p, _mm512_castsi512_ps(v)); }
  static I load_bytes(const std::uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store_bytes(std::uint8_t* p, I v) {  // vpmovdb: each lane's low byte
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
  static I set1(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  // clang-format off
  template <int s>
  static I srl(I v) { return _mm512_srli_epi32(v, s); }
  template <int s>
  static I sll(I v) { return _mm512_slli_epi32(v, s); }
  // clang-format on
  static M gt(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static M eq(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static I select(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }
  static I i2f_scaled(I v, float c) {
    return _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(c)));
  }
};

/// This folder's own instantiations.
struct Tag {};
using F32 = F32T<Tag>;
using F16 = F16T<Tag>;
using I32 = I32T<Tag>;

/// The fp8 conversions through fp16 (kernels/common/fp8_codec.hpp's half_encode, half_decode) on 16 values: as
/// 16-bit lanes on a ymm register (U) and as float32 on a zmm (F). vcvtps2ph rounds to nearest even (halfmap
/// never changes MXCSR's rounding), vcvtph2ps widens exactly, both keep subnormals (FTZ and DAZ off). The lane
/// masks of the comparisons become U vectors through vpmovm2w (AVX512BW/VL). The avx512 path decodes with it.
template <class Tag>
struct H16T : detail::IntOperators<Tag, detail::VecOf<std::uint16_t, 32>, detail::VecOf<std::uint16_t, 32>,
                                   detail::VecOf<std::uint64_t, 32>> {
  using U = __m256i;
  using F = __m512;
  static constexpr std::size_t kW = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F scale(F v, float c) { return _mm512_mul_ps(v, _mm512_set1_ps(c)); }
  static U to_f16(F v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
  static F to_f32(U h) { return _mm512_cvtph_ps(h); }
  static U above(F a, F b) {
    return _mm256_movm_epi16(_mm512_cmp_ps_mask(_mm512_abs_ps(a), _mm512_abs_ps(b), _CMP_GT_OQ));
  }
  static U differ(F a, F b) { return _mm256_movm_epi16(_mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ)); }
  static U load_bytes(const std::uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store_bytes(std::uint8_t* p, U v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtepi16_epi8(v));
  }
  static U set1(std::uint16_t v) { return _mm256_set1_epi16(static_cast<short>(v)); }
  // clang-format off
  template <int s>
  static U srl(U v) { return _mm256_srli_epi16(v, s); }
  template <int s>
  static U sll(U v) { return _mm256_slli_epi16(v, s); }
  // clang-format on
  static U gt(U a, U b) { return _mm256_movm_epi16(_mm256_cmpgt_epu16_mask(a, b)); }
  static U select(U m, U a, U b) { return _mm256_blendv_epi8(b, a, m); }
};

}  // namespace halfmap::paths::avx512
