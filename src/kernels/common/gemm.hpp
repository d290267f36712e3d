// The portable GEMM driver behind every dense kernel: cache blocking, packing (with the storage -> compute
// conversion folded in), edge tiles, and the forward/backward wrappers. Written once; each ISA instantiates it
// with its own traits (an anonymous-namespace type, so instantiations never merge across ISA flags; see
// reduce.hpp) that supply the register-blocked micro-kernel.
//
// Traits T supply:
//   Storage            element type in memory (float, or uint16_t for fp16/bf16 bit patterns)
//   Packed             element type of the packed panels the micro-kernel reads
//   Acc                accumulator type kept between k blocks: float, or uint16_t fp16 bits (f16 modes)
//   kMr, kNr           micro-tile rows and columns
//   kKPack             k values packed together per row/column (1; 2 for vdpbf16ps pairs)
//   kMc, kKc, kNc      cache blocks (kKc a multiple of kKPack)
//   kMode              the precision mode (decides the epilogue)
//   convert(const Storage* src, Packed* dst, size_t count)   widen/copy `count` contiguous elements
//   kernel(size_t groups, const Packed* a, const Packed* b, Acc* c, size_t ldc, bool accumulate)
//       c[i*ldc + j] (+)= Σ over `groups` packed k-groups of a(i,·)·b(·,j), for the whole kMr × kNr tile; the
//       k order is the packing order, one k-group after the other.
//   store_out(const float* src, Storage* dst, size_t count)  (f32-accumulating modes) round f32 to storage
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "halfmap/registry.hpp"

namespace halfmap::detail {

/// A strided view of a matrix operand: element (r, c) is at data[r * rs + c * cs].
template <class E>
struct View {
  const E* data;
  std::ptrdiff_t rs, cs;
  const E& at(std::size_t r, std::size_t c) const { return data[std::ptrdiff_t(r) * rs + std::ptrdiff_t(c) * cs]; }
};

// Out-of-line steps compiled without ISA flags (src/core/dense.cpp).
/// f16 modes: out[i*n + j] = act(acc[i*n + j] + b[j]) with fp16 rounding (b may be null; fp16 bits throughout).
void f16_dense_epilogue(const std::uint16_t* acc, std::size_t m, std::size_t n, const std::uint16_t* b, Act act,
                        std::uint16_t* out);
/// db[j] = Σ_i dy[i*n + j] in the mode's arithmetic, rounded like the mode's other outputs.
void dense_bias_grad(Mode mode, DType storage, const void* dy, std::size_t m, std::size_t n, void* db);
/// f32 copy of a vector in storage type `t` (exact).
void widen_to_f32(DType t, const void* src, float* dst, std::size_t n);
/// f32 -> storage type `t`, round to nearest even (halfmap's scalar conversions).
void narrow_from_f32(DType t, const float* src, void* dst, std::size_t n);

/// Packs rows [r0, r0 + rows) × k-range [p0, p0 + kc) of `src` (a rows × k operand) into micro-panels of
/// `mr` rows: for each panel, for each k-group q, mr × kKPack values; rows and k beyond the operand are zero.
template <class T>
void pack_panels(View<typename T::Storage> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
                 std::size_t mr, typename T::Packed* dst, std::vector<typename T::Packed>& line) {
  using Packed = typename T::Packed;
  constexpr std::size_t KP = T::kKPack;
  const std::size_t groups = (kc + KP - 1) / KP;
  const std::size_t panels = (rows + mr - 1) / mr;
  std::memset(static_cast<void*>(dst), 0, panels * mr * groups * KP * sizeof(Packed));
  line.resize(std::max(kc, rows));
  if (src.cs == 1) {  // rows are contiguous along k: convert one row at a time, then scatter
    for (std::size_t r = 0; r < rows; ++r) {
      T::convert(&src.at(r0 + r, p0), line.data(), kc);
      Packed* panel = dst + (r / mr) * mr * groups * KP;
      const std::size_t i = r % mr;
      for (std::size_t p = 0; p < kc; ++p) panel[((p / KP) * mr + i) * KP + p % KP] = line[p];
    }
  } else {  // columns are contiguous along rows (a transposed operand): convert one k at a time
    for (std::size_t p = 0; p < kc; ++p) {
      T::convert(&src.at(r0, p0 + p), line.data(), rows);
      for (std::size_t r = 0; r < rows; ++r) {
        dst[(r / mr) * mr * groups * KP + ((p / KP) * mr + r % mr) * KP + p % KP] = line[r];
      }
    }
  }
}

/// acc (m × n, row-major, ld = n) = A (m × k) · B (k × n), accumulated in T::Acc. A and B are strided views;
/// one of the two strides of each must be 1.
template <class T>
void gemm(std::size_t m, std::size_t n, std::size_t k, View<typename T::Storage> a, View<typename T::Storage> b,
          typename T::Acc* acc) {
  using Packed = typename T::Packed;
  using Acc = typename T::Acc;
  constexpr std::size_t MR = T::kMr, NR = T::kNr, KP = T::kKPack;
  if (k == 0) {
    std::fill(acc, acc + m * n, Acc{});
    return;
  }
  // Transposing B makes its packing the same as A's: B's columns are the "rows" of its panels.
  const View<typename T::Storage> bt{b.data, b.cs, b.rs};
  thread_local std::vector<Packed> apack, bpack, line;
  alignas(64) Acc tile[MR * NR];
  for (std::size_t jc = 0; jc < n; jc += T::kNc) {
    const std::size_t nc = std::min(T::kNc, n - jc);
    for (std::size_t pc = 0; pc < k; pc += T::kKc) {
      const std::size_t kc = std::min(T::kKc, k - pc);
      const std::size_t groups = (kc + KP - 1) / KP;
      bpack.resize(((nc + NR - 1) / NR) * NR * groups * KP);
      pack_panels<T>(bt, jc, nc, pc, kc, NR, bpack.data(), line);
      const bool accumulate = pc > 0;
      for (std::size_t ic = 0; ic < m; ic += T::kMc) {
        const std::size_t mc = std::min(T::kMc, m - ic);
        apack.resize(((mc + MR - 1) / MR) * MR * groups * KP);
        pack_panels<T>(a, ic, mc, pc, kc, MR, apack.data(), line);
        for (std::size_t jr = 0; jr < nc; jr += NR) {
          const std::size_t nr = std::min(NR, nc - jr);
          const Packed* bp = bpack.data() + (jr / NR) * NR * groups * KP;
          for (std::size_t ir = 0; ir < mc; ir += MR) {
            const std::size_t mr = std::min(MR, mc - ir);
            const Packed* ap = apack.data() + (ir / MR) * MR * groups * KP;
            Acc* c = acc + (ic + ir) * n + jc + jr;
            if (mr == MR && nr == NR) {
              T::kernel(groups, ap, bp, c, n, accumulate);
              continue;
            }
            // Edge tile: compute the whole tile in a local buffer, keep only the valid part.
            if (accumulate) {
              for (std::size_t i = 0; i < mr; ++i) std::copy(c + i * n, c + i * n + nr, tile + i * NR);
            }
            T::kernel(groups, ap, bp, tile, NR, accumulate);
            for (std::size_t i = 0; i < mr; ++i) std::copy(tile + i * NR, tile + i * NR + nr, c + i * n);
          }
        }
      }
    }
  }
}

/// out (m × n) = act(acc + b) rounded to the storage type. f32-accumulating modes only.
template <class T>
void f32acc_epilogue(const float* acc, std::size_t m, std::size_t n, const float* b, Act act,
                     typename T::Storage* out) {
  thread_local std::vector<float> row;
  row.resize(n);
  for (std::size_t i = 0; i < m; ++i) {
    const float* a = acc + i * n;
    for (std::size_t j = 0; j < n; ++j) {
      float v = b != nullptr ? a[j] + b[j] : a[j];  // no "+ 0": it would turn -0 into +0
      if (act == Act::relu) v = v < 0.0f ? 0.0f : v;
      row[j] = v;
    }
    T::store_out(row.data(), out + i * n, n);
  }
}

/// acc -> storage for the backward outputs (no bias, no activation).
template <class T>
void store_acc(const typename T::Acc* acc, std::size_t m, std::size_t n, typename T::Storage* out) {
  if constexpr (T::kMode == Mode::f16) {
    std::memcpy(out, acc, m * n * sizeof(std::uint16_t));
  } else {
    f32acc_epilogue<T>(acc, m, n, nullptr, Act::identity, out);
  }
}

template <class T>
void dense_fwd(const DenseArgs& d) {
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc;
  acc.resize(d.m * d.n);
  const View<S> x{static_cast<const S*>(d.x), std::ptrdiff_t(d.k), 1};
  const View<S> w{static_cast<const S*>(d.w), std::ptrdiff_t(d.n), 1};
  gemm<T>(d.m, d.n, d.k, x, w, acc.data());
  if constexpr (T::kMode == Mode::f16) {
    f16_dense_epilogue(acc.data(), d.m, d.n, static_cast<const std::uint16_t*>(d.b), d.act,
                       static_cast<std::uint16_t*>(d.y));
  } else {
    thread_local std::vector<float> bias;
    if (d.b != nullptr) {
      bias.resize(d.n);
      widen_to_f32(T::kMode == Mode::f32 ? DType::f32 : T::kMode == Mode::bf16_f32acc ? DType::bf16 : DType::f16,
                   d.b, bias.data(), d.n);
    }
    f32acc_epilogue<T>(acc.data(), d.m, d.n, d.b != nullptr ? bias.data() : nullptr, d.act, static_cast<S*>(d.y));
  }
}

template <class T>
void dense_bwd(const DenseBwdArgs& d) {
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc;
  const auto* x = static_cast<const S*>(d.x);
  const auto* w = static_cast<const S*>(d.w);
  const auto* dy = static_cast<const S*>(d.dy);
  const std::ptrdiff_t m = std::ptrdiff_t(d.m), n = std::ptrdiff_t(d.n), k = std::ptrdiff_t(d.k);
  if (d.dx != nullptr) {  // dX (m×k) = dY (m×n) · Wᵀ (n×k)
    acc.resize(d.m * d.k);
    gemm<T>(d.m, d.k, d.n, View<S>{dy, n, 1}, View<S>{w, 1, n}, acc.data());
    store_acc<T>(acc.data(), d.m, d.k, static_cast<S*>(d.dx));
  }
  if (d.dw != nullptr) {  // dW (k×n) = Xᵀ (k×m) · dY (m×n)
    acc.resize(d.k * d.n);
    gemm<T>(d.k, d.n, d.m, View<S>{x, 1, k}, View<S>{dy, n, 1}, acc.data());
    store_acc<T>(acc.data(), d.k, d.n, static_cast<S*>(d.dw));
  }
  (void)m;
  if (d.db != nullptr) {
    const DType t = T::kMode == Mode::f32 ? DType::f32 : T::kMode == Mode::bf16_f32acc ? DType::bf16 : DType::f16;
    dense_bias_grad(T::kMode, t, d.dy, d.m, d.n, d.db);
  }
}

}  // namespace halfmap::detail
