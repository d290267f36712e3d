// The neonfp16 kernels: native fp16 on ARMv8.2-A FP16 (neonfp16/ops.hpp; every add, sub, fmla and fdiv rounds
// to fp16, accumulators included, FmaKind::fused). The loops are the common ones, so each kernel has the f16
// model's order of operations: reductions element i into lane i % 64 (8 registers), mse/softmax/xent 32 lanes
// (4 registers), each dense output over k in order from +0. Where the contracts compute in f32 (exp, c·d) the
// lanes are widened exactly (fcvtl), computed with the same NEON code as the neon path and rounded back once
// (fcvtn); fdiv on fp16 is the correctly rounded fp16 quotient, which equals the f32 quotient rounded to fp16
// (docs/numerics.md). So every kernel is bit-exact to the f16 model run with its lanes and FmaKind::fused.
#include "kernels/common/gemm.hpp"
#include "kernels/common/fp8_convert.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/attention.hpp"
#include "kernels/common/microkernel.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/norm.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/neonfp16/ops.hpp"

namespace halfmap::paths::neonfp16 {
namespace {

using namespace detail;
constexpr Isa kIsa = Isa::neonfp16;
constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
using F16Nn = Fp16Ops<F16, F32, kNnRegs>;
constexpr unsigned kReduceLanes = F16::kW * kReduceRegs, kNnLanes = F16::kW * kNnRegs;
using F16Gemm = GemmTraits<F16, F32, std::uint16_t, Mode::f16, Blocking<8, 16, 128, 256, 4096>>;

template <Op o, Mode m, class Fn>
constexpr Kernel k(Fn fn, unsigned lanes, FmaKind fma) {
  return entry<o, m, kIsa>(fn, {lanes, fma});
}
constexpr FmaKind kF = F16::kFma;

// Attention (kernels/common/attention.hpp) composed of the dense and softmax kernels below.
constexpr AttentionKernels kAttF16{Mode::f16,
                                   dense_fwd<F16Gemm>,
                                   dense_bwd<F16Gemm>,
                                   softmax_f16<F16Nn, true>,
                                   kNnLanes,
                                   kF,
                                   F32::f16_to_f32,
                                   F32::f32_to_f16,
                                   f16acc_reduce<F16, kNnRegs, Op::dot>};

const Kernel kList[] = {
    k<Op::sum, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::sum>, kReduceLanes, kF),
    k<Op::sumsq, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::sumsq>, kReduceLanes, kF),
    k<Op::maxabs, Mode::f16>(maxabs_reduce<Tag, std::uint16_t, DType::f16>, kReduceLanes, kF),
    k<Op::dot, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::dot>, kReduceLanes, kF),

    k<Op::dense_fwd, Mode::f16>(dense_fwd<F16Gemm>, 1, kF),
    k<Op::dense_bwd, Mode::f16>(dense_bwd<F16Gemm>, 1, kF),

    k<Op::mse, Mode::f16>(mse_f16<F16Nn>, kNnLanes, kF),
    k<Op::softmax, Mode::f16>(softmax_f16<F16Nn, true>, kNnLanes, kF),
    k<Op::softmax_naive, Mode::f16>(softmax_f16<F16Nn, false>, kNnLanes, kF),
    k<Op::xent, Mode::f16>(xent_f16<F16Nn>, kNnLanes, kF),

    k<Op::layernorm, Mode::f16>(norm_f16<F16Nn, false>, kNnLanes, kF),
    k<Op::rmsnorm, Mode::f16>(norm_f16<F16Nn, true>, kNnLanes, kF),
    k<Op::gelu, Mode::f16>(gelu_f16<F16Nn, false>, 1, kF),
    k<Op::gelu_tanh, Mode::f16>(gelu_f16<F16Nn, true>, 1, kF),
    k<Op::attention_prescale, Mode::f16>(attention<kAttF16, true>, kNnLanes, kF),
    k<Op::attention_postscale, Mode::f16>(attention<kAttF16, false>, kNnLanes, kF),
};

// fp8 and MX conversions through fp16 (kernels/common/fp8_convert.hpp's half_encode, half_decode), 8 values per
// step where neon's integer algorithm does 4.
const Fp8Conversion kFp8List[] = {
    detail::fp8_half_conversion<H16, Fp8::e4m3, kIsa>(),
    detail::fp8_half_conversion<H16, Fp8::e5m2, kIsa>(),
};
constexpr auto kMxList = detail::mx_half_conversions_of<H16, kIsa>();

}  // namespace

PathLists lists() { return {.kernels = kList, .fp8 = kFp8List, .mx = kMxList}; }

}  // namespace halfmap::paths::neonfp16
