// Native fp16 reductions on ARMv8.2-A FP16 (fadd / fmla on 8 x fp16 lanes, every result rounded to fp16,
// accumulators included). Same loop as AVX512-FP16 (f16acc_reduce): element i into lane i % 64, then the f16
// model's lane fold, so it is checked bit for bit against f16_model_reduce(..., lanes = 64, FmaKind::fused).
// fp16 subnormals are kept as long as FPCR.FZ16 is off, the Linux default; halfmap never sets it.
#include <arm_neon.h>

#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct NeonFp16Tag {};

struct F16Native {
  using Vec = float16x8_t;
  static constexpr std::size_t kWidth = 8, kRegs = 8;
  static constexpr FmaKind kFma = FmaKind::fused;
  static Vec zero() { return vdupq_n_f16(0); }
  static Vec load(const std::uint16_t* p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
  static Vec add(Vec a, Vec b) { return vaddq_f16(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return vfmaq_f16(c, a, b); }
  static void store(std::uint16_t* p, Vec v) { vst1q_u16(p, vreinterpretq_u16_f16(v)); }
};

constexpr unsigned kLanes = F16Native::kWidth * F16Native::kRegs;

using detail::f16acc_reduce;

const Kernel kNeonFp16[] = {
    {"f16_sum__neonfp16", Op::sum, Mode::f16, Isa::neonfp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::sum>},
    {"f16_sumsq__neonfp16", Op::sumsq, Mode::f16, Isa::neonfp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::sumsq>},
    {"f16_maxabs__neonfp16", Op::maxabs, Mode::f16, Isa::neonfp16, DType::f16, kLanes, FmaKind::fused,
     detail::maxabs_reduce<NeonFp16Tag, std::uint16_t, DType::f16>},
    {"f16_dot__neonfp16", Op::dot, Mode::f16, Isa::neonfp16, DType::f16, kLanes, FmaKind::fused,
     f16acc_reduce<F16Native, Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_neonfp16() { return kNeonFp16; }

}  // namespace halfmap
