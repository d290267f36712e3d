// Native fp16 reductions on AVX512-FP16: every add and fused multiply-add rounds to fp16 in hardware
// (vaddph, vfmadd231ph), accumulators included. The loop is f16acc_reduce, the same order of operations as the
// f16 model (element i into lane i % 256, then the model's lane fold), so it is checked bit for bit against
// f16_model_reduce(..., lanes = 256, FmaKind::fused). AVX512-FP16 handles fp16 subnormals regardless of MXCSR.
#include <immintrin.h>

#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct Avx512Fp16Tag {};

struct F16Native {
  using Vec = __m512h;
  static constexpr std::size_t kWidth = 32, kRegs = 8;  // 8 chains cover vfmadd231ph's latency x throughput
  static constexpr FmaKind kFma = FmaKind::fused;
  static Vec zero() { return _mm512_setzero_ph(); }
  static Vec load(const std::uint16_t* p) { return _mm512_loadu_ph(p); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ph(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ph(a, b, c); }
  static void store(std::uint16_t* p, Vec v) { _mm512_storeu_ph(p, v); }
};

constexpr unsigned kLanes = F16Native::kWidth * F16Native::kRegs;

using detail::f16acc_reduce;

const Kernel kAvx512Fp16[] = {
    {"f16_sum__avx512fp16", Op::sum, Mode::f16, Isa::avx512fp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::sum>},
    {"f16_sumsq__avx512fp16", Op::sumsq, Mode::f16, Isa::avx512fp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::sumsq>},
    {"f16_maxabs__avx512fp16", Op::maxabs, Mode::f16, Isa::avx512fp16, DType::f16, kLanes, FmaKind::fused,
     detail::maxabs_reduce<Avx512Fp16Tag, std::uint16_t, DType::f16>},
    {"f16_dot__avx512fp16", Op::dot, Mode::f16, Isa::avx512fp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_avx512fp16() { return kAvx512Fp16; }

}  // namespace halfmap
