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
//
//   S (f32-accumulating modes: f32, f16_f32acc, bf16_f32acc; storage_traits.hpp, or avx512bf16's Bf16)
//     M, Elem                    the math traits; storage element (float or uint16_t bit patterns)
//     kMode, kStorage, kNegInf   mode, storage type, -inf as an Elem
//     load(const Elem*) -> M::V  kW elements widened exactly to f32
//     store(Elem*, M::V)         kW elements rounded to the storage type (round to nearest even)
//
//   H (fp16 arithmetic: per-operation on F16C, native on AVX512-FP16 / ARMv8.2 FP16): Fp16Ops below, over an
//     ISA's ops.hpp F16 (which supplies all but kRegs and exp_store: exp_store_with(p, t, exp_f32) instead)
//     HV, kW, kRegs, kFma        register type, fp16 lanes per register, registers per block, fused multiply-add
//     load/store(uint16_t*)      kW fp16 values
//     set1(bits), zero()
//     add, sub, fma              each correctly rounded to fp16 (fma as kFma says)
//     exp_store(p, t)            e = to_f16(exp_f32(to_f32(t))) per lane (through M): stores e at p, returns it
//     store_div(p, e, s)         stores canon(e / s) at p, the correctly rounded fp16 quotient
//     store_scale(p, v, c)       stores canon(to_f16(c · to_f32(v))) at p, c an f32
//                                (canon: a NaN lane becomes the canonical quiet NaN 0x7E00). The three are one
//                                primitive each so that the per-operation paths round once on the way to memory
//                                instead of rounding and then converting again.
//     rot(v, w)                  lane j gets lane (j + w) mod kW, for w a power of two below kW
//     lane0(v)                   bits of lane 0
//
// fp16 sums and accumulations use L = kW·kRegs lanes: element j of a row (or of the loss vector) goes to lane
// j % L, the lanes start at +0 and are folded by f16_model::fold_lanes' order (fold_lanes_vec below), so a
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

namespace halfmap::detail {

// ---- out-of-line scalar steps (src/kernels/common/nn.cpp) --------------------------------------------------

/// The f32 value of one storage-type bit pattern (exact).
float widen_bits(DType storage, std::uint32_t bits);
/// f16 modes' loss finish: to_f16(to_f32(acc) / float(n)), widened; a NaN is returned as the f32 quiet NaN.
float mse_f16_finish(std::uint16_t acc_bits, std::size_t n);
/// Cross-entropy loss from the stored probabilities at the labels (`rows` values of the storage type): see
/// XentArgs. Shared by every kernel and the f16 model so that the log and the mean are the same code everywhere.
float xent_loss(Mode mode, DType storage, const void* p_at_label, std::size_t rows);

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
}  // namespace exp_consts

/// exp_f32_generic without the clamp and the NaN pass, for x already in [kLo, kHi] (so not NaN): there both are
/// the identity, so this returns the same bits as exp_f32_generic. Softmax rows whose range is checked once use it.
template <class M>
typename M::V exp_f32_inrange(typename M::V xc) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V n = M::sub(M::fma(xc, M::set1(c::kLog2e), M::set1(c::kRound)), M::set1(c::kRound));
  V r = M::fma(n, M::set1(-c::kLn2Hi), xc);
  r = M::fma(n, M::set1(c::kLn2Lo), r);
  V p = M::set1(c::kPoly[7]);
  for (int k = 6; k >= 0; --k) p = M::fma(p, r, M::set1(c::kPoly[k]));
  return M::scale2n(p, n);
}

/// halfmap's exp on one register of M (see include/halfmap/math.hpp for the algorithm and its measured error).
/// Every ISA and the scalar exp_f32 run exactly these operations in this order, so they agree bit for bit.
template <class M>
typename M::V exp_f32_generic(typename M::V x) {
  namespace c = exp_consts;
  using V = typename M::V;
  const V xc = M::min(M::max(x, M::set1(c::kLo)), M::set1(c::kHi));  // a NaN is restored by nan_pass
  return M::nan_pass(x, exp_f32_inrange<M>(xc));
}

/// nn.hpp's H: an ISA's fp16 ops F16 with the register count of the fp16 sums (R, so `lanes` = F16::kW·R) and
/// the exp on M. The register count belongs to the algorithm, not to the ISA's ops (the reductions use 8).
template <class F16, class M, std::size_t R>
struct Fp16Ops : F16 {
  static constexpr std::size_t kRegs = R;
  static typename F16::HV exp_store(std::uint16_t* p, typename F16::HV t) {
    return F16::exp_store_with(p, t, [](typename M::V x) { return exp_f32_generic<M>(x); });
  }
};

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

/// The ordering key of a storage type's bits, for row_max_bits and row_range_bits: an involution. Tag (the
/// caller's) keeps each ISA's copy of of() apart.
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

/// Bit patterns of max x and min x over n ≥ 1 elements, exact, and whether any element is NaN: row_max_bits with
/// the min key in place of |bits| (a NaN's key lies above +inf's or, negative, below -inf's).
template <DType kStorage>
struct RowRange {
  typename StorageBits<kStorage>::U max, min;
  bool nan;
};
template <class Tag, DType kStorage, class Elem>
RowRange<kStorage> row_range_bits(const Elem* x, std::size_t n) {
  using K = OrderKey<Tag, kStorage, Elem>;
  using B = typename K::B;
  using U = typename K::U;
  using S = typename K::S;
  auto key = [](S s) { return K::of(s); };
  S kmax = std::numeric_limits<S>::min(), kmin = std::numeric_limits<S>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const S k = key(K::bits(x[i]));
    kmax = k > kmax ? k : kmax;
    kmin = k < kmin ? k : kmin;
  }
  const bool nan = kmax > key(static_cast<S>(B::kAbsInf)) || kmin < key(static_cast<S>(B::kAbsInf | (U(1) << K::kShift)));
  return {static_cast<U>(key(kmax)), static_cast<U>(key(kmin)), nan};
}

// ---- f32-accumulating modes ----------------------------------------------------------------------------------

/// e/s as q' = q + (e - q·s)·y with q = e·y and y = 1/s correctly rounded (neg_s = -s), two fused multiply-adds:
/// the correctly rounded quotient, the bits of a division, when y is 1/s rounded, e, s, e/s and 1/s are normal
/// and e/s is at least 2^-118 (Markstein's theorem: the remainder e - q·s is then exact and q within one ulp).
/// softmax_row_f32acc checks those bounds per row; nn_test checks the identity against division.
template <class M>
typename M::V quotient_by_reciprocal(typename M::V e, typename M::V y, typename M::V neg_s) {
  const typename M::V q = M::mul(e, y);
  return M::fma(M::fma(q, neg_s, e), y, q);
}

/// One softmax row in f32: e_j = exp(x_j - m) (or exp(x_j)), s = Σ e_j in any order, y_j = store(e_j / s).
/// `e` is scratch for cols rounded up to a whole block of 4·kW floats. y may equal x.
///
/// Fast rows. One pass over the row finds max and min (and NaN). When every t_j (x_j - m, or x_j) is known to lie
/// in [kRowLo, kExpHi] the exp needs no clamp or NaN pass (exp_f32_inrange: the same bits), every e_j ≥ e^-40 >
/// 2^-58, and the division becomes a multiply by y = 1/s (one true division per row) corrected by one remainder
/// step (quotient_by_reciprocal): with s ≤ 2^60 checked, every quotient is at least 2^-118, so the result has
/// the bits of e/s, for one multiply and two fused multiply-adds per vector instead of a division.
/// Other rows (NaN, infinities, |t| beyond the bounds, subnormal quotients possible) take the general path.
template <class S, bool kStable>
void softmax_row_f32acc(const typename S::Elem* x, typename S::Elem* y, std::size_t cols, float* e) {
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, R = 4, L = W * R;
  constexpr float kRowLo = -40.0f, kExpHi = 88.0f, kSumHi = 0x1p60f;
  const auto range = row_range_bits<S, S::kStorage>(x, cols);
  const float xmax = widen_bits(S::kStorage, range.max), xmin = widen_bits(S::kStorage, range.min);
  float m = 0.0f;
  bool fast;
  if constexpr (kStable) {
    // fl(xmin - m) ≤ fl(x_j - m) ≤ 0 by the monotony of rounding; a NaN, -inf or +inf fails the test.
    m = range.nan ? std::numeric_limits<float>::quiet_NaN() : xmax;
    fast = !range.nan && xmin - m >= kRowLo && m - m == 0.0f;
  } else {
    fast = !range.nan && xmin >= kRowLo && xmax <= kExpHi;
  }
  const V mv = M::set1(m);
  V acc[R] = {M::set1(0.0f), M::set1(0.0f), M::set1(0.0f), M::set1(0.0f)};
  auto block = [&](const Elem* xp, float* ep, auto inrange) {
    for (std::size_t r = 0; r < R; ++r) {
      V t = S::load(xp + r * W);
      if constexpr (kStable) t = M::sub(t, mv);
      V ev;
      if constexpr (decltype(inrange)::value) {
        ev = exp_f32_inrange<M>(t);
      } else {
        ev = exp_f32_generic<M>(t);
      }
      M::store(ep + r * W, ev);
      acc[r] = M::add(acc[r], ev);
    }
  };
  std::size_t j = 0;
  if (fast) {
    for (; j + L <= cols; j += L) block(x + j, e + j, std::true_type{});
  } else {
    for (; j + L <= cols; j += L) block(x + j, e + j, std::false_type{});
  }
  if (j < cols) {  // the -inf padding is out of range: the general exp
    Elem xb[L];
    std::fill(xb, xb + L, S::kNegInf);
    std::memcpy(xb, x + j, (cols - j) * sizeof(Elem));
    block(xb, e + j, std::false_type{});
  }
  const float s = hsum<M>(acc);
  const V sv = M::set1(s);
  if (fast && s <= kSumHi) {
    const V rv = M::set1(1.0f / s), nsv = M::set1(-s);
    auto quot = [&](V ev) { return quotient_by_reciprocal<M>(ev, rv, nsv); };
    for (j = 0; j + W <= cols; j += W) S::store(y + j, quot(M::load(e + j)));
    if (j < cols) {
      Elem yb[W];
      S::store(yb, quot(M::load(e + j)));  // e's padding (+0) gives +0, not stored
      std::memcpy(y + j, yb, (cols - j) * sizeof(Elem));
    }
    return;
  }
  for (j = 0; j + W <= cols; j += W) S::store(y + j, M::div(M::load(e + j), sv));
  if (j < cols) {
    Elem yb[W];
    S::store(yb, M::div(M::load(e + j), sv));
    std::memcpy(y + j, yb, (cols - j) * sizeof(Elem));
  }
}

template <class S, bool kStable>
void softmax_f32acc(const SoftmaxArgs& a) {
  using Elem = typename S::Elem;
  constexpr std::size_t L = 4 * S::M::kW;
  thread_local std::vector<float> e;
  e.resize((a.cols + L - 1) / L * L);
  const auto* x = static_cast<const Elem*>(a.x);
  auto* y = static_cast<Elem*>(a.y);
  for (std::size_t i = 0; i < a.rows; ++i) {
    softmax_row_f32acc<S, kStable>(x + i * a.cols, y + i * a.cols, a.cols, e.data());
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

template <class S>
float xent_f32acc(const XentArgs& a) {
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, L = 4 * W;
  thread_local std::vector<float> e;
  thread_local std::vector<Elem> prow, plab;
  e.resize((a.cols + L - 1) / L * L);
  prow.resize(a.cols);
  plab.resize(a.rows);
  const V cv = M::set1(a.loss_scale / float(a.rows));
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* x = static_cast<const Elem*>(a.logits) + i * a.cols;
    Elem* p = a.probs != nullptr ? static_cast<Elem*>(a.probs) + i * a.cols : prow.data();
    softmax_row_f32acc<S, true>(x, p, a.cols, e.data());
    const auto label = static_cast<std::size_t>(a.labels[i]);  // in [0, cols): the caller's contract
    plab[i] = p[label];
    if (a.dlogits == nullptr) continue;
    Elem* dl = static_cast<Elem*>(a.dlogits) + i * a.cols;
    std::size_t j = 0;
    for (; j + W <= a.cols; j += W) S::store(dl + j, M::mul(S::load(p + j), cv));  // c·(p - 0)
    Elem in[W] = {}, out[W];
    if (j < a.cols) {
      std::memcpy(in, p + j, (a.cols - j) * sizeof(Elem));
      S::store(out, M::mul(S::load(in), cv));
      std::memcpy(dl + j, out, (a.cols - j) * sizeof(Elem));
    }
    in[0] = plab[i];  // the label's column: c·(p - 1)
    S::store(out, M::mul(M::sub(S::load(in), M::set1(1.0f)), cv));
    dl[label] = out[0];
  }
  return xent_loss(S::kMode, S::kStorage, plab.data(), a.rows);
}

// ---- fp16 modes --------------------------------------------------------------------------------------------

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
/// s = Σ e_j over L lanes, then y_j = canon(e_j / s). y may equal x.
template <class H, bool kStable>
void softmax_row_f16(const std::uint16_t* x, std::uint16_t* y, std::size_t cols) {
  using HV = typename H::HV;
  constexpr std::size_t W = H::kW, R = H::kRegs, L = W * R;
  HV mv = H::zero();
  if constexpr (kStable) mv = H::set1(row_max_bits<H, DType::f16>(x, cols));
  HV acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = H::zero();
  auto block = [&](const std::uint16_t* xp, std::uint16_t* yp) {
    for (std::size_t r = 0; r < R; ++r) {
      HV t = H::load(xp + r * W);
      if constexpr (kStable) t = H::sub(t, mv);
      acc[r] = H::add(acc[r], H::exp_store(yp + r * W, t));
    }
  };
  std::size_t j = 0;
  for (; j + L <= cols; j += L) block(x + j, y + j);
  if (j < cols) {
    std::uint16_t xb[L], eb[L];
    std::fill(xb, xb + L, std::uint16_t{0xFC00});  // -inf: exp(-inf - m) = +0 adds nothing to its lane
    std::memcpy(xb, x + j, (cols - j) * sizeof(std::uint16_t));
    block(xb, eb);
    std::memcpy(y + j, eb, (cols - j) * sizeof(std::uint16_t));
  }
  const HV sv = H::set1(fold_lanes_vec<H>(acc));
  for (j = 0; j + W <= cols; j += W) H::store_div(y + j, H::load(y + j), sv);
  if (j < cols) {
    std::uint16_t b[W] = {};
    std::memcpy(b, y + j, (cols - j) * sizeof(std::uint16_t));
    H::store_div(b, H::load(b), sv);
    std::memcpy(y + j, b, (cols - j) * sizeof(std::uint16_t));
  }
}

template <class H, bool kStable>
void softmax_f16(const SoftmaxArgs& a) {
  const auto* x = static_cast<const std::uint16_t*>(a.x);
  auto* y = static_cast<std::uint16_t*>(a.y);
  for (std::size_t i = 0; i < a.rows; ++i) softmax_row_f16<H, kStable>(x + i * a.cols, y + i * a.cols, a.cols);
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
    softmax_row_f16<H, true>(x, p, a.cols);
    const auto label = static_cast<std::size_t>(a.labels[i]);  // in [0, cols): the caller's contract
    plab[i] = p[label];
    if (a.dlogits == nullptr) continue;
    auto* dl = static_cast<std::uint16_t*>(a.dlogits) + i * a.cols;
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
