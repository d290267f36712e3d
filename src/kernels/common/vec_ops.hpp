// What the ISAs' ops.hpp types have in common, written once over each ISA's own types. Each is a base of an ISA's
// type and a template over that ISA's tag or types, so every function here is instantiated with a name that names
// the ISA, and code compiled with one folder's flags is never merged into another's object (see the ops.hpp
// headers):
//   F32Operators  the f32 vector arithmetic that a GCC vector type has as operators: add, sub, mul, div;
//                 GCC's intrinsics are defined as exactly these (_mm256_add_ps is (__v8sf)A + (__v8sf)B,
//                 _mm512_div_ps (__v16sf)A / (__v16sf)B, vaddq_f32 a + b), so they compile to the same code
//   IntOperators  the same for the integer lanes of the fp8 conversions (fp8_codec.hpp's O and H):
//                 _mm256_add_epi32 is (__v8su)A + (__v8su)B, _mm512_and_si512 (__v16su)A & (__v16su)B,
//                 _mm256_cmpgt_epi32 (__v8si)A > (__v8si)B, vceqq_u16 a == b
//   F16ViaF32     fp16 arithmetic per operation on an ISA's f32 vectors (avx2, avx512: F16C's conversions)
//   NativeF16Ops  the steps of native fp16 (avx512fp16, neonfp16) that go through f32 or store
#pragma once

#include <cstddef>
#include <cstdint>

#include "halfmap/f16_model.hpp"

namespace halfmap::detail {

/// A GCC vector of kBytes bytes of E lanes.
template <class E, std::size_t kBytes>
using VecOf [[gnu::vector_size(kBytes)]] = E;

// The operators' register types are deduced from the arguments rather than given: an intrinsics type such as
// __m512 would lose its may_alias attribute as a template argument.

/// The f32 operators of an ISA's vector type (Tag: the ISA's tag).
template <class Tag>
struct F32Operators {
  template <class V>
  static V add(V a, V b) {
    return a + b;
  }
  template <class V>
  static V sub(V a, V b) {
    return a - b;
  }
  template <class V>
  static V mul(V a, V b) {
    return a * b;
  }
  template <class V>
  static V div(V a, V b) {
    return a / b;
  }
};

/// The integer lane operators of an ISA's registers (Tag: the ISA's tag), viewed as lanes U (unsigned), C (the
/// comparison's: signed 32-bit lanes for the integer fp8 algorithm, unsigned 16-bit ones through fp16), B (the
/// bitwise operations', as the ISA's intrinsics view them: 64-bit lanes on AVX2 registers) or F (float, for fadd
/// and fmul on the bits). Comparisons give all-ones lanes; an ISA whose comparisons give masks (AVX-512) declares
/// its own gt and eq.
template <class Tag, class U, class C, class B = U, class F = VecOf<float, sizeof(U)>>
struct IntOperators {
  template <class I>
  static I and_(I a, I b) {
    return I(B(a) & B(b));
  }
  template <class I>
  static I or_(I a, I b) {
    return I(B(a) | B(b));
  }
  template <class I>
  static I add(I a, I b) {
    return I(U(a) + U(b));
  }
  template <class I>
  static I sub(I a, I b) {
    return I(U(a) - U(b));
  }
  template <class I>
  static I gt(I a, I b) {
    return I(C(a) > C(b));
  }
  template <class I>
  static I eq(I a, I b) {
    return I(U(a) == U(b));
  }
  template <class I>
  static I fadd(I a, I b) {
    return I(F(a) + F(b));
  }
  template <class I>
  static I fmul(I a, I b) {
    return I(F(a) * F(b));
  }
};

/// fp16 arithmetic per operation through the f32 vectors of M: a register holds M::kW f32 values that are always
/// exactly fp16 values, and every add, sub and f32 FMA is rounded back to fp16 by Self::round
/// (FmaKind::f32_round). Self supplies round, set1, canon, exp_store_with, rot and lane0 (nn.hpp's H).
template <class M, class Self>
struct F16ViaF32 {
  using V = typename M::V;
  using HV = V;
  using Packed = float;       // GEMM panels: fp16 values widened exactly
  using Acc = std::uint16_t;  // GEMM accumulator: fp16 bits
  static constexpr std::size_t kW = M::kW;
  static constexpr FmaKind kFma = FmaKind::f32_round;
  static V zero() { return M::zero(); }
  static V load(const std::uint16_t* p) { return M::load_f16(p); }
  static void store(std::uint16_t* p, V v) { M::store_f16(p, v); }
  static V load_packed(const float* p) { return M::load(p); }
  static V broadcast(const float* p) { return M::broadcast(p); }
  static V add(V a, V b) { return Self::round(M::add(a, b)); }
  static V sub(V a, V b) { return Self::round(M::sub(a, b)); }
  static V fma(V a, V b, V c) { return Self::round(M::fma(a, b, c)); }
  // store() narrows, so an unrounded f32 result is rounded once on its way to memory.
  static void store_div(std::uint16_t* p, V e, V s) { store(p, Self::canon(M::div(e, s))); }
  static void store_scale(std::uint16_t* p, V v, float c) { store(p, Self::canon(M::mul(v, M::set1(c)))); }
};

/// Native fp16: the GEMM's panels and accumulators are fp16 bits, every operation rounds once (FmaKind::fused),
/// and where the contracts compute in f32 (exp, c·d) Self::through_f32 widens the lanes exactly, computes on the
/// f32 vectors of M and rounds back once. Self supplies set1, load, store, div, through_f32 and canon besides the
/// rest of nn.hpp's H.
template <class M, class Self>
struct NativeF16Ops {
  using Packed = std::uint16_t;  // GEMM panels: fp16 bits
  using Acc = std::uint16_t;     // GEMM accumulator: fp16 bits
  static constexpr FmaKind kFma = FmaKind::fused;
  static auto load_packed(const std::uint16_t* p) { return Self::load(p); }
  static auto broadcast(const std::uint16_t* p) { return Self::set1(*p); }
  template <class V, class ExpF32>
  static V exp_store_with(std::uint16_t* p, V t, ExpF32 exp) {
    const V e = Self::through_f32(t, exp);
    Self::store(p, e);
    return e;
  }
  template <class V>
  static void store_div(std::uint16_t* p, V e, V s) {
    Self::store(p, Self::canon(Self::div(e, s)));
  }
  template <class V>
  static void store_scale(std::uint16_t* p, V v, float c) {
    const typename M::V cv = M::set1(c);
    Self::store(p, Self::canon(Self::through_f32(v, [cv](typename M::V x) { return M::mul(x, cv); })));
  }
};

}  // namespace halfmap::detail
