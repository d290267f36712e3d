// The portable scalar building blocks of the ref kernels: storage <-> f32 with halfmap's scalar conversions
// (half.hpp), and each storage type's mode. The ref folder is compiled without ISA flags, so these are plain
// inline templates (in namespace halfmap::paths::ref, like every ISA's ops.hpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::paths::ref {

struct Tag {};

template <class Elem>
float widen(Elem v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else {
    return to_f32(v);
  }
}

template <class Elem>
Elem narrow(float v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else if constexpr (std::is_same_v<Elem, f16>) {
    return to_f16(v);
  } else {
    return to_bf16(v);
  }
}

template <class Elem>
constexpr Mode mode_of() {
  return std::is_same_v<Elem, float> ? Mode::f32 : std::is_same_v<Elem, f16> ? Mode::f16_f32acc : Mode::bf16_f32acc;
}
template <class Elem>
constexpr DType dtype_of() {
  return std::is_same_v<Elem, float> ? DType::f32 : std::is_same_v<Elem, f16> ? DType::f16 : DType::bf16;
}

/// One 32-bit "lane": the fp8 conversions of kernels/common/fp8_convert.hpp run one value at a time, the same
/// integer algorithm as the SIMD paths, in portable C++.
struct I32 {
  using I = std::uint32_t;
  using M = bool;
  static constexpr std::size_t kW = 1;
  static I load(const float* p) { return std::bit_cast<std::uint32_t>(*p); }
  static void store(float* p, I v) { *p = std::bit_cast<float>(v); }
  static I load_bytes(const std::uint8_t* p) { return *p; }
  static void store_bytes(std::uint8_t* p, I v) { *p = static_cast<std::uint8_t>(v); }
  static I set1(std::uint32_t v) { return v; }
  static I and_(I a, I b) { return a & b; }
  static I or_(I a, I b) { return a | b; }
  static I add(I a, I b) { return a + b; }
  static I sub(I a, I b) { return a - b; }
  template <int s>
  static I srl(I v) { return v >> s; }
  template <int s>
  static I sll(I v) { return v << s; }
  static M gt(I a, I b) { return static_cast<std::int32_t>(a) > static_cast<std::int32_t>(b); }
  static M eq(I a, I b) { return a == b; }
  static I select(M m, I a, I b) { return m ? a : b; }
  static I fadd(I a, I b) { return std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + std::bit_cast<float>(b)); }
  static I fmul(I a, I b) { return std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) * std::bit_cast<float>(b)); }
  static I i2f_scaled(I v, float c) { return std::bit_cast<std::uint32_t>(float(v) * c); }
};

}  // namespace halfmap::paths::ref
