// Scalar steps of the losses and softmax shared by every ISA (compiled without ISA flags; see
// kernels/common/nn.hpp): halfmap's exp and the finishing steps.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "halfmap/f16_model.hpp"
#include "halfmap/math.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/norm.hpp"

namespace halfmap {
namespace {

/// exp_f32_generic's primitives on one float: the same IEEE operations as every SIMD path.
struct ScalarMath {
  using V = float;
  static constexpr std::size_t kW = 1;
  static float set1(float v) { return v; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static float fma(float a, float b, float c) { return std::fma(a, b, c); }
  static float min(float a, float b) { return b < a ? b : a; }
  static float max(float a, float b) { return b > a ? b : a; }
  static float scale2n(float p, float n) {
    const int ni = static_cast<int>(n);
    const int n1 = ni >> 1;  // floor(n/2): arithmetic shift
    const int n2 = ni - n1;
    const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
    const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
    return (p * s1) * s2;
  }
  static float nan_pass(float x, float y) { return x != x ? x + x : y; }
  static float copysign(float mag, float sgn) { return std::copysign(mag, sgn); }
  static float div(float a, float b) { return a / b; }
};

float widen(DType storage, const void* values, std::size_t i) {
  switch (storage) {
    case DType::f32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(values) + 4 * i, 4);
      return v;
    }
    case DType::f16:
      return to_f32(static_cast<const f16*>(values)[i]);
    case DType::bf16:
      return to_f32(static_cast<const bf16*>(values)[i]);
  }
  return 0.0f;
}

}  // namespace

float exp_f32(float x) { return detail::exp_f32_generic<ScalarMath>(x); }
float erf_f32(float x) { return detail::erf_f32_generic<ScalarMath>(x); }
float tanh_f32(float x) { return detail::tanh_f32_generic<ScalarMath>(x); }

f16 exp_f16(f16 h) { return to_f16(exp_f32(to_f32(h))); }

namespace detail {

float widen_bits(DType storage, std::uint32_t bits) {
  switch (storage) {
    case DType::f32:
      return std::bit_cast<float>(bits);
    case DType::f16:
      return to_f32(f16{static_cast<std::uint16_t>(bits)});
    case DType::bf16:
      return to_f32(bf16{static_cast<std::uint16_t>(bits)});
  }
  return 0.0f;
}

float mse_f16_finish(std::uint16_t acc_bits, std::size_t n) {
  const f16 l = to_f16(to_f32(f16{acc_bits}) / float(n));
  return is_nan(l) ? std::numeric_limits<float>::quiet_NaN() : to_f32(l);
}

float xent_loss(Mode mode, DType storage, const void* p_at_label, std::size_t rows) {
  if (mode == Mode::f16 || mode == Mode::f16_model) {
    f16 acc{};
    for (std::size_t r = 0; r < rows; ++r) acc = f16_model::add(acc, to_f16(-std::log(widen(storage, p_at_label, r))));
    const f16 l = to_f16(to_f32(acc) / float(rows));
    return is_nan(l) ? std::numeric_limits<float>::quiet_NaN() : to_f32(l);
  }
  float sum = 0.0f;
  for (std::size_t r = 0; r < rows; ++r) sum += -std::log(widen(storage, p_at_label, r));
  return f32acc_finish(mode, sum / float(rows));
}

std::uint16_t f16_const_bits(float v) { return to_f16(v).bits; }

std::uint16_t f16_div_n(std::uint16_t s, std::size_t n) { return to_f16(to_f32(f16{s}) / float(n)).bits; }

std::uint16_t f16_rstd(std::uint16_t v, float eps) {
  const f16 ve = f16_model::add(f16{v}, to_f16(eps));
  return to_f16(1.0f / std::sqrt(to_f32(ve))).bits;
}

float f16_stat(std::uint16_t bits) {
  const f16 h{bits};
  return is_nan(h) ? std::numeric_limits<float>::quiet_NaN() : to_f32(h);
}

}  // namespace detail
}  // namespace halfmap
