// The models: the bit-exact references of the kernels, written from the contracts of registry.hpp and math.hpp
// (src/models/; they include nothing of src/kernels/, docs/contributing.md "A reference shares no code with what it
// checks"). The f16 model of every op, the fixed-order f32 model of FMLAL (f32acc.cpp) and Arm's BFDotAdd
// (bfdot.cpp).
#pragma once

#include <cstddef>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {

/// The f16 model run with a kernel's order of operations: the bit-exact reference for modes f16 and f16_model.
f16 f16_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes, FmaKind fma);
/// One step of f16_model_reduce: acc + x (sum), fma(x, x, acc) (sumsq), fma(x, y, acc) (dot), or the larger |.|
/// key (maxabs).
f16 f16_model_step(Op op, f16 acc, f16 x, f16 y, FmaKind fma);

/// The f16 model of the dense layer (fp16 storage, every operation rounded; see DenseArgs): the bit-exact
/// reference for dense kernels in modes f16 and f16_model.
void f16_model_dense_fwd(const DenseArgs& args, FmaKind fma);
void f16_model_dense_bwd(const DenseBwdArgs& args, FmaKind fma);

/// The fixed-order f32-accumulating model (FixedOrder::f32; src/models/f32acc.cpp) of an f16_f32acc
/// reduction: term i added into f32 lane i % lanes (a power of two) by f32acc_model_step, the lanes folded by
/// f32acc_model_fold, the result rounded to fp16 and returned widened to f32.
float f32acc_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes);
/// The same for dense forward (fp16 storage): acc = FMLAL(acc, x_mk, w_kn) over k in order from +0, then
/// y = to_f16(act(f32acc_model_add(acc, b_n))) (no add without a bias).
void f32acc_model_dense_fwd(const DenseArgs& args);
/// And dense backward: dX[i][p] = FMLAL over j of (dY[i][j], W[p][j]), dW[p][j] = FMLAL over i of (X[i][p],
/// dY[i][j]), db[j] = FMLAL over i of (1, dY[i][j]), each in order from +0, rounded once to fp16.
void f32acc_model_dense_bwd(const DenseBwdArgs& args);
/// One FMLAL lane: acc + f32(x)·f32(y) rounded once to f32 (sum: y = 1, sumsq: y = x), NaNs as Arm's FPMulAdd
/// picks them (first signalling NaN of acc, x, y, else first quiet one; invalid: the default NaN 0x7FC00000).
float f32acc_model_step(Op op, float acc, f16 x, f16 y);
/// Arm's BFDotAdd without FEAT_EBF16 (src/models/bfdot.cpp): addend + (a0·b0 + a1·b1) with the products, their
/// sum and the addition each rounded to odd in f32, bf16 and f32 subnormal inputs read as zero and results whose
/// exact magnitude is below 2^-126 flushed to a zero of their sign (whatever FPCR says), exact magnitudes of 2^128
/// and more infinite, every NaN and invalid operation the default NaN 0x7FC00000. One lane of BFDOT, and one of
/// BFMMLA's two chained steps.
float bfdot_model_step(float addend, bf16 a0, bf16 a1, bf16 b0, bf16 b1);
/// The BFDOT reduction (FixedOrder::bfdot): pair q = (x[2q], x[2q+1]) (sum: times (1, 1), sumsq: times itself)
/// into f32 lane q % lanes (a power of two) by bfdot_model_step from +0, n padded with zeros to a multiple of
/// 2·lanes, the lanes folded by f32acc_model_fold, rounded once to bf16 and widened back.
float bfdot_model_reduce(Op op, const bf16* x, const bf16* y, std::size_t n, unsigned lanes);
/// The BFMMLA dense layer (bf16 storage): acc = bfdot_model_step chained over the k pairs in order from +0 (k
/// padded with zeros to a multiple of 4), y = to_bf16(act(f32acc_model_add(acc, b_n))) (no add without a bias).
void bfdot_model_dense_fwd(const DenseArgs& args);
/// And backward: dX over j, dW over i, both chained as above; db[j] = f32acc_model_add over i in order from +0;
/// each rounded once to bf16.
void bfdot_model_dense_bwd(const DenseBwdArgs& args);
/// a + b as Arm's FADD (first NaN operand quieted; invalid: the default NaN), for the folds and the bias.
float f32acc_model_add(float a, float b);
/// acc[j] = f32acc_model_add(acc[j], acc[j + w]) for w = lanes/2, ..., 1 (fold_lanes's order); returns acc[0].
float f32acc_model_fold(float* acc, unsigned lanes);

/// The f16 models of the losses and softmax (fp16 storage, every operation rounded; see LossArgs, SoftmaxArgs,
/// XentArgs): the bit-exact references for mse, softmax and xent kernels in modes f16 and f16_model, run with a
/// kernel's `lanes` (a power of two; anything else is treated as 1) and, for mse, its `fma`.
float f16_model_mse(const LossArgs& args, unsigned lanes, FmaKind fma);
void f16_model_softmax(const SoftmaxArgs& args, bool stable, unsigned lanes);
float f16_model_xent(const XentArgs& args, unsigned lanes);
/// The f16 model of layernorm (rms = false) and rmsnorm (see NormArgs), run with a kernel's lanes and fma.
void f16_model_norm(const NormArgs& args, bool rms, unsigned lanes, FmaKind fma);
/// The f16 model of GELU (tanh = false: the erf form; see GeluArgs), run with a kernel's fma.
void f16_model_gelu(const GeluArgs& args, bool tanh, FmaKind fma);
/// The f16 model of attention (prescale: the 1/√d on Q; see AttentionArgs): f16_model_dense_fwd/bwd with the
/// kernel's fma, f16_model_softmax (stable) with its lanes, and the same elementwise steps.
void f16_model_attention(const AttentionArgs& args, bool prescale, unsigned lanes, FmaKind fma);

}  // namespace halfmap
