// The AVX2 + FMA + F16C primitives: every intrinsic the avx2 kernels use, for the algorithms written once in
// kernels/common/ (contracts of each role there: F32 is nn.hpp's M, the f32 tile of microkernel.hpp and the
// vector of reduce.hpp; F16 is nn.hpp's H, the fp16 tile and reduce.hpp's fp16 vector).
//
// Why no code compiled with higher-ISA flags can be merged into this folder's object, nor this folder's into a
// lower one: everything here is inside namespace halfmap::paths::avx2 (the bases from kernels/common/vec_ops.hpp
// instantiated with its Tag or its types), only this folder's files (compiled with exactly the avx2 flags) include
// this header, and the common templates are instantiated only with these types.
// So every inline function and instantiation compiled with these flags has a mangled name that names avx2, and
// the linker can only fold it with copies made under the same flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "halfmap/f16_model.hpp"
#include "kernels/common/vec_ops.hpp"

namespace halfmap::paths::avx2 {

/// Keeps this ISA's instantiations of tag-only templates (maxabs_reduce, row_max_bits, vec_ops.hpp's bases) apart.
struct Tag {};

/// f32 on one ymm register (8 lanes).
struct F32 : detail::F32Operators<Tag> {
  using V = __m256;
  using Packed = float;  // GEMM panels
  using Acc = float;     // GEMM accumulator
  static constexpr std::size_t kW = 8;
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_packed(const float* p) { return _mm256_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
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
  /// nn.hpp's scale2n_normal: the low bits of nk (1.5·2^23 + n) shifted into the exponent field are n·2^23
  /// (mod 2^32), added to p's bits. Two operations where scale2n takes nine.
  static V scale2n_normal(V p, V nk) {
    const __m256i bits = _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(nk), 23));
    return _mm256_castsi256_ps(bits);
  }
  static V nan_pass(V x, V y) { return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
  /// |mag| with the sign bit of sgn.
  static V copysign(V mag, V sgn) {
    const V m = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sgn));
  }
  /// 8 fp16 values widened exactly / rounded to fp16 (round to nearest even).
  static V load_f16(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store_f16(std::uint16_t* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  /// n fp16 values widened / n f32 values rounded, any n (the GEMM's packing and epilogue).
  static void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
    if (i < n) {
      alignas(16) std::uint16_t in[8] = {};
      alignas(32) float out[8];
      std::memcpy(in, src + i, (n - i) * sizeof(std::uint16_t));
      _mm256_store_ps(out, load_f16(in));
      std::memcpy(dst + i, out, (n - i) * sizeof(float));
    }
  }
  static void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) store_f16(dst + i, _mm256_loadu_ps(src + i));
    if (i < n) {
      alignas(32) float in[8] = {};
      alignas(16) std::uint16_t out[8];
      std::memcpy(in, src + i, (n - i) * sizeof(float));
      store_f16(out, _mm256_load_ps(in));
      std::memcpy(dst + i, out, (n - i) * sizeof(std::uint16_t));
    }
  }
};

/// fp16 arithmetic per operation through F16C (detail::F16ViaF32 on F32): every add, sub and f32 FMA is rounded
/// back to fp16 with vcvtps2ph, as XNNPACK's f16 kernels do on AVX2.
struct F16 : detail::F16ViaF32<F32, F16> {
  static V round(V v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static V set1(std::uint16_t bits) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(bits))); }
  /// The FMA unrounded and its rounding on the way to memory (microkernel_l1: fma + store_round is fma + store).
  static V fma_f32(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store_round(std::uint16_t* p, V v) {
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    // Converted into a register, then stored: GCC would fuse the two into vcvtps2ph to memory, which ran the
    // F16C round trip at 28 GFLOP/s on a Zen 5 against 45 this way (bench/roof/roof_avx2.cpp).
    asm("" : "+x"(h));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
  }
  /// NaN lanes become the f32 quiet NaN 0x7FC00000, which narrows to fp16's canonical 0x7E00.
  static V canon(V v) {
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  // store() narrows with vcvtps2ph, so an unrounded f32 result is rounded once on its way to memory.
  template <class ExpF32>
  static V exp_store_with(std::uint16_t* p, V t, ExpF32 exp) {
    const __m128i e = _mm256_cvtps_ph(exp(t), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), e);
    return _mm256_cvtph_ps(e);
  }
  static V rot(V v, unsigned w) {
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i idx = _mm256_and_si256(_mm256_add_epi32(iota, _mm256_set1_epi32(int(w))), _mm256_set1_epi32(7));
    return _mm256_permutevar8x32_ps(v, idx);
  }
  static std::uint16_t lane0(V v) {
    return static_cast<std::uint16_t>(_mm_extract_epi16(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT), 0));
  }
};

/// 32-bit integer lanes on one ymm register (8 lanes): the fp8 conversions (kernels/common/fp8_codec.hpp).
struct I32 : detail::IntOperators<Tag, detail::VecOf<std::uint32_t, 32>, detail::VecOf<std::int32_t, 32>,
                                  detail::VecOf<std::uint64_t, 32>> {
  using I = __m256i;
  using M = __m256i;
  static constexpr std::size_t kW = 8;
  static I load(const float* p) { return _mm256_castps_si256(_mm256_loadu_ps(p)); }
  static void store(float* p, I v) { _mm256_storeu_ps(p, _mm256_castsi256_ps(v)); }
  static I load_bytes(const std::uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  /// Each lane's low byte: gathered into the low 4 bytes of each 128-bit half, then the halves joined.
  static void store_bytes(std::uint8_t* p, I v) {
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                               -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i t = _mm256_shuffle_epi8(v, low_bytes);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p),
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
  }
  static I set1(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  // clang-format off
  template <int s>
  static I srl(I v) { return _mm256_srli_epi32(v, s); }
  template <int s>
  static I sll(I v) { return _mm256_slli_epi32(v, s); }
  // clang-format on
  static I select(M m, I a, I b) { return _mm256_blendv_epi8(b, a, m); }
  static I i2f_scaled(I v, float c) {
    return _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(c)));
  }
};

}  // namespace halfmap::paths::avx2
