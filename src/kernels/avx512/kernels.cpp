// The avx512 kernels (AVX-512F/BW/VL), the algorithms of kernels/common/ on avx512/ops.hpp:
//   f32          f32 arithmetic;
//   f16_f32acc   fp16 widened with vcvtph2ps (while packing, for dense: the f32 micro-kernel does the work and
//                fp16 storage costs no compute speed), f32 arithmetic, vcvtps2ph once at each output;
//   f16          fp16 arithmetic emulated per operation (F16: every f32 result rounded back with vcvtps2ph,
//                FmaKind::f32_round), 128 lanes for the reductions and 64 for mse/softmax/xent (Traits' register
//                counts), each dense output in k order.
#include <array>

#include "kernels/avx512/ops.hpp"
#include "kernels/common/rows.hpp"

namespace halfmap::paths::avx512 {
namespace {

// fp8 and MX conversions: encoded on 32-bit integer lanes (fp8_codec.hpp), decoded through fp16 (half_decode:
// the element's bits placed in fp16's, vcvtph2ps). Measured on Zen 5 at l1, in paired runs: decoding through fp16
// 1.12x (E4M3) and 1.53x (E5M2) the integer decode; encoding through fp16 0.38-0.41x the integer encode (vcvtps2ph
// of a zmm is slow there), so encoding keeps the integers.
using H16 = H16T<Tag>;
template <Fp8 kF>
constexpr Fp8Conversion fp8_entry() {
  Fp8Conversion c = detail::fp8_conversion<I32, kF, Isa::avx512>();
  c.decode = detail::fp8_half_decoder<H16, kF>;
  return c;
}
template <MxElem kT>
constexpr MxConversion mx_entry() {
  MxConversion c = detail::mx_conversion<I32, kT, Isa::avx512>();
  c.decode = detail::mx_half_decoder<H16, kT>;
  return c;
}
struct Fp8Lists {
  static constexpr std::array<Fp8Conversion, 2> kFp8{fp8_entry<Fp8::e4m3>(), fp8_entry<Fp8::e5m2>()};
  static constexpr std::array<MxConversion, 5> kMx{mx_entry<MxElem::e4m3>(), mx_entry<MxElem::e5m2>(),
                                                   mx_entry<MxElem::e3m2>(), mx_entry<MxElem::e2m3>(),
                                                   mx_entry<MxElem::e2m1>()};
};

/// The avx512 path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::avx512, Tag, F32, F16> {
  using Conversions = Fp8Lists;
  /// f16: as avx2 (8 registers hide the FMA's and the two conversions' latency; 4 for mse, softmax, xent, norms).
  static constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
  /// f32 tile 6 × 64: 24 accumulators, and per k 4 loads of B and 6 broadcasts of A for 24 FMAs (12 × 32 needs 12
  /// broadcasts). k blocks of 1024 keep a layer's whole k in one block up to k = 1024, so the micro-tiles' partial
  /// sums never make a round trip through memory (the epilogue finishes each tile from L1, see gemm.hpp). The
  /// 256 KiB B micro-panel and the 72-row A block (288 KiB) share L2, from where the kernel streams 256 + 24 bytes
  /// per 24 FMAs. Measured on Zen 4 against 12 × 32 with k blocks of 256/512/1024, 6 × 64 with 256/384/512/1024
  /// and 8 × 48, 4 × 96: at 1024³, 12 × 32 / 256 ran at 0.89 of this, 12 × 32 / 1024 at 0.97. B blocks of 2048
  /// columns: not measured.
  using F32Block = detail::Blocking<6, 64, 72, 1024, 2048>;
  /// fp16 tile 8 × 32: 16 accumulators, 2 of B; it and its blocks (k 256, A 128 rows, B 4096 columns): no
  /// measurement recorded.
  using F16Block = detail::Blocking<8, 32, 128, 256, 4096>;
};

}  // namespace

PathLists lists() {
  using namespace detail;
  return kPathLists<Traits, F32Rows<Traits>, F16F32AccRows<Traits>, F16Rows<Traits>>;
}

}  // namespace halfmap::paths::avx512
