// Native fp16 losses and softmax on ARMv8.2-A FP16: fsub, fadd, fmla (FmaKind::fused) and fdiv on 8 fp16
// lanes round every result to fp16, accumulators included; 32 fp16 lanes (4 registers of 8). Where the contract
// computes in f32 (exp, and c·d for the gradients) the lanes are widened exactly (fcvtl), computed with the
// same NEON code as the neon path, and rounded back once (fcvtn). fdiv on fp16 is the correctly rounded fp16
// quotient, which equals the f32 quotient rounded to fp16 (NUMERICS.md), so the kernels are bit-exact to the f16
// model run with lanes = 32 and FmaKind::fused. fp16 subnormals are kept as long as FPCR.FZ16 is off, the
// Linux default; halfmap never sets it.
#include <arm_neon.h>

#include "kernels/common/nn.hpp"
#include "kernels/common/nn_math.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct NeonFp16Tag {};
using Math = detail::NeonMath<NeonFp16Tag>;

struct F16Native {
  using HV = float16x8_t;
  static constexpr std::size_t kW = 8, kRegs = 4;
  static constexpr FmaKind kFma = FmaKind::fused;
  static HV load(const std::uint16_t* p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
  static void store(std::uint16_t* p, HV v) { vst1q_u16(p, vreinterpretq_u16_f16(v)); }
  static HV set1(std::uint16_t bits) { return vreinterpretq_f16_u16(vdupq_n_u16(bits)); }
  static HV zero() { return set1(0); }
  static HV add(HV a, HV b) { return vaddq_f16(a, b); }
  static HV sub(HV a, HV b) { return vsubq_f16(a, b); }
  static HV fma(HV a, HV b, HV c) { return vfmaq_f16(c, a, b); }
  /// f(to_f32(v)) rounded once to fp16, on the two halves of v.
  template <class F>
  static HV through_f32(HV v, F f) {
    const float32x4_t lo = f(vcvt_f32_f16(vget_low_f16(v)));
    const float32x4_t hi = f(vcvt_high_f32_f16(v));
    return vcvt_high_f16_f32(vcvt_f16_f32(lo), hi);
  }
  static HV canon(HV v) { return vbslq_f16(vceqq_f16(v, v), v, set1(0x7E00)); }
  static HV exp_store(std::uint16_t* p, HV t) {
    const HV e = through_f32(t, [](float32x4_t x) { return detail::exp_f32_generic<Math>(x); });
    store(p, e);
    return e;
  }
  static void store_div(std::uint16_t* p, HV e, HV s) { store(p, canon(vdivq_f16(e, s))); }
  static void store_scale(std::uint16_t* p, HV v, float c) {
    const float32x4_t cv = vdupq_n_f32(c);
    store(p, canon(through_f32(v, [cv](float32x4_t x) { return vmulq_f32(x, cv); })));
  }
  static HV rot(HV v, unsigned w) {
    switch (w) {
      case 4: return vextq_f16(v, v, 4);
      case 2: return vextq_f16(v, v, 2);
      default: return vextq_f16(v, v, 1);
    }
  }
  static std::uint16_t lane0(HV v) { return vgetq_lane_u16(vreinterpretq_u16_f16(v), 0); }
};

constexpr unsigned kLanes = F16Native::kW * F16Native::kRegs;

using detail::mse_f16;
using detail::softmax_f16;
using detail::xent_f16;

const Kernel kNnNeonFp16[] = {
    {.name = "f16_mse__neonfp16", .op = Op::mse, .mode = Mode::f16,
     .isa = Isa::neonfp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused, .loss = mse_f16<F16Native>},
    {.name = "f16_softmax__neonfp16", .op = Op::softmax, .mode = Mode::f16,
     .isa = Isa::neonfp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused,
     .softmax = softmax_f16<F16Native, true>},
    {.name = "f16_softmax_naive__neonfp16", .op = Op::softmax_naive, .mode = Mode::f16,
     .isa = Isa::neonfp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused,
     .softmax = softmax_f16<F16Native, false>},
    {.name = "f16_xent__neonfp16", .op = Op::xent, .mode = Mode::f16,
     .isa = Isa::neonfp16, .storage = DType::f16, .lanes = kLanes, .fma = FmaKind::fused, .xent = xent_f16<F16Native>},
};

}  // namespace

std::span<const Kernel> tables::nn_neonfp16() { return kNnNeonFp16; }

}  // namespace halfmap
