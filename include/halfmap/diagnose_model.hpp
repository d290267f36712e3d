// `halfmap diagnose --model net.onnx`: the user's own network (include/halfmap/onnx.hpp) run layer by layer on the
// user's rows in f32 and in each precision mode, and which layer crosses which boundary first.
//
// Batches are those of include/halfmap/diagnose.hpp (Options::batch rows, in order; for a rank-3 input,
// onnx::Network::seq > 0, Options::batch sequences of seq rows, one token per row). Each batch is stored once in
// each path's storage type (that rounding is the data boundary) and run through the layers with halfmap's kernels
// of the path's mode:
//   dense      dense_fwd (identity), the weights and bias rounded once from the file's values to the storage type
//              (what a mixed-precision framework does with its float32 master weights);
//   gelu, gelu_tanh, layernorm (ε from the file), rmsnorm, softmax   the kernels of those ops;
//   attention  per sequence, the attention_prescale or attention_postscale kernel of the head's placement on the
//              [q | k | v] rows its fused projection (a dense layer) wrote, causal as read; backward the same
//              kernel's, its dq, dk and dv written side by side as that dense layer's output gradient. Its
//              product_max_abs is the largest finite |q·kᵀ| of the kernel's stored scores (postscale: S·√d);
//   relu, sigmoid, tanh   elementwise: widened exactly, computed in f32 (relu: x < 0 ? 0 : x, NaN passing;
//              sigmoid: 1 / (1 + exp_f32(-x)); tanh: tanhf) and rounded once to the storage type.
// A path is a precision mode on an ISA (as the seed model's, diagnose.hpp "Paths"): the f32 baseline on its best
// ISA, then f16_f32acc, f16 and bf16_f32acc, each on its best ISA (Options::all_paths: every ISA). A layer runs the
// mode's kernel of its op on the path's ISA, or, where that ISA has none, on the highest ISA below it that has one
// (the report names every kernel used).
//
// fp8 and MX (LayerForward::fp8): per layer, what casting the f32 baseline's outputs to each fp8 and MX format
// would do, batch by batch, as an fp8 training step casts a GEMM's input (the counts of diagnose.hpp's Fp8Effect).
//
// Per path and layer, over every batch: the largest finite |y| and the headroom to the storage type's largest
// finite value in binades, log2(max_finite / max|y|); how many outputs are not finite and the first (batch, row,
// column); and the flush share: among the f32 baseline's outputs of the same layer and batch that matter at the
// path's precision (|y| above half an ulp of its row's largest |y| in the storage type, and non-zero when stored
// in it), how many are zero here. So it counts what the path's arithmetic lost (a row zeroed by an overflowed
// variance), not the storage type's range or the tails below the row's precision (GELU's 1 + erf(x) cancelling
// to zero in fp16 for x < -4, where f32 gives 1e-4 beside a row maximum of 10).
//
// With a loss (Loss, below; `--loss mse|xent --labels y.npy`): per batch, the loss kernel of the path's mode on
// the batch's rows at loss scale S (mse: dp = 2S/n·(p − y); xent: dlogits = S/rows·(p − onehot)), then every layer
// backward with the mode's kernels (dense_bwd; the gelu and norm kernels' backward; relu, sigmoid, tanh and
// softmax elementwise in f32 from the stored x or y, each dx rounded once). The f32 baseline runs at S = 1; each
// low-precision path at S = 1, 2^15 (Keras's initial scale) and 2^16 (PyTorch's). Per path: the mean of the batch
// losses and the batches whose loss is not finite; per layer and scale, pooled over the batches, GradStats of its
// parameter gradients (dW and db; dγ and dβ) and of its input's gradient against the baseline's at S = 1 of the
// same batch: zero where f32's is non-zero is underflow. no_loss_scaling names the layer whose parameter
// gradients underflow most at S = 1 on the Keras-like path, with a warning when that passes the underflow share.
// The loss-scale window (NetWindow, below) is measured on at most kModelWindowBatches batches, evenly spaced from
// the first: per layer, S_max is the last power of two before the first S whose gradients (parameters or input)
// are not finite, S_min the smallest S at which they are finite with an underflow share of the parameter
// gradients of at most Options::underflow_share (of the input gradient where the layer has no parameters); the
// layer's window holds for every measured batch (the largest S_min, the smallest S_max); the network's is the
// intersection of its layers', and names the layers that set its ends.
//
// Training (`--train STEPS`, Options::steps, with a loss): the checkpoint trained on from the file's weights, on
// every low-precision path with Keras's and PyTorch's dynamic loss scaling as the seed model's simulation
// (diagnose.hpp: initial 2^15 / 2^16, x2 after Options::growth_interval good steps, x0.5 and a skipped step on a
// non-finite gradient), plain SGD (Options::lr) on float32 master weights rounded to the path's storage type at
// every step; step k trains on batch (k − 1) mod batches, in order. A step's gradient is every layer's parameter
// gradients; on a good step the f32 baseline's at the same weights and rows is the reference of the underflow
// share. Reported per path and framework as diagnose.hpp's Simulation (the scale's runs, the steps skipped, the
// growths, the outcome), final_loss the mean batch loss of the final weights on the f32 baseline path.
//
// The verdict, the first that holds:
//   1. data: a feature is NaN or inf (its column and first row);
//   2. data: an initializer holds NaN or inf (named, with the first index): the weights are bad;
//   3. baseline: the f32 forward is not finite at some layer with finite data and weights (or its loss is not);
//   4. data: a finite feature or weight overflows the storage type of a low-precision path run (fp16: |v| ≥
//      65520), or more than Options::underflow_share of a column's non-zero values flush to zero when stored;
//   5. compute: a low-precision path's layer output is not finite while the baseline's is finite, or collapses:
//      more than Options::underflow_share of its outputs non-zero in f32 are zero (an fp16 variance that
//      overflowed makes 1/√var zero and the whole row zero, without an inf); the earliest such layer in the
//      network (over the paths, in report order), with the baseline's max|y| there and each other path's
//      headroom at that layer; fix: keep that layer in float32, or normalise its input;
//      With a loss, after the layers: the loss is not finite on a low-precision path (layer "loss"); fix: keep
//      the loss in float32;
//   6. optimization (with --train): a simulated scaler fails on a low-precision path (collapses, keeps skipping
//      after its back-off, or settles where the gradients underflow), with the window where it was measured;
//      optimization (with a loss): a low-precision path's window is empty: no loss scale keeps every layer's
//      gradients finite and above the underflow share; names the layer that needs S >= 2^a and the one that
//      overflows above 2^b; fix: keep one of them in float32;
//   7. ok, with the tightest layer of each low-precision path (its smallest headroom).
// Notes follow every verdict: the no-loss-scaling warning, per path the first layer whose gradients overflow
// at 2^15 or 2^16 (where a dynamic scaler backs off), and with --train how each scaler behaved on the Keras path.
//
// JSON (render_model_json), keys in this order:
//   {"halfmap_diagnose_model": 1, "options": {loss ("none" | "mse" | "xent"), batch, all_paths, path_first (null),
//    underflow_share, train (null | steps), lr, growth_interval (null = the frameworks')},
//    "model": {file, producer, ir_version, opset, input, output, features, seq (0: rows),
//              layers: [{name, kind, ops, in, out, weight (null | {name, stored}), bias (same), epsilon (null),
//                        attention (null | {scale: "prescale" | "postscale", causal})}]},
//    "data": {rows, batches, features: [column...]}      (column as in diagnose.hpp's JSON)
//    "weights": [{name, stored, count, nan, inf, abs_max, f16_overflow, bf16_overflow}],
//    "paths": [{path, mode, isa, storage, keras_like, baseline, finite,
//               layers: [{name, kernel, count, max_abs, max_abs_log2 (null), product_max_abs (null but for
//                         attention), headroom_log2 (null), nonfinite,
//                         first_nonfinite: null | {batch, row, column, value}, reference_nonzero, flushed,
//                         flush_share, fp8: null (but for the baseline) | [{format, clipped, flushed, subnormal,
//                         lost}...]}],
//               loss: null | {loss, nonfinite_batches, first_nonfinite_batch (null)},
//               gradients: [{name, params: null | [dist at 2^0, 2^15, 2^16], input: null | [...],
//                            window: {S_min_log2 (null), S_max_log2 (null)}}],
//               window: null | {batches, S_min_log2 (null), S_max_log2 (null), empty, keras_inside, pytorch_inside,
//                               lower_layer (null), upper_layer (null)},
//               simulations: [simulation...]}],   (with --train, low-precision paths; as in diagnose.hpp's JSON)
//      dist = {scale, count, reference_nonzero, nonfinite, zero, subnormal, underflow_share}
//    "no_loss_scaling": null | {path, layer (null), underflow_share, warning (null)},
//    "verdict": {boundary, layer (null; "loss" for the loss), path (null), reason, fix, notes: [...]}}
// Numbers that are not finite are written as the strings "nan", "inf", "-inf".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "halfmap/diagnose.hpp"
#include "halfmap/onnx.hpp"

namespace halfmap::diagnose {

/// The loss whose gradients are diagnosed: none (the forward only), the squared error against labels of the
/// network's output width (mean over the batch's elements, as mse), or softmax cross-entropy against integer class
/// labels (mean over rows; a final Softmax layer is the loss's own, the logits its input, as the frameworks'
/// fused loss from logits).
enum class Loss { none, mse, xent };
std::string_view loss_name(Loss l);

inline constexpr std::size_t kModelWindowBatches = 8;

struct WeightCheck {
  std::string name;  // the initializer
  onnx::Stored stored = onnx::Stored::f32;
  std::size_t count = 0, nan = 0, inf = 0;
  std::optional<std::size_t> first_nonfinite;       // index in the layer's layout (dense: in × out, row-major)
  double abs_max = 0;                               // over the finite values
  std::size_t f16_overflow = 0, bf16_overflow = 0;  // finite values that become inf when stored
};

struct Where {
  std::size_t batch = 0, row = 0, column = 0;  // row: of the whole array
  double value = 0;
};

struct LayerForward {
  std::string name;
  std::string kernel;  // the registry kernel that ran it, or "elementwise <storage>"
  std::size_t count = 0, nonfinite = 0, reference_nonzero = 0, flushed = 0;
  double max_abs = 0;  // the largest finite |y|
  /// attention: the largest finite |q·kᵀ| as the path computes it (the product itself, before the scale of the
  /// postscale placement; q already scaled in the prescale one): the intermediate that overflows first.
  double product_max_abs = 0;
  std::optional<Where> first_nonfinite;
  /// The f32 baseline's only (empty on the other paths): what casting this layer's output to each format of
  /// kFp8Storages does, batch by batch, as an fp8 training step casts a GEMM's input (Fp8Effect's counts summed
  /// over the batches): e4m3 and e5m2 one cast of the batch's whole output with Transformer Engine's current
  /// scaling, s = fp8_max / amax of that batch; the MX formats blocks of 32 consecutive outputs of a row (its last
  /// block shorter).
  std::vector<Fp8Effect> fp8;
  double flush_share() const { return reference_nonzero ? double(flushed) / double(reference_nonzero) : 0.0; }
};

/// The loss-scale window: the powers of two S = 2^0 .. 2^40 at which gradients are finite (up to S_max, the
/// last before the first non-finite one) and underflow no more than the share (from S_min). Per layer over the
/// measured batches (the window that holds for all of them), and the network's: the intersection of its layers',
/// with the layers that set each end.
struct LayerWindow {
  std::optional<int> S_min_log2, S_max_log2;
};

struct NetWindow {
  std::size_t batches = 0;  // measured on
  std::optional<int> S_min_log2, S_max_log2;
  bool empty = true, keras_inside = false, pytorch_inside = false;
  std::string lower_layer, upper_layer;  // the layers that set S_min and S_max (empty: none does)
};

/// One layer's gradients on one path, pooled over the batches, at S = 1, 2^15 and 2^16 against the f32
/// baseline's at S = 1 of the same batch (GradStats of diagnose.hpp: zero where f32's is non-zero is underflow).
struct LayerGrads {
  std::string name;
  bool has_params = false, has_input = false;
  GradStats params[3];  // dW and db (dense), dγ and dβ (norms)
  GradStats input[3];   // the gradient of the layer's input (absent for the first layer)
  LayerWindow window;   // over its parameter and input gradients
};

struct PathLoss {
  double loss = 0;  // the mean of the batch losses
  std::size_t nonfinite_batches = 0;
  std::optional<std::size_t> first_nonfinite_batch;
};

struct PathForward {
  PathInfo path;
  bool baseline = false;
  std::vector<LayerForward> layers;
  std::optional<PathLoss> loss;         // with a loss
  std::vector<LayerGrads> grads;        // with a loss: per layer (low-precision paths)
  NetWindow window;                     // with a loss (low-precision paths)
  std::vector<Simulation> simulations;  // with --train (low-precision paths): Keras's, then PyTorch's
  /// The first layer (network order) with a non-finite output, if any.
  std::optional<std::size_t> first_nonfinite_layer() const;
  /// log2(largest finite of the storage type / m), m = max_abs, or for attention the larger of max_abs and
  /// product_max_abs (its q·kᵀ is what overflows); +inf when m is 0.
  double headroom_log2(std::size_t layer) const;
};

struct ModelVerdict {
  Boundary boundary = Boundary::ok;
  std::string layer, path;  // the layer and path it names, or empty
  std::string reason, fix;
  std::vector<std::string> notes;
};

/// Without loss scaling (S = 1) on the Keras-like path (else the first low-precision one): the layer whose
/// parameter gradients underflow most, and whether that passes the underflow share.
struct ModelNoLossScaling {
  std::string path, layer;
  double underflow_share = 0;
  std::string warning;  // empty when no layer passes the share
};

struct ModelReport {
  Options options;
  Loss loss = Loss::none;
  ModelNoLossScaling no_loss_scaling;
  std::string file;
  onnx::Network net;
  DataReport data;  // features only (labels unused)
  std::vector<WeightCheck> weights;
  PathForward baseline;
  std::vector<PathForward> paths;
  ModelVerdict verdict;
};

/// One sentence why the rows cannot be run through the network (columns ≠ the network's features, empty; labels
/// whose rows or width do not fit the loss, classes out of range), or empty. `labels` is null without a loss.
std::string check_model_inputs(const onnx::Network& net, const Table& features, Loss loss, const Table* labels);

/// Runs the diagnosis. Preconditions: validate(o) and check_model_inputs(...) are empty (else throws
/// std::invalid_argument with their sentence; also for a --path that names no enabled path).
ModelReport run_model(const onnx::Network& net, const std::string& file, const Table& features, Loss loss,
                      const Table* labels, const Options& o);

/// The verdict from the other sections (run_model calls it; exposed for tests).
ModelVerdict decide_model(const ModelReport& r);

std::string render_model_text(const ModelReport& r);
std::string render_model_json(const ModelReport& r);

}  // namespace halfmap::diagnose
