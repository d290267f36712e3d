// halfmap's vector math: the elementary functions the kernels evaluate on an ISA's f32 registers M (nn.hpp's M,
// Lanes<M, R> of lanes.hpp, or float for the scalar functions of include/halfmap/math.hpp). Each is one fixed
// sequence of operations, every multiply-add fused, so every ISA and the scalar exp_f32, erf_f32 and tanh_f32 agree
// bit for bit; the errors below are therefore those of the scalar functions, as include/halfmap/math.hpp records
// them (measured there) and the tests named check them:
//   exp_f32_generic         e^x: at most 0.894 ulp from e^x, at most 1 ulp from the correctly rounded f32 (equal to
//                           it on 99.54% of the inputs; all 2.24e9 f32 in [-104, 89], subnormal results included);
//                           +inf from 0x42B17218, +0 from 0xC2CFF1B5 down, as the correctly rounded exp.
//                           nn_test: ExpF32.WithinOneUlpOfCorrectlyRoundedOnAStridedSweep (every 997th f32 of the
//                           range, 1 ulp), ExpF32.SpecialValuesAndRangeEnds, and every SIMD path against the scalar
//                           exp bit for bit (SoftmaxTest.SimdExpMatchesScalarExpBitForBit).
//   exp_f32_inrange         the bits of exp_f32_generic, for inputs in its range (see there).
//   tanh_f32_generic        absolute error at most 1.79e-7 = 2^-22.42 (every 7th f32 in [-4, 4], both signs);
//                           gelu_test's TanhF32 checks 2^-22 on a 2^-12 grid of [-10, 10].
//   erf_f32_generic         absolute error at most 5.54e-7 = 2^-20.78 (the same sweep); gelu_test's ErfF32 checks
//                           2^-20.5 on a 2^-12 grid of [-8, 8].
//   quotient_by_reciprocal  e/s correctly rounded, the bits of the division, within the bounds it states; nn_test's
//                           SoftmaxDivision.QuotientByReciprocalEqualsDivision checks it against the division.
// nn_test's ModelMath checks that the f16 models' own copies of exp, erf and tanh equal these on every fp16 input.
#pragma once

#include "kernels/common/lanes.hpp"  // HALFMAP_VEC_INLINE

namespace halfmap::detail {

// ---- exp, tanh, erf ------------------------------------------------------------------------------------------

namespace exp_consts {
inline constexpr float kLo = -104.0f;  // below: exp < 2^-150, rounds to +0
inline constexpr float kHi = 89.0f;    // above 88.7228: exp overflows to +inf
inline constexpr float kLog2e = 0x1.715476p+0f;
inline constexpr float kRound = 0x1.8p23f;        // fma(x, kLog2e, kRound) - kRound: x·log2(e) rounded to an integer
inline constexpr float kLn2Hi = 0x1.62e430p-1f;   // ln 2 rounded to f32 (0.693147182...)
inline constexpr float kLn2Lo = 0x1.05c610p-29f;  // kLn2Hi - ln 2, rounded to f32
// e^r ≈ Σ kPoly[k]·r^k on |r| ≤ ln2/2 (Cephes expf's coefficients, k ≥ 2).
inline constexpr float kPoly[8] = {1.0f,
                                   1.0f,
                                   5.0000001201e-1f,
                                   1.6666665459e-1f,
                                   4.1665795894e-2f,
                                   8.3334519073e-3f,
                                   1.3981999507e-3f,
                                   1.9875691500e-4f};
// The fast rows' bounds: every t_j in [kRowLo, kExpHi] keeps e_j = exp(t_j) normal (e^-40 > 2^-58, e^88 below
// the f32 maximum) and finite.
inline constexpr float kRowLo = -40.0f;
inline constexpr float kExpHi = 88.0f;
}  // namespace exp_consts

/// exp_f32_generic without the clamp and the NaN pass, for x already in [kLo, kHi] (so not NaN): there both are
/// the identity, so this returns the same bits as exp_f32_generic. Softmax rows whose range is checked once use it.
/// kNormal: x is also in [kRowLo, kExpHi], so p·2^n is a normal f32, which p with n added to its exponent field
/// is exactly (M::scale2n_normal, where the ISA has it: two integer operations instead of scale2n's
/// two-step product); the same bits again, since scale2n rounds an exact normal result to itself.
template <class M, bool kNormal = false>
HALFMAP_VEC_INLINE typename M::V exp_f32_inrange(typename M::V xc) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V nk = M::fma(xc, M::set1(c::kLog2e), M::set1(c::kRound));  // 1.5·2^23 + n
  const V n = M::sub(nk, M::set1(c::kRound));
  V r = M::fma(n, M::set1(-c::kLn2Hi), xc);
  r = M::fma(n, M::set1(c::kLn2Lo), r);
  V p = M::set1(c::kPoly[7]);
  for (int k = 6; k >= 0; --k) p = M::fma(p, r, M::set1(c::kPoly[k]));
  if constexpr (kNormal && requires(V v) { M::scale2n_normal(v, v); }) {
    return M::scale2n_normal(p, nk);
  } else {
    return M::scale2n(p, n);
  }
}

/// halfmap's exp on one register of M (see include/halfmap/math.hpp for the algorithm and its measured error).
/// Every ISA and the scalar exp_f32 run exactly these operations in this order, so they agree bit for bit.
template <class M>
HALFMAP_VEC_INLINE typename M::V exp_f32_generic(typename M::V x) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V xc = M::min(M::max(x, M::set1(c::kLo)), M::set1(c::kHi));  // a NaN is restored by nan_pass
  return M::nan_pass(x, exp_f32_inrange<M>(xc));
}

/// tanh(u) = 1 - 2/(e^(2u) + 1) with halfmap's exp (include/halfmap/math.hpp, tanh_f32): every operation the
/// same on every ISA, so SIMD and scalar agree bit for bit. 2u is exact; e^(2u) = inf gives 1 and e^(2u) = 0 gives
/// -1, so no input overflows; NaN gives NaN.
template <class M>
HALFMAP_VEC_INLINE typename M::V tanh_f32_generic(typename M::V u) {
  const typename M::V one = M::set1(1.0f);
  const typename M::V e = exp_f32_generic<M>(M::add(u, u));
  return M::nan_pass(u, M::sub(one, M::div(M::set1(2.0f), M::add(e, one))));
}

/// erf(z) by Abramowitz and Stegun 7.1.26 (absolute error of the formula at most 1.5e-7): for a = |z|,
/// t = 1/(1 + p·a), erf(a) = 1 - t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(-a²), the sign of z restored; every
/// multiply-add fused, the exp halfmap's. The same operations on every ISA (include/halfmap/math.hpp, erf_f32).
template <class M>
HALFMAP_VEC_INLINE typename M::V erf_f32_generic(typename M::V z) {
  using V = typename M::V;
  const V zero = M::set1(0.0f), one = M::set1(1.0f);
  const V a = M::max(z, M::sub(zero, z));  // |z| (a NaN is restored by nan_pass)
  const V t = M::div(one, M::fma(M::set1(0.3275911f), a, one));
  V q = M::set1(1.061405429f);
  q = M::fma(q, t, M::set1(-1.453152027f));
  q = M::fma(q, t, M::set1(1.421413741f));
  q = M::fma(q, t, M::set1(-0.284496736f));
  q = M::fma(q, t, M::set1(0.254829592f));
  q = M::mul(q, t);
  const V e = exp_f32_generic<M>(M::sub(zero, M::mul(a, a)));
  return M::nan_pass(z, M::copysign(M::fma(M::sub(zero, q), e, one), z));
}

// ---- division by a reciprocal --------------------------------------------------------------------------------

/// e/s as q' = q + (e - q·s)·y with q = e·y and y = 1/s correctly rounded (neg_s = -s), two fused multiply-adds:
/// the correctly rounded quotient, the bits of a division, when y is 1/s rounded, e, s, e/s and 1/s are normal
/// and e/s is at least 2^-118 (Markstein's theorem: the remainder e - q·s is then exact and q within one ulp).
/// e = +0 gives +0 as the division does. exp_pass_f32acc and softmax_row_f16 check those bounds per row; nn_test
/// checks the identity against division.
template <class M>
typename M::V quotient_by_reciprocal(typename M::V e, typename M::V y, typename M::V neg_s) {
  const typename M::V q = M::mul(e, y);
  return M::fma(M::fma(q, neg_s, e), y, q);
}

}  // namespace halfmap::detail
