// The neonfp16 kernels: native fp16 on ARMv8.2-A FP16 (neonfp16/ops.hpp; every add, sub, fmla and fdiv rounds
// to fp16, accumulators included, FmaKind::fused). The loops are the common ones, so each kernel has the f16
// model's order of operations: reductions element i into lane i % 64 (8 registers), mse/softmax/xent 32 lanes
// (4 registers), each dense output over k in order from +0. Where the contracts compute in f32 (exp, c·d) the
// lanes are widened exactly (fcvtl), computed with the same NEON code as the neon path and rounded back once
// (fcvtn); fdiv on fp16 is the correctly rounded fp16 quotient, which equals the f32 quotient rounded to fp16
// (docs/numerics.md). So every kernel is bit-exact to the f16 model run with its lanes and FmaKind::fused.
#include "kernels/common/rows.hpp"
#include "kernels/neonfp16/ops.hpp"

namespace halfmap::paths::neonfp16 {
namespace {

/// The neonfp16 path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::neonfp16, Tag, F32, F16> {
  /// fp8 and MX conversions through fp16 (kernels/common/fp8_codec.hpp's half_encode, half_decode), 8 values per
  /// step where neon's integer algorithm does 4.
  using Conversions = detail::HalfConversions<H16, kIsa>;
  static constexpr std::size_t kReduceRegs = 8, kNnRegs = 4;
  /// fp16 tile 8 × 16: 16 of the 32 q registers accumulate, 2 hold B. It and its blocks (k 256, A 128 rows, B 4096
  /// columns): not measured on arm64 hardware (only qemu has run it).
  using F16Block = detail::Blocking<8, 16, 128, 256, 4096>;
};

}  // namespace

PathLists lists() { return detail::kPathLists<Traits, detail::F16Rows<Traits>>; }

}  // namespace halfmap::paths::neonfp16
