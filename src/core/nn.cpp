// Scalar parts of the losses and softmax shared by every ISA (compiled without ISA flags; see
// kernels/common/nn.hpp): halfmap's exp, the finishing steps, and the f16 models of mse, softmax and xent.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/math.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/nn.hpp"

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
};

struct ModelTag {};

constexpr f16 kF16QNaN{0x7E00};
constexpr f16 kF16One{0x3C00};

f16 canon(f16 v) { return is_nan(v) ? kF16QNaN : v; }

unsigned valid_lanes(unsigned lanes) { return lanes == 0 || (lanes & (lanes - 1)) != 0 ? 1 : lanes; }

float widen(DType storage, const void* values, std::size_t i) {
  switch (storage) {
    case DType::f32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(values) + 4 * i, 4);
      return v;
    }
    case DType::f16: return to_f32(static_cast<const f16*>(values)[i]);
    case DType::bf16: return to_f32(static_cast<const bf16*>(values)[i]);
  }
  return 0.0f;
}

/// One row of the f16 softmax model, written to y (which may be x).
void model_softmax_row(const f16* x, f16* y, std::size_t cols, bool stable, unsigned lanes) {
  if (cols == 0) return;
  const f16 m{stable ? detail::row_max_bits<ModelTag, DType::f16>(x, cols) : std::uint16_t{0}};
  std::vector<f16> acc(lanes);
  for (std::size_t j = 0; j < cols; ++j) {
    const f16 e = exp_f16(stable ? f16_model::sub(x[j], m) : x[j]);
    y[j] = e;
    acc[j % lanes] = f16_model::add(acc[j % lanes], e);
  }
  const float s = to_f32(f16_model::fold_lanes(acc));
  for (std::size_t j = 0; j < cols; ++j) y[j] = canon(to_f16(to_f32(y[j]) / s));
}

}  // namespace

float exp_f32(float x) { return detail::exp_f32_generic<ScalarMath>(x); }

f16 exp_f16(f16 h) { return to_f16(exp_f32(to_f32(h))); }

float f16_model_mse(const LossArgs& a, unsigned lanes, FmaKind fma) {
  lanes = valid_lanes(lanes);
  const auto* p = static_cast<const f16*>(a.p);
  const auto* y = static_cast<const f16*>(a.y);
  auto* dp = static_cast<f16*>(a.dp);
  const float c = (2.0f * a.loss_scale) / float(a.n);
  std::vector<f16> acc(lanes);
  for (std::size_t i = 0; i < a.n; ++i) {
    const f16 d = f16_model::sub(p[i], y[i]);
    acc[i % lanes] = f16_model::fma(d, d, acc[i % lanes], fma);
    if (dp != nullptr) dp[i] = canon(to_f16(c * to_f32(d)));
  }
  return detail::mse_f16_finish(f16_model::fold_lanes(acc).bits, a.n);
}

void f16_model_softmax(const SoftmaxArgs& a, bool stable, unsigned lanes) {
  lanes = valid_lanes(lanes);
  for (std::size_t i = 0; i < a.rows; ++i) {
    model_softmax_row(static_cast<const f16*>(a.x) + i * a.cols, static_cast<f16*>(a.y) + i * a.cols, a.cols,
                      stable, lanes);
  }
}

float f16_model_xent(const XentArgs& a, unsigned lanes) {
  lanes = valid_lanes(lanes);
  std::vector<f16> prow(a.cols), plab(a.rows);
  const float c = a.loss_scale / float(a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const f16* x = static_cast<const f16*>(a.logits) + i * a.cols;
    f16* p = a.probs != nullptr ? static_cast<f16*>(a.probs) + i * a.cols : prow.data();
    model_softmax_row(x, p, a.cols, true, lanes);
    const auto label = static_cast<std::size_t>(a.labels[i]);
    plab[i] = p[label];
    if (a.dlogits == nullptr) continue;
    f16* dl = static_cast<f16*>(a.dlogits) + i * a.cols;
    for (std::size_t j = 0; j < a.cols; ++j) {
      const f16 d = f16_model::sub(j == label ? plab[i] : p[j], j == label ? kF16One : f16{});
      dl[j] = canon(to_f16(c * to_f32(d)));
    }
  }
  return detail::xent_loss(Mode::f16_model, DType::f16, plab.data(), a.rows);
}

namespace detail {

float widen_bits(DType storage, std::uint32_t bits) {
  switch (storage) {
    case DType::f32: return std::bit_cast<float>(bits);
    case DType::f16: return to_f32(f16{static_cast<std::uint16_t>(bits)});
    case DType::bf16: return to_f32(bf16{static_cast<std::uint16_t>(bits)});
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

}  // namespace detail
}  // namespace halfmap
