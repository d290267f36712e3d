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
#include "kernels/common/rows.hpp"

namespace halfmap::paths::avx512fp16 {
namespace {

/// The avx512fp16 path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::avx512fp16, Tag, F32, F16> {
  static constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
  /// fp16 tile 8 × 64: 16 accumulators of 32 lanes and 2 registers of B, A broadcast inside vfmadd231ph
  /// (F16::fma_broadcast). It and its blocks (k 256, A 128 rows, B 4096 columns): no measurement recorded.
  using F16Block = detail::Blocking<8, 64, 128, 256, 4096>;
};

}  // namespace

PathLists lists() { return detail::kPathLists<Traits, detail::F16Rows<Traits>>; }

}  // namespace halfmap::paths::avx512fp16
