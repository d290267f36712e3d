// Several registers as one: Lanes<M, R> has nn.hpp's M interface (the arithmetic the exp, erf and tanh of
// vmath.hpp are written in) on R registers of M at once, each operation applied to every register in turn.
//
// Why: halfmap's exp, erf and tanh are long chains of dependent operations (about 30 for erf, each waiting for
// the last). Evaluated one register at a time, a loop keeps at most the few iterations the out-of-order window
// holds in flight, and the floating-point units wait on latency. The same functions instantiated on Lanes<M, 4>
// issue four independent chains side by side. Every register goes through exactly the operations it would alone,
// in the same order, so the results are bit-identical to M's (and to the scalar models).
#pragma once

#include <cstddef>

/// Forces a vector-math helper inline into its caller. GCC otherwise calls exp, erf and tanh out of line from a
/// loop body that uses them more than once, spilling every live register around the call (3-4x slower GELU and
/// softmax). With -ffp-contract=off, inlining changes no result.
#define HALFMAP_VEC_INLINE [[gnu::always_inline]] inline

namespace halfmap::detail {

template <class M, std::size_t R>
struct Lanes {
  struct V {
    typename M::V r[R];
  };
  static constexpr std::size_t kW = M::kW * R;

  template <class F>
  HALFMAP_VEC_INLINE static V each(F f) {
    V o;
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i) o.r[i] = f(i);
    return o;
  }
  HALFMAP_VEC_INLINE static V set1(float v) {
    const typename M::V b = M::set1(v);
    return each([&](std::size_t) { return b; });
  }
  // clang-format off
  HALFMAP_VEC_INLINE static V add(V a, V b) { return each([&](std::size_t i) { return M::add(a.r[i], b.r[i]); }); }
  HALFMAP_VEC_INLINE static V sub(V a, V b) { return each([&](std::size_t i) { return M::sub(a.r[i], b.r[i]); }); }
  HALFMAP_VEC_INLINE static V mul(V a, V b) { return each([&](std::size_t i) { return M::mul(a.r[i], b.r[i]); }); }
  HALFMAP_VEC_INLINE static V div(V a, V b) { return each([&](std::size_t i) { return M::div(a.r[i], b.r[i]); }); }
  HALFMAP_VEC_INLINE static V min(V a, V b) { return each([&](std::size_t i) { return M::min(a.r[i], b.r[i]); }); }
  HALFMAP_VEC_INLINE static V max(V a, V b) { return each([&](std::size_t i) { return M::max(a.r[i], b.r[i]); }); }
  // clang-format on
  HALFMAP_VEC_INLINE static V fma(V a, V b, V c) {
    return each([&](std::size_t i) { return M::fma(a.r[i], b.r[i], c.r[i]); });
  }
  HALFMAP_VEC_INLINE static V scale2n(V p, V n) {
    return each([&](std::size_t i) { return M::scale2n(p.r[i], n.r[i]); });
  }
  HALFMAP_VEC_INLINE static V scale2n_normal(V p, V nk) requires requires(typename M::V v) { M::scale2n_normal(v, v); }
  {
    return each([&](std::size_t i) { return M::scale2n_normal(p.r[i], nk.r[i]); });
  }
  HALFMAP_VEC_INLINE static V nan_pass(V x, V y) {
    return each([&](std::size_t i) { return M::nan_pass(x.r[i], y.r[i]); });
  }
  HALFMAP_VEC_INLINE static V copysign(V mag, V sgn) {
    return each([&](std::size_t i) { return M::copysign(mag.r[i], sgn.r[i]); });
  }
};

}  // namespace halfmap::detail
