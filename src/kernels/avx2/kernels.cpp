// The avx2 kernels (AVX2 + FMA + F16C), the algorithms of kernels/common/ on avx2/ops.hpp:
//   f32          f32 arithmetic;
//   f16_f32acc   fp16 widened with vcvtph2ps (while packing, for dense), f32 arithmetic, vcvtps2ph once at each
//                output;
//   f16          fp16 arithmetic emulated per operation (F16: every f32 result rounded back with vcvtps2ph,
//                FmaKind::f32_round), 64 lanes for the reductions (8 registers hide the fma + 2 conversions
//                latency), 32 for mse/softmax/xent (4 registers), each dense output in k order, its accumulator
//                kept as fp16 in L1 (microkernel_l1).
#include "kernels/avx2/ops.hpp"
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

namespace halfmap::paths::avx2 {
namespace {

using namespace detail;
constexpr Isa kIsa = Isa::avx2;
using F32S = F32Storage<F32>;
using F16S = F16Storage<F32>;
constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
using F16Nn = Fp16Ops<F16, F32, kNnRegs>;
constexpr unsigned kReduceLanes = F16::kW * kReduceRegs, kNnLanes = F16::kW * kNnRegs;

/// 6 × 16 f32 tiles: 12 ymm accumulators, 2 for B, 1 broadcast of A; per k 2 loads of B and 6 broadcasts for 12
/// FMAs. k blocks of 1024, as on avx512: a layer's whole k up to 1024 is one block, so the partial sums never make
/// a round trip through the 4 MiB accumulator at 1024³ (whose rows, 4 KiB apart, missed in cache at every reload)
/// and the epilogue finishes each tile from L1. The 64 KiB B micro-panel streams from L2 with the 120-row A block
/// (480 KiB). Measured here (Xeon, AVX-512 machine running the avx2 path) at 1024³, f32: k blocks of 256 ran at
/// 0.78-0.81 of the avx2 FMA roof, 512 at 0.79, 1024 at 0.87-0.92; 4 × 24 tiles at 0.65-0.69; 72-row A blocks
/// as 120. The per-op fp16 tile is 8 × 64 on microkernel_l1: its accumulators stay as fp16 in the output (L1),
/// 64 chains of FMA + vcvtps2ph + vcvtph2ps (some 16 cycles each in registers), enough to be bound by the
/// conversions' throughput, not their latency. In registers the 12 chains of a 6 × 16 tile (12 accumulators, 2 of
/// B, the broadcast and the conversion's temporary) were all 16 ymm could hold. Measured here (Zen 5) in paired
/// runs, dense_fwd 1024³: 6 × 16 in registers 31-33 GFLOP/s; in L1 6 × 64 41, 8 × 64 42-43.5, 8 × 48 38, 12 × 32
/// 37, 8 × 32 40; dense_bwd 1024³ 31 against 37-39 (8 × 64).
using F32Block = Blocking<6, 16, 120, 1024, 4096>;
using F32Gemm = GemmTraits<F32, F32, float, Mode::f32, F32Block>;
using F16F32AccGemm = GemmTraits<F32, F32, std::uint16_t, Mode::f16_f32acc, F32Block>;
using F16Gemm = GemmTraits<F16, F32, std::uint16_t, Mode::f16, BlockingL1<8, 64, 120, 256, 4096>>;

template <Op o, Mode m, class Fn>
constexpr Kernel k(Fn fn, unsigned lanes = 1, FmaKind fma = FmaKind::none) {
  return entry<o, m, kIsa>(fn, lanes, fma);
}
constexpr FmaKind kF = F16::kFma;

// Attention (kernels/common/attention.hpp) composed of the dense and softmax kernels below, mode by mode.
using detail::AttentionKernels;
constexpr AttentionKernels kAttF32{Mode::f32, dense_fwd<F32Gemm>, dense_bwd<F32Gemm>, softmax_f32acc<F32S, true>,
                                   1, FmaKind::none, nullptr, nullptr, nullptr, softmax_bwd_row<F32>};
constexpr AttentionKernels kAttF16F32Acc{Mode::f16_f32acc,         dense_fwd<F16F32AccGemm>,
                                         dense_bwd<F16F32AccGemm>,   softmax_f32acc<F16S, true>,
                                         1,                          FmaKind::none,
                                         F32::f16_to_f32,            F32::f32_to_f16,
                                         nullptr,                    softmax_bwd_row<F32>};
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
    k<Op::sum, Mode::f32>(f32acc_reduce<F32S, Op::sum>),
    k<Op::sumsq, Mode::f32>(f32acc_reduce<F32S, Op::sumsq>),
    k<Op::maxabs, Mode::f32>(maxabs_reduce<Tag, std::uint32_t, DType::f32>),
    k<Op::dot, Mode::f32>(f32acc_reduce<F32S, Op::dot>),
    k<Op::sum, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::sum>),
    k<Op::sumsq, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::sumsq>),
    k<Op::maxabs, Mode::f16_f32acc>(maxabs_reduce<Tag, std::uint16_t, DType::f16>),
    k<Op::dot, Mode::f16_f32acc>(f32acc_reduce<F16S, Op::dot>),
    k<Op::sum, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::sum>, kReduceLanes, kF),
    k<Op::sumsq, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::sumsq>, kReduceLanes, kF),
    k<Op::maxabs, Mode::f16>(maxabs_reduce<Tag, std::uint16_t, DType::f16>, kReduceLanes, kF),
    k<Op::dot, Mode::f16>(f16acc_reduce<F16, kReduceRegs, Op::dot>, kReduceLanes, kF),

    k<Op::dense_fwd, Mode::f32>(dense_fwd<F32Gemm>),
    k<Op::dense_bwd, Mode::f32>(dense_bwd<F32Gemm>),
    k<Op::dense_fwd, Mode::f16_f32acc>(dense_fwd<F16F32AccGemm>),
    k<Op::dense_bwd, Mode::f16_f32acc>(dense_bwd<F16F32AccGemm>),
    k<Op::dense_fwd, Mode::f16>(dense_fwd<F16Gemm>, 1, kF),
    k<Op::dense_bwd, Mode::f16>(dense_bwd<F16Gemm>, 1, kF),

    k<Op::mse, Mode::f32>(mse_f32acc<F32S>),
    k<Op::softmax, Mode::f32>(softmax_f32acc<F32S, true>),
    k<Op::softmax_naive, Mode::f32>(softmax_f32acc<F32S, false>),
    k<Op::xent, Mode::f32>(xent_f32acc<F32S>),
    k<Op::mse, Mode::f16_f32acc>(mse_f32acc<F16S>),
    k<Op::softmax, Mode::f16_f32acc>(softmax_f32acc<F16S, true>),
    k<Op::softmax_naive, Mode::f16_f32acc>(softmax_f32acc<F16S, false>),
    k<Op::xent, Mode::f16_f32acc>(xent_f32acc<F16S>),
    k<Op::mse, Mode::f16>(mse_f16<F16Nn>, kNnLanes, kF),
    k<Op::softmax, Mode::f16>(softmax_f16<F16Nn, true>, kNnLanes, kF),
    k<Op::softmax_naive, Mode::f16>(softmax_f16<F16Nn, false>, kNnLanes, kF),
    k<Op::xent, Mode::f16>(xent_f16<F16Nn>, kNnLanes, kF),

    k<Op::layernorm, Mode::f32>(norm_f32acc<F32S, false>),
    k<Op::rmsnorm, Mode::f32>(norm_f32acc<F32S, true>),
    k<Op::layernorm, Mode::f16_f32acc>(norm_f32acc<F16S, false>),
    k<Op::rmsnorm, Mode::f16_f32acc>(norm_f32acc<F16S, true>),
    k<Op::layernorm, Mode::f16>(norm_f16<F16Nn, false>, kNnLanes, kF),
    k<Op::rmsnorm, Mode::f16>(norm_f16<F16Nn, true>, kNnLanes, kF),
    k<Op::gelu, Mode::f32>(gelu_f32acc<F32S, false>),
    k<Op::gelu_tanh, Mode::f32>(gelu_f32acc<F32S, true>),
    k<Op::gelu, Mode::f16_f32acc>(gelu_f32acc<F16S, false>),
    k<Op::gelu_tanh, Mode::f16_f32acc>(gelu_f32acc<F16S, true>),
    k<Op::gelu, Mode::f16>(gelu_f16<F16Nn, false>, 1, kF),
    k<Op::gelu_tanh, Mode::f16>(gelu_f16<F16Nn, true>, 1, kF),
    k<Op::attention_prescale, Mode::f32>(attention<kAttF32, true>),
    k<Op::attention_postscale, Mode::f32>(attention<kAttF32, false>),
    k<Op::attention_prescale, Mode::f16_f32acc>(attention<kAttF16F32Acc, true>),
    k<Op::attention_postscale, Mode::f16_f32acc>(attention<kAttF16F32Acc, false>),
    k<Op::attention_prescale, Mode::f16>(attention<kAttF16, true>, kNnLanes, kF),
    k<Op::attention_postscale, Mode::f16>(attention<kAttF16, false>, kNnLanes, kF),
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

std::span<const Kernel> list() { return kList; }
std::span<const Kernel> scaled_list() { return kScaledList; }
std::span<const Fp8Conversion> fp8_list() { return kFp8List; }
std::span<const MxConversion> mx_list() { return kMxList; }

}  // namespace halfmap::paths::avx2
