// The avx512fp16 kernels: native fp16 (avx512fp16/ops.hpp; every add, sub, fused multiply-add and division
// rounds to fp16 in hardware, accumulators included, FmaKind::fused). The loops are the common ones, so each
// kernel has the f16 model's order of operations: reductions element i into lane i % 256 (8 registers cover
// vfmadd231ph's latency × throughput), mse/softmax/xent 128 lanes (4 registers), each dense output over k in
// order from +0. Where the contracts compute in f32 (exp, c·d) the lanes are widened exactly, computed with the
// same AVX-512F code as the avx512 path and rounded back once; vdivph is the correctly rounded fp16 quotient,
// which equals the f32 quotient rounded to fp16 (docs/numerics.md). So every kernel is bit-exact to the f16 model
// run with its lanes and FmaKind::fused.
//
// layernorm, rmsnorm, GELU and attention are the common loops too (norm.hpp, gelu.hpp, attention.hpp; attention is
// composed of this path's dense and softmax kernels), so they are bit-exact to the f16 model as well.
//
// No fp8 or MX conversions here: the conversions through fp16 use vcvtps2ph and vcvtph2ps, which are AVX-512F,
// so AVX512-FP16 adds nothing to them. avx512 already decodes through fp16; encoding through fp16 ran at 0.35x
// its integer encoding on a Xeon with AVX512-FP16 (fp8_encode at l1, e4m3 and e5m2 alike), so it keeps the
// integers there too.
#include "kernels/avx512fp16/ops.hpp"
#include "kernels/common/attention.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/gemm.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/microkernel.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/norm.hpp"
#include "kernels/common/reduce.hpp"

namespace halfmap::paths::avx512fp16 {
namespace {

using namespace detail;
constexpr Isa kIsa = Isa::avx512fp16;
constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
using F16Nn = Fp16Ops<F16, F32, kNnRegs>;
constexpr unsigned kReduceLanes = F16::kW * kReduceRegs, kNnLanes = F16::kW * kNnRegs;
using F16Gemm = GemmTraits<F16, F32, std::uint16_t, Mode::f16, Blocking<8, 64, 128, 256, 4096>>;

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

}  // namespace

PathLists lists() { return {.kernels = kList}; }

}  // namespace halfmap::paths::avx512fp16
