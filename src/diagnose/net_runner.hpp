// `halfmap diagnose --model` (include/halfmap/diagnose_model.hpp): a network's paths, and a runner that takes rows
// through every layer in a path's storage type with that mode's kernels, forward over a chunk of rows and backward
// over one batch of it at a loss scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "halfmap/diagnose_model.hpp"
#include "halfmap/registry.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

struct NetPath {
  PathInfo info;
  std::vector<const Kernel*> kernels;    // per layer, forward (and backward for gelu and the norms); null: elementwise
  std::vector<const Kernel*> dense_bwd;  // per layer: dense_bwd for the dense layers, else null
  const Kernel* loss = nullptr;          // mse or xent, when a loss is diagnosed
};

/// The best f32 path (throws std::runtime_error if none) and the low-precision ones in report order (throws
/// std::invalid_argument for a --path that names none); a path exists where the mode's dense_fwd runs on that
/// very ISA and every other op the network (and its loss) needs on it or on a lower ISA.
NetPath baseline_net_path(const onnx::Network& net, Loss loss);
std::vector<NetPath> low_precision_net_paths(const onnx::Network& net, Loss loss, const Options& o);

/// One path of the network; allocates once, for `max_rows` rows (forward) and `max_batch` rows (backward).
class NetRunner {
 public:
  NetRunner(const onnx::Network& net, NetPath p, Loss loss, std::size_t max_rows, std::size_t max_batch,
            unsigned threads);

  /// Rounds the weights and biases of `w` (the network's layers with other values: a simulation's master
  /// weights) to the storage type, in place of the file's.
  void set_params(const onnx::Network& w);
  /// Stores rows row0 .. row0 + m - 1 of the features (and the labels, with a loss), rounded once to the storage
  /// type (labels of xent as int32).
  void load(const Table& x, const Table* y, std::size_t row0, std::size_t m);
  /// Every layer over the loaded rows.
  void forward();
  /// The loss of rows r0 .. r0 + m - 1 of the loaded ones (as the loss kernel returns it, widened) and, at loss
  /// scale S, every layer's gradients from the last forward(): grads(l) and input_grad(l) until the next call.
  double backward(std::size_t r0, std::size_t m, float S);
  /// The loss alone (as backward returns it, at S = 1 unless given): no layer's gradients are computed.
  double loss(std::size_t r0, std::size_t m, float S = 1.0f);

  /// The threads of the kernels' calls from now on (the forward over a chunk uses several; the backward of one
  /// batch, one per path).
  void set_threads(unsigned threads) { threads_ = threads; }
  std::size_t rows() const { return m_; }
  /// An attention layer's largest finite |q·kᵀ| over every forward so far (LayerForward::product_max_abs).
  double product_max(std::size_t l) const { return product_max_[l]; }
  const TypedBuffer& out(std::size_t layer) const { return y_[layer]; }
  const NetPath& path() const { return p_; }
  /// Layer l's parameter gradients in one vector (dense: dW then db; norms: dγ then dβ), widened exactly; empty
  /// for a layer without parameters. Counts its non-finite elements into `nonfinite`.
  std::vector<double> param_grads(std::size_t l, std::size_t& nonfinite) const;
  /// The gradient of layer l's input (m × in of the last backward), widened; empty for the first layer and for
  /// the layers the loss skipped (a final softmax under xent).
  std::vector<double> input_grads(std::size_t l, std::size_t& nonfinite) const;
  /// The layer the backward starts from: the last, or the one before a final softmax under xent.
  std::size_t last_backward_layer() const { return last_bw_; }

 private:
  const void* input_of(std::size_t l, std::size_t r0) const;
  void elementwise(onnx::LayerKind kind, const void* in, void* out, std::size_t n) const;
  void add_rounded(const void* a, const void* b, void* out, std::size_t n) const;
  void attention(std::size_t l, std::size_t r0, std::size_t m, const void* dy, void* dx);
  void elementwise_backward(std::size_t l, std::size_t r0, std::size_t m, const void* dy, void* dx) const;

  const onnx::Network& net_;
  NetPath p_;
  Loss loss_;
  unsigned threads_;
  std::size_t m_ = 0, bm_ = 0, last_bw_ = 0;
  TypedBuffer x_, labels_;
  std::vector<std::int32_t> classes_;
  std::vector<TypedBuffer> y_, w_, b_, dx_, dw_, db_;
  std::vector<TypedBuffer> extra_;  // per layer input: the gradient a residual Add sends back to it
  std::vector<bool> has_extra_;
  TypedBuffer dloss_;
  TypedBuffer q_, k_, v_, dq_, dk_, dv_, scores_;  // one sequence's, for the attention layers
  std::vector<double> product_max_;
};

/// net_window.cpp: the batches the window is measured on: at most kModelWindowBatches, evenly spaced from the first.
std::vector<bool> window_sample(std::size_t batches);
/// One batch's window per layer: the smallest S (log2) at which its gradients stop underflowing and the largest
/// at which they are finite; null where none.
struct BatchWindows {
  std::vector<std::optional<int>> S_min, S_max;
};
/// net_window.cpp: one batch's window per layer: scans S = 2^0 .. 2^40 on `run` (forward already done for the
/// chunk) against the baseline's gradients at S = 1 (`ref_params`, `ref_inputs`, per layer).
BatchWindows scan_window(NetRunner& run, const PathForward& f, std::size_t r0, std::size_t mb,
                         const std::vector<std::vector<double>>& ref_params,
                         const std::vector<std::vector<double>>& ref_inputs, double share);
/// net_window.cpp: folds one batch's windows into the layers' (the window that holds for every batch so far).
void fold_window(PathForward& f, const BatchWindows& w, bool first);
/// net_window.cpp: the network's window: the intersection of its layers', and the layers that set its ends (a
/// layer without an S_min (never under the share) or without an S_max (not finite even at S = 1) sets that end by
/// itself).
NetWindow net_window(const PathForward& f, std::size_t batches);

/// net_train.cpp: with Options::steps (`--train`), Keras's and PyTorch's dynamic loss scaling on each of `low`'s
/// paths (r.paths in the same order), trained from the file's weights on batches of `batch_rows` rows in order;
/// fills each r.paths[i].simulations (diagnose_model.hpp, "Training").
void simulate_model(const onnx::Network& net, const Table& x, const Table* y, Loss loss, const NetPath& base,
                    const std::vector<NetPath>& low, std::size_t batch_rows, const Options& o, ModelReport& r);

}  // namespace halfmap::diagnose
