// Every layernorm and rmsnorm kernel of the registry, parameterised over kernels() and named by kernel, so such a
// kernel cannot exist untested; the backward formulas of NormArgs by central differences; the overflow facts of
// docs/numerics.md ("Where fp16 breaks in a transformer block") that the fp16 statistics must show and the f32 ones
// must not. A kernel whose ISA may not run here is skipped with the reason, never called.
//
// Sizes: cols at 1, 2, 3, 7, around the f32 blocks (16, 32, 64) and the kernel's fp16 lanes (minus one, equal,
// plus one, 2·tile + 1) and one large odd row (4099), with 1 and 3 rows; γ and β given or null; forward and
// backward, and each alone. Arrays start zero or one element off a 64-byte boundary, inputs are fenced with NaN
// and outputs with guard patterns, and the inputs are checked unchanged (test_util.hpp).
//
// Tolerance policy (docs/contributing.md, tolerances), per precision mode:
//   * f16, f16_model: bit-exact against f16_model_norm(args, rms, k.lanes, k.fma): y, dx, dγ, dβ as fp16 bits
//     (every NaN the canonical 0x7E00) and the statistics μ and v as f32 bits. Inputs hold fp16 subnormals, and
//     a second variant adds ±inf, NaNs with payloads and the largest finite values.
//   * f32, f16_f32acc, bf16_f32acc: against a float64 oracle E of the stored inputs; each output must lie in
//     [round(E - A), round(E + A)] (round: to the storage type). A follows the f32 roundings of NormArgs with
//     u = 2^-24, m1 = Σ|x|/n, a sum of n terms in any order erring by at most 2nu times the sum of their magnitudes
//     (γ_n, Higham 4.2, with γ_n ≤ 2nu):
//       δμ = 2(n+1)u·m1; δd_j = δμ + u(|d_j| + δμ); δv = 2(n+2)u·v + (2/n)Σ|d_j|δd_j + max δd²;
//       ρ = δv / (2(v + ε)) + 3u (relative error of r: the half of v's, the sqrt, the division, the addition of ε);
//       δx̂_j = r(δd_j + ρ|d_j|) + u|x̂_j|; y: |γ_j|δx̂_j + u|y_j|.
//       backward (g = dy·γ, exact in f64 from the stored values): δg_j = u|g_j|; δa = 2(n+1)u·mean|g|;
//       δb = 2(n+2)u·mean|g x̂| + mean(|g|δx̂ + |x̂|δg); dx_j: r(δg_j + δa + |x̂_j|δb + |b|δx̂_j + 3u(|g_j| + |a|
//       + |x̂_j b|)) + ρ|dx_j|; dγ_j: Σ_rows |dy|δx̂ + 2(rows+1)u Σ|dy x̂|; dβ_j: 2(rows+1)u Σ|dy|.
//     Every bound is multiplied by 1.25 and gets 2^-140 for f32 underflow. avx512bf16 writes through
//     vcvtneps2bf16, which flushes f32-subnormal results to zero: there an interval reaching below 2^-126 may
//     also hold ±0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "kernel_param.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::Arr;
using test::expect_all;
using test::kF16Specials;
using test::unwritten_bits;
using test::within_rounded;

constexpr double kU = 0x1p-24;

bool fp16_mode(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

double draw_value(test::Rng& rng, DType t, double lim) {
  const double r = rng.uniform(0.0, 1.0);
  const double sign = rng.coin(0.5) ? -1.0 : 1.0;
  if (r < 0.1 && t == DType::f16) return sign * std::ldexp(double(rng.integer(1, 1023)), -24);
  if (r < 0.12) return sign * 0.0;
  return rng.uniform(-lim, lim);
}

struct NormCase {
  std::size_t rows, cols;
  bool rms;
  Arr x, gamma, beta, dy, y, dx, dgamma, dbeta;
  NormCase(DType t, std::size_t r, std::size_t c, bool rms_, unsigned o)
      : rows(r),
        cols(c),
        rms(rms_),
        x(Arr::input(t, r * c, o & 1)),
        gamma(Arr::input(t, c, (o >> 1) & 1)),
        beta(Arr::input(t, c, (o >> 2) & 1)),
        dy(Arr::input(t, r * c, (o >> 3) & 1)),
        y(Arr::output(t, r * c, o & 1)),
        dx(Arr::output(t, r * c, (o >> 1) & 1)),
        dgamma(Arr::output(t, c, (o >> 2) & 1)),
        dbeta(Arr::output(t, c, (o >> 3) & 1)) {}
};

/// What one call asks for.
struct Want {
  bool gamma = true, beta = true, fwd = true, bwd = true, dgamma = true, dbeta = true;
};

/// The f64 oracle of one case: forward outputs, statistics, backward outputs and their bounds A (see the top).
struct Oracle {
  std::vector<double> y, ay, dx, adx, dg, adg, db, adb, mean, var;
};

Oracle oracle_of(const NormCase& c, const Want& w, float eps) {
  const std::size_t n = c.cols;
  Oracle o;
  o.y.resize(c.rows * n);
  o.ay.resize(c.rows * n);
  o.dx.resize(c.rows * n);
  o.adx.resize(c.rows * n);
  o.dg.assign(n, 0);
  o.adg.assign(n, 0);
  o.db.assign(n, 0);
  o.adb.assign(n, 0);
  auto gam = [&](std::size_t j) { return w.gamma ? c.gamma.value(j) : 1.0; };
  auto bet = [&](std::size_t j) { return w.beta && !c.rms ? c.beta.value(j) : 0.0; };
  std::vector<double> d(n), dd(n), xh(n), dxh(n), g(n);
  for (std::size_t i = 0; i < c.rows; ++i) {
    double mu = 0, m1 = 0;
    if (!c.rms) {
      for (std::size_t j = 0; j < n; ++j) mu += c.x.value(i * n + j), m1 += std::fabs(c.x.value(i * n + j));
      mu /= double(n);
      m1 /= double(n);
    }
    const double dmu = 2.0 * double(n + 1) * kU * m1;
    double v = 0, sdd = 0, maxdd = 0;
    for (std::size_t j = 0; j < n; ++j) {
      d[j] = c.x.value(i * n + j) - mu;
      dd[j] = dmu + kU * (std::fabs(d[j]) + dmu);
      v += d[j] * d[j];
      sdd += std::fabs(d[j]) * dd[j];
      maxdd = std::max(maxdd, dd[j] * dd[j]);
    }
    v /= double(n);
    const double dv = 2.0 * double(n + 2) * kU * v + 2.0 * sdd / double(n) + maxdd;
    const double r = 1.0 / std::sqrt(v + double(eps));
    const double rho = dv / (2.0 * (v + double(eps))) + 3 * kU;
    o.mean.push_back(mu);
    o.var.push_back(v);
    for (std::size_t j = 0; j < n; ++j) {
      xh[j] = d[j] * r;
      dxh[j] = r * (dd[j] + rho * std::fabs(d[j])) + kU * std::fabs(xh[j]);
      const double yv = xh[j] * gam(j) + bet(j);
      o.y[i * n + j] = yv;
      o.ay[i * n + j] = 1.25 * (std::fabs(gam(j)) * dxh[j] + kU * std::fabs(yv)) + 0x1p-140;
    }
    if (!w.bwd) continue;
    double a = 0, b = 0, mg = 0, mgx = 0, mgd = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double dyv = c.dy.value(i * n + j);
      g[j] = dyv * gam(j);
      a += g[j];
      b += g[j] * xh[j];
      mg += std::fabs(g[j]);
      mgx += std::fabs(g[j] * xh[j]);
      mgd += std::fabs(g[j]) * dxh[j] + std::fabs(xh[j]) * kU * std::fabs(g[j]);
      o.dg[j] += dyv * xh[j];
      o.adg[j] += std::fabs(dyv) * dxh[j] + 2.0 * double(c.rows + 1) * kU * std::fabs(dyv * xh[j]);
      o.db[j] += dyv;
      o.adb[j] += 2.0 * double(c.rows + 1) * kU * std::fabs(dyv);
    }
    a = c.rms ? 0.0 : a / double(n);
    b /= double(n);
    const double da = c.rms ? 0.0 : 2.0 * double(n + 1) * kU * mg / double(n);
    const double db = 2.0 * double(n + 2) * kU * mgx / double(n) + mgd / double(n);
    for (std::size_t j = 0; j < n; ++j) {
      const double dxv = r * (g[j] - a - xh[j] * b);
      o.dx[i * n + j] = dxv;
      const double terms = kU * std::fabs(g[j]) + da + std::fabs(xh[j]) * db + std::fabs(b) * dxh[j] +
                           3 * kU * (std::fabs(g[j]) + std::fabs(a) + std::fabs(xh[j] * b));
      o.adx[i * n + j] = 1.25 * (r * terms + rho * std::fabs(dxv)) + 0x1p-140;
    }
  }
  for (std::size_t j = 0; j < n; ++j) {
    o.adg[j] = 1.25 * o.adg[j] + 0x1p-140;
    o.adb[j] = 1.25 * o.adb[j] + 0x1p-140;
  }
  return o;
}

void expect_bits(const char* what, const Arr& got, const std::vector<f16>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got.bits(i) == want[i].bits) continue;
    if (bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << test::hex16(std::uint16_t(got.bits(i))) << ", model "
                    << test::hex(want[i]);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ from the f16 model";
}

void expect_unwritten(const char* what, const Arr& a) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a.bits(i) != unwritten_bits(a.type())) {
      ADD_FAILURE() << what << "[" << i << "] written although not asked for";
      return;
    }
  }
}

/// Runs the kernel on the case and checks it (model or oracle), the guards and the inputs.
void run_and_check(const Kernel& k, NormCase& c, const Want& w, float eps) {
  const bool rms = k.op == Op::rmsnorm;
  const auto xs = c.x.snapshot(), gs = c.gamma.snapshot(), bs = c.beta.snapshot(), ds = c.dy.snapshot();
  std::vector<float> mean(c.rows, -1.0f), var(c.rows, -1.0f);
  const NormArgs a{c.rows,
                   c.cols,
                   c.x.data(),
                   w.gamma ? c.gamma.data() : nullptr,
                   w.beta ? c.beta.data() : nullptr,
                   eps,
                   w.fwd ? c.y.data() : nullptr,
                   mean.data(),
                   var.data(),
                   w.bwd ? c.dy.data() : nullptr,
                   w.bwd ? c.dx.data() : nullptr,
                   w.bwd && w.dgamma ? c.dgamma.data() : nullptr,
                   w.bwd && w.dbeta ? c.dbeta.data() : nullptr};
  k.norm(a);
  EXPECT_TRUE(c.x.unchanged_since(xs) && c.gamma.unchanged_since(gs) && c.beta.unchanged_since(bs) &&
              c.dy.unchanged_since(ds))
      << "an input was modified";
  for (const Arr* o : {&c.y, &c.dx, &c.dgamma, &c.dbeta}) EXPECT_EQ(o->guard_damage(), "");
  if (!w.fwd) expect_unwritten("y", c.y);
  if (!w.bwd) expect_unwritten("dx", c.dx);
  if (!w.bwd || !w.dgamma) expect_unwritten("dgamma", c.dgamma);
  if (!w.bwd || !w.dbeta || rms) expect_unwritten("dbeta", c.dbeta);
  const std::size_t total = c.rows * c.cols;
  if (fp16_mode(k)) {
    const auto xm = c.x.as_f16(), gm = c.gamma.as_f16(), bm = c.beta.as_f16(), dym = c.dy.as_f16();
    std::vector<f16> ym(total), dxm(total), dgm(c.cols), dbm(c.cols);
    std::vector<float> mm(c.rows, -1.0f), vm(c.rows, -1.0f);
    f16_model_norm({c.rows, c.cols, xm.data(), w.gamma ? gm.data() : nullptr, w.beta ? bm.data() : nullptr, eps,
                    ym.data(), mm.data(), vm.data(), w.bwd ? dym.data() : nullptr, dxm.data(), dgm.data(), dbm.data()},
                   rms, k.lanes, k.fma);
    for (std::size_t i = 0; i < c.rows; ++i) {
      EXPECT_EQ(test::bits_of(mean[i]), test::bits_of(mm[i])) << "mean[" << i << "] " << mean[i] << " model " << mm[i];
      EXPECT_EQ(test::bits_of(var[i]), test::bits_of(vm[i])) << "var[" << i << "] " << var[i] << " model " << vm[i];
    }
    if (w.fwd) expect_bits("y", c.y, ym);
    if (w.bwd) expect_bits("dx", c.dx, dxm);
    if (w.bwd && w.dgamma) expect_bits("dgamma", c.dgamma, dgm);
    if (w.bwd && w.dbeta && !rms) expect_bits("dbeta", c.dbeta, dbm);
    return;
  }
  const Oracle o = oracle_of(c, w, eps);
  const bool fl = k.isa == Isa::avx512bf16;
  // Every element of `got` within its bound around `want` (see the top of this file).
  auto check = [&](const char* what, const Arr& got, const std::vector<double>& want, const std::vector<double>& a) {
    expect_all(what, got.size(),
               [&](std::size_t i) { return within_rounded(k.storage, got.value(i), want[i], a[i], fl); });
  };
  if (w.fwd) check("y", c.y, o.y, o.ay);
  if (!w.bwd) return;
  check("dx", c.dx, o.dx, o.adx);
  if (w.dgamma) check("dgamma", c.dgamma, o.dg, o.adg);
  if (w.dbeta && !rms) check("dbeta", c.dbeta, o.db, o.adb);
}

void fill(NormCase& c, test::Rng& rng, bool specials) {
  const DType t = c.x.type();
  // A row mean away from zero, so that the deviations cancel part of x (layernorm's hard case).
  const double offset = rng.uniform(-3.0, 3.0);
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    c.x.set(i, offset + draw_value(rng, t, 4.0));
    c.dy.set(i, draw_value(rng, t, 2.0));
  }
  for (std::size_t j = 0; j < c.cols; ++j) {
    c.gamma.set(j, rng.uniform(0.5, 1.5) * (rng.coin(0.1) ? -1.0 : 1.0));
    c.beta.set(j, draw_value(rng, t, 0.5));
  }
  if (!specials) return;
  for (Arr* a : {&c.x, &c.dy, &c.gamma, &c.beta}) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (rng.coin(0.02)) a->set_bits(i, kF16Specials[rng.integer(0, int(std::size(kF16Specials)) - 1)]);
    }
  }
}

class NormTest : public ::testing::TestWithParam<test::KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
  float eps() const { return k().op == Op::rmsnorm ? kRmsNormEps : kLayerNormEpsTorch; }
};

std::vector<std::size_t> cols_for(const Kernel& k) {
  std::set<std::size_t> s = {1, 2, 3, 7, 4099};
  std::vector<std::size_t> tiles = {16, 32, 64};
  if (fp16_mode(k) && k.lanes > 1) tiles.push_back(k.lanes);
  for (std::size_t t : tiles) {
    for (std::size_t n : {t - 1, t, t + 1, 2 * t + 1}) s.insert(n);
  }
  return {s.begin(), s.end()};
}

TEST_P(NormTest, SizesAroundTheTiles) {
  unsigned variant = 0;
  for (std::size_t cols : cols_for(k())) {
    for (std::size_t rows : {std::size_t{1}, std::size_t{3}}) {
      for (bool specials : {false, true}) {
        if (specials && !fp16_mode(k())) continue;  // f32-acc modes: finite inputs against the oracle
        ++variant;
        const std::uint64_t seed = test::case_seed(cols, rows * 16 + variant, 0x4E0);
        SCOPED_TRACE(
            fmt::format("kernel {} rows={} cols={} specials={} seed=0x{:016X}", k().name, rows, cols, specials, seed));
        test::Rng rng(seed);
        NormCase c(k().storage, rows, cols, k().op == Op::rmsnorm, variant);
        fill(c, rng, specials);
        Want w;
        w.gamma = variant % 4 != 3;
        w.beta = variant % 5 != 4;
        w.fwd = variant % 7 != 6;
        w.bwd = variant % 6 != 5;
        w.dgamma = variant % 3 != 2;
        w.dbeta = variant % 8 != 7;
        run_and_check(k(), c, w, variant % 2 == 0 ? eps() : kLayerNormEpsKeras);
        if (HasFailure()) return;
      }
    }
  }
}

/// docs/numerics.md: a square overflows fp16 once |x| > 255.9 (65504^½). rmsnorm of the one-element row x: v = x² in
/// fp16 is 65472 at x = 255.875 and inf at 256, where r = 1/√inf = 0 and y = 0 (finite, and wrong); with f32
/// statistics v = 65536 and y = 1. layernorm of the row (x, -x): μ = 0, d = ±x and v sums two squares, so it
/// overflows from x = 181 (32761 rounds to 32768, twice that is inf) and not at 180.875 (32720 + 32715.77 rounds
/// to 65440).
TEST_P(NormTest, Fp16StatisticsOverflowAtTheSquaresStated) {
  const bool rms = k().op == Op::rmsnorm;
  const DType t = k().storage;
  for (double xv : rms ? std::vector<double>{255.875, 256.0} : std::vector<double>{180.875, 181.0}) {
    SCOPED_TRACE(fmt::format("kernel {} x={}", k().name, xv));
    const std::size_t cols = rms ? 1 : 2;
    NormCase c(t, 1, cols, rms, 0);
    c.x.set(0, xv);
    if (!rms) c.x.set(1, -xv);
    float var = 0;
    const NormArgs a{1,       cols, c.x.data(), nullptr, nullptr, eps(),  c.y.data(),
                     nullptr, &var, nullptr,    nullptr, nullptr, nullptr};
    k().norm(a);
    if (fp16_mode(k()) && (xv == 256.0 || xv == 181.0)) {
      EXPECT_TRUE(std::isinf(var)) << var;
      EXPECT_EQ(c.y.value(0), 0.0) << "y = x̂ = d·(1/√inf) = 0";
    } else {
      EXPECT_TRUE(std::isfinite(var)) << var;
      EXPECT_NEAR(c.y.value(0), 1.0, 0x1p-7);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, NormTest, ::testing::ValuesIn(test::kernels_of_ops({Op::layernorm, Op::rmsnorm})),
                         test::kernel_param_name);

// The backward formulas of NormArgs, in f64 (the oracle above), against central differences of the forward:
// L = Σ_ij w_ij y_ij, so dy = w, and dL/dx, dL/dγ, dL/dβ by (L(+h) - L(-h)) / 2h.
TEST(NormGradient, OracleBackwardMatchesCentralDifferences) {
  for (bool rms : {false, true}) {
    const std::size_t rows = 2, n = 5;
    test::Rng rng(test::case_seed(rms, 0x4E1));
    std::vector<double> x(rows * n), w(rows * n), g(n), b(n);
    for (double& v : x) v = rng.uniform(-2, 2);
    for (double& v : w) v = rng.uniform(-1, 1);
    for (double& v : g) v = rng.uniform(0.5, 1.5);
    for (double& v : b) v = rng.uniform(-0.5, 0.5);
    const double eps = 1e-3;
    auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg, const std::vector<double>& bb) {
      double L = 0;
      for (std::size_t i = 0; i < rows; ++i) {
        double mu = 0, v = 0;
        if (!rms) {
          for (std::size_t j = 0; j < n; ++j) mu += xx[i * n + j];
          mu /= double(n);
        }
        for (std::size_t j = 0; j < n; ++j) v += (xx[i * n + j] - mu) * (xx[i * n + j] - mu);
        const double r = 1 / std::sqrt(v / double(n) + eps);
        for (std::size_t j = 0; j < n; ++j) L += w[i * n + j] * ((xx[i * n + j] - mu) * r * gg[j] + (rms ? 0 : bb[j]));
      }
      return L;
    };
    // The analytic gradients, as NormArgs states them.
    std::vector<double> dx(rows * n), dg(n, 0), db(n, 0);
    for (std::size_t i = 0; i < rows; ++i) {
      double mu = 0, v = 0;
      if (!rms) {
        for (std::size_t j = 0; j < n; ++j) mu += x[i * n + j];
        mu /= double(n);
      }
      for (std::size_t j = 0; j < n; ++j) v += (x[i * n + j] - mu) * (x[i * n + j] - mu);
      const double r = 1 / std::sqrt(v / double(n) + eps);
      double a = 0, bb = 0;
      std::vector<double> xh(n), gg(n);
      for (std::size_t j = 0; j < n; ++j) {
        xh[j] = (x[i * n + j] - mu) * r;
        gg[j] = w[i * n + j] * g[j];
        a += gg[j];
        bb += gg[j] * xh[j];
        dg[j] += w[i * n + j] * xh[j];
        db[j] += w[i * n + j];
      }
      a = rms ? 0 : a / double(n);
      bb /= double(n);
      for (std::size_t j = 0; j < n; ++j) dx[i * n + j] = r * (gg[j] - a - xh[j] * bb);
    }
    const double h = 1e-6;
    for (std::size_t i = 0; i < rows * n; ++i) {
      auto xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      EXPECT_NEAR((loss(xp, g, b) - loss(xm, g, b)) / (2 * h), dx[i], 1e-7) << "rms=" << rms << " dx[" << i << "]";
    }
    for (std::size_t j = 0; j < n; ++j) {
      auto gp = g, gm = g, bp = b, bm = b;
      gp[j] += h;
      gm[j] -= h;
      bp[j] += h;
      bm[j] -= h;
      EXPECT_NEAR((loss(x, gp, b) - loss(x, gm, b)) / (2 * h), dg[j], 1e-7) << "rms=" << rms << " dgamma[" << j << "]";
      if (!rms) {
        EXPECT_NEAR((loss(x, g, bp) - loss(x, g, bm)) / (2 * h), db[j], 1e-7) << "dbeta[" << j << "]";
      }
    }
  }
}

}  // namespace
}  // namespace halfmap
