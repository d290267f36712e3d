// Scalar finishing steps shared by every ISA's reductions, compiled without ISA flags (see
// kernels/common/reduce.hpp): the fp16 tails take the f16 model's own step.
#include <bit>

#include "halfmap/f16_model.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/reduce.hpp"

namespace halfmap {
namespace detail {

float f16acc_finish(Op op, std::uint16_t* lane_bits, unsigned lanes, const std::uint16_t* x, const std::uint16_t* y,
                    std::size_t count, FmaKind fma) {
  // f16 is a struct holding exactly one uint16_t, so the lanes can be viewed as f16 values.
  static_assert(sizeof(f16) == sizeof(std::uint16_t) && alignof(f16) == alignof(std::uint16_t));
  auto* acc = reinterpret_cast<f16*>(lane_bits);
  for (std::size_t k = 0; k < count; ++k) {
    acc[k] = f16_model_step(op, acc[k], f16{x[k]}, y != nullptr ? f16{y[k]} : f16{}, fma);
  }
  return to_f32(f16_model::fold_lanes(std::span<f16>(acc, lanes)));
}

float f32acc_finish(Mode mode, float acc) {
  switch (mode) {
    case Mode::f16_f32acc: return to_f32(to_f16(acc));
    case Mode::bf16_f32acc: return to_f32(to_bf16(acc));
    default: return acc;
  }
}

float f32lanes_finish(Mode mode, float* acc, unsigned lanes) {
  // The model's fold: its adds pick NaN operands as FADD does, whatever order the compiler gives a C++ add.
  return f32acc_finish(mode, f32acc_model_fold(acc, lanes));
}

float maxabs_from_key(DType storage, std::uint32_t key) {
  switch (storage) {
    case DType::f16: return to_f32(f16{static_cast<std::uint16_t>(key)});
    case DType::bf16: return to_f32(bf16{static_cast<std::uint16_t>(key)});
    case DType::f32: return std::bit_cast<float>(key);
  }
  return 0.0f;
}

}  // namespace detail
}  // namespace halfmap
