// One (experiment, distribution) pair at any (s, S): inputs drawn once, stored per s, forward per s, gradient per
// S, with the statistics and the status of each cell (docs/sweep.md). Internal to
// src/sweep.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "halfmap/sweep.hpp"
#include "sweep/experiment.hpp"

namespace halfmap::sweep {

/// What storing one input did: the Runner's counts of it, and its first non-finite value before and after
/// storage (kNone: none).
inline constexpr std::size_t kNone = std::size_t(-1);
struct InputStats {
  std::size_t count = 0, nonfinite = 0, nonzero = 0, inf = 0, flushed = 0, subnormal = 0;
  std::size_t first_given = kNone, first_stored = kNone;
  bool valid = false;
};

/// Not thread-safe: one per work item; buffers are allocated once and reused.
class Runner {
 public:
  Runner(const Options& o, const Experiment& e, Dist d);
  /// Stores the inputs at scale 2^log2_s, runs the forward, and fills the data and compute part of the cell.
  void set_s(double log2_s);
  /// The cell at the current s, loss scale aside.
  const Cell& forward_cell() const { return fwd_cell_; }
  /// The forward output's name ("Y", "loss", an op name).
  std::string_view out_name() const { return f_->out_name(); }
  /// The cell at the current s and loss scale 2^log2_S (runs the gradient).
  Cell cell_with_S(double log2_S);

 private:
  void store_inputs(Cell& c);
  void count_outputs(Cell& c);
  void count_gradients(Cell& c);
  Status data_compute_status(const Cell& c) const;
  /// Whether every output of the given (unstored) data at scale s rounds to zero in the output type.
  bool below_range(double s);

  const Options& o_;
  const Experiment& e_;
  std::unique_ptr<Family> f_;
  bool unit_ready_ = false;
  std::vector<InputStats> stats_;    // per input, from the last store (an unscaled input's are kept)
  std::optional<double> given_max_;  // the family's given_max_at_unit_scale(), computed on first use
  Cell fwd_cell_;
};

/// The statistics of a set of outputs against their oracle.
struct OutAcc {
  std::size_t count = 0, nonfinite = 0, oracle_nonzero = 0, zero = 0, subnormal = 0;
  double max_diff = 0, max_oracle = 0, max_cond = 0;
  bool any_finite = false;
  /// One output: the kernel's value, its oracle, its condition scale (the sum of its terms' magnitudes; |oracle|
  /// where the terms cannot cancel) and the output type's smallest normal.
  void add(double got, double oracle, double cond, double min_norm);
  /// The normwise relative error over finite pairs, max|got - oracle| / max(max|oracle|, u max cond), u the output
  /// type's unit roundoff (docs/thresholds.md: an exact result below one rounding unit of its terms'
  /// magnitude is cancellation, and its error is measured against that unit); NaN when there is no finite pair.
  double rel_err(double u) const;
};

/// The unit roundoff of a storage type: 2^-11 (fp16), 2^-8 (bf16), 2^-24 (f32).
double unit_roundoff(DType t);

/// The predicates the statuses and the thresholds share (docs/sweep.md defines each).
bool fwd_lost(const Cell& c, double share, Mode mode);
bool data_flushed(const Cell& c, double share);
bool grad_lost(const Cell& c, double share);

}  // namespace halfmap::sweep
