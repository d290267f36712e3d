// The AVX512-FP16 primitives: native fp16 arithmetic on 32 lanes (vaddph, vsubph, vfmadd231ph, vdivph round
// every result to fp16 in hardware; FmaKind::fused), and AVX-512F f32 (avx512::F32T) where the contracts compute
// in f32 (exp, c·d for the gradients). AVX512-FP16 handles fp16 subnormals regardless of MXCSR.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::avx512fp16, the avx512 templates are instantiated with this namespace's Tag, and
// the common templates only with these types, so every inline function compiled with this folder's flags has a
// mangled name that names avx512fp16 (see avx512/ops.hpp).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "halfmap/f16_model.hpp"
#include "kernels/avx512/ops.hpp"

namespace halfmap::paths::avx512fp16 {

struct Tag {};
using F32 = avx512::F32T<Tag>;

/// Native fp16 on one zmm register (32 lanes; detail::NativeF16Ops for the steps through f32 and the stores).
struct F16 : detail::NativeF16Ops<F32, F16> {
  using V = __m512h;
  using HV = V;
  static constexpr std::size_t kW = 32;
  static V zero() { return _mm512_setzero_ph(); }
  static V load(const std::uint16_t* p) { return _mm512_loadu_ph(p); }
  static void store(std::uint16_t* p, V v) { _mm512_storeu_ph(p, v); }
  static V set1(std::uint16_t bits) { return _mm512_castsi512_ph(_mm512_set1_epi16(static_cast<short>(bits))); }
  static V add(V a, V b) { return _mm512_add_ph(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ph(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ph(a, b, c); }
  static V div(V a, V b) { return _mm512_div_ph(a, b); }
  /// fma(broadcast(a), b, c) as one vfmadd231ph with an embedded broadcast (microkernel.hpp's tile): written in
  /// asm because GCC merges the equal broadcasts of a row's FMAs into one vpbroadcastw, the port-5 shuffle this
  /// avoids. The same single rounding as fma.
  static V fma_broadcast(const std::uint16_t* a, V b, V c) {
    asm("vfmadd231ph %[a]%{1to32%}, %[b], %[c]" : [c] "+v"(c) : [b] "v"(b), [a] "m"(*a));
    return c;
  }
  /// f(to_f32(v)) rounded once to fp16, on the two halves of v.
  template <class F>
  static V through_f32(V v, F f) {
    const __m512i bits = _mm512_castph_si512(v);
    const __m512 lo = f(_mm512_cvtph_ps(_mm512_castsi512_si256(bits)));
    const __m512 hi = f(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(bits, 1)));
    const __m512i out = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                                           _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
    return _mm512_castsi512_ph(out);
  }
  static V canon(V v) { return _mm512_mask_blend_ph(_mm512_cmp_ph_mask(v, v, _CMP_UNORD_Q), v, set1(0x7E00)); }
  static V rot(V v, unsigned w) {
    const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                          12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx =
        _mm512_and_si512(_mm512_add_epi16(iota, _mm512_set1_epi16(static_cast<short>(w))), _mm512_set1_epi16(31));
    return _mm512_castsi512_ph(_mm512_permutexvar_epi16(idx, _mm512_castph_si512(v)));
  }
  static std::uint16_t lane0(V v) {
    return static_cast<std::uint16_t>(_mm_extract_epi16(_mm512_castsi512_si128(_mm512_castph_si512(v)), 0));
  }
};

}  // namespace halfmap::paths::avx512fp16
