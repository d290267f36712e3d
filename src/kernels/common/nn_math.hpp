// f32 math traits (the M of nn.hpp) per ISA: the primitives halfmap's exp and the f32 parts of the losses and
// softmax are written in. Each ISA file instantiates them with its own anonymous-namespace tag, so copies compiled
// with different flags stay apart (see reduce.hpp); a section is compiled only where its ISA is enabled by the
// file's flags. Tests can instantiate them too, to check exp_f32_generic<...> against exp_f32 bit for bit.
#pragma once

#include <cstddef>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace halfmap::detail {

#if defined(__AVX2__) && defined(__FMA__)
template <class Tag>
struct Avx2Math {
  using V = __m256;
  static constexpr std::size_t kW = 8;
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V scale2n(V p, V n) {
    const __m256i ni = _mm256_cvtps_epi32(n);  // exact: n is an integer
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const V s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const V s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  }
  static V nan_pass(V x, V y) { return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
};
#endif

#if defined(__AVX512F__)
template <class Tag>
struct Avx512Math {
  using V = __m512;
  static constexpr std::size_t kW = 16;
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  // vscalefps: p·2^n rounded once (overflow to inf, subnormal results rounded), the same bits as the two-step
  // scaling of the other paths, whose first product is exact.
  static V scale2n(V p, V n) { return _mm512_scalef_ps(p, n); }
  static V nan_pass(V x, V y) { return _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x); }
};

#endif

#if defined(__aarch64__)
template <class Tag>
struct NeonMath {
  using V = float32x4_t;
  static constexpr std::size_t kW = 4;
  static V set1(float v) { return vdupq_n_f32(v); }
  static V load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, V v) { vst1q_f32(p, v); }
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static V sub(V a, V b) { return vsubq_f32(a, b); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V div(V a, V b) { return vdivq_f32(a, b); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static V min(V a, V b) { return vminq_f32(a, b); }
  static V max(V a, V b) { return vmaxq_f32(a, b); }
  static V scale2n(V p, V n) {
    const int32x4_t ni = vcvtq_s32_f32(n);  // exact: n is an integer
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const V s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const V s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
  }
  static V nan_pass(V x, V y) { return vbslq_f32(vceqq_f32(x, x), y, vaddq_f32(x, x)); }
};
#endif

}  // namespace halfmap::detail
