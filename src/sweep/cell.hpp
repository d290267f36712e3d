// One (experiment, distribution) pair at any (s, S): inputs drawn once, stored per s, forward per s, gradient per
// S, with the statistics and the status of each cell (README.md, "Results: how to read the sweep"). Internal to
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
  /// The cell at the current s and loss scale 2^log2_S (runs the gradient).
  Cell cell_with_S(double log2_S);

 private:
  void store_inputs(Cell& c);
  void count_outputs(Cell& c);
  void count_gradients(Cell& c);
  Status data_compute_status(const Cell& c) const;

  const Options& o_;
  const Experiment& e_;
  std::unique_ptr<Family> f_;
  bool unit_ready_ = false;
  std::vector<InputStats> stats_;  // per input, from the last store (an unscaled input's are kept)
  Cell fwd_cell_;
};

/// The statistics of a set of outputs against their oracle.
struct OutAcc {
  std::size_t count = 0, nonfinite = 0, oracle_nonzero = 0, zero = 0, subnormal = 0;
  double max_diff = 0, max_oracle = 0;
  bool any_finite = false;
  void add(double got, double oracle, double min_norm);
  /// The normwise relative error max|got - oracle| / max|oracle| over finite pairs; NaN when there is none.
  double rel_err() const;
};

/// The predicates the statuses and the thresholds share (README.md defines each).
bool fwd_lost(const Cell& c, double share, Mode mode);
bool data_flushed(const Cell& c, double share);
bool grad_lost(const Cell& c, double share);

}  // namespace halfmap::sweep
