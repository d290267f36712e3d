// Losses and softmax on AVX2 + FMA + F16C: f32, f16_f32acc (F16C widening, f32 arithmetic, vcvtps2ph once at
// each output) and f16 computed per operation (an f32 operation on exact fp16 values, then vcvtps2ph rounds the
// result back to fp16 after every step, as XNNPACK's f16 kernels do on AVX2; FmaKind::f32_round), 32 fp16
// lanes (4 registers of 8).
#include <immintrin.h>

#include <limits>

#include "kernels/common/nn.hpp"
#include "kernels/common/nn_math.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct Avx2Tag {};
using Math = detail::Avx2Math<Avx2Tag>;

struct F32 {
  using M = Math;
  using Elem = float;
  static constexpr Mode kMode = Mode::f32;
  static constexpr DType kStorage = DType::f32;
  static constexpr Elem kNegInf = -std::numeric_limits<float>::infinity();
  static M::V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, M::V v) { _mm256_storeu_ps(p, v); }
};

struct F16F32Acc {
  using M = Math;
  using Elem = std::uint16_t;  // fp16 bit patterns
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr DType kStorage = DType::f16;
  static constexpr Elem kNegInf = 0xFC00;
  static M::V load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(std::uint16_t* p, M::V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

/// fp16 arithmetic through F16C: a register holds 8 f32 values that are always exactly fp16 values.
struct F16PerOp {
  using HV = __m256;
  static constexpr std::size_t kW = 8, kRegs = 4;
  static constexpr FmaKind kFma = FmaKind::f32_round;
  static HV round(HV v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static HV load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(std::uint16_t* p, HV v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static HV set1(std::uint16_t bits) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(bits))); }
  static HV zero() { return _mm256_setzero_ps(); }
  static HV add(HV a, HV b) { return round(_mm256_add_ps(a, b)); }
  static HV sub(HV a, HV b) { return round(_mm256_sub_ps(a, b)); }
  static HV fma(HV a, HV b, HV c) { return round(_mm256_fmadd_ps(a, b, c)); }
  /// NaN lanes become the f32 quiet NaN 0x7FC00000, which narrows to fp16's canonical 0x7E00.
  static HV canon(HV v) {
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  // store() narrows with vcvtps2ph, so an unrounded f32 result is rounded once on its way to memory.
  static HV exp_store(std::uint16_t* p, HV t) {
    const __m128i e = _mm256_cvtps_ph(detail::exp_f32_generic<Math>(t), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), e);
    return _mm256_cvtph_ps(e);
  }
  static void store_div(std::uint16_t* p, HV e, HV s) { store(p, canon(_mm256_div_ps(e, s))); }
  static void store_scale(std::uint16_t* p, HV v, float c) { store(p, canon(_mm256_mul_ps(v, _mm256_set1_ps(c)))); }
  static HV rot(HV v, unsigned w) {
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i idx = _mm256_and_si256(_mm256_add_epi32(iota, _mm256_set1_epi32(int(w))), _mm256_set1_epi32(7));
    return _mm256_permutevar8x32_ps(v, idx);
  }
  static std::uint16_t lane0(HV v) {
    return static_cast<std::uint16_t>(_mm_extract_epi16(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT), 0));
  }
};

constexpr unsigned kPerOpLanes = F16PerOp::kW * F16PerOp::kRegs;
constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

using detail::mse_f16;
using detail::mse_f32acc;
using detail::softmax_f16;
using detail::softmax_f32acc;
using detail::xent_f16;
using detail::xent_f32acc;

const Kernel kNnAvx2[] = {
    {.name = "f32_mse__avx2", .op = Op::mse, .mode = Mode::f32,
     .isa = Isa::avx2, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .loss = mse_f32acc<F32>},
    {.name = "f32_softmax__avx2", .op = Op::softmax, .mode = Mode::f32,
     .isa = Isa::avx2, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F32, true>},
    {.name = "f32_softmax_naive__avx2", .op = Op::softmax_naive, .mode = Mode::f32,
     .isa = Isa::avx2, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F32, false>},
    {.name = "f32_xent__avx2", .op = Op::xent, .mode = Mode::f32,
     .isa = Isa::avx2, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .xent = xent_f32acc<F32>},

    {.name = "f16_f32acc_mse__avx2", .op = Op::mse, .mode = Mode::f16_f32acc,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .loss = mse_f32acc<F16F32Acc>},
    {.name = "f16_f32acc_softmax__avx2", .op = Op::softmax, .mode = Mode::f16_f32acc,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F16F32Acc, true>},
    {.name = "f16_f32acc_softmax_naive__avx2", .op = Op::softmax_naive, .mode = Mode::f16_f32acc,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F16F32Acc, false>},
    {.name = "f16_f32acc_xent__avx2", .op = Op::xent, .mode = Mode::f16_f32acc,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .xent = xent_f32acc<F16F32Acc>},

    {.name = "f16_mse__avx2", .op = Op::mse, .mode = Mode::f16,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = kPerOpLanes, .fma = F16PerOp::kFma, .loss = mse_f16<F16PerOp>},
    {.name = "f16_softmax__avx2", .op = Op::softmax, .mode = Mode::f16,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = kPerOpLanes, .fma = F16PerOp::kFma,
     .softmax = softmax_f16<F16PerOp, true>},
    {.name = "f16_softmax_naive__avx2", .op = Op::softmax_naive, .mode = Mode::f16,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = kPerOpLanes, .fma = F16PerOp::kFma,
     .softmax = softmax_f16<F16PerOp, false>},
    {.name = "f16_xent__avx2", .op = Op::xent, .mode = Mode::f16,
     .isa = Isa::avx2, .storage = DType::f16, .lanes = kPerOpLanes, .fma = F16PerOp::kFma, .xent = xent_f16<F16PerOp>},
};

}  // namespace

std::span<const Kernel> tables::nn_avx2() { return kNnAvx2; }

}  // namespace halfmap
