// Every reduction kernel of the registry, parameterised over kernels() and named by kernel, so a kernel cannot
// exist untested. A kernel whose ISA may not run here is skipped with the reason, never called.
//
// Tolerance policy (docs/contributing.md, tolerances), per precision mode:
//   * f16, f16_model: bit-exact against f16_model_reduce(op, x, y, n, k.lanes, k.fma), the per-operation fp16
//     model run in the kernel's order of operations. Subnormal inputs included: no path may flush them.
//   * f32, f16_f32acc, bf16_f32acc: the f32 accumulator `acc` is checked against the exact result E, computed in
//     f64 from the same stored inputs, with
//         |acc - E| <= B = 2 (n+1) u S + (n+1) 2^-52 S + (n+1) 2^-125,   u = 2^-24 (f32),  S = sum of |terms|
//     (terms: x, x^2 or x*y). Why: any order of n-term f32 summation (sequential, several accumulators, a tree)
//     errs by at most gamma_{n-1} S (Higham, Accuracy and Stability, 4.2), one more rounding per term if the
//     product is rounded (f32 inputs; f16/bf16 products are exact in f32) or fused into the sum: gamma_{n+1}
//     <= 2 (n+1) u while (n+1) u <= 1/2. The second term covers the f64 reference's own rounding, the third
//     covers results flushed below 2^-126 (vdpbf16ps flushes subnormal inputs and outputs by design).
//     The kernel returns acc rounded once to the output storage type, and that rounding is monotonic, so the
//     result must lie in [round(E - B), round(E + B)]: for f32 that is the bound itself, for f16_f32acc it
//     admits fp16's 2^-11 relative rounding and overflow to inf exactly when even E - B rounds to inf, for
//     bf16 its 2^-8 relative rounding. The result must also be a value of the storage type.
//     Kernels with a fixed f32 order (FixedOrder::f32: neonfhm's FMLAL) are also bit-exact against
//     f32acc_model_reduce(op, x, y, n, k.lanes); those in BFDotAdd's order (FixedOrder::bfdot: neonbf16's
//     BFDOT, which rounds to odd and flushes) against bfdot_model_reduce(op, x, y, n, k.lanes).
//   * max|x|: exact in every mode (the f64 max|x| of the stored inputs, bit for bit).
//   * inf and NaN: matched exactly, never "within tolerance".
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::load_exact;
using test::store_bits;

using test::AlignedBuffer;
using test::Dist;
using test::hex;

// ---- inputs ---------------------------------------------------------------------------------------------------

bool fp16_accumulating(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

/// The length of the kernel's unrolled main loop: its lane count for fp16-accumulating kernels (element i goes
/// to lane i % lanes), 64 elements otherwise (more than any f32 SIMD tile: 4 registers of 16 floats).
std::size_t tile_of(const Kernel& k) { return fp16_accumulating(k) ? k.lanes : 64; }

std::uint32_t nan_pattern(DType t) { return t == DType::f32 ? 0x7FC00000u : t == DType::f16 ? 0x7E00u : 0x7FC0u; }

/// One input array in a 64-byte aligned buffer, starting `offset` elements in. Every element outside [0, n) is a
/// NaN, so a kernel that uses anything before the start or past the end returns NaN and fails.
class Array {
 public:
  static constexpr std::size_t kSlack = 128;  // poisoned elements after the end

  Array(DType t, std::size_t n, std::size_t offset)
      : t_(t), n_(n), offset_(offset), size_(dtype_size(t)), buf_((offset + n + kSlack) * size_) {
    for (std::size_t i = 0; i < offset + n + kSlack; ++i) put_raw(i, nan_pattern(t));
    values_.assign(n, 0.0);
  }

  void set(std::size_t i, double v) { set_bits(i, store_bits(t_, v)); }
  void set_bits(std::size_t i, std::uint32_t bits) {
    put_raw(offset_ + i, bits);
    values_[i] = load_exact(t_, bits);
  }
  std::uint32_t bits(std::size_t i) const { return get_raw(offset_ + i); }
  double value(std::size_t i) const { return values_[i]; }
  std::size_t size() const { return n_; }
  const void* data() { return buf_.data() + offset_ * size_; }

  /// The elements as fp16 (storage f16 only), contiguous, for the model.
  std::vector<f16> as_f16() const {
    std::vector<f16> v(n_);
    for (std::size_t i = 0; i < n_; ++i) v[i] = f16{std::uint16_t(bits(i))};
    return v;
  }
  /// The elements as bf16 (storage bf16 only), contiguous, for the BFDOT model.
  std::vector<bf16> as_bf16() const {
    std::vector<bf16> v(n_);
    for (std::size_t i = 0; i < n_; ++i) v[i] = bf16{std::uint16_t(bits(i))};
    return v;
  }
  std::vector<std::byte> snapshot() { return {buf_.data(), buf_.data() + buf_.size()}; }
  bool unchanged_since(const std::vector<std::byte>& s) { return std::memcmp(s.data(), buf_.data(), s.size()) == 0; }

 private:
  void put_raw(std::size_t i, std::uint32_t bits) {
    if (size_ == 4) {
      std::memcpy(buf_.data() + 4 * i, &bits, 4);
    } else {
      const auto b16 = std::uint16_t(bits);
      std::memcpy(buf_.data() + 2 * i, &b16, 2);
    }
  }
  std::uint32_t get_raw(std::size_t i) const {
    if (size_ == 4) {
      std::uint32_t b;
      std::memcpy(&b, const_cast<AlignedBuffer&>(buf_).data() + 4 * i, 4);
      return b;
    }
    std::uint16_t b;
    std::memcpy(&b, const_cast<AlignedBuffer&>(buf_).data() + 2 * i, 2);
    return b;
  }

  DType t_;
  std::size_t n_, offset_, size_;
  AlignedBuffer buf_;
  std::vector<double> values_;
};

struct Inputs {
  Array x, y;
  Inputs(DType t, std::size_t n, std::size_t x_offset, std::size_t y_offset) : x(t, n, x_offset), y(t, n, y_offset) {}
};

float call(const Kernel& k, Inputs& in) {
  return k.reduce(in.x.data(), k.op == Op::dot ? in.y.data() : nullptr, in.x.size());
}

// ---- references -----------------------------------------------------------------------------------------------

struct Exact {
  double value = 0;      // the exact result, up to the f64 rounding that the bound accounts for
  double abs_terms = 0;  // S: sum of |terms|
};

Exact exact_reduce(Op op, const Inputs& in) {
  Exact e;
  const std::size_t n = in.x.size();
  for (std::size_t i = 0; i < n; ++i) {
    const double x = in.x.value(i);
    double t = 0;
    switch (op) {
      case Op::sum:
        t = x;
        break;
      case Op::sumsq:
        t = x * x;
        break;  // exact in f64: at most 2 * 24 significant bits
      case Op::dot:
        t = x * in.y.value(i);
        break;
      case Op::maxabs:
        e.value = std::max(e.value, std::fabs(x));
        continue;
      default:
        ADD_FAILURE() << "not a reduction: " << op_name(op);
        return e;
    }
    e.value += t;
    e.abs_terms += std::fabs(t);
  }
  return e;
}

f16 model_of(const Kernel& k, const Inputs& in) {
  const std::vector<f16> x = in.x.as_f16();
  const std::vector<f16> y = in.y.as_f16();
  return f16_model_reduce(k.op, x.data(), k.op == Op::dot ? y.data() : nullptr, x.size(), k.lanes, k.fma);
}

/// Rounds to the kernel's output type, widened back to f32 (f16_f32acc: fp16; bf16_f32acc: bf16; f32: f32).
float round_output(Mode mode, double v) {
  switch (mode) {
    case Mode::f16_f32acc:
      return to_f32(to_f16(v));
    case Mode::bf16_f32acc:
      return to_f32(to_bf16(float(v)));
    default:
      return float(v);
  }
}

/// The check for finite inputs, per the tolerance policy at the top of this file.
void check_finite_result(const Kernel& k, const Inputs& in, float got) {
  const std::size_t n = in.x.size();
  const Exact e = exact_reduce(k.op, in);
  if (k.op == Op::maxabs) {
    const float want = float(e.value);  // a stored value: exact in f32
    EXPECT_EQ(test::bits_of(got), test::bits_of(want)) << "max|x|: got " << hex(got) << ", want " << hex(want);
  }
  if (fp16_accumulating(k)) {
    const f16 model = model_of(k, in);
    const float want = to_f32(model);
    EXPECT_EQ(test::bits_of(got), test::bits_of(want))
        << "fp16 result " << hex(to_f16(got)) << " (" << got << "), model " << hex(model) << " (" << want
        << ") with lanes " << k.lanes << ", fma " << (k.fma == FmaKind::fused ? "fused" : "f32_round");
    return;
  }
  if (k.op == Op::maxabs) return;
  if (k.fixed_order == FixedOrder::f32) {
    const std::vector<f16> x = in.x.as_f16(), y = in.y.as_f16();
    const float want = f32acc_model_reduce(k.op, x.data(), k.op == Op::dot ? y.data() : nullptr, n, k.lanes);
    EXPECT_EQ(test::bits_of(got), test::bits_of(want))
        << "fixed-order f32 result " << hex(got) << ", f32acc_model_reduce with lanes " << k.lanes << " gives "
        << hex(want);
  }
  if (k.fixed_order == FixedOrder::bfdot) {
    const std::vector<bf16> x = in.x.as_bf16(), y = in.y.as_bf16();
    const float want = bfdot_model_reduce(k.op, x.data(), k.op == Op::dot ? y.data() : nullptr, n, k.lanes);
    EXPECT_EQ(test::bits_of(got), test::bits_of(want))
        << "BFDotAdd-order result " << hex(got) << ", bfdot_model_reduce with lanes " << k.lanes << " gives "
        << hex(want);
  }
  const double u = 0x1p-24;
  const double m = double(n) + 1;
  const double bound = 2 * m * u * e.abs_terms + m * 0x1p-52 * e.abs_terms + m * 0x1p-125;
  const float lo = round_output(k.mode, e.value - bound);
  const float hi = round_output(k.mode, e.value + bound);
  EXPECT_TRUE(lo <= got && got <= hi) << fmt::format(
      "got {:a} = {}, exact {:a}, bound {:.3g}, allowed [{:a}, {:a}] (S = {:.6g})", got, got, e.value, bound, lo, hi,
      e.abs_terms);
  if (std::isfinite(got) || std::isinf(got)) {
    EXPECT_EQ(test::bits_of(round_output(k.mode, got)), test::bits_of(got))
        << "the result " << hex(got) << " is not a value of the output type " << mode_name(k.mode);
  }
}

// ---- the parameterised fixture ---------------------------------------------------------------------------------

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

std::vector<KernelParam> all_kernels() {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (test::is_reduction_kernel(k) && !is_scaled(k.mode)) v.push_back({&k});  // fp8_modes_test
  }
  return v;
}

class ReduceTest : public ::testing::TestWithParam<KernelParam> {
 protected:
  void SetUp() override {
    const std::string why = test::disabled_reason(k().isa);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  const Kernel& k() const { return *GetParam().k; }
  DType storage() const { return k().storage; }

  /// Runs one random case and checks it; returns false after the first failing case so a broken kernel does not
  /// print thousands of failures.
  bool run_random(std::size_t n, Dist dist, std::size_t x_offset, std::size_t y_offset) {
    const std::uint64_t seed = test::case_seed(n, static_cast<std::uint64_t>(dist), x_offset * 16 + y_offset);
    SCOPED_TRACE(fmt::format("kernel {} n={} dist={} x_offset={} y_offset={} seed=0x{:016X}", k().name, n,
                             test::dist_name(dist), x_offset, y_offset, seed));
    test::Rng rng(seed);
    Inputs in(storage(), n, x_offset, y_offset);
    for (std::size_t i = 0; i < n; ++i) {
      in.x.set(i, test::draw(rng, dist, storage()));
      in.y.set(i, test::draw(rng, dist, storage()));
    }
    const auto x_before = in.x.snapshot(), y_before = in.y.snapshot();
    const float got = call(k(), in);
    EXPECT_TRUE(in.x.unchanged_since(x_before)) << "the kernel wrote to x";
    EXPECT_TRUE(in.y.unchanged_since(y_before)) << "the kernel wrote to y";
    check_finite_result(k(), in, got);
    return !HasFailure();
  }

  /// Lengths around the tile: every length up to 130 and up to 3 tile+1 (every tail length in front of none, one
  /// and two full tiles: the tail and the lane fold of the fp16-accumulating kernels), and 4 tile+5.
  std::vector<std::size_t> tile_lengths() const {
    std::set<std::size_t> s;
    const std::size_t t = tile_of(k());
    for (std::size_t n = 0; n <= std::max<std::size_t>(130, 3 * t + 1); ++n) s.insert(n);
    for (std::size_t n : {t - 1, t, t + 1, 2 * t + 3, 4 * t + 5}) s.insert(n);
    return {s.begin(), s.end()};
  }
};

constexpr Dist kDists[] = {Dist::uniform, Dist::scaled, Dist::subnormal, Dist::positive};

TEST_P(ReduceTest, LengthsAroundTileAlignedAndMisaligned) {
  for (std::size_t n : tile_lengths()) {
    for (Dist d : kDists) {
      if (!run_random(n, d, 0, 0)) return;
      if (!run_random(n, d, 1, 3)) return;  // one element off a 64-byte boundary; y differently misaligned
    }
  }
}

TEST_P(ReduceTest, LargeOddLengths) {
  for (std::size_t n : {std::size_t{4099}, std::size_t{100003}}) {
    for (Dist d : kDists) {
      if (!run_random(n, d, 1, 0)) return;
    }
  }
}

// ---- special values --------------------------------------------------------------------------------------------

enum class Want { pos_inf, neg_inf, nan };

void expect_special(float got, Want want) {
  switch (want) {
    case Want::pos_inf:
      EXPECT_TRUE(std::isinf(got) && got > 0) << "want +inf, got " << hex(got);
      break;
    case Want::neg_inf:
      EXPECT_TRUE(std::isinf(got) && got < 0) << "want -inf, got " << hex(got);
      break;
    case Want::nan:
      EXPECT_TRUE(std::isnan(got)) << "want NaN, got " << hex(got);
      break;
  }
}

TEST_P(ReduceTest, SpecialValuesPropagateExactly) {
  const DType t = storage();
  const std::uint32_t pos_inf = t == DType::f32 ? 0x7F800000u : t == DType::f16 ? 0x7C00u : 0x7F80u;
  const std::uint32_t sign = t == DType::f32 ? 0x80000000u : 0x8000u;
  // quiet, negative quiet and signalling NaNs of the storage type
  const std::uint32_t nans[] = {nan_pattern(t), nan_pattern(t) | sign,
                                t == DType::f32   ? 0x7F800001u
                                : t == DType::f16 ? 0x7C01u
                                                  : 0x7F81u};
  const std::size_t tile = tile_of(k());
  std::set<std::size_t> lengths = {1, 2, 7, tile + 1, 2 * tile + 3, 257};
  const Op op = k().op;
  for (std::size_t n : lengths) {
    std::set<std::size_t> positions = {0, n / 2, n - 1};
    for (std::size_t p : positions) {
      const std::uint64_t seed = test::case_seed(n, p, 0x5BEC1A1);
      test::Rng rng(seed);
      auto base = [&] {
        Inputs in(t, n, 1, 1);
        for (std::size_t i = 0; i < n; ++i) {
          in.x.set(i, rng.uniform(-1, 1));
          in.y.set(i, rng.uniform(-1, 1));
        }
        return in;
      };
      const std::string where = fmt::format("kernel {} n={} position={} seed=0x{:016X}", k().name, n, p, seed);
      {
        SCOPED_TRACE(where + ": x[p] = +inf, y[p] = 1");
        Inputs in = base();
        in.x.set_bits(p, pos_inf);
        in.y.set(p, 1.0);
        expect_special(call(k(), in), Want::pos_inf);  // sum, sumsq, dot and max|x| alike
      }
      {
        SCOPED_TRACE(where + ": x[p] = -inf, y[p] = 1");
        Inputs in = base();
        in.x.set_bits(p, pos_inf | sign);
        in.y.set(p, 1.0);
        expect_special(call(k(), in), op == Op::sum || op == Op::dot ? Want::neg_inf : Want::pos_inf);
      }
      if (op == Op::dot) {
        SCOPED_TRACE(where + ": x[p] = +inf, y[p] = -0.5");
        Inputs in = base();
        in.x.set_bits(p, pos_inf);
        in.y.set(p, -0.5);
        expect_special(call(k(), in), Want::neg_inf);
      }
      if (op == Op::dot) {
        SCOPED_TRACE(where + ": x[p] = +inf, y[p] = 0: inf * 0");
        Inputs in = base();
        in.x.set_bits(p, pos_inf);
        in.y.set(p, 0.0);
        expect_special(call(k(), in), Want::nan);
      }
      if (n >= 2) {
        const std::size_t q = p == 0 ? n - 1 : 0;
        SCOPED_TRACE(where + fmt::format(": x[p] = +inf, x[{}] = -inf, y = 1 there", q));
        Inputs in = base();
        in.x.set_bits(p, pos_inf);
        in.x.set_bits(q, pos_inf | sign);
        in.y.set(p, 1.0);
        in.y.set(q, 1.0);
        // inf - inf: NaN for sum and dot; squares are both +inf; max|x| is +inf
        expect_special(call(k(), in), op == Op::sum || op == Op::dot ? Want::nan : Want::pos_inf);
      }
      for (std::uint32_t nan : nans) {
        SCOPED_TRACE(where + fmt::format(": x[p] = NaN 0x{:X}", nan));
        Inputs in = base();
        in.x.set_bits(p, nan);
        expect_special(call(k(), in), Want::nan);  // every op, max|x| included
      }
      if (op == Op::maxabs) {
        SCOPED_TRACE(where + ": every x negative zero, x[p] = -65504 (or the storage's -max)");
        Inputs in = base();
        for (std::size_t i = 0; i < n; ++i) in.x.set_bits(i, sign);
        EXPECT_EQ(test::bits_of(call(k(), in)), 0u) << "max|-0| is +0";
        const double big = t == DType::f16 ? -65504.0 : -3.0e38;
        in.x.set(p, big);
        EXPECT_EQ(double(call(k(), in)), std::fabs(in.x.value(p)));
      }
      if (op == Op::dot) {
        SCOPED_TRACE(where + ": y[p] = NaN");
        Inputs in = base();
        in.y.set_bits(p, nan_pattern(t));
        expect_special(call(k(), in), Want::nan);
      }
    }
  }
}

// ---- the facts of docs/numerics.md, per kernel -------------------------------------------------------------------

Inputs constant_inputs(DType t, std::size_t n, double v) {
  Inputs in(t, n, 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    in.x.set(i, v);
    in.y.set(i, v);
  }
  return in;
}

/// Sums of ones. An fp16 accumulator stalls at 2048 (2048 + 1 rounds back to 2048, a tie to even), so with
/// n = 4096 L ones each of the L lanes stalls at 2048, and folding the lanes gives 2048 L, or inf once that
/// reaches 65520. sumsq and dot of ones stall the same way (fma(1, 1, 2048) = 2049 rounds to 2048). An f32
/// accumulator counts ones exactly up to 2^24, so the f32-accumulating modes return n rounded to the output type.
TEST_P(ReduceTest, SumOfOnesStallsOnlyInAnFp16Accumulator) {
  const Kernel& kk = k();
  if (fp16_accumulating(kk) && kk.op != Op::maxabs) {
    const std::size_t lanes = kk.lanes;
    const std::size_t n = 4096 * lanes;
    SCOPED_TRACE(fmt::format("kernel {} lanes={} n={}", kk.name, lanes, n));
    Inputs in = constant_inputs(storage(), n, 1.0);
    const float got = call(kk, in);
    const float want = 2048.0 * double(lanes) >= 65520.0 ? std::numeric_limits<float>::infinity() : float(2048 * lanes);
    EXPECT_EQ(got, want) << "each lane should stall at 2048";
    if (lanes == 1) {
      EXPECT_EQ(got, 2048.0f);
    }
    EXPECT_EQ(test::bits_of(got), test::bits_of(to_f32(model_of(kk, in))));
    // one lane's worth less: every lane gets 2048 ones and reaches 2048 exactly, no stall yet
    Inputs half = constant_inputs(storage(), 2048 * lanes, 1.0);
    EXPECT_EQ(call(kk, half), to_f32(model_of(kk, half)));
    return;
  }
  for (std::size_t n :
       {std::size_t{4096}, std::size_t{65504}, std::size_t{65519}, std::size_t{65520}, std::size_t{70001}}) {
    SCOPED_TRACE(fmt::format("kernel {} n={}", kk.name, n));
    Inputs in = constant_inputs(storage(), n, 1.0);
    const float got = call(kk, in);
    if (kk.op == Op::maxabs) {
      EXPECT_EQ(got, 1.0f);
    } else {
      // exact in f32, then rounded once: f16_f32acc gives 65504 for n = 65519 and inf from n = 65520
      EXPECT_EQ(test::bits_of(got), test::bits_of(round_output(kk.mode, double(n)))) << hex(got);
    }
  }
}

/// Squared error overflows fp16 from |d| = 256: 256^2 = 65536 is inf in fp16 (also when an f32 accumulator's
/// result is stored as fp16, since it is >= 65520), while 255.875^2 = 65472.015625 rounds to 65472. bf16 and f32
/// keep 65536. The 256 sits last, after zeros, so it goes through the main loop or the tail depending on n.
TEST_P(ReduceTest, SquareOverflowsFp16From256) {
  const Kernel& kk = k();
  const bool fp16_out = storage() == DType::f16;
  for (std::size_t n : {std::size_t{1}, tile_of(kk) + 1, 2 * tile_of(kk) + 3}) {
    for (double v : {256.0, 255.875}) {
      if (storage() == DType::bf16 && v != 256.0) continue;  // 255.875 needs 11 significant bits
      SCOPED_TRACE(fmt::format("kernel {} n={} x[n-1]=y[n-1]={}", kk.name, n, v));
      Inputs in = constant_inputs(storage(), n, 0.0);
      in.x.set(n - 1, v);
      in.y.set(n - 1, v);
      const float got = call(kk, in);
      switch (kk.op) {
        case Op::sum:
        case Op::maxabs:
          EXPECT_EQ(got, float(v));
          break;
        case Op::sumsq:
        case Op::dot:
          if (v == 256.0) {
            EXPECT_EQ(got, fp16_out ? std::numeric_limits<float>::infinity() : 65536.0f) << hex(got);
          } else {
            EXPECT_EQ(got, fp16_out ? 65472.0f : 65472.015625f) << hex(got);
          }
          break;
        default:
          ADD_FAILURE() << "not a reduction: " << op_name(kk.op);
          break;
      }
    }
  }
}

/// The two fused multiply-adds of f16_model.hpp give different results on these operands, so a kernel that
/// computes the other flavour than it declares fails. Lane 0 first receives c, then a*b (element `lanes` goes to
/// lane 0 again); every other lane stays zero.
///   dot:   c = -2^-24 (x = c, y = 1), then a = 1.75, b = 0.572265625: a*b = 1 + 3 * 2^-11 is an fp16 midpoint;
///          exact a*b + c lies just below it (1 + 2^-10, 0x3C01), f32 rounding lands on it (tie: 0x3C02).
///   sumsq: s = 0x0DA8 (s^2 rounds to 2^-23), then a = 1.46875: a^2 = 2209 * 2^-10 is an fp16 midpoint;
///          exact a^2 + 2^-23 lies above it (0x4051), f32 rounding lands on it (tie: 0x4050).
/// The f32-accumulating modes see the same inputs and must stay within their bound (f32: the single f32 rounding
/// of the exact value; f16_f32acc: then rounded to fp16, which is the double rounding of f32_round).
TEST_P(ReduceTest, ComputesTheDeclaredFmaFlavour) {
  const Kernel& kk = k();
  const std::size_t L = fp16_accumulating(kk) ? kk.lanes : 1;
  // element L in the tail, in the tail with more after it, in the main loop, in the second main-loop block
  for (std::size_t n : {L + 1, L + 6, 2 * L, 3 * L + 1}) {
    SCOPED_TRACE(fmt::format("kernel {} n={} fma {}", kk.name, n, kk.fma == FmaKind::fused ? "fused" : "f32_round"));
    Inputs in = constant_inputs(storage(), n, 0.0);
    f16 a, b, c;
    if (kk.op == Op::sumsq) {
      a = to_f16(1.46875);
      b = a;
      c = f16_model::fma(f16{0x0DA8}, f16{0x0DA8}, f16{}, kk.fma);
      in.x.set(0, to_f64(f16{0x0DA8}));
    } else {
      a = to_f16(1.75);
      b = to_f16(0.572265625);
      c = to_f16(-0x1p-24);
      in.x.set(0, to_f64(c));
      in.y.set(0, 1.0);
    }
    in.x.set(L, to_f64(a));
    in.y.set(L, to_f64(b));
    const f16 fused = f16_model::fma(a, b, c, FmaKind::fused);
    const f16 rounded = f16_model::fma(a, b, c, FmaKind::f32_round);
    ASSERT_NE(fused.bits, rounded.bits) << "the operands no longer separate the flavours";
    const float got = call(kk, in);
    if (fp16_accumulating(kk) && (kk.op == Op::dot || kk.op == Op::sumsq)) {
      const f16 want = kk.fma == FmaKind::fused ? fused : rounded;
      EXPECT_EQ(test::bits_of(got), test::bits_of(to_f32(want)))
          << "got " << hex(to_f16(got)) << "; fused gives " << hex(fused) << ", f32_round " << hex(rounded);
    } else {
      check_finite_result(kk, in, got);
    }
  }
}

/// Inputs that end exactly at a page boundary followed by an inaccessible page (and, in a second run, begin
/// exactly after one): a kernel that reads outside [x, x + n) crashes here. ReduceFn promises nothing beyond n.
TEST_P(ReduceTest, ReadsNothingOutsideTheInputs) {
  const Kernel& kk = k();
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t esize = dtype_size(storage());
  const std::size_t max_n = 4 * tile_of(kk) + 70;
  const std::size_t data_pages = (max_n * esize + page - 1) / page + 1;
  const std::size_t total = (data_pages + 2) * page;
  void* map = mmap(nullptr, 2 * total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* base = static_cast<std::byte*>(map);
  // [guard][x data][guard] [guard][y data][guard]
  std::byte* xdata = base + page;
  std::byte* ydata = base + total + page;
  const std::size_t data_bytes = data_pages * page;
  ASSERT_EQ(mprotect(base, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(xdata + data_bytes, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(base + total, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(ydata + data_bytes, page, PROT_NONE), 0);
  const std::uint32_t one = store_bits(storage(), 0.5);
  for (std::size_t i = 0; i < data_bytes / esize; ++i) {
    std::memcpy(xdata + i * esize, &one, esize);
    std::memcpy(ydata + i * esize, &one, esize);
  }
  const std::size_t t = tile_of(kk);
  std::set<std::size_t> lengths;
  for (std::size_t n = 0; n <= 70; ++n) lengths.insert(n);
  for (std::size_t n : {t - 1, t, t + 1, 2 * t + 3, 4 * t + 5}) lengths.insert(n);
  for (std::size_t n : lengths) {
    SCOPED_TRACE(fmt::format("kernel {} n={}", kk.name, n));
    // ending at the guard page after the data
    const void* x_end = xdata + data_bytes - n * esize;
    const void* y_end = ydata + data_bytes - n * esize;
    const float a = kk.reduce(x_end, kk.op == Op::dot ? y_end : nullptr, n);
    // starting right after the guard page before the data
    const float b = kk.reduce(xdata, kk.op == Op::dot ? ydata : nullptr, n);
    EXPECT_EQ(test::bits_of(a), test::bits_of(b)) << "same values, same order: same result";
    if (kk.op == Op::maxabs) {
      EXPECT_EQ(a, n == 0 ? 0.0f : 0.5f);
    }
    if (kk.op == Op::sum && !fp16_accumulating(kk)) {
      EXPECT_EQ(a, round_output(kk.mode, 0.5 * double(n)));
    }
  }
  munmap(map, 2 * total);
}

std::string kernel_test_name(const ::testing::TestParamInfo<KernelParam>& info) {
  return std::string(info.param.k->name);
}

INSTANTIATE_TEST_SUITE_P(Registry, ReduceTest, ::testing::ValuesIn(all_kernels()), kernel_test_name);

// ---- the f16 model itself ------------------------------------------------------------------------------------

TEST(F16Model, SumOfOnesStallsAt2048) {
  const std::vector<f16> ones(8192, to_f16(1.0f));
  auto sum = [&](std::size_t n, unsigned lanes) {
    return to_f32(f16_model_reduce(Op::sum, ones.data(), nullptr, n, lanes, FmaKind::fused));
  };
  EXPECT_EQ(sum(2048, 1), 2048.0f);
  EXPECT_EQ(sum(2049, 1), 2048.0f) << "2048 + 1 rounds back to 2048";
  EXPECT_EQ(sum(4096, 1), 2048.0f) << "stalls at exactly 2048";
  EXPECT_EQ(sum(4096, 2), 4096.0f) << "two lanes reach 2048 each";
  EXPECT_EQ(sum(8192, 2), 4096.0f) << "then each lane stalls";
  EXPECT_EQ(to_f32(f16_model::add(to_f16(2048.0f), to_f16(1.0f))), 2048.0f);
  EXPECT_EQ(to_f32(f16_model::add(to_f16(2048.0f), to_f16(2.0f))), 2050.0f);
}

// fold_lanes adds acc[j + w] into acc[j] for w = L/2, ..., 1: for [1, 2048, 1, 0] that is (1 + 1) + (2048 + 0) =
// 2050, where a sequential sum would stall at 2048.
TEST(F16Model, FoldLanesHalvesTheWidthEachStep) {
  std::vector<f16> acc = {to_f16(1.0f), to_f16(2048.0f), to_f16(1.0f), to_f16(0.0f)};
  EXPECT_EQ(to_f32(f16_model::fold_lanes(acc)), 2050.0f);
  const std::vector<f16> x = {to_f16(1.0f), to_f16(2048.0f), to_f16(1.0f), to_f16(0.0f)};
  EXPECT_EQ(to_f32(f16_model_reduce(Op::sum, x.data(), nullptr, 4, 4, FmaKind::fused)), 2050.0f);
  EXPECT_EQ(to_f32(f16_model_reduce(Op::sum, x.data(), nullptr, 4, 1, FmaKind::fused)), 2048.0f);
}

TEST(F16Model, SquareOverflowFacts) {
  for (FmaKind kind : {FmaKind::fused, FmaKind::f32_round}) {
    EXPECT_EQ(f16_model::fma(to_f16(256.0f), to_f16(256.0f), f16{}, kind).bits, 0x7C00);
    EXPECT_EQ(to_f32(f16_model::fma(to_f16(255.875f), to_f16(255.875f), f16{}, kind)), 65472.0f);
    EXPECT_EQ(to_f32(f16_model::fma(to_f16(-255.875f), to_f16(255.875f), f16{}, kind)), -65472.0f);
  }
  EXPECT_EQ(f16_model::mul(to_f16(256.0f), to_f16(256.0f)).bits, 0x7C00);
  EXPECT_EQ(to_f32(f16_model::mul(to_f16(255.875f), to_f16(255.875f))), 65472.0f);
}

/// a*b + c rounded correctly to fp16, from exact integer arithmetic: every fp16 value is an integer multiple of
/// 2^-24, so a*b + c is an integer multiple of 2^-48 below 2^82 in magnitude; round it by comparing with fp16
/// values and midpoints scaled to the same unit. Independent of half.hpp's rounding and of any floating point.
std::uint16_t exact_fma_f16(std::uint16_t a, std::uint16_t b, std::uint16_t c) {
  using I = __int128;
  auto units24 = [](std::uint16_t h) -> I {  // |h| in units of 2^-24
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    return e == 0 ? I(m) : I(1024 + m) << (e - 1);
  };
  auto sgn = [](std::uint16_t h) { return (h & 0x8000) ? -1 : 1; };
  const I prod = units24(a) * units24(b) * sgn(a) * sgn(b);  // units of 2^-48
  const I sum = prod + (units24(c) << 24) * sgn(c);
  if (sum == 0) return 0;  // callers compare zero results by magnitude only
  const std::uint16_t sign = sum < 0 ? 0x8000 : 0;
  const I mag = sum < 0 ? -sum : sum;
  unsigned lo = 0, hi = 0x7BFF;  // largest finite magnitude <= mag
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if ((units24(std::uint16_t(mid)) << 24) <= mag) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const I lo_v = units24(std::uint16_t(lo)) << 24;
  const I next_v = lo == 0x7BFF ? (I(1) << 40) << 24 : units24(std::uint16_t(lo + 1)) << 24;  // 65536 = 2^40 units24
  unsigned q = lo;
  if (2 * mag > lo_v + next_v || (2 * mag == lo_v + next_v && (lo & 1))) ++q;
  return std::uint16_t(sign | q);
}

/// A deterministic search for operands where the two fma flavours differ, over a in [1, 4), b in [0.5, 1) and
/// c = +-2^-24, +-2^-23 (a tiny c against a product with bits down to 2^-20 is where rounding a*b + c to f32 first
/// can land exactly on an fp16 midpoint). Such operands must exist, and on each the fused flavour must be the
/// correctly rounded exact value and f32_round must not: the two flavours really are different experiments.
TEST(F16Model, FusedAndF32RoundFmaDifferAndFusedIsExact) {
  const std::uint16_t cs[] = {0x0001, 0x8001, 0x0002, 0x8002};
  int found = 0;
  std::uint16_t first_a = 0, first_b = 0, first_c = 0;
  for (std::uint16_t a = 0x3C00; a < 0x4400 && found < 2000; a += 3) {
    for (std::uint16_t b = 0x3800; b < 0x3C00 && found < 2000; ++b) {
      for (std::uint16_t c : cs) {
        const f16 fused = f16_model::fma(f16{a}, f16{b}, f16{c}, FmaKind::fused);
        const f16 rounded = f16_model::fma(f16{a}, f16{b}, f16{c}, FmaKind::f32_round);
        if (fused == rounded) continue;
        if (found++ == 0) first_a = a, first_b = b, first_c = c;
        const std::uint16_t exact = exact_fma_f16(a, b, c);
        ASSERT_EQ(fused.bits, exact) << fmt::format("fma(0x{:04X}, 0x{:04X}, 0x{:04X})", a, b, c);
        ASSERT_NE(rounded.bits, exact) << fmt::format("fma(0x{:04X}, 0x{:04X}, 0x{:04X})", a, b, c);
      }
    }
  }
  EXPECT_GE(found, 2000) << "operands where fused and f32_round differ";
  RecordProperty("first_differing_triple", fmt::format("0x{:04X} 0x{:04X} 0x{:04X}", first_a, first_b, first_c));
}

// The constructed operands used by ComputesTheDeclaredFmaFlavour, pinned against the exact reference.
TEST(F16Model, ConstructedDoubleRoundingOperands) {
  const f16 a = to_f16(1.75f), b = to_f16(0.572265625f), c = to_f16(-0x1p-24f);
  EXPECT_EQ(f16_model::fma(a, b, c, FmaKind::fused).bits, 0x3C01);
  EXPECT_EQ(f16_model::fma(a, b, c, FmaKind::f32_round).bits, 0x3C02);
  EXPECT_EQ(exact_fma_f16(a.bits, b.bits, c.bits), 0x3C01);
  const f16 s{0x0DA8};
  EXPECT_EQ(f16_model::mul(s, s).bits, 0x0002) << "s^2 rounds to 2^-23";
  const f16 a2 = to_f16(1.46875f), c2{0x0002};
  EXPECT_EQ(f16_model::fma(a2, a2, c2, FmaKind::fused).bits, 0x4051);
  EXPECT_EQ(f16_model::fma(a2, a2, c2, FmaKind::f32_round).bits, 0x4050);
  EXPECT_EQ(exact_fma_f16(a2.bits, a2.bits, c2.bits), 0x4051);
}

// Random finite operands over the whole fp16 range, subnormals and overflow included: the fused flavour is
// correctly rounded, and add and mul (computed in f32, rounded once) are too (docs/numerics.md: f32 has >= 2*11+2
// bits).
TEST(F16Model, OperationsAreCorrectlyRoundedOnRandomOperands) {
  const std::uint64_t seed = test::case_seed(0xF3A);
  SCOPED_TRACE(fmt::format("seed 0x{:016X}", seed));
  test::Rng rng(seed);
  auto finite = [&] {
    for (;;) {
      const auto h = std::uint16_t(rng.bits());
      if ((h & 0x7C00) != 0x7C00) return h;
    }
  };
  const std::uint16_t one = 0x3C00;
  for (int i = 0; i < 300000; ++i) {
    const std::uint16_t a = finite(), b = finite(), c = finite();
    const std::uint16_t fused = f16_model::fma(f16{a}, f16{b}, f16{c}, FmaKind::fused).bits;
    const std::uint16_t want = exact_fma_f16(a, b, c);
    if ((want & 0x7FFF) == 0) {
      ASSERT_EQ(fused & 0x7FFF, 0) << fmt::format("fma(0x{:04X}, 0x{:04X}, 0x{:04X})", a, b, c);
    } else {
      ASSERT_EQ(fused, want) << fmt::format("fma(0x{:04X}, 0x{:04X}, 0x{:04X})", a, b, c);
    }
    const std::uint16_t sum = f16_model::add(f16{a}, f16{c}).bits;
    const std::uint16_t sum_want = exact_fma_f16(a, one, c);
    if ((sum_want & 0x7FFF) != 0) {
      ASSERT_EQ(sum, sum_want) << fmt::format("0x{:04X} + 0x{:04X}", a, c);
    }
    const std::uint16_t prod = f16_model::mul(f16{a}, f16{b}).bits;
    const std::uint16_t prod_want = exact_fma_f16(a, b, 0);
    if ((prod_want & 0x7FFF) != 0) {
      ASSERT_EQ(prod, prod_want) << fmt::format("0x{:04X} * 0x{:04X}", a, b);
    }
  }
}

}  // namespace
}  // namespace halfmap
