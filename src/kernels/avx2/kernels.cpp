// The avx2 kernels (AVX2 + FMA + F16C), the algorithms of kernels/common/ on avx2/ops.hpp:
//   f32          f32 arithmetic;
//   f16_f32acc   fp16 widened with vcvtph2ps (while packing, for dense), f32 arithmetic, vcvtps2ph once at each
//                output;
//   f16          fp16 arithmetic emulated per operation (F16: every f32 result rounded back with vcvtps2ph,
//                FmaKind::f32_round), 64 lanes for the reductions and 32 for mse/softmax/xent (Traits' register
//                counts), each dense output in k order, its accumulator kept as fp16 in L1 (microkernel_l1).
#include "kernels/avx2/ops.hpp"
#include "kernels/common/rows.hpp"

namespace halfmap::paths::avx2 {
namespace {

/// The avx2 path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::avx2, Tag, F32, F16> {
  using Conversions = detail::IntegerConversions<I32, kIsa>;
  /// f16: 8 registers of lanes for the reductions (they hide the FMA's and the two conversions' latency), 4 for
  /// mse, softmax, xent and the norms.
  static constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
  /// f32 tile 6 × 16: 12 ymm accumulators, 2 for B and the broadcast of A; per k 2 loads of B and 6 broadcasts for
  /// 12 FMAs. Measured on a Xeon running the avx2 path, f32 dense 1024³: 0.87-0.92 of the avx2 FMA roof, 4 × 24
  /// tiles 0.65-0.69. k blocks of 1024, as on avx512: a layer's whole k up to 1024 is one block, so the partial
  /// sums never make a round trip through the 4 MiB accumulator at 1024³ (whose rows, 4 KiB apart, missed in cache
  /// at every reload) and the epilogue finishes each tile from L1; k blocks of 256 ran at 0.78-0.81, 512 at 0.79.
  /// A blocks of 120 rows (480 KiB) stream from L2 beside the 64 KiB B micro-panel; 72 rows ran as 120. B blocks
  /// of 4096 columns: not measured.
  using F32Block = detail::Blocking<6, 16, 120, 1024, 4096>;
  /// fp16 tile 8 × 64 on microkernel_l1: its accumulators stay as fp16 in the output (L1), 64 chains of FMA +
  /// vcvtps2ph + vcvtph2ps (some 16 cycles each in registers), enough to be bound by the conversions' throughput,
  /// not their latency; in registers the 12 chains of a 6 × 16 tile (12 accumulators, 2 of B, the broadcast and the
  /// conversion's temporary) were all 16 ymm could hold. Measured on a Zen 5 in paired runs, dense_fwd 1024³: 6 × 16
  /// in registers 31-33 GFLOP/s; in L1 6 × 64 41, 8 × 64 42-43.5, 8 × 48 38, 12 × 32 37, 8 × 32 40; dense_bwd 31
  /// against 37-39 (8 × 64). The blocks (k 256, A 120 rows, B 4096 columns) are the 6 × 16 tile's, not measured
  /// again.
  using F16Block = detail::BlockingL1<8, 64, 120, 256, 4096>;
};

}  // namespace

PathLists lists() {
  using namespace detail;
  return kPathLists<Traits, F32Rows<Traits>, F16F32AccRows<Traits>, F16Rows<Traits>>;
}

}  // namespace halfmap::paths::avx2
