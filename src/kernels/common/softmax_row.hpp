// One softmax row, the step that softmax, softmax_naive and xent share (nn.hpp): the row's exact range, and the
// row's passes in the f32-accumulating modes and in fp16 arithmetic, on halfmap's exp (vmath.hpp). The traits M, S
// and H are nn.hpp's (see the top of that file).
//
// A row is three passes over its elements, each at most a few instructions per element, so at the DRAM level the
// row's bytes, not the arithmetic, set the speed only if memory works while the arithmetic runs:
//   1. the exact max and min of the row and whether it holds a NaN (row_range_bits): one read of x from memory;
//   2. e_j = exp(x_j - m) into scratch (f32 modes) or y (fp16), summed: x again, now from L1. While it runs the
//      next row's x is prefetched (`next`), so that its cache misses overlap this row's arithmetic instead of
//      stalling pass 1 of the next row (rows of 1024 f32 are one 4 KiB page, where the hardware prefetchers stop);
//   3. y_j = e_j / s: scratch (or y) from L1, y written.
// Rows whose range is known to keep every step in range take fast paths with the same bits as the general ones:
// no clamp or NaN pass in the exp, p·2^n formed exactly in the exponent field (the results are normal), and the
// division as a multiply by 1/s corrected by one remainder step (quotient_by_reciprocal).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "halfmap/registry.hpp"
#include "kernels/common/fp16_ops.hpp"  // F16cRoundTrip, fold_lanes_vec
#include "kernels/common/lanes.hpp"     // Lanes
#include "kernels/common/reduce.hpp"    // hsum
#include "kernels/common/row_io.hpp"    // store_lanes, prefetch_bytes
#include "kernels/common/vmath.hpp"     // exp_consts, exp_f32_generic, exp_f32_inrange, quotient_by_reciprocal

namespace halfmap::detail {

/// The f32 value of one storage-type bit pattern (exact; src/kernels/common/nn.cpp).
float widen_bits(DType storage, std::uint32_t bits);

// ---- storage bit patterns and the exact row max ----------------------------------------------------------------

template <DType t>
struct StorageBits;
template <>
struct StorageBits<DType::f32> {
  using U = std::uint32_t;
  static constexpr U kAbsInf = 0x7F800000u, kQNaN = 0x7FC00000u;
};
template <>
struct StorageBits<DType::f16> {
  using U = std::uint16_t;
  static constexpr U kAbsInf = 0x7C00u, kQNaN = 0x7E00u;
};
template <>
struct StorageBits<DType::bf16> {
  using U = std::uint16_t;
  static constexpr U kAbsInf = 0x7F80u, kQNaN = 0x7FC0u;
};

/// The ordering key of a storage type's bits, for row_max_bits: an involution. Tag (the caller's) keeps each
/// ISA's copy of of() apart.
template <class Tag, DType kStorage, class Elem>
struct OrderKey {
  using B = StorageBits<kStorage>;
  using U = typename B::U;
  using S = std::make_signed_t<U>;
  static_assert(sizeof(Elem) == sizeof(U));
  static S bits(Elem e) { return static_cast<S>(std::bit_cast<U>(e)); }
  static constexpr int kShift = int(sizeof(U)) * 8 - 1;
  static constexpr S kMag = std::numeric_limits<S>::max();
  static S of(S s) { return static_cast<S>(s ^ ((s >> kShift) & kMag)); }
};

/// Bit pattern of max x over n ≥ 1 elements, exact, or the type's quiet NaN if any element is NaN. Works on
/// ordering keys: for a signed view s of the bits, key = s ^ (s < 0 ? 0x7F..F : 0) orders like the values (-0
/// just below +0); NaN is detected separately as |bits| > inf. A plain loop, vectorised by the compiler with the
/// ISA of the file that instantiates it (Tag keeps the instantiations apart).
template <class Tag, DType kStorage, class Elem>
typename StorageBits<kStorage>::U row_max_bits(const Elem* x, std::size_t n) {
  using K = OrderKey<Tag, kStorage, Elem>;
  using S = typename K::S;
  S kmax = std::numeric_limits<S>::min(), amax = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const S s = K::bits(x[i]);
    const S key = K::of(s);
    kmax = key > kmax ? key : kmax;
    const S a = static_cast<S>(s & K::kMag);
    amax = a > amax ? a : amax;
  }
  if (amax > static_cast<S>(K::B::kAbsInf)) return K::B::kQNaN;
  return static_cast<typename K::U>(K::of(kmax));
}

/// Bit patterns of max x and min x over n ≥ 1 elements, exact (-0 below +0), when no element is NaN (`nan`).
template <DType kStorage>
struct RowRange {
  typename StorageBits<kStorage>::U max, min;
  bool nan;
};
/// Four integer reductions of the bits, each one instruction per vector and exact in any order: as signed
/// integers the non-negative values order like the floats and lie above every negative one; as unsigned integers
/// the negative values lie above every non-negative one and order by magnitude. So max x is the signed maximum
/// if that is non-negative, else (all negative) the unsigned minimum, the smallest magnitude; min x is the
/// unsigned maximum if that is negative, the largest magnitude of the negatives, else the signed minimum. A NaN
/// lies above inf in one of the two maxima. A plain loop, vectorised by the compiler with the ISA of the file
/// that instantiates it (Tag keeps the instantiations apart).
template <class Tag, DType kStorage, class Elem>
RowRange<kStorage> row_range_bits(const Elem* x, std::size_t n) {
  using B = StorageBits<kStorage>;
  using U = typename B::U;
  using S = std::make_signed_t<U>;
  static_assert(sizeof(Elem) == sizeof(U));
  constexpr U kSign = U(U(1) << (sizeof(U) * 8 - 1));
  S smax = std::numeric_limits<S>::min(), smin = std::numeric_limits<S>::max();
  U umax = 0, umin = std::numeric_limits<U>::max();
#pragma GCC unroll 4
  for (std::size_t i = 0; i < n; ++i) {
    const U u = std::bit_cast<U>(x[i]);
    const S s = static_cast<S>(u);
    smax = s > smax ? s : smax;
    smin = s < smin ? s : smin;
    umax = u > umax ? u : umax;
    umin = u < umin ? u : umin;
  }
  const bool nan = smax > static_cast<S>(B::kAbsInf) || umax > U(kSign | B::kAbsInf);
  return {smax >= 0 ? static_cast<U>(smax) : umin, umax >= kSign ? umax : static_cast<U>(smin), nan};
}

// ---- f32-accumulating modes ----------------------------------------------------------------------------------

/// What pass 2 of an f32 row leaves for pass 3: s = Σ e_j, and whether e_j / s may be computed by
/// quotient_by_reciprocal (every e_j normal or zero, s ≤ 2^60 finite).
struct RowSum {
  float s;
  bool reciprocal;
};

/// Passes 1 and 2 of one f32-mode row (see the top of this file): e_j = exp(x_j - m) (or exp(x_j)) into `e`,
/// scratch for cols rounded up to a whole block of 4·kW floats (the padding gets +0), and s = Σ e_j over 4·kW
/// lanes (hsum's order). `next` (the next row's x) and `out` (this row's output, written in pass 3) are prefetched
/// meanwhile, each when not null.
///
/// Fast rows: when every t_j (x_j - m, or x_j) is known to lie in [kRowLo, kExpHi] (one test of the row's range),
/// the exp needs no clamp or NaN pass and its results are normal (exp_f32_inrange<M, true>: the same bits), and
/// every e_j ≥ e^-40 > 2^-58, so with s ≤ 2^60 every quotient is at least 2^-118 and pass 3 may use
/// quotient_by_reciprocal. Other rows (NaN, infinities, |t| beyond the bounds) take the general exp and division.
template <class S, bool kStable>
RowSum exp_pass_f32acc(const typename S::Elem* x, std::size_t cols, float* e, const typename S::Elem* next,
                       const typename S::Elem* out) {
  namespace c = exp_consts;
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, R = 4, L = W * R;
  constexpr float kSumHi = 0x1p60f;
  const auto range = row_range_bits<S, S::kStorage>(x, cols);
  const float xmax = widen_bits(S::kStorage, range.max), xmin = widen_bits(S::kStorage, range.min);
  float m = 0.0f;
  bool fast;
  if constexpr (kStable) {
    // fl(xmin - m) ≤ fl(x_j - m) ≤ 0 by the monotony of rounding; -inf or +inf fails the test.
    m = range.nan ? std::numeric_limits<float>::quiet_NaN() : xmax;
    fast = !range.nan && xmin - m >= c::kRowLo && m - m == 0.0f;
  } else {
    fast = !range.nan && xmin >= c::kRowLo && xmax <= c::kExpHi;
  }
  const V mv = M::set1(m);
  V acc[R] = {M::set1(0.0f), M::set1(0.0f), M::set1(0.0f), M::set1(0.0f)};
  auto block = [&](const Elem* xp, std::size_t j, auto inrange) {
    if (next != nullptr) prefetch_bytes(next + j, L * sizeof(Elem));
    if (out != nullptr) prefetch_bytes(out + j, L * sizeof(Elem));
    for (std::size_t r = 0; r < R; ++r) {
      V t = S::load(xp + r * W);
      if constexpr (kStable) t = M::sub(t, mv);
      V ev;
      if constexpr (decltype(inrange)::value) {
        ev = exp_f32_inrange<M, true>(t);
      } else {
        ev = exp_f32_generic<M>(t);
      }
      M::store(e + j + r * W, ev);
      acc[r] = M::add(acc[r], ev);
    }
  };
  std::size_t j = 0;
  if (fast) {
    for (; j + L <= cols; j += L) block(x + j, j, std::true_type{});
  } else {
    for (; j + L <= cols; j += L) block(x + j, j, std::false_type{});
  }
  if (j < cols) {  // the -inf padding is out of range: the general exp
    Elem xb[L];
    std::fill(xb, xb + L, S::kNegInf);
    std::memcpy(xb, x + j, (cols - j) * sizeof(Elem));
    block(xb, j, std::false_type{});
  }
  const float s = hsum<M>(acc);
  return {s, fast && s <= kSumHi};
}

/// Pass 3 of one f32-mode row: q_j = e_j / s (exp_pass_f32acc's e and sum), handed to sink(j, q, n) for the
/// elements [j, j + n) of the row, n = kW except at the row's end (n < kW: lanes n and up hold +0 / s and must
/// not be stored).
template <class S, class Sink>
void quotient_pass_f32acc(const float* e, std::size_t cols, RowSum sum, Sink sink) {
  using M = typename S::M;
  using V = typename M::V;
  constexpr std::size_t W = M::kW;
  auto pass = [&](auto quot) {
    std::size_t j = 0;
#pragma GCC unroll 2
    for (; j + W <= cols; j += W) sink(j, quot(M::load(e + j)), W);
    if (j < cols) sink(j, quot(M::load(e + j)), cols - j);  // e's padding (+0) gives +0
  };
  const V sv = M::set1(sum.s);
  if (sum.reciprocal) {
    const V rv = M::set1(1.0f / sum.s), nsv = M::set1(-sum.s);
    pass([&](V ev) { return quotient_by_reciprocal<M>(ev, rv, nsv); });
  } else {
    pass([&](V ev) { return M::div(ev, sv); });
  }
}

/// Pass 3's quotient of element j alone, as stored (the same operations on one lane): xent's label.
template <class S>
typename S::Elem quotient_at(const float* e, RowSum sum, std::size_t j) {
  using M = typename S::M;
  const typename M::V ev = M::set1(e[j]);
  typename S::Elem b[M::kW];
  S::store(b, sum.reciprocal ? quotient_by_reciprocal<M>(ev, M::set1(1.0f / sum.s), M::set1(-sum.s))
                             : M::div(ev, M::set1(sum.s)));
  return b[0];
}

/// One softmax row in f32: e_j = exp(x_j - m) (or exp(x_j)), s = Σ e_j in any order, y_j = store(e_j / s).
/// `e` is scratch for cols rounded up to a whole block of 4·kW floats; `next` the next row's x, or null. y may
/// equal x (it is prefetched during pass 2, then written).
template <class S, bool kStable>
void softmax_row_f32acc(const typename S::Elem* x, typename S::Elem* y, std::size_t cols, float* e,
                        const typename S::Elem* next) {
  const RowSum sum = exp_pass_f32acc<S, kStable>(x, cols, e, next, y);
  quotient_pass_f32acc<S>(e, cols, sum,
                          [&](std::size_t j, typename S::M::V q, std::size_t n) { store_lanes<S>(y + j, q, n); });
}

// ---- fp16 modes --------------------------------------------------------------------------------------------

/// One softmax row in fp16 arithmetic: t_j = x_j - m (stable) rounded, e_j = fp16 exp(t_j) written to y,
/// s = Σ e_j over L lanes, then y_j = canon(e_j / s). y may equal x. `next` (the next row's x) and `out` (cols
/// values written after this row's pass 2: the next row's y, or xent's dlogits) are prefetched during pass 2, each
/// when not null.
///
/// Fast rows, with the same bits: when no x_j is NaN and every t_j lies in [kRowLo, kExpHi] (from the row's
/// range: rounding is monotone and the bounds are fp16 values), the exp needs no clamp or NaN pass
/// (exp_store_inrange). Where the fp16 lanes are f32 registers (per-operation on F16C) and s is finite and
/// nonzero, every e_j is finite, so no quotient is NaN (canon is the identity) and e_j / s, rounded once to fp16,
/// is quotient_by_reciprocal's correctly rounded f32 quotient rounded: e_j and s are fp16 values, normal in f32
/// (or e_j = 0), s ≤ 65504, so 1/s is normal and e_j / s ≥ 2^-24 / 65504 > 2^-118.
template <class H, bool kStable>
void softmax_row_f16(const std::uint16_t* x, std::uint16_t* y, std::size_t cols, const std::uint16_t* next,
                     const std::uint16_t* out) {
  namespace c = exp_consts;
  using HV = typename H::HV;
  using M = typename H::Math;
  constexpr std::size_t W = H::kW, R = H::kRegs, L = W * R;
  const auto range = row_range_bits<H, DType::f16>(x, cols);
  const float xmax = widen_bits(DType::f16, range.max), xmin = widen_bits(DType::f16, range.min);
  HV mv = H::zero();
  bool fast;
  if constexpr (kStable) {
    mv = H::set1(range.nan ? StorageBits<DType::f16>::kQNaN : range.max);
    fast = !range.nan && xmin - xmax >= c::kRowLo && xmax - xmax == 0.0f;
  } else {
    fast = !range.nan && xmin >= c::kRowLo && xmax <= c::kExpHi;
  }
  HV acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = H::zero();
  auto block = [&](const std::uint16_t* xp, std::uint16_t* yp, std::size_t j, auto inrange) {
    if (next != nullptr) prefetch_bytes(next + j, L * sizeof(std::uint16_t));
    if (out != nullptr) prefetch_bytes(out + j, L * sizeof(std::uint16_t));
    if constexpr (F16cRoundTrip<H>) {  // the R exps side by side (Lanes: the same bits), then each rounded
      using LM = Lanes<M, R>;
      typename LM::V t;
      for (std::size_t r = 0; r < R; ++r) {
        t.r[r] = H::load(xp + r * W);
        if constexpr (kStable) t.r[r] = H::sub(t.r[r], mv);
      }
      const typename LM::V e = decltype(inrange)::value ? exp_f32_inrange<LM, true>(t) : exp_f32_generic<LM>(t);
      for (std::size_t r = 0; r < R; ++r) {
        acc[r] = H::add(acc[r], H::exp_store_with(yp + r * W, e.r[r], [](typename M::V v) { return v; }));
      }
      return;
    }
    for (std::size_t r = 0; r < R; ++r) {
      HV t = H::load(xp + r * W);
      if constexpr (kStable) t = H::sub(t, mv);
      if constexpr (decltype(inrange)::value) {
        acc[r] = H::add(acc[r], H::exp_store_inrange(yp + r * W, t));
      } else {
        acc[r] = H::add(acc[r], H::exp_store(yp + r * W, t));
      }
    }
  };
  std::size_t j = 0;
  if (fast) {
    for (; j + L <= cols; j += L) block(x + j, y + j, j, std::true_type{});
  } else {
    for (; j + L <= cols; j += L) block(x + j, y + j, j, std::false_type{});
  }
  if (j < cols) {
    std::uint16_t xb[L], eb[L];
    std::fill(xb, xb + L, std::uint16_t{0xFC00});  // -inf: exp(-inf - m) = +0 adds nothing to its lane
    std::memcpy(xb, x + j, (cols - j) * sizeof(std::uint16_t));
    block(xb, eb, j, std::false_type{});
    std::memcpy(y + j, eb, (cols - j) * sizeof(std::uint16_t));
  }
  const std::uint16_t s = fold_lanes_vec<H>(acc);
  const HV sv = H::set1(s);
  auto pass = [&](auto store_quot) {
    for (j = 0; j + W <= cols; j += W) store_quot(y + j, H::load(y + j));
    if (j < cols) {
      std::uint16_t b[W] = {};
      std::memcpy(b, y + j, (cols - j) * sizeof(std::uint16_t));
      store_quot(b, H::load(b));
      std::memcpy(y + j, b, (cols - j) * sizeof(std::uint16_t));
    }
  };
  const bool finite_nonzero = (s & 0x7FFFu) != 0 && (s & 0x7C00u) != 0x7C00u;
  if constexpr (W == M::kW) {  // the fp16 lanes are M's f32 registers (per-operation on F16C)
    if (finite_nonzero) {
      const HV rv = M::div(M::set1(1.0f), sv), nsv = M::sub(M::set1(0.0f), sv);
      pass([&](std::uint16_t* p, HV ev) { H::store(p, quotient_by_reciprocal<M>(ev, rv, nsv)); });
      return;
    }
  }
  pass([&](std::uint16_t* p, HV ev) { H::store_div(p, ev, sv); });
}

}  // namespace halfmap::detail
