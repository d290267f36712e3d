// `halfmap diagnose`: which boundary of docs/numerics.md (data, compute, optimization) a user's data crosses first when
// a small dense network is trained on it in fp16 or bf16 as the frameworks train, in mini-batches with dynamic
// loss scaling, and the smallest fix the evidence supports.
//
// The seed model: Dense(hidden, ReLU) -> Dense(1), squared loss averaged over each mini-batch (the frameworks'
// mean reduction). W1 (d×hidden) and W2 (hidden×1) are Glorot-uniform, U(-a, a) with a = sqrt(6/(fan_in +
// fan_out)), drawn with halfmap's xoshiro256** (halfmap/detmath.hpp) seeded by Options::seed; b1 = b2 = 0. It runs
// with halfmap's own kernels: dense_fwd (Act::relu), dense_fwd (identity), mse; backward mse's dp at loss scale S,
// dense_bwd, the ReLU mask (dH = 0 where H = 0), dense_bwd.
//
// Data. The arrays are held once, column by column (Table): as float where the file's dtype converts exactly to
// float (f2, f4, integers and bool of at most 2 bytes), else as double. Each batch is converted from there into a
// path's storage type when it is used (that rounding is the data boundary); nothing else holds a copy. The limit
// is the machine's memory (Table::load refuses an array that needs more than 3/4 of it), not a constant.
//
// Batches. A batch is Options::batch rows (default 32, Keras fit's default; 0: all rows); batch i holds rows
// [i·batch, min((i+1)·batch, rows)), the last one shorter. The compute and gradient sections use the batches in
// this order; the simulation draws them in this order or, with Options::shuffle, from a permutation of the rows
// made anew each epoch (Fisher-Yates with xoshiro256** seeded by the shuffle seed and the epoch).
//
// Paths. A path is a (mode, ISA) pair whose dense_fwd, dense_bwd and mse kernels are all enabled on this CPU. The
// f32 baseline is the best enabled f32 path. The low-precision modes are f16_f32acc, f16 and bf16_f32acc, in that
// order; by default each runs once, on its best enabled ISA (the lower ISAs and the scalar `ref` twins implement
// the same mode); Options::all_paths runs every enabled path, ISAs in the order of cpu.hpp. Options::path_first
// names a path ("<mode>/<isa>") to put first (it must exist; it is added if all_paths is off and it is not a best
// ISA). The f16_f32acc path on the best ISA is marked `keras_like`: fp16 storage with f32 accumulation is what an
// f32-accumulating GEMM does (a GPU's, under Keras mixed_float16; not measured by halfmap). Which
// path a framework's CPU kernels match is measured only as far as the peers (src/peers) show (docs/diagnose.md).
//
// The report, in the order the careful procedure checks it:
//   data          per feature column and for the labels: count, NaN, inf, first row holding NaN/inf, min, max,
//                 p01, p99 (numpy's linear interpolation, over finite values), abs max, mean, std (population),
//                 near-zero spread (max - min <= 1e-6 * max(1, abs max)), and for fp16 and bf16 storage how many
//                 finite values overflow to inf, how many non-zero values flush to zero, how many become subnormal;
//                 and for fp8 (E4M3, E5M2 with current scaling) and the MX formats, the values clipped, flushed,
//                 stored subnormal and lost (Fp8Effect).
//   compute       the f32 baseline's and every low-precision path's forward at the initial weights over every
//                 batch: the mean of the batch losses (as the mse kernel returns them), the largest batch loss,
//                 how many batches are non-finite, and the first stage holding a non-finite value in row order:
//                 "dense_1" (its output, ReLU included), "dense_2" (the prediction), "loss"; with the row and column
//                 of the first such element (for "loss": the first row of the batch whose squared error in f64
//                 exceeds the storage type's largest finite value, else the row at which the running sum does).
//   optimization  per low-precision path, the gradients of every batch (dW1, db1, dW2, db2) at the initial
//                 weights, at loss scale S = 1, 2^15 (Keras) and 2^16 (PyTorch): per batch the non-finite count
//                 and, among the elements non-zero in the f32 baseline's gradients of the same batch at S = 1 (the
//                 reference), the share that are zero ("underflow") and subnormal; reported pooled over batches,
//                 as a distribution over batches (median, p99, max of the share; batches non-finite; batches above
//                 the share) and the worst batches (index, rows). The window of a batch: over S = 2^0 .. 2^40,
//                 S_max = the last power of two before the first S with a non-finite gradient, S_min = the
//                 smallest S whose gradients are finite with an underflow share <= Options::underflow_share
//                 (default 1 %). It is measured on at most kWindowBatches batches (all if fewer; else evenly spaced
//                 ones plus the worst at S = 1 and 2^16), and the window that holds for nearly all of them (all but
//                 the worst 1 %: the 1st-percentile S_max and the 99th-percentile S_min) is reported; empty if
//                 S_min > S_max. Then a simulation of dynamic loss scaling per path and framework (below).
//   verdict       the first boundary crossed, in this order:
//                   1. data: a feature or label holds NaN/inf (named with its column and first row);
//                   2. baseline: the f32 forward or loss is non-finite with finite data;
//                   3. data: a finite value overflows fp16 (or bf16) storage, or more than the underflow share of
//                      a column's non-zero values flush to zero when stored; fix: normalise;
//                   4. compute: a low-precision forward or loss is non-finite on some batch while the baseline's
//                      is finite; fix: keep the named stage's output (or the loss) in float32;
//                   5. optimization: on some low-precision path a simulated scaler fails (Simulation::outcome):
//                      it collapses, keeps skipping after its back-off, or settles where more than the share of
//                      the gradients underflow; fix: a window, a fixed scale, or a layer in float32;
//                   6. ok; with notes on how each framework's scaler behaved on the Keras-like path ("PyTorch
//                      backs off once, to 2^15, then trains"). A scaler that backs off from its initial scale and
//                      then trains is dynamic loss scaling doing its job (docs/numerics.md), not a fault.
//                 Separately from the verdict, `no_loss_scaling` states what happens at S = 1 (a training loop
//                 without LossScaleOptimizer or GradScaler): the pooled underflow share and whether that alone
//                 would stall training (more than half of the gradients zero); a warning when above the share.
//
// Dynamic loss scaling simulation (per low-precision path, Keras and PyTorch defaults, halfmap/loss_scale.hpp:
// initial 2^15 / 2^16, x2 after `growth_interval` consecutive good steps (2000 unless overridden), x0.5 and a
// skipped step on a non-finite gradient; the scale stays at least 2^-126 because the kernels take it as an f32):
// f32 master weights, plain SGD with Options::lr; each step runs the path's forward and backward at the current
// scale on the next batch, then either skips (non-finite gradient) or unscales in f32 and updates. Steps:
// Options::steps, or Options::epochs × batches per epoch, else kDefaultSteps. On each good step the f32 baseline's
// gradient at the same weights is the reference for the underflow share. Reported: the scale's trajectory as runs
// (scale, first step, last step; steps count from 1), the steps skipped (during the initial back-off: before the
// first good step; and after it), the growths, the settled scale (that of the first good step), the lowest scale,
// the final scale, the pooled underflow share over the good steps, the loss of the final weights on the f32
// baseline path over all rows, and the outcome:
//   collapses       no step was good, or the scale fell below 1;
//   keeps_skipping  more skipped steps than log2(initial / final scale) + 1 + growths (a back-off to the final
//                   scale, plus one skip after each growth: what a working scaler does);
//   underflows      more than the underflow share of the gradients are zero over the good steps;
//   trains          none of these.
//
// JSON (render_json), keys in this order, stable:
//   {"halfmap_diagnose": 2, "options": {hidden, seed, batch, steps, epochs (null), shuffle (null), lr,
//    growth_interval (null = framework defaults), underflow_share, all_paths, path_first (null)},
//    "data": {rows, feature_columns, batches, features: [column...], labels: column},
//      column = {name, count, nan, inf, first_nonfinite_row (null), min, max, p01, p99, abs_max, mean, std,
//                near_zero_spread, f16: {overflow, flushed, subnormal}, bf16: {...},
//                fp8: [{format, scale (null for MX), clipped, flushed, subnormal, lost}...]}   (null for undefined
//                stats)
//    "compute": {baseline: forward, paths: [forward...]},
//      forward = {path, mode, isa, storage, keras_like, loss, max_batch_loss, nonfinite_batches, finite,
//                 first_nonfinite: null | {stage, row, column, value, accumulated}}
//    "optimization": {underflow_share, paths: [{path, mode, isa, storage, keras_like, at: [dist at 2^0, 2^15,
//      2^16], window: {batches, excluded, S_min_log2 (null), S_max_log2 (null; 40: finite over the whole search),
//      empty, keras_inside, pytorch_inside, per_batch: [{batch, S_min_log2, S_max_log2}...]},
//      simulations: [{framework, initial_scale, growth_interval, steps, skipped, backoff_skipped, late_skipped,
//                     growths, settled_scale (null), min_scale, final_scale, underflow_share, final_loss, outcome,
//                     runs: [{scale, first_step, last_step}...]}]}]},
//      dist = {scale, count, reference_nonzero, nonfinite, zero, subnormal, underflow_share, subnormal_share,
//              batches, batches_nonfinite, batches_over_share, batch_underflow: {median, p99, max},
//              worst: [{batch, first_row, last_row, nonfinite, underflow_share}...]}
//    "no_loss_scaling": {path, underflow_share, batches_over_share, stalls, warning (null)},
//    "verdict": {boundary: "ok" | "data" | "baseline" | "compute" | "optimization", reason, fix, notes: [...]}}
// Numbers that are not finite are written as the strings "nan", "inf", "-inf".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "halfmap/npy.hpp"
#include "halfmap/progress.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::diagnose {

inline constexpr int kWindowMaxLog2 = 40;           // the window is searched over S = 2^0 .. 2^40
inline constexpr std::size_t kWindowBatches = 256;  // the most batches the window is measured on
inline constexpr std::size_t kDefaultSteps = 200;   // simulation steps when neither steps nor epochs is given
inline constexpr std::size_t kWorstBatches = 3;     // worst batches listed per scale

// Bounds of the options (bad input beyond them: one sentence, exit 2). The data's size is bounded by memory only.
inline constexpr std::size_t kMaxHidden = 1024;
inline constexpr std::size_t kMaxSteps = 10000000;
inline constexpr std::size_t kMaxColumns = 65536;

struct Options {
  std::size_t hidden = 16;
  std::uint64_t seed = 1;
  std::size_t batch = 32;                // rows per batch; 0: all rows in one batch
  std::optional<std::size_t> steps;      // simulation steps (exclusive with epochs)
  std::optional<std::size_t> epochs;     // simulation epochs
  std::optional<std::uint64_t> shuffle;  // seed of a per-epoch row permutation; absent: rows in order
  double lr = 0.01;
  std::optional<std::size_t> growth_interval;  // absent: each framework's default (2000)
  double underflow_share = 0.01;
  bool all_paths = false;             // every enabled path, not only each mode's best ISA
  std::string path_first;             // a path to put first ("<mode>/<isa>"), or empty
  unsigned threads = 0;               // 0: the hardware's
  Progress progress = Progress::off;  // on stderr (include/halfmap/progress.hpp); the CLI sets it
  std::chrono::milliseconds progress_interval = kProgressLineInterval;  // of Progress::lines (a test sets less)
};

/// One sentence describing the first bad option, or empty.
std::string validate(const Options& o);

/// A rows × cols array held column by column (see the header's "Data"); 1-D arrays are one column.
class Table {
 public:
  Table() = default;
  /// From values in memory (row-major; tests and callers that already hold the data).
  static Table from_array(const npy::Array& a);
  /// Reads a .npy file (the formats of halfmap/npy.hpp) straight into columns. Throws npy::Error with one
  /// sentence (missing, not .npy, truncated, unsupported, more than 3/4 of the machine's memory).
  static Table load(const std::string& path);
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  int ndim() const { return ndim_; }
  bool is_f32() const { return f64_.empty(); }
  /// Column c, `rows()` values; exactly one of the two is non-null.
  const float* column_f32(std::size_t c) const { return is_f32() ? f32_.data() + c * rows_ : nullptr; }
  const double* column_f64(std::size_t c) const { return is_f32() ? nullptr : f64_.data() + c * rows_; }
  double at(std::size_t r, std::size_t c) const { return is_f32() ? double(f32_[c * rows_ + r]) : f64_[c * rows_ + r]; }
  std::size_t bytes() const { return f32_.size() * sizeof(float) + f64_.size() * sizeof(double); }

 private:
  std::vector<float> f32_;
  std::vector<double> f64_;
  std::size_t rows_ = 0, cols_ = 0;
  int ndim_ = 0;
  friend struct TableBuilder;
};

/// One sentence describing why the arrays cannot be diagnosed together (mismatched rows, labels with more than
/// one column, empty, too many columns), or empty. Labels may be 1-D or n×1.
std::string check_inputs(const Table& features, const Table& labels, const Options& o);

/// The number of batches per epoch and the simulation's steps.
std::size_t batch_count(std::size_t rows, const Options& o);
std::size_t total_steps(std::size_t rows, const Options& o);

struct StorageEffect {
  std::size_t overflow = 0;   // finite values that become inf
  std::size_t flushed = 0;    // non-zero values that become zero
  std::size_t subnormal = 0;  // stored values that are subnormal
};

/// What storing a column in one fp8 or MX format does (src/diagnose/fp8.cpp), in the order of kFp8Storages:
///   e4m3, e5m2   the whole column cast at once with Transformer Engine's current scaling (fp8_scaling.hpp): every
///                value times s = fp8_max / amax in float32 (amax = max |x| over the column; where amax is not a
///                positive finite number, s = 1), then rounded to nearest even, saturating;
///   mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4_e2m1   OCP MX blocks of 32 consecutive rows (mx.hpp;
///                the last block may be shorter, as if padded with zeros).
/// Values are taken as float32 first (a float64 column rounded once), as a framework would hold them.
struct Fp8Effect {
  std::string format;
  double scale = 0;           // e4m3, e5m2: the scale s the cast used; the MX formats: 0 (one scale per block)
  std::size_t clipped = 0;    // values stored smaller in magnitude than rounding allows: past the largest finite
                              // (per-tensor), or above the top of the element type (MX), and saturated; ±inf too
  std::size_t flushed = 0;    // non-zero finite values stored as zero
  std::size_t subnormal = 0;  // values stored as subnormals of the format or element type
  std::size_t lost = 0;       // MX: values of blocks holding a NaN or an inf (the NaN scale); per-tensor: 0
};
/// The formats of ColumnStats::fp8, in order.
inline constexpr std::string_view kFp8Storages[] = {"e4m3",       "e5m2",       "mxfp8_e4m3", "mxfp8_e5m2",
                                                    "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"};

struct ColumnStats {
  std::string name;  // "x0", "x1", ... or "y"
  std::size_t count = 0, nan = 0, inf = 0, nonzero = 0;
  std::optional<std::size_t> first_nonfinite_row;
  // Over the finite values; NaN when there is none.
  double min = 0, max = 0, p01 = 0, p99 = 0, abs_max = 0, mean = 0, std = 0;
  bool near_zero_spread = false;
  StorageEffect f16, bf16;
  std::vector<Fp8Effect> fp8;  // one per kFp8Storages entry
};

struct DataReport {
  std::size_t rows = 0, batches = 0;
  std::vector<ColumnStats> features;
  ColumnStats labels;
};

struct PathInfo {
  std::string name;  // "<mode>/<isa>", e.g. "f16_f32acc/avx512"
  Mode mode = Mode::f32;
  Isa isa = Isa::ref;
  DType storage = DType::f32;
  bool keras_like = false;
};

struct NonFinite {
  std::string stage;  // dense_1, dense_2, loss
  std::size_t row = 0, column = 0;
  double value = 0;
  /// loss only: no single squared error overflows the storage type, the running sum of them does; `row` is then
  /// the row at which the sum (in f64) first exceeds the storage type's largest finite value.
  bool accumulated = false;
};

struct ForwardReport {
  PathInfo path;
  double loss = 0;            // the mean of the batch losses (f64), non-finite if one is
  double max_batch_loss = 0;  // the largest batch loss (inf or NaN if one is)
  std::size_t nonfinite_batches = 0;
  std::optional<NonFinite> first_nonfinite;  // absent: every value of every batch finite
  bool finite() const { return !first_nonfinite; }
};

struct GradStats {
  double scale = 1;
  std::size_t count = 0, reference_nonzero = 0, nonfinite = 0, zero = 0, subnormal = 0;
  double underflow_share() const { return reference_nonzero ? double(zero) / double(reference_nonzero) : 0.0; }
  double subnormal_share() const { return reference_nonzero ? double(subnormal) / double(reference_nonzero) : 0.0; }
  void add(const GradStats& o) {
    count += o.count;
    reference_nonzero += o.reference_nonzero;
    nonfinite += o.nonfinite;
    zero += o.zero;
    subnormal += o.subnormal;
  }
};

struct BatchRef {
  std::size_t batch = 0, first_row = 0, last_row = 0;  // rows [first_row, last_row]
  std::size_t nonfinite = 0;
  double underflow_share = 0;
};

/// The gradients of every batch at one loss scale.
struct BatchDistribution {
  GradStats pooled;  // summed over the batches
  std::size_t batches = 0, batches_nonfinite = 0, batches_over_share = 0;
  double underflow_median = 0, underflow_p99 = 0, underflow_max = 0;  // of the per-batch shares
  std::vector<BatchRef> worst;  // most non-finite first, then most underflow; at most kWorstBatches
};

/// One measured batch's window (log2; absent: none).
struct BatchWindow {
  std::size_t batch = 0;
  std::optional<int> S_min_log2, S_max_log2;
};

struct LossWindow {
  std::size_t batches = 0, excluded = 0;  // measured on `batches`; the `excluded` worst may lie outside
  std::vector<BatchWindow> per_batch;     // each measured batch's own window, in batch order
  std::optional<int> S_min_log2, S_max_log2;
  bool empty = true;
  bool keras_inside = false, pytorch_inside = false;
};

struct ScaleRun {
  double scale = 0;
  std::size_t first_step = 0, last_step = 0;
};

enum class Outcome { trains, collapses, keeps_skipping, underflows };
std::string_view outcome_name(Outcome o);

struct Simulation {
  std::string framework;  // "keras" or "pytorch"
  double initial_scale = 0;
  std::size_t growth_interval = 0, steps = 0, skipped = 0, backoff_skipped = 0, late_skipped = 0, growths = 0;
  std::optional<double> settled_scale;  // the scale of the first good step
  double min_scale = 0, final_scale = 0, final_loss = 0;
  GradStats good_steps;  // pooled over the good steps, against the f32 reference at the same weights
  Outcome outcome = Outcome::trains;
  std::vector<ScaleRun> runs;
};

struct OptimizationReport {
  PathInfo path;
  BatchDistribution at_1, at_keras, at_pytorch;
  LossWindow window;
  std::vector<Simulation> simulations;
};

struct NoLossScaling {
  std::string path;  // the path it is stated for (the Keras-like one if present)
  double underflow_share = 0;
  std::size_t batches_over_share = 0, batches = 0;
  bool stalls = false;
  std::string warning;  // empty when the share is not exceeded
};

enum class Boundary { ok, data, baseline, compute, optimization };
std::string_view boundary_name(Boundary b);

struct Verdict {
  Boundary boundary = Boundary::ok;
  std::string reason;              // one or more sentences: what was crossed, where
  std::string fix;                 // the smallest fix the evidence supports
  std::vector<std::string> notes;  // how the scalers behaved, and the no-loss-scaling warning
};

struct Report {
  Options options;
  DataReport data;
  ForwardReport baseline;
  std::vector<ForwardReport> compute;
  std::vector<OptimizationReport> optimization;
  NoLossScaling no_loss_scaling;
  Verdict verdict;
};

/// Runs the whole diagnosis. Preconditions: validate(o) and check_inputs(...) are empty (else throws
/// std::invalid_argument with their sentence; also for a --path that names no enabled path).
Report run(const Table& features, const Table& labels, const Options& o);
/// The same on arrays in memory.
Report run(const npy::Array& features, const npy::Array& labels, const Options& o);

/// The verdict from the other sections (run() calls it; exposed for tests).
Verdict decide(const Report& r);

/// The report for people: sections data, compute, optimization, verdict, in that order, lines within 100 columns.
std::string render_text(const Report& r);
/// The report as one JSON object (keys above), with a trailing newline.
std::string render_json(const Report& r);

}  // namespace halfmap::diagnose
