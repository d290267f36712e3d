// The one registry of kernels. Tests, benchmarks, `halfmap info` and the sweep iterate it; nothing else
// lists kernels. A kernel is named <storage>[_<acc>acc]_<op>__<isa>, e.g. f16_f32acc_sum__avx512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "halfmap/cpu.hpp"
#include "halfmap/f16_model.hpp"

namespace halfmap {

enum class Op {
  sum, sumsq, maxabs, dot,   // reductions (ReduceFn)
  dense_fwd,                 // Y = act(X·W + b) (DenseFn)
  dense_bwd,                 // dX = dY·Wᵀ, dW = Xᵀ·dY, db = Σ_rows dY (DenseBwdFn)
  mse,                       // squared loss and its gradient (LossFn)
  softmax,                   // row-wise softmax, stable: max subtracted before exp (SoftmaxFn)
  softmax_naive,             // row-wise softmax without the max subtraction (SoftmaxFn)
  xent,                      // softmax cross-entropy loss and its gradient (XentFn)
};
constexpr bool is_reduction(Op op) { return op == Op::sum || op == Op::sumsq || op == Op::maxabs || op == Op::dot; }
/// Precision modes of NUMERICS.md.
enum class Mode { f32, f16_f32acc, f16, f16_model, bf16_f32acc };
enum class DType { f32, f16, bf16 };

std::string_view op_name(Op op);
std::string_view mode_name(Mode mode);
std::string_view dtype_name(DType t);
std::size_t dtype_size(DType t);

/// A reduction over n elements of the kernel's storage type. `y` is read only by dot (pass nullptr otherwise).
/// The result is returned widened to f32:
///   f32          the f32 accumulator;
///   f16_f32acc   the f32 accumulator rounded once to fp16 (the result is stored like the inputs);
///   bf16_f32acc  the f32 accumulator rounded once to bf16;
///   f16, f16_model  the fp16 accumulator.
/// max|x| is exact in every mode and returns NaN if any input is NaN. Inputs need no alignment.
using ReduceFn = float (*)(const void* x, const void* y, std::size_t n);

enum class Act { identity, relu };

/// Dense forward: Y (m×n) = act(X (m×k) · W (k×n) + b (n)), all row-major in the kernel's storage type, any
/// sizes from 1 up; `b` may be null (no bias). Outputs are computed in the mode's arithmetic and rounded once to
/// the storage type (f32-accumulating modes), or rounded after every operation (f16 modes: acc = fma(x, w, acc)
/// over k in order from +0, then acc + b, then act). relu(x) = x < 0 ? 0 : x, so a NaN passes through.
struct DenseArgs {
  std::size_t m, n, k;
  const void* x;
  const void* w;
  const void* b;
  void* y;
  Act act;
};
using DenseFn = void (*)(const DenseArgs&);

/// Dense backward for the same shapes: dX (m×k) = dY·Wᵀ, dW (k×n) = Xᵀ·dY, db (n) = Σ_rows dY. dY (m×n) is
/// already masked by act's derivative. Any of dx, dw, db may be null to skip it. Same rounding rules as forward
/// (f16 modes: each output accumulates over its inner index in order, from +0).
struct DenseBwdArgs {
  std::size_t m, n, k;
  const void* x;
  const void* w;
  const void* dy;
  void* dx;
  void* dw;
  void* db;
};
using DenseBwdFn = void (*)(const DenseBwdArgs&);

/// Squared loss over n predictions p and targets y (storage type): returns L = mean((p - y)²) and, if dp is not
/// null, writes dp = loss_scale · 2(p - y)/n in the storage type, so fp16 gradients overflow or flush exactly as
/// in training. The scale factor c = 2·loss_scale/n is computed in f32 and applied in f32 to the difference,
/// rounded once to the storage type, in every mode. The loss is returned widened to f32 and follows the mode's
/// output rule (see ReduceFn): f16 modes compute d = p - y and accumulate d·d in fp16 (fused, lanes order),
/// then divide by n rounding once.
struct LossArgs {
  std::size_t n;
  const void* p;
  const void* y;
  float loss_scale;
  void* dp;
};
using LossFn = float (*)(const LossArgs&);

/// Row-wise softmax of x (rows × cols) into y, both in the storage type.
struct SoftmaxArgs {
  std::size_t rows, cols;
  const void* x;
  void* y;
};
using SoftmaxFn = void (*)(const SoftmaxArgs&);

/// Softmax cross-entropy: returns L = mean over rows of -log softmax(logits)[label] and, if dlogits is not null,
/// writes dlogits = loss_scale · (softmax - onehot(label)) / rows in the storage type. `probs` (optional) gets
/// the stable softmax.
struct XentArgs {
  std::size_t rows, cols;
  const void* logits;
  const std::int32_t* labels;
  float loss_scale;
  void* probs;
  void* dlogits;
};
using XentFn = float (*)(const XentArgs&);

struct Kernel {
  std::string_view name;
  Op op;
  Mode mode;
  Isa isa;
  DType storage;
  /// Order of operations of fp16-accumulating kernels: element i is accumulated into lane i % lanes, then the
  /// lanes are folded by f16_model::fold_lanes. 1 means strictly sequential.
  unsigned lanes;
  /// Which fused multiply-add the kernel computes (fp16-accumulating kernels only).
  FmaKind fma;
  ReduceFn reduce = nullptr;      // ops sum, sumsq, maxabs, dot
  DenseFn dense = nullptr;        // op dense_fwd
  DenseBwdFn dense_bwd = nullptr; // op dense_bwd
  LossFn loss = nullptr;          // op mse
  SoftmaxFn softmax = nullptr;    // ops softmax, softmax_naive
  XentFn xent = nullptr;          // op xent
};

/// Every kernel compiled into this build, whether or not this CPU can run it.
std::span<const Kernel> kernels();
/// The kernel with this name, or nullptr.
const Kernel* find_kernel(std::string_view name);
/// True if the kernel may be called on this CPU under the current HALFMAP_ISA cap.
inline bool kernel_enabled(const Kernel& k) { return isa_enabled(k.isa); }

/// The f16 model run with a kernel's order of operations: the bit-exact reference for modes f16 and f16_model.
f16 f16_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes, FmaKind fma);

/// The f16 model of the dense layer (fp16 storage, every operation rounded; see DenseArgs): the bit-exact
/// reference for dense kernels in modes f16 and f16_model.
void f16_model_dense_fwd(const DenseArgs& args, FmaKind fma);
void f16_model_dense_bwd(const DenseBwdArgs& args, FmaKind fma);

}  // namespace halfmap
