// Portable logic of the GELU kernels (GeluArgs in include/halfmap/registry.hpp states every step), written once
// and instantiated per ISA with nn.hpp's traits: S (f32-accumulating modes, every step in f32) and H (fp16
// arithmetic, every step rounded to fp16; erf, tanh and exp through f32 with one rounding back, by
// H::exp_store_with, which applies any f32 function). Elementwise: S takes four registers side by side
// (lanes.hpp), then the rest one at a time; H likewise where it is a per-operation type on F16C (gelu_f16_blocks),
// else one at a time. A tail runs on a zero-padded copy and only its own
// lanes are stored. erf_f32_generic and tanh_f32_generic (vmath.hpp) are the operations of the scalar erf_f32
// and tanh_f32 (math.hpp), which the f16 model computes with its own copies of them, so the kernels match it bit
// for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "halfmap/registry.hpp"
#include "kernels/common/fp16_ops.hpp"  // F16cRoundTrip
#include "kernels/common/lanes.hpp"
#include "kernels/common/row_io.hpp"  // store_lanes, store_canon_lanes
#include "kernels/common/vmath.hpp"   // erf_f32_generic, tanh_f32_generic, exp_f32_generic

namespace halfmap::detail {

/// GELU's constants: 1/√2, 1/√(2π), √(2/π), 0.044715 and 3·0.044715, as f32.
namespace gelu_consts {
inline constexpr float kK1 = 0.70710678118654752f, kK2 = 0.39894228040143268f, kK0 = 0.79788456080286536f;
inline constexpr float kC = 0.044715f, kC3 = 0.134145f;
}  // namespace gelu_consts

/// fp16 bits of a constant rounded to nearest even (src/kernels/common/nn.cpp, without ISA flags).
std::uint16_t f16_const_bits(float v);

/// GeluArgs' arrays as Elem (dy, y and dx null where GeluArgs has them null).
template <class Elem>
struct GeluArrays {
  const Elem *x, *dy;
  Elem *y, *dx;
};
/// Owner, a type of the calling path's, only keeps this instantiation apart per path (see the ops.hpp headers).
template <class Owner, class Elem>
GeluArrays<Elem> gelu_arrays(const GeluArgs& a) {
  return {static_cast<const Elem*>(a.x), static_cast<const Elem*>(a.dy), static_cast<Elem*>(a.y),
          static_cast<Elem*>(a.dx)};
}

/// Calls block(x, dy, y, dx, n) for the registers of W elements of x (Elem) in order, n = W but at the end; the
/// tail runs on zero-padded copies of x and dy, with y and dx still the caller's (the block stores n lanes). dy,
/// y and dx are null where GeluArgs has them null.
template <std::size_t W, class Elem, class Block>
void for_each_register(const GeluArgs& a, Block block) {
  const auto [x, dy, y, dx] = gelu_arrays<Block, Elem>(a);
  auto at = [](auto* p, std::size_t i) { return p != nullptr ? p + i : nullptr; };
  std::size_t i = 0;
  for (; i + W <= a.n; i += W) block(x + i, at(dy, i), at(y, i), at(dx, i), W);
  if (i < a.n) {
    const std::size_t n = a.n - i;
    Elem xb[W] = {}, dyb[W] = {};
    std::memcpy(xb, x + i, n * sizeof(Elem));
    if (dy != nullptr) std::memcpy(dyb, dy + i, n * sizeof(Elem));
    block(xb, dy != nullptr ? dyb : nullptr, at(y, i), at(dx, i), n);
  }
}

/// GELU in f32 on registers of X (nn.hpp's M, or Lanes<M, R> for R registers at once): y = x·Φ(x) and, when
/// `grad`, d = Φ(x) + x·φ(x) (dx = dy·d), in the operations GeluArgs states.
template <class X, bool kTanh>
HALFMAP_VEC_INLINE void gelu_f32_math(typename X::V xv, bool grad, typename X::V& y, typename X::V& d) {
  namespace c = gelu_consts;
  using V = typename X::V;
  const V one = X::set1(1.0f), half = X::set1(0.5f);
  const V h = X::mul(xv, half);
  V fa;
  if constexpr (kTanh) {
    const V x2 = X::mul(xv, xv);
    const V u = X::mul(X::set1(c::kK0), X::fma(X::set1(c::kC), X::mul(x2, xv), xv));
    const V t = tanh_f32_generic<X>(u);
    fa = X::add(one, t);
    if (grad) {
      const V s = X::mul(X::sub(one, X::mul(t, t)), X::mul(X::set1(c::kK0), X::fma(X::set1(c::kC3), x2, one)));
      d = X::fma(h, s, X::mul(fa, half));
    }
  } else {
    const V z = X::mul(xv, X::set1(c::kK1));
    fa = X::add(one, erf_f32_generic<X>(z));
    if (grad) {
      const V p = exp_f32_generic<X>(X::sub(X::set1(0.0f), X::mul(z, z)));
      d = X::fma(X::mul(xv, X::set1(c::kK2)), p, X::mul(fa, half));
    }
  }
  y = X::mul(h, fa);
}

/// The f32-accumulating GELU: blocks of kRegs registers evaluated side by side (Lanes: the same bits as one at a
/// time, see lanes.hpp), then the rest one register at a time.
template <class S, bool kTanh>
void gelu_f32acc(const GeluArgs& a) {
  using M = typename S::M;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, kRegs = 4;
  using L = Lanes<M, kRegs>;
  const bool grad = a.dy != nullptr;
  const auto [x, dy, y, dx] = gelu_arrays<S, Elem>(a);
  std::size_t i = 0;
  for (; i + kRegs * W <= a.n; i += kRegs * W) {
    typename L::V xv, yv, d;
    for (std::size_t r = 0; r < kRegs; ++r) xv.r[r] = S::load(x + i + r * W);
    gelu_f32_math<L, kTanh>(xv, grad, yv, d);
    for (std::size_t r = 0; r < kRegs; ++r) {
      if (y != nullptr) S::store(y + i + r * W, yv.r[r]);
      if (grad) S::store(dx + i + r * W, M::mul(S::load(dy + i + r * W), d.r[r]));
    }
  }
  if (i == a.n) return;
  auto at = [i](auto* p) { return p != nullptr ? p + i : nullptr; };
  const GeluArgs rest{a.n - i, x + i, at(y), at(dy), at(dx)};
  for_each_register<W, Elem>(rest, [&](const Elem* xp, const Elem* dyp, Elem* yp, Elem* dxp, std::size_t n) {
    typename M::V yv, d;
    gelu_f32_math<M, kTanh>(S::load(xp), dyp != nullptr, yv, d);
    if (yp != nullptr) store_lanes<S>(yp, yv, n);
    if (dyp != nullptr) store_lanes<S>(dxp, M::mul(S::load(dyp), d), n);
  });
}

/// gelu_f16's steps on kRegs registers side by side (Lanes<M, kRegs> for erf, tanh and exp; every fp16 operation
/// applied to each register in turn), for H with F16cRoundTrip: each register goes through exactly the operations
/// of gelu_f16's block, so the bits are the same, but four chains of erf's 30 dependent operations and of the
/// round trips (FMA + vcvtps2ph + vcvtph2ps) run at once where one left the units waiting. Returns how many
/// elements it did: the whole blocks of kRegs registers.
template <class H, bool kTanh>
std::size_t gelu_f16_blocks(const GeluArgs& a) {
  namespace c = gelu_consts;
  constexpr std::size_t kRegs = 4, W = H::kW;
  using M = typename H::Math;
  using L = Lanes<M, kRegs>;
  using V = typename L::V;
  using U = std::uint16_t;
  auto each = [](auto f) { return L::each(f); };
  auto set = [&](std::uint16_t bits) {
    const typename H::HV v = H::set1(bits);
    return each([&](std::size_t) { return v; });
  };
  const V one = set(0x3C00), half = set(0x3800), zero = set(0x0000), negz = set(0x8000);
  const V k0 = set(f16_const_bits(c::kK0)), k1 = set(f16_const_bits(c::kK1)), k2 = set(f16_const_bits(c::kK2)),
          cc = set(f16_const_bits(c::kC)), c3 = set(f16_const_bits(c::kC3));
  auto fma = [&](const V& p, const V& q, const V& r) {
    return each([&](std::size_t i) { return H::fma(p.r[i], q.r[i], r.r[i]); });
  };
  auto mul = [&](const V& p, const V& q) { return fma(p, q, negz); };  // r16(p·q), as gelu_f16
  auto add = [&](const V& p, const V& q) { return each([&](std::size_t i) { return H::add(p.r[i], q.r[i]); }); };
  auto sub = [&](const V& p, const V& q) { return each([&](std::size_t i) { return H::sub(p.r[i], q.r[i]); }); };
  auto round = [&](const V& p) { return each([&](std::size_t i) { return H::round(p.r[i]); }); };
  auto load = [&](const U* p) { return each([&](std::size_t i) { return H::load(p + i * W); }); };
  auto store = [&](U* p, const V& v) {
    for (std::size_t i = 0; i < kRegs; ++i) store_canon_lanes<H>(p + i * W, v.r[i], W);
  };
  const auto [x, dy, y, dx] = gelu_arrays<H, U>(a);
  std::size_t i = 0;
  for (; i + kRegs * W <= a.n; i += kRegs * W) {
    const V xv = load(x + i);
    const V h = mul(xv, half);
    V fa, d = zero;
    if constexpr (kTanh) {
      const V x2 = mul(xv, xv);
      const V u = mul(k0, fma(cc, mul(x2, xv), xv));
      const V t = round(tanh_f32_generic<L>(u));
      fa = add(one, t);
      if (dy != nullptr) d = fma(h, mul(sub(one, mul(t, t)), mul(k0, fma(c3, x2, one))), mul(fa, half));
    } else {
      const V z = mul(xv, k1);
      fa = add(one, round(erf_f32_generic<L>(z)));
      if (dy != nullptr) {
        const V p = round(exp_f32_generic<L>(sub(zero, mul(z, z))));
        d = fma(mul(xv, k2), p, mul(fa, half));
      }
    }
    if (y != nullptr) store(y + i, mul(h, fa));
    if (dy != nullptr) store(dx + i, mul(load(dy + i), d));
  }
  return i;
}

template <class H, bool kTanh>
void gelu_f16(const GeluArgs& a) {
  namespace c = gelu_consts;
  using HV = typename H::HV;
  using M = typename H::Math;
  using U = std::uint16_t;
  constexpr std::size_t W = H::kW;
  const HV one = H::set1(0x3C00), half = H::set1(0x3800), zero = H::zero(), negz = H::set1(0x8000);
  const HV k0 = H::set1(f16_const_bits(c::kK0)), k1 = H::set1(f16_const_bits(c::kK1)),
           k2 = H::set1(f16_const_bits(c::kK2)), cc = H::set1(f16_const_bits(c::kC)),
           c3 = H::set1(f16_const_bits(c::kC3));
  auto mul = [&](HV p, HV q) { return H::fma(p, q, negz); };  // r16(p·q): the product is exact in f32
  auto store_n = store_canon_lanes<H>;
  auto block = [&](const U* xp, const U* dyp, U* yp, U* dxp, std::size_t n) {
    U scratch[W];
    const HV xv = H::load(xp);
    const HV h = mul(xv, half);
    HV fa, d = zero;
    if constexpr (kTanh) {
      const HV x2 = mul(xv, xv);
      const HV u = mul(k0, H::fma(cc, mul(x2, xv), xv));
      const HV t = H::exp_store_with(scratch, u, [](typename M::V v) { return tanh_f32_generic<M>(v); });
      fa = H::add(one, t);
      if (dyp != nullptr) d = H::fma(h, mul(H::sub(one, mul(t, t)), mul(k0, H::fma(c3, x2, one))), mul(fa, half));
    } else {
      const HV z = mul(xv, k1);
      fa = H::add(one, H::exp_store_with(scratch, z, [](typename M::V v) { return erf_f32_generic<M>(v); }));
      if (dyp != nullptr) {
        const HV p =
            H::exp_store_with(scratch, H::sub(zero, mul(z, z)), [](typename M::V v) { return exp_f32_generic<M>(v); });
        d = H::fma(mul(xv, k2), p, mul(fa, half));
      }
    }
    if (yp != nullptr) store_n(yp, mul(h, fa), n);
    if (dyp != nullptr) store_n(dxp, mul(H::load(dyp), d), n);
  };
  std::size_t done = 0;
  if constexpr (F16cRoundTrip<H>) done = gelu_f16_blocks<H, kTanh>(a);
  if (done == a.n) return;
  auto at = [done](auto* p) { return p != nullptr ? p + done : nullptr; };
  const GeluArgs rest{a.n - done, static_cast<const U*>(a.x) + done, at(static_cast<U*>(a.y)),
                      at(static_cast<const U*>(a.dy)), at(static_cast<U*>(a.dx))};
  for_each_register<W, U>(rest, block);
}

}  // namespace halfmap::detail
