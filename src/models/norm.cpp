// The f16 model of layernorm and rmsnorm (NormArgs in registry.hpp): every operation rounded to fp16, the row
// sums in `lanes` order, written from NormArgs' f16 recipe.
#include <bit>
#include <cmath>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace {

constexpr f16 kOne{0x3C00};

f16 canon(f16 v) { return is_nan(v) ? f16{0x7E00} : v; }

unsigned valid_lanes(unsigned lanes) { return lanes == 0 || (lanes & (lanes - 1)) != 0 ? 1 : lanes; }

/// Σ over j < n of term(j) in lanes order from +0: step(acc, j) updates lane j % lanes.
template <class Step>
f16 lane_sum(std::size_t n, unsigned lanes, Step step) {
  std::vector<f16> acc(lanes);
  for (std::size_t j = 0; j < n; ++j) acc[j % lanes] = step(acc[j % lanes], j);
  return f16_model::fold_lanes(acc);
}

/// r16(f32(s) / float(n)): μ, v, a and b.
f16 div_n(f16 s, std::size_t n) { return to_f16(to_f32(s) / float(n)); }

/// r = r16(1.0f / sqrtf(f32(r16(v + r16(ε))))).
f16 rstd(f16 v, float eps) { return to_f16(1.0f / std::sqrt(to_f32(f16_model::add(v, to_f16(eps))))); }

/// A statistic as NormArgs::mean and var receive it: the fp16 value widened, a NaN as the f32 quiet NaN.
float stat(f16 s) { return is_nan(s) ? std::bit_cast<float>(0x7FC00000u) : to_f32(s); }

}  // namespace

void f16_model_norm(const NormArgs& a, bool rms, unsigned lanes, FmaKind fma) {
  lanes = valid_lanes(lanes);
  const std::size_t cols = a.cols;
  const auto* x = static_cast<const f16*>(a.x);
  const auto* gm = static_cast<const f16*>(a.gamma);
  const auto* bt = rms ? nullptr : static_cast<const f16*>(a.beta);
  const auto* dy = static_cast<const f16*>(a.dy);
  auto gamma = [&](std::size_t j) { return gm != nullptr ? gm[j] : kOne; };
  auto beta = [&](std::size_t j) { return bt != nullptr ? bt[j] : f16{}; };
  std::vector<f16> dg(cols), db(cols), xh(cols), g(cols);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const f16* xi = x + i * cols;
    f16 mu{};
    if (!rms)
      mu = div_n(lane_sum(cols, lanes, [&](f16 acc, std::size_t j) { return f16_model::add(acc, xi[j]); }), cols);
    auto dev = [&](std::size_t j) { return rms ? xi[j] : f16_model::sub(xi[j], mu); };
    const f16 v = div_n(
        lane_sum(cols, lanes, [&](f16 acc, std::size_t j) { return f16_model::fma(dev(j), dev(j), acc, fma); }), cols);
    const f16 r = rstd(v, a.eps);
    if (a.mean != nullptr) a.mean[i] = rms ? 0.0f : stat(mu);
    if (a.var != nullptr) a.var[i] = stat(v);
    for (std::size_t j = 0; j < cols; ++j) xh[j] = f16_model::mul(dev(j), r);
    if (a.y != nullptr) {
      f16* yi = static_cast<f16*>(a.y) + i * cols;
      for (std::size_t j = 0; j < cols; ++j) {
        yi[j] = canon(rms ? f16_model::mul(xh[j], gamma(j)) : f16_model::fma(xh[j], gamma(j), beta(j), fma));
      }
    }
    if (dy == nullptr) continue;
    const f16* dyi = dy + i * cols;
    for (std::size_t j = 0; j < cols; ++j) g[j] = f16_model::mul(dyi[j], gamma(j));
    f16 ga{};
    if (!rms)
      ga = div_n(lane_sum(cols, lanes, [&](f16 acc, std::size_t j) { return f16_model::add(acc, g[j]); }), cols);
    const f16 gb = div_n(
        lane_sum(cols, lanes, [&](f16 acc, std::size_t j) { return f16_model::fma(g[j], xh[j], acc, fma); }), cols);
    const f16 ngb{static_cast<std::uint16_t>(gb.bits ^ 0x8000u)};
    f16* dxi = static_cast<f16*>(a.dx) + i * cols;
    for (std::size_t j = 0; j < cols; ++j) {
      const f16 u = rms ? g[j] : f16_model::sub(g[j], ga);
      dxi[j] = canon(f16_model::mul(f16_model::fma(xh[j], ngb, u, fma), r));
      dg[j] = f16_model::fma(dyi[j], xh[j], dg[j], fma);
      db[j] = f16_model::add(db[j], dyi[j]);
    }
  }
  if (dy == nullptr) return;
  for (std::size_t j = 0; j < cols; ++j) {
    if (a.dgamma != nullptr) static_cast<f16*>(a.dgamma)[j] = canon(dg[j]);
    if (!rms && a.dbeta != nullptr) static_cast<f16*>(a.dbeta)[j] = canon(db[j]);
  }
}

}  // namespace halfmap
