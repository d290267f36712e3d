// Every loss and softmax kernel of the registry (ops mse, softmax, softmax_naive, xent), parameterised over
// kernels() and named by kernel, so such a kernel cannot exist untested; halfmap's exp (exp_f32, exp_f16); the
// overflow and underflow facts of docs/numerics.md that these kernels must show; and the gradient formulas by finite
// differences. A kernel whose ISA may not run here is skipped with the reason, never called.
//
// Sizes: n (mse) and cols (softmax, xent) at 1, 2, 3, 7, around every tile the paths use (16, 32 and 64 for the
// f32-accumulating blocks of 4 registers on NEON, AVX2 and AVX-512; the kernel's `lanes` for the fp16 modes), minus
// one, equal, plus one, 2·tile + 1, and one large odd case (n = 100003; 7 × 1001). Every array starts zero or one
// element off a 64-byte boundary, inputs are surrounded by NaN (a kernel that reads past its arrays produces NaN)
// and outputs by guard patterns (a kernel that writes past them fails), and the inputs are checked unchanged.
// Seeds derive from the case's parameters (test::case_seed) and are printed in every trace.
//
// Tolerance policy (docs/contributing.md, tolerances; docs/numerics.md), per precision mode, u = 2^-24:
//   * f16, f16_model: bit-exact against f16_model_mse(args, k.lanes, k.fma), f16_model_softmax(args, stable,
//     k.lanes) and f16_model_xent(args, k.lanes): the returned loss as f32 bits and every output as fp16 bits
//     (NaN included: the contract makes every NaN the canonical 0x7E00 / 0x7FC00000). Inputs hold fp16
//     subnormals, and a second variant adds ±inf and NaNs with payloads.
//   * f32, f16_f32acc, bf16_f32acc: against a float64 oracle E computed from the stored inputs; the output must lie
//     in [round(E - A), round(E + A)], round = rounding to the storage type (monotonic, so this is "within A, plus
//     the final rounding", exact at ulp boundaries and at the overflow threshold). Where E is NaN or ±inf the
//     output must be NaN or the same infinity. A per output:
//       mse loss:   E = Σ d*²/n, d* = p - y exact in f64. The kernel rounds d (u), the square or fma (u), n adds
//                   in any order (γ_n on a sum of non-negative terms, Higham 4.2) and the division (u), so with
//                   r = n + 3 roundings along any path, A = 2 r u E + r 2^-149 (γ_r <= 2 r u for r u <= 1/2; the
//                   second term is f32 underflow, 2^-150 per rounding).
//       mse grad:   E = c·d*, c = (2·loss_scale)/float(n) computed in f32 as the contract defines it; the kernel
//                   rounds d and the product: A = 2.01 u |E| + 2^-149.
//       softmax:    E_j = exp(x_j - m)/Σ_k exp(x_k - m) in f64. t_j = x_j - m rounds once (|t_j| u; naive: exact),
//                   exp_f32 errs by at most 1 f32 ulp (math.hpp), at most 2u relative, so e_j carries
//                   a_j = 1.01 |t_j| u + 2u; the f32 sum of cols positive terms in any order adds γ_cols <= 2 cols u
//                   plus the largest a_k; the division u. So A_j = (a_j + max a + 2 cols u + u)·1.05·E_j
//                   + (cols + 4) 2^-148 / s* (f32 subnormal exps, s* = the exact sum, >= 1 for the stable
//                   softmax). The rounding to fp16 or bf16 is the interval's.
//       xent probs: exactly what Op::softmax of the same mode and path writes (bit for bit), and within the
//                   softmax bound above.
//       xent loss:  E = mean_r(-log p_r) with p_r the STORED probability at the label (the contract), in f64;
//                   logf errs by at most 1 ulp (2u relative), the row sum adds γ_rows, the division u:
//                   A = (2 rows + 4) u·1.05·E. A stored probability of 0 gives E = +inf, matched exactly.
//       xent grad:  E = c·(p - onehot) with the stored p, c = loss_scale/float(rows) in f32; the kernel rounds
//                   p - 1 (u) and the product (u): A = 2.01 u |E| + 2^-149.
//     avx512bf16 writes its arrays with vcvtneps2bf16, which flushes f32-subnormal results to zero (registry.hpp):
//     there a result whose interval reaches below 2^-126 may also be ±0.
//   * exp: exp_f32 within 1 ulp of the correctly rounded f32 exp (float(std::exp(double))) on a strided sweep of
//     [-104, 89]; exp_f16 equal to the correctly rounded fp16 exp on every finite fp16 input but the two stated in
//     math.hpp (1 ulp above). The SIMD exps are checked bit for bit against exp_f32 through softmax outputs whose
//     bits follow from the exps alone (2-column rows; see SimdExpMatchesScalarExpBitForBit). The f16 models' own
//     copies of exp, erf and tanh equal exp_f32, erf_f32 and tanh_f32 on every fp16 input (ModelMath).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/math.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "kernel_param.hpp"
#include "kernels/common/nn.hpp"  // quotient_by_reciprocal (vmath.hpp), row_range_bits (softmax_row.hpp)
#include "models/model_math.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::load_exact;
using test::round_to;
using test::store_bits;

using test::Arr;
using test::expect_all;
using test::guard_bits;
using test::hex_bits;
using test::kF16Specials;
using test::nan_bits;
using test::unwritten_bits;

constexpr double kU = 0x1p-24;
constexpr double kInf = std::numeric_limits<double>::infinity();

bool fp16_mode(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

// ---- storage ---------------------------------------------------------------------------------------------------

/// Compares every output element with the model's fp16 bits; reports the first few differences.
void expect_bits_equal(const char* what, const Arr& got, const std::vector<f16>& want) {
  ASSERT_EQ(got.size(), want.size());
  int shown = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got.bits(i) == want[i].bits) continue;
    ++bad;
    if (shown++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << test::hex16(std::uint16_t(got.bits(i))) << ", model "
                    << test::hex(want[i]);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ from the f16 model";
}

/// Checks one value (exact, as a double) against [round(E - A), round(E + A)]; see the policy at the top.
::testing::AssertionResult within(DType t, double got, double e, double a, bool flush_subnormal) {
  if (std::isnan(e)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << test::hex(got) << ", oracle NaN";
  }
  if (std::isinf(e)) {
    if (got == e) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << test::hex(got) << ", oracle " << e;
  }
  const double lo = round_to(t, e - a), hi = round_to(t, e + a);
  if (got >= lo && got <= hi) return ::testing::AssertionSuccess();
  if (flush_subnormal && got == 0 && std::min(std::fabs(e - a), std::fabs(e + a)) < 0x1p-126) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << test::hex(got) << ", oracle " << test::hex(e) << ", bound " << a
                                       << ", allowed [" << test::hex(lo) << ", " << test::hex(hi) << "]";
}

// ---- random values ---------------------------------------------------------------------------------------------

/// Mostly uniform in [-lim, lim]; one in eight a storage subnormal (fp16: k·2^-24; f32 and bf16: f32 subnormal
/// range), one in 32 a signed zero.
double draw_value(test::Rng& rng, DType t, double lim) {
  const double r = rng.uniform(0.0, 1.0);
  const double sign = rng.coin(0.5) ? -1.0 : 1.0;
  if (r < 0.125) {
    if (t == DType::f16) return sign * std::ldexp(double(rng.integer(1, 1023)), -24);
    return sign * std::ldexp(rng.uniform(0.0, 1.0), -127);
  }
  if (r < 0.15625) return sign * 0.0;
  return rng.uniform(-lim, lim);
}

// ---- sizes -----------------------------------------------------------------------------------------------------

/// 1, 2, 3, 7; 16, 32 and 64 (the f32-accumulating blocks of 4 registers of NEON, AVX2, AVX-512) and the kernel's
/// fp16 lanes, each minus one, equal, plus one and 2·tile + 1. The large odd case is separate.
std::vector<std::size_t> sizes_for(const Kernel& k) {
  std::set<std::size_t> s = {1, 2, 3, 7};
  std::vector<std::size_t> tiles = {16, 32, 64};
  if (fp16_mode(k) && k.lanes > 1) tiles.push_back(k.lanes);
  for (std::size_t t : tiles) {
    for (std::size_t n : {t - 1, t, t + 1, 2 * t + 1}) s.insert(n);
  }
  return {s.begin(), s.end()};
}

// ---- kernel parameters -----------------------------------------------------------------------------------------

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

std::vector<KernelParam> kernels_of(std::initializer_list<Op> ops) {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (std::find(ops.begin(), ops.end(), k.op) != ops.end() && !is_scaled(k.mode)) v.push_back({&k});
  }
  return v;
}

std::string kernel_test_name(const ::testing::TestParamInfo<KernelParam>& info) {
  return std::string(info.param.k->name);
}

class NnKernelTest : public ::testing::TestWithParam<KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
  DType storage() const { return k().storage; }
  bool flushes() const { return k().isa == Isa::avx512bf16; }
};

// =================================================================================================================
// mse
// =================================================================================================================

class MseTest : public NnKernelTest {};

struct MseCase {
  Arr p, y, dp;
  MseCase(DType t, std::size_t n, std::size_t o)
      : p(Arr::input(t, n, o & 1)), y(Arr::input(t, n, (o >> 1) & 1)), dp(Arr::output(t, n, (o >> 2) & 1)) {}
};

/// Calls the kernel and checks it against the model (fp16 modes) or the f64 oracle (f32-accumulating modes), plus
/// guards and unchanged inputs. Returns the loss.
float run_mse(const Kernel& k, MseCase& c, float loss_scale, bool with_dp) {
  const std::size_t n = c.p.size();
  const auto ps = c.p.snapshot(), ys = c.y.snapshot();
  const float loss = k.loss({n, c.p.data(), c.y.data(), loss_scale, with_dp ? c.dp.data() : nullptr});
  EXPECT_TRUE(c.p.unchanged_since(ps)) << "p was modified";
  EXPECT_TRUE(c.y.unchanged_since(ys)) << "y was modified";
  EXPECT_EQ(c.dp.guard_damage(), "") << "dp";
  if (!with_dp) {
    for (std::size_t i = 0; i < n; ++i) {
      if (c.dp.bits(i) != unwritten_bits(k.storage)) {
        ADD_FAILURE() << "dp[" << i << "] written although dp is null";
        break;
      }
    }
  }
  if (fp16_mode(k)) {
    const auto pm = c.p.as_f16(), ym = c.y.as_f16();
    std::vector<f16> dm(n);
    const float lm =
        f16_model_mse({n, pm.data(), ym.data(), loss_scale, with_dp ? dm.data() : nullptr}, k.lanes, k.fma);
    EXPECT_EQ(test::bits_of(loss), test::bits_of(lm)) << "loss " << test::hex(loss) << ", model " << test::hex(lm);
    if (with_dp) expect_bits_equal("dp", c.dp, dm);
    return loss;
  }
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = c.p.value(i) - c.y.value(i);
    sum += d * d;
  }
  const double e = sum / double(n);
  const double r = double(n) + 3;
  EXPECT_TRUE(within(k.storage, loss, e, 2 * r * kU * e + r * 0x1p-149, false)) << "loss";
  if (with_dp) {
    const float cf = (2.0f * loss_scale) / float(n);
    expect_all("dp", n, [&](std::size_t i) {
      const double g = double(cf) * (c.p.value(i) - c.y.value(i));
      return within(k.storage, c.dp.value(i), g, 2.01 * kU * std::fabs(g) + 0x1p-149, k.isa == Isa::avx512bf16);
    });
  }
  return loss;
}

void fill_mse(MseCase& c, test::Rng& rng, double lim, bool specials) {
  for (std::size_t i = 0; i < c.p.size(); ++i) {
    c.p.set(i, draw_value(rng, c.p.type(), lim));
    c.y.set(i, draw_value(rng, c.y.type(), lim));
    if (specials && rng.coin(0.03)) {
      (rng.coin(0.5) ? c.p : c.y).set_bits(i, kF16Specials[rng.integer(0, int(std::size(kF16Specials)) - 1)]);
    }
  }
}

TEST_P(MseTest, SizesAroundTheTiles) {
  std::vector<std::size_t> ns = sizes_for(k());
  ns.push_back(100003);
  std::size_t variant = 0;
  for (std::size_t n : ns) {
    for (bool specials : {false, true}) {
      if (specials && !fp16_mode(k())) continue;  // f32-acc modes: finite inputs against the oracle
      for (float ls : {1.0f, 0x1p15f, 0x1p16f}) {
        ++variant;
        const std::uint64_t seed = test::case_seed(n, variant, 0x3E5);
        SCOPED_TRACE(fmt::format("kernel {} n={} specials={} loss_scale={} offsets {} seed=0x{:016X}", k().name, n,
                                 specials, ls, variant % 8, seed));
        test::Rng rng(seed);
        MseCase c(storage(), n, variant % 8);
        fill_mse(c, rng, n > 1000 ? 4.0 : 16.0, specials);
        run_mse(k(), c, ls, variant % 5 != 4);
        if (HasFailure()) return;
      }
    }
  }
}

/// docs/numerics.md: 255.875² = 65472 is finite in fp16 and 256² = 65536 is inf. In the fp16 modes the squared error
/// itself is an fp16 operation, so with n = 1 the loss is inf from |p - y| = 256 and finite at 255.875; with n = 2
/// and one zero difference the fp16 accumulator still overflows (the f16_f32acc path instead returns 32768).
TEST_P(MseTest, Fp16SquaredErrorOverflowsFrom256) {
  if (k().storage != DType::f16) GTEST_SKIP() << "fp16 storage only";
  struct Case {
    std::size_t n;
    double p0, y0;
    double f16_loss, f32acc_loss;
  };
  const Case cases[] = {
      {1, 255.875, 0, 65472, 65472},    {1, 256, 0, kInf, kInf},    {1, 0, -256, kInf, kInf},
      {1, -128, 127.875, 65472, 65472}, {1, 128, -128, kInf, kInf}, {2, 256, 0, kInf, 32768},
      {2, 255.875, 0, 32736, 32736},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(fmt::format("kernel {} n={} p0={} y0={}", k().name, cs.n, cs.p0, cs.y0));
    MseCase c(storage(), cs.n, 5);
    for (std::size_t i = 0; i < cs.n; ++i) {
      c.p.set(i, i == 0 ? cs.p0 : 3.0);
      c.y.set(i, i == 0 ? cs.y0 : 3.0);
    }
    const float loss = run_mse(k(), c, 1.0f, true);
    EXPECT_EQ(double(loss), fp16_mode(k()) ? cs.f16_loss : cs.f32acc_loss);
  }
}

/// An fp16 gradient is to_f16(c·d): with d = 2^-24 (the smallest subnormal difference) and n = 1, c = 2·loss_scale,
/// so c·|d| < 2^-25 flushes to +0, c·|d| = 2^-25 is the tie that goes to even (+0), and just above it the result is
/// the subnormal 2^-24 (0x0001). The same with d = 1 and a tiny loss scale, and with negative d (sign kept).
TEST_P(MseTest, Fp16GradientUnderflowBoundary) {
  if (k().storage != DType::f16) GTEST_SKIP() << "fp16 storage only";
  struct Case {
    double p, y;
    float ls;
    std::uint16_t dp;
  };
  const float up = 1.0f + 0x1p-20f, down = 1.0f - 0x1p-20f;
  const Case cases[] = {
      {0x1p-24, 0, 0.25f * down, 0x0000}, {0x1p-24, 0, 0.25f, 0x0000},
      {0x1p-24, 0, 0.25f * up, 0x0001},   {0, 0x1p-24, 0.25f * down, 0x8000},
      {0, 0x1p-24, 0.25f * up, 0x8001},   {1, 0, 0x1p-26f * down, 0x0000},
      {1, 0, 0x1p-26f * up, 0x0001},      {0.25, 0, 0x1p16f, 0x7800},
      {0.5, 0, 0x1p16f, 0x7C00},  // c·d = 2^15; 2^16 overflows to inf
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(fmt::format("kernel {} p={} y={} loss_scale={:a}", k().name, cs.p, cs.y, cs.ls));
    MseCase c(storage(), 1, 3);
    c.p.set(0, cs.p);
    c.y.set(0, cs.y);
    run_mse(k(), c, cs.ls, true);
    EXPECT_EQ(c.dp.bits(0), cs.dp) << "dp " << test::hex16(std::uint16_t(c.dp.bits(0)));
  }
}

/// Keras (2^15) and PyTorch (2^16) initial loss scales: the scaled fp16 gradients equal the model's bit for bit,
/// including those that overflow to inf (|d| large) and those that a scale of 1 would flush.
TEST_P(MseTest, LossScaledFp16GradientsMatchTheModel) {
  if (!fp16_mode(k())) GTEST_SKIP() << "fp16 modes only (bit-exact to the model)";
  for (float ls : {0x1p15f, 0x1p16f}) {
    const std::size_t n = 1001;
    const std::uint64_t seed = test::case_seed(n, std::uint64_t(ls), 0x15);
    SCOPED_TRACE(fmt::format("kernel {} n={} loss_scale={} seed=0x{:016X}", k().name, n, ls, seed));
    test::Rng rng(seed);
    MseCase c(storage(), n, 6);
    for (std::size_t i = 0; i < n; ++i) {
      c.p.set(i, std::ldexp(rng.uniform(-1, 1), rng.integer(-24, 10)));
      c.y.set(i, std::ldexp(rng.uniform(-1, 1), rng.integer(-24, 0)));
    }
    run_mse(k(), c, ls, true);
    std::size_t inf = 0, tiny = 0;
    for (std::size_t i = 0; i < n; ++i) {
      inf += (c.dp.bits(i) & 0x7FFF) == 0x7C00;
      tiny += (c.dp.bits(i) & 0x7FFF) != 0 && (c.dp.bits(i) & 0x7C00) == 0;
    }
    EXPECT_GT(inf + tiny, 0u) << "the case should reach the overflow or subnormal range";
  }
}

/// bf16 has f32's range: squared errors of values around 1e18 stay finite (4e36 < 3.39e38) where fp16 could not
/// even store the inputs, but the 8-bit significand costs precision: the stored inputs are ~2^-9 off, the loss is
/// within 2^-8 relative of the exact value from the stored inputs (one bf16 rounding after an f32 computation).
TEST_P(MseTest, Bf16KeepsTheRangeOfF32) {
  if (k().storage != DType::bf16) GTEST_SKIP() << "bf16 storage only";
  MseCase c(storage(), 3, 1);
  const double vals[3][2] = {{1e18, -1e18}, {3e17, 7e17}, {-9e17, 1.1e18}};
  for (std::size_t i = 0; i < 3; ++i) {
    c.p.set(i, vals[i][0]);
    c.y.set(i, vals[i][1]);
  }
  EXPECT_NE(c.p.value(0), 1e18) << "1e18 should not be exact in bf16";
  EXPECT_LE(std::fabs(c.p.value(0) - 1e18) / 1e18, 0x1p-8);
  const float loss = run_mse(k(), c, 1.0f, true);
  double e = 0;
  for (std::size_t i = 0; i < 3; ++i) e += (c.p.value(i) - c.y.value(i)) * (c.p.value(i) - c.y.value(i)) / 3;
  EXPECT_TRUE(std::isfinite(loss)) << test::hex(loss);
  EXPECT_LE(std::fabs(double(loss) - e) / e, 0x1p-8) << test::hex(loss) << " vs " << e;
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(c.dp.value(i))) << "dp[" << i << "]";
}

INSTANTIATE_TEST_SUITE_P(Registry, MseTest, ::testing::ValuesIn(kernels_of({Op::mse})), kernel_test_name);

// =================================================================================================================
// softmax
// =================================================================================================================

class SoftmaxTest : public NnKernelTest {
 protected:
  bool stable() const { return k().op == Op::softmax; }
};

/// The f64 oracle of one row and the bound of the policy at the top (f32-accumulating modes). `stable_path`
/// says whether the kernel subtracts the max (which rounds t_j); the oracle itself is always computed stably.
struct RowOracle {
  std::vector<double> e, a;  // expected values and bounds
};
RowOracle softmax_oracle(const std::vector<double>& x, bool stable_path) {
  const std::size_t cols = x.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // exp_f32 overflows from 0x42B17218 (math.hpp): on the naive path such an element gives e = inf, so s = inf and
  // y = NaN there (inf/inf) and +0 elsewhere.
  const double overflow_from = double(std::bit_cast<float>(0x42B17218u));
  RowOracle o;
  o.e.assign(cols, 0);
  o.a.assign(cols, 0);
  bool has_nan = false, posinf = false, all_neginf = true, overflows = false;
  double m = -kInf;
  for (double v : x) {
    has_nan = has_nan || std::isnan(v);
    posinf = posinf || v == kInf;
    all_neginf = all_neginf && v == -kInf;
    overflows = overflows || v >= overflow_from;
    m = std::max(m, v);
  }
  if (has_nan || (stable_path && posinf) || all_neginf) {
    o.e.assign(cols, nan);
    return o;
  }
  if (!stable_path && overflows) {
    for (std::size_t j = 0; j < cols; ++j) o.e[j] = x[j] >= overflow_from ? nan : 0.0;
    return o;
  }
  // e*_j = exp(x_j - m) (f64, relative to the max); a_j bounds the relative error of the kernel's e_j: the rounded
  // t_j is within |t_j| u of t_j, so e^{t_j} moves by at most expm1(1.01 |t_j| u), and exp_f32 adds 2u.
  std::vector<double> es(cols), aj(cols);
  double s = 0, serr = 0;
  for (std::size_t j = 0; j < cols; ++j) {
    const double t = x[j] - m;
    es[j] = std::exp(t);
    aj[j] = (stable_path ? std::expm1(1.01 * std::fabs(t) * kU) : 0.0) + 2 * kU;
    s += es[j];
    if (es[j] > 0) serr += es[j] * aj[j];  // an e* of 0 is f32 +0 or subnormal: the absolute term covers it
  }
  const double sigma = serr / s + 2 * double(cols) * kU;    // relative error of the f32 sum
  const double s_path = stable_path ? s : s * std::exp(m);  // the sum as the kernel sees it (naive: unscaled)
  for (std::size_t j = 0; j < cols; ++j) {
    o.e[j] = es[j] / s;
    const double abs = double(cols + 4) * 0x1p-148 / s_path;
    o.a[j] = o.e[j] == 0 ? abs : 1.05 * (aj[j] + sigma + kU) * o.e[j] + abs;
  }
  return o;
}

struct SoftmaxCase {
  std::size_t rows, cols;
  Arr x, y;
  SoftmaxCase(DType t, std::size_t r, std::size_t c, std::size_t o)
      : rows(r), cols(c), x(Arr::input(t, r * c, o & 1)), y(Arr::output(t, r * c, (o >> 1) & 1)) {}
};

/// Runs the kernel (into y, or in place into x when `in_place`) and checks model/oracle, guards, unchanged input.
void run_softmax(const Kernel& k, SoftmaxCase& c, bool in_place = false) {
  const bool stable = k.op == Op::softmax;
  const auto x0 = c.x.as_f16();  // bit patterns (any storage: used for the model only with fp16)
  std::vector<double> xv(c.rows * c.cols);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = c.x.value(i);
  const auto xs = c.x.snapshot();
  Arr& out = in_place ? c.x : c.y;
  k.softmax({c.rows, c.cols, c.x.data(), out.data()});
  if (!in_place) {
    EXPECT_TRUE(c.x.unchanged_since(xs)) << "x was modified";
  }
  EXPECT_EQ(out.guard_damage(), "") << "y";
  if (fp16_mode(k)) {
    std::vector<f16> ym(c.rows * c.cols);
    f16_model_softmax({c.rows, c.cols, x0.data(), ym.data()}, stable, k.lanes);
    expect_bits_equal("y", out, ym);
    return;
  }
  for (std::size_t r = 0; r < c.rows; ++r) {
    const std::vector<double> row(xv.begin() + long(r * c.cols), xv.begin() + long((r + 1) * c.cols));
    const RowOracle o = softmax_oracle(row, stable);
    SCOPED_TRACE(fmt::format("row {}", r));
    expect_all("y", c.cols, [&](std::size_t j) {
      return within(k.storage, out.value(r * c.cols + j), o.e[j], o.a[j], k.isa == Isa::avx512bf16);
    });
    if (::testing::Test::HasFailure()) return;
  }
}

/// Random rows for the f32-acc oracle: |x| <= lim, with storage subnormals and zeros; fp16 variants may add the
/// specials to one row in three.
void fill_softmax(SoftmaxCase& c, test::Rng& rng, double lim, bool specials) {
  for (std::size_t r = 0; r < c.rows; ++r) {
    const bool special_row = specials && r % 3 == 1;
    for (std::size_t j = 0; j < c.cols; ++j) {
      c.x.set(r * c.cols + j, draw_value(rng, c.x.type(), lim));
      if (special_row && rng.coin(0.05)) {
        c.x.set_bits(r * c.cols + j, kF16Specials[rng.integer(0, int(std::size(kF16Specials)) - 1)]);
      }
    }
  }
}

TEST_P(SoftmaxTest, SizesAroundTheTiles) {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t cols : sizes_for(k())) shapes.push_back({3, cols});
  shapes.push_back({7, 1001});
  std::size_t variant = 0;
  for (auto [rows, cols] : shapes) {
    for (bool specials : {false, true}) {
      if (specials && !fp16_mode(k())) continue;
      ++variant;
      // fp16 naive: |x| <= 11 keeps exp finite (the overflow is pinned separately); the stable path sees a wider
      // range so that exps underflow to subnormals and zero.
      const double lim = stable() ? 24.0 : (fp16_mode(k()) ? 10.0 : 16.0);
      const std::uint64_t seed = test::case_seed(rows, cols, variant + 0x50F);
      SCOPED_TRACE(fmt::format("kernel {} {}x{} specials={} offsets {} seed=0x{:016X}", k().name, rows, cols, specials,
                               variant % 4, seed));
      test::Rng rng(seed);
      SoftmaxCase c(storage(), rows, cols, variant % 4);
      fill_softmax(c, rng, lim, specials);
      run_softmax(k(), c);
      if (HasFailure()) return;
    }
  }
}

/// y may be x: the in-place result equals the model (fp16 modes) or the out-of-place result, bit for bit.
TEST_P(SoftmaxTest, InPlace) {
  for (std::size_t cols : {std::size_t{1}, std::size_t{33}, std::size_t{129}}) {
    const std::uint64_t seed = test::case_seed(cols, 0x1A);
    SCOPED_TRACE(fmt::format("kernel {} 5x{} seed=0x{:016X}", k().name, cols, seed));
    test::Rng rng(seed);
    SoftmaxCase a(storage(), 5, cols, 1), b(storage(), 5, cols, 2);
    fill_softmax(a, rng, 8.0, false);
    for (std::size_t i = 0; i < 5 * cols; ++i) b.x.set_bits(i, a.x.bits(i));
    run_softmax(k(), a, false);
    run_softmax(k(), b, true);
    for (std::size_t i = 0; i < 5 * cols; ++i) {
      ASSERT_EQ(a.y.bits(i), b.x.bits(i)) << "element " << i;
    }
  }
}

/// The exp of every SIMD path is bit-identical to the scalar exp_f32 (math.hpp). Checked through outputs whose bits
/// follow from the exps alone:
///   * f32-accumulating modes: 2-column rows. Then s = e0 + e1 rounded once whatever the summation order (the
///     padding adds +0), so y_j = round_storage(fl(e_j / fl(e0 + e1))) with e_j = exp_f32(t_j), t_j = x_j (naive)
///     or fl(x_j - m) (stable), predicted bit for bit with the scalar exp_f32. The rows sweep x0 over [-104, 89]
///     (naive) or t over [-104, 0] (stable), with x1 a little below x0 so that both outputs depend on both exps.
///   * fp16 modes: every finite fp16 value up to 11.0859375 in a row [h, 0] (and [h, -h]), against the model,
///     which uses the scalar exp_f16.
TEST_P(SoftmaxTest, SimdExpMatchesScalarExpBitForBit) {
  const DType t = storage();
  if (fp16_mode(k())) {
    std::vector<std::uint16_t> hs;
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const std::uint16_t h = std::uint16_t(b);
      if ((h & 0x7C00) == 0x7C00) continue;
      if (test::decode_f16(h) <= 11.0859375 && (stable() || test::decode_f16(h) > -11.0)) hs.push_back(h);
    }
    SoftmaxCase c(t, hs.size(), 2, 1);
    for (std::size_t r = 0; r < hs.size(); ++r) {
      c.x.set_bits(2 * r, hs[r]);
      c.x.set_bits(2 * r + 1, r % 2 == 0 ? 0 : (hs[r] ^ 0x8000u));
    }
    SCOPED_TRACE(fmt::format("kernel {} {} rows of 2", k().name, hs.size()));
    run_softmax(k(), c);
    return;
  }
  const std::uint64_t seed = test::case_seed(0xE4, std::uint64_t(k().op));
  SCOPED_TRACE(fmt::format("kernel {} seed=0x{:016X}", k().name, seed));
  test::Rng rng(seed);
  const std::size_t rows = 20000;
  SoftmaxCase c(t, rows, 2, 3);
  for (std::size_t r = 0; r < rows; ++r) {
    const double x0 = stable() ? rng.uniform(-50, 50) : -104.0 + 193.0 * double(r) / double(rows);
    const double x1 = stable() ? x0 - 104.0 * double(r) / double(rows) : x0 - rng.uniform(0.0, 3.0);
    c.x.set(2 * r, x0);
    c.x.set(2 * r + 1, x1);
  }
  k().softmax({rows, 2, c.x.data(), c.y.data()});
  EXPECT_EQ(c.y.guard_damage(), "");
  std::size_t bad = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float x0 = float(c.x.value(2 * r)), x1 = float(c.x.value(2 * r + 1));
    const float m = stable() ? std::max(x0, x1) : 0.0f;
    const float e0 = exp_f32(x0 - m), e1 = exp_f32(x1 - m);
    const float s = e0 + e1;
    for (int j = 0; j < 2; ++j) {
      const float q = (j == 0 ? e0 : e1) / s;
      std::uint32_t want = store_bits(t, double(q));
      if (k().isa == Isa::avx512bf16 && std::fabs(q) < 0x1p-126f) want = 0;  // vcvtneps2bf16 flushes
      const std::uint32_t got = c.y.bits(2 * r + std::size_t(j));
      if (got == want || (std::isnan(q) && std::isnan(c.y.value(2 * r + std::size_t(j))))) continue;
      if (bad++ < 5) {
        ADD_FAILURE() << fmt::format("row {} x=({:a}, {:a}) y{}: got {}, predicted from exp_f32 {}", r, x0, x1, j,
                                     hex_bits(t, got), hex_bits(t, want));
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

/// docs/numerics.md's exp boundaries, as each path meets them. Expected per element: N = NaN, 0 = +0, f = finite and
/// not negative (the row then sums to 1 within 1%).
///   * fp16 modes, naive: exp_f16(11.09375) = inf, so s = inf: y = NaN there (inf/inf) and +0 elsewhere; at
///     11.0859375 (exp = 65248) the row stays finite; two of them overflow the fp16 SUM (65248 + 65248 = inf) and
///     every y is +0. The stable softmax stays finite on all of these.
///   * f16_f32acc naive: no overflow at 11.09375 (the exp is in f32); it overflows in f32 from 88.72284: the fp16
///     inputs 88.6875 (finite) and 88.75 (NaN).
///   * f32 naive: 0x42B17217 (88.72283) finite, 0x42B17218 (88.72284) NaN.
///   * bf16 naive: 88.5 finite, 89 NaN; bf16 (and f32) stable: rows of ±1e30 stay finite (f32's range).
TEST_P(SoftmaxTest, PinnedOverflowFacts) {
  struct Case {
    std::vector<double> x;
    const char* naive;  // expected pattern of the naive softmax; the stable one is finite everywhere
  };
  std::vector<Case> cases;
  const double f32_below = double(std::bit_cast<float>(0x42B17217u));
  const double f32_at = double(std::bit_cast<float>(0x42B17218u));
  switch (k().mode) {
    case Mode::f16:
    case Mode::f16_model:
      cases = {{{11.09375, 0, 1, -2}, "N000"},
               {{11.0859375, 0, 1, -2}, "ffff"},
               {{11.0859375, 11.0859375}, "00"},
               {{60000, 59000, -60000}, "NN0"}};
      break;
    case Mode::f16_f32acc:
      cases = {{{11.09375, 0, 1, -2}, "ffff"},
               {{88.6875, 0, 1}, "fff"},
               {{88.75, 0, 1}, "N00"},
               {{60000, 59000, -60000}, "NN0"}};
      break;
    case Mode::f32:
      cases = {{{f32_below, 0, 1}, "fff"}, {{f32_at, 0, 1}, "N00"}, {{1e30, -1e30, 9e29}, "N0N"}};
      break;
    case Mode::bf16_f32acc:
      cases = {{{88.5, 0, 1}, "fff"}, {{89.0, 0, 1}, "N00"}, {{1e30, -1e30, 9e29}, "N0N"}};
      break;
    case Mode::fp8_f32acc:
    case Mode::mxfp8_f32acc:
      break;  // not instantiated here (fp8_modes_test)
  }
  for (const Case& cs : cases) {
    SCOPED_TRACE(fmt::format("kernel {} row ({})", k().name, fmt::join(cs.x, ", ")));
    SoftmaxCase c(storage(), 1, cs.x.size(), 2);
    for (std::size_t j = 0; j < cs.x.size(); ++j) c.x.set(j, cs.x[j]);
    run_softmax(k(), c);
    const std::string want = stable() ? std::string(cs.x.size(), 'f') : std::string(cs.naive);
    double sum = 0;
    for (std::size_t j = 0; j < cs.x.size(); ++j) {
      const double y = c.y.value(j);
      const char got = std::isnan(y)                  ? 'N'
                       : (y == 0 && !std::signbit(y)) ? '0'
                       : (std::isfinite(y) && y > 0)  ? 'f'
                                                      : '?';
      // a finite element may underflow to +0 (1/e^88, exp(-1e29)): that is finite too
      EXPECT_TRUE(got == want[j] || (want[j] == 'f' && got == '0'))
          << "y" << j << " = " << hex_bits(storage(), c.y.bits(j)) << ", expected " << want[j];
      sum += y;
    }
    if (want.find_first_not_of('f') == std::string::npos) {
      EXPECT_NEAR(sum, 1.0, 0.01);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, SoftmaxTest, ::testing::ValuesIn(kernels_of({Op::softmax, Op::softmax_naive})),
                         kernel_test_name);

// =================================================================================================================
// xent
// =================================================================================================================

class XentTest : public NnKernelTest {};

struct XentCase {
  std::size_t rows, cols;
  Arr x, probs, dl;
  std::vector<std::int32_t> labels;
  XentCase(DType t, std::size_t r, std::size_t c, std::size_t o)
      : rows(r),
        cols(c),
        x(Arr::input(t, r * c, o & 1)),
        probs(Arr::output(t, r * c, (o >> 1) & 1)),
        dl(Arr::output(t, r * c, (o >> 2) & 1)),
        labels(r, 0) {}
};

/// The softmax kernel of the same mode and path as an xent kernel (the contract: xent's probabilities are exactly
/// what it writes).
const Kernel* softmax_twin(const Kernel& k) {
  std::string name(k.name);
  name.replace(name.find("xent"), 4, "softmax");
  return find_kernel(name);
}

float run_xent(const Kernel& k, XentCase& c, float loss_scale, bool with_probs, bool with_dl) {
  const auto xs = c.x.snapshot();
  const float loss = k.xent({c.rows, c.cols, c.x.data(), c.labels.data(), loss_scale,
                             with_probs ? c.probs.data() : nullptr, with_dl ? c.dl.data() : nullptr});
  EXPECT_TRUE(c.x.unchanged_since(xs)) << "logits were modified";
  EXPECT_EQ(c.probs.guard_damage(), "") << "probs";
  EXPECT_EQ(c.dl.guard_damage(), "") << "dlogits";
  if (!with_probs) {
    EXPECT_EQ(c.probs.bits(0), unwritten_bits(k.storage)) << "probs written although null";
  }
  if (!with_dl) {
    EXPECT_EQ(c.dl.bits(0), unwritten_bits(k.storage)) << "dlogits written although null";
  }
  const std::size_t n = c.rows * c.cols;
  if (fp16_mode(k)) {
    const auto xm = c.x.as_f16();
    std::vector<f16> pm(n), dm(n);
    const float lm =
        f16_model_xent({c.rows, c.cols, xm.data(), c.labels.data(), loss_scale, pm.data(), dm.data()}, k.lanes);
    EXPECT_EQ(test::bits_of(loss), test::bits_of(lm)) << "loss " << test::hex(loss) << ", model " << test::hex(lm);
    if (with_probs) expect_bits_equal("probs", c.probs, pm);
    if (with_dl) expect_bits_equal("dlogits", c.dl, dm);
    return loss;
  }
  if (!with_probs) return loss;
  // probs: bit for bit the same-path softmax, and within the softmax bound of the f64 oracle.
  const Kernel* twin = softmax_twin(k);
  EXPECT_NE(twin, nullptr) << "no softmax kernel for " << k.name;
  if (twin != nullptr) {
    Arr y = Arr::output(k.storage, n, 0);
    twin->softmax({c.rows, c.cols, c.x.data(), y.data()});
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += y.bits(i) != c.probs.bits(i);
    EXPECT_EQ(bad, 0u) << "probs differ from " << twin->name << " in " << bad << " elements";
  }
  double lsum = 0;
  for (std::size_t r = 0; r < c.rows; ++r) {
    std::vector<double> row(c.cols);
    for (std::size_t j = 0; j < c.cols; ++j) row[j] = c.x.value(r * c.cols + j);
    const RowOracle o = softmax_oracle(row, true);
    SCOPED_TRACE(fmt::format("row {}", r));
    expect_all("probs", c.cols, [&](std::size_t j) {
      return within(k.storage, c.probs.value(r * c.cols + j), o.e[j], o.a[j], k.isa == Isa::avx512bf16);
    });
    lsum += -std::log(c.probs.value(r * c.cols + std::size_t(c.labels[r])));
  }
  const double e = lsum / double(c.rows);
  EXPECT_TRUE(within(k.storage, loss, e, 1.05 * (2 * double(c.rows) + 4) * kU * e, false)) << "loss";
  if (with_dl) {
    const float cf = loss_scale / float(c.rows);
    expect_all("dlogits", n, [&](std::size_t i) {
      const std::size_t r = i / c.cols, j = i % c.cols;
      const double g = double(cf) * (c.probs.value(i) - (j == std::size_t(c.labels[r]) ? 1.0 : 0.0));
      return within(k.storage, c.dl.value(i), g, 2.01 * kU * std::fabs(g) + 0x1p-149, k.isa == Isa::avx512bf16);
    });
  }
  return loss;
}

void fill_xent(XentCase& c, test::Rng& rng, double lim, bool specials) {
  for (std::size_t r = 0; r < c.rows; ++r) {
    c.labels[r] = rng.integer(0, int(c.cols) - 1);
    const bool special_row = specials && r % 3 == 1;
    for (std::size_t j = 0; j < c.cols; ++j) {
      c.x.set(r * c.cols + j, draw_value(rng, c.x.type(), lim));
      if (special_row && rng.coin(0.05)) {
        c.x.set_bits(r * c.cols + j, kF16Specials[rng.integer(0, int(std::size(kF16Specials)) - 1)]);
      }
    }
  }
}

TEST_P(XentTest, SizesAroundTheTiles) {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t cols : sizes_for(k())) shapes.push_back({3, cols});
  shapes.push_back({7, 1001});
  std::size_t variant = 0;
  for (auto [rows, cols] : shapes) {
    for (bool specials : {false, true}) {
      if (specials && !fp16_mode(k())) continue;
      for (float ls : {1.0f, 0x1p15f, 0x1p16f}) {
        ++variant;
        const std::uint64_t seed = test::case_seed(rows, cols, variant + 0xE47);
        const bool with_probs = variant % 4 != 3, with_dl = variant % 5 != 4;
        SCOPED_TRACE(
            fmt::format("kernel {} {}x{} specials={} loss_scale={} probs={} dlogits={} offsets {} "
                        "seed=0x{:016X}",
                        k().name, rows, cols, specials, ls, with_probs, with_dl, variant % 8, seed));
        test::Rng rng(seed);
        XentCase c(storage(), rows, cols, variant % 8);
        fill_xent(c, rng, 12.0, specials);
        run_xent(k(), c, ls, with_probs, with_dl);
        if (HasFailure()) return;
      }
    }
  }
}

/// A probability that underflows when stored gives an infinite loss (the contract): a label whose logit is far
/// below the others. fp16: exp(-20) < 2^-25 rounds to 0; f32-acc modes: a gap of 120 underflows f32 too.
TEST_P(XentTest, StoredZeroProbabilityGivesInfiniteLoss) {
  const double gap = fp16_mode(k()) ? 20.0 : 120.0;
  XentCase c(storage(), 2, 3, 5);
  const double xs[6] = {0, -gap, 1, 0.5, 0.25, 0};
  for (std::size_t i = 0; i < 6; ++i) c.x.set(i, xs[i]);
  c.labels = {1, 0};
  SCOPED_TRACE(fmt::format("kernel {} gap {}", k().name, gap));
  const float loss = run_xent(k(), c, 1.0f, true, true);
  EXPECT_EQ(double(loss), kInf) << test::hex(loss);
  EXPECT_EQ(c.probs.value(1), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Registry, XentTest, ::testing::ValuesIn(kernels_of({Op::xent})), kernel_test_name);

// =================================================================================================================
// exp
// =================================================================================================================

/// math.hpp: exp_f32 is within 1 ulp of the correctly rounded f32 exp on [-104, 89] (99.54% exact). Every 997th f32
/// bit pattern of the range (2.25 M inputs, both signs, the subnormal results included); the reference is
/// std::exp in double rounded once to f32 (double rounding can move it only if exp lies within 2^-53 relative
/// of an f32 midpoint, far below the 1-ulp tolerance).
TEST(ExpF32, WithinOneUlpOfCorrectlyRoundedOnAStridedSweep) {
  const std::uint32_t pos_end = std::bit_cast<std::uint32_t>(89.0f);
  const std::uint32_t neg_end = std::bit_cast<std::uint32_t>(-104.0f);
  std::size_t count = 0, exact = 0, bad = 0;
  auto check = [&](std::uint32_t b) {
    const float x = std::bit_cast<float>(b);
    const float got = exp_f32(x);
    const float want = float(std::exp(double(x)));
    ++count;
    const std::int64_t diff = std::int64_t(test::bits_of(got)) - std::int64_t(test::bits_of(want));
    if (diff == 0) {
      ++exact;
    } else if (diff > 1 || diff < -1 || std::isinf(got) != std::isinf(want)) {
      if (bad++ < 5)
        ADD_FAILURE() << "exp_f32(" << test::hex(x) << ") = " << test::hex(got) << ", correctly rounded "
                      << test::hex(want);
    }
  };
  for (std::uint32_t b = 0; b <= pos_end; b += 997) check(b);
  for (std::uint32_t b = 0x80000000u; b <= neg_end; b += 997) check(b);
  check(pos_end);
  check(neg_end);
  EXPECT_EQ(bad, 0u) << bad << " of " << count << " inputs more than 1 ulp off";
  EXPECT_GE(double(exact) / double(count), 0.99) << exact << " of " << count << " correctly rounded";
}

/// The f16 models' own exp, erf and tanh (src/models/model_math.hpp, written apart from the kernels' vector
/// templates) equal halfmap's exp_f32, erf_f32 and tanh_f32, and exp16 equals exp_f16, bit for bit on every fp16
/// input, NaNs included: every value the f16 models give them (softmax's t, GELU's z, u and -z²; erf's own
/// e^(-a²) and tanh's e^(2u) are reached through those). So a kernel and its model compute the same function,
/// each with its own code.
TEST(ModelMath, EqualsHalfmapsFunctionsOnEveryFp16Input) {
  std::size_t bad = 0;
  auto same = [&](const char* what, std::uint16_t h, float got, float want) {
    if (test::bits_of(got) != test::bits_of(want) && bad++ < 5) {
      ADD_FAILURE() << what << "(" << test::hex16(h) << "): model " << test::hex(got) << ", halfmap "
                    << test::hex(want);
    }
  };
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const f16 h{std::uint16_t(b)};
    const float x = to_f32(h);
    same("exp", h.bits, models::exp(x), exp_f32(x));
    same("erf", h.bits, models::erf(x), erf_f32(x));
    same("tanh", h.bits, models::tanh(x), tanh_f32(x));
    same("exp16", h.bits, to_f32(models::exp16(h)), to_f32(exp_f16(h)));
  }
  EXPECT_EQ(bad, 0u);
}

/// vmath.hpp's quotient_by_reciprocal (the f32-acc softmax's division on rows whose quotients are all ≥ 2^-118) has
/// the bits of the true division e/s. The error pattern depends only on the significands of e and s when nothing
/// is subnormal, so: every significand of e against 6 significands of s (1, 1 + ulp, 1 + 2 ulp, all ones, ...),
/// every 7th against 21 more, then random significands of both at the exponents softmax meets (e ≤ s, quotients
/// down to 2^-118). (A standalone AVX-512 run of the same sequence, all 2^23 significands of e against 477 of s,
/// 400 of them random, at 9 pairs of exponents: 3.6e10 quotients, found no difference either.) The kernels' own
/// fast rows are checked bit for bit against the division in SoftmaxTest.SimdExpMatchesScalarExpBitForBit.
TEST(SoftmaxDivision, QuotientByReciprocalEqualsDivision) {
  struct ScalarM {
    using V = float;
    static V mul(V a, V b) { return a * b; }
    static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  };
  std::size_t bad = 0, count = 0;
  auto check = [&](float e, float s) {
    const float got = detail::quotient_by_reciprocal<ScalarM>(e, 1.0f / s, -s), want = e / s;
    ++count;
    if (test::bits_of(got) != test::bits_of(want) && bad++ < 5) {
      ADD_FAILURE() << "e=" << test::hex(e) << " s=" << test::hex(s) << ": " << test::hex(got) << ", division "
                    << test::hex(want);
    }
  };
  std::vector<std::uint32_t> edges = {0x3F800000u, 0x3F800001u, 0x3F800002u, 0x3FFFFFFFu,
                                      0x3FFFFFFEu, 0x3FC00000u, 0x3FAAAAABu, 0x3FB504F3u};
  for (std::uint32_t k = 2; k < 23; k += 2) edges.push_back(0x3F800000u | ((1u << k) - 1));
  for (std::uint32_t k = 1; k < 23; k += 3) edges.push_back(0x3FFFFFFFu ^ ((1u << k) - 1));
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const float s = std::bit_cast<float>(edges[i]) * 4.0f;  // s in [4, 8): quotients of e in [1, 2) near 2^-2
    const std::uint32_t step = i < 6 ? 1 : 7;
    for (std::uint32_t m = 0; m < (1u << 23); m += step) check(std::bit_cast<float>(0x3F800000u | m), s);
  }
  test::Rng rng(test::case_seed(0xD1, 0x5));
  for (int i = 0; i < 4000000; ++i) {
    const float s = std::ldexp(float(rng.uniform(1.0, 2.0)), rng.integer(-58, 60));
    const float e = std::ldexp(float(rng.uniform(1.0, 2.0)), rng.integer(-58, 0));
    if (e / s >= 0x1p-118f) check(std::min(e, s), s);
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << count << " quotients differ from the division";
}

/// softmax_row.hpp's row_range_bits (every SIMD softmax's pass 1: the row's max, min and NaN flag from four integer
/// reductions) against the ordering-key max of row_max_bits, the same keys' min, and isnan, on rows drawn from
/// each storage type's special patterns: ±0, the smallest subnormals, ±1, the largest finite values, ±inf and NaNs
/// of both signs (quiet, signalling, all-ones payload), lengths 1 to 5, every single and pair exhaustively.
template <DType kStorage>
void check_row_range() {
  using U = typename detail::StorageBits<kStorage>::U;
  using S = std::make_signed_t<U>;
  struct Tag {};
  constexpr int kBits = int(sizeof(U)) * 8;
  constexpr U kSign = U(U(1) << (kBits - 1)), kInf = detail::StorageBits<kStorage>::kAbsInf;
  const U one = kStorage == DType::f32 ? 0x3F800000u : kStorage == DType::f16 ? 0x3C00u : 0x3F80u;
  std::vector<U> pos = {0, 1, 2, one, U(one + 1), U(kInf - 1), kInf, U(kInf + 1), U(kInf | (kInf >> 1)), U(kSign - 1)};
  std::vector<U> pats;
  for (U p : pos) {
    pats.push_back(p);
    pats.push_back(U(p | kSign));
  }
  auto key = [](U u) { return detail::OrderKey<Tag, kStorage, U>::of(static_cast<S>(u)); };
  auto is_nan = [&](U u) { return U(u & ~kSign) > kInf; };
  std::size_t rows = 0;
  auto check = [&](const std::vector<U>& row) {
    ++rows;
    const auto got = detail::row_range_bits<Tag, kStorage>(row.data(), row.size());
    const bool nan = std::any_of(row.begin(), row.end(), is_nan);
    ASSERT_EQ(got.nan, nan) << "row " << fmt::format("{:#x}", fmt::join(row, " "));
    if (nan) return;
    U kmin = row[0];
    for (U u : row) kmin = key(u) < key(kmin) ? u : kmin;
    ASSERT_EQ(got.max, (detail::row_max_bits<Tag, kStorage>(row.data(), row.size())))
        << "row " << fmt::format("{:#x}", fmt::join(row, " "));
    ASSERT_EQ(got.min, kmin) << "row " << fmt::format("{:#x}", fmt::join(row, " "));
  };
  for (U a : pats) {
    check({a});
    for (U b : pats) check({a, b});
  }
  test::Rng rng(test::case_seed(0xA7, kBits));
  for (int i = 0; i < 20000; ++i) {
    std::vector<U> row(std::size_t(rng.integer(1, 5)));
    for (U& u : row)
      u = rng.coin(0.8) ? pats[std::size_t(rng.integer(0, int(pats.size()) - 1))]
                        : U(std::uint32_t(rng.integer(0, (1 << 16) - 1)) << (kBits - 16));
    check(row);
  }
  EXPECT_GT(rows, 20000u);
}

TEST(SoftmaxRowRange, MaxMinAndNanMatchTheOrderingKeys) {
  check_row_range<DType::f32>();
  check_row_range<DType::f16>();
  check_row_range<DType::bf16>();
}

TEST(ExpF32, SpecialValuesAndRangeEnds) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(test::bits_of(exp_f32(0.0f)), test::bits_of(1.0f));
  EXPECT_EQ(test::bits_of(exp_f32(-0.0f)), test::bits_of(1.0f));
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(test::bits_of(exp_f32(-inf)), 0u);
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  // math.hpp: x >= 88.72284 (0x42B17218) gives +inf; x <= -103.97208 (0xC2CFF1B5) gives +0; their neighbours not.
  EXPECT_EQ(exp_f32(std::bit_cast<float>(0x42B17218u)), inf);
  EXPECT_TRUE(std::isfinite(exp_f32(std::bit_cast<float>(0x42B17217u))));
  EXPECT_EQ(test::bits_of(exp_f32(std::bit_cast<float>(0xC2CFF1B5u))), 0u);
  EXPECT_EQ(test::bits_of(exp_f32(std::bit_cast<float>(0xC2CFF1B4u))), 1u);  // the smallest subnormal
  EXPECT_EQ(exp_f32(1000.0f), inf);
  EXPECT_EQ(test::bits_of(exp_f32(-1000.0f)), 0u);
}

/// math.hpp: over all 63488 finite fp16 inputs exp_f16 equals the correctly rounded fp16 exp
/// (test::reference_to_f16(std::exp(double)), independent of half.hpp) except at exactly 0x1.de4p-8 and
/// 0x1.73cp-6, where it is 1 ulp above. ±inf and NaN as the f32 exp.
TEST(ExpF16, AllFiniteInputsCorrectlyRoundedButTheTwoStated) {
  const std::set<std::uint16_t> stated = {to_f16(0x1.de4p-8).bits, to_f16(0x1.73cp-6).bits};
  std::set<std::uint16_t> off_by_one;
  std::size_t bad = 0, finite = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const std::uint16_t h = std::uint16_t(b);
    if ((h & 0x7C00) == 0x7C00) continue;
    ++finite;
    const std::uint16_t got = exp_f16(f16{h}).bits;
    const std::uint16_t want = test::reference_to_f16(std::exp(test::decode_f16(h)));
    if (got == want) continue;
    if (got == want + 1) {
      off_by_one.insert(h);
      if (stated.count(h) != 0) continue;
    }
    if (bad++ < 5) {
      ADD_FAILURE() << "exp_f16(" << test::hex16(h) << " = " << test::decode_f16(h) << ") = " << test::hex16(got)
                    << ", correctly rounded " << test::hex16(want);
    }
  }
  EXPECT_EQ(finite, 63488u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(off_by_one, stated) << "the 1-ulp exceptions must be exactly the two stated in math.hpp";
  EXPECT_EQ(exp_f16(f16{0x7C00}).bits, 0x7C00);
  EXPECT_EQ(exp_f16(f16{0xFC00}).bits, 0x0000);
  EXPECT_TRUE(is_nan(exp_f16(f16{0x7E00})));
  EXPECT_TRUE(is_nan(exp_f16(f16{0xFD01})));
}

/// 11.0859375 -> 65248 (0x7BF7), and 11.09375 is the first fp16 input whose exp is inf (ln 65520 = 11.0901): every
/// finite input below it gives a finite result, every one from it up gives inf. Inputs below -17.33 give +0.
TEST(ExpF16, OverflowAndUnderflowBoundaries) {
  EXPECT_EQ(to_f32(exp_f16(to_f16(11.0859375))), 65248.0f);
  EXPECT_EQ(exp_f16(to_f16(11.09375)).bits, 0x7C00);
  std::uint16_t first_inf = 0;
  for (std::uint16_t h = 0; h < 0x7C00; ++h) {  // positive finite values in increasing order
    if (is_inf(exp_f16(f16{h}))) {
      if (first_inf == 0) first_inf = h;
    } else {
      ASSERT_EQ(first_inf, 0) << "finite exp at " << test::hex16(h) << " after inf at " << test::hex16(first_inf);
    }
  }
  EXPECT_EQ(test::decode_f16(first_inf), 11.09375);
  for (std::uint16_t h = 0x8000; h < 0xFC00; ++h) {
    const double v = test::decode_f16(h);
    if (v < -17.33) {
      EXPECT_EQ(exp_f16(f16{h}).bits, 0) << test::hex16(h);
    }
    if (v > -17.32) {
      EXPECT_NE(exp_f16(f16{h}).bits, 0) << test::hex16(h);
    }
  }
}

// =================================================================================================================
// gradients by finite differences
// =================================================================================================================

/// mse: L(p) = loss_scale · mean((p - y)²) in f64 is quadratic in each p_i, so the central difference
/// (L(p + h e_i) - L(p - h e_i)) / 2h is its derivative up to f64 rounding: |L| <= S = loss_scale Σ d²/n, each
/// evaluation rounds by at most (n + 3) 2^-53 S, so the difference errs by (n + 3) 2^-53 S / h. The f32 kernels'
/// dp must match it within that plus their own 2.01 u |g|. A missing factor 2, a sign error or c = loss_scale/n
/// (instead of 2·loss_scale/n) fails. Every enabled f32 kernel (the reference first).
TEST(NnGradient, F32MseGradientMatchesCentralDifferences) {
  std::size_t ran = 0;
  for (const Kernel& k : kernels()) {
    if (k.op != Op::mse || k.mode != Mode::f32 || !kernel_enabled(k)) continue;
    ++ran;
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{37}}) {
      for (float ls : {1.0f, 8.0f}) {
        const std::uint64_t seed = test::case_seed(n, std::uint64_t(ls), 0xFD1);
        SCOPED_TRACE(fmt::format("kernel {} n={} loss_scale={} seed=0x{:016X}", k.name, n, ls, seed));
        test::Rng rng(seed);
        MseCase c(DType::f32, n, 0);
        std::vector<double> p(n), y(n);
        for (std::size_t i = 0; i < n; ++i) {
          c.p.set(i, rng.uniform(-2, 2));
          c.y.set(i, rng.uniform(-2, 2));
          p[i] = c.p.value(i);
          y[i] = c.y.value(i);
        }
        k.loss({n, c.p.data(), c.y.data(), ls, c.dp.data()});
        auto L = [&](const std::vector<double>& pv) {
          double s = 0;
          for (std::size_t i = 0; i < n; ++i) s += (pv[i] - y[i]) * (pv[i] - y[i]);
          return double(ls) * s / double(n);
        };
        const double h = 0x1p-10, S = L(p);
        for (std::size_t i = 0; i < n; ++i) {
          std::vector<double> pp = p, pm = p;
          pp[i] += h;
          pm[i] -= h;
          const double fd = (L(pp) - L(pm)) / (2 * h);
          const double tol = 2.01 * kU * std::fabs(fd) + double(n + 3) * 0x1p-52 * (S + 1) / h;
          EXPECT_NEAR(c.dp.value(i), fd, tol) << "dp[" << i << "]";
        }
      }
    }
  }
  EXPECT_GE(ran, 1u);
}

/// xent: L(x) = loss_scale · mean_r(logsumexp(x_r) - x_r[label_r]) in f64. Central differences with h = 2^-12 err
/// by h²/6 · max|∂³L| <= h² loss_scale/rows (the third derivatives of logsumexp are below 1) plus the f64 rounding
/// (≈ cols 2^-52 |L| / h); the kernel's dlogits carries the f32 softmax bound of the policy (<= (2 cols + 40) u
/// relative for |t| <= 16) and the product's 2u: so |dlogits - fd| <= c (h² + (2 cols + 64) u) + 2^-40 (L + 1)/h.
/// Probabilities of a wrong sign convention (onehot - p), a wrong c (loss_scale instead of loss_scale/rows) or a
/// gradient taken against the unstable row fail by orders of magnitude.
TEST(NnGradient, F32XentGradientMatchesCentralDifferences) {
  std::size_t ran = 0;
  for (const Kernel& k : kernels()) {
    if (k.op != Op::xent || k.mode != Mode::f32 || !kernel_enabled(k)) continue;
    ++ran;
    for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {3, 5}, {2, 17}, {4, 9}}) {
      for (float ls : {1.0f, 8.0f}) {
        const std::uint64_t seed = test::case_seed(rows, cols, std::uint64_t(ls) + 0xFD2);
        SCOPED_TRACE(fmt::format("kernel {} {}x{} loss_scale={} seed=0x{:016X}", k.name, rows, cols, ls, seed));
        test::Rng rng(seed);
        XentCase c(DType::f32, rows, cols, 0);
        std::vector<double> x(rows * cols);
        for (std::size_t i = 0; i < x.size(); ++i) {
          c.x.set(i, rng.uniform(-4, 4));
          x[i] = c.x.value(i);
        }
        for (std::size_t r = 0; r < rows; ++r) c.labels[r] = rng.integer(0, int(cols) - 1);
        k.xent({rows, cols, c.x.data(), c.labels.data(), ls, nullptr, c.dl.data()});
        auto L = [&](const std::vector<double>& xv) {
          double s = 0;
          for (std::size_t r = 0; r < rows; ++r) {
            double m = -kInf;
            for (std::size_t j = 0; j < cols; ++j) m = std::max(m, xv[r * cols + j]);
            double z = 0;
            for (std::size_t j = 0; j < cols; ++j) z += std::exp(xv[r * cols + j] - m);
            s += m + std::log(z) - xv[r * cols + std::size_t(c.labels[r])];
          }
          return double(ls) * s / double(rows);
        };
        const double h = 0x1p-12, l0 = L(x), cc = double(ls) / double(rows);
        for (std::size_t i = 0; i < x.size(); ++i) {
          std::vector<double> xp = x, xm = x;
          xp[i] += h;
          xm[i] -= h;
          const double fd = (L(xp) - L(xm)) / (2 * h);
          const double tol = cc * (h * h + double(2 * cols + 64) * kU) + 0x1p-40 * (l0 + 1) / h;
          EXPECT_NEAR(c.dl.value(i), fd, tol) << "dlogits[" << i << "]";
        }
      }
    }
  }
  EXPECT_GE(ran, 1u);
}

}  // namespace
}  // namespace halfmap
