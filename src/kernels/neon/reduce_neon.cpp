// Reductions on arm64 Advanced SIMD (baseline ARMv8-A): f32 (xsimd) and f16_f32acc (fcvtl widens fp16 to f32;
// the conversion instructions are baseline, fp16 arithmetic is not: that is the neonfp16 path).
#include <arm_neon.h>

#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

using Arch = xsimd::neon64;
struct NeonTag {};

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
  static Batch load(const std::uint16_t* p) { return Batch(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))); }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

using detail::f32acc_reduce;
using detail::maxabs_reduce;

const Kernel kNeon[] = {
    {"f32_sum__neon", Op::sum, Mode::f32, Isa::neon, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::sum>},
    {"f32_sumsq__neon", Op::sumsq, Mode::f32, Isa::neon, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::sumsq>},
    {"f32_maxabs__neon", Op::maxabs, Mode::f32, Isa::neon, DType::f32, 1, kNoFma,
     maxabs_reduce<NeonTag, std::uint32_t, DType::f32>},
    {"f32_dot__neon", Op::dot, Mode::f32, Isa::neon, DType::f32, 1, kNoFma, f32acc_reduce<F32, Op::dot>},

    {"f16_f32acc_sum__neon", Op::sum, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::sum>},
    {"f16_f32acc_sumsq__neon", Op::sumsq, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::sumsq>},
    {"f16_f32acc_maxabs__neon", Op::maxabs, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma,
     maxabs_reduce<NeonTag, std::uint16_t, DType::f16>},
    {"f16_f32acc_dot__neon", Op::dot, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma,
     f32acc_reduce<F16F32Acc, Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_neon() { return kNeon; }

}  // namespace halfmap
