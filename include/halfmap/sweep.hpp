// The sweep: for every kernel and path, over a grid of input scales s and loss scales S, which of the three
// boundaries of docs/numerics.md (data, compute, optimization) is crossed first, and where each is first crossed.
// docs/sweep.md and docs/thresholds.md define every quantity; this header states the contracts.
//
// One experiment per forward kernel of the registry (ops sum, sumsq, maxabs, dot, dense_fwd, mse, softmax,
// softmax_naive, xent); the dense experiment also runs the dense_bwd kernel of the same mode and ISA. A work item
// is an (experiment, distribution) pair; its cells are the grid points (s) for forward-only ops and (s, S) for
// ops with a gradient (dense_fwd, mse, xent). Every result is a pure function of the options: no thread count,
// shard or machine state changes a byte of cells.csv or thresholds.json.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halfmap/progress.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::sweep {

/// Base input distributions, each drawn with halfmap's own PRNG and arithmetic (identical on every machine).
enum class Dist { normal, uniform, lognormal };
inline constexpr std::array<Dist, 3> kAllDists = {Dist::normal, Dist::uniform, Dist::lognormal};
std::string_view dist_name(Dist d);
std::optional<Dist> parse_dist(std::string_view name);

/// The first boundary a cell crosses, in the order data -> compute -> optimization.
enum class Status {
  ok,
  data_nonfinite,  // an input held NaN or inf before it was stored (e.g. --plant-nan)
  data_overflow,   // a finite input became inf when stored
  data_underflow,  // more than the underflow share of the non-zero inputs flushed to zero when stored
  fwd_overflow,    // a forward output (Y, the reduction, the loss) is inf or NaN
  fwd_underflow,   // more than the share of the outputs whose oracle is non-zero are zero, or rel. error > tol
  grad_overflow,   // a gradient is inf or NaN
  grad_underflow,  // more than the share of the gradients whose oracle is non-zero are zero
};
inline constexpr std::array<Status, 8> kAllStatuses = {
    Status::ok,           Status::data_nonfinite, Status::data_overflow, Status::data_underflow,
    Status::fwd_overflow, Status::fwd_underflow,  Status::grad_overflow, Status::grad_underflow};
std::string_view status_name(Status s);

/// The forward tolerance of a precision mode: the largest normwise relative error of the forward outputs that
/// still counts as `ok` (docs/sweep.md, "Statuses", gives the values and how they were chosen).
double forward_tolerance(Mode mode);

/// A grid of scales 2^lo, 2^(lo+step), ..., up to 2^hi (log2 exponents; step > 0). Point i is at exactly
/// lo + i*step, and its scale is det::exp2 of that: the same double on every machine.
struct Grid {
  double lo = 0, hi = 0, step = 1;
  std::size_t size() const;
  double log2_at(std::size_t i) const { return lo + double(i) * step; }
};

struct Sizes {
  std::size_t n = 4096;                                  // reductions, mse, gelu and gelu_tanh
  std::size_t dense_m = 32, dense_k = 64, dense_n = 32;  // dense: X m×k, W k×n, Y m×n
  /// the amplifying dense layer (dense_fwd_amplifying, forward only): X m×k the base draws through ReLU
  /// (post-activation inputs, non-negative), W k×n the base draws unscaled (unit variance: a gain of √k over the
  /// 1/√k of initialisation), the hidden size of a 1024-wide transformer's MLP down-projection
  std::size_t amp_m = 16, amp_k = 4096, amp_n = 16;
  std::size_t softmax_rows = 32, softmax_cols = 64;  // softmax, softmax_naive
  std::size_t xent_rows = 32, xent_cols = 16;        // xent
  std::size_t norm_rows = 8, norm_cols = 1024;       // layernorm, rmsnorm (rows of a hidden size)
  std::size_t attn_len = 32;                         // attention: queries = keys
  /// attention: one experiment per head dimension (BERT-base and GPT-2 heads have 64, Llama's 128)
  std::vector<std::size_t> head_dims{64, 128};
};

/// One experiment: the forward kernel and, for dense, the backward kernel of the same mode and ISA. Kernels are
/// held by value so that tests can run a model twin of a kernel (same name, another function).
struct Experiment {
  Kernel fwd;
  std::optional<Kernel> bwd;
  /// attention: the head dimension d of this experiment (0 for the other ops)
  std::size_t head_dim = 0;
  /// dense: the amplifying layer of Sizes::amp_* (forward only, no bwd) instead of the initialised one
  bool amplifying = false;
  bool has_gradient() const;
  /// The op as the outputs name it: op_name, for attention with the head dimension, "attention_prescale_d64", and
  /// "dense_fwd_amplifying" for the amplifying dense layer.
  std::string op_label() const;
};

/// The experiments of every enabled forward kernel whose op is one the sweep knows, in registry order grouped by
/// op (the order of Op), optionally filtered: `names` are kernel names or op names (dense_bwd, or a dense_bwd
/// kernel's name, selects the dense experiment), `paths` ISA names or mode names (an ISA list and a mode list
/// both apply when both are given). An attention kernel gives one experiment per head dimension of `head_dims`; a
/// dense_fwd kernel two, the initialised layer (with its dense_bwd) and the amplifying one (forward only).
/// Throws std::invalid_argument with one sentence for an unknown name.
std::vector<Experiment> plan_experiments(const std::vector<std::string>& names, const std::vector<std::string>& paths,
                                         const std::vector<std::size_t>& head_dims = Sizes{}.head_dims);

struct Options {
  std::vector<Experiment> experiments;
  std::vector<Dist> dists{kAllDists.begin(), kAllDists.end()};
  Grid s_grid{-40, 40, 0.5};
  /// The input-scale grid of the experiments that reach f32's range (wide_grid_applies): by default 2^-160 ..
  /// 2^140 in steps of 2^2, so that f32 and bf16 storage overflow and flush inside it; none: s_grid for every
  /// experiment (what
  /// --s-min, --s-max and --s-step give).
  std::optional<Grid> wide_s_grid = Grid{-160, 140, 2};
  Grid S_grid{0, 32, 1};
  Sizes sizes;
  /// ε of layernorm (PyTorch's default; Keras's is kLayerNormEpsKeras) and of rmsnorm.
  float layernorm_eps = kLayerNormEpsTorch, rmsnorm_eps = kRmsNormEps;
  /// attention: mask the scores above the diagonal (a decoder's); off by default (an encoder's)
  bool attn_causal = false;
  std::uint64_t seed = 1;
  double underflow_share = 0.001;
  unsigned threads = 1;
  Progress progress = Progress::off;                                    // on stderr (include/halfmap/progress.hpp)
  std::chrono::milliseconds progress_interval = kProgressLineInterval;  // of Progress::lines (a test sets less)
  unsigned shard_k = 1, shard_n = 1;  // run the items i with i % shard_n == shard_k - 1
  /// Test hook: the scaled first input (x, X, p, logits) gets a NaN at this index before it is stored.
  std::optional<std::size_t> plant_nan;
  /// Test hook: explicit base inputs by role, replacing the generated draws (an empty vector keeps the draw).
  /// Roles: reductions x, y; dense X, W (before the division by sqrt(K)), G; mse p, y; softmax x; xent logits.
  std::vector<std::vector<double>> base_override;
};

/// Whether the experiment's default input-scale grid is Options::wide_s_grid: f32 and bf16 storage of sum, sumsq,
/// maxabs, dot, dense_fwd, mse, layernorm, rmsnorm, gelu and gelu_tanh, whose limits lie far beyond fp16's.
bool wide_grid_applies(const Experiment& e);
/// The input-scale grid of one experiment. The amplifying dense layer maps where its output leaves the range, so its
/// grid is the points of its usual one from s = 1 up (the last point alone if every point lies below 1): below 1 it
/// would only repeat the initialised layer's underflow, at sixteen times the cost of scanning it.
Grid s_grid_of(const Options& o, const Experiment& e);

/// Checks sizes, grids, share, shard and hook options; returns one sentence describing the first problem, or
/// empty. run() throws std::invalid_argument with the same sentence.
std::string validate(const Options& o);

/// The statistics of one cell (docs/sweep.md defines each).
struct Cell {
  double log2_s = 0, s = 0;
  std::optional<double> log2_S, S;  // absent for forward-only ops
  Status status = Status::ok;
  // data: the stored inputs
  std::size_t in_count = 0, in_nonfinite = 0, in_nonzero = 0, in_inf = 0, in_flushed = 0, in_subnormal = 0;
  // compute: the forward outputs against the f64 oracle of the stored inputs
  std::size_t fwd_count = 0, fwd_nonfinite = 0, fwd_oracle_nonzero = 0, fwd_zero = 0;
  double fwd_rel_err = 0;  // NaN when no output and oracle is finite
  // every output's terms flushed when stored, or every output of the given data rounds to zero in the output type
  // (docs/thresholds.md: vanished; monotone in s)
  bool fwd_vanished = false;
  std::optional<double> fwd_value, fwd_oracle;  // scalar outputs only (reductions, losses)
  // optimization: the gradients (dense: dX, dW, db; mse: dp; xent: dlogits)
  std::size_t grad_count = 0, grad_nonfinite = 0, grad_oracle_nonzero = 0, grad_zero = 0, grad_subnormal = 0;
  // the first non-finite value in data-flow order
  std::string_view first_stage, first_tensor;  // static names; empty when everything is finite
  std::size_t first_index = 0;
  double first_value = 0;
  // What crossed when the forward is not finite (docs/thresholds.md, "What crossed"): "input" (an input, when
  // stored), "intermediate" (a statistic the kernel reports: the norms' mean and variance, attention's scores),
  // "output" (an output whose f64 oracle itself rounds to inf in the output type) or "arithmetic" (an output that
  // is not finite although its oracle fits the output type: the path's own partial sums, products or exp); empty
  // when the forward is finite.
  std::string_view fwd_crossed;
  // Whether the f64 oracle rounded once to the output type would itself be lost (fwd_lost's test on those values):
  // the output type, not the path's arithmetic, is what loses the forward.
  bool fwd_lost_in_output = false;
};

/// The resolution (log2) of the lattice on which the thresholds over s are found, its coarse spacing and the
/// margin scanned beyond a coarse switch (docs/thresholds.md says why these make the result exact).
inline constexpr double kThresholdLattice = 0x1p-10, kThresholdCoarse = 0.25, kThresholdMargin = 0x1p-4;
/// The same for the loss-scale windows over S, whose scans visit every point of the sub-lattice kWindowScan and
/// bisect each switch between two of its neighbours down to kWindowLattice.
inline constexpr double kWindowLattice = 0x1p-10, kWindowScan = 0x1p-5, kWindowCoarse = 1, kWindowMargin = 0.125;

/// A threshold found on the lattice, or a bound beyond the search range. `text` is how the tables print it.
struct Bound {
  enum class Kind { found, below_grid, above_grid };
  Kind kind = Kind::found;
  double value = 0, log2 = 0;  // found: the reported scale (a lattice point observed); beyond: the range's end
  double bracket_lo = 0, bracket_hi = 0;  // found: log2 of the two adjacent lattice points the switch lies between
  std::string text;
  /// The forward thresholds: what crossed at the bound's lattice point (the stages of Cell::fwd_crossed; for
  /// underflow "input" when the inputs flushed, "output" when the exact result alone is lost in the output type,
  /// else "arithmetic") and the tensor it names; empty where the boundary does not hold at the point. A window's
  /// S_min and S_max: what crossed at the bad lattice point just outside it, the stage and tensor of the cell's
  /// first non-finite value (Cell::first_stage: "gradient" dW, the stored "gradient" dY, ...), or "gradient" with
  /// no tensor where the gradients were flushed; empty where the window reaches the grid's end.
  std::string crossed, tensor;
};

/// One boundary over s. Overflow: `onset` the smallest s at which it holds, `saturation` the start of the last
/// stretch over which it holds up to the range's end. Underflow: `onset` the largest s at which it holds,
/// `saturation` the end of the first stretch over which it holds from the range's start. The band lies between.
struct Boundary {
  Bound onset, saturation;
};

struct Window {
  double s = 0, log2_s = 0;
  Status forward_status = Status::ok;  // the cell's data/compute status at this s, loss scale aside
  /// The largest contiguous interval of good S (every gradient finite, no more than the share flushed), or, when
  /// `empty`, S_min beyond the range's end and S_max the largest S below the first non-finite gradient.
  Bound S_min, S_max;
  bool empty = false;
  /// The smallest and largest good S (log2), and the stretches of bad S between them outside [S_min, S_max].
  std::optional<std::pair<double, double>> good_hull;
  std::vector<std::pair<double, double>> bad_inside;
  // Keras's and PyTorch's initial scales (halfmap/loss_scale.hpp) evaluated directly at this s
  bool keras_inside = false, pytorch_inside = false;
};

struct Thresholds {
  Boundary s_overflow, s_underflow;              // the forward (compute)
  Boundary storage_overflow, storage_underflow;  // the inputs when stored (data), as context: monotone in s
  std::vector<Window> windows;                   // ops with a gradient only, at kWindowScales
};

/// Input scales at which the loss-scale window is reported.
inline constexpr std::array<double, 5> kWindowLog2s = {-8, -4, 0, 4, 8};

struct ItemResult {
  std::size_t index = 0;  // global work-item index: experiment * dists + dist
  std::size_t experiment = 0;
  Dist dist = Dist::normal;
  std::vector<Cell> cells;
  Thresholds thresholds;
};

struct Result {
  std::vector<ItemResult> items;  // this shard's items, in index order
  std::size_t total_items = 0;
  std::size_t cells = 0;
  double seconds = 0;
};

/// Runs the sweep (this shard's items) on opts.threads threads. Throws std::invalid_argument if validate() fails.
Result run(const Options& opts);

/// Evaluates one cell (S absent for forward-only ops or to get the forward part only). For tests.
Cell evaluate_cell(const Options& opts, const Experiment& e, Dist d, double log2_s, std::optional<double> log2_S);

// ---- outputs (src/sweep/{write,markdown,merge,compare}.cpp) -----------------------------------------------------

/// cells.csv: the header line.
std::string csv_header();
/// One row per cell of the item.
std::string csv_rows(const Options& opts, const ItemResult& item);

/// Writes cells.csv, thresholds.json, thresholds.md, meta.json (and shard.json for a shard) into `dir`, each
/// through a temporary file renamed into place. Throws std::runtime_error if a file cannot be written.
void write_outputs(const std::string& dir, const Options& opts, const Result& result, bool sharded);

/// `halfmap merge`: joins shard folders into `out`. Returns one sentence on bad input (exit 2), else empty;
/// throws std::runtime_error when writing fails.
std::string merge(const std::vector<std::string>& dirs, const std::string& out);

/// `halfmap compare`: one cross-machine Markdown table per op. Returns one sentence on bad input, else empty.
std::string compare(const std::vector<std::string>& dirs, const std::string& out_file);

}  // namespace halfmap::sweep
