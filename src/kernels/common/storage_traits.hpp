// The storage traits of the f32-accumulating algorithms (reduce.hpp's f32acc_reduce, nn.hpp's S): f32, fp16 or
// bf16 in memory, widened exactly to f32 on load and rounded once (round to nearest even) on store, on the f32 vector
// type M of an ISA's ops.hpp. Instantiated only with an ISA's own M, so the instantiations stay apart per ISA
// (see the ops.hpp headers).
#pragma once

#include <cstdint>
#include <limits>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

template <class Math>
struct F32Storage {
  using M = Math;
  using Elem = float;
  static constexpr Mode kMode = Mode::f32;
  static constexpr DType kStorage = DType::f32;
  static constexpr Elem kNegInf = -std::numeric_limits<float>::infinity();
  static typename M::V load(const float* p) { return M::load(p); }
  static void store(float* p, typename M::V v) { M::store(p, v); }
};

template <class Math>
struct F16Storage {
  using M = Math;
  using Elem = std::uint16_t;  // fp16 bit patterns
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr DType kStorage = DType::f16;
  static constexpr Elem kNegInf = 0xFC00;
  static typename M::V load(const std::uint16_t* p) { return M::load_f16(p); }
  static void store(std::uint16_t* p, typename M::V v) { M::store_f16(p, v); }
};

/// bf16 storage: M supplies load_bf16 / store_bf16 (avx512bf16/ops.hpp).
template <class Math>
struct Bf16Storage {
  using M = Math;
  using Elem = std::uint16_t;  // bf16 bit patterns
  static constexpr Mode kMode = Mode::bf16_f32acc;
  static constexpr DType kStorage = DType::bf16;
  static constexpr Elem kNegInf = 0xFF80;
  static typename M::V load(const std::uint16_t* p) { return M::load_bf16(p); }
  static void store(std::uint16_t* p, typename M::V v) { M::store_bf16(p, v); }
};

}  // namespace halfmap::detail
