// A row kernel's edges (softmax, xent, layernorm and rmsnorm, GELU): the stores of a register's first n lanes at a
// row's end, rounded to the storage type (store_lanes, nn.hpp's S) or canonical fp16 (store_canon_lanes, nn.hpp's
// H), so that nothing past the row is written; and the prefetch of the next row's bytes (prefetch_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace halfmap::detail {

/// Stores q's first n lanes, rounded to the storage type, at p.
template <class S>
void store_lanes(typename S::Elem* p, typename S::M::V q, std::size_t n) {
  using Elem = typename S::Elem;
  if (n == S::M::kW) {
    S::store(p, q);
  } else {
    Elem b[S::M::kW];
    S::store(b, q);
    std::memcpy(p, b, n * sizeof(Elem));
  }
}

/// Stores v's first n ≤ kW fp16 lanes at p with every NaN made the canonical 0x7E00 (the outputs of the fp16
/// kernels that write elementwise: norm.hpp, gelu.hpp); nothing past p + n is written.
template <class H>
void store_canon_lanes(std::uint16_t* p, typename H::HV v, std::size_t n) {
  if (n >= H::kW) {
    H::store(p, H::canon(v));
  } else {
    std::uint16_t b[H::kW];
    H::store(b, H::canon(v));
    std::memcpy(p, b, n * sizeof(std::uint16_t));
  }
}

/// Starts loading the cache lines of [p, p + bytes) (a hint: never faults, reads no data into registers).
inline void prefetch_bytes(const void* p, std::size_t bytes) {
  for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b, 0, 3);
}

}  // namespace halfmap::detail
