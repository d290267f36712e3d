// Native fp16 losses and softmax on AVX512-FP16: vsubph, vaddph, vfmadd231ph (FmaKind::fused) and vdivph
// round every result to fp16 in hardware, accumulators included; 128 fp16 lanes (4 registers of 32). Where the
// contract computes in f32 (exp, and c·d for the gradients) the fp16 lanes are widened exactly with vcvtph2ps,
// computed with the same AVX-512F code as every other x86 path, and rounded back once with vcvtps2ph. vdivph is
// the correctly rounded fp16 quotient, which equals the f32 quotient rounded to fp16 (NUMERICS.md), so the
// kernels are bit-exact to the f16 model run with lanes = 128 and FmaKind::fused. AVX512-FP16 handles fp16
// subnormals regardless of MXCSR.
#include <immintrin.h>

#include "kernels/common/nn.hpp"
#include "kernels/common/nn_math.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct Avx512Fp16Tag {};
using Math = detail::Avx512Math<Avx512Fp16Tag>;

struct F16Native {
  using HV = __m512h;
  static constexpr std::size_t kW = 32, kRegs = 4;
  static constexpr FmaKind kFma = FmaKind::fused;
  static HV load(const std::uint16_t* p) { return _mm512_loadu_ph(p); }
  static void store(std::uint16_t* p, HV v) { _mm512_storeu_ph(p, v); }
  static HV set1(std::uint16_t bits) { return _mm512_castsi512_ph(_mm512_set1_epi16(static_cast<short>(bits))); }
  static HV zero() { return _mm512_setzero_ph(); }
  static HV add(HV a, HV b) { return _mm512_add_ph(a, b); }
  static HV sub(HV a, HV b) { return _mm512_sub_ph(a, b); }
  static HV fma(HV a, HV b, HV c) { return _mm512_fmadd_ph(a, b, c); }
  /// f(to_f32(v)) rounded once to fp16, on the two halves of v.
  template <class F>
  static HV through_f32(HV v, F f) {
    const __m512i bits = _mm512_castph_si512(v);
    const __m512 lo = f(_mm512_cvtph_ps(_mm512_castsi512_si256(bits)));
    const __m512 hi = f(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(bits, 1)));
    const __m512i out = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                                           _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
    return _mm512_castsi512_ph(out);
  }
  static HV canon(HV v) { return _mm512_mask_blend_ph(_mm512_cmp_ph_mask(v, v, _CMP_UNORD_Q), v, set1(0x7E00)); }
  static HV exp_store(std::uint16_t* p, HV t) {
    const HV e = through_f32(t, [](__m512 x) { return detail::exp_f32_generic<Math>(x); });
    store(p, e);
    return e;
  }
  static void store_div(std::uint16_t* p, HV e, HV s) { store(p, canon(_mm512_div_ph(e, s))); }
  static void store_scale(std::uint16_t* p, HV v, float c) {
    const __m512 cv = _mm512_set1_ps(c);
    store(p, canon(through_f32(v, [cv](__m512 x) { return _mm512_mul_ps(x, cv); })));
  }
  static HV rot(HV v, unsigned w) {
    const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
                                          13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx =
        _mm512_and_si512(_mm512_add_epi16(iota, _mm512_set1_epi16(static_cast<short>(w))), _mm512_set1_epi16(31));
    return _mm512_castsi512_ph(_mm512_permutexvar_epi16(idx, _mm512_castph_si512(v)));
  }
  static std::uint16_t lane0(HV v) {
    return static_cast<std::uint16_t>(_mm_extract_epi16(_mm512_castsi512_si128(_mm512_castph_si512(v)), 0));
  }
};

constexpr unsigned kLanes = F16Native::kW * F16Native::kRegs;

using detail::mse_f16;
using detail::softmax_f16;
using detail::xent_f16;

const Kernel kNnAvx512Fp16[] = {
    {.name = "f16_mse__avx512fp16", .op = Op::mse, .mode = Mode::f16,
     .isa = Isa::avx512fp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused, .loss = mse_f16<F16Native>},
    {.name = "f16_softmax__avx512fp16", .op = Op::softmax, .mode = Mode::f16,
     .isa = Isa::avx512fp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused,
     .softmax = softmax_f16<F16Native, true>},
    {.name = "f16_softmax_naive__avx512fp16", .op = Op::softmax_naive, .mode = Mode::f16,
     .isa = Isa::avx512fp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused,
     .softmax = softmax_f16<F16Native, false>},
    {.name = "f16_xent__avx512fp16", .op = Op::xent, .mode = Mode::f16,
     .isa = Isa::avx512fp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused,
     .xent = xent_f16<F16Native>},
};

}  // namespace

std::span<const Kernel> tables::nn_avx512fp16() { return kNnAvx512Fp16; }

}  // namespace halfmap
