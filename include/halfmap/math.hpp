// halfmap's one exp, used by every softmax and cross-entropy kernel on every path.
//
// exp_f32 is a scalar function compiled without ISA flags; each ISA evaluates the same algorithm on its vectors
// (detail::exp_f32_generic in src/kernels/common/vmath.hpp) with the same operations in the same order, every
// multiply-add fused, so the SIMD results are bit-identical to exp_f32 for every f32 input. The f16 models compute
// exp, erf and tanh with copies of their own, written from the algorithms stated here (src/models/math.cpp), and
// nn_test checks that the copies equal these functions on every fp16 input.
#pragma once

#include "halfmap/half.hpp"

namespace halfmap {

/// e^x in f32. Algorithm: clamp x to [-104, 89]; n = x·log2(e) rounded to the nearest integer (one fused
/// multiply-add with 1.5·2^23, log2(e) rounded to f32, then 1.5·2^23 subtracted); r = x - n·ln2 with ln2 split in
/// two f32 constants, hi = f32(ln 2) and lo = f32(hi - ln 2) (r = fma(n, -hi, x), then fma(n, lo, r)); e^r by the
/// degree-7 polynomial Σ c_k·r^k with c_0 = c_1 = 1 and c_2 .. c_7 Cephes expf's coefficients (5.0000001201e-1,
/// 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4), Horner form from c_7,
/// fused multiply-adds; then p·2^n
/// rounded once, computed as (p·2^⌊n/2⌋)·2^(n-⌊n/2⌋) with the powers built from exponent bits (the first
/// product is exact; AVX-512 uses vscalefps, which gives the same bits), so overflow and subnormal results
/// are correctly rounded from p.
///
/// Measured on all 2.24e9 f32 inputs in [-104, 89] against std::exp computed in double: max error 0.894 ulp
/// (1 ulp at most against the correctly rounded f32 result, which it matches for 99.54% of the inputs;
/// 1.02e7 inputs differ by 1 ulp, none by more). Subnormal results are included (x < -87.34) and are within
/// the same bound. x ≥ 88.72284 (0x42B17218) gives +inf and x ≤ -103.97208 (0xC2CFF1B5) gives +0, as the
/// correctly rounded exp does; exp(+inf) = +inf, exp(-inf) = +0, NaN in gives NaN out (the input, quieted).
/// It needs round to nearest even (halfmap never changes the rounding mode) and never flushes subnormals.
float exp_f32(float x);

/// e^h in fp16: to_f16(exp_f32(to_f32(h))), promoted to f32 and rounded once. Over all 63488 finite fp16
/// inputs (and ±inf, NaN) it equals the correctly rounded fp16 exp, to_f16(std::exp(double)), except at 2 inputs
/// where it is 1 fp16 ulp above it (0x1.de4p-8 and 0x1.73cp-6: exp lands within 1 f32 ulp of an fp16 tie), so
/// the max error is 1 fp16 ulp. 11.0859375 gives 65248; 11.09375 is the first input whose exp is inf
/// (ln(65520) = 11.0901); inputs below -17.33 give +0.
f16 exp_f16(f16 h);

/// erf(x) in f32 (GELU's exact form): Abramowitz and Stegun 7.1.26 on |x| with halfmap's exp, every multiply-add
/// fused, the sign restored; each ISA runs the same operations (detail::erf_f32_generic), so SIMD and scalar
/// agree bit for bit. Absolute error against std::erf in double, measured on every 7th f32 bit pattern in [-4, 4]
/// (both signs): at most 5.54e-7 = 2^-20.78, at 0x1.81657ep-5, where 1 - t·P(t)·e^(-a²) cancels (the formula's
/// 1.5e-7 plus f32 rounding); the bound stated and tested (gelu_test) is 2^-20.5. erf(±inf) = ±1, NaN gives NaN.
float erf_f32(float x);

/// tanh(x) in f32 (GELU's tanh form): 1 - 2/(exp_f32(2x) + 1), the same operations on every ISA
/// (detail::tanh_f32_generic). Absolute error, on the same sweep: at most 1.79e-7 = 2^-22.42 (at -0x1.ec36eap+1);
/// the bound stated and tested is 2^-22. Small |x| loses relative accuracy to the cancellation, not absolute;
/// tanh(±inf) = ±1, NaN gives NaN.
float tanh_f32(float x);

}  // namespace halfmap
