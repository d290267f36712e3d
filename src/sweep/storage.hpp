// Storing exact (f64) values into a kernel's storage type, rounded once, and reading them back exactly. Shared by
// the sweep and `halfmap diagnose`, so that both see the same data boundary.
#pragma once

#include <cstddef>

#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"
#include "sweep/detmath.hpp"

namespace halfmap::sweep {

/// The smallest normal value of a storage type (below it a stored value is subnormal).
inline double min_normal(DType t) { return t == DType::f16 ? 0x1p-14 : 0x1p-126; }

/// Stores v (an exact double) into element i of a buffer of type t, rounding once; returns the stored value.
inline double store(DType t, void* buf, std::size_t i, double v) {
  switch (t) {
    case DType::f32: {
      const float f = float(v);  // the hardware conversion rounds once, to nearest even
      static_cast<float*>(buf)[i] = f;
      return f;
    }
    case DType::f16: {
      const f16 h = to_f16(v);  // half.hpp rounds f64 once
      static_cast<f16*>(buf)[i] = h;
      return to_f64(h);
    }
    case DType::bf16: {
      const bf16 b = det::to_bf16_exact(v);
      static_cast<bf16*>(buf)[i] = b;
      return double(to_f32(b));
    }
  }
  return 0;
}

/// Element i of a buffer of type t, widened exactly.
inline double load(DType t, const void* buf, std::size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(buf)[i];
    case DType::f16: return to_f64(static_cast<const f16*>(buf)[i]);
    case DType::bf16: return double(to_f32(static_cast<const bf16*>(buf)[i]));
  }
  return 0;
}

}  // namespace halfmap::sweep
