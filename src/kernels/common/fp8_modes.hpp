// The scaled fp8 precision modes (registry.hpp's Mode::fp8_f32acc and Mode::mxfp8_f32acc), written once for every
// path over two of its parts: its fp8 conversions (fp8_convert.hpp) and its f32 kernels. The arrays in and out are
// float32; each kernel casts its operands to fp8 as the recipe says, runs the path's f32 kernel on the fp8 values
// (exact in float32), and folds the scales into the output, as the fp8 GEMMs do (cuBLASLt's A and B scales,
// Transformer Engine's scale_inv).
//
// fp8_f32acc (per-tensor current scaling, Transformer Engine's Float8CurrentScaling, HYBRID format):
//   cast(t, F): amax = max |t_i| (NaN if t holds a NaN); s = fp8_scale(amax, F) (fp8_max / amax in float32, 1 where
//     amax is 0 or not finite, FLT_MAX where the quotient overflows); q_i = to_fp8(t_i · s, F, saturate), the
//     product in float32; u = 1.0f / s. So q_i · u ≈ t_i, and an infinity in t saturates to ±fp8_max.
//   dense_fwd: X and W cast to E4M3; A = Q_X · Q_W by the f32 dense kernel (products exact, f32 sums); then
//     y = act(A · (u_X · u_W) + b), each step in float32 (the bias is not cast).
//   dense_bwd: X and W as the forward, dY cast to E5M2; dX = (Q_dY · Q_Wᵀ) · (u_dY · u_W), dW = (Q_Xᵀ · Q_dY) ·
//     (u_X · u_dY); db = Σ_rows dY from the float32 dY in row order (Transformer Engine's dbias is computed before
//     the cast).
//   delayed scaling (DenseArgs::fp8, registry.hpp's Fp8Scales): the dense kernels cast with the scales given
//     instead, and write the operands' amaxes; fp8 is used in the GEMMs, so only they take it.
//   sum, sumsq, maxabs, dot: the f32 reduction of the q's, times u (sumsq: times u twice, dot: times u_x · u_y).
//   mse (p and y) and softmax (x): each input cast to E4M3 and read back as q_i · u in float32, then the f32 kernel.
// mxfp8_f32acc (OCP MXFP8, E4M3 elements for every tensor, Transformer Engine's MXFP8BlockScaling):
//   each operand quantised in blocks of 32 along the dimension its product reduces over (mx.hpp's mx_quantize;
//   a row's last block padded with zeros, which change no block's scale), then read back exactly (element · 2^e;
//   a block holding a NaN or an inf reads as NaN), and the f32 kernel computes on those values. dense_fwd: X's
//   rows and W's columns (over k); dense_bwd: dY's rows and W's rows for dX (over n), X's and dY's columns for dW
//   (over m), db from the float32 dY as above; reductions, mse: blocks of the flat array; softmax: of each row.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "halfmap/conversions.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/scratch.hpp"

namespace halfmap::detail {

/// One path's parts of the scaled modes.
struct ScaledParts {
  Fp8RoundFn e4m3_round, e5m2_round;  // onto the grid in float32, saturating
  MxRoundFn mx_round;                 // MXFP8 E4M3 blocks read back in float32
  ReduceFn sum, sumsq, maxabs, dot;
  DenseFn dense;
  DenseBwdFn dense_bwd;
  LossFn mse;
  SoftmaxFn softmax;
};

/// The scaled kernels of one path, P being its parts. Everything is a member of this template over P, whose
/// argument (rows.hpp's kScaledPartsOf, over the path's own types) has internal linkage in each path's kernels.cpp:
/// code compiled with one folder's ISA flags then has a name of its own and cannot be merged with another folder's
/// (src/kernels/avx512/ops.hpp says why that matters).
template <const ScaledParts& P>
struct Scaled {
  /// max |x_i|, NaN when x holds a NaN.
  static float amax_of(const float* x, std::size_t n) {
    // The magnitudes' bits order like their values, and every NaN is above +inf's (an integer max, vectorised).
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<std::uint32_t>(x[i]) & 0x7FFFFFFFu);
    return m > 0x7F800000u ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(m);
  }

  /// This thread's scratch array number kSlot, of at least n elements, 64-byte aligned, its contents unspecified.
  /// The casts below write their results here rather than into a new vector per call: glibc hands a large freed
  /// block back to the OS, so a per-call allocation page-faults its copy in again at every call (which cost the
  /// fp8 dense forward up to 3× of its speed). Each slot is only held for the duration of one kernel call, and
  /// two results alive at the same time use two slots.
  template <int kSlot, class T>
  static T* scratch(std::size_t n) {
    thread_local std::vector<T> buf;
    return aligned_scratch(buf, n);
  }
  enum Slot : int { kOut0, kOut1, kOut2, kTile };

  /// A tensor cast to fp8: q its values (exact in float32, in scratch slot kSlot), the tensor ≈ q · unscale.
  struct Cast {
    float* q;
    float unscale;
  };

  /// The per-tensor scale of x: fp8_scale of its amax (current scaling) or `given` (delayed scaling); with `seen`,
  /// the amax is written there.
  static float tensor_scale(Fp8 f, const float* x, std::size_t n, const float* given, float* seen) {
    const float amax = amax_of(x, n);
    if (seen != nullptr) *seen = amax;
    return given != nullptr ? *given : fp8_scale(amax, f);
  }
  static Fp8RoundFn round_of(Fp8 f) { return f == Fp8::e4m3 ? P.e4m3_round : P.e5m2_round; }

  /// The header's cast with the tensor's scale (tensor_scale), into scratch slot kSlot: two passes over x, its
  /// amax and the rounding onto the grid (Fp8RoundFn, no fp8 byte in between).
  template <int kSlot>
  static Cast cast_tensor(Fp8 f, const float* x, std::size_t n, const float* given = nullptr, float* seen = nullptr) {
    const float s = tensor_scale(f, x, n, given, seen);
    float* const q = scratch<kSlot, float>(n);
    round_of(f)(x, n, s, 1.0f, q);
    return {q, 1.0f / s};
  }

  /// A dense kernel's operand t (n values) cast with cast_tensor: with delayed scaling (d8), the scale given and the
  /// amax seen are d8's members `scale` and `amax`.
  template <int kSlot>
  static Cast cast_operand(Fp8 f, const void* t, std::size_t n, Fp8Scales* d8, float Fp8Scales::*scale,
                           float Fp8Scales::*amax) {
    return cast_tensor<kSlot>(f, static_cast<const float*>(t), n, d8 ? &(d8->*scale) : nullptr,
                              d8 ? &(d8->*amax) : nullptr);
  }

  /// The cast read back in float32: q_i · unscale, in scratch slot kSlot (current scaling).
  template <int kSlot>
  static const float* cast_tensor_values(Fp8 f, const float* x, std::size_t n) {
    const float s = tensor_scale(f, x, n, nullptr, nullptr);
    float* const v = scratch<kSlot, float>(n);
    round_of(f)(x, n, s, 1.0f / s, v);
    return v;
  }

  /// MXFP8 E4M3 blocks along each of `rows` rows of `cols` values (stride `cols`), read back exactly into scratch
  /// slot kSlot. A row's last block is padded with zeros.
  template <int kSlot>
  static const float* mx_rows(const float* x, std::size_t rows, std::size_t cols) {
    float* const out = scratch<kSlot, float>(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) P.mx_round(x + r * cols, cols, out + r * cols);
    return out;
  }

  /// MXFP8 blocks along each column of a rows × cols matrix (stride cols), read back exactly, in the matrix's
  /// layout, into scratch slot kSlot. The blocks are gathered 32 columns at a time from 32 rows into one 4 KiB
  /// tile (a column's block contiguous), quantised there, and scattered back: every line of x and of the output
  /// is touched once per tile, where a whole transpose would reuse lines a page apart, which share an L1 set.
  template <int kSlot>
  static const float* mx_cols(const float* x, std::size_t rows, std::size_t cols) {
    float* const out = scratch<kSlot, float>(rows * cols);
    float* const tile = scratch<kTile, float>(kMxBlock * kMxBlock);
    for (std::size_t r0 = 0; r0 < rows; r0 += kMxBlock) {
      const std::size_t nr = std::min(kMxBlock, rows - r0);
      for (std::size_t c0 = 0; c0 < cols; c0 += kMxBlock) {
        const std::size_t nc = std::min(kMxBlock, cols - c0);
        for (std::size_t r = 0; r < nr; ++r) {
          for (std::size_t c = 0; c < nc; ++c) tile[c * kMxBlock + r] = x[(r0 + r) * cols + c0 + c];
        }
        for (std::size_t c = 0; c < nc; ++c) std::fill(tile + c * kMxBlock + nr, tile + (c + 1) * kMxBlock, 0.0f);
        P.mx_round(tile, nc * kMxBlock, tile);
        for (std::size_t r = 0; r < nr; ++r) {
          for (std::size_t c = 0; c < nc; ++c) out[(r0 + r) * cols + c0 + c] = tile[c * kMxBlock + r];
        }
      }
    }
    return out;
  }

  /// db = Σ_rows dY in float32, row order.
  static void bias_grad(const float* dy, std::size_t m, std::size_t n, float* db) {
    std::fill(db, db + n, 0.0f);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) db[j] += dy[i * n + j];
    }
  }

  static void scale_array(float* y, std::size_t n, float d) {
    for (std::size_t i = 0; i < n; ++i) y[i] *= d;
  }

  // ---- fp8_f32acc ----------------------------------------------------------------------------------------------

  static void fp8_dense_fwd(const DenseArgs& a) {
    Fp8Scales* const d8 = a.fp8;
    const Cast x = cast_operand<kOut0>(Fp8::e4m3, a.x, a.m * a.k, d8, &Fp8Scales::x, &Fp8Scales::amax_x);
    const Cast w = cast_operand<kOut1>(Fp8::e4m3, a.w, a.k * a.n, d8, &Fp8Scales::w, &Fp8Scales::amax_w);
    DenseArgs q = a;
    q.x = x.q;
    q.w = w.q;
    q.b = nullptr;
    q.act = Act::identity;
    P.dense(q);
    const float d = x.unscale * w.unscale;
    auto* y = static_cast<float*>(a.y);
    const auto* b = static_cast<const float*>(a.b);
    for (std::size_t i = 0; i < a.m; ++i) {
      for (std::size_t j = 0; j < a.n; ++j) {
        float v = y[i * a.n + j] * d;
        if (b != nullptr) v += b[j];
        y[i * a.n + j] = a.act == Act::relu && v < 0.0f ? 0.0f : v;
      }
    }
  }

  static void fp8_dense_bwd(const DenseBwdArgs& a) {
    const auto* dy = static_cast<const float*>(a.dy);
    Fp8Scales* const d8 = a.fp8;
    const Cast g = cast_operand<kOut0>(Fp8::e5m2, dy, a.m * a.n, d8, &Fp8Scales::dy, &Fp8Scales::amax_dy);
    const Cast x = cast_operand<kOut1>(Fp8::e4m3, a.x, a.m * a.k, d8, &Fp8Scales::x, &Fp8Scales::amax_x);
    const Cast w = cast_operand<kOut2>(Fp8::e4m3, a.w, a.k * a.n, d8, &Fp8Scales::w, &Fp8Scales::amax_w);
    DenseBwdArgs q = a;
    q.x = x.q;
    q.w = w.q;
    q.dy = g.q;
    q.db = nullptr;
    if (a.dx != nullptr || a.dw != nullptr) P.dense_bwd(q);
    if (a.dx != nullptr) scale_array(static_cast<float*>(a.dx), a.m * a.k, g.unscale * w.unscale);
    if (a.dw != nullptr) scale_array(static_cast<float*>(a.dw), a.k * a.n, x.unscale * g.unscale);
    if (a.db != nullptr) bias_grad(dy, a.m, a.n, static_cast<float*>(a.db));
  }

  /// P's f32 reduction kOp of the cast values x (and y: dot).
  template <Op kOp>
  static float f32_reduce(const float* x, const float* y, std::size_t n) {
    switch (kOp) {
      case Op::sum:
        return P.sum(x, nullptr, n);
      case Op::sumsq:
        return P.sumsq(x, nullptr, n);
      case Op::maxabs:
        return P.maxabs(x, nullptr, n);
      default:
        return P.dot(x, y, n);
    }
  }

  template <Op kOp>
  static float fp8_reduce(const void* x, const void* y, std::size_t n) {
    const Cast cx = cast_tensor<kOut0>(Fp8::e4m3, static_cast<const float*>(x), n);
    if constexpr (kOp == Op::dot) {
      const Cast cy = cast_tensor<kOut1>(Fp8::e4m3, static_cast<const float*>(y), n);
      return P.dot(cx.q, cy.q, n) * (cx.unscale * cy.unscale);
    } else {
      const float r = f32_reduce<kOp>(cx.q, nullptr, n) * cx.unscale;
      return kOp == Op::sumsq ? r * cx.unscale : r;  // (Σ q²) · u · u
    }
  }

  static float fp8_mse(const LossArgs& a) {
    LossArgs q = a;
    q.p = cast_tensor_values<kOut0>(Fp8::e4m3, static_cast<const float*>(a.p), a.n);
    q.y = cast_tensor_values<kOut1>(Fp8::e4m3, static_cast<const float*>(a.y), a.n);
    return P.mse(q);
  }

  static void fp8_softmax(const SoftmaxArgs& a) {
    const std::size_t n = a.rows * a.cols;
    SoftmaxArgs q = a;
    q.x = cast_tensor_values<kOut0>(Fp8::e4m3, static_cast<const float*>(a.x), n);
    P.softmax(q);
  }

  // ---- mxfp8_f32acc --------------------------------------------------------------------------------------------

  static void mx_dense_fwd(const DenseArgs& a) {
    DenseArgs q = a;
    q.x = mx_rows<kOut0>(static_cast<const float*>(a.x), a.m, a.k);
    q.w = mx_cols<kOut1>(static_cast<const float*>(a.w), a.k, a.n);
    P.dense(q);
  }

  /// P's dense backward for dX alone (the quantised dY and W) or for dW alone (dY and X).
  static void one_gradient(const DenseBwdArgs& a, bool dw, const float* dy, const float* operand) {
    DenseBwdArgs q = a;
    q.dy = dy;
    (dw ? q.x : q.w) = operand;
    (dw ? q.dx : q.dw) = nullptr;
    q.db = nullptr;
    P.dense_bwd(q);
  }

  static void mx_dense_bwd(const DenseBwdArgs& a) {
    const auto* dy = static_cast<const float*>(a.dy);
    if (a.dx != nullptr) {
      const float* const qdy = mx_rows<kOut0>(dy, a.m, a.n);
      one_gradient(a, false, qdy, mx_rows<kOut1>(static_cast<const float*>(a.w), a.k, a.n));
    }
    if (a.dw != nullptr) {
      const float* const qdy = mx_cols<kOut0>(dy, a.m, a.n);
      one_gradient(a, true, qdy, mx_cols<kOut1>(static_cast<const float*>(a.x), a.m, a.k));
    }
    if (a.db != nullptr) bias_grad(dy, a.m, a.n, static_cast<float*>(a.db));
  }

  template <Op kOp>
  static float mx_reduce(const void* x, const void* y, std::size_t n) {
    const float* const qx = mx_rows<kOut0>(static_cast<const float*>(x), 1, n);
    return f32_reduce<kOp>(qx, kOp == Op::dot ? mx_rows<kOut1>(static_cast<const float*>(y), 1, n) : nullptr, n);
  }

  static float mx_mse(const LossArgs& a) {
    LossArgs q = a;
    q.p = mx_rows<kOut0>(static_cast<const float*>(a.p), 1, a.n);
    q.y = mx_rows<kOut1>(static_cast<const float*>(a.y), 1, a.n);
    return P.mse(q);
  }

  static void mx_softmax(const SoftmaxArgs& a) {
    SoftmaxArgs q = a;
    q.x = mx_rows<kOut0>(static_cast<const float*>(a.x), a.rows, a.cols);
    P.softmax(q);
  }
};

}  // namespace halfmap::detail
