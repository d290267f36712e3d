// The register-blocked GEMM micro-kernel, written once: an MR × (NV·kW) tile of accumulators, B's NV vectors
// loaded once per k, A broadcast per row, one multiply-add per accumulator and k (XNNPACK's broadcast GEMM
// tile). Each ISA instantiates it with a tile type of its ops.hpp; the vdpbf16ps pair tile of avx512bf16 has no
// common shape and stays hand-written there.
//
// Tile ops O supply (see the ops.hpp headers):
//   V, kW               register type and lanes
//   Packed, Acc         element types of the packed panels and of the accumulator in memory
//   zero(), load(const Acc*), store(Acc*, V)      the accumulators (load/store convert fp16 <-> f32 per-op paths)
//   load_packed(const Packed*), broadcast(const Packed*)
//   fma(a, b, c)        a*b + c in the tile's arithmetic (rounded to fp16 for the fp16 tiles)
// Instantiated only with an ISA's own types, so every instantiation's mangled name names its ISA.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

/// c (MR × NV·kW, row stride ldc) (+)= Σ over kc packed k of a(i, k)·b(k, j), k in packing order.
template <class O, int MR, int NV>
void microkernel(std::size_t kc, const typename O::Packed* a, const typename O::Packed* b, typename O::Acc* c,
                 std::size_t ldc, bool accumulate) {
  constexpr int W = int(O::kW);
  typename O::V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = accumulate ? O::load(c + i * ldc + W * v) : O::zero();
  }
  // Four k per loop trip: the pointer bumps and the branch are a quarter of the uops they would be, which the
  // 12-FMA avx2 tile needs to reach its FMA ports (measured: 0.82 -> 0.88 of the avx2 roof at 1024³; the avx512
  // tiles are unchanged or slightly faster). The order of the FMAs per accumulator is the same.
#pragma GCC unroll 4
  for (std::size_t p = 0; p < kc; ++p, a += MR, b += W * NV) {
    typename O::V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = O::load_packed(b + W * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const typename O::V ai = O::broadcast(a + i);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = O::fma(ai, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) O::store(c + i * ldc + W * v, acc[i][v]);
  }
}

/// Cache blocking of gemm.hpp: micro-tile kMr × kNr, cache blocks kMc × kKc × kNc.
template <std::size_t Mr, std::size_t Nr, std::size_t Mc, std::size_t Kc, std::size_t Nc>
struct Blocking {
  static constexpr std::size_t kMr = Mr, kNr = Nr, kKPack = 1, kMc = Mc, kKc = Kc, kNc = Nc;
};

/// gemm.hpp's traits for a dense kernel on the micro-kernel above. Storage is float or uint16_t (fp16 bits);
/// Cvt (the ISA's f32 ops) supplies f16_to_f32 / f32_to_f16 over n elements for packing fp16 into f32 panels
/// and for rounding f32 outputs to fp16; panels of the storage type itself are copied.
template <class Tile, class Cvt, class Storage_, Mode kMode_, class B>
struct GemmTraits : B {
  using Storage = Storage_;
  using Packed = typename Tile::Packed;
  using Acc = typename Tile::Acc;
  static constexpr Mode kMode = kMode_;
  static_assert(B::kNr % Tile::kW == 0, "the tile is whole registers wide");
  static void convert(const Storage* s, Packed* d, std::size_t n) {
    if constexpr (std::is_same_v<Storage, float> && std::is_same_v<Packed, float>) {
      copy_f32(s, d, n);
    } else if constexpr (std::is_same_v<Storage, Packed>) {
      std::memcpy(d, s, n * sizeof(Storage));
    } else {
      Cvt::f16_to_f32(s, d, n);
    }
  }
  static void store_out(const float* s, Storage* d, std::size_t n) {
    if constexpr (std::is_same_v<Storage, float>) {
      copy_f32(s, d, n);
    } else {
      Cvt::f32_to_f16(s, d, n);
    }
  }
  static constexpr auto kernel = microkernel<Tile, int(B::kMr), int(B::kNr / Tile::kW)>;

 private:
  /// Whole registers, then single floats: the runs copied here are short (a row of a micro-tile, a 64-wide
  /// chunk of a panel), where an inlined memcpy becomes `rep movsq` and its start-up cost dominates.
  static void copy_f32(const float* s, float* d, std::size_t n) {
    std::size_t i = 0;
    for (; i + Cvt::kW <= n; i += Cvt::kW) Cvt::store(d + i, Cvt::load(s + i));
    for (; i < n; ++i) d[i] = s[i];
  }
};

}  // namespace halfmap::detail
