// The length axis of the reductions (`halfmap sweep --lengths`): for each reduction kernel (sum, sumsq, dot), input
// sequence and input scale s, the smallest length n at which its forward is bad. docs/thresholds.md ("Lengths:
// where a reduction stops") defines every quantity; this header states the contracts.
//
// * Inputs of length n are the first n elements of one fixed sequence per name (`ones`, or the sweep's base draws
//   of the reductions), stored at scale s as the sweep stores them: a shorter input is a prefix of a longer one.
// * bad(n): the cell of length n is not `ok` by the sweep's statuses (the sweep's own Runner computes it), or the
//   result stalls: f(2n) = f(n), both finite, while the exact result rounded once to the output type moved. The
//   stall is checked only where every term has one sign (the sequence `ones`, and sumsq of any sequence).
// * The onset is found by a coarse scan of the lengths round(2^(k·step)) and a bisection on the integers, which is
//   exact when bad(n) is monotone in n; the lengths above the onset are evaluated again and every good one is
//   reported as a violation of that assumption.
// Every result is a pure function of the options: no thread count changes a byte of lengths.json or lengths.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "halfmap/sweep.hpp"

namespace halfmap::sweep {

/// The input sequences of the length search: `ones` (every element 1, y too) and the sweep's three distributions.
enum class Seq { ones, normal, uniform, lognormal };
inline constexpr std::array<Seq, 4> kAllSeqs = {Seq::ones, Seq::normal, Seq::uniform, Seq::lognormal};
std::string_view seq_name(Seq q);
std::optional<Seq> parse_seq(std::string_view name);

/// What makes a length bad: a sweep status other than ok (data_nonfinite cannot occur), or a stall.
enum class LengthEvent { none, data_overflow, data_underflow, fwd_overflow, fwd_underflow, stall };
std::string_view length_event_name(LengthEvent e);

/// Whether the stall criterion applies to an op on a sequence: every term of one sign (ones; sumsq).
bool stall_applies(Op op, Seq q);

struct LengthOptions {
  /// Experiments of the ops sum, sumsq and dot only (plan_length_experiments).
  std::vector<Experiment> experiments;
  std::vector<Seq> seqs{kAllSeqs.begin(), kAllSeqs.end()};
  /// The input scales, as log2 s.
  std::vector<double> log2_scales{0, -8};
  /// The largest length searched (a stall check at n also evaluates 2n).
  std::size_t len_max = std::size_t{1} << 20;
  /// The coarse scan's step, log2: the lengths round(2^(k·step)). 1: the powers of two.
  double coarse_step_log2 = 1;
  /// How many lengths above the onset the check evaluates again.
  std::size_t check_margin = 64;
  std::uint64_t seed = 1;
  double underflow_share = 0.001;
  unsigned threads = 1;
};

/// The largest len_max accepted: a stall check at len_max evaluates 2·len_max elements, the sweep's limit of 2^24.
inline constexpr std::size_t kMaxLength = std::size_t{1} << 23;

/// One length evaluated: the event (none when good), the result f(n), the exact result E(n) of the stored inputs
/// and the normwise relative error as the sweep measures it; for a stall, f(2n).
struct LengthCell {
  std::size_t n = 0;
  LengthEvent event = LengthEvent::none;
  double value = 0, exact = 0, rel_err = 0;
  std::optional<double> value_at_2n, exact_at_2n;
};

/// The search of one kernel × sequence × scale.
struct LengthResult {
  std::size_t experiment = 0;
  Seq seq = Seq::ones;
  double log2_s = 0;
  /// The onset: found (cell.n the smallest bad length the search saw) or none within [1, len_max].
  bool found = false;
  LengthCell onset;
  /// The check: the lengths [check_lo, check_hi] (none when check_lo > check_hi: the onset is len_max) and the
  /// coarse lengths above the first bad one were evaluated again; the good ones among them break monotonicity.
  std::size_t check_lo = 0, check_hi = 0;
  std::vector<std::size_t> violations;
  std::size_t evaluations = 0;
  /// A peer kernel whose library threw at length refused_n: its message (the search stopped there).
  std::optional<std::string> refused;
  std::size_t refused_n = 0;
};

struct LengthRun {
  std::vector<LengthResult> results;  // experiment-major, then sequence, then scale
  double seconds = 0;
};

/// The experiments of the length search: plan_experiments (same names, paths and errors) restricted to sum,
/// sumsq and dot. Throws std::invalid_argument with one sentence when nothing remains.
std::vector<Experiment> plan_length_experiments(const std::vector<std::string>& names,
                                                const std::vector<std::string>& paths);

/// One sentence describing the first problem of the options, or empty. run_lengths() throws with it.
std::string validate(const LengthOptions& o);

/// The coarse lengths: round(2^(k·step)) for k = 0, 1, ... while at most len_max (duplicates dropped), then
/// len_max itself.
std::vector<std::size_t> coarse_lengths(std::size_t len_max, double step_log2);

/// Every search, on o.threads threads. Throws std::invalid_argument if validate() fails.
LengthRun run_lengths(const LengthOptions& o);

/// One length of one experiment (for tests): the event and values of bad(n) as the search sees them.
LengthCell evaluate_length(const LengthOptions& o, const Experiment& e, Seq q, double log2_s, std::size_t n);

/// Writes lengths.json and lengths.md into `dir` (created), each through a temporary file renamed into place.
void write_length_outputs(const std::string& dir, const LengthOptions& o, const LengthRun& run);
/// The two documents' texts, for tests.
std::string lengths_json_text(const LengthOptions& o, const LengthRun& run);
std::string lengths_markdown_text(const LengthOptions& o, const LengthRun& run);

}  // namespace halfmap::sweep
