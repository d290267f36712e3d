// Portable logic of the layernorm and rmsnorm kernels (NormArgs in include/halfmap/registry.hpp states what
// every mode computes, rounding by rounding), written once and instantiated per ISA with the traits of nn.hpp:
// S (f32-accumulating modes: f32, f16_f32acc, bf16_f32acc) and H (fp16 arithmetic, per operation on F16C or
// native). The per-row scalar steps of the fp16 modes (the division by cols, 1/√(v + ε)) are out-of-line in
// src/kernels/common/nn.cpp.
//
// A row takes up to three passes: the statistics (one sum for rmsnorm, two for layernorm: μ, then the squared
// deviations), then y, then for the backward the two sums of g and g·x̂ and a pass writing dx, dγ and dβ. Every
// intermediate (d, x̂, g) is recomputed where it is needed, from the same operations, so each pass computes the
// same bits for it.
//
// fp16 sums follow nn.hpp's lanes order: element j into lane j % L (register (j / kW) % kRegs), the lanes folded
// by fold_lanes_vec. The tail block is computed on zero-padded copies and its terms are zeroed in the padding
// before they are added (a padded d = 0 - μ is not zero): adding +0, or fma(+0, +0, acc), leaves a lane that
// started at +0 exactly as it was (such a lane is never -0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "halfmap/registry.hpp"
#include "kernels/common/fp16_ops.hpp"  // fold_lanes_vec
#include "kernels/common/reduce.hpp"    // hsum
#include "kernels/common/row_io.hpp"    // store_lanes, store_canon_lanes, prefetch_bytes
#include "kernels/common/scratch.hpp"   // aligned_scratch

namespace halfmap::detail {

// ---- out-of-line scalar steps (src/kernels/common/nn.cpp) --------------------------------------------------

/// fp16 bits of r16(f32(s) / float(n)): μ, v, a and b of the f16 modes.
std::uint16_t f16_div_n(std::uint16_t s, std::size_t n);
/// fp16 bits of r16(1.0f / sqrtf(f32(r16(v + r16(eps))))): the f16 modes' r.
std::uint16_t f16_rstd(std::uint16_t v, float eps);
/// An fp16 statistic widened for NormArgs::mean and var (a NaN as the f32 quiet NaN).
float f16_stat(std::uint16_t bits);

/// NormArgs' arrays as the storage's elements E (beta null for rmsnorm).
template <class E>
struct NormArrays {
  const E *x, *gamma, *beta, *dy;
  E *y, *dx;
};
/// Owner, a type of the calling path's, only keeps this instantiation apart per path (see the ops.hpp headers).
template <class Owner, class E, bool kRms>
NormArrays<E> norm_arrays(const NormArgs& a) {
  return {static_cast<const E*>(a.x),  static_cast<const E*>(a.gamma), kRms ? nullptr : static_cast<const E*>(a.beta),
          static_cast<const E*>(a.dy), static_cast<E*>(a.y),           static_cast<E*>(a.dx)};
}

// ---- f32-accumulating modes ----------------------------------------------------------------------------------

template <class S, bool kRms>
void norm_f32acc(const NormArgs& a) {
  using M = typename S::M;
  using V = typename M::V;
  using Elem = typename S::Elem;
  constexpr std::size_t W = M::kW, R = 4;
  const std::size_t cols = a.cols;
  const auto [x, gm, bt, dy, y, dx] = norm_arrays<S, Elem, kRms>(a);
  // n ≤ W elements from p, the lanes past n +0 (bits 0 in every storage type).
  auto load_n = [](const Elem* p, std::size_t n) {
    if (n == W) return S::load(p);
    Elem b[W] = {};
    std::memcpy(b, p, n * sizeof(Elem));
    return S::load(b);
  };
  // v with its lanes n and up set to +0.
  auto zero_tail = [](V v, std::size_t n) {
    if (n == W) return v;
    float b[W];
    M::store(b, v);
    std::fill(b + n, b + W, 0.0f);
    return M::load(b);
  };
  const std::size_t padded = (cols + W - 1) / W * W;
  // 16-bit storage: γ and β are widened once per call into f32 scratch (padded with +0 to whole registers, as
  // load_n pads), not again in every row (widening is exact: the same bits either way). Keeping each row's widened
  // x as well was measured too: a few per cent faster from L2, 11 % slower from DRAM (avx512, Zen 5), not kept.
  constexpr bool kWiden = !std::is_same_v<Elem, float>;
  thread_local std::vector<float> gbuf, bbuf;
  float* const gw = kWiden && gm != nullptr ? aligned_scratch(gbuf, padded) : nullptr;
  float* const bw = kWiden && bt != nullptr ? aligned_scratch(bbuf, padded) : nullptr;
  // f(j, n) for the registers of a row in order: n = W (a constant once f is inlined) but for a partial last one.
  auto blocks = [cols](auto f) {
    std::size_t j = 0;
    for (; j + W <= cols; j += W) f(j, W);
    if (j < cols) f(j, cols - j);
  };
  if constexpr (kWiden) {
    blocks([&](std::size_t j, std::size_t n) {
      if (gw != nullptr) M::store(gw + j, load_n(gm + j, n));
      if (bw != nullptr) M::store(bw + j, load_n(bt + j, n));
    });
  }
  auto gamma_at = [&](std::size_t j, std::size_t n) {
    if (gm == nullptr) return M::set1(1.0f);
    if constexpr (kWiden) return M::load(gw + j);
    return load_n(gm + j, n);
  };
  auto beta_at = [&](std::size_t j, std::size_t n) {
    if (bt == nullptr) return M::set1(0.0f);
    if constexpr (kWiden) return M::load(bw + j);
    return load_n(bt + j, n);
  };
  const bool want_dg = dy != nullptr && a.dgamma != nullptr, want_db = !kRms && dy != nullptr && a.dbeta != nullptr;
  thread_local std::vector<float> dgacc, dbacc;
  // Zeroed with the ISA's own stores: a std::vector member compiled with this file's ISA flags could be merged by
  // the linker with a copy built without them (see the ops.hpp headers).
  for (std::vector<float>* acc : {want_dg ? &dgacc : nullptr, want_db ? &dbacc : nullptr}) {
    if (acc == nullptr) continue;
    acc->resize(padded);
    for (std::size_t j = 0; j < padded; j += W) M::store(acc->data() + j, M::set1(0.0f));
  }
  for (std::size_t i = 0; i < a.rows; ++i) {
    const Elem* xi = x + i * cols;
    // R accumulators over whole blocks of R registers, the rest into the first: every index is a constant once
    // the block is unrolled, so the accumulators stay in registers (a register chosen at run time puts them in
    // memory, a store-to-load chain per register: 2.3× slower rows).
    auto sum = [&](auto term) {
      V acc[R] = {M::set1(0.0f), M::set1(0.0f), M::set1(0.0f), M::set1(0.0f)};
      std::size_t j = 0;
      for (; j + R * W <= cols; j += R * W) {
        for (std::size_t r = 0; r < R; ++r) term(acc[r], j + r * W, W);
      }
      for (; j < cols; j += W) term(acc[0], j, std::min(W, cols - j));
      return hsum<M>(acc);
    };
    // The next row's x and this row's y are prefetched while the row is in L1 (softmax_row.hpp does the same),
    // so that memory works while the arithmetic runs.
    const Elem* next = i + 1 < a.rows ? xi + cols : nullptr;
    Elem* yrow = y != nullptr ? y + i * cols : nullptr;
    auto prefetch = [&](const Elem* p, std::size_t j) {
      if (p != nullptr) prefetch_bytes(p + j, W * sizeof(Elem));
    };
    float mu = 0.0f;
    if constexpr (!kRms) {
      mu = sum([&](V& acc, std::size_t j, std::size_t n) { acc = M::add(acc, load_n(xi + j, n)); }) / float(cols);
    }
    const V muv = M::set1(mu);
    auto dev = [&](std::size_t j, std::size_t n) {
      const V xv = load_n(xi + j, n);
      return kRms ? xv : zero_tail(M::sub(xv, muv), n);
    };
    const float v = sum([&](V& acc, std::size_t j, std::size_t n) {
                      if constexpr (!kRms) prefetch(next, j);
                      prefetch(yrow, j);
                      const V d = dev(j, n);
                      acc = M::fma(d, d, acc);
                    }) /
                    float(cols);
    const float r = 1.0f / std::sqrt(v + a.eps);
    const V rv = M::set1(r);
    if (a.mean != nullptr) a.mean[i] = mu;
    if (a.var != nullptr) a.var[i] = v;
    auto xhat = [&](std::size_t j, std::size_t n) { return M::mul(dev(j, n), rv); };
    if (y != nullptr) {
      Elem* yi = y + i * cols;
      blocks([&](std::size_t j, std::size_t n) {
        if constexpr (kRms) prefetch(next, j);
        const V xh = xhat(j, n);
        const V out = kRms ? M::mul(xh, gamma_at(j, n)) : M::fma(xh, gamma_at(j, n), beta_at(j, n));
        store_lanes<S>(yi + j, out, n);
      });
    }
    if (dy == nullptr) continue;
    const Elem* dyi = dy + i * cols;
    auto g_at = [&](std::size_t j, std::size_t n) { return M::mul(load_n(dyi + j, n), gamma_at(j, n)); };
    float ga = 0.0f;
    if constexpr (!kRms) {
      ga = sum([&](V& acc, std::size_t j, std::size_t n) { acc = M::add(acc, g_at(j, n)); }) / float(cols);
    }
    const float gb =
        sum([&](V& acc, std::size_t j, std::size_t n) { acc = M::fma(g_at(j, n), xhat(j, n), acc); }) / float(cols);
    const V gav = M::set1(ga), ngbv = M::set1(-gb);
    Elem* dxi = dx + i * cols;
    blocks([&](std::size_t j, std::size_t n) {
      const V xh = xhat(j, n);
      const V u = kRms ? g_at(j, n) : M::sub(g_at(j, n), gav);
      store_lanes<S>(dxi + j, M::mul(M::fma(xh, ngbv, u), rv), n);
      const V dyv = load_n(dyi + j, n);
      if (want_dg) M::store(dgacc.data() + j, M::fma(dyv, xh, M::load(dgacc.data() + j)));
      if (want_db) M::store(dbacc.data() + j, M::add(M::load(dbacc.data() + j), dyv));
    });
  }
  for (std::size_t j = 0; j < cols && (want_dg || want_db); j += W) {
    const std::size_t n = std::min(W, cols - j);
    if (want_dg) store_lanes<S>(static_cast<Elem*>(a.dgamma) + j, M::load(dgacc.data() + j), n);
    if (want_db) store_lanes<S>(static_cast<Elem*>(a.dbeta) + j, M::load(dbacc.data() + j), n);
  }
}

// ---- fp16 modes --------------------------------------------------------------------------------------------

template <class H, bool kRms>
void norm_f16(const NormArgs& a) {
  using HV = typename H::HV;
  constexpr std::size_t W = H::kW, R = H::kRegs, L = W * R;
  using U = std::uint16_t;
  const std::size_t cols = a.cols;
  const auto [x, gm, bt, dy, y, dx] = norm_arrays<H, U, kRms>(a);
  auto* dg = dy != nullptr ? static_cast<U*>(a.dgamma) : nullptr;
  auto* db = !kRms && dy != nullptr ? static_cast<U*>(a.dbeta) : nullptr;
  const HV negz = H::set1(0x8000);
  auto mul = [&](HV p, HV q) { return H::fma(p, q, negz); };  // r16(p·q): the product is exact in f32
  auto load_n = [](const U* p, std::size_t n) {
    if (n >= W) return H::load(p);
    U b[W] = {};
    std::memcpy(b, p, n * sizeof(U));
    return H::load(b);
  };
  auto zero_tail = [](HV v, std::size_t n) {
    if (n >= W) return v;
    U b[W];
    H::store(b, v);
    std::fill(b + n, b + W, U{0});
    return H::load(b);
  };
  auto store_n = store_canon_lanes<H>;
  const HV one = H::set1(0x3C00), zero = H::zero();
  auto gamma_at = [&](std::size_t j, std::size_t n) { return gm != nullptr ? load_n(gm + j, n) : one; };
  auto beta_at = [&](std::size_t j, std::size_t n) { return bt != nullptr ? load_n(bt + j, n) : zero; };
  // Σ over the row in lanes order: term(j, n) gives the register of elements [j, j + n) (n < kW only at the end,
  // zeroed past n); step(acc, t) adds it.
  auto lane_sum = [&](auto term_and_step) {
    HV acc[R];
    for (std::size_t r = 0; r < R; ++r) acc[r] = H::zero();
    std::size_t j = 0;
    for (; j + L <= cols; j += L) {
      for (std::size_t r = 0; r < R; ++r) term_and_step(acc[r], j + r * W, W);
    }
    for (std::size_t r = 0; j + r * W < cols; ++r) term_and_step(acc[r], j + r * W, cols - j - r * W);
    return fold_lanes_vec<H>(acc);
  };
  if (dg != nullptr) std::fill(dg, dg + cols, U{0});
  if (db != nullptr) std::fill(db, db + cols, U{0});
  for (std::size_t i = 0; i < a.rows; ++i) {
    const U* xi = x + i * cols;
    U mu = 0;
    if constexpr (!kRms) {
      mu = f16_div_n(lane_sum([&](HV& acc, std::size_t j, std::size_t n) {
                       acc = H::add(acc, load_n(xi + j, n));  // the padding loads +0
                     }),
                     cols);
    }
    const HV muv = H::set1(mu);
    auto dev = [&](std::size_t j, std::size_t n) {
      const HV xv = load_n(xi + j, n);
      return kRms ? xv : zero_tail(H::sub(xv, muv), n);
    };
    const U v = f16_div_n(lane_sum([&](HV& acc, std::size_t j, std::size_t n) {
                            const HV d = dev(j, n);
                            acc = H::fma(d, d, acc);
                          }),
                          cols);
    const U r = f16_rstd(v, a.eps);
    const HV rv = H::set1(r);
    if (a.mean != nullptr) a.mean[i] = kRms ? 0.0f : f16_stat(mu);
    if (a.var != nullptr) a.var[i] = f16_stat(v);
    auto xhat = [&](std::size_t j, std::size_t n) { return zero_tail(mul(dev(j, n), rv), n); };
    if (y != nullptr) {
      U* yi = y + i * cols;
      for (std::size_t j = 0; j < cols; j += W) {
        const std::size_t n = std::min(W, cols - j);
        const HV xh = xhat(j, n);
        store_n(yi + j, kRms ? mul(xh, gamma_at(j, n)) : H::fma(xh, gamma_at(j, n), beta_at(j, n)), n);
      }
    }
    if (dy == nullptr) continue;
    const U* dyi = dy + i * cols;
    auto g_at = [&](std::size_t j, std::size_t n) { return mul(load_n(dyi + j, n), gamma_at(j, n)); };
    U ga = 0;
    if constexpr (!kRms) {
      ga = f16_div_n(
          lane_sum([&](HV& acc, std::size_t j, std::size_t n) { acc = H::add(acc, zero_tail(g_at(j, n), n)); }), cols);
    }
    const U gb = f16_div_n(lane_sum([&](HV& acc, std::size_t j, std::size_t n) {
                             acc = H::fma(zero_tail(g_at(j, n), n), xhat(j, n), acc);
                           }),
                           cols);
    const HV gav = H::set1(ga), ngbv = H::set1(static_cast<U>(gb ^ 0x8000u));  // -b: (-x̂)·b = x̂·(-b) exactly
    U* dxi = dx + i * cols;
    for (std::size_t j = 0; j < cols; j += W) {
      const std::size_t n = std::min(W, cols - j);
      const HV xh = xhat(j, n);
      const HV u = kRms ? g_at(j, n) : H::sub(g_at(j, n), gav);
      store_n(dxi + j, mul(H::fma(xh, ngbv, u), rv), n);
      const HV dyv = load_n(dyi + j, n);
      if (dg != nullptr) store_n(dg + j, H::fma(dyv, xh, load_n(dg + j, n)), n);
      if (db != nullptr) store_n(db + j, H::add(load_n(db + j, n), dyv), n);
    }
  }
}

}  // namespace halfmap::detail
