// The neon kernels (arm64 Advanced SIMD, baseline ARMv8-A), the algorithms of kernels/common/ on neon/ops.hpp:
// f32, and f16_f32acc (fcvtl widens fp16 exactly, while packing for dense; f32 arithmetic; fcvtn rounds once to
// fp16 at each output). fp16 arithmetic is the neonfp16 path.
#include "kernels/common/rows.hpp"
#include "kernels/neon/ops.hpp"

namespace halfmap::paths::neon {
namespace {

/// The neon path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::neon, Tag, F32> {
  using Conversions = detail::IntegerConversions<I32, kIsa>;
  /// f32 tile 8 × 8: 16 of the 32 q registers accumulate, 2 hold B. It and its blocks (k 256, A 128 rows, B 4096
  /// columns): not measured on arm64 hardware (only qemu has run it).
  using F32Block = detail::Blocking<8, 8, 128, 256, 4096>;
};

}  // namespace

PathLists lists() {
  using namespace detail;
  return kPathLists<Traits, F32Rows<Traits>, F16F32AccRows<Traits>>;
}

}  // namespace halfmap::paths::neon
