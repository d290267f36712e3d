// The neon kernels (arm64 Advanced SIMD, baseline ARMv8-A), the algorithms of kernels/common/ on neon/ops.hpp:
// f32, and f16_f32acc (fcvtl widens fp16 exactly, while packing for dense; f32 arithmetic; fcvtn rounds once to
// fp16 at each output). fp16 arithmetic is the neonfp16 path.
#include "kernels/common/gemm.hpp"
#include "kernels/common/fp8_convert.hpp"
#include "kernels/common/fp8_modes.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/attention.hpp"
#include "kernels/common/microkernel.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/norm.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/neon/ops.hpp"

namespace halfmap::paths::neon {
namespace {

using namespace detail;
constexpr Isa kIsa = Isa::neon;
using F32S = F32Storage<F32>;
using F16S = F16Storage<F32>;

/// 8 × 8 f32 tiles: 16 q-register accumulators.
using F32Block = Blocking<8, 8, 128, 256, 4096>;
using F32Gemm = GemmTraits<F32, F32, float, Mode::f32, F32Block>;
using F16F32AccGemm = GemmTraits<F32, F32, std::uint16_t, Mode::f16_f32acc, F32Block>;

template <Op o, Mode m, class Fn>
constexpr Kernel k(Fn fn) {
  return entry<o, m, kIsa>(fn);
}

// Attention (kernels/common/attention.hpp) composed of the dense and softmax kernels below, mode by mode.
constexpr AttentionKernels kAttF32{Mode::f32, dense_fwd<F32Gemm>, dense_bwd<F32Gemm>, softmax_f32acc<F32S, true>,
                                   1, FmaKind::none, nullptr, nullptr, nullptr, softmax_bwd_row<F32>};
constexpr AttentionKernels kAttF16F32Acc{Mode::f16_f32acc,         dense_fwd<F16F32AccGemm>,
                                         dense_bwd<F16F32AccGemm>,   softmax_f32acc<F16S, true>,
                                         1,                          FmaKind::none,
                                         F32::f16_to_f32,            F32::f32_to_f16,
                                         nullptr,                    softmax_bwd_row<F32>};

const Kernel kList[] = {
    k<Op::sum, Mode::f32>(f32acc_reduce<F32S, Op::sum>),
    k<Op::sumsq, Mode::f32>(f32acc_reduce<F32S, Op::sumsq>),
    k<Op::maxabs, Mode::f32>(maxabs_reduce<Tag, std::uint32_t, DType::f32>),
    k<Op::dot, Mode::f32>(f32acc_reduce<F32S, Op::dot>),
    k<Op::sum, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::sum>),
    k<Op::sumsq, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::sumsq>),
    k<Op::maxabs, Mode::f16_f32acc>(maxabs_reduce<Tag, std::uint16_t, DType::f16>),
    k<Op::dot, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::dot>),

    k<Op::dense_fwd, Mode::f32>(dense_fwd<F32Gemm>),
    k<Op::dense_bwd, Mode::f32>(dense_bwd<F32Gemm>),
    k<Op::dense_fwd, Mode::f16_f32acc>(dense_fwd<F16F32AccGemm>),
    k<Op::dense_bwd, Mode::f16_f32acc>(dense_bwd<F16F32AccGemm>),

    k<Op::mse, Mode::f32>(mse_f32acc<F32S>),
    k<Op::softmax, Mode::f32>(softmax_f32acc<F32S, true>),
    k<Op::softmax_naive, Mode::f32>(softmax_f32acc<F32S, false>),
    k<Op::xent, Mode::f32>(xent_f32acc<F32S>),
    k<Op::mse, Mode::f16_f32acc>(mse_f32acc<F16S>),
    k<Op::softmax, Mode::f16_f32acc>(softmax_f32acc<F16S, true>),
    k<Op::softmax_naive, Mode::f16_f32acc>(softmax_f32acc<F16S, false>),
    k<Op::xent, Mode::f16_f32acc>(xent_f32acc<F16S>),

    k<Op::layernorm, Mode::f32>(norm_f32acc<F32S, false>),
    k<Op::rmsnorm, Mode::f32>(norm_f32acc<F32S, true>),
    k<Op::layernorm, Mode::f16_f32acc>(norm_f32acc<F16S, false>),
    k<Op::rmsnorm, Mode::f16_f32acc>(norm_f32acc<F16S, true>),
    k<Op::gelu, Mode::f32>(gelu_f32acc<F32S, false>),
    k<Op::gelu_tanh, Mode::f32>(gelu_f32acc<F32S, true>),
    k<Op::gelu, Mode::f16_f32acc>(gelu_f32acc<F16S, false>),
    k<Op::gelu_tanh, Mode::f16_f32acc>(gelu_f32acc<F16S, true>),
    k<Op::attention_prescale, Mode::f32>(attention<kAttF32, true>),
    k<Op::attention_postscale, Mode::f32>(attention<kAttF32, false>),
    k<Op::attention_prescale, Mode::f16_f32acc>(attention<kAttF16F32Acc, true>),
    k<Op::attention_postscale, Mode::f16_f32acc>(attention<kAttF16F32Acc, false>),
};

// fp8 conversions (kernels/common/fp8_convert.hpp) on this path's 32-bit integer lanes.
const Fp8Conversion kFp8List[] = {
    detail::fp8_conversion<I32, Fp8::e4m3, kIsa>(),
    detail::fp8_conversion<I32, Fp8::e5m2, kIsa>(),
};
constexpr auto kMxList = detail::mx_conversions_of<I32, kIsa>();

// The scaled fp8 modes (kernels/common/fp8_modes.hpp): this path's fp8 conversions feeding its f32 kernels.
constexpr detail::ScaledParts kScaled = detail::scaled_parts<I32>(
    f32acc_reduce<F32S, Op::sum>, f32acc_reduce<F32S, Op::sumsq>, maxabs_reduce<Tag, std::uint32_t, DType::f32>, f32acc_reduce<F32S, Op::dot>,
    dense_fwd<F32Gemm>, dense_bwd<F32Gemm>, mse_f32acc<F32S>, softmax_f32acc<F32S, true>);
constexpr auto kScaledList = scaled_kernels<kScaled, kIsa>();

}  // namespace

PathLists lists() { return {kList, kScaledList, kFp8List, kMxList}; }

}  // namespace halfmap::paths::neon
