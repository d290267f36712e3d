// Every dense kernel of the registry (ops dense_fwd and dense_bwd), parameterised over kernels() and named by
// kernel, so a dense kernel cannot exist untested. A kernel whose ISA may not run here is skipped with the reason,
// never called.
//
// Shapes: M, N and K from 1 up, around each kernel's micro-tile (kMr × kNr, the k block kKc, k pairs of
// vdpbf16ps), across the m block kMc and the n block kNc, and one larger odd shape; see shapes_for(). Every call
// runs on inputs offset by zero or one element from a 64-byte boundary, with poisoned elements (NaN) around every
// input (a kernel that uses them produces NaN and fails) and guard values around every output (a kernel that
// writes outside its extent fails), and checks that the inputs are unchanged.
//
// Tolerance policy (docs/contributing.md, tolerances; docs/numerics.md), per precision mode:
//   * f16, f16_model: bit-exact against f16_model_dense_fwd/bwd(args, k.fma), the per-operation fp16 model with
//     the kernel's fused multiply-add flavour, compared as bit patterns (indices and hex printed on failure). The
//     inputs hold fp16 subnormals and a few larger values: no path may flush, no path may reorder.
//   * f16_f32acc with a fixed f32 order (FixedOrder::f32, neonfhm): also bit-exact against
//     f32acc_model_dense_fwd / f32acc_model_dense_bwd(args); bf16_f32acc in BFDotAdd's order
//     (FixedOrder::bfdot, neonbf16's BFMMLA) against bfdot_model_dense_fwd / bfdot_model_dense_bwd(args).
//   * f32, f16_f32acc, bf16_f32acc: against E, the exact result computed in f64 from the same stored inputs (each
//     product of two stored values is exact in f64; 24 + 24 <= 53 significant bits), with
//         |acc - E| <= A = 2 r u S + r 2^-52 S + r 2^-149 [+ F],   u = 2^-24,   S = Σ_p |x_ip w_pj| (+ |b_j|),
//     where acc is the f32 value before the output rounding and r = K + 1 (K + 2 with a bias) bounds the number
//     of f32 roundings along any path to it (K products or FMAs, the bias addition, one spare; for the backward
//     outputs K is their inner dimension: N for dX, M for dW and db). Why 2: in any order of summation
//     (sequential, several accumulators, k blocks reloaded exactly from an f32 buffer) every term passes through
//     at most r roundings, so |acc - E| <= gamma_r S with gamma_r = r u / (1 - r u) <= 2 r u while r u <= 1/2
//     (Higham, Accuracy and Stability of Numerical Algorithms, 3.1 and 4.2). The second term is the f64 oracle's
//     own rounding; the third covers f32 underflow (each rounding in the subnormal range errs by at most 2^-150
//     absolute). F is the flush term of vdpbf16ps on avx512bf16 and of BFDotAdd on neonbf16 only (whose round to
//     odd errs by less than 1 ulp, 2u, per rounding: at most r of them, as above): it treats subnormal inputs, products
//     and results as zero (DAZ/FTZ by design), which loses at most 2^-126 (max|x| + max|w| + 2) per k step, so F = (K +
//     1) 2^-126 (max|x| + max|w| + 2). The bf16 inputs do hold subnormals, so the flush is exercised. The stored output
//     is the round-to-nearest image of act(acc) in the storage type, and rounding and relu are monotonic, so the output
//     must lie in [round(act(E - A)), round(act(E + A))]. This is the bound |got - E| <= A + half an ulp of the storage
//     type at |E| (2^-11 relative for fp16, 2^-8 for bf16, 0 for f32), written so that it is exact at ulp boundaries
//     and admits fp16 overflow to inf exactly when E - A rounds to inf.
//   * inf and NaN: matched exactly, never "within tolerance": where the f64 oracle (IEEE semantics: inf·0 = NaN,
//     inf - inf = NaN, relu(NaN) = NaN, relu(-inf) = +0) is NaN the output must be NaN, where it is ±inf the output
//     must be the same infinity.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"  // paths::dense_blockings
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::load_exact;
using test::round_to;
using test::store_bits;

using test::guard_bits;
using test::hex_bits;
using test::inf_bits;
using test::nan_bits;
using test::sign_bit;
using test::unwritten_bits;

constexpr double kU = 0x1p-24;
constexpr double kInf = std::numeric_limits<double>::infinity();

bool fp16_accumulating(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

// ---- storage ---------------------------------------------------------------------------------------------------

/// A rows × cols row-major matrix, a GuardedArray (test_util.hpp) of kGuard elements each side: every element
/// outside the matrix holds `outside`, NaN for inputs, a guard pattern for outputs.
class Matrix : public test::GuardedArray {
 public:
  static constexpr std::size_t kGuard = 64;

  Matrix(DType t, std::size_t rows, std::size_t cols, std::size_t offset, std::uint32_t outside)
      : GuardedArray(t, rows * cols, kGuard, offset, outside), rows_(rows), cols_(cols) {}

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }

  void set(std::size_t r, std::size_t c, double v) { GuardedArray::set(r * cols_ + c, v); }
  void set_bits(std::size_t r, std::size_t c, std::uint32_t bits) { GuardedArray::set_bits(r * cols_ + c, bits); }
  void fill_bits(std::uint32_t bits) {
    for (std::size_t i = 0; i < size(); ++i) GuardedArray::set_bits(i, bits);
  }
  std::uint32_t bits(std::size_t r, std::size_t c) const { return GuardedArray::bits(r * cols_ + c); }
  std::uint32_t bits_at(std::size_t i) const { return GuardedArray::bits(i); }
  double value(std::size_t r, std::size_t c) const { return load_exact(type(), bits(r, c)); }
  /// Every element's exact value, row-major (decoding once keeps the f64 oracle cheap).
  std::vector<double> values() const {
    std::vector<double> v(size());
    for (std::size_t i = 0; i < size(); ++i) v[i] = load_exact(type(), bits_at(i));
    return v;
  }
  double max_abs() const {
    double m = 0;
    for (std::size_t i = 0; i < size(); ++i) m = std::max(m, std::fabs(load_exact(type(), bits_at(i))));
    return m;
  }

 private:
  std::size_t rows_, cols_;
};

Matrix input_matrix(DType t, std::size_t rows, std::size_t cols, std::size_t offset) {
  return Matrix(t, rows, cols, offset, nan_bits(t));
}
Matrix output_matrix(DType t, std::size_t rows, std::size_t cols, std::size_t offset) {
  Matrix m(t, rows, cols, offset, guard_bits(t));
  m.fill_bits(unwritten_bits(t));
  return m;
}

// ---- random values ---------------------------------------------------------------------------------------------

/// Mostly uniform in [-1, 1]; one in eight a subnormal of the storage type (fp16: k·2^-24; bf16 and f32: in the
/// f32 subnormal range, which bf16 shares), one in 32 a larger value ±[8, 64], one in 32 a signed zero.
double draw_value(test::Rng& rng, DType t) {
  const double r = rng.uniform(0.0, 1.0);
  const double sign = rng.coin(0.5) ? -1.0 : 1.0;
  if (r < 0.125) {
    if (t == DType::f16) return sign * std::ldexp(double(rng.integer(1, 1023)), -24);
    return sign * std::ldexp(rng.uniform(0.0, 1.0), -127);
  }
  if (r < 0.15625) return sign * rng.uniform(8.0, 64.0);
  if (r < 0.1875) return sign * 0.0;
  return rng.uniform(-1.0, 1.0);
}

void fill_random(Matrix& m, test::Rng& rng) {
  for (std::size_t r = 0; r < m.rows(); ++r) {
    for (std::size_t c = 0; c < m.cols(); ++c) m.set(r, c, draw_value(rng, m.type()));
  }
}

// ---- tiles and shapes ------------------------------------------------------------------------------------------

/// The blocking of each kernel: its path's, as its traits declare it (paths::dense_blockings(), from the gemm.hpp
/// traits in src/kernels/<isa>/kernels.cpp: kMr, kNr, kKc, kMc, kNc; avx512bf16 packs k in pairs, neonbf16 in
/// fours, which the odd and even K of shapes_for() cover). The kernels without one are plain loops without blocks
/// (ref; neonfhm, row by row, 8 columns at a time; sve, four rows at a time, one vector of columns): small numbers,
/// chosen here, give them a spread of shapes across those steps.
struct Tiling {
  std::size_t mr, nr, kc, mc, nc = 4096;
};

Tiling tiling_of(const Kernel& k) {
  for (const paths::DenseBlocking& b : paths::dense_blockings()) {
    if (b.isa == k.isa && b.mode == k.mode) return {b.mr, b.nr, b.kc, b.mc, b.nc};
  }
  return {4, 16, 32, 64};
}

struct Shape {
  std::size_t m, n, k;
  friend bool operator<(const Shape& a, const Shape& b) { return std::tie(a.k, a.m, a.n) < std::tie(b.k, b.m, b.n); }
};

/// M and N at 1, tile - 1, tile, tile + 1 and 2 tile + 3 (odd) against small K (1, 2, 3 and 7: odd and even for
/// the k pairs of vdpbf16ps); K at kKc - 1, kKc, kKc + 1 and 2 kKc + 3 (one, two and three k blocks) against a few
/// (M, N) pairs; M and N at kKc - 1, kKc + 1 and 2 kKc + 3 (the backward pass's inner dimensions); M = kMc + 1
/// (crosses the m block), N = kNc + 1 (crosses the n block), and 130 × 97 × 300.
/// The same list on every target: the whole binary takes about 2 s natively on x86-64 and 12 s under qemu-aarch64
/// (the f16 model and the f64 oracle cost O(MNK) per case, and the largest case is 3.8 M multiply-adds), so there
/// is no need for a smaller list under emulation.
std::vector<Shape> shapes_for(const Tiling& t) {
  std::set<Shape> s;
  auto add = [&](std::size_t m, std::size_t n, std::size_t k) {
    if (m > 0 && n > 0 && k > 0) s.insert({m, n, k});
  };
  const std::size_t ms[] = {1, t.mr - 1, t.mr, t.mr + 1, 2 * t.mr + 3};
  const std::size_t ns[] = {1, t.nr - 1, t.nr, t.nr + 1, 2 * t.nr + 3};
  for (std::size_t m : ms) {
    for (std::size_t n : ns) {
      for (std::size_t k : {1, 2, 3, 7}) add(m, n, k);
    }
  }
  for (std::size_t k : {t.kc - 1, t.kc, t.kc + 1, 2 * t.kc + 3}) {
    add(1, 1, k);
    add(t.mr + 1, t.nr - 1, k);
    add(t.mr, t.nr, k);
    add(2 * t.mr + 3, 2 * t.nr + 3, k);
  }
  // The backward pass sums over M (dW, db) and over N (dX): M and N beyond the k block too.
  for (std::size_t d : {t.kc - 1, t.kc + 1, 2 * t.kc + 3}) {
    add(d, t.nr + 1, 3);
    add(t.mr + 1, d, 3);
  }
  add(t.mc + 1, t.nr + 1, 3);
  add(t.mr + 1, t.nc + 1, 2);
  add(130, 97, 300);
  return {s.begin(), s.end()};
}

// ---- the f64 oracle --------------------------------------------------------------------------------------------

struct Exact {
  double value = 0;  // the exact result (up to the f64 rounding the bound accounts for); IEEE inf and NaN
  double abs = 0;    // S: Σ |terms|
};

/// out(r, c) = Σ_p a(r, p)·b(p, c) in f64 with IEEE semantics, and Σ |a(r, p)·b(p, c)|.
template <class A, class B>
std::vector<Exact> exact_gemm(std::size_t rows, std::size_t cols, std::size_t inner, A a, B b) {
  std::vector<Exact> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      Exact e;
      for (std::size_t p = 0; p < inner; ++p) {
        const double t = a(r, p) * b(p, c);
        e.value += t;
        e.abs += std::fabs(t);
      }
      out[r * cols + c] = e;
    }
  }
  return out;
}

double apply_act(Act act, double v) { return act == Act::relu && v < 0 ? 0.0 : v; }  // NaN passes through

const char* act_name(Act act) { return act == Act::relu ? "relu" : "identity"; }

/// Checks an output of a f32-accumulating kernel against the exact pre-activation values, per the policy at the
/// top of this file. `roundings` is r (K + 2 with a bias, K + 1 without), `flush` the term F (0 but on
/// avx512bf16). Prints the first few failing elements.
void expect_within_bound(const char* what, const Matrix& got, const std::vector<Exact>& ex, std::size_t roundings,
                         double flush, Act act) {
  const DType t = got.type();
  const double r = double(roundings);
  int failures = 0;
  std::string report;
  for (std::size_t i = 0; i < got.rows(); ++i) {
    for (std::size_t j = 0; j < got.cols(); ++j) {
      const Exact& e = ex[i * got.cols() + j];
      const double g = got.value(i, j);
      const std::uint32_t gbits = got.bits(i, j);
      if (std::isnan(e.value) || std::isinf(e.value)) {
        const double want = apply_act(act, e.value);  // relu(-inf) = +0, relu(NaN) = NaN
        const bool ok = std::isnan(want) ? std::isnan(g) : (g == want && std::signbit(g) == std::signbit(want));
        if (!ok && failures++ < 5) {
          report += fmt::format("\n  {}[{}, {}] = {} ({}); exact {}: must match exactly", what, i, j,
                                hex_bits(t, gbits), g, want);
        }
        continue;
      }
      const double a = 2 * r * kU * e.abs + r * 0x1p-52 * e.abs + r * 0x1p-149 + flush;
      const double lo = round_to(t, apply_act(act, e.value - a));
      const double hi = round_to(t, apply_act(act, e.value + a));
      if (!(lo <= g && g <= hi) && failures++ < 5) {  // NaN fails
        report += fmt::format(
            "\n  {}[{}, {}] = {} ({:a}); exact {:a} = {}, |got - exact| = {:.3g}, A = {:.3g} (S = {:.6g}), "
            "allowed [{:a}, {:a}]",
            what, i, j, hex_bits(t, gbits), g, e.value, e.value, std::fabs(g - e.value), a, e.abs, lo, hi);
      }
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size() << " elements out of bounds ("
                         << act_name(act) << "):" << report;
}

/// Bit-exact comparison with the f16 model's output.
void expect_bits_equal(const char* what, const Matrix& got, const std::vector<f16>& want) {
  int failures = 0;
  std::string report;
  for (std::size_t i = 0; i < got.rows(); ++i) {
    for (std::size_t j = 0; j < got.cols(); ++j) {
      const std::uint16_t g = std::uint16_t(got.bits(i, j));
      const std::uint16_t w = want[i * got.cols() + j].bits;
      if (g != w && failures++ < 5) {
        report += fmt::format("\n  {}[{}, {}]: got {} ({}), model {} ({})", what, i, j, test::hex16(g),
                              test::decode_f16(g), test::hex16(w), test::decode_f16(w));
      }
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size()
                         << " elements differ from the f16 model:" << report;
}

/// Where the f64 oracle is NaN or ±inf, the output must be NaN or the same infinity (every mode, fp16 modes
/// included: the inputs of the special-value tests keep every partial sum far from fp16's overflow).
void expect_specials_match(const char* what, const Matrix& got, const std::vector<Exact>& ex, Act act) {
  int failures = 0;
  std::string report;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = apply_act(act, ex[i].value);
    const double g = load_exact(got.type(), got.bits_at(i));
    if (std::isfinite(want) && std::isfinite(g)) continue;
    const bool ok = std::isnan(want) ? std::isnan(g) : (g == want && std::signbit(g) == std::signbit(want));
    if (!ok && failures++ < 5) {
      report += fmt::format("\n  {}[{}, {}]: got {} ({}), f64 oracle {}", what, i / got.cols(), i % got.cols(),
                            hex_bits(got.type(), got.bits_at(i)), g, want);
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " elements where inf/NaN differ from the f64 oracle ("
                         << act_name(act) << "):" << report;
}

double bf16_flush_term(const Kernel& k, std::size_t inner, double max_a, double max_b) {
  if (k.isa != Isa::avx512bf16 && k.isa != Isa::neonbf16) return 0.0;  // vdpbf16ps, BFDotAdd
  return double(inner + 1) * 0x1p-126 * (max_a + max_b + 2.0);
}

// ---- forward ---------------------------------------------------------------------------------------------------

struct Offsets {
  std::size_t x, w, b, y;
};
/// Four patterns of misalignment by one element, chosen by a case index: all aligned, all misaligned, and two
/// mixtures.
Offsets offsets_for(std::size_t i) {
  switch (i % 4) {
    case 0:
      return {0, 0, 0, 0};
    case 1:
      return {1, 1, 1, 1};
    case 2:
      return {1, 0, 1, 0};
    default:
      return {0, 1, 0, 1};
  }
}

struct FwdCase {
  Matrix x, w, b, y;
  std::size_t m, n, k;
  FwdCase(DType t, std::size_t m_, std::size_t n_, std::size_t k_, Offsets o)
      : x(input_matrix(t, m_, k_, o.x)),
        w(input_matrix(t, k_, n_, o.w)),
        b(input_matrix(t, 1, n_, o.b)),
        y(output_matrix(t, m_, n_, o.y)),
        m(m_),
        n(n_),
        k(k_) {}
};

/// Y exact pre-activation (with the bias when `bias`).
std::vector<Exact> exact_fwd(const FwdCase& c, bool bias) {
  const std::vector<double> x = c.x.values(), w = c.w.values();
  auto ex = exact_gemm(
      c.m, c.n, c.k, [&](std::size_t i, std::size_t p) { return x[i * c.k + p]; },
      [&](std::size_t p, std::size_t j) { return w[p * c.n + j]; });
  if (bias) {
    for (std::size_t i = 0; i < c.m; ++i) {
      for (std::size_t j = 0; j < c.n; ++j) {
        ex[i * c.n + j].value += c.b.value(0, j);
        ex[i * c.n + j].abs += std::fabs(c.b.value(0, j));
      }
    }
  }
  return ex;
}

std::vector<f16> model_fwd(const Kernel& k, const FwdCase& c, bool bias, Act act) {
  std::vector<f16> y(c.m * c.n);
  const DenseArgs args{c.m, c.n, c.k, c.x.data(), c.w.data(), bias ? c.b.data() : nullptr, y.data(), act};
  f16_model_dense_fwd(args, k.fma);
  return y;
}

/// Calls the kernel on the case and checks everything: inputs untouched, output guards intact, and the output
/// against the model (fp16 modes) or the f64 oracle.
void run_and_check_fwd(const Kernel& k, FwdCase& c, bool bias, Act act) {
  const auto xs = c.x.snapshot(), ws = c.w.snapshot(), bs = c.b.snapshot();
  c.y.fill_bits(unwritten_bits(c.y.type()));
  const DenseArgs args{c.m, c.n, c.k, c.x.data(), c.w.data(), bias ? c.b.data() : nullptr, c.y.data(), act};
  k.dense(args);
  EXPECT_TRUE(c.x.unchanged_since(xs)) << "the kernel wrote to X or next to it";
  EXPECT_TRUE(c.w.unchanged_since(ws)) << "the kernel wrote to W or next to it";
  EXPECT_TRUE(c.b.unchanged_since(bs)) << "the kernel wrote to b or next to it";
  EXPECT_EQ(c.y.guard_damage(), "") << "Y written outside its " << c.m << " x " << c.n << " extent";
  if (fp16_accumulating(k)) {
    expect_bits_equal("Y", c.y, model_fwd(k, c, bias, act));
  } else {
    const double flush = bf16_flush_term(k, c.k, c.x.max_abs(), c.w.max_abs());
    expect_within_bound("Y", c.y, exact_fwd(c, bias), c.k + (bias ? 2 : 1), flush, act);
  }
  if (k.fixed_order == FixedOrder::f32) {  // neonfhm's FMLAL: also bit-exact to the fixed-order f32 model
    std::vector<f16> want(c.m * c.n);
    f32acc_model_dense_fwd({c.m, c.n, c.k, c.x.data(), c.w.data(), bias ? c.b.data() : nullptr, want.data(), act});
    expect_bits_equal("Y (f32acc_model_dense_fwd)", c.y, want);
  }
  if (k.fixed_order ==
      FixedOrder::bfdot) {  // neonbf16's BFMMLA: also bit-exact to the BFDotAdd model (bf16 bits in f16 slots)
    std::vector<f16> want(c.m * c.n);
    bfdot_model_dense_fwd({c.m, c.n, c.k, c.x.data(), c.w.data(), bias ? c.b.data() : nullptr, want.data(), act});
    expect_bits_equal("Y (bfdot_model_dense_fwd)", c.y, want);
  }
}

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

std::vector<KernelParam> kernels_of(Op op) {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (k.op == op && !is_scaled(k.mode)) v.push_back({&k});  // the scaled fp8 modes: fp8_modes_test
  }
  return v;
}

std::string kernel_test_name(const ::testing::TestParamInfo<KernelParam>& info) {
  return std::string(info.param.k->name);
}

class DenseKernelTest : public ::testing::TestWithParam<KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
  DType storage() const { return k().storage; }
  Tiling tiling() const { return tiling_of(k()); }
};

class DenseFwdTest : public DenseKernelTest {};
class DenseBwdTest : public DenseKernelTest {};

/// Every shape of shapes_for(); shapes with K <= 7 run all four (act, bias) combinations, each with its own
/// misalignment pattern, the others one combination each, in rotation. Stops at the first failing case.
TEST_P(DenseFwdTest, ShapesAroundTheMicroTile) {
  const std::vector<Shape> shapes = shapes_for(tiling());
  std::size_t index = 0;
  for (const Shape& s : shapes) {
    const int combos = s.k <= 7 ? 4 : 1;
    for (int c = 0; c < combos; ++c, ++index) {
      const Act act = index % 2 == 0 ? Act::identity : Act::relu;
      const bool bias = (index / 2) % 2 == 0;
      const Offsets o = offsets_for(index / 4 + index);
      const std::uint64_t seed = test::case_seed(s.m * 1000003 + s.n, s.k, index);
      SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} act={} bias={} offsets x{} w{} b{} y{} seed=0x{:016X}",
                               k().name, s.m, s.n, s.k, act_name(act), bias, o.x, o.w, o.b, o.y, seed));
      test::Rng rng(seed);
      FwdCase fc(storage(), s.m, s.n, s.k, o);
      fill_random(fc.x, rng);
      fill_random(fc.w, rng);
      fill_random(fc.b, rng);
      run_and_check_fwd(k(), fc, bias, act);
      if (HasFailure()) return;
    }
  }
}

/// Resets the GEMM's cache blocks to those of this core's caches when a test ends, passed or not.
struct BlocksReset {
  ~BlocksReset() { set_gemm_blocks_for_tests(0, 0, 0); }
};

/// The blockings of the SameBitsAtEveryBlocking tests: one micro-tile and 8 k values per block; two micro-tiles
/// by 24; the tiling's own constants (the blocks where the caches cannot be read).
std::vector<std::array<std::size_t, 3>> blockings_of(const Tiling& t) {
  return {{t.mr, 8, t.nr}, {2 * t.mr, 24, 2 * t.nr}, {t.mc, t.kc, t.nc}};
}

/// Cache blocking changes no output: the same inputs give the same bits at the blocks chosen from this core's
/// caches and at each of blockings_of(), on a shape that spans several blocks of the small ones.
TEST_P(DenseFwdTest, SameBitsAtEveryBlocking) {
  const Tiling t = tiling();
  const std::size_t m = 3 * t.mr + 1, n = 3 * t.nr + 1, kk = 77;
  BlocksReset reset;
  test::Rng rng(test::case_seed(m, n, kk));
  FwdCase c(storage(), m, n, kk, offsets_for(1));
  fill_random(c.x, rng);
  fill_random(c.w, rng);
  fill_random(c.b, rng);
  const DenseArgs args{c.m, c.n, c.k, c.x.data(), c.w.data(), c.b.data(), c.y.data(), Act::relu};
  k().dense(args);
  const auto want = c.y.snapshot();
  for (const auto& [mc, kc, nc] : blockings_of(t)) {
    set_gemm_blocks_for_tests(mc, kc, nc);
    c.y.fill_bits(unwritten_bits(c.y.type()));
    k().dense(args);
    EXPECT_TRUE(c.y.unchanged_since(want))
        << "Y differs at blocks mc " << mc << ", kc " << kc << ", nc " << nc
        << " from the blocks of this core's caches (M " << m << ", N " << n << ", K " << kk << ")";
  }
}

/// inf and NaN in X, W and b: every output matches the f64 oracle's class exactly (and fp16 modes the model bit
/// for bit; f32-accumulating modes stay within the bound on the finite outputs). W gets exact zeros so that
/// inf·0 = NaN occurs; a row with +inf and -inf against weights of one sign gives inf - inf = NaN.
TEST_P(DenseFwdTest, InfAndNanPropagateExactly) {
  const Tiling t = tiling();
  const DType st = storage();
  const std::uint32_t pinf = inf_bits(st), ninf = inf_bits(st) | sign_bit(st), nan = nan_bits(st);
  for (std::size_t kk : {std::size_t{5}, t.kc + 1}) {
    const std::size_t m = t.mr + 1, n = t.nr + 1;
    for (int variant = 0; variant < 5; ++variant) {
      for (int combo = 0; combo < 4; ++combo) {
        const Act act = combo % 2 == 0 ? Act::identity : Act::relu;
        const bool bias = combo >= 2;
        const std::uint64_t seed = test::case_seed(kk, std::uint64_t(variant), 0x1AF);
        SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} variant={} act={} bias={} seed=0x{:016X}", k().name, m, n,
                                 kk, variant, act_name(act), bias, seed));
        test::Rng rng(seed);
        FwdCase c(st, m, n, kk, offsets_for(std::size_t(combo + variant)));
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, rng.uniform(-1, 1));
        }
        for (std::size_t p = 0; p < kk; ++p) {
          for (std::size_t j = 0; j < n; ++j) c.w.set(p, j, rng.uniform(-1, 1));
        }
        for (std::size_t j = 0; j < n; ++j) c.b.set(0, j, rng.uniform(-1, 1));
        const std::size_t i0 = m - 1, p0 = kk / 2, p1 = kk - 1, j0 = n / 2;
        switch (variant) {
          case 0:  // +inf in X: row i0 becomes ±inf, NaN where W(p0, j) = 0
            c.x.set_bits(i0, p0, pinf);
            for (std::size_t j = 0; j < n; j += 3) c.w.set(p0, j, 0.0);
            break;
          case 1:  // +inf and -inf in one row of X against weights of one sign: inf - inf = NaN
            c.x.set_bits(0, p0, pinf);
            c.x.set_bits(0, p1, ninf);
            for (std::size_t j = 0; j < n; ++j) {
              const double v = j % 2 == 0 ? 0.5 : -0.25;
              c.w.set(p0, j, v);
              c.w.set(p1, j, j % 4 == 1 ? 2 * v : v);  // some columns +inf·v - inf·2v: still NaN
            }
            break;
          case 2:  // -inf in W: column j0 becomes ∓inf, NaN where X(i, p0) = 0
            c.w.set_bits(p0, j0, ninf);
            for (std::size_t i = 0; i < m; i += 2) c.x.set(i, p0, 0.0);
            break;
          case 3:  // NaN in X: row i0 is NaN, relu keeps it
            c.x.set_bits(i0, p0, nan);
            break;
          default:  // NaN in X and (when used) in b: relu keeps NaN
            c.x.set_bits(0, p1, nan | sign_bit(st));
            c.b.set_bits(0, j0, nan);
            break;
        }
        run_and_check_fwd(k(), c, bias, act);
        expect_specials_match("Y", c.y, exact_fwd(c, bias), act);
        if (HasFailure()) return;
      }
    }
  }
}

/// relu(x) = x < 0 ? 0 : x keeps -0 (and NaN, see InfAndNanPropagateExactly). In the fp16 modes a pre-activation
/// of -0 comes from products that underflow: (-2^-14)·2^-14 = -2^-28 rounds to -0 in fp16, and -0 + -0 = -0, so
/// Y = -0 with relu as without, also after adding b = -0; after adding b = +0 it is +0 (the sum of opposite zeros).
/// In the f32-accumulating modes the accumulator holds -3·2^-28 exactly: relu makes it +0, identity stores it as
/// -0 in fp16 (below 2^-25) and as itself in f32 and bf16. (Those modes start from +0 and never see a -0
/// pre-activation except through f32 underflow, where the sign depends on fusing, so only the fp16 modes pin it.)
TEST_P(DenseFwdTest, ReluKeepsNegativeZero) {
  const Tiling t = tiling();
  const DType st = storage();
  const std::size_t m = t.mr + 1, n = t.nr + 1, kk = 3;
  for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {  // none, -0, +0
    for (Act act : {Act::identity, Act::relu}) {
      SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} bias={} act={}", k().name, m, n, kk,
                               bias_kind == 0   ? "none"
                               : bias_kind == 1 ? "-0"
                                                : "+0",
                               act_name(act)));
      FwdCase c(st, m, n, kk, offsets_for(std::size_t(bias_kind) + (act == Act::relu)));
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, -0x1p-14);
      }
      for (std::size_t p = 0; p < kk; ++p) {
        for (std::size_t j = 0; j < n; ++j) c.w.set(p, j, 0x1p-14);
      }
      for (std::size_t j = 0; j < n; ++j) c.b.set(0, j, bias_kind == 1 ? -0.0 : 0.0);
      run_and_check_fwd(k(), c, bias_kind != 0, act);
      std::uint32_t want;
      if (fp16_accumulating(k())) {
        want = bias_kind == 2 ? 0x0000u : 0x8000u;
      } else if (act == Act::relu) {
        want = 0;  // relu(-3·2^-28) = +0 in every storage type
      } else {
        want = store_bits(st, -3 * 0x1p-28);  // fp16: -0; bf16 and f32: exact
      }
      for (std::size_t i = 0; i < m * n; ++i) {
        ASSERT_EQ(c.y.bits_at(i), want) << "Y[" << i / n << ", " << i % n << "] = " << hex_bits(st, c.y.bits_at(i))
                                        << ", want " << hex_bits(st, want);
      }
    }
  }
}

/// docs/numerics.md: a dense layer accumulating in fp16 overflows where a partial sum rounds to >= 65520, even when
/// the final sum is small; f16_f32acc overflows only when the stored output does; f32 and bf16 do not overflow.
/// Every output sums the same few products, placed alone (K = their count) or as the last k of K = kKc + 2, where
/// they straddle the k block and the partial sum passes through the accumulator buffer between blocks:
///   X rows [1, 1, -1, -1], W columns [a, b, a, b]: partial sums a, a + b, b, 0.
///     a = 40960, b = 24576: a + b = 65536 -> fp16 modes inf (then inf - a - b = inf); the others exactly 0.
///     a = 40960, b = 24544 (fp16 only; 24544 needs 10 significant bits): a + b = 65504, finite -> 0 everywhere.
///   X rows [1, 1], W columns [40960, 24576]: the final sum 65536 is inf in fp16 storage (f16 and f16_f32acc),
///     65536 in f32 and bf16.
///   40960 + 24544 + 8 + 4 + 2 + 1 + 0.5 + 0.25 = 65519.75 (fp16 only): f16_f32acc rounds the exact f32 sum to
///     65504; the fp16 accumulator gives 65504 too (65504 + 8 = 65512 rounds back down).
///   40960 + 24544 + 16 = 65520 (fp16 only): a tie, rounded to even, which is inf, in every fp16 mode.
TEST_P(DenseFwdTest, Fp16AccumulatorOverflowsOnPartialSums) {
  const Tiling t = tiling();
  const DType st = storage();
  const bool fp16_storage = st == DType::f16;
  const std::size_t m = t.mr + 1, n = t.nr + 1;
  auto run = [&](bool straddle, const std::vector<double>& xs, const std::vector<double>& ws, double want,
                 const char* what) {
    const std::size_t kk = straddle ? t.kc + 2 : xs.size();
    SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={}: {}", k().name, m, n, kk, what));
    FwdCase c(st, m, n, kk, offsets_for(kk));
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, 0.0);
      for (std::size_t q = 0; q < xs.size(); ++q) c.x.set(i, kk - xs.size() + q, xs[q]);
    }
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t p = 0; p < kk; ++p) c.w.set(p, j, 0.0);
      for (std::size_t q = 0; q < ws.size(); ++q) c.w.set(kk - ws.size() + q, j, ws[q]);
    }
    run_and_check_fwd(k(), c, false, Act::identity);
    for (std::size_t i = 0; i < m * n; ++i) {
      const double g = load_exact(st, c.y.bits_at(i));
      ASSERT_TRUE(g == want) << "Y[" << i / n << ", " << i % n << "] = " << hex_bits(st, c.y.bits_at(i)) << " = " << g
                             << ", want " << want;
    }
  };
  const bool f16acc = fp16_accumulating(k());
  for (bool kk : {false, true}) {
    run(kk, {1, 1, -1, -1}, {40960, 24576, 40960, 24576}, f16acc ? kInf : 0.0, "partial sum 65536, final sum 0");
    if (fp16_storage) {
      run(kk, {1, 1, -1, -1}, {40960, 24544, 40960, 24544}, 0.0, "partial sum 65504, final sum 0");
      run(kk, {1, 1, 1, 1, 1, 1, 1, 1}, {40960, 24544, 8, 4, 2, 1, 0.5, 0.25}, 65504.0, "final sum 65519.75");
      run(kk, {1, 1, 1}, {40960, 24544, 16}, kInf, "final sum 65520");
    }
    run(kk, {1, 1}, {40960, 24576}, fp16_storage ? kInf : 65536.0, "final sum 65536");
  }
}

/// docs/numerics.md: bf16 has f32's range, so inputs that fit f32 never overflow it, at a precision of about 2^-8 per
/// stored value. With X = ±[0.5, 1]·10^30 and W in [-1, 1]:
///   * storing each value in bf16 errs by at most 2^-8 relative (half an ulp of an 8-bit significand), and by
///     more than 2^-9 for some values: the loss is about 2^-8, not less;
///   * bf16 and f32 outputs are finite and within the bound of the policy against the f64 oracle on the stored
///     inputs, and (bf16) within 2^-8 |E| + (2^-7 + 2^-16) Σ|x w| + 2 (K+2) u Σ|x w| of the f64 result on the
///     unrounded inputs (each product of two stored values errs by at most (1 + 2^-8)^2 - 1 relative);
///   * fp16 storage cannot hold 10^30 (it becomes inf when stored): its outputs are inf or NaN, as the f64
///     oracle on the stored inputs says (the data boundary of docs/numerics.md).
TEST_P(DenseFwdTest, Bf16KeepsTheRangeOfF32) {
  const Tiling t = tiling();
  const DType st = storage();
  const std::size_t m = t.mr + 1, n = t.nr - 1, kk = 37;
  const std::uint64_t seed = test::case_seed(0xB16, kk);
  SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} seed=0x{:016X}", k().name, m, n, kk, seed));
  test::Rng rng(seed);
  FwdCase c(st, m, n, kk, offsets_for(1));
  std::vector<double> x(m * kk), w(kk * n);
  double max_store_err = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t p = 0; p < kk; ++p) {
      x[i * kk + p] = (rng.coin(0.5) ? -1 : 1) * rng.uniform(0.5, 1.0) * 1e30;
      c.x.set(i, p, x[i * kk + p]);
      if (st == DType::bf16) {
        max_store_err = std::max(max_store_err, std::fabs(c.x.value(i, p) - x[i * kk + p]) / std::fabs(x[i * kk + p]));
      }
    }
  }
  for (std::size_t p = 0; p < kk; ++p) {
    for (std::size_t j = 0; j < n; ++j) {
      w[p * n + j] = rng.uniform(-1.0, 1.0);
      c.w.set(p, j, w[p * n + j]);
      if (st == DType::bf16) {
        max_store_err = std::max(max_store_err, std::fabs(c.w.value(p, j) - w[p * n + j]) / std::fabs(w[p * n + j]));
      }
    }
  }
  run_and_check_fwd(k(), c, false, Act::identity);
  const auto stored = exact_fwd(c, false);
  if (st == DType::f16) {
    for (std::size_t i = 0; i < m * n; ++i) {
      ASSERT_FALSE(std::isfinite(stored[i].value)) << "10^30 must not fit fp16";
      ASSERT_FALSE(std::isfinite(load_exact(st, c.y.bits_at(i)))) << "Y[" << i << "]";
    }
    expect_specials_match("Y", c.y, stored, Act::identity);
    return;
  }
  for (std::size_t i = 0; i < m * n; ++i) {
    ASSERT_TRUE(std::isfinite(load_exact(st, c.y.bits_at(i)))) << "Y[" << i << "] = " << hex_bits(st, c.y.bits_at(i));
  }
  if (st != DType::bf16) return;
  RecordProperty("max_bf16_storage_relative_error", fmt::format("{:a}", max_store_err));
  EXPECT_LE(max_store_err, 0x1p-8) << "bf16 storage error above half an ulp";
  EXPECT_GT(max_store_err, 0x1p-9) << "the largest bf16 storage error should be close to 2^-8";
  const auto orig = exact_gemm(
      m, n, kk, [&](std::size_t i, std::size_t p) { return x[i * kk + p]; },
      [&](std::size_t p, std::size_t j) { return w[p * n + j]; });
  for (std::size_t i = 0; i < m * n; ++i) {
    const double g = load_exact(st, c.y.bits_at(i));
    const double e = orig[i].value, s = orig[i].abs;
    const double bound =
        0x1p-8 * std::fabs(e) + (0x1p-7 + 0x1p-16) * s * (1 + 0x1p-7) + 2 * double(kk + 2) * kU * s * 1.02;
    EXPECT_LE(std::fabs(g - e), bound) << fmt::format("Y[{}, {}] = {:a}, f64 on the unrounded inputs {:a}", i / n,
                                                      i % n, g, e);
  }
}

/// The two fused multiply-adds of f16_model.hpp differ on these operands (pinned in reduce_test): c = -2^-24,
/// then a = 1.75, b = 0.572265625, where a·b = 1 + 3·2^-11 is an fp16 midpoint; exact a·b + c lies just below it
/// (0x3C01), f32 rounding lands on it and the tie goes to 0x3C02. Every output accumulates fma(c, 1, +0) = c, then
/// fma(a, b, c): a kernel that computes the other flavour than it declares fails. The pair sits alone (K = 2) or
/// straddles the k block (K = kKc + 1, the pair at kKc - 1 and kKc, zeros before it), so the accumulator crosses
/// the block boundary in between. The f32-accumulating modes see the same inputs and stay within their bound.
TEST_P(DenseFwdTest, ComputesTheDeclaredFmaFlavour) {
  const Tiling t = tiling();
  const DType st = storage();
  const double a = 1.75, b = 0.572265625, c0 = -0x1p-24;
  const f16 fused = f16_model::fma(to_f16(a), to_f16(b), to_f16(c0), FmaKind::fused);
  const f16 rounded = f16_model::fma(to_f16(a), to_f16(b), to_f16(c0), FmaKind::f32_round);
  ASSERT_EQ(fused.bits, 0x3C01);
  ASSERT_EQ(rounded.bits, 0x3C02);
  const std::size_t m = t.mr + 1, n = t.nr + 1;
  for (std::size_t kk : {std::size_t{2}, t.kc + 1}) {
    SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} fma {}", k().name, m, n, kk,
                             k().fma == FmaKind::fused ? "fused" : "f32_round"));
    FwdCase c(st, m, n, kk, offsets_for(kk));
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, 0.0);
      c.x.set(i, kk - 2, c0);
      c.x.set(i, kk - 1, a);
    }
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t p = 0; p < kk; ++p) c.w.set(p, j, 0.0);
      c.w.set(kk - 2, j, 1.0);
      c.w.set(kk - 1, j, b);
    }
    run_and_check_fwd(k(), c, false, Act::identity);
    if (fp16_accumulating(k())) {
      const std::uint32_t want = k().fma == FmaKind::fused ? fused.bits : rounded.bits;
      for (std::size_t i = 0; i < m * n; ++i) {
        ASSERT_EQ(c.y.bits_at(i), want) << "Y[" << i / n << ", " << i % n << "] = " << hex_bits(st, c.y.bits_at(i))
                                        << "; fused gives " << test::hex(fused) << ", f32_round " << test::hex(rounded);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, DenseFwdTest, ::testing::ValuesIn(kernels_of(Op::dense_fwd)), kernel_test_name);

// ---- backward --------------------------------------------------------------------------------------------------

struct BwdCase {
  Matrix x, w, dy, dx, dw, db;
  std::size_t m, n, k;
  BwdCase(DType t, std::size_t m_, std::size_t n_, std::size_t k_, Offsets o)
      : x(input_matrix(t, m_, k_, o.x)),
        w(input_matrix(t, k_, n_, o.w)),
        dy(input_matrix(t, m_, n_, o.b)),
        dx(output_matrix(t, m_, k_, o.y)),
        dw(output_matrix(t, k_, n_, o.x)),
        db(output_matrix(t, 1, n_, o.w)),
        m(m_),
        n(n_),
        k(k_) {}
};

struct BwdExact {
  std::vector<Exact> dx, dw, db;
};

/// dX = dY·Wᵀ (inner n), dW = Xᵀ·dY (inner m), db = Σ_rows dY (inner m), in f64.
BwdExact exact_bwd(const BwdCase& c) {
  BwdExact e;
  const std::vector<double> x = c.x.values(), w = c.w.values(), dy = c.dy.values();
  const std::size_t m = c.m, n = c.n, k = c.k;
  e.dx = exact_gemm(
      m, k, n, [&](std::size_t i, std::size_t j) { return dy[i * n + j]; },
      [&](std::size_t j, std::size_t p) { return w[p * n + j]; });
  e.dw = exact_gemm(
      k, n, m, [&](std::size_t p, std::size_t i) { return x[i * k + p]; },
      [&](std::size_t i, std::size_t j) { return dy[i * n + j]; });
  e.db = exact_gemm(
      1, n, m, [](std::size_t, std::size_t) { return 1.0; },
      [&](std::size_t i, std::size_t j) { return dy[i * n + j]; });
  return e;
}

struct Which {
  bool dx, dw, db;
};

void run_and_check_bwd(const Kernel& k, BwdCase& c, Which which) {
  const auto xs = c.x.snapshot(), ws = c.w.snapshot(), dys = c.dy.snapshot();
  for (Matrix* o : {&c.dx, &c.dw, &c.db}) o->fill_bits(unwritten_bits(o->type()));
  const DenseBwdArgs args{c.m,
                          c.n,
                          c.k,
                          c.x.data(),
                          c.w.data(),
                          c.dy.data(),
                          which.dx ? c.dx.data() : nullptr,
                          which.dw ? c.dw.data() : nullptr,
                          which.db ? c.db.data() : nullptr};
  k.dense_bwd(args);
  EXPECT_TRUE(c.x.unchanged_since(xs)) << "the kernel wrote to X or next to it";
  EXPECT_TRUE(c.w.unchanged_since(ws)) << "the kernel wrote to W or next to it";
  EXPECT_TRUE(c.dy.unchanged_since(dys)) << "the kernel wrote to dY or next to it";
  EXPECT_EQ(c.dx.guard_damage(), "") << "dX written outside its " << c.m << " x " << c.k << " extent";
  EXPECT_EQ(c.dw.guard_damage(), "") << "dW written outside its " << c.k << " x " << c.n << " extent";
  EXPECT_EQ(c.db.guard_damage(), "") << "db written outside its " << c.n << " extent";
  // Outputs not asked for must stay untouched (the kernel got nullptr; it cannot have written them anyway).
  if (fp16_accumulating(k)) {
    std::vector<f16> dx(c.m * c.k), dw(c.k * c.n), db(c.n);
    const DenseBwdArgs margs{c.m, c.n, c.k, c.x.data(), c.w.data(), c.dy.data(), dx.data(), dw.data(), db.data()};
    f16_model_dense_bwd(margs, k.fma);
    if (which.dx) expect_bits_equal("dX", c.dx, dx);
    if (which.dw) expect_bits_equal("dW", c.dw, dw);
    if (which.db) expect_bits_equal("db", c.db, db);
    return;
  }
  const BwdExact e = exact_bwd(c);
  const double max_x = c.x.max_abs(), max_w = c.w.max_abs(), max_dy = c.dy.max_abs();
  if (which.dx) expect_within_bound("dX", c.dx, e.dx, c.n + 1, bf16_flush_term(k, c.n, max_dy, max_w), Act::identity);
  if (which.dw) expect_within_bound("dW", c.dw, e.dw, c.m + 1, bf16_flush_term(k, c.m, max_x, max_dy), Act::identity);
  // db is summed in plain f32 on every path (no vdpbf16ps): no flush term.
  if (which.db) expect_within_bound("db", c.db, e.db, c.m + 1, 0.0, Act::identity);
  if (k.fixed_order == FixedOrder::f32) {  // neonfhm's FMLAL: also bit-exact to the fixed-order f32 model
    std::vector<f16> dx(c.m * c.k), dw(c.k * c.n), db(c.n);
    f32acc_model_dense_bwd({c.m, c.n, c.k, c.x.data(), c.w.data(), c.dy.data(), dx.data(), dw.data(), db.data()});
    if (which.dx) expect_bits_equal("dX (f32acc_model_dense_bwd)", c.dx, dx);
    if (which.dw) expect_bits_equal("dW (f32acc_model_dense_bwd)", c.dw, dw);
    if (which.db) expect_bits_equal("db (f32acc_model_dense_bwd)", c.db, db);
  }
  if (k.fixed_order ==
      FixedOrder::bfdot) {  // neonbf16's BFMMLA: also bit-exact to the BFDotAdd model (bf16 bits in f16 slots)
    std::vector<f16> dx(c.m * c.k), dw(c.k * c.n), db(c.n);
    bfdot_model_dense_bwd({c.m, c.n, c.k, c.x.data(), c.w.data(), c.dy.data(), dx.data(), dw.data(), db.data()});
    if (which.dx) expect_bits_equal("dX (bfdot_model_dense_bwd)", c.dx, dx);
    if (which.dw) expect_bits_equal("dW (bfdot_model_dense_bwd)", c.dw, dw);
    if (which.db) expect_bits_equal("db (bfdot_model_dense_bwd)", c.db, db);
  }
}

/// Every shape of shapes_for() with all three outputs; shapes with K <= 7 also run with each output alone (the
/// other two null). Stops at the first failing case.
TEST_P(DenseBwdTest, ShapesAroundTheMicroTile) {
  const std::vector<Shape> shapes = shapes_for(tiling());
  std::size_t index = 0;
  for (const Shape& s : shapes) {
    std::vector<Which> runs = {{true, true, true}};
    if (s.k <= 7) runs.insert(runs.end(), {{true, false, false}, {false, true, false}, {false, false, true}});
    for (const Which& which : runs) {
      const Offsets o = offsets_for(index++);
      const std::uint64_t seed = test::case_seed(s.m * 1000003 + s.n, s.k, 0xB00 + index);
      SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} outputs {}{}{} offsets x{} w{} dy{} dx{} seed=0x{:016X}",
                               k().name, s.m, s.n, s.k, which.dx ? "dX " : "", which.dw ? "dW " : "",
                               which.db ? "db" : "", o.x, o.w, o.b, o.y, seed));
      test::Rng rng(seed);
      BwdCase c(storage(), s.m, s.n, s.k, o);
      fill_random(c.x, rng);
      fill_random(c.w, rng);
      fill_random(c.dy, rng);
      run_and_check_bwd(k(), c, which);
      if (HasFailure()) return;
    }
  }
}

/// The backward pass's three outputs, the same bits at every blocking (see DenseFwdTest.SameBitsAtEveryBlocking).
TEST_P(DenseBwdTest, SameBitsAtEveryBlocking) {
  const Tiling t = tiling();
  const std::size_t m = 3 * t.mr + 1, n = 3 * t.nr + 1, kk = 77;
  BlocksReset reset;
  test::Rng rng(test::case_seed(m, n, kk + 1));
  BwdCase c(storage(), m, n, kk, offsets_for(2));
  fill_random(c.x, rng);
  fill_random(c.w, rng);
  fill_random(c.dy, rng);
  const DenseBwdArgs args{c.m, c.n, c.k, c.x.data(), c.w.data(), c.dy.data(), c.dx.data(), c.dw.data(), c.db.data()};
  k().dense_bwd(args);
  const auto dx = c.dx.snapshot(), dw = c.dw.snapshot(), db = c.db.snapshot();
  for (const auto& [mc, kc, nc] : blockings_of(t)) {
    set_gemm_blocks_for_tests(mc, kc, nc);
    for (Matrix* o : {&c.dx, &c.dw, &c.db}) o->fill_bits(unwritten_bits(o->type()));
    k().dense_bwd(args);
    const std::string at = fmt::format("at blocks mc {}, kc {}, nc {} (M {}, N {}, K {})", mc, kc, nc, m, n, kk);
    EXPECT_TRUE(c.dx.unchanged_since(dx)) << "dX differs " << at;
    EXPECT_TRUE(c.dw.unchanged_since(dw)) << "dW differs " << at;
    EXPECT_TRUE(c.db.unchanged_since(db)) << "db differs " << at;
  }
}

/// inf in dY: dX row i0 is ±inf (NaN where W(p, j0) = 0), dW column j0 is ±inf (NaN where X(i0, p) = 0), db(j0)
/// is inf; with -inf in the same column of dY, db(j0) is NaN, and so is dW where X(i0, p) and X(i1, p) agree in
/// sign. NaN in dY propagates the same way. Classes match the f64 oracle exactly.
TEST_P(DenseBwdTest, InfAndNanPropagateExactly) {
  const Tiling t = tiling();
  const DType st = storage();
  for (std::size_t kk : {std::size_t{5}, t.kc + 1}) {
    const std::size_t m = t.mr + 1, n = t.nr + 1;
    for (int variant = 0; variant < 3; ++variant) {
      const std::uint64_t seed = test::case_seed(kk, std::uint64_t(variant), 0xB1AF);
      SCOPED_TRACE(
          fmt::format("kernel {} M={} N={} K={} variant={} seed=0x{:016X}", k().name, m, n, kk, variant, seed));
      test::Rng rng(seed);
      BwdCase c(st, m, n, kk, offsets_for(std::size_t(variant)));
      for (Matrix* in : {&c.x, &c.w, &c.dy}) {
        for (std::size_t r = 0; r < in->rows(); ++r) {
          for (std::size_t q = 0; q < in->cols(); ++q) in->set(r, q, rng.uniform(-1, 1));
        }
      }
      const std::size_t i0 = m - 1, i1 = 0, j0 = n / 2;
      for (std::size_t p = 0; p < kk; p += 2) c.w.set(p, j0, 0.0);
      for (std::size_t p = 1; p < kk; p += 3) c.x.set(i0, p, 0.0);
      switch (variant) {
        case 0:
          c.dy.set_bits(i0, j0, inf_bits(st));
          break;
        case 1:
          c.dy.set_bits(i0, j0, inf_bits(st));
          c.dy.set_bits(i1, j0, inf_bits(st) | sign_bit(st));
          break;
        default:
          c.dy.set_bits(i1, j0, nan_bits(st));
          break;
      }
      run_and_check_bwd(k(), c, {true, true, true});
      const BwdExact e = exact_bwd(c);
      expect_specials_match("dX", c.dx, e.dx, Act::identity);
      expect_specials_match("dW", c.dw, e.dw, Act::identity);
      expect_specials_match("db", c.db, e.db, Act::identity);
      if (HasFailure()) return;
    }
  }
}

/// Loss scaling as the frameworks ship it (docs/numerics.md; Keras starts at 2^15): the true gradient G of a
/// mixed-precision layer is small (here ±2^-22·[0, 1]: in fp16 all of its values are subnormal and one in eight flushes
/// to zero), so dY = G·2^15 is stored instead. Every kernel's dX, dW, db from that dY must follow its mode exactly: the
/// f16-mode kernels bit for bit with the model, the others within the bound.
TEST_P(DenseBwdTest, LossScaledFp16Gradients) {
  const Tiling t = tiling();
  const DType st = storage();
  constexpr double kScale = 0x1p15;
  const Shape shapes[] = {{t.mr + 1, t.nr + 1, 5}, {2 * t.mr + 3, t.nr - 1, t.kc + 1}, {t.mr, 2 * t.nr + 3, 9}};
  for (const Shape& s : shapes) {
    const std::uint64_t seed = test::case_seed(s.m, s.n * 4099 + s.k, 0x5CA1E);
    SCOPED_TRACE(fmt::format("kernel {} M={} N={} K={} loss scale 2^15 seed=0x{:016X}", k().name, s.m, s.n, s.k, seed));
    test::Rng rng(seed);
    BwdCase c(st, s.m, s.n, s.k, offsets_for(s.k));
    fill_random(c.x, rng);
    fill_random(c.w, rng);
    std::size_t lost_unscaled = 0, lost_scaled = 0;
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < s.n; ++j) {
        const double g = rng.uniform(-1.0, 1.0) * 0x1p-22;
        if (g != 0 && (to_f16(g).bits & 0x7FFFu) == 0) ++lost_unscaled;
        c.dy.set(i, j, g * kScale);
        if (g != 0 && c.dy.value(i, j) == 0) ++lost_scaled;
      }
    }
    if (st == DType::f16) {
      EXPECT_GT(lost_unscaled, 0u) << "some unscaled gradients should flush to zero in fp16";
      EXPECT_EQ(lost_scaled, 0u) << "no scaled gradient may flush to zero";
    }
    run_and_check_bwd(k(), c, {true, true, true});
    if (HasFailure()) return;
  }
}

/// The operands of DenseFwdTest.ComputesTheDeclaredFmaFlavour through each backward product: dX(i, p) sums
/// dY(i, j)·W(p, j) over j, so dY rows [0.., c, a] against W rows [0.., 1, b]; dW(p, j) sums X(i, p)·dY(i, j)
/// over i, so X columns [0.., c, a] against dY columns [0.., 1, b]. The inner length is 2 or kKc + 1.
TEST_P(DenseBwdTest, ComputesTheDeclaredFmaFlavour) {
  const Tiling t = tiling();
  const DType st = storage();
  const double a = 1.75, b = 0.572265625, c0 = -0x1p-24;
  const f16 fused = f16_model::fma(to_f16(a), to_f16(b), to_f16(c0), FmaKind::fused);
  const f16 rounded = f16_model::fma(to_f16(a), to_f16(b), to_f16(c0), FmaKind::f32_round);
  ASSERT_NE(fused.bits, rounded.bits);
  const std::uint32_t want = k().fma == FmaKind::fused ? fused.bits : rounded.bits;
  for (std::size_t inner : {std::size_t{2}, t.kc + 1}) {
    {  // dX: inner dimension N
      const std::size_t m = t.mr + 1, n = inner, kk = t.nr + 1;
      SCOPED_TRACE(fmt::format("kernel {} dX with M={} N={} K={}", k().name, m, n, kk));
      BwdCase c(st, m, n, kk, offsets_for(inner));
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) c.dy.set(i, j, j == n - 2 ? c0 : j == n - 1 ? a : 0.0);
      }
      for (std::size_t p = 0; p < kk; ++p) {
        for (std::size_t j = 0; j < n; ++j) c.w.set(p, j, j == n - 2 ? 1.0 : j == n - 1 ? b : 0.0);
      }
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, 0.0);
      }
      run_and_check_bwd(k(), c, {true, false, false});
      if (fp16_accumulating(k())) {
        for (std::size_t i = 0; i < m * kk; ++i) {
          ASSERT_EQ(c.dx.bits_at(i), want)
              << "dX[" << i / kk << ", " << i % kk << "] = " << hex_bits(st, c.dx.bits_at(i));
        }
      }
    }
    {  // dW: inner dimension M
      const std::size_t m = inner, n = t.nr + 1, kk = t.mr + 1;
      SCOPED_TRACE(fmt::format("kernel {} dW with M={} N={} K={}", k().name, m, n, kk));
      BwdCase c(st, m, n, kk, offsets_for(inner + 1));
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t p = 0; p < kk; ++p) c.x.set(i, p, i == m - 2 ? c0 : i == m - 1 ? a : 0.0);
        for (std::size_t j = 0; j < n; ++j) c.dy.set(i, j, i == m - 2 ? 1.0 : i == m - 1 ? b : 0.0);
      }
      for (std::size_t p = 0; p < kk; ++p) {
        for (std::size_t j = 0; j < n; ++j) c.w.set(p, j, 0.0);
      }
      run_and_check_bwd(k(), c, {false, true, false});
      if (fp16_accumulating(k())) {
        for (std::size_t i = 0; i < kk * n; ++i) {
          ASSERT_EQ(c.dw.bits_at(i), want)
              << "dW[" << i / n << ", " << i % n << "] = " << hex_bits(st, c.dw.bits_at(i));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, DenseBwdTest, ::testing::ValuesIn(kernels_of(Op::dense_bwd)), kernel_test_name);

// ---- the backward formulas, by finite differences ---------------------------------------------------------------

/// The backward contract checked against the loss it differentiates, independently of any transpose convention:
/// L(X, W, b) = Σ_ij G_ij (X·W + b)_ij in f64 (identity act), dY = G. L is linear in each variable, so a central
/// difference (L(v + h) - L(v - h)) / 2h equals the partial derivative up to f64 rounding: |L| <= S = Σ|G||XW + b|
/// terms, each L rounds by at most (MNK + MN) 2^-53 S, so the difference errs by at most 2 (MNK + MN) 2^-53 S / 2h.
/// The f32 reference kernel's dX, dW, db (and the f64 oracle that the other tests use) must match it within that
/// plus the f32 kernel's own bound 2 r u S_elem (policy at the top). Shapes are not square, so a swapped
/// transpose fails; h = 2^-6 keeps X ± h exact in f64.
TEST(DenseGradient, F32RefBackwardMatchesCentralDifferencesOfTheLoss) {
  const Kernel* kr = find_kernel("f32_dense_bwd__ref");
  ASSERT_NE(kr, nullptr);
  for (const Shape& s : {Shape{5, 3, 4}, Shape{2, 7, 3}, Shape{6, 1, 9}}) {
    const std::uint64_t seed = test::case_seed(s.m, s.n, s.k + 0xFD);
    SCOPED_TRACE(fmt::format("M={} N={} K={} seed=0x{:016X}", s.m, s.n, s.k, seed));
    test::Rng rng(seed);
    BwdCase c(DType::f32, s.m, s.n, s.k, offsets_for(1));
    std::vector<double> x(s.m * s.k), w(s.k * s.n), b(s.n), g(s.m * s.n);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = double(float(rng.uniform(-1, 1)));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = double(float(rng.uniform(-1, 1)));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = double(float(rng.uniform(-1, 1)));
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = double(float(rng.uniform(-1, 1)));
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t p = 0; p < s.k; ++p) c.x.set(i, p, x[i * s.k + p]);
      for (std::size_t j = 0; j < s.n; ++j) c.dy.set(i, j, g[i * s.n + j]);
    }
    for (std::size_t p = 0; p < s.k; ++p) {
      for (std::size_t j = 0; j < s.n; ++j) c.w.set(p, j, w[p * s.n + j]);
    }
    double scale = 0;  // S of the comment
    auto loss = [&] {
      double l = 0;
      scale = 0;
      for (std::size_t i = 0; i < s.m; ++i) {
        for (std::size_t j = 0; j < s.n; ++j) {
          double y = b[j];
          for (std::size_t p = 0; p < s.k; ++p) y += x[i * s.k + p] * w[p * s.n + j];
          l += g[i * s.n + j] * y;
          scale += std::fabs(g[i * s.n + j]) * (std::fabs(b[j]) + double(s.k));
        }
      }
      return l;
    };
    constexpr double h = 0x1p-6;
    auto central = [&](double& v) {
      const double keep = v;
      v = keep + h;
      const double up = loss();
      v = keep - h;
      const double down = loss();
      v = keep;
      return (up - down) / (2 * h);
    };
    (void)loss();
    const double fd_err = 2 * double(s.m * s.n * s.k + s.m * s.n) * 0x1p-53 * scale / (2 * h);
    kr->dense_bwd(
        DenseBwdArgs{s.m, s.n, s.k, c.x.data(), c.w.data(), c.dy.data(), c.dx.data(), c.dw.data(), c.db.data()});
    const BwdExact oracle = exact_bwd(c);
    auto check = [&](const char* what, double fd, double got, double oracle_value, double terms_abs,
                     std::size_t inner) {
      const double bound = fd_err + 2 * double(inner + 1) * kU * terms_abs;
      EXPECT_LE(std::fabs(got - fd), bound) << fmt::format("{}: kernel {:a}, central difference {:a}", what, got, fd);
      EXPECT_LE(std::fabs(oracle_value - fd), fd_err + double(inner + 1) * 0x1p-52 * terms_abs)
          << fmt::format("{}: f64 oracle {:a}, central difference {:a}", what, oracle_value, fd);
    };
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t p = 0; p < s.k; ++p) {
        const Exact& e = oracle.dx[i * s.k + p];
        check(fmt::format("dX[{}, {}]", i, p).c_str(), central(x[i * s.k + p]), c.dx.value(i, p), e.value, e.abs, s.n);
      }
    }
    for (std::size_t p = 0; p < s.k; ++p) {
      for (std::size_t j = 0; j < s.n; ++j) {
        const Exact& e = oracle.dw[p * s.n + j];
        check(fmt::format("dW[{}, {}]", p, j).c_str(), central(w[p * s.n + j]), c.dw.value(p, j), e.value, e.abs, s.m);
      }
    }
    for (std::size_t j = 0; j < s.n; ++j) {
      const Exact& e = oracle.db[j];
      check(fmt::format("db[{}]", j).c_str(), central(b[j]), c.db.value(0, j), e.value, e.abs, s.m);
    }
  }
}

}  // namespace
}  // namespace halfmap
