// `halfmap diagnose`: which boundary of NUMERICS.md (data, compute, optimization) a user's data crosses first when
// a small dense network is trained on it in fp16 or bf16, and the smallest fix the evidence supports.
//
// The seed model: Dense(hidden, ReLU) -> Dense(1), squared loss. W1 (d×hidden) and W2 (hidden×1) are
// Glorot-uniform, U(-a, a) with a = sqrt(6/(fan_in + fan_out)), drawn with halfmap's xoshiro256**
// (halfmap/detmath.hpp, as the sweep's inputs are) seeded by Options::seed; b1 = b2 = 0. It runs with halfmap's
// own kernels: dense_fwd (Act::relu), dense_fwd (identity), mse; backward mse's dp at loss scale S, dense_bwd,
// the ReLU mask (dH = 0 where H = 0), dense_bwd. Everything runs on one thread.
//
// Paths. A path is a (mode, ISA) pair whose dense_fwd, dense_bwd and mse kernels are all enabled on this CPU
// (kernels() with isa_enabled). The f32 baseline is the best enabled f32 path. The low-precision paths are every
// enabled path of the modes f16_f32acc, f16 (per-op or native fp16) and bf16_f32acc, in that order, ISAs in the
// order of cpu.hpp. Keras mixed_float16 (fp16 storage, f32 accumulation) corresponds to f16_f32acc; the one on the
// best ISA is marked `keras_like`. The user's data is rounded once from f64 to each path's storage type: that
// rounding is the data boundary.
//
// The report, in the order the careful procedure checks it:
//   data          per feature column and for the labels: count, NaN, inf, first row holding NaN/inf, min, max,
//                 p01, p99 (numpy's linear interpolation, over finite values), abs max, mean, std (population),
//                 near-zero spread (max - min <= 1e-6 * max(1, abs max)), and for fp16 and bf16 storage how many
//                 finite values overflow to inf, how many non-zero values flush to zero, how many become subnormal.
//   compute       the f32 baseline's and every low-precision path's forward at the initial weights: the loss (as
//                 the mse kernel returns it), whether every value is finite, and the first stage holding a
//                 non-finite value: "dense_1" (its output, ReLU included), "dense_2" (the prediction), "loss"; with
//                 the row and column of the first such element (for "loss": the first row whose squared error
//                 in f64 exceeds the storage type's largest finite value, else row 0).
//   optimization  per low-precision path, the gradients (dW1, db1, dW2, db2 in that order) at loss scale S = 1,
//                 2^15 (Keras) and 2^16 (PyTorch): non-finite count, and among the elements that are non-zero in
//                 the f32 baseline's gradients at S = 1 (the reference) the share that are zero ("underflow") and
//                 the share that are subnormal. The window: over S = 2^0 .. 2^40, S_max = the last power of two
//                 before the first S with a non-finite gradient, S_min = the smallest S whose gradients are finite
//                 with an underflow share <= Options::underflow_share (default 1 %); empty if S_min > S_max or
//                 either is missing. Then a simulation of dynamic loss scaling per path and framework (below).
//   verdict       the first boundary crossed, in this order:
//                   1. data: a feature or label holds NaN/inf (named with its column and first row). This comes
//                      before the baseline: such a value makes the f32 baseline fail too, and naming it is the
//                      smaller fix;
//                   2. baseline: the f32 forward or loss is non-finite with finite data ("the f32 baseline itself
//                      fails: fix the data or the loss first");
//                   3. data: a finite value overflows fp16 (or bf16) storage, or more than the underflow share of
//                      a column's non-zero values flush to zero when stored; fix: normalise with the stated
//                      per-column mean and std;
//                   4. compute: a low-precision forward or loss is non-finite while the baseline's is finite;
//                      fix: keep the named stage's output (or the loss) in float32;
//                   5. optimization: on some low-precision path the gradients underflow at S = 1 (share above the
//                      threshold), or are non-finite at Keras's 2^15 or PyTorch's 2^16, or the window is empty;
//                      fix: a loss scale inside the window (and whether the frameworks' defaults are inside);
//                   6. ok.
//
// Dynamic loss scaling simulation (per low-precision path, Keras and PyTorch defaults, halfmap/loss_scale.hpp:
// initial 2^15 / 2^16, x2 after `growth_interval` consecutive good steps (2000 unless overridden), x0.5 and a
// skipped step on a non-finite gradient; the frameworks' own floors are not modelled, the scale only stays at least
// 2^-126 because the kernels take it as an f32): f32 master weights, plain SGD with Options::lr; each
// step runs the path's forward and backward at the current scale on the next minibatch (rows in order, wrapping;
// Options::batch = 0: the full data), then either skips (non-finite gradient) or unscales in f32 and updates.
// Reported: the scale's trajectory as runs (scale, first step, last step; steps count from 1), the steps skipped,
// the final scale and the loss of the final weights evaluated on the f32 baseline path over the full data.
//
// JSON (render_json), keys in this order, stable:
//   {"halfmap_diagnose": 1, "options": {hidden, seed, steps, lr, batch, growth_interval (null = framework
//    defaults), underflow_share},
//    "data": {rows, feature_columns, features: [column...], labels: column},
//      column = {name, count, nan, inf, first_nonfinite_row (null), min, max, p01, p99, abs_max, mean, std,
//                near_zero_spread, f16: {overflow, flushed, subnormal}, bf16: {...}}   (null for undefined stats)
//    "compute": {baseline: forward, paths: [forward...]},
//      forward = {path, mode, isa, storage, keras_like, loss, finite, first_nonfinite: null |
//                 {stage, row, column, value, accumulated}}
//    "optimization": {underflow_share, paths: [{path, mode, isa, storage, keras_like, at: [grads at 2^0, 2^15,
//      2^16], window: {S_min_log2 (null), S_max_log2 (null; 40: finite over the whole search), empty,
//      keras_inside, pytorch_inside},
//      simulations: [{framework, initial_scale, growth_interval, steps, skipped, final_scale, final_loss,
//                     runs: [{scale, first_step, last_step}...]}]}]},
//      grads = {scale, count, reference_nonzero, nonfinite, zero, subnormal, underflow_share, subnormal_share}
//    "verdict": {boundary: "ok" | "data" | "baseline" | "compute" | "optimization", reason, fix}}
// Numbers that are not finite are written as the strings "nan", "inf", "-inf".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "halfmap/npy.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::diagnose {

inline constexpr int kWindowMaxLog2 = 40;  // the window is searched over S = 2^0 .. 2^40

// Bounds of the options and the inputs (bad input beyond them: one sentence, exit 2).
inline constexpr std::size_t kMaxHidden = 1024;
inline constexpr std::size_t kMaxSteps = 100000;
inline constexpr std::size_t kMaxColumns = 65536;
inline constexpr std::size_t kMaxElements = std::size_t{1} << 26;  // per array (features or labels)
inline constexpr std::size_t kMaxWork = std::size_t{1} << 31;      // rows × columns × hidden

struct Options {
  std::size_t hidden = 16;
  std::uint64_t seed = 1;
  std::size_t steps = 200;
  double lr = 0.01;
  std::size_t batch = 0;  // 0: full batch
  std::optional<std::size_t> growth_interval;  // absent: each framework's default (2000)
  double underflow_share = 0.01;
  bool progress = false;  // a progress line on stderr (the CLI sets it when stderr is a terminal)
};

/// One sentence describing the first bad option, or empty.
std::string validate(const Options& o);
/// One sentence describing why the arrays cannot be diagnosed together (mismatched rows, labels with more than
/// one column, empty, too large), or empty. 1-D features are one column; labels may be 1-D or n×1.
std::string check_inputs(const npy::Array& features, const npy::Array& labels, const Options& o);

struct StorageEffect {
  std::size_t overflow = 0;   // finite values that become inf
  std::size_t flushed = 0;    // non-zero values that become zero
  std::size_t subnormal = 0;  // stored values that are subnormal
};

struct ColumnStats {
  std::string name;  // "x0", "x1", ... or "y"
  std::size_t count = 0, nan = 0, inf = 0, nonzero = 0;
  std::optional<std::size_t> first_nonfinite_row;
  // Over the finite values; NaN when there is none.
  double min = 0, max = 0, p01 = 0, p99 = 0, abs_max = 0, mean = 0, std = 0;
  bool near_zero_spread = false;
  StorageEffect f16, bf16;
};

struct DataReport {
  std::size_t rows = 0;
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
  double loss = 0;
  std::optional<NonFinite> first_nonfinite;  // absent: every value finite
  bool finite() const { return !first_nonfinite; }
};

struct GradStats {
  double scale = 1;
  std::size_t count = 0, reference_nonzero = 0, nonfinite = 0, zero = 0, subnormal = 0;
  double underflow_share() const { return reference_nonzero ? double(zero) / double(reference_nonzero) : 0.0; }
  double subnormal_share() const { return reference_nonzero ? double(subnormal) / double(reference_nonzero) : 0.0; }
};

struct LossWindow {
  std::optional<int> S_min_log2, S_max_log2;
  bool empty = true;
  bool keras_inside = false, pytorch_inside = false;
};

struct ScaleRun {
  double scale = 0;
  std::size_t first_step = 0, last_step = 0;
};

struct Simulation {
  std::string framework;  // "keras" or "pytorch"
  double initial_scale = 0;
  std::size_t growth_interval = 0, steps = 0, skipped = 0;
  double final_scale = 0, final_loss = 0;
  std::vector<ScaleRun> runs;
};

struct OptimizationReport {
  PathInfo path;
  GradStats at_1, at_keras, at_pytorch;
  LossWindow window;
  std::vector<Simulation> simulations;
};

enum class Boundary { ok, data, baseline, compute, optimization };
std::string_view boundary_name(Boundary b);

struct Verdict {
  Boundary boundary = Boundary::ok;
  std::string reason;  // one or more sentences: what was crossed, where
  std::string fix;     // the smallest fix the evidence supports
};

struct Report {
  Options options;
  DataReport data;
  ForwardReport baseline;
  std::vector<ForwardReport> compute;
  std::vector<OptimizationReport> optimization;
  Verdict verdict;
};

/// Runs the whole diagnosis. Preconditions: validate(o) and check_inputs(...) are empty (else throws
/// std::invalid_argument with their sentence).
Report run(const npy::Array& features, const npy::Array& labels, const Options& o);

/// The verdict from the other sections (run() calls it; exposed for tests).
Verdict decide(const Report& r);

/// The report for people: sections data, compute, optimization, verdict, in that order, lines within 100 columns.
std::string render_text(const Report& r);
/// The report as one JSON object (keys above), with a trailing newline.
std::string render_json(const Report& r);

}  // namespace halfmap::diagnose
