// nn.hpp's H, the fp16 arithmetic of the row kernels (softmax, xent, layernorm and rmsnorm, GELU): Fp16Ops, which
// completes an ISA's fp16 ops with the exp and the register count; F16cRoundTrip, which tells the per-operation
// types on F16C apart; and the fold of the fp16 lanes into one sum (fold_lanes_vec), in f16_model's order.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/vmath.hpp"  // exp_f32_generic, exp_f32_inrange

namespace halfmap::detail {

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

/// Whether H is a per-operation fp16 type on F16C: its fp16 values live widened in the f32 math's registers (HV is
/// M::V) and H::round rounds one to fp16, so exp_store_with(p, t, f) is round(f(t)) (plus the store to p), and f
/// may as well run on several registers at once (Lanes<M, R>) before each is rounded and stored.
template <class H>
concept F16cRoundTrip = std::is_same_v<typename H::HV, typename H::Math::V> && requires(typename H::HV v) {
  { H::round(v) } -> std::same_as<typename H::HV>;
};

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

}  // namespace halfmap::detail
