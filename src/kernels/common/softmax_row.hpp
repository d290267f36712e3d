// One softmax row, the step that softmax, softmax_naive and xent share (nn.hpp): halfmap's exp on vectors, the
// row's exact range, and the row's passes in the f32-accumulating modes and in fp16 arithmetic. The traits M, S
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
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "halfmap/registry.hpp"
#include "kernels/common/lanes.hpp"   // Lanes, HALFMAP_VEC_INLINE
#include "kernels/common/reduce.hpp"  // hsum


namespace halfmap::detail {

/// The f32 value of one storage-type bit pattern (exact; src/kernels/common/nn.cpp).
float widen_bits(DType storage, std::uint32_t bits);

// ---- exp -----------------------------------------------------------------------------------------------------

namespace exp_consts {
inline constexpr float kLo = -104.0f;               // below: exp < 2^-150, rounds to +0
inline constexpr float kHi = 89.0f;                 // above 88.7228: exp overflows to +inf
inline constexpr float kLog2e = 0x1.715476p+0f;
inline constexpr float kRound = 0x1.8p23f;          // fma(x, kLog2e, kRound) - kRound: x·log2(e) rounded to an integer
inline constexpr float kLn2Hi = 0x1.62e430p-1f;     // ln 2 rounded to f32 (0.693147182...)
inline constexpr float kLn2Lo = 0x1.05c610p-29f;    // kLn2Hi - ln 2, rounded to f32
// e^r ≈ Σ kPoly[k]·r^k on |r| ≤ ln2/2 (Cephes expf's coefficients, k ≥ 2).
inline constexpr float kPoly[8] = {1.0f,           1.0f,           5.0000001201e-1f, 1.6666665459e-1f,
                                   4.1665795894e-2f, 8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
// The fast rows' bounds: every t_j in [kRowLo, kExpHi] keeps e_j = exp(t_j) normal (e^-40 > 2^-58, e^88 below
// the f32 maximum) and finite.
inline constexpr float kRowLo = -40.0f;
inline constexpr float kExpHi = 88.0f;
}  // namespace exp_consts

/// exp_f32_generic without the clamp and the NaN pass, for x already in [kLo, kHi] (so not NaN): there both are
/// the identity, so this returns the same bits as exp_f32_generic. Softmax rows whose range is checked once use it.
/// kNormal: x is also in [kRowLo, kExpHi], so p·2^n is a normal f32, which p with n added to its exponent field
/// is exactly (M::scale2n_normal, where the ISA has it: two integer operations instead of scale2n's
/// two-step product); the same bits again, since scale2n rounds an exact normal result to itself.
template <class M, bool kNormal = false>
HALFMAP_VEC_INLINE typename M::V exp_f32_inrange(typename M::V xc) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V nk = M::fma(xc, M::set1(c::kLog2e), M::set1(c::kRound));  // 1.5·2^23 + n
  const V n = M::sub(nk, M::set1(c::kRound));
  V r = M::fma(n, M::set1(-c::kLn2Hi), xc);
  r = M::fma(n, M::set1(c::kLn2Lo), r);
  V p = M::set1(c::kPoly[7]);
  for (int k = 6; k >= 0; --k) p = M::fma(p, r, M::set1(c::kPoly[k]));
  if constexpr (kNormal && requires(V v) { M::scale2n_normal(v, v); }) {
    return M::scale2n_normal(p, nk);
  } else {
    return M::scale2n(p, n);
  }
}

/// halfmap's exp on one register of M (see include/halfmap/math.hpp for the algorithm and its measured error).
/// Every ISA and the scalar exp_f32 run exactly these operations in this order, so they agree bit for bit.
template <class M>
HALFMAP_VEC_INLINE typename M::V exp_f32_generic(typename M::V x) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V xc = M::min(M::max(x, M::set1(c::kLo)), M::set1(c::kHi));  // a NaN is restored by nan_pass
  return M::nan_pass(x, exp_f32_inrange<M>(xc));
}

/// tanh(u) = 1 - 2/(e^(2u) + 1) with halfmap's exp (include/halfmap/math.hpp, tanh_f32): every operation the
/// same on every ISA, so SIMD and scalar agree bit for bit. 2u is exact; e^(2u) = inf gives 1 and e^(2u) = 0 gives
/// -1, so no input overflows; NaN gives NaN.
template <class M>
HALFMAP_VEC_INLINE typename M::V tanh_f32_generic(typename M::V u) {
  const typename M::V one = M::set1(1.0f);
  const typename M::V e = exp_f32_generic<M>(M::add(u, u));
  return M::nan_pass(u, M::sub(one, M::div(M::set1(2.0f), M::add(e, one))));
}

/// erf(z) by Abramowitz and Stegun 7.1.26 (absolute error of the formula at most 1.5e-7): for a = |z|,
/// t = 1/(1 + p·a), erf(a) = 1 - t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(-a²), the sign of z restored; every
/// multiply-add fused, the exp halfmap's. The same operations on every ISA (include/halfmap/math.hpp, erf_f32).
template <class M>
HALFMAP_VEC_INLINE typename M::V erf_f32_generic(typename M::V z) {
  using V = typename M::V;
  const V zero = M::set1(0.0f), one = M::set1(1.0f);
  const V a = M::max(z, M::sub(zero, z));  // |z| (a NaN is restored by nan_pass)
  const V t = M::div(one, M::fma(M::set1(0.3275911f), a, one));
  V q = M::set1(1.061405429f);
  q = M::fma(q, t, M::set1(-1.453152027f));
  q = M::fma(q, t, M::set1(1.421413741f));
  q = M::fma(q, t, M::set1(-0.284496736f));
  q = M::fma(q, t, M::set1(0.254829592f));
  q = M::mul(q, t);
  const V e = exp_f32_generic<M>(M::sub(zero, M::mul(a, a)));
  return M::nan_pass(z, M::copysign(M::fma(M::sub(zero, q), e, one), z));
}

/// nn.hpp's H: an ISA's fp16 ops F16 with the register count of the fp16 sums (R, so `lanes` = F16::kW·R) and
/// the exp on M. The register count belongs to the algorithm, not to the ISA's ops (the reductions use 8).
template <class F16, class M, std::size_t R>
struct Fp16Ops : F16 {
  using Math = M;
  static constexpr std::size_t kRegs = R;
  static typename F16::HV exp_store(std::uint16_t* p, typename F16::HV t) {
    return F16::exp_store_with(p, t, [](typename M::V x) { return exp_f32_generic<M>(x); });
  }
  /// exp_store for t in [kRowLo, kExpHi]: the same bits (exp_f32_inrange).
  static typename F16::HV exp_store_inrange(std::uint16_t* p, typename F16::HV t) {
    return F16::exp_store_with(p, t, [](typename M::V x) { return exp_f32_inrange<M, true>(x); });
  }
};

/// Starts loading the cache lines of [p, p + bytes) (a hint: never faults, reads no data into registers).
inline void prefetch_bytes(const void* p, std::size_t bytes) {
  for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b, 0, 3);
}

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

/// e/s as q' = q + (e - q·s)·y with q = e·y and y = 1/s correctly rounded (neg_s = -s), two fused multiply-adds:
/// the correctly rounded quotient, the bits of a division, when y is 1/s rounded, e, s, e/s and 1/s are normal
/// and e/s is at least 2^-118 (Markstein's theorem: the remainder e - q·s is then exact and q within one ulp).
/// e = +0 gives +0 as the division does. exp_pass_f32acc and softmax_row_f16 check those bounds per row; nn_test
/// checks the identity against division.
template <class M>
typename M::V quotient_by_reciprocal(typename M::V e, typename M::V y, typename M::V neg_s) {
  const typename M::V q = M::mul(e, y);
  return M::fma(M::fma(q, neg_s, e), y, q);
}

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

/// Stores q's first n lanes, rounded to the storage type, at p.
template <class S>
void store_lanes(typename S::Elem* p, typename S::M::V q, std::size_t n) {
  using Elem = typename S::Elem;
  if (n == S::M::kW) {
    S::store(p, q);
  } else {
    Elem b[S::M::kW];
    S::store(b, q);
    std::memcpy(p, b, n * sizeof(Elem));
  }
}

/// One softmax row in f32: e_j = exp(x_j - m) (or exp(x_j)), s = Σ e_j in any order, y_j = store(e_j / s).
/// `e` is scratch for cols rounded up to a whole block of 4·kW floats; `next` the next row's x, or null. y may
/// equal x (it is prefetched during pass 2, then written).
template <class S, bool kStable>
void softmax_row_f32acc(const typename S::Elem* x, typename S::Elem* y, std::size_t cols, float* e,
                        const typename S::Elem* next) {
  const RowSum sum = exp_pass_f32acc<S, kStable>(x, cols, e, next, y);
  quotient_pass_f32acc<S>(e, cols, sum, [&](std::size_t j, typename S::M::V q, std::size_t n) {
    store_lanes<S>(y + j, q, n);
  });
}

// ---- fp16 modes --------------------------------------------------------------------------------------------

/// Stores v's first n ≤ kW fp16 lanes at p with every NaN made the canonical 0x7E00 (the outputs of the fp16
/// kernels that write elementwise: norm.hpp, gelu.hpp); nothing past p + n is written.
template <class H>
void store_canon_lanes(std::uint16_t* p, typename H::HV v, std::size_t n) {
  if (n >= H::kW) {
    H::store(p, H::canon(v));
  } else {
    std::uint16_t b[H::kW];
    H::store(b, H::canon(v));
    std::memcpy(p, b, n * sizeof(std::uint16_t));
  }
}

/// Folds kRegs registers of kW lanes (lane r·kW + k) in f16_model::fold_lanes' order and returns lane 0's bits.
template <class H>
std::uint16_t fold_lanes_vec(typename H::HV* acc) {
  for (std::size_t w = H::kRegs / 2; w >= 1; w /= 2) {
    for (std::size_t r = 0; r < w; ++r) acc[r] = H::add(acc[r], acc[r + w]);
  }
  typename H::HV v = acc[0];
  for (unsigned w = H::kW / 2; w >= 1; w /= 2) v = H::add(v, H::rot(v, w));
  return H::lane0(v);
}

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
/// Whether H is a per-operation fp16 type on F16C: its fp16 values live widened in the f32 math's registers (HV is
/// M::V) and H::round rounds one to fp16, so exp_store_with(p, t, f) is round(f(t)) (plus the store to p), and f
/// may as well run on several registers at once (Lanes<M, R>) before each is rounded and stored.
template <class H>
concept F16cRoundTrip = std::is_same_v<typename H::HV, typename H::Math::V> && requires(typename H::HV v) {
  { H::round(v) } -> std::same_as<typename H::HV>;
};

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
      const typename LM::V e =
          decltype(inrange)::value ? exp_f32_inrange<LM, true>(t) : exp_f32_generic<LM>(t);
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
