// The length search of the reductions (include/halfmap/lengths.hpp, docs/thresholds.md "Lengths: where a reduction
// stops"): onsets known analytically, pinned; the coarse step cannot move an onset; the inputs of length 4096 are
// the sweep's own; the files do not depend on the thread count.
//
// The analytic cases, for the sequence `ones` at a scale t = 2^k (every stored element t, every term t or t²):
//   * an fp16 lane holding 2048 terms absorbs the next (2048·t + t is a tie, rounded to the even 2048·t), and below
//     2048 terms it holds k·t exactly; so with L lanes filled round robin, lane j holds min(⌊n/L⌋ + [j < n mod L],
//     2048) terms, and the result f(n) is those lanes folded by fp16 adds in fold_lanes's order (w = L/2, ..., 1).
//     The onset is the first n whose f(n) is inf, or equals f(2n). For one lane (ref, sequential) that is exactly
//     n = 2048; for L lanes at most 2048·L (the fold may round the total up to 2048·L·t a little earlier).
//   * an f32 accumulator holds k·t exactly up to 2^24 terms per lane: within n ≤ 2^20 nothing stalls; the only
//     event is the fp16 output's overflow at s = 1, where the exact 65520 rounds to inf: n = 65520.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "halfmap/lengths.hpp"
#include "halfmap/registry.hpp"
#include "halfmap/sweep.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using sweep::Experiment;
using sweep::LengthEvent;
using sweep::LengthOptions;
using sweep::LengthResult;
using sweep::Seq;

bool length_op(Op op) { return op == Op::sum || op == Op::sumsq || op == Op::dot; }
bool f16_accumulating(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }

/// The enabled reduction kernels (sum, sumsq, dot) of this build and CPU that `keep` accepts.
template <class Pred>
std::vector<Experiment> experiments_where(Pred keep) {
  std::vector<Experiment> out;
  for (const Kernel& k : kernels()) {
    if (length_op(k.op) && kernel_enabled(k) && keep(k)) out.push_back(Experiment{k, std::nullopt});
  }
  return out;
}

Experiment experiment_named(std::string_view name) {
  const Kernel* k = find_kernel(name);
  if (k == nullptr) throw std::runtime_error(fmt::format("no kernel {}", name));
  return Experiment{*k, std::nullopt};
}

/// Round to fp16 by the definition, not the library's conversion: 11 significant bits (a quantum of 2^-24 below
/// the normal range), to nearest even (nearbyint in the default rounding mode), inf from 65520 = 65504 + half an ulp.
double r16(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  std::frexp(v, &e);  // |v| = m·2^e, m in [0.5, 1)
  const int q = std::max(e - 11, -24);
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);
  return std::fabs(r) > 65504 ? std::copysign(std::numeric_limits<double>::infinity(), v) : r;
}

/// The fp16 result of `ones` at term t with L lanes (see the top of this file).
double ones_result(std::size_t n, unsigned lanes, double t) {
  std::vector<double> acc(lanes);
  const std::size_t q = n / lanes, r = n % lanes;
  for (unsigned j = 0; j < lanes; ++j) acc[j] = double(std::min<std::size_t>(q + (j < r ? 1 : 0), 2048)) * t;
  for (unsigned w = lanes / 2; w >= 1; w /= 2) {
    for (unsigned j = 0; j < w; ++j) acc[j] = r16(acc[j] + acc[j + w]);  // a + b is exact in f64
  }
  return acc[0];
}

struct Expected {
  std::size_t n = 0;
  LengthEvent event = LengthEvent::none;
};

/// The first n in [1, len_max] at which the lanes-and-fold formula overflows or stalls.
Expected ones_onset(unsigned lanes, double t, std::size_t len_max) {
  static std::map<std::tuple<unsigned, double, std::size_t>, Expected> seen;  // sumsq and dot share their terms
  if (auto it = seen.find({lanes, t, len_max}); it != seen.end()) return it->second;
  Expected x;
  for (std::size_t n = 1; n <= len_max; ++n) {
    const double f = ones_result(n, lanes, t);
    if (std::isinf(f)) {
      x = {n, LengthEvent::fwd_overflow};
      break;
    }
    if (f == ones_result(2 * n, lanes, t)) {
      x = {n, LengthEvent::stall};
      break;
    }
  }
  seen[{lanes, t, len_max}] = x;
  return x;
}

LengthOptions options(std::vector<Experiment> es, std::vector<Seq> seqs, std::vector<double> log2_scales,
                      std::size_t len_max) {
  LengthOptions o;
  o.experiments = std::move(es);
  o.seqs = std::move(seqs);
  o.log2_scales = std::move(log2_scales);
  o.len_max = len_max;
#ifdef HALFMAP_TEST_NO_THREADS
  o.threads = 1;  // no threads under the arm64 preset's emulator (tests/CMakeLists.txt)
#else
  o.threads = 2;
#endif
  return o;
}

std::string describe(const LengthOptions& o, const LengthResult& r) {
  return fmt::format("{} {} s=2^{}: {} {} (value {}, exact {}), violations {}", o.experiments[r.experiment].fwd.name,
                     sweep::seq_name(r.seq), r.log2_s, r.found ? fmt::format("n={}", r.onset.n) : "none",
                     sweep::length_event_name(r.onset.event), r.onset.value, r.onset.exact, r.violations.size());
}

// ---- the analytic cases --------------------------------------------------------------------------------------------

TEST(LengthsAnalytic, RefF16SumOfOnesStopsAt2048) {
  // The sequential fp16 model: f(n) = n up to 2048, then 2048. f(4096) = f(2048), while f(4094) = 2048 != f(2047).
  for (std::string_view name : {"f16_sum__ref", "f16_sumsq__ref", "f16_dot__ref"}) {
    const Experiment e = experiment_named(name);
    ASSERT_EQ(e.fwd.mode, Mode::f16_model);
    ASSERT_EQ(e.fwd.lanes, 1u);
    for (double log2_s : {0.0, -8.0}) {
      SCOPED_TRACE(fmt::format("{} s=2^{}", name, log2_s));
      LengthOptions o = options({e}, {Seq::ones}, {log2_s}, 1 << 13);
      const double t = e.fwd.op == Op::sum ? std::exp2(log2_s) : std::exp2(2 * log2_s);
      const sweep::LengthCell before = sweep::evaluate_length(o, e, Seq::ones, log2_s, 2047);
      EXPECT_EQ(before.event, LengthEvent::none);
      EXPECT_EQ(before.value, 2047 * t);
      const sweep::LengthCell at = sweep::evaluate_length(o, e, Seq::ones, log2_s, 2048);
      EXPECT_EQ(at.event, LengthEvent::stall);
      EXPECT_EQ(at.value, 2048 * t);
      ASSERT_TRUE(at.value_at_2n.has_value());
      EXPECT_EQ(*at.value_at_2n, 2048 * t);
      EXPECT_EQ(at.rel_err, 0);  // a stall, not yet a loss: the sweep's status is ok there

      const sweep::LengthRun run = sweep::run_lengths(o);
      ASSERT_EQ(run.results.size(), 1u);
      const LengthResult& r = run.results[0];
      ASSERT_TRUE(r.found) << describe(o, r);
      EXPECT_EQ(r.onset.n, 2048u) << describe(o, r);
      EXPECT_EQ(r.onset.event, LengthEvent::stall);
      EXPECT_TRUE(r.violations.empty()) << describe(o, r);
    }
  }
}

TEST(LengthsAnalytic, RoundingOfTheFormulaIsFp16s) {
  // r16 against test_util's reference (a search over every fp16 value), on the values the formula meets and edges.
  for (double v : {0.0, 1.0, 2049.0, 2051.0, 4095.0, 65504.0, 65519.0, 65520.0, 0x1p-24, 0x1p-25, 3 * 0x1p-26,
                   0x1p-5 + 0x1p-16, 8 + 0x1p-8, 511.75, 32752.0 + 32753.0}) {
    EXPECT_EQ(r16(v), test::decode_f16(test::reference_to_f16(v))) << v;
  }
  for (int i = 1; i < 4000; ++i) {
    const double v = i * 16.37 + i * 0x1p-9;
    EXPECT_EQ(r16(v), test::decode_f16(test::reference_to_f16(v))) << v;
  }
}

TEST(LengthsAnalytic, F16KernelsStopWhereTheirLanesAndFoldSay) {
  // Every fp16-accumulating sum, sumsq and dot kernel of this CPU, against the formula from its lanes and fold order:
  // at s = 1 (the 64-lane avx2 sum overflows before its lanes fill) and at s = 2^-8 (where they fill).
  const std::vector<Experiment> es = experiments_where(f16_accumulating);
  ASSERT_FALSE(es.empty());
  const std::size_t len_max = std::size_t{1} << 18;  // 2048·128 = 262144: every lane count up to avx512's
  LengthOptions o = options(es, {Seq::ones}, {0, -8}, len_max);
  const sweep::LengthRun run = sweep::run_lengths(o);
  ASSERT_EQ(run.results.size(), es.size() * 2);
  for (const LengthResult& r : run.results) {
    const Kernel& k = o.experiments[r.experiment].fwd;
    ASSERT_EQ(k.lanes & (k.lanes - 1), 0u) << k.name << ": fold_lanes folds a power of two";
    const double t = k.op == Op::sum ? std::exp2(r.log2_s) : std::exp2(2 * r.log2_s);
    const Expected x = ones_onset(k.lanes, t, len_max);
    SCOPED_TRACE(describe(o, r));
    ASSERT_NE(x.n, 0u) << "the formula finds no onset below " << len_max;
    ASSERT_TRUE(r.found);
    EXPECT_EQ(r.onset.n, x.n) << "lanes " << k.lanes;
    EXPECT_EQ(r.onset.event, x.event);
    EXPECT_TRUE(r.violations.empty());
    if (x.event == LengthEvent::stall) {
      EXPECT_LE(r.onset.n, 2048u * k.lanes);  // every lane holds 2048 terms from there on
      EXPECT_GT(r.onset.n, 2047u * k.lanes);  // as measured: the fold rounds up by less than one term per lane
    }
    std::printf("  %-28s lanes %3u  s=2^%-3g  onset n = %zu (%s)\n", std::string(k.name).c_str(), k.lanes, r.log2_s,
                r.onset.n, std::string(sweep::length_event_name(r.onset.event)).c_str());
  }
}

TEST(LengthsAnalytic, F32AccumulatorsDoNotStallWithinTheRange) {
  // Every other reduction kernel (f32, f16_f32acc, bf16_f32acc and the scaled fp8 modes accumulate in f32) over the
  // default range: nothing within n <= 2^20, except the fp16 output of f16_f32acc at s = 1, which overflows exactly
  // where the exact result 65520 rounds to inf.
  const std::vector<Experiment> es = experiments_where([](const Kernel& k) { return !f16_accumulating(k); });
  ASSERT_FALSE(es.empty());
#ifdef HALFMAP_TEST_NO_THREADS
  const std::size_t len_max = std::size_t{1} << 17;  // under the emulator: still past the overflow at 65520
#else
  const std::size_t len_max = std::size_t{1} << 20;  // the default range
#endif
  LengthOptions o = options(es, {Seq::ones}, {0, -8}, len_max);
  const sweep::LengthRun run = sweep::run_lengths(o);
  for (const LengthResult& r : run.results) {
    const Kernel& k = o.experiments[r.experiment].fwd;
    SCOPED_TRACE(describe(o, r));
    if (k.mode == Mode::f16_f32acc && r.log2_s == 0) {
      ASSERT_TRUE(r.found);
      EXPECT_EQ(r.onset.n, 65520u);
      EXPECT_EQ(r.onset.event, LengthEvent::fwd_overflow);
      EXPECT_TRUE(std::isinf(r.onset.value));
      EXPECT_EQ(r.onset.exact, 65520.0);
      EXPECT_TRUE(r.violations.empty());
    } else {
      EXPECT_FALSE(r.found) << "an f32 accumulator stops only at 2^24 terms per lane";
    }
  }
}

// ---- grid independence -------------------------------------------------------------------------------------------

TEST(LengthGridIndependence, OnsetDoesNotMoveWithTheCoarseStep) {
  // Powers of 2 against powers of 2^(1/4): where bad(n) is monotone (no violation found) the onset is the same.
  std::vector<Experiment> es = experiments_where(
      [](const Kernel& k) { return k.isa != Isa::peer && (f16_accumulating(k) || k.mode == Mode::f16_f32acc); });
  ASSERT_FALSE(es.empty());
  LengthOptions coarse = options(es, {Seq::ones, Seq::normal}, {0, -8}, std::size_t{1} << 17);
  LengthOptions fine = coarse;
  fine.coarse_step_log2 = 0.25;
  const sweep::LengthRun a = sweep::run_lengths(coarse), b = sweep::run_lengths(fine);
  ASSERT_EQ(a.results.size(), b.results.size());
  std::size_t compared = 0, found = 0;
  for (std::size_t i = 0; i < a.results.size(); ++i) {
    const LengthResult &x = a.results[i], &y = b.results[i];
    SCOPED_TRACE(describe(coarse, x) + " | step 2^0.25: " + describe(fine, y));
    if (x.seq == Seq::ones) {
      EXPECT_TRUE(x.violations.empty());
      EXPECT_TRUE(y.violations.empty());
    }
    if (!x.violations.empty() || !y.violations.empty()) continue;
    ++compared;
    EXPECT_EQ(x.found, y.found);
    if (!x.found || !y.found) continue;
    ++found;
    EXPECT_EQ(x.onset.n, y.onset.n);
    EXPECT_EQ(x.onset.event, y.onset.event);
  }
  EXPECT_GT(found, es.size());  // the ones cases at least, and fp16 sumsq of normal draws
  std::printf("  %zu searches compared, %zu with an onset\n", compared, found);
}

TEST(LengthGridIndependence, CoarseLengths) {
  EXPECT_EQ(sweep::coarse_lengths(16, 1), (std::vector<std::size_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(sweep::coarse_lengths(20, 1), (std::vector<std::size_t>{1, 2, 4, 8, 16, 20}));
  EXPECT_EQ(sweep::coarse_lengths(8, 0.5), (std::vector<std::size_t>{1, 2, 3, 4, 6, 8}));
  EXPECT_EQ(sweep::coarse_lengths(1, 1), (std::vector<std::size_t>{1}));
}

// ---- the inputs and the files ----------------------------------------------------------------------------------

TEST(LengthsInputs, LengthOf4096IsTheSweepsCell) {
  // The random sequences are the sweep's base draws: at n = 4096 the length search's cell is the sweep's.
  for (std::string_view name : {"f16_sum__ref", "f16_f32acc_dot__ref", "f32_sumsq__ref"}) {
    const Experiment e = experiment_named(name);
    for (Seq q : {Seq::normal, Seq::uniform, Seq::lognormal}) {
      SCOPED_TRACE(fmt::format("{} {}", name, sweep::seq_name(q)));
      LengthOptions o = options({e}, {q}, {0}, 4096);
      const sweep::LengthCell c = sweep::evaluate_length(o, e, q, 0, 4096);
      sweep::Options so;
      const sweep::Dist d = q == Seq::normal    ? sweep::Dist::normal
                            : q == Seq::uniform ? sweep::Dist::uniform
                                                : sweep::Dist::lognormal;
      const sweep::Cell cell = sweep::evaluate_cell(so, e, d, 0, std::nullopt);
      EXPECT_EQ(c.value, *cell.fwd_value);
      EXPECT_EQ(c.exact, *cell.fwd_oracle);
      EXPECT_EQ(c.event == LengthEvent::none, cell.status == sweep::Status::ok);
    }
  }
}

TEST(LengthsFiles, SameBytesAcrossThreads) {
#ifdef HALFMAP_TEST_NO_THREADS
  GTEST_SKIP() << "no threads under the emulator; tested natively";
#endif
  std::vector<Experiment> es = experiments_where([](const Kernel& k) { return k.isa == Isa::ref && k.op == Op::sum; });
  LengthOptions one = options(es, {Seq::ones, Seq::lognormal}, {0, -8}, 1 << 12);
  one.threads = 1;
  LengthOptions two = one;
  two.threads = 2;
  const sweep::LengthRun a = sweep::run_lengths(one), b = sweep::run_lengths(two);
  EXPECT_EQ(sweep::lengths_json_text(one, a), sweep::lengths_json_text(two, b));
  EXPECT_EQ(sweep::lengths_markdown_text(one, a), sweep::lengths_markdown_text(two, b));
  EXPECT_NE(sweep::lengths_markdown_text(one, a).find("| f16_sum__ref | 1 | ones | 2^0 | 2048 | stall"),
            std::string::npos);
}

TEST(LengthsOptions, ValidateNamesTheProblem) {
  LengthOptions o = options({experiment_named("f32_sum__ref")}, {Seq::ones}, {0}, 16);
  EXPECT_EQ(sweep::validate(o), "");
  o.len_max = 0;
  EXPECT_NE(sweep::validate(o).find("--len-max"), std::string::npos);
  o.len_max = 16;
  o.coarse_step_log2 = 0;
  EXPECT_NE(sweep::validate(o).find("--len-step"), std::string::npos);
  o.coarse_step_log2 = 1;
  o.experiments = {experiment_named("f32_maxabs__ref")};
  EXPECT_NE(sweep::validate(o).find("sum, sumsq or dot"), std::string::npos);
  EXPECT_THROW(sweep::plan_length_experiments({"softmax"}, {}), std::invalid_argument);
  EXPECT_EQ(sweep::plan_length_experiments({"sum"}, {"ref"}).size(), 6u);  // f32, f16_f32acc, f16, bf16, fp8, mxfp8
}

}  // namespace
}  // namespace halfmap
