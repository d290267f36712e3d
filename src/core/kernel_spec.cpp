// The kernels' recipes (include/halfmap/kernel_spec.hpp): what registry.hpp's contracts say about each op in
// each family of modes, with the entry's own lanes and FMA. The recipes restate the contracts of LossArgs,
// SoftmaxArgs, XentArgs, DenseArgs and ReduceFn, which the tests pin bit for bit against the f16 models
// (src/models/) for the f16 family; one text per (op, family) here, so a kernel's spec is its registry entry.
#include "halfmap/kernel_spec.hpp"

#include <array>
#include <vector>

#include <fmt/format.h>

namespace halfmap {
namespace {

struct Recipe {
  std::string_view key, text;
};

// r(v): v rounded to the nearest fp16 (ties to even); R(v): v rounded once to the storage type T; f32(h): h widened
// exactly; fma: the kernel's fp16 FMA; fold: the order column.
constexpr std::array<Recipe, 47> kRecipes = {{
    {"sum/f16", "acc = r(acc + x_i) per lane; lanes folded with r(a + b); the result is the fp16 accumulator"},
    {"sumsq/f16", "acc = fma(x_i, x_i, acc) per lane; lanes folded with r(a + b)"},
    {"dot/f16", "acc = fma(x_i, y_i, acc) per lane; lanes folded with r(a + b)"},
    {"maxabs",
     "max_i abs(x_i), exact in every mode and order (compares the bit patterns of abs(x)); NaN if any "
     "x_i is NaN"},
    {"dense_fwd/f16",
     "acc = fma(x_mk, w_kn, acc) over k from +0; y = act(r(acc + b_n)) (the sweep: b = 0, "
     "identity)"},
    {"dense_bwd/f16",
     "dX = fma over n of dY·Wᵀ, dW = fma over m of Xᵀ·dY, each from +0 in index order; "
     "db = r(acc + dY_mn) over m"},
    {"mse/f16",
     "d_i = r(p_i - y_i); acc = fma(d_i, d_i, acc) per lane, lanes folded with r(a + b); "
     "L = r(f32(acc) / float(n)) (f32 division); dp_i = r(c·f32(d_i)), c = (2·S)/float(n) in f32"},
    {"softmax/f16",
     "m = max_j x_j (exact); t_j = r(x_j - m); e_j = r(exp_f32(f32(t_j))); s = sum of e_j with "
     "r(a + b) per lane, lanes folded; y_j = r(f32(e_j) / f32(s)) (f32 division)"},
    {"softmax_naive/f16",
     "t_j = x_j (no max); e_j = r(exp_f32(f32(t_j))); s = sum of e_j with r(a + b) per lane, "
     "lanes folded; y_j = r(f32(e_j) / f32(s))"},
    {"xent/f16",
     "p = softmax/f16 of the row (no log-sum-exp), stored in fp16; label pick from the stored p: "
     "loss_r = r(-logf(f32(p[label_r]))) (+inf where p[label_r] = 0); sum of loss_r with r(a + b) in "
     "row order from +0; L = r(f32(sum) / float(rows)); dlogits = r(c·f32(r(p - onehot))), "
     "c = S/float(rows) in f32"},
    {"layernorm/f16",
     "mu = r(f32(sum of x_j) / float(n)) (sums with r(a + b) per lane, lanes folded); "
     "d_j = r(x_j - mu); v = r(f32(sum of fma(d_j, d_j, acc)) / float(n)); "
     "rs = r(1.0f / sqrtf(f32(r(v + r(eps))))); xh_j = r(d_j·rs); y_j = fma(xh_j, γ_j, β_j); "
     "backward: g'_j = r(dy_j·γ_j), a and b = r(f32(sum of g'_j, of fma(g'_j, xh_j, acc)) / "
     "float(n)); dx_j = r(fma(-xh_j, b, r(g'_j - a))·rs); dγ, dβ: fma / r(a + b) over "
     "rows in order"},
    {"rmsnorm/f16",
     "v = r(f32(sum of fma(x_j, x_j, acc)) / float(n)) (per lane, lanes folded); "
     "rs = r(1.0f / sqrtf(f32(r(v + r(eps))))); xh_j = r(x_j·rs); y_j = r(xh_j·γ_j); backward: "
     "g'_j = r(dy_j·γ_j), b = r(f32(sum of fma(g'_j, xh_j, acc)) / float(n)); "
     "dx_j = r(fma(-xh_j, b, g'_j)·rs); dγ: fma over rows in order"},
    {"gelu/f16",
     "h = r(x·0.5); z = r(x·k1); a = r(1 + r(erf_f32(f32(z)))); y = r(h·a); backward: "
     "p = r(exp_f32(f32(r(0 - r(z·z))))); d = fma(r(x·k2), p, r(a·0.5)); dx = r(dy·d); k1 = r(1/√2), "
     "k2 = r(1/√(2π))"},
    {"gelu_tanh/f16",
     "h = r(x·0.5); x2 = r(x·x); u = r(k0·fma(c, r(x2·x), x)); t = r(tanh_f32(f32(u))); "
     "a = r(1 + t); y = r(h·a); backward: d = fma(h, r(r(1 - r(t·t))·r(k0·fma(c3, x2, 1))), "
     "r(a·0.5)); dx = r(dy·d); k0 = r(√(2/π)), c = r(0.044715), c3 = r(0.134145)"},
    {"attention_prescale/f16",
     "c = r(1/√d); Q' = r(Q·c); S = dense_fwd/f16 of Q' and Kᵀ; -inf above the diagonal "
     "(causal); P = softmax/f16 of S's rows; O = dense_fwd/f16 of P and V; backward: dP "
     "and dV = dense_bwd/f16; δ = dot/f16 of P_i and dP_i (lanes); dS = r(P·r(dP - δ)), "
     "+0 where masked; dQ' and dKᵀ = dense_bwd/f16 of Q', Kᵀ and dS; dQ = r(dQ'·c)"},
    {"attention_postscale/f16",
     "c = r(1/√d); T = dense_fwd/f16 of Q and Kᵀ; S = r(T·c); then as "
     "attention_prescale/f16, with dT = r(dS·c) and dQ, dKᵀ = dense_bwd/f16 of Q, Kᵀ and "
     "dT"},
    {"sum/f32acc", "x_i widened to f32; sum in f32; the result R(sum)"},
    {"sumsq/f32acc", "x_i widened to f32; sum of x_i·x_i in f32 (exact products for fp16/bf16 inputs); R(sum)"},
    {"dot/f32acc", "x_i, y_i widened to f32; sum of x_i·y_i in f32; R(sum)"},
    {"dense_fwd/f32acc", "X, W widened to f32; acc = sum over k of x_mk·w_kn in f32; y = R(act(acc + b_n))"},
    {"dense_bwd/f32acc",
     "dX = dY·Wᵀ, dW = Xᵀ·dY, db = column sums of dY, accumulated in f32, each rounded once "
     "by R"},
    {"mse/f32acc",
     "d_i = p_i - y_i in f32; sum of d_i² in f32; L = R(sum / float(n)); dp_i = R(c·d_i), "
     "c = (2·S)/float(n) in f32"},
    {"softmax/f32acc",
     "m = max_j x_j (exact); e_j = exp_f32(x_j - m), s = sum of e_j and e_j / s in f32; "
     "y_j = R(e_j / s)"},
    {"softmax_naive/f32acc", "e_j = exp_f32(x_j) (no max), s = sum of e_j and e_j / s in f32; y_j = R(e_j / s)"},
    {"xent/f32acc",
     "p = softmax/f32acc of the row, stored: R(e_j / s); label pick from the stored p: "
     "loss_r = -logf(p[label_r]) in f32 (+inf where p[label_r] = 0); L = R(sum of loss_r in row "
     "order, in f32, / float(rows)); dlogits = R(c·(p - onehot)) in f32, c = S/float(rows)"},
    {"layernorm/f32acc",
     "mu = sum of x_j / n, v = sum of (x_j - mu)² / n, rs = 1/sqrtf(v + eps), "
     "xh_j = (x_j - mu)·rs, all in f32; y_j = R(xh_j·γ_j + β_j); backward in f32: "
     "dx_j = R(rs·(g'_j - mean g' - xh_j·mean(g'·xh))), g' = dy·γ; dγ = R(sum over rows "
     "of dy·xh), dβ = R(sum of dy)"},
    {"rmsnorm/f32acc",
     "v = sum of x_j² / n, rs = 1/sqrtf(v + eps), xh_j = x_j·rs, in f32; y_j = R(xh_j·γ_j); "
     "backward in f32: dx_j = R(rs·(g'_j - xh_j·mean(g'·xh))), g' = dy·γ; dγ = R(sum over "
     "rows of dy·xh)"},
    {"gelu/f32acc",
     "in f32: a = 1 + erf_f32(x·k1), y = R((x·0.5)·a); dx = R(dy·fma(x·k2, exp_f32(-(z·z)), a·0.5)), "
     "z = x·k1"},
    {"gelu_tanh/f32acc",
     "in f32: t = tanh_f32(k0·fma(c, x²·x, x)), a = 1 + t, y = R((x·0.5)·a); "
     "dx = R(dy·fma(x·0.5, (1 - t²)·(k0·fma(c3, x², 1)), a·0.5))"},
    {"attention_prescale/f32acc",
     "c = 1/sqrtf(d) in f32; Q' = R(Q·c); S = dense_fwd/f32acc of Q' and Kᵀ; -inf "
     "above the diagonal (causal); P = softmax/f32acc of S's rows; O = dense_fwd/f32acc "
     "of P and V; backward: dP and dV = dense_bwd/f32acc; δ = Σ P·dP and "
     "dS = R(P·(dP - δ)) in f32, +0 where masked; dQ' and dKᵀ = dense_bwd/f32acc; "
     "dQ = R(dQ'·c)"},
    {"attention_postscale/f32acc",
     "c = 1/sqrtf(d) in f32; T = dense_fwd/f32acc of Q and Kᵀ, stored; S = R(T·c); "
     "then as attention_prescale/f32acc, with dT = R(dS·c)"},
    // The scaled fp8 modes (kernels/common/fp8_modes.hpp): C4(t), C5(t) and M(t) in the legend.
    {"sum/fp8", "(q, u) = C4(x); sum of q_i in f32; the result sum·u"},
    {"sumsq/fp8", "(q, u) = C4(x); sum of q_i·q_i in f32 (exact products); the result (sum·u)·u"},
    {"maxabs/fp8", "(q, u) = C4(x); max_i abs(q_i)·u (NaN if any x_i is NaN)"},
    {"dot/fp8", "C4(x), C4(y); sum of qx_i·qy_i in f32 (exact products); the result sum·(ux·uy)"},
    {"dense_fwd/fp8",
     "C4(X), C4(W); acc = sum over k of qx_mk·qw_kn in f32 (exact products); "
     "y = act(acc·(uX·uW) + b_n) in f32"},
    {"dense_bwd/fp8",
     "C5(dY), C4(X), C4(W); dX = (qdY·qWᵀ)·(udY·uW), dW = (qXᵀ·qdY)·(uX·udY), accumulated in f32; "
     "db = column sums of the uncast dY in f32, in row order"},
    {"mse/fp8", "p' = q·u of C4(p), y' = q·u of C4(y), in f32; then mse/f32acc of p' and y'"},
    {"softmax/fp8", "x' = q·u of C4(x) (one scale for the whole tensor), in f32; then softmax/f32acc of x'"},
    {"sum/mxfp8", "x' = M(x) (blocks of the array); sum of x'_i in f32"},
    {"sumsq/mxfp8", "x' = M(x); sum of x'_i·x'_i in f32"},
    {"maxabs/mxfp8", "x' = M(x); max_i abs(x'_i) (NaN if a block holds a NaN or an inf)"},
    {"dot/mxfp8", "x' = M(x), y' = M(y); sum of x'_i·y'_i in f32"},
    {"dense_fwd/mxfp8", "X' = M(X's rows), W' = M(W's columns) (blocks along k); dense_fwd/f32acc of X', W'"},
    {"dense_bwd/mxfp8",
     "dX = M(dY's rows)·M(W's rows)ᵀ (blocks along n), dW = M(X's columns)ᵀ·M(dY's columns) "
     "(along m), accumulated in f32; db = column sums of the uncast dY in f32, in row order"},
    {"mse/mxfp8", "p' = M(p), y' = M(y); then mse/f32acc of p' and y'"},
    {"softmax/mxfp8", "x' = M(each row); then softmax/f32acc of x'"},
}};

bool f16_family(Mode m) { return m == Mode::f16 || m == Mode::f16_model; }

std::string_view recipe_key(const Kernel& k) {
  if (k.op == Op::maxabs && !is_scaled(k.mode)) return "maxabs";
  const std::string_view fam = f16_family(k.mode)             ? "f16"
                               : k.mode == Mode::fp8_f32acc   ? "fp8"
                               : k.mode == Mode::mxfp8_f32acc ? "mxfp8"
                                                              : "f32acc";
  for (const Recipe& r : kRecipes) {
    const std::string_view key = r.key;
    if (key.substr(0, key.find('/')) == op_name(k.op) && key.substr(key.find('/') + 1) == fam) return key;
  }
  return "?";
}

/// The order of an fp16 accumulation with `lanes` lanes (f16_model::fold_lanes), in the legend's words.
std::string lane_order(unsigned lanes) {
  if (lanes <= 1) return "sequential";
  const std::string folds = lanes == 2   ? std::string("1")
                            : lanes == 4 ? std::string("2, 1")
                                         : fmt::format("{}, {}, ..., 1", lanes / 2, lanes / 4);
  return fmt::format("i mod {}, fold {}", lanes, folds);
}

/// The f32-accumulating kernels fix no order (they are checked within a bound of float64, registry.hpp); the
/// portable ones are sequential, avx512bf16 has vdpbf16ps's pairs and its flushing, and the fixed-order ones
/// (neonfhm's FMLAL, FixedOrder::f32) have the fp16 kernels' lane order on f32 lanes; neonbf16's
/// BFDOT/BFMMLA (FixedOrder::bfdot) that order on element pairs, in BFDotAdd steps.
std::string f32acc_order(const Kernel& k) {
  if (k.fixed_order == FixedOrder::bfdot) {
    const bool dense = k.op == Op::dense_fwd || k.op == Op::dense_bwd;
    return (dense ? std::string("inner index in pairs in order") : "pair " + lane_order(k.lanes)) + " in f32; BFDotAdd";
  }
  if (k.fixed_order == FixedOrder::f32) {
    const bool dense = k.op == Op::dense_fwd || k.op == Op::dense_bwd;
    return (dense ? std::string("inner index in order") : lane_order(k.lanes)) +
           (k.isa == Isa::sve ? " in f32; SVE fcvt + fmla" : " in f32; FMLAL");
  }
  if (k.isa == Isa::sve && k.op != Op::maxabs) {  // f32 mode, its order fixed too (sve/kernels.cpp)
    const bool dense = k.op == Op::dense_fwd || k.op == Op::dense_bwd;
    return (dense ? std::string("inner index in order") : lane_order(k.lanes)) + " in f32, any vector length";
  }
  if (k.isa == Isa::avx512bf16) {
    const bool dp = is_reduction(k.op) || k.op == Op::dense_fwd || k.op == Op::dense_bwd;
    return dp ? "vdpbf16ps pairs, flushes" : "SIMD, not fixed; flushes";
  }
  return k.isa == Isa::ref ? "sequential" : "SIMD, not fixed";
}

}  // namespace

std::optional<std::string_view> kernel_fma_name(const Kernel& k) {
  if (k.fma == FmaKind::none) return std::nullopt;
  if (!op_info(k.op).rounds_fma) return std::nullopt;
  return k.fma == FmaKind::fused ? "fused" : "f32_round";
}

bool kernel_lanes_matter(const Kernel& k) {
  return f16_family(k.mode) || k.fixed_order != FixedOrder::none || k.lanes > 1;
}

KernelSpec kernel_spec(const Kernel& k) {
  KernelSpec s;
  s.accumulator = f16_family(k.mode) ? "f16" : "f32";
  s.fma = kernel_fma_name(k).value_or("-");
  s.recipe = recipe_key(k);
  if (k.isa == Isa::peer) {
    // Another library's kernel (src/peers/): halfmap does not fix its order; its recipe is its mode's, the one
    // the sweep compares it with (peers.md says where it differs).
    s.order = "the library's own (peer: compared with this recipe)";
  } else if (k.op == Op::maxabs) {
    s.order = "any (exact)";
  } else if (is_gelu(k.op)) {
    s.order = "elementwise (no sum)";
  } else if (is_attention(k.op)) {
    // composed: the path's dense kernels (f16: inner index in order) and softmax (its lanes), δ in those lanes
    s.order = f16_family(k.mode) ? "GEMMs: inner index in order; rows: " + lane_order(k.lanes)
                                 : "GEMMs and rows: " + f32acc_order(k);
  } else if (!f16_family(k.mode)) {
    s.order = f32acc_order(k);
  } else if (k.op == Op::dense_fwd || k.op == Op::dense_bwd) {
    s.order = "inner index in order";
  } else if (k.op == Op::xent) {
    s.order = lane_order(k.lanes) + "; rows in order";
  } else {
    s.order = lane_order(k.lanes);
  }
  return s;
}

std::string_view kernel_recipe_text(std::string_view key) {
  for (const Recipe& r : kRecipes) {
    if (r.key == key) return r.text;
  }
  return "?";
}

std::string kernel_spec_table(std::span<const Kernel* const> ks) {
  std::string md =
      "order: `sequential`: element i = 0, 1, ... into one accumulator from +0; `i mod L, fold w, ...`: element "
      "i into lane i mod L (L = lanes) from +0, then acc[j] = r(acc[j] + acc[j+w]) for j < w, for each w in "
      "turn (f16_model::fold_lanes); `inner index in order`: each output accumulates over k (dX: n, dW: m) in "
      "order from +0; `rows in order`: the row losses are summed in row order; `any (exact)`: the result does "
      "not depend on it; `SIMD, not fixed`: the path's f32 blocking, which the contract leaves open (f32-acc "
      "kernels are checked within a bound of float64, docs/numerics.md); `vdpbf16ps pairs`: each f32 lane adds "
      "x[2i]·y[2i] + x[2i+1]·y[2i+1] (sum: y = 1, sumsq: y = x); `flushes`: bf16 subnormal inputs of vdpbf16ps "
      "read as 0 and its subnormal results are flushed, and vcvtneps2bf16 flushes f32-subnormal outputs, "
      "whatever MXCSR says; `in f32; FMLAL`: that order on f32 accumulators, each term added with one f32 "
      "rounding and the lanes folded with f32 adds (FEAT_FHM's FMLAL/FMLAL2; bit-exact to f32acc_model_reduce "
      "and f32acc_model_dense_fwd); `pair i mod L`: the element pair (x[2i], x[2i+1]) into lane i mod L (the tail "
      "padded with zeros to whole steps of 2L); `inner index in pairs in order`: each output adds its inner-index "
      "pairs in order from +0 (padded with zeros to a multiple of 4); `in f32; BFDotAdd`: each step adds "
      "x[2i]·y[2i] + x[2i+1]·y[2i+1] with the products, their sum and the addition rounded to odd, bf16 and f32 "
      "subnormal inputs read as 0, results below 2^-126 flushed, NaNs the default NaN, whatever FPCR says "
      "(FEAT_BF16's BFDOT/BFMMLA; bit-exact to bfdot_model_reduce and bfdot_model_dense_fwd). `in f32; SVE fcvt "
      "+ fmla`: the fixed lane order with each fp16 term widened exactly first (the sve path, at any vector "
      "length); `in f32, any vector length`: that lane order on f32 lanes, the same at every SVE vector length. "
      "`elementwise (no sum)`: each output from its own input alone. `GEMMs: ...; rows: ...`: attention, composed of "
      "the path's dense kernels (their order) and its softmax (the rows' order, which the softmax backward's fp16 dot "
      "shares). fma: the fp16 FMA where one rounds (`-`: none does).\n\n"
      "| kernel | storage | accumulator | lanes | order | fma | recipe |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Kernel* k : ks) {
    const KernelSpec s = kernel_spec(*k);
    const bool lanes = kernel_lanes_matter(*k);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", k->name, dtype_name(k->storage), s.accumulator,
                      lanes ? std::to_string(k->lanes) : std::string("-"), s.order, s.fma, s.recipe);
  }
  return md;
}

std::string kernel_recipe_table(std::span<const Kernel* const> ks) {
  std::vector<std::string_view> used;
  for (const Kernel* k : ks) used.push_back(recipe_key(*k));
  std::string md =
      "r(v): v rounded to the nearest fp16, ties to even; R(v): rounded once to the storage type, to nearest even "
      "(nothing to round for f32); f32(h): exact widening; fma(a, b, c): the kernel's fp16 FMA (fused: a·b + c "
      "rounded once to fp16; f32_round: fused in f32, then r); exp_f32: halfmap's exp "
      "(include/halfmap/math.hpp), on every path, and so are erf_f32 and tanh_f32; logf: the C library's; S: the "
      "loss scale; act: the dense activation; C4(t), C5(t): tensor t cast to E4M3, E5M2 with its own scale "
      "s = fp8_max / amax in f32 (1 where amax is 0 or not finite, FLT_MAX where the quotient overflows), "
      "q = to_fp8(t·s) saturating, u = 1/s in f32; M(t): t in OCP MXFP8 E4M3 blocks of 32 (each with its "
      "E8M0 scale, a row's last block padded with zeros), read back exactly.\n\n"
      "| recipe | rounding steps, in order |\n| --- | --- |\n";
  for (const Recipe& r : kRecipes) {
    bool want = ks.empty();
    for (std::string_view u : used) want = want || u == r.key;
    if (want) md += fmt::format("| {} | {} |\n", r.key, r.text);
  }
  return md;
}

}  // namespace halfmap
