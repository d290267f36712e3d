// The f16 models of mse, softmax and xent (registry.hpp, from LossArgs, SoftmaxArgs and XentArgs): every operation
// rounded to fp16, sums in `lanes` order; the row max, the exp and the losses' finish written here from the
// contracts, not taken from the kernels.
#include <bit>
#include <cmath>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "model_math.hpp"

namespace halfmap {
namespace {

constexpr f16 kF16QNaN{0x7E00};
constexpr f16 kF16One{0x3C00};

f16 canon(f16 v) { return is_nan(v) ? kF16QNaN : v; }

/// A loss as returned: the fp16 value widened, a NaN as the f32 quiet NaN 0x7FC00000.
float returned(f16 l) { return is_nan(l) ? std::bit_cast<float>(0x7FC00000u) : to_f32(l); }

unsigned valid_lanes(unsigned lanes) { return lanes == 0 || (lanes & (lanes - 1)) != 0 ? 1 : lanes; }

/// max_j x_j over cols ≥ 1 values, exact; the quiet NaN if any is NaN. (The sign of a zero maximum does not
/// matter: x_j - m is then x_j or a zero, and exp of either zero is 1.)
f16 row_max(const f16* x, std::size_t cols) {
  float m = -INFINITY;
  for (std::size_t j = 0; j < cols; ++j) {
    if (is_nan(x[j])) return kF16QNaN;
    m = to_f32(x[j]) > m ? to_f32(x[j]) : m;
  }
  return to_f16(m);
}

/// One row of the f16 softmax model, written to y (which may be x).
void model_softmax_row(const f16* x, f16* y, std::size_t cols, bool stable, unsigned lanes) {
  if (cols == 0) return;
  const f16 m = stable ? row_max(x, cols) : f16{};
  std::vector<f16> acc(lanes);
  for (std::size_t j = 0; j < cols; ++j) {
    const f16 e = models::exp16(stable ? f16_model::sub(x[j], m) : x[j]);
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
  return returned(to_f16(to_f32(f16_model::fold_lanes(acc)) / float(a.n)));
}

void f16_model_softmax(const SoftmaxArgs& a, bool stable, unsigned lanes) {
  lanes = valid_lanes(lanes);
  for (std::size_t i = 0; i < a.rows; ++i) {
    model_softmax_row(static_cast<const f16*>(a.x) + i * a.cols, static_cast<f16*>(a.y) + i * a.cols, a.cols, stable,
                      lanes);
  }
}

float f16_model_xent(const XentArgs& a, unsigned lanes) {
  lanes = valid_lanes(lanes);
  std::vector<f16> prow(a.cols);
  const float c = a.loss_scale / float(a.rows);
  f16 sum{};  // the rows' losses, fp16 adds in row order from +0
  for (std::size_t i = 0; i < a.rows; ++i) {
    const f16* x = static_cast<const f16*>(a.logits) + i * a.cols;
    f16* p = a.probs != nullptr ? static_cast<f16*>(a.probs) + i * a.cols : prow.data();
    model_softmax_row(x, p, a.cols, true, lanes);
    const auto label = static_cast<std::size_t>(a.labels[i]);
    const f16 plab = p[label];
    sum = f16_model::add(sum, to_f16(-std::log(to_f32(plab))));  // logf of the stored probability
    if (a.dlogits == nullptr) continue;
    f16* dl = static_cast<f16*>(a.dlogits) + i * a.cols;
    for (std::size_t j = 0; j < a.cols; ++j) {
      const f16 d = f16_model::sub(j == label ? plab : p[j], j == label ? kF16One : f16{});
      dl[j] = canon(to_f16(c * to_f32(d)));
    }
  }
  return returned(to_f16(to_f32(sum) / float(a.rows)));
}

}  // namespace halfmap
