// Scalar finishing steps shared by every ISA's reductions, compiled without ISA flags (see
// kernels/common/reduce.hpp). They are the kernels' own code: the models (src/models/) that the kernels are checked
// against compute the same steps separately, sharing only half.hpp's conversions and the one fp16 add
// f16_model::add (docs/contributing.md, "A reference shares no code with what it checks").
#include <algorithm>
#include <bit>
#include <cmath>

#include "halfmap/f16_model.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/reduce.hpp"

namespace halfmap {
namespace detail {

namespace {

/// a·b + c rounded once to fp16 (fused, and none: via f64, where the product is exact), or fused in f32 and then
/// rounded to fp16 (f32_round): the two fp16 FMAs of FmaKind.
f16 fma_f16(f16 a, f16 b, f16 c, FmaKind fma) {
  if (fma == FmaKind::f32_round) return to_f16(std::fma(to_f32(a), to_f32(b), to_f32(c)));
  return to_f16(std::fma(to_f64(a), to_f64(b), to_f64(c)));
}

bool nan32(std::uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }
bool snan32(std::uint32_t b) { return nan32(b) && (b & 0x00400000u) == 0; }

}  // namespace

float f16acc_finish(Op op, std::uint16_t* lane_bits, unsigned lanes, const std::uint16_t* x, const std::uint16_t* y,
                    std::size_t count, FmaKind fma) {
  // f16 is a struct holding exactly one uint16_t, so the lanes can be viewed as f16 values.
  static_assert(sizeof(f16) == sizeof(std::uint16_t) && alignof(f16) == alignof(std::uint16_t));
  auto* acc = reinterpret_cast<f16*>(lane_bits);
  for (std::size_t k = 0; k < count; ++k) {
    const f16 xk{x[k]};
    switch (op) {
      case Op::sum:
        acc[k] = f16_model::add(acc[k], xk);
        break;
      case Op::sumsq:
        acc[k] = fma_f16(xk, xk, acc[k], fma);
        break;
      case Op::dot:
        acc[k] = fma_f16(xk, y != nullptr ? f16{y[k]} : f16{}, acc[k], fma);
        break;
      case Op::maxabs:
        acc[k].bits = std::max<std::uint16_t>(acc[k].bits & 0x7FFFu, xk.bits & 0x7FFFu);
        break;
      default:
        break;  // not a reduction
    }
  }
  // lane j += lane j + w for w = lanes/2, ..., 1
  for (unsigned w = lanes / 2; w >= 1; w /= 2) {
    for (unsigned j = 0; j < w; ++j) acc[j] = f16_model::add(acc[j], acc[j + w]);
  }
  return lanes == 0 ? 0.0f : to_f32(acc[0]);
}

float arm_fadd(float a, float b) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(a), y = std::bit_cast<std::uint32_t>(b);
  if (snan32(x)) return std::bit_cast<float>(x | 0x00400000u);
  if (snan32(y)) return std::bit_cast<float>(y | 0x00400000u);
  if (nan32(x)) return a;
  if (nan32(y)) return b;
  const float r = a + b;
  return std::isnan(r) ? std::bit_cast<float>(0x7FC00000u) : r;  // inf - inf: the default NaN
}

float arm_fadd_fold(float* acc, unsigned lanes) {
  for (unsigned w = lanes / 2; w >= 1; w /= 2) {
    for (unsigned j = 0; j < w; ++j) acc[j] = arm_fadd(acc[j], acc[j + w]);
  }
  return lanes == 0 ? 0.0f : acc[0];
}

float f32acc_finish(Mode mode, float acc) {
  switch (mode) {
    case Mode::f16_f32acc:
      return to_f32(to_f16(acc));
    case Mode::bf16_f32acc:
      return to_f32(to_bf16(acc));
    default:
      return acc;
  }
}

float f32lanes_finish(Mode mode, float* acc, unsigned lanes) { return f32acc_finish(mode, arm_fadd_fold(acc, lanes)); }

float maxabs_from_key(DType storage, std::uint32_t key) {
  switch (storage) {
    case DType::f16:
      return to_f32(f16{static_cast<std::uint16_t>(key)});
    case DType::bf16:
      return to_f32(bf16{static_cast<std::uint16_t>(key)});
    case DType::f32:
      return std::bit_cast<float>(key);
  }
  return 0.0f;
}

}  // namespace detail
}  // namespace halfmap
