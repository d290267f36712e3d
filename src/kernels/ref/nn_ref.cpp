// Portable scalar losses and softmax: the f32 reference, the portable f16_f32acc and bf16_f32acc models (f32
// arithmetic on widened inputs, sequential sums, one rounding at each output) and the f16 model (mode f16_model:
// every operation rounded to fp16, sequential, fused multiply-add). Contracts: LossArgs, SoftmaxArgs, XentArgs.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

template <class Elem>
float widen(Elem v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else {
    return to_f32(v);
  }
}

template <class Elem>
Elem narrow(float v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else if constexpr (std::is_same_v<Elem, f16>) {
    return to_f16(v);
  } else {
    return to_bf16(v);
  }
}

template <class Elem>
constexpr Mode mode_of() {
  return std::is_same_v<Elem, float> ? Mode::f32 : std::is_same_v<Elem, f16> ? Mode::f16_f32acc : Mode::bf16_f32acc;
}
template <class Elem>
constexpr DType dtype_of() {
  return std::is_same_v<Elem, float> ? DType::f32 : std::is_same_v<Elem, f16> ? DType::f16 : DType::bf16;
}

template <class Elem>
float f32acc_mse(const LossArgs& a) {
  const auto* p = static_cast<const Elem*>(a.p);
  const auto* y = static_cast<const Elem*>(a.y);
  auto* dp = static_cast<Elem*>(a.dp);
  const float c = (2.0f * a.loss_scale) / float(a.n);
  float sum = 0.0f;
  for (std::size_t i = 0; i < a.n; ++i) {
    const float d = widen(p[i]) - widen(y[i]);
    sum += d * d;
    if (dp != nullptr) dp[i] = narrow<Elem>(c * d);
  }
  return detail::f32acc_finish(mode_of<Elem>(), sum / float(a.n));
}

template <class Elem>
void f32acc_softmax_row(const Elem* x, Elem* y, std::size_t cols, bool stable, std::vector<float>& e) {
  float m = 0.0f;
  if (stable) {
    m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (std::size_t j = 0; j < cols; ++j) {
      const float v = widen(x[j]);
      nan = nan || v != v;
      m = v > m ? v : m;
    }
    if (nan) m = std::numeric_limits<float>::quiet_NaN();
  }
  e.resize(cols);
  float s = 0.0f;
  for (std::size_t j = 0; j < cols; ++j) {
    e[j] = exp_f32(stable ? widen(x[j]) - m : widen(x[j]));
    s += e[j];
  }
  for (std::size_t j = 0; j < cols; ++j) y[j] = narrow<Elem>(e[j] / s);
}

template <class Elem, bool kStable>
void f32acc_softmax(const SoftmaxArgs& a) {
  std::vector<float> e;
  for (std::size_t i = 0; i < a.rows; ++i) {
    f32acc_softmax_row(static_cast<const Elem*>(a.x) + i * a.cols, static_cast<Elem*>(a.y) + i * a.cols, a.cols,
                       kStable, e);
  }
}

template <class Elem>
float f32acc_xent(const XentArgs& a) {
  std::vector<float> e;
  std::vector<Elem> prow(a.cols), plab(a.rows);
  const float c = a.loss_scale / float(a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* x = static_cast<const Elem*>(a.logits) + i * a.cols;
    Elem* p = a.probs != nullptr ? static_cast<Elem*>(a.probs) + i * a.cols : prow.data();
    f32acc_softmax_row(x, p, a.cols, true, e);
    const auto label = static_cast<std::size_t>(a.labels[i]);
    plab[i] = p[label];
    if (a.dlogits == nullptr) continue;
    Elem* dl = static_cast<Elem*>(a.dlogits) + i * a.cols;
    for (std::size_t j = 0; j < a.cols; ++j) dl[j] = narrow<Elem>(c * (widen(p[j]) - (j == label ? 1.0f : 0.0f)));
  }
  return detail::xent_loss(mode_of<Elem>(), dtype_of<Elem>(), plab.data(), a.rows);
}

float f16_model_mse_ref(const LossArgs& a) { return f16_model_mse(a, 1, FmaKind::fused); }
void f16_model_softmax_ref(const SoftmaxArgs& a) { f16_model_softmax(a, true, 1); }
void f16_model_softmax_naive_ref(const SoftmaxArgs& a) { f16_model_softmax(a, false, 1); }
float f16_model_xent_ref(const XentArgs& a) { return f16_model_xent(a, 1); }

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

const Kernel kNnRef[] = {
    {.name = "f32_mse__ref", .op = Op::mse, .mode = Mode::f32,
     .isa = Isa::ref, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .loss = f32acc_mse<float>},
    {.name = "f32_softmax__ref", .op = Op::softmax, .mode = Mode::f32,
     .isa = Isa::ref, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<float, true>},
    {.name = "f32_softmax_naive__ref", .op = Op::softmax_naive, .mode = Mode::f32,
     .isa = Isa::ref, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<float, false>},
    {.name = "f32_xent__ref", .op = Op::xent, .mode = Mode::f32,
     .isa = Isa::ref, .storage = DType::f32, .lanes = 1, .fma = kNoFma, .xent = f32acc_xent<float>},

    {.name = "f16_f32acc_mse__ref", .op = Op::mse, .mode = Mode::f16_f32acc,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .loss = f32acc_mse<f16>},
    {.name = "f16_f32acc_softmax__ref", .op = Op::softmax, .mode = Mode::f16_f32acc,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<f16, true>},
    {.name = "f16_f32acc_softmax_naive__ref", .op = Op::softmax_naive, .mode = Mode::f16_f32acc,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<f16, false>},
    {.name = "f16_f32acc_xent__ref", .op = Op::xent, .mode = Mode::f16_f32acc,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = kNoFma, .xent = f32acc_xent<f16>},

    {.name = "f16_mse__ref", .op = Op::mse, .mode = Mode::f16_model,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = FmaKind::fused, .loss = f16_model_mse_ref},
    {.name = "f16_softmax__ref", .op = Op::softmax, .mode = Mode::f16_model,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = FmaKind::fused, .softmax = f16_model_softmax_ref},
    {.name = "f16_softmax_naive__ref", .op = Op::softmax_naive, .mode = Mode::f16_model,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = FmaKind::fused, .softmax = f16_model_softmax_naive_ref},
    {.name = "f16_xent__ref", .op = Op::xent, .mode = Mode::f16_model,
     .isa = Isa::ref, .storage = DType::f16, .lanes = 1, .fma = FmaKind::fused, .xent = f16_model_xent_ref},

    {.name = "bf16_f32acc_mse__ref", .op = Op::mse, .mode = Mode::bf16_f32acc,
     .isa = Isa::ref, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .loss = f32acc_mse<bf16>},
    {.name = "bf16_f32acc_softmax__ref", .op = Op::softmax, .mode = Mode::bf16_f32acc,
     .isa = Isa::ref, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<bf16, true>},
    {.name = "bf16_f32acc_softmax_naive__ref", .op = Op::softmax_naive, .mode = Mode::bf16_f32acc,
     .isa = Isa::ref, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .softmax = f32acc_softmax<bf16, false>},
    {.name = "bf16_f32acc_xent__ref", .op = Op::xent, .mode = Mode::bf16_f32acc,
     .isa = Isa::ref, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .xent = f32acc_xent<bf16>},
};

}  // namespace

std::span<const Kernel> tables::nn_ref() { return kNnRef; }

}  // namespace halfmap
