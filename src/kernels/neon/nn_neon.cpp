// Losses and softmax on arm64 Advanced SIMD (baseline ARMv8-A): f32 and f16_f32acc (fcvtl widens fp16 exactly,
// f32 arithmetic, fcvtn rounds once to fp16 at each output with FPCR's round to nearest even; the conversions are
// baseline, fp16 arithmetic is the neonfp16 path).
#include <arm_neon.h>

#include <limits>

#include "kernels/common/nn.hpp"
#include "kernels/common/nn_math.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct NeonTag {};
using Math = detail::NeonMath<NeonTag>;

struct F32 {
  using M = Math;
  using Elem = float;
  static constexpr Mode kMode = Mode::f32;
  static constexpr DType kStorage = DType::f32;
  static constexpr Elem kNegInf = -std::numeric_limits<float>::infinity();
  static M::V load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, M::V v) { vst1q_f32(p, v); }
};

struct F16F32Acc {
  using M = Math;
  using Elem = std::uint16_t;  // fp16 bit patterns
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr DType kStorage = DType::f16;
  static constexpr Elem kNegInf = 0xFC00;
  static M::V load(const std::uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static void store(std::uint16_t* p, M::V v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

using detail::mse_f32acc;
using detail::softmax_f32acc;
using detail::xent_f32acc;

const Kernel kNnNeon[] = {
    {.name = "f32_mse__neon", .op = Op::mse, .mode = Mode::f32,
     .isa = Isa::neon, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .loss = mse_f32acc<F32>},
    {.name = "f32_softmax__neon", .op = Op::softmax, .mode = Mode::f32,
     .isa = Isa::neon, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F32, true>},
    {.name = "f32_softmax_naive__neon", .op = Op::softmax_naive, .mode = Mode::f32,
     .isa = Isa::neon, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F32, false>},
    {.name = "f32_xent__neon", .op = Op::xent, .mode = Mode::f32,
     .isa = Isa::neon, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .xent = xent_f32acc<F32>},

    {.name = "f16_f32acc_mse__neon", .op = Op::mse, .mode = Mode::f16_f32acc,
     .isa = Isa::neon, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .loss = mse_f32acc<F16F32Acc>},
    {.name = "f16_f32acc_softmax__neon", .op = Op::softmax, .mode = Mode::f16_f32acc,
     .isa = Isa::neon, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F16F32Acc, true>},
    {.name = "f16_f32acc_softmax_naive__neon", .op = Op::softmax_naive, .mode = Mode::f16_f32acc,
     .isa = Isa::neon, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<F16F32Acc, false>},
    {.name = "f16_f32acc_xent__neon", .op = Op::xent, .mode = Mode::f16_f32acc,
     .isa = Isa::neon, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .xent = xent_f32acc<F16F32Acc>},
};

}  // namespace

std::span<const Kernel> tables::nn_neon() { return kNnNeon; }

}  // namespace halfmap
