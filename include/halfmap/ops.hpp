// What halfmap computes: the ops, the precision modes and the storage types, with their names, and one row of facts
// per op (kOpTable). The lists of ops derive from that table: the predicates below, which Kernel field an op's
// kernels fill (registry.hpp), the sweep's families and plan (src/sweep/), the benchmark suites (bench/), which
// recipes name an FMA (src/core/kernel_spec.cpp) and, through `halfmap info --json`'s "ops", the Python tools
// (tools/benchreport/). What each op computes, its rounding and its arguments, is its contract in registry.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace halfmap {

// The enum and the table below are aligned by hand (.clang-format leaves them).
// clang-format off
enum class Op {
  sum, sumsq, maxabs, dot,   // reductions (ReduceFn)
  dense_fwd,                 // Y = act(X·W + b) (DenseFn)
  dense_bwd,                 // dX = dY·Wᵀ, dW = Xᵀ·dY, db = Σ_rows dY (DenseBwdFn)
  mse,                       // squared loss and its gradient (LossFn)
  softmax,                   // row-wise softmax, stable: max subtracted before exp (SoftmaxFn)
  softmax_naive,             // row-wise softmax without the max subtraction (SoftmaxFn)
  xent,                      // softmax cross-entropy loss and its gradient (XentFn)
  layernorm,                 // layer normalisation of rows, forward and backward (NormFn)
  rmsnorm,                   // RMS normalisation of rows, forward and backward (NormFn)
  gelu,                      // GELU, exact (erf) form, forward and backward (GeluFn)
  gelu_tanh,                 // GELU, tanh approximation, forward and backward (GeluFn)
  attention_prescale,        // one attention head, 1/√d applied to Q before QKᵀ (AttentionFn)
  attention_postscale,       // one attention head, 1/√d applied to QKᵀ after the product (AttentionFn)
};
// clang-format on

/// Which function pointer of Kernel (registry.hpp) an op's kernels fill: the field of the same name, whose type
/// states the op's signature and contract (ReduceFn, DenseFn, DenseBwdFn, LossFn, SoftmaxFn, XentFn, NormFn,
/// GeluFn, AttentionFn).
enum class OpKind { reduce, dense, dense_bwd, loss, softmax, xent, norm, gelu, attention };
/// The sweep's experiment family of an op (src/sweep/<family>.cpp): the ops of a family share their experiment
/// and their base draws. dense_bwd is swept with dense_fwd, as its gradient.
enum class SweepFamily { reduce, dense, mse, softmax, xent, norm, gelu, attention };
/// The halfmap_bench suite group that times an op (bench/bench_<group>.cpp): reduce/<kernel>/<level>,
/// <dense op>/<kernel>/<size>, <nn op>/<kernel>/<level>, <attention op>/<kernel>/<len>.
enum class BenchFamily { reduce, dense, nn, attention };
/// Where an op's gradient comes from: none (a forward op), its own kernel (called with a gradient output), or
/// the dense_bwd kernel of the same path (dense_fwd's).
enum class Gradient { none, own, dense_bwd };

/// One op's facts. Adding an op is adding its Op value and its row here (docs/contributing.md, "Adding an op"). Its
/// recipes in kernel_spec.cpp are keyed by its name (<name>/<f32acc|f16|fp8|mxfp8>).
struct OpInfo {
  Op op;
  std::string_view name;  // as in kernel names, `halfmap info`, the sweep's cells and the benchmarks' names
  OpKind kind;
  SweepFamily sweep;
  bool swept;        // the sweep plans it as an experiment of its own (dense_bwd: only as dense_fwd's gradient)
  bool wide_s_grid;  // the sweep's wide grid of scales applies to its f32 and bf16 kernels (plan.cpp)
  Gradient gradient;
  BenchFamily bench;
  bool rounds_fma;  // its f16 kernels round through an fp16 FMA, so their `fma` matters (kernel_spec.cpp)
};

namespace detail::op_rows {
using K = OpKind;
using S = SweepFamily;
using G = Gradient;
using B = BenchFamily;
// One row per Op, in the enum's order (checked below).
// clang-format off
inline constexpr std::array kRows = {
    //     op                       name                   kind          sweep         swept  wide   gradient
    //     bench         fma
    OpInfo{Op::sum,                 "sum",                 K::reduce,    S::reduce,    true,  true,  G::none,
           B::reduce,    false},
    OpInfo{Op::sumsq,               "sumsq",               K::reduce,    S::reduce,    true,  true,  G::none,
           B::reduce,    true},
    OpInfo{Op::maxabs,              "maxabs",              K::reduce,    S::reduce,    true,  true,  G::none,
           B::reduce,    false},
    OpInfo{Op::dot,                 "dot",                 K::reduce,    S::reduce,    true,  true,  G::none,
           B::reduce,    true},
    OpInfo{Op::dense_fwd,           "dense_fwd",           K::dense,     S::dense,     true,  true,  G::dense_bwd,
           B::dense,     true},
    OpInfo{Op::dense_bwd,           "dense_bwd",           K::dense_bwd, S::dense,     false, false, G::none,
           B::dense,     true},
    OpInfo{Op::mse,                 "mse",                 K::loss,      S::mse,       true,  true,  G::own,
           B::nn,        true},
    OpInfo{Op::softmax,             "softmax",             K::softmax,   S::softmax,   true,  false, G::none,
           B::nn,        false},
    OpInfo{Op::softmax_naive,       "softmax_naive",       K::softmax,   S::softmax,   true,  false, G::none,
           B::nn,        false},
    OpInfo{Op::xent,                "xent",                K::xent,      S::xent,      true,  false, G::own,
           B::nn,        false},
    OpInfo{Op::layernorm,           "layernorm",           K::norm,      S::norm,      true,  true,  G::own,
           B::nn,        true},
    OpInfo{Op::rmsnorm,             "rmsnorm",             K::norm,      S::norm,      true,  true,  G::own,
           B::nn,        true},
    OpInfo{Op::gelu,                "gelu",                K::gelu,      S::gelu,      true,  true,  G::own,
           B::nn,        true},
    OpInfo{Op::gelu_tanh,           "gelu_tanh",           K::gelu,      S::gelu,      true,  true,  G::own,
           B::nn,        true},
    OpInfo{Op::attention_prescale,  "attention_prescale",  K::attention, S::attention, true,  true,  G::own,
           B::attention, true},
    OpInfo{Op::attention_postscale, "attention_postscale", K::attention, S::attention, true,  true,  G::own,
           B::attention, true},
};
// clang-format on
}  // namespace detail::op_rows

/// The table: every op's row (OpInfo).
inline constexpr std::array kOpTable = detail::op_rows::kRows;

/// The row of an op. kOpTable holds the ops in their declaration order (checked below), so this is an index.
constexpr const OpInfo& op_info(Op op) { return kOpTable[static_cast<std::size_t>(op)]; }
constexpr bool ops_in_order() {
  for (std::size_t i = 0; i < kOpTable.size(); ++i) {
    if (static_cast<std::size_t>(kOpTable[i].op) != i) return false;
  }
  return true;
}
static_assert(ops_in_order(), "kOpTable: one row per Op, in the enum's order");

constexpr std::string_view op_name(Op op) { return op_info(op).name; }
constexpr OpKind op_kind(Op op) { return op_info(op).kind; }
constexpr bool is_reduction(Op op) { return op_kind(op) == OpKind::reduce; }
constexpr bool is_norm(Op op) { return op_kind(op) == OpKind::norm; }
constexpr bool is_gelu(Op op) { return op_kind(op) == OpKind::gelu; }
constexpr bool is_attention(Op op) { return op_kind(op) == OpKind::attention; }

constexpr std::string_view op_kind_name(OpKind k) {
  constexpr std::string_view names[] = {"reduce", "dense", "dense_bwd", "loss",     "softmax",
                                        "xent",   "norm",  "gelu",      "attention"};
  return names[static_cast<std::size_t>(k)];
}
constexpr std::string_view sweep_family_name(SweepFamily f) {
  constexpr std::string_view names[] = {"reduce", "dense", "mse", "softmax", "xent", "norm", "gelu", "attention"};
  return names[static_cast<std::size_t>(f)];
}
constexpr std::string_view bench_family_name(BenchFamily f) {
  constexpr std::string_view names[] = {"reduce", "dense", "nn", "attention"};
  return names[static_cast<std::size_t>(f)];
}
constexpr std::string_view gradient_name(Gradient g) {
  constexpr std::string_view names[] = {"none", "own", "dense_bwd"};
  return names[static_cast<std::size_t>(g)];
}

/// Precision modes of docs/numerics.md. The last two are the scaled fp8 modes (kernels/common/fp8_modes.hpp): float32
/// arrays in and out, the operands cast to fp8 inside the kernel with a scale the recipe chooses, f32 accumulation.
///   fp8_f32acc    Transformer Engine's Float8CurrentScaling with its HYBRID format: each operand cast with its own
///                 per-tensor scale s = fp8_max / amax (fp8_scaling.hpp's fp8_scale), E4M3 for the forward's
///                 tensors, E5M2 for the upstream gradient; the scales' inverses folded into the output.
///   mxfp8_f32acc  OCP MXFP8 with E4M3 elements for every tensor (Transformer Engine's MXFP8BlockScaling): blocks of
///                 32 along the reduction's dimension, each with its power-of-two E8M0 scale (mx.hpp).
enum class Mode { f32, f16_f32acc, f16, f16_model, bf16_f32acc, fp8_f32acc, mxfp8_f32acc };
/// Every mode, in the enum's order.
inline constexpr Mode kAllModes[] = {Mode::f32,         Mode::f16_f32acc, Mode::f16,         Mode::f16_model,
                                     Mode::bf16_f32acc, Mode::fp8_f32acc, Mode::mxfp8_f32acc};
/// The scaled fp8 modes: their kernels take and give float32 and cast to fp8 inside.
constexpr bool is_scaled(Mode m) { return m == Mode::fp8_f32acc || m == Mode::mxfp8_f32acc; }
enum class DType { f32, f16, bf16 };

constexpr std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::f32:
      return "f32";
    case Mode::f16_f32acc:
      return "f16_f32acc";
    case Mode::f16:
      return "f16";
    case Mode::f16_model:
      return "f16_model";
    case Mode::bf16_f32acc:
      return "bf16_f32acc";
    case Mode::fp8_f32acc:
      return "fp8_f32acc";
    case Mode::mxfp8_f32acc:
      return "mxfp8_f32acc";
  }
  return "?";
}
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}
constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

}  // namespace halfmap
