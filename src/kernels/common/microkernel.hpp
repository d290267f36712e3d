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
//   fma_broadcast(const Packed* a, b, c)  (optional) fma(broadcast(a), b, c) with the broadcast inside the FMA's
//                       memory operand, for tiles whose broadcast instruction would take an FMA port (below)
// Instantiated only with an ISA's own types, so every instantiation's mangled name names its ISA.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "halfmap/registry.hpp"
#include "kernels/common/gemm.hpp"  // f16_dense_epilogue

namespace halfmap::detail {

/// Whether the tile ops O have fma_broadcast.
template <class O>
constexpr bool kBroadcastInFma = requires(const typename O::Packed* a, typename O::V v) {
  {O::fma_broadcast(a, v, v)};
};

/// c (MR × NV·kW, row stride ldc) (+)= Σ over kc k of a(i, k)·b(k, j), k in order, with a(i, k) at a_at(k, i)
/// (a pointer to broadcast from) and b's NV vectors of each k consecutive in its packed panel.
template <class O, int MR, int NV, class AAt>
void tile_product(std::size_t kc, AAt a_at, const typename O::Packed* b, typename O::Acc* c, std::size_t ldc,
                  bool accumulate) {
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
  for (std::size_t p = 0; p < kc; ++p, b += W * NV) {
    typename O::V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = O::load_packed(b + W * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      if constexpr (kBroadcastInFma<O>) {
        // AVX512-FP16's vpbroadcastw from memory is a load and a port-5 shuffle on Intel's cores, and port 5 is
        // one of the two zmm FMA ports: 8 broadcasts per 16 FMAs. vfmadd231ph's embedded broadcast ({1to32}) is
        // a load only (llvm-mca, sapphirerapids: 16 -> 9.4 cycles per k of the 8 × 64 tile).
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = O::fma_broadcast(a_at(p, i), bv[v], acc[i][v]);
      } else {
        const typename O::V ai = O::broadcast(a_at(p, i));
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = O::fma(ai, bv[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) O::store(c + i * ldc + W * v, acc[i][v]);
  }
}

/// The tile on packed A: a(i, k) at a[k·MR + i], k in packing order.
template <class O, int MR, int NV>
void microkernel(std::size_t kc, const typename O::Packed* a, const typename O::Packed* b, typename O::Acc* c,
                 std::size_t ldc, bool accumulate) {
  tile_product<O, MR, NV>(
      kc, [a](std::size_t p, int i) { return a + p * MR + i; }, b, c, ldc, accumulate);
}

/// The same product with A row-major: a(i, k) at a[i·lda + k], for f32 panels: f32 storage read where it lies,
/// where packing A is only a reordering copy (at 256³ it was 7 % of the avx512 forward pass, at len 512 12 % of
/// f32 attention), and 16-bit storage widened row by row (gemm.hpp). The same FMAs in the same k order, so the
/// same bits as microkernel on packed A. An edge tile (rows < MR) reads its last row again for the rows past the
/// operand, whose results the caller discards (pack_panels_direct pads them with zeros instead). Each row is a
/// read stream, where packed A is one.
template <class O, int MR, int NV>
void microkernel_rows(std::size_t kc, const typename O::Packed* a, std::size_t lda, std::size_t rows,
                      const typename O::Packed* b, typename O::Acc* c, std::size_t ldc, bool accumulate) {
  const typename O::Packed* r[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) r[i] = a + std::min(std::size_t(i), rows - 1) * lda;
  tile_product<O, MR, NV>(
      kc, [&r](std::size_t p, int i) { return r[i] + p; }, b, c, ldc, accumulate);
}

/// The same product for the per-operation fp16 tiles (FmaKind::f32_round) with the accumulators kept where they
/// are, as fp16 in c (in L1 while the tile runs), not in registers: each k and accumulator loads it (vcvtph2ps),
/// fuses the multiply-add in f32 and stores it rounded to fp16 (vcvtps2ph into a register, then the store). The
/// bits are the register tile's: a register accumulator there holds exactly the fp16 value stored here, and each
/// step is the same round(fma(a, b, c)) in the same k order. What changes is how many chains run at once: the
/// register tile has as many as registers remain (12 on avx2), each a chain of FMA + two conversions some 16
/// cycles long, so it is bound by that latency; here every accumulator of an MR × NV·kW tile is a chain (48 at
/// 6 × 64), enough to be bound by the conversions' throughput instead, the F16C roof's L1 loop
/// (bench/roof/roof_avx2.cpp). O supplies fma_f32 (the FMA unrounded) and store_round (rounded to fp16 through a
/// register).
template <class O, int MR, int NV>
void microkernel_l1(std::size_t kc, const typename O::Packed* a, const typename O::Packed* b, typename O::Acc* c,
                    std::size_t ldc, bool accumulate) {
  constexpr int W = int(O::kW);
  if (!accumulate) {
    for (int i = 0; i < MR; ++i) std::memset(c + i * ldc, 0, sizeof(typename O::Acc) * W * NV);
  }
  for (std::size_t p = 0; p < kc; ++p, a += MR, b += W * NV) {
    typename O::V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = O::load_packed(b + W * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const typename O::V ai = O::broadcast(a + i);
      typename O::Acc* ci = c + i * ldc;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) O::store_round(ci + W * v, O::fma_f32(ai, bv[v], O::load(ci + W * v)));
    }
  }
}

/// Cache blocking of gemm.hpp: micro-tile kMr × kNr, cache blocks kMc × kKc × kNc.
template <std::size_t Mr, std::size_t Nr, std::size_t Mc, std::size_t Kc, std::size_t Nc>
struct Blocking {
  static constexpr std::size_t kMr = Mr, kNr = Nr, kKPack = 1, kMc = Mc, kKc = Kc, kNc = Nc;
  static constexpr bool kAccInL1 = false;
};

/// The same blocking on microkernel_l1: the per-operation fp16 tile's accumulators stay in memory.
template <std::size_t Mr, std::size_t Nr, std::size_t Mc, std::size_t Kc, std::size_t Nc>
struct BlockingL1 : Blocking<Mr, Nr, Mc, Kc, Nc> {
  static constexpr bool kAccInL1 = true;
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
  static constexpr auto kernel = [] {
    if constexpr (B::kAccInL1) {
      return microkernel_l1<Tile, int(B::kMr), int(B::kNr / Tile::kW)>;
    } else {
      return microkernel<Tile, int(B::kMr), int(B::kNr / Tile::kW)>;
    }
  }();
  /// gemm.hpp's kernel_rows (A row-major: f32 in place, or widened by rows): f32 panels, accumulators in
  /// registers.
  static void kernel_rows(std::size_t kc, const Packed* a, std::size_t lda, std::size_t rows, const Packed* b, Acc* c,
                          std::size_t ldc,
                          bool accumulate) requires(std::is_same_v<Packed, float>&& B::kKPack == 1 && !B::kAccInL1) {
    microkernel_rows<Tile, int(B::kMr), int(B::kNr / Tile::kW)>(kc, a, lda, rows, b, c, ldc, accumulate);
  }

  /// The f16 modes' epilogue (gemm.hpp's dense_fwd): f16_dense_epilogue's out = relu?(acc + b), the add rounded
  /// to fp16, whole vectors at a time (add_f16_run). A row with a NaN in acc or b goes to f16_dense_epilogue itself,
  /// which of two NaNs an add returns being its compiled operand order. The scalar epilogue took half the time of
  /// the avx512 forward pass at 256³, and 7/8 of the avx512fp16 one.
  static void f16_epilogue(const std::uint16_t* acc, std::size_t m, std::size_t n, const std::uint16_t* b, Act act,
                           std::uint16_t* out) {
    if constexpr (!kVectorAdd) {
      f16_dense_epilogue(acc, m, n, b, act, out);
    } else {
      const bool b_nan = b != nullptr && has_nan_f16(b, n);
      for (std::size_t i = 0; i < m; ++i) {
        const std::uint16_t* a = acc + i * n;
        std::uint16_t* o = out + i * n;
        if (b == nullptr) {
          std::memcpy(o, a, n * sizeof(std::uint16_t));
        } else if (b_nan || has_nan_f16(a, n)) {
          f16_dense_epilogue(a, 1, n, b, act, o);
          continue;
        } else {
          add_f16_run(o, a, b, n);
        }
        if (act == Act::relu) relu_f16(o, n);
      }
    }
  }

  /// dense_bias_grad_cols of the f16 modes: db[j] = Σ_i dy[i·n + j] for j in [j0, j1), each column summed from +0
  /// in row order with the f16 model's add, whole vectors of columns at a time (its scalar loop took 3/4 of the
  /// avx512fp16 backward pass at 256³). Columns with a NaN go to dense_bias_grad_cols, as f16_epilogue's rows do.
  static void f16_bias_grad(const std::uint16_t* dy, std::size_t m, std::size_t n, std::size_t j0, std::size_t j1,
                            std::uint16_t* db) {
    bool nan = !kVectorAdd;
    for (std::size_t i = 0; i < m && !nan; ++i) nan = has_nan_f16(dy + i * n + j0, j1 - j0);
    if (nan) return dense_bias_grad_cols(kMode, DType::f16, dy, m, n, j0, j1, db);
    std::fill(db + j0, db + j1, std::uint16_t{0});
    for (std::size_t i = 0; i < m; ++i) add_f16_run(db + j0, db + j0, dy + i * n + j0, j1 - j0);
  }

 private:
  /// Whether add_f16_run has vectors: the f16 model's add is to_f16(to_f32(a) + to_f32(b)), the correctly rounded
  /// fp16 sum (f16_model.hpp). On the per-operation F16C tiles (FmaKind::f32_round) vcvtph2ps, vaddps and
  /// vcvtps2ph are those operations (half.hpp's conversions equal the hardware's for every pattern:
  /// exhaustive_conversion_test); the native tiles (FmaKind::fused: vaddph, fadd .8h) round the sum once
  /// themselves. Either gives the model's bits for every operand pair without a NaN.
  static constexpr bool kVectorAdd = Tile::kFma == FmaKind::f32_round || Tile::kFma == FmaKind::fused;
  /// o[j] = a[j] + b[j] (fp16 bits, no NaN among them) for j < n: whole vectors, then f16_dense_epilogue's adds.
  /// o may be a.
  static void add_f16_run(std::uint16_t* o, const std::uint16_t* a, const std::uint16_t* b, std::size_t n) {
    std::size_t j = 0;
    if constexpr (Tile::kFma == FmaKind::f32_round) {
      for (; j + Cvt::kW <= n; j += Cvt::kW)
        Cvt::store_f16(o + j, Cvt::add(Cvt::load_f16(a + j), Cvt::load_f16(b + j)));
    } else if constexpr (Tile::kFma == FmaKind::fused) {
      for (; j + Tile::kW <= n; j += Tile::kW) Tile::store(o + j, Tile::add(Tile::load(a + j), Tile::load(b + j)));
    }
    if (j < n) f16_dense_epilogue(a + j, 1, n - j, b + j, Act::identity, o + j);
  }
  /// Through the largest magnitude's bits, a maximum GCC vectorises (an OR of flags stayed scalar, and took 3/4
  /// of the avx512fp16 forward pass at 64³).
  static bool has_nan_f16(const std::uint16_t* v, std::size_t n) {
    std::uint16_t top = 0;
    for (std::size_t j = 0; j < n; ++j) top = std::max(top, std::uint16_t(v[j] & 0x7FFFu));
    return top > 0x7C00u;
  }
  /// f16_dense_epilogue's relu on fp16 bits: negative, nonzero, non-NaN values become +0.
  static void relu_f16(std::uint16_t* v, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
      const unsigned mag = v[j] & 0x7FFFu;
      v[j] = (v[j] & 0x8000u) != 0 && mag != 0 && mag <= 0x7C00u ? std::uint16_t{0} : v[j];
    }
  }
  /// Whole registers, then single floats. The runs copied here are short (a row of a micro-tile, a 64-wide
  /// chunk of a panel), where an inlined memcpy becomes `rep movsq` and its start-up cost dominates; GCC still
  /// recognises this loop as a copy and, where n is not a constant, makes it that memcpy, so the hot caller
  /// passes a constant n where it can (gemm.hpp's f32acc_store_tile).
  static void copy_f32(const float* s, float* d, std::size_t n) {
    std::size_t i = 0;
    for (; i + Cvt::kW <= n; i += Cvt::kW) Cvt::store(d + i, Cvt::load(s + i));
    for (; i < n; ++i) d[i] = s[i];
  }
};

}  // namespace halfmap::detail
