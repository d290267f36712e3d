// The one registry of kernels. Tests, benchmarks, `halfmap info` and the sweep iterate it; nothing else
// lists kernels. A kernel is named <storage>[_<acc>acc]_<op>__<isa>, e.g. f16_f32acc_sum__avx512. The ops, modes and
// storage types, and each op's facts, are ops.hpp's; every op's contract (its arguments, rounding, NaNs) is here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "halfmap/cpu.hpp"
#include "halfmap/f16_model.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/ops.hpp"

namespace halfmap {

/// A reduction over n elements of the kernel's storage type. `y` is read only by dot (pass nullptr otherwise).
/// The result is returned widened to f32:
///   f32          the f32 accumulator;
///   f16_f32acc   the f32 accumulator rounded once to fp16 (the result is stored like the inputs);
///   bf16_f32acc  the f32 accumulator rounded once to bf16;
///   f16, f16_model  the fp16 accumulator.
/// max|x| is exact in every mode and returns NaN if any input is NaN. Inputs need no alignment.
using ReduceFn = float (*)(const void* x, const void* y, std::size_t n);

enum class Act { identity, relu };

/// Delayed scaling for the fp8_f32acc dense kernels (Transformer Engine's DelayedScaling recipe; fp8_scaling.hpp's
/// DelayedScaler keeps the history). With DenseArgs::fp8 or DenseBwdArgs::fp8 pointing here, an fp8_f32acc dense
/// kernel casts each operand with the scale given here instead of one from the operand's own amax (current
/// scaling), and writes the amax of each operand it cast (max |t|, NaN if t holds a NaN: what the operand's scaler
/// records after the step). The rest is current scaling's: a saturating cast of t · scale, the inverses 1 / scale
/// folded into the output. A scale must be positive and finite, as fp8_scale's are. The forward reads x and w and
/// writes amax_x and amax_w; the backward reads all three and writes all three. Every other mode ignores it.
struct Fp8Scales {
  float x = 1.0f, w = 1.0f, dy = 1.0f;
  float amax_x = 0.0f, amax_w = 0.0f, amax_dy = 0.0f;
};

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
  /// Threads the kernel may use: 1 (the default) runs on the calling thread alone; more lets the GEMM-driven
  /// kernels (kernels/common/gemm.hpp) split the output's tiles over halfmap's pool (parallel.hpp), with a
  /// result bit-identical to 1 thread's. Kernels without that driver (isa ref, neonfhm, sve, the peers) ignore it.
  unsigned threads = 1;
  /// fp8_f32acc only: the scales of delayed scaling, and the amaxes seen (Fp8Scales); null for current scaling.
  Fp8Scales* fp8 = nullptr;
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
  unsigned threads = 1;      // as DenseArgs::threads
  Fp8Scales* fp8 = nullptr;  // as DenseArgs::fp8
};
using DenseBwdFn = void (*)(const DenseBwdArgs&);

// ---- losses and softmax ------------------------------------------------------------------------------------
// Common rules of the mse, softmax and xent kernels (src/kernels/common/nn.hpp implements them):
//   * Modes f32, f16_f32acc, bf16_f32acc ("f32-acc"): inputs are widened exactly to f32, everything is computed
//     in f32 and each output is rounded once to the storage type (round to nearest even; the avx512bf16 path
//     writes its arrays with vcvtneps2bf16, which flushes f32-subnormal results to zero, see
//     src/kernels/avx512bf16/kernels.cpp).
//     Sums run in any order: these kernels are checked against a float64 computation within a tolerance.
//   * Modes f16 and f16_model ("f16 modes"): every operation is rounded to fp16, as listed per op below. fp16
//     sums use the kernel's `lanes` order (element i into lane i % lanes from +0, then f16_model::fold_lanes),
//     and every fp16 multiply-add is the kernel's `fma`. They are bit-exact to the f16_model_* functions below
//     run with the kernel's `lanes` and `fma`. Every NaN they write (or return) is the canonical quiet NaN
//     (fp16 0x7E00, returned as f32 0x7FC00000), so outputs can be compared bit for bit on any CPU.
//   * exp is halfmap's exp_f32 (include/halfmap/math.hpp) in every mode and on every path; the fp16 exp is
//     exp_f16(t) = to_f16(exp_f32(to_f32(t))). log is the C library's logf.
//   * Inputs need no alignment; nothing is read or written past the arrays. Outputs must not overlap inputs,
//     except softmax's y, which may be x itself (in place).

/// Squared loss over n predictions p and targets y (storage type): returns L = mean((p - y)²) and, if dp is not
/// null, writes dp = c·(p - y) with c = (2·loss_scale)/float(n) computed in f32, so fp16 gradients overflow or
/// flush exactly as in training.
///   f32-acc modes: d = p - y in f32, Σ d² in f32 (any order), L = Σ/n in f32 rounded once to the storage type
///     and returned widened; dp = round(c·d), c·d in f32.
///   f16 modes: d = to_f16(p - y); acc = fma(d, d, acc) in fp16 (lanes order, the kernel's fma);
///     L = to_f16(to_f32(acc)/float(n)); dp = to_f16(c·to_f32(d)). So the elementwise square overflows from
///     |p - y| = 256 (256² = 65536 rounds to inf) and not at 255.875 (65472).
/// n = 0 returns NaN (the mean of nothing: 0/0) and writes nothing.
struct LossArgs {
  std::size_t n;
  const void* p;
  const void* y;
  float loss_scale;
  void* dp;
};
using LossFn = float (*)(const LossArgs&);

/// Row-wise softmax of x (rows × cols, row-major) into y, both in the storage type; y may equal x.
///   stable (Op::softmax): m = max_j x_j (exact; NaN if the row holds a NaN), e_j = exp(x_j - m).
///   naive (Op::softmax_naive): e_j = exp(x_j), no max subtraction.
///   then s = Σ_j e_j and y_j = e_j / s.
///   f32-acc modes: x_j - m, exp, the sum (any order) and the division in f32; y rounded once to storage.
///   f16 modes: t_j = to_f16(x_j - m) (stable) or x_j (naive); e_j = exp_f16(t_j), an fp16 value; s = Σ e_j
///     in fp16 (lanes order, from +0); y_j = to_f16(to_f32(e_j)/to_f32(s)), the correctly rounded fp16 quotient.
///     Naive fp16 softmax overflows from an input of 11.09375 (exp = inf, so s = inf and y is NaN where e = inf
///     and 0 elsewhere); the stable one stays finite.
/// A NaN anywhere in a row makes the whole row NaN (stable: m is NaN; naive: s is NaN). A row holding +inf
/// gives NaN in the stable softmax (inf - inf); a row of only -inf gives NaN in both (0/0 or -inf - -inf).
struct SoftmaxArgs {
  std::size_t rows, cols;
  const void* x;
  void* y;
};
using SoftmaxFn = void (*)(const SoftmaxArgs&);

/// Softmax cross-entropy over rows × cols logits with one label per row: p = the stable softmax of the row in
/// the kernel's mode (exactly what Op::softmax of the same mode and path writes), stored in the storage type
/// (into `probs` if not null). Then, with the STORED probabilities p (widened exactly):
///   loss_r = -logf(p[label_r]) in f32; f16 modes round it to fp16. A probability stored as 0 gives +inf: an
///     fp16 (or bf16) underflow that training would really see.
///   L = mean over rows: f32-acc modes Σ loss_r in f32 (row order) / float(rows) in f32, rounded once to the
///     storage type; f16 modes fp16 adds in row order from +0, then to_f16(to_f32(Σ)/float(rows)). Returned
///     widened to f32; rows = 0 returns NaN.
///   dlogits (if not null) = c·(p - onehot(label)) with c = loss_scale/float(rows) in f32: f32-acc modes
///     round(c·(p - onehot)) computed in f32; f16 modes d = to_f16(p - onehot) first, then to_f16(c·to_f32(d)).
/// Labels must be in [0, cols) and cols ≥ 1: the kernels do not check (an out-of-range label reads and writes
/// out of bounds); the sweep and the CLI validate them.
struct XentArgs {
  std::size_t rows, cols;
  const void* logits;
  const std::int32_t* labels;
  float loss_scale;
  void* probs;
  void* dlogits;
};
using XentFn = float (*)(const XentArgs&);

// ---- normalisation -----------------------------------------------------------------------------------------
/// Row normalisation of x (rows × cols, row-major) with per-column gain γ and, for layernorm, bias β; forward
/// (when y is not null) and backward (when dy is not null), all arrays in the storage type except the statistics.
///   layernorm: μ = Σ_j x_j / cols; d_j = x_j - μ; v = Σ_j d_j² / cols (the mean of squared deviations, biased,
///     as PyTorch and Keras); r = 1/√(v + ε); x̂_j = d_j·r; y_j = x̂_j·γ_j + β_j.
///   rmsnorm: v = Σ_j x_j² / cols (the mean of squares); r = 1/√(v + ε); x̂_j = x_j·r; y_j = x̂_j·γ_j.
///   backward, with g_j = dy_j·γ_j, a = Σ_j g_j / cols and b = Σ_j g_j·x̂_j / cols:
///     layernorm dx_j = r·(g_j - a - x̂_j·b); rmsnorm dx_j = r·(g_j - x̂_j·b);
///     dγ_j = Σ_rows dy_j·x̂_j, dβ_j = Σ_rows dy_j (each written when not null).
///   γ null reads as 1, β null as 0. `mean` and `var` (rows floats each, when not null) receive μ (layernorm) and
///   v as the kernel computed them (f16 modes: fp16 values, widened): a non-finite v is the statistics
///   overflowing, which leaves y finite (r = 1/√inf = 0) but wrong.
///   f32-acc modes: every step above in f32 (the sums in any order, r = 1.0f / sqrtf(v + ε)), each output rounded
///     once to the storage type (dγ and dβ summed over the rows in f32).
///   f16 modes, every operation rounded to fp16: the sums Σ x_j (add), Σ d_j² and Σ x_j² (fma(d, d, acc)) in the
///     kernel's lanes order from +0; μ = r16(f32(Σ)/float(cols)), d_j = r16(x_j - μ), v likewise; e = r16(ε);
///     r = r16(1.0f / sqrtf(f32(r16(v + e)))); x̂_j = r16(d_j·r); y_j = fma(x̂_j, γ_j, β_j) (layernorm; with
///     β = +0 when null) or r16(x̂_j·γ_j) (rmsnorm; x̂_j when γ is null). Backward: g_j = r16(dy_j·γ_j); the
///     sums Σ g_j (add) and Σ g_j·x̂_j (fma) in lanes order, a and b divided as μ; dx_j = r16(r16(fma(-x̂_j, b,
///     r16(g_j - a)))·r) (rmsnorm: fma(-x̂_j, b, g_j)); dγ_j = fma(dy_j, x̂_j, acc) and dβ_j = r16(acc + dy_j)
///     over the rows in order from +0. Every NaN written is the canonical 0x7E00.
///   rows = 0 writes nothing; cols ≥ 1.
struct NormArgs {
  std::size_t rows, cols;
  const void* x;
  const void* gamma;  // cols values, or null
  const void* beta;   // cols values, or null (rmsnorm ignores it)
  float eps;
  void* y;         // rows × cols, or null: no forward output
  float* mean;     // rows, or null
  float* var;      // rows, or null
  const void* dy;  // rows × cols, or null: no backward
  void* dx;        // rows × cols (backward)
  void* dgamma;    // cols, or null
  void* dbeta;     // cols, or null
};
using NormFn = void (*)(const NormArgs&);
/// The frameworks' default ε: PyTorch's LayerNorm 1e-5, Keras's LayerNormalization 1e-3, RMSNorm 1e-6 (as
/// Llama's and T5's implementations).
inline constexpr float kLayerNormEpsTorch = 1e-5f, kLayerNormEpsKeras = 1e-3f, kRmsNormEps = 1e-6f;

// ---- GELU -----------------------------------------------------------------------------------------------------
/// GELU of n values, forward (y, when not null) and backward (dx = dy·GELU'(x), when dy is not null), all in the
/// storage type, elementwise (y and dx may not overlap x or dy). With h = 0.5·x:
///   gelu (PyTorch's approximate='none'): z = x·k1 (k1 = 1/√2); e = erf_f32(z); a = 1 + e; y = h·a;
///     GELU'(x) = fma(x·k2, p, 0.5·a) with p = exp_f32(-(z·z)) and k2 = 1/√(2π).
///   gelu_tanh (approximate='tanh'): x2 = x·x; x3 = x2·x; v = fma(c, x3, x) (c = 0.044715); u = k0·v
///     (k0 = √(2/π)); t = tanh_f32(u); a = 1 + t; y = h·a;
///     GELU'(x) = fma(h, (1 - t·t)·(k0·fma(c3, x2, 1)), 0.5·a) with c3 = 3c.
///   f32-acc modes: every step in f32 (the constants rounded to f32), y and dx rounded once to the storage type.
///   f16 modes: every step rounded to fp16 (the constants too; the fma the kernel's), erf_f32, tanh_f32 and exp_f32
///     of the fp16 value widened and rounded back once, dx = r16(dy·GELU'(x)). So x3 overflows from |x| = 40.4
///     (v = ±inf, t = ±1 and y = x or -0: the forward stays right) and x2 from |x| = 256, where the backward's
///     (1 - t²)·inf = 0·inf is NaN. Every NaN written is the canonical 0x7E00.
struct GeluArgs {
  std::size_t n;
  const void* x;
  void* y;         // or null: no forward output
  const void* dy;  // or null: no backward
  void* dx;        // n (backward)
};
using GeluFn = void (*)(const GeluArgs&);

// ---- attention ----------------------------------------------------------------------------------------------
/// Scaled dot-product attention of one head, forward (o, when not null) and backward (when dout is not null), as
/// the frameworks compose it from their matmul and softmax: every intermediate is a tensor of the storage type,
/// computed by the path's own kernels of the same mode (DenseArgs, SoftmaxArgs) and elementwise steps. Q, K, V
/// and O are len × dim, row-major; c = 1/√dim (f32 modes: 1.0f / sqrtf(float(dim)); f16 modes: that rounded to
/// fp16). With R(v) the rounding to the storage type (f16 modes: every operation rounded to fp16):
///   attention_prescale (PyTorch 1.13's multi_head_attention_forward, Keras's MultiHeadAttention): Q̃ = R(Q·c)
///     elementwise, S = Q̃·Kᵀ (the dense kernel, m = len, k = dim, n = len, Kᵀ an exact copy);
///   attention_postscale (Hugging Face BERT and GPT-2: scores / √d): T = Q·Kᵀ (the dense kernel), S = R(T·c).
///   So T = QKᵀ overflows the storage type √dim times earlier than S of the prescaled form does.
///   causal: S_ij = -inf for j > i. P = the stable softmax of each row of S (the softmax kernel); O = P·V (dense).
///   backward (the dense_bwd kernel twice): dP = dO·Vᵀ and dV = Pᵀ·dO; per row, δ = Σ_j P_j·dP_j and
///     dS_j = R(P_j·(dP_j - δ)), +0 where masked (as masked_fill's gradient); f32-acc modes compute δ (j in order)
///     and dS_j in f32 and round once; f16 modes δ = the fp16 dot of P and dP in the kernel's lanes order with
///     its fma (f16_model_reduce), t = r16(dP_j - δ), dS_j = r16(P_j·t). Then prescale: dQ̃ = dS·K and
///     dKᵀ = Q̃ᵀ·dS, dQ = R(dQ̃·c); postscale: dT = R(dS·c), dQ = dT·K and dKᵀ = Qᵀ·dT.
///   f16 modes write every NaN of o, scores, dq, dk and dv as the canonical 0x7E00, so the kernels are bit-exact to
///   f16_model_attention. `scores` (len × len, when not null) receives S as stored, before the mask: where the
///   product overflowed. len = 0 writes nothing; dim ≥ 1.
struct AttentionArgs {
  std::size_t len, dim;
  bool causal;
  const void* q;
  const void* k;
  const void* v;
  void* o;           // len × dim, or null: no forward output
  void* scores;      // len × len, or null
  const void* dout;  // len × dim, or null: no backward
  void* dq;          // len × dim (backward)
  void* dk;
  void* dv;
  unsigned threads = 1;  // as DenseArgs::threads, for the dense kernels inside
};
using AttentionFn = void (*)(const AttentionArgs&);

/// The order of operations of an f32-accumulating kernel, where the path fixes it so that a model reproduces it bit
/// for bit (Kernel::fixed_order; with `lanes` and `fma`, all a kernel says about its order):
///   none   the path's own order, checked within a bound (every kernel that is not one of the two below).
///   f32    neonfhm's FMLAL and sve's f16_f32acc: each term (x_i, x_i², x_i·y_i, the product exact in f32) is added
///          with one f32 rounding into lane i % lanes from +0, the lanes are folded with f32 adds in
///          f16_model::fold_lanes's order, and the result rounded once (reductions); each dense output (dX, dW, db
///          too) adds its inner-index terms in order from +0 with one f32 rounding each. Bit-exact to
///          f32acc_model_reduce / f32acc_model_dense_fwd / f32acc_model_dense_bwd.
///   bfdot  neonbf16's BFDOT/BFMMLA (FEAT_BF16's BFDotAdd): reductions add the pair (x[2q], x[2q+1]) into f32 lane
///          q % lanes from +0 (n padded with zeros to whole steps of 2·lanes), fold the lanes with f32 adds and
///          round once; each dense output (dX, dW too) chains its inner-index pairs in order from +0 (padded with
///          zeros to a multiple of 4), db adds in f32 in row order. Bit-exact to bfdot_model_reduce /
///          bfdot_model_dense_fwd / bfdot_model_dense_bwd.
enum class FixedOrder : std::uint8_t { none, f32, bfdot };

struct Kernel {
  std::string_view name;
  Op op;
  Mode mode;
  Isa isa;
  DType storage;
  /// Order of operations of fp16-accumulating kernels: element i is accumulated into lane i % lanes, then the
  /// lanes are folded by f16_model::fold_lanes. 1 means strictly sequential.
  unsigned lanes;
  /// Which fp16 fused multiply-add the kernel computes: fused or f32_round for the fp16-accumulating kernels,
  /// none for the f32-accumulating ones (they have no fp16 FMA).
  FmaKind fma;
  /// Which fixed order an f32-accumulating kernel keeps, if any (FixedOrder); none for every other kernel.
  FixedOrder fixed_order = FixedOrder::none;
  ReduceFn reduce = nullptr;        // ops sum, sumsq, maxabs, dot
  DenseFn dense = nullptr;          // op dense_fwd
  DenseBwdFn dense_bwd = nullptr;   // op dense_bwd
  LossFn loss = nullptr;            // op mse
  SoftmaxFn softmax = nullptr;      // ops softmax, softmax_naive
  XentFn xent = nullptr;            // op xent
  NormFn norm = nullptr;            // ops layernorm, rmsnorm
  GeluFn gelu = nullptr;            // ops gelu, gelu_tanh
  AttentionFn attention = nullptr;  // ops attention_prescale, attention_postscale
  /// A kernel with a gradient (mse, xent, layernorm) that computes its forward only: a peer whose library refuses
  /// the gradient for its type (PyTorch 1.13's fp16 mse). It must not be called with a gradient output; the sweep
  /// maps its forward.
  bool forward_only = false;
};

/// Whether the kernel's function of its op's kind is set: the field named by op_kind(k.op) (ops.hpp).
inline bool kernel_has_fn(const Kernel& k) {
  switch (op_kind(k.op)) {
    case OpKind::reduce:
      return k.reduce != nullptr;
    case OpKind::dense:
      return k.dense != nullptr;
    case OpKind::dense_bwd:
      return k.dense_bwd != nullptr;
    case OpKind::loss:
      return k.loss != nullptr;
    case OpKind::softmax:
      return k.softmax != nullptr;
    case OpKind::xent:
      return k.xent != nullptr;
    case OpKind::norm:
      return k.norm != nullptr;
    case OpKind::gelu:
      return k.gelu != nullptr;
    case OpKind::attention:
      return k.attention != nullptr;
  }
  return false;
}

/// The field of Kernel that the kernels of an op kind fill (the field named like the kind), and so their function
/// type: KernelFn<op>. The kernel lists set and read an op's function through it (kernels/common/list.hpp, rows.hpp).
template <OpKind kKind>
constexpr auto kernel_field() {
  if constexpr (kKind == OpKind::reduce)
    return &Kernel::reduce;
  else if constexpr (kKind == OpKind::dense)
    return &Kernel::dense;
  else if constexpr (kKind == OpKind::dense_bwd)
    return &Kernel::dense_bwd;
  else if constexpr (kKind == OpKind::loss)
    return &Kernel::loss;
  else if constexpr (kKind == OpKind::softmax)
    return &Kernel::softmax;
  else if constexpr (kKind == OpKind::xent)
    return &Kernel::xent;
  else if constexpr (kKind == OpKind::norm)
    return &Kernel::norm;
  else if constexpr (kKind == OpKind::gelu)
    return &Kernel::gelu;
  else
    return &Kernel::attention;
}
namespace detail {
template <class M>
struct MemberType;
template <class C, class T>
struct MemberType<T C::*> {
  using type = T;
};
}  // namespace detail
/// The function type of op kOp's kernels (ReduceFn for a reduction, ...).
template <Op kOp>
using KernelFn = typename detail::MemberType<decltype(kernel_field<op_kind(kOp)>())>::type;

// The fp8 and MX conversions' lists: include/halfmap/conversions.hpp.

/// Every kernel compiled into this build, whether or not this CPU can run it (src/kernels/registry.cpp joins the
/// lists of the ISA folders compiled), then, in a binary that links the peers (the `halfmap` CLI built with
/// HALFMAP_PEERS=ON, src/peers/), the peer kernels (isa peer) that passed their check on this CPU.
std::span<const Kernel> kernels();

/// A peer library the build was configured with: `built` and its version, or not and why (missing package,
/// HALFMAP_PEERS=OFF, unsupported here, failed its check). Empty in binaries that link no peers.
struct PeerLibrary {
  std::string_view name;  // onednn, xnnpack, eigen, openblas, or a peer kernel's name when one was dropped
  bool built;
  std::string_view detail;  // version and threading if built, else the reason, one sentence
};
std::span<const PeerLibrary> peer_libraries();
/// The kernel with this name, or nullptr.
const Kernel* find_kernel(std::string_view name);
/// True if the kernel may be called on this CPU under the current HALFMAP_ISA cap.
inline bool kernel_enabled(const Kernel& k) { return isa_enabled(k.isa); }

/// Tests only: every dense kernel's GEMM uses cache blocks of mc × kc × nc (rounded down to whole micro-tiles,
/// kc to at most the tile's longest k block) instead of those chosen from this core's caches, until called with
/// zeros. Blocking never changes a result (dense_test checks it); not for concurrent use with running kernels.
void set_gemm_blocks_for_tests(std::size_t mc, std::size_t kc, std::size_t nc);

// The references the kernels are checked against (the f16, FMLAL and BFDotAdd models): include/halfmap/models.hpp.

}  // namespace halfmap
