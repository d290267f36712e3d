// The length search of include/halfmap/lengths.hpp (docs/thresholds.md, "Lengths: where a reduction stops"): per
// kernel × sequence × scale, a coarse scan over n, a bisection on the integers and a check above the onset. Each
// length is one sweep cell, computed by the sweep's Runner on the prefix of the sequence, so the statuses are the
// sweep's own.
#include "halfmap/lengths.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "halfmap/atomic_file.hpp"
#include "halfmap/detmath.hpp"
#include "halfmap/kernel_spec.hpp"
#include "halfmap/storage.hpp"
#include "sweep/cell.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

// ---- names -------------------------------------------------------------------------------------------------------

std::string_view seq_name(Seq q) {
  switch (q) {
    case Seq::ones:
      return "ones";
    case Seq::normal:
      return "normal";
    case Seq::uniform:
      return "uniform";
    case Seq::lognormal:
      return "lognormal";
  }
  return "?";
}

std::optional<Seq> parse_seq(std::string_view name) {
  for (Seq q : kAllSeqs) {
    if (seq_name(q) == name) return q;
  }
  return std::nullopt;
}

std::string_view length_event_name(LengthEvent e) {
  switch (e) {
    case LengthEvent::none:
      return "none";
    case LengthEvent::data_overflow:
      return "data_overflow";
    case LengthEvent::data_underflow:
      return "data_underflow";
    case LengthEvent::fwd_overflow:
      return "fwd_overflow";
    case LengthEvent::fwd_underflow:
      return "fwd_underflow";
    case LengthEvent::stall:
      return "stall";
  }
  return "?";
}

bool stall_applies(Op op, Seq q) { return q == Seq::ones || op == Op::sumsq; }

namespace {

bool length_op(Op op) { return op == Op::sum || op == Op::sumsq || op == Op::dot; }

Dist dist_of(Seq q) {
  switch (q) {
    case Seq::uniform:
      return Dist::uniform;
    case Seq::lognormal:
      return Dist::lognormal;
    default:
      return Dist::normal;
  }
}

/// A sequence's first elements: x (2·len_max, for a stall check at len_max) and y (dot's second input; 2·len_max
/// for `ones`, len_max otherwise).
struct Draws {
  std::vector<double> x, y;
};

Draws draws_of(const LengthOptions& o, Seq q) {
  const std::size_t count = 2 * o.len_max;
  if (q == Seq::ones) return {std::vector<double>(count, 1.0), std::vector<double>(count, 1.0)};
  // The sweep's base draws of the reductions (Setup::base): the stream (seed, "reduce", dist, role), drawn in order,
  // so that the first n are the inputs of length n, and the first 4096 the sweep's own.
  const std::string_view stream = sweep_family_name(SweepFamily::reduce);
  // y is dot's, whose stall is checked on `ones` only: len_max elements suffice.
  return {stream_draw(o.seed, stream, dist_of(q), 0, count), stream_draw(o.seed, stream, dist_of(q), 1, o.len_max)};
}

LengthEvent event_of(Status s) {
  switch (s) {
    case Status::ok:
      return LengthEvent::none;
    case Status::data_nonfinite:  // only with --plant-nan, which the length search does not take
    case Status::data_overflow:
      return LengthEvent::data_overflow;
    case Status::data_underflow:
      return LengthEvent::data_underflow;
    case Status::fwd_overflow:
      return LengthEvent::fwd_overflow;
    case Status::fwd_underflow:
      return LengthEvent::fwd_underflow;
    case Status::grad_overflow:
    case Status::grad_underflow:
      break;  // the reductions have no gradient
  }
  return LengthEvent::none;
}

/// One kernel × sequence × scale: every length evaluated once (memoised), the search and its check.
class Search {
 public:
  Search(const LengthOptions& o, const Experiment& e, Seq q, double log2_s, const Draws& d)
      : o_(o), e_(e), q_(q), log2_s_(log2_s), d_(d) {}

  LengthCell cell(std::size_t n) {
    const Eval& a = at(n);
    LengthCell c;
    c.n = n;
    c.value = a.value;
    c.exact = a.exact;
    c.rel_err = a.rel_err;
    c.event = event_of(a.status);
    if (c.event == LengthEvent::none && stall_applies(e_.fwd.op, q_)) {
      const Eval& b = at(2 * n);
      if (std::isfinite(a.value) && std::isfinite(b.value) && a.value == b.value && a.rounded != b.rounded) {
        c.event = LengthEvent::stall;
        c.value_at_2n = b.value;
        c.exact_at_2n = b.exact;
      }
    }
    return c;
  }

  bool bad(std::size_t n) { return cell(n).event != LengthEvent::none; }
  /// The length evaluated last (the one that threw, when a kernel throws).
  std::size_t last_n() const { return last_n_; }

  LengthResult run(const std::vector<std::size_t>& coarse) {
    LengthResult r;
    r.seq = q_;
    r.log2_s = log2_s_;
    std::size_t good = 0, first_bad = 0, pi = 0;
    for (std::size_t i = 0; i < coarse.size(); ++i) {
      if (bad(coarse[i])) {
        first_bad = coarse[i];
        pi = i;
        break;
      }
      good = coarse[i];
    }
    if (first_bad != 0) {
      // bisection on the integers: `good` good (or 0, no length), `first_bad` bad, down to adjacent lengths
      std::size_t lo = good, hi = first_bad;
      while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        (bad(mid) ? hi : lo) = mid;
      }
      r.found = true;
      r.onset = cell(hi);
      // the check: the margin above the onset and the coarse lengths above the first bad one must all be bad
      r.check_lo = hi + 1;
      r.check_hi = std::min(hi + o_.check_margin, o_.len_max);
      for (std::size_t m = hi + 1; m <= r.check_hi; ++m) {
        if (!bad(m)) r.violations.push_back(m);
      }
      for (std::size_t i = pi + 1; i < coarse.size(); ++i) {
        if (!bad(coarse[i])) r.violations.push_back(coarse[i]);
      }
      std::sort(r.violations.begin(), r.violations.end());
      r.violations.erase(std::unique(r.violations.begin(), r.violations.end()), r.violations.end());
    }
    r.evaluations = memo_.size();
    return r;
  }

 private:
  struct Eval {
    Status status = Status::ok;
    double value = 0, exact = 0, rel_err = 0;
    double rounded = 0;  // the exact result rounded once to the output type
  };

  const Eval& at(std::size_t n) {
    if (auto it = memo_.find(n); it != memo_.end()) return it->second;
    last_n_ = n;
    // One sweep cell of length n: the Runner stores the prefix at s, runs the kernel and judges the result.
    Options so;
    so.seed = o_.seed;
    so.underflow_share = o_.underflow_share;
    so.sizes.n = n;
    so.base_override.emplace_back(d_.x.begin(), d_.x.begin() + std::ptrdiff_t(n));
    if (n > d_.x.size() || (e_.fwd.op == Op::dot && n > d_.y.size())) {
      throw std::logic_error(fmt::format("length {} beyond the sequence's draws", n));
    }
    if (e_.fwd.op == Op::dot) so.base_override.emplace_back(d_.y.begin(), d_.y.begin() + std::ptrdiff_t(n));
    Runner runner(so, e_, dist_of(q_));
    runner.set_s(log2_s_);
    const Cell& c = runner.forward_cell();
    Eval ev;
    ev.status = c.status;
    ev.value = c.fwd_value.value_or(0);
    ev.exact = c.fwd_oracle.value_or(0);
    ev.rel_err = c.fwd_rel_err;
    std::uint32_t scratch = 0;
    ev.rounded = store(e_.fwd.storage, &scratch, 0, ev.exact);
    return memo_.emplace(n, ev).first->second;
  }

  const LengthOptions& o_;
  const Experiment& e_;
  Seq q_;
  double log2_s_;
  const Draws& d_;
  std::map<std::size_t, Eval> memo_;
  std::size_t last_n_ = 0;
};

constexpr double kMaxLog2 = 1000;  // as the sweep's grids

}  // namespace

// ---- planning --------------------------------------------------------------------------------------------------

std::vector<Experiment> plan_length_experiments(const std::vector<std::string>& names,
                                                const std::vector<std::string>& paths) {
  std::vector<Experiment> all = plan_experiments(names, paths);
  std::vector<Experiment> out;
  for (Experiment& e : all) {
    if (length_op(e.fwd.op)) out.push_back(std::move(e));
  }
  if (out.empty()) {
    throw std::invalid_argument(
        "no enabled sum, sumsq or dot kernel matches the --kernels and --paths given (the length search covers "
        "those reductions only).");
  }
  return out;
}

std::string validate(const LengthOptions& o) {
  if (o.experiments.empty()) return "no kernel selected.";
  for (const Experiment& e : o.experiments) {
    if (!length_op(e.fwd.op)) {
      return fmt::format("kernel {} is not a sum, sumsq or dot: the length search covers those only.", e.fwd.name);
    }
  }
  if (o.seqs.empty()) return "no sequence selected.";
  if (o.log2_scales.empty()) return "--len-scales needs at least one scale.";
  for (double l : o.log2_scales) {
    if (!std::isfinite(l) || std::fabs(l) > kMaxLog2) {
      return fmt::format("--len-scales must stay within 2^-{} .. 2^{}.", kMaxLog2, kMaxLog2);
    }
  }
  if (o.len_max == 0 || o.len_max > kMaxLength) {
    return fmt::format("--len-max must be between 1 and {} (2^23).", kMaxLength);
  }
  if (!std::isfinite(o.coarse_step_log2) || !(o.coarse_step_log2 > 0) || o.coarse_step_log2 > 16) {
    return "--len-step must be above 2^0 and at most 2^16 (a log2 step in (0, 16]).";
  }
  if (!(o.underflow_share >= 0 && o.underflow_share < 1)) return "--underflow-share must be in [0, 1).";
  if (o.threads == 0 || o.threads > 1024) return "--threads must be between 1 and 1024.";
  return {};
}

std::vector<std::size_t> coarse_lengths(std::size_t len_max, double step_log2) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0;; ++k) {
    const double v = std::round(det::exp2(double(k) * step_log2));
    if (!(v <= double(len_max))) break;
    const auto n = std::size_t(v);
    if (out.empty() || n > out.back()) out.push_back(n);
  }
  if (out.empty() || out.back() != len_max) out.push_back(len_max);
  return out;
}

// ---- running ---------------------------------------------------------------------------------------------------

LengthCell evaluate_length(const LengthOptions& o, const Experiment& e, Seq q, double log2_s, std::size_t n) {
  if (n == 0 || n > o.len_max) throw std::invalid_argument("evaluate_length: n outside [1, len_max].");
  const Draws d = draws_of(o, q);
  Search s(o, e, q, log2_s, d);
  return s.cell(n);
}

LengthRun run_lengths(const LengthOptions& o) {
  if (std::string err = validate(o); !err.empty()) throw std::invalid_argument(err);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::size_t> coarse = coarse_lengths(o.len_max, o.coarse_step_log2);
  std::vector<Draws> draws;
  for (Seq q : o.seqs) draws.push_back(draws_of(o, q));

  LengthRun run;
  const std::size_t nq = o.seqs.size(), ns = o.log2_scales.size();
  run.results.resize(o.experiments.size() * nq * ns);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < run.results.size() && !failed.load();) {
      try {
        const std::size_t ei = i / (nq * ns), qi = (i / ns) % nq, si = i % ns;
        const Experiment& e = o.experiments[ei];
        Search s(o, e, o.seqs[qi], o.log2_scales[si], draws[qi]);
        LengthResult r;
        try {
          r = s.run(coarse);
        } catch (const std::exception& x) {
          // A peer library may refuse a length (oneDNN refuses a reduction of one element); halfmap's own kernels
          // take every length, so anything they throw is a bug and ends the run.
          if (e.fwd.isa != Isa::peer) throw;
          r = LengthResult{};
          r.seq = o.seqs[qi];
          r.log2_s = o.log2_scales[si];
          r.refused = x.what();
          r.refused_n = s.last_n();
        }
        r.experiment = ei;
        run.results[i] = std::move(r);  // each item writes only its own slot
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  const unsigned nthreads = std::max(1u, std::min<unsigned>(o.threads, unsigned(run.results.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace halfmap::sweep
