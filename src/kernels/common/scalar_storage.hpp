// Storage <-> f32 one value at a time, with halfmap's scalar conversions (half.hpp), and each storage type's mode:
// what the ref kernels (src/kernels/ref/kernels.cpp) and the attention composition (attention_compose.hpp) share.
// Only for files compiled without ISA flags: these are plain inline templates, so an ISA folder instantiating them
// would compile a copy with its flags that the linker could keep for every caller (see the ops.hpp headers).
#pragma once

#include <type_traits>

#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::detail {

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

}  // namespace halfmap::detail
