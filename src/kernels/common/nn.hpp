// Portable logic of the squared loss, softmax and softmax cross-entropy kernels, written once and instantiated
// per ISA. The contracts (what every mode computes, rounding by rounding) are in include/halfmap/registry.hpp
// next to LossArgs, SoftmaxArgs and XentArgs; this file is how the SIMD paths meet them.
//
// As in reduce.hpp, every template takes an ISA's own types (its ops.hpp, a namespace of its own), so each ISA
// gets its own instantiation compiled with its own flags; scalar steps that need halfmap's inline conversions
// (to_f16, to_bf16, f16_model::add) or libm are out-of-line functions in src/kernels/common/nn.cpp, compiled
// without ISA flags.
//
// Traits, by role:
//
//   M (f32 math on one vector register, an ISA's ops.hpp F32; also the scalar exp_f32, with V = float)
//     V, kW                      register type, f32 lanes
//     set1(float), load(const float*), store(float*, V)
//     add, sub, mul, div, min, max (min/max are used on non-NaN values only)
//     fma(a, b, c)               a*b + c, fused (one rounding)
//     scale2n(p, n)              p · 2^n rounded once, for integer-valued n in [-150, 128] and p in [0.7, 1.5]:
//                                (p · 2^⌊n/2⌋) · 2^(n - ⌊n/2⌋) with the powers of two built from exponent bits
//                                (the first product is exact), or vscalefps on AVX-512: the same bits
//     nan_pass(x, y)             isnan(x) ? x + x : y
//     scale2n_normal(p, nk)      optional: p · 2^n for nk = 1.5·2^23 + n, where that is a normal f32 (n added to
//                                p's exponent field: exact, so scale2n's bits); softmax_row.hpp's fast rows use
//                                it where the ISA has it and scale2n costs more (avx2)
//
//   S (f32-accumulating modes: f32, f16_f32acc, bf16_f32acc; storage_traits.hpp, or avx512bf16's Bf16)
//     M, Elem                    the math traits; storage element (float or uint16_t bit patterns)
//     kMode, kStorage, kNegInf   mode, storage type, -inf as an Elem
//     load(const Elem*) -> M::V  kW elements widened exactly to f32
//     store(Elem*, M::V)         kW elements rounded to the storage type (round to nearest even)
//     round(M::V)                the value load() reads after store()
//
//   H (fp16 arithmetic: per-operation on F16C, native on AVX512-FP16 / ARMv8.2 FP16): Fp16Ops (fp16_ops.hpp),
//     over an ISA's ops.hpp F16 (which supplies all but Math, kRegs and the exps: exp_store_with(p, t, exp_f32)
//     instead)
//     Math                       the f32 ops M of the exp
//     HV, kW, kRegs, kFma        register type, fp16 lanes per register, registers per block, fused multiply-add
//     load/store(uint16_t*)      kW fp16 values
//     set1(bits), zero()
//     add, sub, fma              each correctly rounded to fp16 (fma as kFma says)
//     exp_store(p, t)            e = to_f16(exp_f32(to_f32(t))) per lane (through M): stores e at p, returns it
//     exp_store_inrange(p, t)    the same for t in [kRowLo, kExpHi] (softmax_row.hpp's fast rows)
//     store_div(p, e, s)         stores canon(e / s) at p, the correctly rounded fp16 quotient
//     store_scale(p, v, c)       stores canon(to_f16(c · to_f32(v))) at p, c an f32
//                                (canon: a NaN lane becomes the canonical quiet NaN 0x7E00). The three are one
//                                primitive each so that the per-operation paths round once on the way to memory
//                                instead of rounding and then converting again.
//     rot(v, w)                  lane j gets lane (j + w) mod kW, for w a power of two below kW
//     lane0(v)                   bits of lane 0
//
// fp16 sums and accumulations use L = kW·kRegs lanes: element j of a row (or of the loss vector) goes to lane
// j % L, the lanes start at +0 and are folded by f16_model::fold_lanes' order (fold_lanes_vec), so a
// kernel equals the f16 model run with lanes = L. Tails are processed as one more whole block from a padded
// copy whose padding adds exactly +0 to every lane (-inf logits, whose exp is +0; zero predictions and targets),
// so no load or store goes past the caller's arrays and inputs need no alignment.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "halfmap/registry.hpp"
#include "kernels/common/reduce.hpp"  // f32acc_finish
#include "kernels/common/softmax_row.hpp"

namespace halfmap::detail {

// ---- out-of-line scalar steps (src/kernels/common/nn.cpp) --------------------------------------------------

/// f16 modes' loss finish: to_f16(to_f32(acc) / float(n)), widened; a NaN is returned as the f32 quiet NaN.
float mse_f16_finish(std::uint16_t acc_bits, std::size_t n);
/// Cross-entropy loss from the stored probabilities at the labels (`rows` values of the storage type): see
/// XentArgs. Shared by every kernel, so that the log and the mean are the same code on every path.
float xent_loss(Mode mode, DType storage, const void* p_at_label, std::size_t rows);

template <class S, bool kStable>
void softmax_f32acc(const SoftmaxArgs& a) {
  using Elem = typename S::Elem;
  constexpr std::size_t L = 4 * S::M::kW;
  thread_local std::vector<float> e;
  e.resize((a.cols + L - 1) / L * L);
  const auto* x = static_cast<const Elem*>(a.x);
  auto* y = static_cast<Elem*>(a.y);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* xi = x + i * a.cols;
    softmax_row_f32acc<S, kStable>(xi, y + i * a.cols, a.cols, e.data(), i + 1 < a.rows ? xi + a.cols : nullptr);
  }
}

template <class S>
float mse_f32acc(const LossArgs& a) {
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, R = 4, L = W * R;
  const auto* p = static_cast<const Elem*>(a.p);
  const auto* y = static_cast<const Elem*>(a.y);
  auto* dp = static_cast<Elem*>(a.dp);
  const V cv = M::set1((2.0f * a.loss_scale) / float(a.n));
  V acc[R] = {M::set1(0.0f), M::set1(0.0f), M::set1(0.0f), M::set1(0.0f)};
  auto block = [&](const Elem* pp, const Elem* yp, Elem* dpp) {
    for (std::size_t r = 0; r < R; ++r) {
      const V d = M::sub(S::load(pp + r * W), S::load(yp + r * W));
      acc[r] = M::fma(d, d, acc[r]);
      if (dpp != nullptr) S::store(dpp + r * W, M::mul(d, cv));
    }
  };
  std::size_t i = 0;
  for (; i + L <= a.n; i += L) block(p + i, y + i, dp != nullptr ? dp + i : nullptr);
  if (i < a.n) {
    Elem pb[L] = {}, yb[L] = {}, db[L];
    std::memcpy(pb, p + i, (a.n - i) * sizeof(Elem));
    std::memcpy(yb, y + i, (a.n - i) * sizeof(Elem));
    block(pb, yb, dp != nullptr ? db : nullptr);
    if (dp != nullptr) std::memcpy(dp + i, db, (a.n - i) * sizeof(Elem));
  }
  return f32acc_finish(S::kMode, hsum<M>(acc) / float(a.n));
}

/// Each row's probabilities p_j (stored to probs when given) and dlogits_j = store(c·(p_j - [j = label])) in one
/// pass over the row's quotients (the label's column rewritten after it), so that without probs nothing but
/// dlogits is written.
template <class S>
float xent_f32acc(const XentArgs& a) {
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, L = 4 * W;
  thread_local std::vector<float> e;
  thread_local std::vector<Elem> plab;
  e.resize((a.cols + L - 1) / L * L);
  plab.resize(a.rows);
  const V cv = M::set1(a.loss_scale / float(a.rows));
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* x = static_cast<const Elem*>(a.logits) + i * a.cols;
    Elem* p = a.probs != nullptr ? static_cast<Elem*>(a.probs) + i * a.cols : nullptr;
    Elem* dl = a.dlogits != nullptr ? static_cast<Elem*>(a.dlogits) + i * a.cols : nullptr;
    const auto label = static_cast<std::size_t>(a.labels[i]);  // in [0, cols): the caller's contract
    const RowSum sum = exp_pass_f32acc<S, true>(x, a.cols, e.data(), i + 1 < a.rows ? x + a.cols : nullptr, dl);
    quotient_pass_f32acc<S>(e.data(), a.cols, sum, [&](std::size_t j, V q, std::size_t n) {
      if (p != nullptr) store_lanes<S>(p + j, q, n);
      if (dl != nullptr) store_lanes<S>(dl + j, M::mul(S::round(q), cv), n);  // c·(p - 0), p as stored
    });
    plab[i] = quotient_at<S>(e.data(), sum, label);
    if (dl == nullptr) continue;
    Elem in[W] = {}, out[W];
    in[0] = plab[i];  // the label's column: c·(p - 1)
    S::store(out, M::mul(M::sub(S::load(in), M::set1(1.0f)), cv));
    dl[label] = out[0];
  }
  return xent_loss(S::kMode, S::kStorage, plab.data(), a.rows);
}

// ---- fp16 modes --------------------------------------------------------------------------------------------

template <class H, bool kStable>
void softmax_f16(const SoftmaxArgs& a) {
  const auto* x = static_cast<const std::uint16_t*>(a.x);
  auto* y = static_cast<std::uint16_t*>(a.y);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const std::uint16_t* xi = x + i * a.cols;
    const bool more = i + 1 < a.rows;
    softmax_row_f16<H, kStable>(xi, y + i * a.cols, a.cols, more ? xi + a.cols : nullptr,
                                more ? y + (i + 1) * a.cols : nullptr);
  }
}

template <class H>
float mse_f16(const LossArgs& a) {
  using HV = typename H::HV;
  constexpr std::size_t W = H::kW, R = H::kRegs, L = W * R;
  const auto* p = static_cast<const std::uint16_t*>(a.p);
  const auto* y = static_cast<const std::uint16_t*>(a.y);
  auto* dp = static_cast<std::uint16_t*>(a.dp);
  const float c = (2.0f * a.loss_scale) / float(a.n);
  HV acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = H::zero();
  auto block = [&](const std::uint16_t* pp, const std::uint16_t* yp, std::uint16_t* dpp) {
    for (std::size_t r = 0; r < R; ++r) {
      const HV d = H::sub(H::load(pp + r * W), H::load(yp + r * W));
      acc[r] = H::fma(d, d, acc[r]);
      if (dpp != nullptr) H::store_scale(dpp + r * W, d, c);
    }
  };
  std::size_t i = 0;
  for (; i + L <= a.n; i += L) block(p + i, y + i, dp != nullptr ? dp + i : nullptr);
  if (i < a.n) {  // zero padding: d = +0 and fma(+0, +0, acc) = acc
    std::uint16_t pb[L] = {}, yb[L] = {}, db[L];
    std::memcpy(pb, p + i, (a.n - i) * sizeof(std::uint16_t));
    std::memcpy(yb, y + i, (a.n - i) * sizeof(std::uint16_t));
    block(pb, yb, dp != nullptr ? db : nullptr);
    if (dp != nullptr) std::memcpy(dp + i, db, (a.n - i) * sizeof(std::uint16_t));
  }
  return mse_f16_finish(fold_lanes_vec<H>(acc), a.n);
}

template <class H>
float xent_f16(const XentArgs& a) {
  constexpr std::size_t W = H::kW;
  thread_local std::vector<std::uint16_t> prow, plab;
  prow.resize(a.cols);
  plab.resize(a.rows);
  const float c = a.loss_scale / float(a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const auto* x = static_cast<const std::uint16_t*>(a.logits) + i * a.cols;
    auto* p = a.probs != nullptr ? static_cast<std::uint16_t*>(a.probs) + i * a.cols : prow.data();
    auto* dl = a.dlogits != nullptr ? static_cast<std::uint16_t*>(a.dlogits) + i * a.cols : nullptr;
    softmax_row_f16<H, true>(x, p, a.cols, i + 1 < a.rows ? x + a.cols : nullptr, dl);
    const auto label = static_cast<std::size_t>(a.labels[i]);  // in [0, cols): the caller's contract
    plab[i] = p[label];
    if (dl == nullptr) continue;
    // Other columns: d = p - 0 = p exactly, so dlogits = to_f16(c·p).
    std::size_t j = 0;
    for (; j + W <= a.cols; j += W) H::store_scale(dl + j, H::load(p + j), c);
    std::uint16_t b[W] = {};
    if (j < a.cols) {
      std::memcpy(b, p + j, (a.cols - j) * sizeof(std::uint16_t));
      H::store_scale(b, H::load(b), c);
      std::memcpy(dl + j, b, (a.cols - j) * sizeof(std::uint16_t));
    }
    b[0] = plab[i];  // the label's column: d = to_f16(p - 1), then to_f16(c·d)
    H::store_scale(b, H::sub(H::load(b), H::set1(0x3C00)), c);
    dl[label] = b[0];
  }
  return xent_loss(Mode::f16, DType::f16, plab.data(), a.rows);
}

}  // namespace halfmap::detail
