// The portable scalar building blocks of the ref kernels: its tag and its one 32-bit "lane" for the fp8
// conversions (storage <-> f32 one value at a time is kernels/common/scalar_storage.hpp, which the attention
// composition shares). The ref folder is compiled without ISA flags, so these are plain inline definitions (in
// namespace halfmap::paths::ref, like every ISA's ops.hpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace halfmap::paths::ref {

struct Tag {};

/// One 32-bit "lane": the fp8 conversions of kernels/common/fp8_codec.hpp run one value at a time, the same
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
  static I srl(I v) {
    return v >> s;
  }
  template <int s>
  static I sll(I v) {
    return v << s;
  }
  static M gt(I a, I b) { return static_cast<std::int32_t>(a) > static_cast<std::int32_t>(b); }
  static M eq(I a, I b) { return a == b; }
  static I select(M m, I a, I b) { return m ? a : b; }
  static I fadd(I a, I b) { return std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + std::bit_cast<float>(b)); }
  static I fmul(I a, I b) { return std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) * std::bit_cast<float>(b)); }
  static I i2f_scaled(I v, float c) { return std::bit_cast<std::uint32_t>(float(v) * c); }
};

}  // namespace halfmap::paths::ref
