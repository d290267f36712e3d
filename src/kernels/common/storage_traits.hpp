// The storage traits of the f32-accumulating algorithms (reduce.hpp's f32acc_reduce, nn.hpp's S): f32, fp16 or
// bf16 in memory, widened exactly to f32 on load and rounded once (round to nearest even) on store, on the f32 vector
// type M of an ISA's ops.hpp. Instantiated only with an ISA's own M, so the instantiations stay apart per ISA
// (see the ops.hpp headers).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

/// Storage type t on the f32 ops M: M supplies load/store (f32), load_f16/store_f16 (f16) or load_bf16/store_bf16
/// (bf16, avx512bf16/ops.hpp), each kW elements.
template <class Math, DType t>
struct StorageTraits {
  using M = Math;
  using V = typename M::V;
  using Elem = std::conditional_t<t == DType::f32, float, std::uint16_t>;  // f32 values or 16-bit patterns
  static constexpr DType kStorage = t;
  static constexpr Mode kMode = t == DType::f32 ? Mode::f32 : t == DType::f16 ? Mode::f16_f32acc : Mode::bf16_f32acc;
  static constexpr Elem kNegInf = t == DType::f32   ? Elem(-std::numeric_limits<float>::infinity())
                                  : t == DType::f16 ? Elem(0xFC00)
                                                    : Elem(0xFF80);
  static V load(const Elem* p) {
    if constexpr (t == DType::f32)
      return M::load(p);
    else if constexpr (t == DType::f16)
      return M::load_f16(p);
    else
      return M::load_bf16(p);
  }
  static void store(Elem* p, V v) {
    if constexpr (t == DType::f32)
      M::store(p, v);
    else if constexpr (t == DType::f16)
      M::store_f16(p, v);
    else
      M::store_bf16(p, v);
  }
  /// v rounded to the storage type and widened back: what load() reads after store(v).
  static V round(V v) {
    if constexpr (t == DType::f32) {
      return v;
    } else {
      Elem b[M::kW];
      store(b, v);
      return load(b);
    }
  }
};
template <class M>
using F32Storage = StorageTraits<M, DType::f32>;
template <class M>
using F16Storage = StorageTraits<M, DType::f16>;
template <class M>
using Bf16Storage = StorageTraits<M, DType::bf16>;

}  // namespace halfmap::detail
