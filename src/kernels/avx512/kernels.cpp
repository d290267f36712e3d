// The avx512 kernels (AVX-512F/BW/VL), the algorithms of kernels/common/ on avx512/ops.hpp:
//   f32          f32 arithmetic;
//   f16_f32acc   fp16 widened with vcvtph2ps (while packing, for dense: the f32 micro-kernel does the work and
//                fp16 storage costs no compute speed), f32 arithmetic, vcvtps2ph once at each output;
//   f16          fp16 arithmetic emulated per operation (F16: every f32 result rounded back with vcvtps2ph,
//                FmaKind::f32_round), 128 lanes for the reductions (8 registers hide the fma + 2 conversions
//                latency), 64 for mse/softmax/xent (4 registers), each dense output in k order.
#include <array>

#include "kernels/avx512/ops.hpp"
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

namespace halfmap::paths::avx512 {
namespace {

using namespace detail;
constexpr Isa kIsa = Isa::avx512;
using F32S = F32Storage<F32>;
using F16S = F16Storage<F32>;
constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
using F16Nn = Fp16Ops<F16, F32, kNnRegs>;
constexpr unsigned kReduceLanes = F16::kW * kReduceRegs, kNnLanes = F16::kW * kNnRegs;

/// 6 × 64 f32 tiles: 24 accumulators, and per k 4 loads of B and 6 broadcasts of A for 24 FMAs (12 × 32 needs
/// 12 broadcasts). k blocks of 1024 keep a layer's whole k in one block up to k = 1024, so the micro-tiles'
/// partial sums never make a round trip through memory (the epilogue finishes each tile from L1, see gemm.hpp).
/// The 256 KiB B micro-panel and the 72-row A block (288 KiB) share L2, from where the kernel streams 256 + 24
/// bytes per 24 FMAs. Measured on Zen 4 against 12 × 32 with k blocks of 256/512/1024, 6 × 64 with
/// 256/384/512/1024 and 8 × 48, 4 × 96: at 1024³, 12 × 32 / 256 ran at 0.89 of this, 12 × 32 / 1024 at 0.97.
/// The per-op fp16 tile is 8 × 32.
using F32Block = Blocking<6, 64, 72, 1024, 2048>;
using F32Gemm = GemmTraits<F32, F32, float, Mode::f32, F32Block>;
using F16F32AccGemm = GemmTraits<F32, F32, std::uint16_t, Mode::f16_f32acc, F32Block>;
using F16Gemm = GemmTraits<F16, F32, std::uint16_t, Mode::f16, Blocking<8, 32, 128, 256, 4096>>;

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

// fp8 and MX conversions: encoded on 32-bit integer lanes (fp8_convert.hpp), decoded through fp16 (half_decode:
// the element's bits placed in fp16's, vcvtph2ps). Measured on Zen 5 at l1, in paired runs: decoding through fp16
// 1.12x (E4M3) and 1.53x (E5M2) the integer decode; encoding through fp16 0.38-0.41x the integer encode (vcvtps2ph
// of a zmm is slow there), so encoding keeps the integers.
using H16 = H16T<Tag>;
template <Fp8 kF>
constexpr Fp8Conversion fp8_entry() {
  Fp8Conversion c = detail::fp8_conversion<I32, kF, kIsa>();
  c.decode = detail::fp8_half_decoder<H16, kF>;
  return c;
}
template <MxElem kT>
constexpr MxConversion mx_entry() {
  MxConversion c = detail::mx_conversion<I32, kT, kIsa>();
  c.decode = detail::mx_half_decoder<H16, kT>;
  return c;
}
const Fp8Conversion kFp8List[] = {
    fp8_entry<Fp8::e4m3>(),
    fp8_entry<Fp8::e5m2>(),
};
constexpr std::array<MxConversion, 5> kMxList = {mx_entry<MxElem::e4m3>(), mx_entry<MxElem::e5m2>(),
                                                  mx_entry<MxElem::e3m2>(), mx_entry<MxElem::e2m3>(),
                                                  mx_entry<MxElem::e2m1>()};

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

}  // namespace halfmap::paths::avx512
