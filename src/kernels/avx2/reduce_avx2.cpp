// Reductions on AVX2 + FMA + F16C: f32 (xsimd), f16_f32acc (F16C widening, f32 accumulation) and f16 with fp16
// accumulators emulated per operation (f32 FMA, then vcvtps2ph rounds every accumulator back to fp16, as
// XNNPACK's f16 kernels do on AVX2).
#include <immintrin.h>

#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

using Arch = xsimd::fma3<xsimd::avx2>;
struct Avx2Tag {};

struct F32 {
  using Batch = xsimd::batch<float, Arch>;
  using Elem = float;
  static constexpr Mode kMode = Mode::f32;
  static Batch fma(Batch a, Batch b, Batch c) { return xsimd::fma(a, b, c); }
  static Batch load(const float* p) { return Batch::load_unaligned(p); }
};

struct F16F32Acc {
  using Batch = xsimd::batch<float, Arch>;
  using Elem = std::uint16_t;  // fp16 bit patterns
  static constexpr Mode kMode = Mode::f16_f32acc;
  static Batch fma(Batch a, Batch b, Batch c) { return xsimd::fma(a, b, c); }
  static Batch load(const std::uint16_t* p) {
    return Batch(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

/// fp16 accumulation through F16C: a register holds 8 f32 values that are always exactly fp16 values.
struct F16PerOp {
  using Vec = __m256;
  static constexpr std::size_t kWidth = 8, kRegs = 8;  // 8 chains hide the fma + 2 conversions latency
  static constexpr FmaKind kFma = FmaKind::f32_round;
  static Vec round(Vec v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Vec add(Vec a, Vec b) { return round(_mm256_add_ps(a, b)); }
  static Vec fma(Vec a, Vec b, Vec c) { return round(_mm256_fmadd_ps(a, b, c)); }
  static void store(std::uint16_t* p, Vec v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

constexpr unsigned kPerOpLanes = F16PerOp::kWidth * F16PerOp::kRegs;
constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

using detail::f16acc_reduce;
using detail::f32acc_reduce;
using detail::maxabs_reduce;

const Kernel kAvx2[] = {
    {"f32_sum__avx2", Op::sum, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::sum>},
    {"f32_sumsq__avx2", Op::sumsq, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::sumsq>},
    {"f32_maxabs__avx2", Op::maxabs, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma,
     maxabs_reduce<Avx2Tag, std::uint32_t, DType::f32>},
    {"f32_dot__avx2", Op::dot, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::dot>},

    {"f16_f32acc_sum__avx2", Op::sum, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::sum>},
    {"f16_f32acc_sumsq__avx2", Op::sumsq, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::sumsq>},
    {"f16_f32acc_maxabs__avx2", Op::maxabs, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma,
     maxabs_reduce<Avx2Tag, std::uint16_t, DType::f16>},
    {"f16_f32acc_dot__avx2", Op::dot, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::dot>},

    {"f16_sum__avx2", Op::sum, Mode::f16, Isa::avx2, DType::f16, kPerOpLanes, F16PerOp::kFma,
     f16acc_reduce<F16PerOp, Op::sum>},
    {"f16_sumsq__avx2", Op::sumsq, Mode::f16, Isa::avx2, DType::f16, kPerOpLanes, F16PerOp::kFma,
     f16acc_reduce<F16PerOp, Op::sumsq>},
    {"f16_maxabs__avx2", Op::maxabs, Mode::f16, Isa::avx2, DType::f16, kPerOpLanes, F16PerOp::kFma,
     maxabs_reduce<Avx2Tag, std::uint16_t, DType::f16>},
    {"f16_dot__avx2", Op::dot, Mode::f16, Isa::avx2, DType::f16, kPerOpLanes, F16PerOp::kFma,
     f16acc_reduce<F16PerOp, Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_avx2() { return kAvx2; }

}  // namespace halfmap
