// The f16 models of mse, softmax and xent (registry.hpp): every operation rounded to fp16, sums in `lanes`
// order; the exact row max, exp and the loss finish are the kernels' own scalar steps (kernels/common/nn.hpp,
// nn.cpp), so model and kernels cannot differ there.
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/math.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/nn.hpp"

namespace halfmap {
namespace {

struct ModelTag {};

constexpr f16 kF16QNaN{0x7E00};
constexpr f16 kF16One{0x3C00};

f16 canon(f16 v) { return is_nan(v) ? kF16QNaN : v; }

unsigned valid_lanes(unsigned lanes) { return lanes == 0 || (lanes & (lanes - 1)) != 0 ? 1 : lanes; }

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

}  // namespace halfmap
