// Every GELU kernel of the registry (ops gelu, gelu_tanh), parameterised over kernels() and named by kernel; the
// accuracy of halfmap's erf_f32 and tanh_f32; the derivative formulas of GeluArgs by central differences; and the
// fp16 facts of docs/numerics.md ("GELU's tanh form evaluates 0.044715·x³"). A kernel whose ISA may not run here is
// skipped with the reason, never called.
//
// Sizes: n at 1, 2, 3, 7, around every register width (8, 16, 32, 64: minus one, equal, plus one, doubled plus one)
// and 100003; forward and backward together and each alone. Inputs fenced with NaN, outputs with guard patterns
// (test_util.hpp), inputs checked unchanged.
//
// Tolerance policy, per mode:
//   * f16, f16_model: bit-exact against f16_model_gelu(args, tanh, k.fma), y and dx as fp16 bits (NaN the canonical
//     0x7E00), on inputs with fp16 subnormals and, in a second variant, ±inf, NaNs with payloads and ±65504.
//   * f32, f16_f32acc, bf16_f32acc: against float64 (std::erf, std::tanh, std::exp) on the stored inputs; each output
//     in [round(E - A), round(E + A)]. With u = 2^-24 and the measured function errors ε_erf = 2^-20.5, ε_tanh = 2^-22
//     (absolute; ErfF32/TanhF32 below check them):
//       a = 1 + erf(z) or 1 + tanh(u'): A_a = ε + 2.3u|z| + 2u (erf: z = x/√2 rounded twice, erf' ≤ 1.13), or
//         ε + 5u|u'|(1 - t²) + 2u (tanh: u' = √(2/π)(x + c x³) with five roundings, tanh' = 1 - t²);
//       y = (x/2)·a: A_y = |x|/2·A_a + 2u|y|;
//       GELU' = a/2 + x·φ(x) (erf form; φ computed as x·k2·exp(-z²), with relative error 6u + 5u z²) or a/2 +
//         (x/2)(1 - t²)·√(2/π)(1 + 3c x²) (tanh form: 1 - t² within 2A_t + 2u, the rest 5u relative):
//         A_d = A_a/2 + the second term's error + 2u|d| + u; dx = dy·d: A_dx = |dy|·A_d + u|dx|.
//     Each bound ×1.5, plus 2^-140 for f32 underflow. avx512bf16 stores through vcvtneps2bf16, which flushes
//     f32-subnormal results to zero: there an interval reaching below 2^-126 may also hold ±0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "kernel_param.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::Arr;
using test::kF16Specials;
using test::unwritten_bits;
using test::within_rounded;

constexpr double kU = 0x1p-24, kErfErr = 0x1.6a09e667f3bcdp-21 /* 2^-20.5 */, kTanhErr = 0x1p-22;
constexpr double kK0 = 0.79788456080286536, kC = 0.044715;

bool fp16_mode(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

/// The f64 GELU, its derivative and the bounds of the policy above for one stored x (and dy).
struct Expect {
  double y, ay, dx, adx;
};
Expect expect(bool tanh_form, double x, double dy) {
  const double h = 0.5 * x;
  double a, aa, d, ad;
  if (tanh_form) {
    const double u = kK0 * (x + kC * x * x * x), t = std::tanh(u), q = 1 - t * t;
    a = 1 + t;
    aa = kTanhErr + 5 * kU * std::fabs(u) * q + 2 * kU;
    const double s = q * kK0 * (1 + 3 * kC * x * x);
    d = 0.5 * a + h * s;
    const double as = (2 * aa + 2 * kU) * kK0 * (1 + 3 * kC * x * x) + 5 * kU * std::fabs(s);
    ad = 0.5 * aa + std::fabs(h) * as + 2 * kU * std::fabs(d) + kU;
  } else {
    const double z = x / std::sqrt(2.0), phi = std::exp(-z * z) / std::sqrt(2 * M_PI);
    a = 1 + std::erf(z);
    aa = kErfErr + 2.3 * kU * std::fabs(z) + 2 * kU;
    d = 0.5 * a + x * phi;
    ad = 0.5 * aa + std::fabs(x) * phi * (6 * kU + 5 * kU * z * z) + 2 * kU * std::fabs(d) + kU;
  }
  const double y = h * a;
  return {y, 1.5 * (std::fabs(h) * aa + 2 * kU * std::fabs(y)) + 0x1p-140, dy * d,
          1.5 * (std::fabs(dy) * ad + kU * std::fabs(dy * d)) + 0x1p-140};
}

class GeluTest : public ::testing::TestWithParam<test::KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
  bool tanh_form() const { return k().op == Op::gelu_tanh; }
};

/// Runs the kernel on x (and dy) and checks y and dx against the model or the oracle, the guards and the inputs.
void run_and_check(const Kernel& k, const Arr& x, const Arr& dy, bool fwd, bool bwd) {
  const std::size_t n = x.size();
  const DType t = k.storage;
  Arr y = Arr::output(t, n, n % 2), dx = Arr::output(t, n, (n / 2) % 2);
  const auto xs = x.snapshot(), ds = dy.snapshot();
  k.gelu({n, x.data(), fwd ? y.data() : nullptr, bwd ? dy.data() : nullptr, bwd ? dx.data() : nullptr});
  EXPECT_TRUE(x.unchanged_since(xs) && dy.unchanged_since(ds)) << "an input was modified";
  EXPECT_EQ(y.guard_damage(), "");
  EXPECT_EQ(dx.guard_damage(), "");
  for (auto [arr, asked, name] : {std::tuple{&y, fwd, "y"}, std::tuple{&dx, bwd, "dx"}}) {
    if (asked) continue;
    for (std::size_t i = 0; i < n; ++i) {
      if (arr->bits(i) != unwritten_bits(t)) {
        ADD_FAILURE() << name << "[" << i << "] written although not asked for";
        break;
      }
    }
  }
  std::size_t bad = 0;
  auto report = [&](const char* what, std::size_t i, const std::string& msg) {
    if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "] (x = " << x.value(i) << "): " << msg;
  };
  if (fp16_mode(k)) {
    const auto xm = x.as_f16(), dym = dy.as_f16();
    std::vector<f16> ym(n), dxm(n);
    f16_model_gelu({n, xm.data(), ym.data(), dym.data(), dxm.data()}, k.op == Op::gelu_tanh, k.fma);
    for (std::size_t i = 0; i < n; ++i) {
      if (fwd && y.bits(i) != ym[i].bits) {
        report("y", i, fmt::format("got {}, model {}", test::hex16(std::uint16_t(y.bits(i))), test::hex(ym[i])));
      }
      if (bwd && dx.bits(i) != dxm[i].bits) {
        report("dx", i, fmt::format("got {}, model {}", test::hex16(std::uint16_t(dx.bits(i))), test::hex(dxm[i])));
      }
    }
  } else {
    const bool fl = k.isa == Isa::avx512bf16;
    for (std::size_t i = 0; i < n; ++i) {
      const Expect e = expect(k.op == Op::gelu_tanh, x.value(i), dy.value(i));
      if (fwd) {
        if (auto r = within_rounded(t, y.value(i), e.y, e.ay, fl); !r) report("y", i, r.message());
      }
      if (bwd) {
        if (auto r = within_rounded(t, dx.value(i), e.dx, e.adx, fl); !r) report("dx", i, r.message());
      }
    }
  }
  EXPECT_EQ(bad, 0u) << bad << " outputs outside the model or the bound";
}

TEST_P(GeluTest, SizesAroundTheRegisters) {
  std::set<std::size_t> sizes = {1, 2, 3, 7, 100003};
  // w: a register of f32 or fp16 lanes on some path. The f32-accumulating kernels also take blocks of 4
  // registers side by side: 4w ± 1 and 5w + 3 (a block, a whole register and a partial one) are around those.
  for (std::size_t w : {4, 8, 16, 32, 64}) {
    for (std::size_t n : {w - 1, w, w + 1, 2 * w + 1, 4 * w - 1, 4 * w + 1, 5 * w + 3}) sizes.insert(n);
  }
  unsigned variant = 0;
  for (std::size_t n : sizes) {
    for (bool specials : {false, true}) {
      if (specials && !fp16_mode(k())) continue;
      ++variant;
      const std::uint64_t seed = test::case_seed(n, variant, 0x6E1);
      SCOPED_TRACE(fmt::format("kernel {} n={} specials={} seed=0x{:016X}", k().name, n, specials, seed));
      test::Rng rng(seed);
      const DType t = k().storage;
      Arr x = Arr::input(t, n, variant % 2), dy = Arr::input(t, n, (variant / 2) % 2);
      const double lim = variant % 3 == 0 ? 300.0 : 8.0;  // past fp16's x³ and x² overflows, or GELU's curve
      for (std::size_t i = 0; i < n; ++i) {
        const double r = rng.uniform(0.0, 1.0);
        x.set(i,
              r < 0.1 && t == DType::f16 ? std::ldexp(double(rng.integer(-1023, 1023)), -24) : rng.uniform(-lim, lim));
        dy.set(i, rng.uniform(-2.0, 2.0));
        if (specials && rng.coin(0.03)) {
          (rng.coin(0.5) ? x : dy).set_bits(i, kF16Specials[rng.integer(0, int(std::size(kF16Specials)) - 1)]);
        }
      }
      run_and_check(k(), x, dy, variant % 5 != 4, variant % 4 != 3);
      if (HasFailure()) return;
    }
  }
}

/// docs/numerics.md: GELU's tanh form evaluates 0.044715·x³, and x³ overflows fp16 from x = 40.5 here (40.25² rounds
/// to 1620, times 40.25 to 65216; 40.5² to 1640, times 40.5 is 66420: inf); then u = inf, t = 1 and y = x,
/// the forward still right. x² overflows from 256, where the backward's (1 - t²)·(k0·(1 + 3c·x²)) is 0·inf =
/// NaN. With f32 arithmetic (f16_f32acc) neither happens.
TEST_P(GeluTest, Fp16CubeAndSquareOverflowAsStated) {
  if (k().storage == DType::bf16) GTEST_SKIP() << "bf16 keeps f32's range";
  const DType t = k().storage;
  const std::vector<double> xs = {40.25, 40.5, 100.0, 255.875, 256.0, 1000.0};
  Arr x = Arr::input(t, xs.size(), 0), dy = Arr::input(t, xs.size(), 1);
  Arr y = Arr::output(t, xs.size(), 0), dx = Arr::output(t, xs.size(), 0);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    x.set(i, xs[i]);
    dy.set(i, 1.0);
  }
  k().gelu({xs.size(), x.data(), y.data(), dy.data(), dx.data()});
  const bool fp16_arith = fp16_mode(k());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    SCOPED_TRACE(fmt::format("kernel {} x={}", k().name, xs[i]));
    EXPECT_EQ(y.value(i), xs[i]) << "GELU(x) = x in fp16 from x = 40";
    if (fp16_arith && tanh_form() && xs[i] >= 256.0) {
      EXPECT_TRUE(std::isnan(dx.value(i))) << "(1 - t²)·inf";
    } else {
      EXPECT_EQ(dx.value(i), 1.0) << "GELU'(x) = 1 in fp16 from x = 40";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, GeluTest, ::testing::ValuesIn(test::kernels_of_ops({Op::gelu, Op::gelu_tanh})),
                         test::kernel_param_name);

TEST(ErfF32, AbsoluteErrorBelowTwoToMinus20Point5OnAStridedSweep) {
  double worst = 0, at = 0;
  for (double z = -8; z <= 8; z += 0x1p-12) {
    const double e = std::fabs(double(erf_f32(float(z))) - std::erf(double(float(z))));
    if (e > worst) worst = e, at = z;
  }
  EXPECT_LT(worst, kErfErr) << "at " << at;
  std::printf("erf_f32: largest absolute error %.3g (2^%.2f) at %g\n", worst, std::log2(worst), at);
  EXPECT_EQ(erf_f32(INFINITY), 1.0f);
  EXPECT_EQ(erf_f32(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(erf_f32(NAN)));
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
}

TEST(TanhF32, AbsoluteErrorBelowTwoToMinus22OnAStridedSweep) {
  double worst = 0, at = 0;
  for (double u = -10; u <= 10; u += 0x1p-12) {
    const double e = std::fabs(double(tanh_f32(float(u))) - std::tanh(double(float(u))));
    if (e > worst) worst = e, at = u;
  }
  EXPECT_LT(worst, kTanhErr) << "at " << at;
  std::printf("tanh_f32: largest absolute error %.3g (2^%.2f) at %g\n", worst, std::log2(worst), at);
  EXPECT_EQ(tanh_f32(INFINITY), 1.0f);
  EXPECT_EQ(tanh_f32(-INFINITY), -1.0f);
  EXPECT_EQ(tanh_f32(100.0f), 1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(NAN)));
}

// GeluArgs' derivatives against central differences of the f64 forward.
TEST(GeluGradient, DerivativesMatchCentralDifferences) {
  for (bool tanh_form : {false, true}) {
    for (double x = -6; x <= 6; x += 0.37) {
      const double h = 1e-6;
      const double num = (expect(tanh_form, x + h, 0).y - expect(tanh_form, x - h, 0).y) / (2 * h);
      EXPECT_NEAR(expect(tanh_form, x, 1).dx, num, 1e-7) << "tanh form " << tanh_form << " x " << x;
    }
  }
}

}  // namespace
}  // namespace halfmap
