// The scaled fp8 modes (registry.hpp's Mode::fp8_f32acc and Mode::mxfp8_f32acc, kernels/common/fp8_modes.hpp) on
// every path this CPU runs, against a model written here from the recipes' definitions:
//   the casts through fp8.hpp's to_fp8/from_fp8 and fp8_scaling.hpp's fp8_scale (per-tensor current scaling, E4M3
//   forward, E5M2 for dY) and through mx.hpp's mx_quantize (MXFP8 E4M3 blocks along the reduction's dimension);
//   the arithmetic on the cast values in float64.
// What depends only on the casts is checked bit for bit (maxabs, db, the zeros and NaNs); what the path's f32
// kernel sums in its own order within float32's bound, (terms + 2) · 2^-24 of the sum of the magnitudes, which is
// far below the casts' own error (each test checks that it is, so a wrong cast cannot pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "halfmap/conversions.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/registry.hpp"
#include "kernel_param.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

constexpr double kU = 0x1p-24;

/// The model's cast of a whole tensor: each value as the kernel reads it, and the unscale folded later (1 for MX).
struct ModelCast {
  std::vector<float> q;
  float unscale = 1.0f;
};

/// The cast with a given scale (delayed scaling): q = fp8(t · s), saturating, unscale 1 / s.
ModelCast model_given(const std::vector<float>& x, Fp8 f, float s) {
  ModelCast c;
  for (float v : x) c.q.push_back(from_fp8(to_fp8(v * s, f, Fp8Overflow::saturate), f));
  c.unscale = 1.0f / s;
  return c;
}

ModelCast model_current(const std::vector<float>& x, Fp8 f) {
  float amax = 0.0f;
  bool nan = false;
  for (float v : x) {
    nan = nan || std::isnan(v);
    amax = std::max(amax, std::fabs(v));
  }
  return model_given(x, f, fp8_scale(nan ? std::numeric_limits<float>::quiet_NaN() : amax, f));
}

/// MXFP8 E4M3 blocks along rows of `cols` values (the last block padded with zeros).
std::vector<float> model_mx_rows(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < cols; b += kMxBlock) {
      std::array<float, kMxBlock> v{};
      for (std::size_t i = 0; i < kMxBlock && b + i < cols; ++i) v[i] = x[r * cols + b + i];
      const MxBlock q = mx_quantize(std::span<const float, kMxBlock>(v), MxElem::e4m3);
      for (std::size_t i = 0; i < kMxBlock && b + i < cols; ++i) out[r * cols + b + i] = mx_value(q, i, MxElem::e4m3);
    }
  }
  return out;
}
std::vector<float> transpose(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  std::vector<float> t(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}
std::vector<float> model_mx_cols(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  return transpose(model_mx_rows(transpose(x, rows, cols), cols, rows), cols, rows);
}

/// Row i of X's cast times column j of W's (k × n), in float64: the sum and the sum of the terms' magnitudes.
std::pair<double, double> product(const ModelCast& cx, const ModelCast& cw, std::size_t kk, std::size_t n,
                                  std::size_t i, std::size_t j) {
  double acc = 0, mag = 0;
  for (std::size_t p = 0; p < kk; ++p) {
    acc += double(cx.q[i * kk + p]) * cw.q[p * n + j];
    mag += std::fabs(double(cx.q[i * kk + p]) * cw.q[p * n + j]);
  }
  return {acc, mag};
}

std::vector<float> draw(std::size_t n, std::uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<float> v(n);
  for (float& x : v) x = float(normal(rng) * scale);
  return v;
}

/// The stable softmax of each row in float64.
void softmax_f64(const double* x, std::size_t rows, std::size_t cols, double* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = x + r * cols;
    const double m = *std::max_element(row, row + cols);
    double s = 0;
    for (std::size_t j = 0; j < cols; ++j) s += y[r * cols + j] = std::exp(row[j] - m);
    for (std::size_t j = 0; j < cols; ++j) y[r * cols + j] /= s;
  }
}

bool mx(const Kernel& k) { return k.mode == Mode::mxfp8_f32acc; }

/// The values the kernel computes on: the cast values, and the factor folded into the output afterwards.
ModelCast operand(const Kernel& k, const std::vector<float>& x, Fp8 f, std::size_t rows, std::size_t cols,
                  bool along_cols) {
  if (!mx(k)) return model_current(x, f);
  return {along_cols ? model_mx_cols(x, rows, cols) : model_mx_rows(x, rows, cols), 1.0f};
}

/// |got − exact| within the f32 bound of a sum of `terms` terms of magnitude sum `mag`, times the folded factor.
::testing::AssertionResult near(double got, double exact, double mag, std::size_t terms) {
  const double bound = double(terms + 2) * kU * mag + 0x1p-140;
  if (std::fabs(got - exact) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", model " << exact << ", bound " << bound;
}

class Fp8ModeTest : public ::testing::TestWithParam<test::KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
};

class Fp8DenseTest : public Fp8ModeTest {};
class Fp8DenseBwdTest : public Fp8ModeTest {};
class Fp8ReduceTest : public Fp8ModeTest {};
class Fp8LossSoftmaxTest : public Fp8ModeTest {};

/// Y = act(X W + b) for the shapes around the MX block and the paths' tiles.
TEST_P(Fp8DenseTest, ForwardIsTheCastOperandsProductWithinF32) {
  const std::size_t shapes[][3] = {{1, 1, 1}, {3, 31, 5}, {7, 33, 17}, {16, 64, 24}, {5, 100, 70}};
  for (auto [m, kk, n] : shapes) {
    for (Act act : {Act::identity, Act::relu}) {
      const std::uint64_t seed = test::case_seed(m, kk * 1000 + n, unsigned(act));
      const std::vector<float> x = draw(m * kk, seed, 3.0), w = draw(kk * n, seed + 1, 0.05), b = draw(n, seed + 2, 1);
      std::vector<float> y(m * n, -7.0f);
      k().dense({m, n, kk, x.data(), w.data(), b.data(), y.data(), act});
      const ModelCast cx = operand(k(), x, Fp8::e4m3, m, kk, false), cw = operand(k(), w, Fp8::e4m3, kk, n, true);
      const double d = double(cx.unscale * cw.unscale);
      double worst_cast = 0, worst_bound = 0;
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double acc = 0, mag = 0, raw = 0;
          for (std::size_t p = 0; p < kk; ++p) {
            acc += double(cx.q[i * kk + p]) * cw.q[p * n + j];
            mag += std::fabs(double(cx.q[i * kk + p]) * cw.q[p * n + j]);
            raw += double(x[i * kk + p]) * w[p * n + j];
          }
          double e = acc * d + b[j];
          const double pre = e;
          if (act == Act::relu && e < 0) e = 0;
          const double bound_mag = mag * std::fabs(d) + std::fabs(pre);
          EXPECT_TRUE(near(y[i * n + j], e, bound_mag, kk + 2) ||
                      (act == Act::relu && std::fabs(pre) <= (kk + 4) * kU * bound_mag))
              << k().name << " " << m << "x" << kk << "x" << n << " at (" << i << ", " << j << ")";
          worst_cast = std::max(worst_cast, std::fabs(pre - (raw + b[j])));
          worst_bound = std::max(worst_bound, (kk + 4) * kU * bound_mag);
        }
      }
      if (kk >= 31) {
        EXPECT_GT(worst_cast, 64 * worst_bound) << "the casts' error must dwarf the f32 bound";
      }
    }
  }
}

TEST_P(Fp8DenseBwdTest, IsTheCastOperandsProductsWithinF32AndDbIsExact) {
  const std::size_t shapes[][3] = {{1, 1, 1}, {4, 9, 40}, {33, 20, 31}, {64, 16, 8}};
  for (auto [m, kk, n] : shapes) {
    const std::uint64_t seed = test::case_seed(m, kk * 1000 + n, 7);
    const std::vector<float> x = draw(m * kk, seed, 2.0), w = draw(kk * n, seed + 1, 0.1),
                             dy = draw(m * n, seed + 2, 1e-3);
    std::vector<float> dx(m * kk), dw(kk * n), db(n);
    k().dense_bwd({m, n, kk, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data()});
    // dX over n: dY's rows and W's rows; dW over m: X's and dY's columns.
    const ModelCast g_dx = operand(k(), dy, Fp8::e5m2, m, n, false), w_dx = operand(k(), w, Fp8::e4m3, kk, n, false);
    const ModelCast g_dw = operand(k(), dy, Fp8::e5m2, m, n, true), x_dw = operand(k(), x, Fp8::e4m3, m, kk, true);
    const double ddx = double(g_dx.unscale * w_dx.unscale), ddw = double(x_dw.unscale * g_dw.unscale);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t p = 0; p < kk; ++p) {
        double acc = 0, mag = 0;
        for (std::size_t j = 0; j < n; ++j) {
          acc += double(g_dx.q[i * n + j]) * w_dx.q[p * n + j];
          mag += std::fabs(double(g_dx.q[i * n + j]) * w_dx.q[p * n + j]);
        }
        EXPECT_TRUE(near(dx[i * kk + p], acc * ddx, mag * std::fabs(ddx), n + 1))
            << k().name << " dX(" << i << ", " << p << ")";
      }
    }
    for (std::size_t p = 0; p < kk; ++p) {
      for (std::size_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (std::size_t i = 0; i < m; ++i) {
          acc += double(x_dw.q[i * kk + p]) * g_dw.q[i * n + j];
          mag += std::fabs(double(x_dw.q[i * kk + p]) * g_dw.q[i * n + j]);
        }
        EXPECT_TRUE(near(dw[p * n + j], acc * ddw, mag * std::fabs(ddw), m + 1))
            << k().name << " dW(" << p << ", " << j << ")";
      }
    }
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (std::size_t i = 0; i < m; ++i) s += dy[i * n + j];
      EXPECT_EQ(test::bits_of(db[j]), test::bits_of(s)) << k().name << " db is Σ_rows dY in float32, uncast";
    }
  }
}

/// The recipes at their edges. An infinity: current scaling saturates it to ±448 (E4M3 has no infinity) and the
/// output stays finite; MX gives its block the NaN scale, so its row is NaN and the other row finite. A NaN makes
/// its row NaN and leaves the other finite (current scaling: the scale falls back to 1). Zeros give zeros, and an
/// amax so small that fp8_max / amax overflows float32 takes FLT_MAX as the scale.
TEST_P(Fp8DenseTest, InfNanZeroAndTinyAmaxAsTheRecipesSay) {
  const std::size_t m = 2, kk = 40, n = 3;
  std::vector<float> x = draw(m * kk, 11, 1.0), w = draw(kk * n, 12, 0.1), y(m * n);
  const auto run = [&] { k().dense({m, n, kk, x.data(), w.data(), nullptr, y.data(), Act::identity}); };
  x[5] = std::numeric_limits<float>::infinity();
  run();
  for (std::size_t j = 0; j < n; ++j) {
    EXPECT_EQ(std::isnan(y[j]), mx(k())) << k().name << ": the infinity's row";
    EXPECT_TRUE(std::isfinite(y[n + j])) << k().name << ": the other row";
  }
  x[5] = std::numeric_limits<float>::quiet_NaN();
  run();
  for (std::size_t j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(y[j])) << k().name << ": the NaN's row";
    EXPECT_TRUE(std::isfinite(y[n + j])) << k().name << ": the other row";
  }
  std::fill(x.begin(), x.end(), 0.0f);
  run();
  for (float v : y) EXPECT_EQ(test::bits_of(v), 0u) << k().name;
  // amax = 2^-130 (a float32 subnormal): current scaling's scale is FLT_MAX, its inverse the subnormal 1/FLT_MAX.
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(float(i % 7) - 3.0f, -132);
  run();
  const ModelCast cx = operand(k(), x, Fp8::e4m3, m, kk, false), cw = operand(k(), w, Fp8::e4m3, kk, n, true);
  if (!mx(k())) {
    EXPECT_EQ(cx.unscale, 1.0f / std::numeric_limits<float>::max());
  }
  const double d = double(cx.unscale * cw.unscale);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const auto [acc, mag] = product(cx, cw, kk, n, i, j);
      // the product with a subnormal factor rounds to float32's subnormal grid: one more ulp of 2^-149
      EXPECT_TRUE(near(y[i * n + j], acc * d, mag * std::fabs(d) + 0x1p-125, kk)) << k().name;
    }
  }
}

TEST_P(Fp8ReduceTest, IsTheCastValuesReductionWithinF32AndMaxabsIsExact) {
  for (std::size_t n : {1u, 31u, 32u, 33u, 100u, 1000u, 4099u}) {
    const std::vector<float> x = draw(n, test::case_seed(n, 21), 5.0), y = draw(n, test::case_seed(n, 22), 0.3);
    const float got = k().reduce(x.data(), y.data(), n);
    const ModelCast cx = operand(k(), x, Fp8::e4m3, 1, n, false), cy = operand(k(), y, Fp8::e4m3, 1, n, false);
    double acc = 0, mag = 0, raw = 0, most = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double a = cx.q[i], b = cy.q[i];
      const double t = k().op == Op::sum ? a : k().op == Op::sumsq ? a * a : a * b;
      acc += t;
      mag += std::fabs(t);
      raw += k().op == Op::sum ? x[i] : k().op == Op::sumsq ? double(x[i]) * x[i] : double(x[i]) * y[i];
      most = std::max(most, std::fabs(a));
    }
    switch (k().op) {
      case Op::maxabs:
        EXPECT_EQ(got, float(most) * cx.unscale) << k().name << " n = " << n;
        break;
      case Op::sum:
        EXPECT_TRUE(near(got, acc * cx.unscale, mag * cx.unscale, n)) << k().name << " n = " << n;
        break;
      case Op::sumsq: {
        const double d = double(cx.unscale) * cx.unscale;
        EXPECT_TRUE(near(got, acc * d, mag * d, n + 1)) << k().name << " n = " << n;
        if (n >= 31) {
          EXPECT_GT(std::fabs(acc * d - raw), 2 * (n + 3) * kU * mag * d) << "the cast must show";
        }
        break;
      }
      default: {
        const double d = double(cx.unscale * cy.unscale);
        EXPECT_TRUE(near(got, acc * d, mag * std::fabs(d), n + 1)) << k().name << " n = " << n;
        break;
      }
    }
  }
}

TEST_P(Fp8LossSoftmaxTest, IsTheF32KernelOnTheCastValues) {
  if (k().op == Op::mse) {
    for (std::size_t n : {1u, 32u, 45u, 1000u}) {
      const std::vector<float> p = draw(n, test::case_seed(n, 31), 4.0), y = draw(n, test::case_seed(n, 32), 4.0);
      std::vector<float> dp(n);
      const float scale = 1024.0f;
      const float got = k().loss({n, p.data(), y.data(), scale, dp.data()});
      const ModelCast cp = operand(k(), p, Fp8::e4m3, 1, n, false), cy = operand(k(), y, Fp8::e4m3, 1, n, false);
      const float c = 2.0f * scale / float(n);
      double sum = 0, worst_cast = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float d = cp.q[i] * cp.unscale - cy.q[i] * cy.unscale;  // read back in float32, as the kernel does
        sum += double(d) * d;
        worst_cast =
            std::max(worst_cast, std::fabs(double(d) - (double(p[i]) - y[i])) / std::fabs(double(p[i]) - y[i]));
        EXPECT_TRUE(near(dp[i], double(c) * d, std::fabs(double(c) * d), 2)) << k().name << " dp[" << i << "]";
      }
      EXPECT_TRUE(near(got, sum / double(n), sum / double(n), n + 4)) << k().name << " n = " << n;
      if (n >= 32) {
        EXPECT_GT(worst_cast, 0x1p-10) << "the cast must show, far above dp's bound of 2^-22";
      }
    }
    return;
  }
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {3, 10}, {4, 33}, {2, 100}}) {
    const std::vector<float> x = draw(rows * cols, test::case_seed(rows, cols, 41), 3.0);
    std::vector<float> y(rows * cols);
    k().softmax({rows, cols, x.data(), y.data()});
    const ModelCast c = operand(k(), x, Fp8::e4m3, rows, cols, false);
    std::vector<double> v(rows * cols), ref(rows * cols);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = c.q[i] * c.unscale;
    softmax_f64(v.data(), rows, cols, ref.data());
    for (std::size_t i = 0; i < v.size(); ++i) {
      EXPECT_NEAR(y[i], ref[i], 0x1p-16 * ref[i] + 0x1p-40) << k().name << " y[" << i << "]";
    }
  }
}

float amax_model(const std::vector<float>& x) {
  float m = 0.0f;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

/// Delayed scaling (DenseArgs::fp8): fp8_f32acc casts with the scales given and reports each operand's amax; with
/// current scaling's own scales it is current scaling bit for bit, and with others it is the model's cast with
/// those scales (here X's scale 2^6 too large, so most of X saturates, and W's 2^-16 too small, so W's small values
/// flush). The MX mode ignores the scales and leaves them as they were.
TEST_P(Fp8DenseTest, DelayedScalesAreTheCastsScalesAndTheAmaxesAreReported) {
  const std::size_t m = 7, kk = 33, n = 17;
  const std::vector<float> x = draw(m * kk, 51, 3.0), w = draw(kk * n, 52, 0.05), b = draw(n, 53, 1);
  std::vector<float> cur(m * n), y(m * n);
  k().dense({m, n, kk, x.data(), w.data(), b.data(), cur.data(), Act::identity});
  const float ax = amax_model(x), aw = amax_model(w);
  const float sx = fp8_scale(ax, Fp8::e4m3), sw = fp8_scale(aw, Fp8::e4m3);
  Fp8Scales sc{sx, sw, 5.0f, -1.0f, -1.0f, -1.0f};
  DenseArgs a{m, n, kk, x.data(), w.data(), b.data(), y.data(), Act::identity};
  a.fp8 = &sc;
  k().dense(a);
  for (std::size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(test::bits_of(y[i]), test::bits_of(cur[i])) << k().name << " y[" << i << "]";
  if (mx(k())) {
    EXPECT_EQ(sc.amax_x, -1.0f) << k().name << " must ignore the delayed scales";
    EXPECT_EQ(sc.amax_w, -1.0f) << k().name;
    return;
  }
  EXPECT_EQ(test::bits_of(sc.amax_x), test::bits_of(ax)) << k().name;
  EXPECT_EQ(test::bits_of(sc.amax_w), test::bits_of(aw)) << k().name;
  EXPECT_EQ(sc.amax_dy, -1.0f) << k().name << ": the forward casts no dY";

  sc.x = sx * 64.0f;
  sc.w = sw / 65536.0f;
  k().dense(a);
  const ModelCast cx = model_given(x, Fp8::e4m3, sc.x), cw = model_given(w, Fp8::e4m3, sc.w);
  std::size_t clipped = 0, flushed = 0;
  for (float q : cx.q) clipped += std::fabs(q) == 448.0f;
  for (float q : cw.q) flushed += q == 0.0f;
  EXPECT_GT(clipped, x.size() / 2) << "X's scale must saturate most of it";
  EXPECT_GT(flushed, w.size() / 8) << "W's scale must flush some of it";
  const double d = double(cx.unscale * cw.unscale);
  std::size_t moved = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const auto [acc, mag] = product(cx, cw, kk, n, i, j);
      const double e = acc * d + b[j];
      EXPECT_TRUE(near(y[i * n + j], e, mag * std::fabs(d) + std::fabs(e), kk + 2))
          << k().name << " (" << i << ", " << j << ")";
      moved += y[i * n + j] != cur[i * n + j];
    }
  }
  EXPECT_GT(moved, y.size() / 2) << "the delayed scales must change the output";
}

/// The backward with current scaling's own scales through Fp8Scales is current scaling bit for bit, and it reports
/// all three amaxes; with dY's scale too large, dX and dW move and db does not.
TEST_P(Fp8DenseBwdTest, DelayedScalesAtCurrentScalingsValuesAreCurrentScaling) {
  const std::size_t m = 33, kk = 20, n = 31;
  const std::vector<float> x = draw(m * kk, 61, 2.0), w = draw(kk * n, 62, 0.1), dy = draw(m * n, 63, 1e-3);
  std::vector<float> dx0(m * kk), dw0(kk * n), db0(n), dx(m * kk), dw(kk * n), db(n);
  k().dense_bwd({m, n, kk, x.data(), w.data(), dy.data(), dx0.data(), dw0.data(), db0.data()});
  Fp8Scales sc{fp8_scale(amax_model(x), Fp8::e4m3),
               fp8_scale(amax_model(w), Fp8::e4m3),
               fp8_scale(amax_model(dy), Fp8::e5m2),
               -1.0f,
               -1.0f,
               -1.0f};
  DenseBwdArgs a{m, n, kk, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data()};
  a.fp8 = &sc;
  k().dense_bwd(a);
  for (std::size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(test::bits_of(dx[i]), test::bits_of(dx0[i])) << k().name;
  for (std::size_t i = 0; i < dw.size(); ++i) ASSERT_EQ(test::bits_of(dw[i]), test::bits_of(dw0[i])) << k().name;
  for (std::size_t i = 0; i < db.size(); ++i) ASSERT_EQ(test::bits_of(db[i]), test::bits_of(db0[i])) << k().name;
  const float want[3] = {amax_model(x), amax_model(w), amax_model(dy)};
  const float got[3] = {sc.amax_x, sc.amax_w, sc.amax_dy};
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(test::bits_of(got[t]), mx(k()) ? test::bits_of(-1.0f) : test::bits_of(want[t]))
        << k().name << " operand " << t;
  }
  if (mx(k())) return;
  // dY's scale 2^10 too large: most of dY saturates at E5M2's 57344, which moves dX and dW but not db (uncast).
  sc.dy *= 1024.0f;
  k().dense_bwd(a);
  std::size_t moved_dx = 0, moved_dw = 0;
  for (std::size_t i = 0; i < dx.size(); ++i) moved_dx += dx[i] != dx0[i];
  for (std::size_t i = 0; i < dw.size(); ++i) moved_dw += dw[i] != dw0[i];
  EXPECT_GT(moved_dx, dx.size() / 2) << k().name;
  EXPECT_GT(moved_dw, dw.size() / 2) << k().name;
  for (std::size_t i = 0; i < db.size(); ++i) EXPECT_EQ(test::bits_of(db[i]), test::bits_of(db0[i])) << k().name;
}

/// Transformer Engine's loop on the kernel: each step casts with the DelayedScaler's scales and records the amaxes
/// the kernel reports. X's amax jumps by 2^12 at one step and falls back after it. The output is current
/// scaling's, bit for bit, exactly where the history's maximum is this step's amax: every step but the spike
/// (cast with the old scale: saturated) and the history_len steps after it (the spike's scale, 12 binades too
/// small: X's small values fall into subnormals).
TEST_P(Fp8DenseTest, DelayedScalerAcrossASpikeIsCurrentScalingOutsideItsWindow) {
  if (mx(k())) GTEST_SKIP() << "delayed scaling is a per-tensor recipe";
  const std::size_t m = 6, kk = 40, n = 9, len = 4, spike = 6;
  const std::vector<float> base = draw(m * kk, 71, 2.0), w = draw(kk * n, 72, 0.1);
  DelayedScaler dx(Fp8::e4m3, len), dw(Fp8::e4m3, len);
  for (std::size_t t = 0; t < 14; ++t) {
    std::vector<float> x = base;
    if (t == spike)
      for (float& v : x) v *= 4096.0f;
    std::vector<float> cur(m * n), y(m * n);
    k().dense({m, n, kk, x.data(), w.data(), nullptr, cur.data(), Act::identity});
    Fp8Scales sc{dx.scale(), dw.scale(), 1.0f};
    DenseArgs a{m, n, kk, x.data(), w.data(), nullptr, y.data(), Act::identity};
    a.fp8 = &sc;
    k().dense(a);
    dx.record(sc.amax_x);
    dw.record(sc.amax_w);
    if (t == 0) continue;  // the first cast's scale is 1, as Transformer Engine's
    bool same = true;
    for (std::size_t i = 0; i < y.size(); ++i) same = same && test::bits_of(y[i]) == test::bits_of(cur[i]);
    EXPECT_EQ(same, t < spike || t > spike + len) << k().name << " step " << t;
  }
}

std::vector<test::KernelParam> scaled_of(std::initializer_list<Op> ops) {
  std::vector<test::KernelParam> v;
  for (const Kernel& k : kernels())
    if (is_scaled(k.mode) && std::find(ops.begin(), ops.end(), k.op) != ops.end()) v.push_back({&k});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Registry, Fp8DenseTest, ::testing::ValuesIn(scaled_of({Op::dense_fwd})),
                         test::kernel_param_name);
INSTANTIATE_TEST_SUITE_P(Registry, Fp8DenseBwdTest, ::testing::ValuesIn(scaled_of({Op::dense_bwd})),
                         test::kernel_param_name);
INSTANTIATE_TEST_SUITE_P(Registry, Fp8ReduceTest,
                         ::testing::ValuesIn(scaled_of({Op::sum, Op::sumsq, Op::maxabs, Op::dot})),
                         test::kernel_param_name);
INSTANTIATE_TEST_SUITE_P(Registry, Fp8LossSoftmaxTest, ::testing::ValuesIn(scaled_of({Op::mse, Op::softmax})),
                         test::kernel_param_name);

/// Every path with fp8 conversions and f32 kernels has both modes' kernels of every op they cover (neonfp16 has
/// conversions of its own, through fp16, but no f32 kernels: neon's are arm64's).
TEST(Fp8Modes, EveryConversionPathHasEveryScaledKernel) {
  std::size_t paths = 0;
  for (const Fp8Conversion& c : fp8_conversions()) {
    if (c.format != Fp8::e4m3) continue;
    bool has_f32 = false;
    for (const Kernel& k : kernels()) has_f32 = has_f32 || (k.isa == c.isa && k.mode == Mode::f32 && k.op == Op::sum);
    if (!has_f32) continue;
    ++paths;
    for (Mode mode : {Mode::fp8_f32acc, Mode::mxfp8_f32acc}) {
      for (Op op : {Op::sum, Op::sumsq, Op::maxabs, Op::dot, Op::dense_fwd, Op::dense_bwd, Op::mse, Op::softmax}) {
        bool found = false;
        for (const Kernel& k : kernels()) found = found || (k.isa == c.isa && k.mode == mode && k.op == op);
        EXPECT_TRUE(found) << mode_name(mode) << " " << op_name(op) << " on " << isa_name(c.isa);
      }
    }
  }
#if defined(__x86_64__)
  EXPECT_EQ(paths, 3u) << "ref, avx2, avx512";
#else
  EXPECT_EQ(paths, 2u) << "ref, neon";
#endif
}

}  // namespace
}  // namespace halfmap
