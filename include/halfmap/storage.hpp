// Storing exact (f64) values into a kernel's storage type, rounded once, and reading them back exactly; and the
// one typed buffer that holds such values. Shared by the sweep and `halfmap diagnose`, so that both see the same
// data boundary.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {

/// The smallest normal value of a storage type (below it a stored value is subnormal).
inline double min_normal(DType t) { return t == DType::f16 ? 0x1p-14 : 0x1p-126; }
/// The smallest positive subnormal of a storage type: 2^-24 (fp16), 2^-133 (bf16), 2^-149 (f32).
inline double min_subnormal(DType t) { return t == DType::f16 ? 0x1p-24 : t == DType::bf16 ? 0x1p-133 : 0x1p-149; }

/// The largest finite value of a storage type.
inline double max_finite(DType t) {
  switch (t) {
    case DType::f16:
      return 65504.0;
    case DType::bf16:
      return 0x1.FEp127;
    case DType::f32:
      return double(std::numeric_limits<float>::max());
  }
  return 0;
}

namespace detail {

/// to_f16(v), with no data-dependent branch for a non-NaN v (the sweep stores billions of values, at scales where
/// to_f16's branches go either way). Adding C = 1.5 · 2^(e+42), e being |v|'s binade clamped to [-14, 15], rounds |v|
/// to a multiple q of its fp16 ulp 2^(e-10), ties to even; q is then the low significand bits of the sum, and
/// ((e + 14) << 10) + q the encoding, a carry included (it reaches 0x7C00, inf, from 65520 up). Assumes the
/// default rounding mode, like to_bf16_exact. half_test compares it with to_f16 at every value and midpoint.
inline f16 to_f16_branchless(double v) {
  if (v != v) return to_f16(v);
  const std::uint64_t u = std::bit_cast<std::uint64_t>(v);
  const auto sign = static_cast<std::uint16_t>((u >> 48) & 0x8000u);
  const int e = int((u >> 52) & 0x7FFu) - 1023;
  const int ec = e < -14 ? -14 : (e > 15 ? 15 : e);
  const double c = std::bit_cast<double>((std::uint64_t(ec + 42 + 1023) << 52) | (std::uint64_t{1} << 51));
  const auto q = std::int64_t(std::bit_cast<std::uint64_t>(std::fabs(v) + c) & ((std::uint64_t{1} << 52) - 1)) -
                 (std::int64_t{1} << 51);
  std::int64_t enc = (std::int64_t(ec + 14) << 10) + q;
  enc = e > 15 || enc > 0x7C00 ? 0x7C00 : enc;
  return f16{static_cast<std::uint16_t>(sign | std::uint16_t(enc))};
}

/// to_bf16_exact(v) with the round-to-odd step as arithmetic on the bits instead of branches.
inline bf16 to_bf16_exact_branchless(double v) {
  if (v != v) return to_bf16(float(v));
  const float f = float(v);
  const double fd = f;
  const auto inexact = std::uint32_t(fd != v);
  std::uint32_t b = std::bit_cast<std::uint32_t>(f) - (inexact & std::uint32_t(std::fabs(fd) > std::fabs(v)));
  return to_bf16(std::bit_cast<float>(b | inexact));
}

}  // namespace detail

/// Stores v (an exact double) into element i of a buffer of type t, rounding once; returns the stored value.
inline double store(DType t, void* buf, std::size_t i, double v) {
  switch (t) {
    case DType::f32: {
      const float f = float(v);  // the hardware conversion rounds once, to nearest even
      static_cast<float*>(buf)[i] = f;
      return f;
    }
    case DType::f16: {
      const f16 h = detail::to_f16_branchless(v);  // to_f16: f64 rounded once
      static_cast<f16*>(buf)[i] = h;
      return to_f64(h);
    }
    case DType::bf16: {
      const bf16 b = detail::to_bf16_exact_branchless(v);
      static_cast<bf16*>(buf)[i] = b;
      return double(to_f32(b));
    }
  }
  return 0;
}

/// Element i of a buffer of type t, widened exactly.
inline double load(DType t, const void* buf, std::size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(buf)[i];
    case DType::f16:
      return to_f64(static_cast<const f16*>(buf)[i]);
    case DType::bf16:
      return double(to_f32(static_cast<const bf16*>(buf)[i]));
  }
  return 0;
}

/// `size()` elements of one storage type, zero-initialised, 4-byte aligned, with one spare word after the end
/// (a kernel's tail may read a little past `size()` elements of a 2-byte type).
class TypedBuffer {
 public:
  TypedBuffer() = default;
  TypedBuffer(DType t, std::size_t count) { resize(t, count); }
  /// Reallocates for `count` elements of type t, all zero.
  void resize(DType t, std::size_t count) {
    type_ = t;
    size_ = count;
    raw_.assign((count * dtype_size(t) + 3) / 4 + 1, 0);
  }
  DType type() const { return type_; }
  std::size_t size() const { return size_; }
  void* data() { return raw_.data(); }
  const void* data() const { return raw_.data(); }
  /// Element i's address (for row offsets).
  const void* at(std::size_t i) const {
    return reinterpret_cast<const unsigned char*>(raw_.data()) + i * dtype_size(type_);
  }
  /// Element i widened exactly.
  double get(std::size_t i) const { return load(type_, raw_.data(), i); }
  /// Stores v into element i, rounded once; returns the stored value.
  double set(std::size_t i, double v) { return store(type_, raw_.data(), i, v); }

 private:
  DType type_ = DType::f32;
  std::size_t size_ = 0;
  std::vector<std::uint32_t> raw_;
};

}  // namespace halfmap
