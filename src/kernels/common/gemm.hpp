// The portable GEMM driver behind every dense kernel: cache blocking, packing (with the storage -> compute
// conversion folded in), edge tiles, and the forward/backward wrappers. Written once; each ISA instantiates it
// with its own traits (microkernel.hpp's GemmTraits over its ops.hpp types, or a hand-written tile, so
// instantiations never merge across ISA flags; see the ops.hpp headers) that supply the register-blocked
// micro-kernel.
//
// Traits T supply:
//   Storage            element type in memory (float, or uint16_t for fp16/bf16 bit patterns)
//   Packed             element type of the packed panels the micro-kernel reads
//   Acc                accumulator type kept between k blocks: float, or uint16_t fp16 bits (f16 modes)
//   kMr, kNr           micro-tile rows and columns
//   kKPack             k values packed together per row/column (1; 2 for vdpbf16ps pairs)
//   kMc, kKc, kNc      the cache blocks where the caches cannot be read (cpu.hpp's cache_sizes); kKc is also the
//                      longest k block the tile takes (gemm_blocks: every block is chosen from the caches)
//   kMode              the precision mode (decides the epilogue)
//   convert(const Storage* src, Packed* dst, size_t count)   widen/copy `count` contiguous elements
//   kernel(size_t groups, const Packed* a, const Packed* b, Acc* c, size_t ldc, bool accumulate)
//       c[i*ldc + j] (+)= Σ over `groups` packed k-groups of a(i,·)·b(·,j), for the whole kMr × kNr tile; the
//       k order is the packing order, one k-group after the other.
//   kernel_rows(size_t kc, const Packed* a, size_t lda, size_t rows, const Packed* b, Acc* c, size_t ldc,
//               bool accumulate)  (optional: f32 panels, avx512bf16's pairs) the same product over kc values of k
//       with A row-major (a(i, k) at a[i*lda + k], rows <= kMr of them valid): gemm reads such an A in place,
//       unpacked, where Packed is its storage type, and widens one of another storage type row by row
//   store_out(const float* src, Storage* dst, size_t count)  (f32-accumulating modes) round f32 to storage;
//       called once per row of each finished micro-tile (count <= kNr), so it should be vectorised
//   pack<MR>(View<Storage> src, r0, rows, p0, kc, Packed* dst)  (optional) the path's own pack_panels, writing
//       exactly pack_panels's panels (avx512bf16's pairs: a transpose in shuffles rather than 16-bit moves)
//   f16_epilogue(acc, m, n, b, act, out)  (f16 modes) f16_dense_epilogue's result (microkernel.hpp's GemmTraits)
//   f16_bias_grad(dy, m, n, j0, j1, db)  (f16 modes) dense_bias_grad_cols's result (microkernel.hpp's GemmTraits)
//   bias_add(float acc, float b)  (optional, f32-accumulating modes) acc + b where the path's contract fixes which
//       NaN operand an add propagates (neonbf16: f32acc_model_add); otherwise a C++ add
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "halfmap/registry.hpp"
#include "kernels/common/scratch.hpp"

namespace halfmap::detail {

/// A strided view of a matrix operand: element (r, c) is at data[r * rs + c * cs].
template <class E>
struct View {
  const E* data;
  std::ptrdiff_t rs, cs;
  const E& at(std::size_t r, std::size_t c) const { return data[std::ptrdiff_t(r) * rs + std::ptrdiff_t(c) * cs]; }
};

/// The cache blocks of one GEMM: mc rows of A, kc values of the inner index, nc columns of B per block. Blocking
/// never changes a result: every output accumulates its products in k order, k block after k block, through the
/// same accumulator (dense_test checks it at several blockings).
struct GemmBlocks {
  std::size_t mc, kc, nc;
};

/// The traits' common part of a bf16_f32acc tile that reads bf16 panels as they are stored (avx512bf16's
/// vdpbf16ps pairs, neonbf16's BFMMLA): the panels are copies, the accumulators f32. Tile, the path's own traits
/// (derived from this), keeps the instantiation apart per path.
template <class Tile>
struct Bf16PanelTraits {
  using Storage = std::uint16_t;
  using Packed = std::uint16_t;
  using Acc = float;
  static constexpr Mode kMode = Mode::bf16_f32acc;
  static void convert(const std::uint16_t* s, std::uint16_t* d, std::size_t n) {
    std::memcpy(d, s, n * sizeof(std::uint16_t));
  }
};

// Out-of-line steps compiled without ISA flags (src/kernels/common/dense.cpp).
/// The blocks for a tile of mr × nr with kpack-value groups and `elem`-byte packed values, from the data caches
/// of this core (cache_sizes()): kc so that an mr × kc micro-panel of A takes 3/4 of L1 (the tile rereads it for
/// every B micro-panel; the rest of L1 holds the B lines streaming through and the C tile), at most `fallback.kc`
/// (a long k block saves loads and stores of the C tile, so kc is as long as L1 allows: on a 32 KiB L1 with
/// avx512's 6 × 64 f32 tile, 1024; measured on Zen 4, half of L1 (680) was 5-10 % slower); mc so that the mc × kc block
/// of A takes 30 % of L2, beside the B micro-panel streaming through; nc so that the kc × nc block of B takes half of
/// this core's share of the last-level cache. Each rounded down to whole micro-tiles (kc to kpack) and at least one;
/// `fallback` where a cache size is unknown.
GemmBlocks gemm_blocks_for(std::size_t mr, std::size_t nr, std::size_t kpack, std::size_t elem, GemmBlocks fallback);
/// `blocks`, or the blocks set by set_gemm_blocks_for_tests (rounded to the tile the same way) while they are set.
GemmBlocks gemm_blocks_override(GemmBlocks blocks, std::size_t mr, std::size_t nr, std::size_t kpack);

/// The cache blocks of traits T on this core (computed once), or the tests' override.
template <class T>
GemmBlocks gemm_blocks() {
  static const GemmBlocks from_caches =
      gemm_blocks_for(T::kMr, T::kNr, T::kKPack, sizeof(typename T::Packed), GemmBlocks{T::kMc, T::kKc, T::kNc});
  GemmBlocks b = gemm_blocks_override(from_caches, T::kMr, T::kNr, T::kKPack);
  b.kc = std::min(b.kc, T::kKc);  // the longest k block the tile takes
  return b;
}

/// f16 modes: out[i*n + j] = act(acc[i*n + j] + b[j]) with fp16 rounding (b may be null; fp16 bits throughout).
void f16_dense_epilogue(const std::uint16_t* acc, std::size_t m, std::size_t n, const std::uint16_t* b, Act act,
                        std::uint16_t* out);
/// f16_f32acc, one row: out[j] = to_f16(act(acc[j] + b[j])) (b may be null: no add; the add is
/// f32acc_model_add), relu in f32 (x < 0 ? 0 : x).
void f32acc_f16_row_epilogue(const float* acc, std::size_t n, const std::uint16_t* b, Act act, std::uint16_t* out);
/// db[j] = Σ_i dy[i*n + j] in the mode's arithmetic, rounded like the mode's other outputs.
void dense_bias_grad(Mode mode, DType storage, const void* dy, std::size_t m, std::size_t n, void* db);
/// The same for columns [j0, j1) only (db[j0..j1) written; each column's sum is the same as dense_bias_grad's).
void dense_bias_grad_cols(Mode mode, DType storage, const void* dy, std::size_t m, std::size_t n, std::size_t j0,
                          std::size_t j1, void* db);
/// f32 copy of a vector in storage type `t` (exact).
void widen_to_f32(DType t, const void* src, float* dst, std::size_t n);

/// pack_panels for panels of the storage type itself, one k per group (f32 into f32, fp16 bits into fp16 bits):
/// the values are copied straight from `src`, without the detour through a scratch line that a conversion needs
/// (at 256³ that detour was a tenth of the avx2 f32 forward pass). `T`, the ISA path's traits, is unused but
/// puts the path's namespace into the instantiation's mangled name: otherwise the avx2 and avx512 objects would
/// emit the same symbol, compiled with different ISA flags, and the linker would keep one of them for both.
template <std::size_t MR, class T, class P>
void pack_panels_direct(View<P> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc, P* dst) {
  const std::size_t panels = (rows + MR - 1) / MR;
  for (std::size_t j = 0; j < panels; ++j) {
    const std::size_t valid = std::min(MR, rows - j * MR);
    P* d = dst + j * MR * kc;
    if (src.cs == 1) {  // rows contiguous along k: MR read streams, one value of each per k
      const P* s[MR];
      for (std::size_t i = 0; i < MR; ++i) s[i] = &src.at(r0 + j * MR + std::min(i, valid - 1), p0);
      if (valid == MR) {
        for (std::size_t q = 0; q < kc; ++q) {
          for (std::size_t i = 0; i < MR; ++i) d[q * MR + i] = s[i][q];
        }
      } else {
        for (std::size_t q = 0; q < kc; ++q) {
          for (std::size_t i = 0; i < MR; ++i) d[q * MR + i] = i < valid ? s[i][q] : P{};
        }
      }
    } else {  // columns contiguous along rows (rs == 1): the panel's values of one k are one run
      for (std::size_t q = 0; q < kc; ++q) {
        const P* s = &src.at(r0 + j * MR, p0 + q);
        P* dq = d + q * MR;
        if (valid == MR) {
          std::memcpy(dq, s, MR * sizeof(P));  // a constant size: inlined as vector moves (std::copy calls memmove)
        } else {
          std::copy(s, s + valid, dq);
          std::fill(dq + valid, dq + MR, P{});
        }
      }
    }
  }
}

/// Packs rows [r0, r0 + rows) × k-range [p0, p0 + kc) of `src` (a rows × k operand) into micro-panels of
/// `MR` rows: for each panel, for each k-group q, MR × kKPack values; rows and k beyond the operand are zero.
/// `line` is scratch. The storage -> compute conversion runs on contiguous runs of `src` into `line`, then a
/// scatter with compile-time strides reorders them: no division per element and no separate zeroing pass (the
/// padding is written once, as zeros, by the scatter).
template <class T, std::size_t MR>
void pack_panels(View<typename T::Storage> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
                 typename T::Packed* dst, std::vector<typename T::Packed>& line) {
  using Packed = typename T::Packed;
  constexpr std::size_t KP = T::kKPack;
  if constexpr (requires { T::template pack<MR>(src, r0, rows, p0, kc, dst); }) {
    return T::template pack<MR>(src, r0, rows, p0, kc, dst);
  } else if constexpr (std::is_same_v<typename T::Storage, Packed> && KP == 1) {
    return pack_panels_direct<MR, T>(src, r0, rows, p0, kc, dst);
  }
  const std::size_t groups = (kc + KP - 1) / KP, kcp = groups * KP;
  const std::size_t panels = (rows + MR - 1) / MR;
  if (src.cs == 1) {  // rows are contiguous along k: convert MR rows × kChunk k of a panel, then interleave them
    constexpr std::size_t kChunk = 64;  // a multiple of KP; MR × kChunk values stay in L1
    static_assert(kChunk % KP == 0);
    line.resize(MR * kChunk);
    for (std::size_t j = 0; j < panels; ++j) {
      for (std::size_t p = 0; p < kcp; p += kChunk) {
        const std::size_t width = std::min(kChunk, kcp - p), valid = p < kc ? std::min(width, kc - p) : 0;
        for (std::size_t i = 0; i < MR; ++i) {
          Packed* l = line.data() + i * kChunk;
          std::size_t filled = 0;
          if (j * MR + i < rows && valid > 0) {
            T::convert(&src.at(r0 + j * MR + i, p0 + p), l, valid);
            filled = valid;
          }
          std::fill(l + filled, l + width, Packed{});
        }
        Packed* d = dst + j * MR * kcp + p * MR;
        for (std::size_t q = 0; q < width / KP; ++q) {
          for (std::size_t i = 0; i < MR; ++i) {
            for (std::size_t t = 0; t < KP; ++t) d[(q * MR + i) * KP + t] = line[i * kChunk + q * KP + t];
          }
        }
      }
    }
  } else if constexpr (KP == 1 && MR >= 16) {  // columns contiguous along rows, one k per group, wide panels (B's):
    // each panel's values of one k are one contiguous run of src, converted straight into the panel. Narrow panels
    // (A's 6 rows) keep the line: a conversion of 6 values is scalar (avx2's dense backward at 256³: 0.89×).
    for (std::size_t j = 0; j < panels; ++j) {
      const std::size_t valid = std::min(MR, rows - j * MR);
      Packed* d = dst + j * MR * kc;
      for (std::size_t q = 0; q < kc; ++q, d += MR) {
        T::convert(&src.at(r0 + j * MR, p0 + q), d, valid);
        std::fill(d + valid, d + MR, Packed{});
      }
    }
  } else {  // columns are contiguous along rows (a transposed operand): convert the KP k values of a group
    const std::size_t width = panels * MR;
    line.resize(KP * width);
    for (std::size_t q = 0; q < groups; ++q) {
      for (std::size_t t = 0; t < KP; ++t) {
        Packed* l = line.data() + t * width;
        std::size_t filled = 0;
        if (q * KP + t < kc) {
          T::convert(&src.at(r0, p0 + q * KP + t), l, rows);
          filled = rows;
        }
        std::fill(l + filled, l + width, Packed{});
      }
      for (std::size_t j = 0; j < panels; ++j) {
        Packed* d = dst + j * MR * kcp + q * MR * KP;
        for (std::size_t i = 0; i < MR; ++i) {
          for (std::size_t t = 0; t < KP; ++t) d[i * KP + t] = line[t * width + j * MR + i];
        }
      }
    }
  }
}

/// acc (m × n, row-major, ld = n) = A (m × k) · B (k × n), accumulated in T::Acc. A and B are strided views;
/// one of the two strides of each must be 1.
///
/// With a `finish` callable, the last k block of each micro-tile is computed into a local tile instead of
/// `acc`, and finish(tile, NR, i0, j0, rows, cols) receives the finished values of rows [i0, i0 + rows) ×
/// columns [j0, j0 + cols) (row stride NR) while they are in L1: the epilogue costs no pass over m × n, and
/// `acc` is only touched when k spans more than one k block. Without it (nullptr), `acc` holds the result.
template <class T, class Finish = std::nullptr_t>
void gemm(std::size_t m, std::size_t n, std::size_t k, View<typename T::Storage> a, View<typename T::Storage> b,
          typename T::Acc* acc, Finish finish = nullptr) {
  using Packed = typename T::Packed;
  using Acc = typename T::Acc;
  constexpr std::size_t MR = T::kMr, NR = T::kNr, KP = T::kKPack;
  constexpr bool kFinish = !std::is_same_v<Finish, std::nullptr_t>;
  alignas(64) Acc tile[MR * NR];
  if (k == 0) {
    if constexpr (kFinish) {
      std::fill(tile, tile + MR * NR, Acc{});
      for (std::size_t i = 0; i < m; i += MR) {
        for (std::size_t j = 0; j < n; j += NR) finish(tile, NR, i, j, std::min(MR, m - i), std::min(NR, n - j));
      }
    } else {
      std::fill(acc, acc + m * n, Acc{});
    }
    return;
  }
  // Transposing B makes its packing the same as A's: B's columns are the "rows" of its panels.
  const View<typename T::Storage> bt{b.data, b.cs, b.rs};
  // A row-major A whose tile can read rows (T::kernel_rows) is not packed into micro-panels: read in place where
  // the tile reads its storage type (f32, avx512bf16's bf16 pairs), else widened row by row into an f32 block
  // (one contiguous conversion per row, where the micro-panels need a transposing copy after it: at 256³ that
  // was 8 % of the avx512 f16_f32acc forward pass).
  constexpr bool kRowsTile = requires(const Packed* p, Acc* c) {
    T::kernel_rows(std::size_t{}, p, std::size_t{}, std::size_t{}, p, c, std::size_t{}, true);
  };
  constexpr bool kWidenRows = kRowsTile && !std::is_same_v<typename T::Storage, Packed>;
  const bool a_rows = kRowsTile && a.cs == 1;
  thread_local std::vector<Packed> apack_buf, bpack_buf, line;
  const GemmBlocks blk = gemm_blocks<T>();
  for (std::size_t jc = 0; jc < n; jc += blk.nc) {
    const std::size_t nc = std::min(blk.nc, n - jc);
    for (std::size_t pc = 0; pc < k; pc += blk.kc) {
      const std::size_t kc = std::min(blk.kc, k - pc);
      const std::size_t groups = (kc + KP - 1) / KP;
      Packed* const bpack = aligned_scratch(bpack_buf, ((nc + NR - 1) / NR) * NR * groups * KP);
      pack_panels<T, NR>(bt, jc, nc, pc, kc, bpack, line);
      const bool accumulate = pc > 0;
      const bool last = pc + kc == k;
      for (std::size_t ic = 0; ic < m; ic += blk.mc) {
        const std::size_t mc = std::min(blk.mc, m - ic);
        Packed* apack = nullptr;
        const std::size_t lda_wide = (kc + 15) / 16 * 16;  // the widened rows' stride: whole 64-byte lines
        if (!a_rows) {
          apack = aligned_scratch(apack_buf, ((mc + MR - 1) / MR) * MR * groups * KP);
          pack_panels<T, MR>(a, ic, mc, pc, kc, apack, line);
        } else if constexpr (kWidenRows) {
          apack = aligned_scratch(apack_buf, mc * lda_wide);
          for (std::size_t i = 0; i < mc; ++i) T::convert(&a.at(ic + i, pc), apack + i * lda_wide, kc);
        }
        for (std::size_t jr = 0; jr < nc; jr += NR) {
          const std::size_t nr = std::min(NR, nc - jr);
          const Packed* bp = bpack + (jr / NR) * NR * groups * KP;
          for (std::size_t ir = 0; ir < mc; ir += MR) {
            const std::size_t mr = std::min(MR, mc - ir);
            auto kernel = [&](Acc* out, std::size_t ldc) {
              if constexpr (kWidenRows) {
                if (a_rows) {
                  return T::kernel_rows(kc, apack + ir * lda_wide, lda_wide, mr, bp, out, ldc, accumulate);
                }
              } else if constexpr (kRowsTile) {
                if (a_rows) {
                  return T::kernel_rows(kc, &a.at(ic + ir, pc), std::size_t(a.rs), mr, bp, out, ldc, accumulate);
                }
              }
              T::kernel(groups, apack + (ir / MR) * MR * groups * KP, bp, out, ldc, accumulate);
            };
            Acc* c = acc + (ic + ir) * n + jc + jr;
            if (!(kFinish && last) && mr == MR && nr == NR) {
              kernel(c, n);
              continue;
            }
            // Edge tile, or the last k block with a finisher: compute the whole tile in a local buffer, then
            // keep only the valid part.
            if (accumulate) {
              for (std::size_t i = 0; i < mr; ++i) std::copy(c + i * n, c + i * n + nr, tile + i * NR);
            }
            kernel(tile, NR);
            if constexpr (kFinish) {
              if (last) {
                finish(static_cast<const Acc*>(tile), NR, ic + ir, jc + jr, mr, nr);
                continue;
              }
            }
            for (std::size_t i = 0; i < mr; ++i) std::copy(tile + i * NR, tile + i * NR + nr, c + i * n);
          }
        }
      }
    }
  }
}

/// out rows [i0, i0 + rows) × columns [j0, j0 + cols) (ld = n) = act(tile + b) rounded to the storage type,
/// from a tile with row stride ld. f32-accumulating modes only.
///
/// A row of a whole tile (cols = kNr) is stored with kNr as a constant: with a variable count GCC turns the f32
/// copy into a memcpy that it expands as `rep movsq`, which cost Zen 5 about 4 % of the 256³ f32 forward pass
/// (one per row of each tile); with the constant it is a few vector moves. The bias loop keeps its variable count:
/// with the constant GCC unrolled it into scalar adds whose row the vector copy then read back through a store
/// forwarding stall.
template <class T>
void f32acc_store_tile(const float* tile, std::size_t ld, std::size_t i0, std::size_t j0, std::size_t rows,
                       std::size_t cols, std::size_t n, const float* b, Act act, typename T::Storage* out) {
  alignas(64) float row[T::kNr];
  for (std::size_t i = 0; i < rows; ++i) {
    const float* src = tile + i * ld;  // the backward pass's products (no bias, identity): rounded as they are
    if (b != nullptr || act != Act::identity) {
      for (std::size_t j = 0; j < cols; ++j) {
        float v = src[j];  // no "+ 0" without a bias: it would turn -0 into +0
        if (b != nullptr) {
          if constexpr (requires { T::bias_add(v, v); }) {
            v = T::bias_add(v, b[j0 + j]);
          } else {
            v = v + b[j0 + j];
          }
        }
        if (act == Act::relu) v = v < 0.0f ? 0.0f : v;
        row[j] = v;
      }
      src = row;
    }
    typename T::Storage* o = out + (i0 + i) * n + j0;
    if (cols == T::kNr) {
      T::store_out(src, o, T::kNr);
    } else {
      T::store_out(src, o, cols);
    }
  }
}

/// The storage type of traits T's mode (f32, fp16 or bf16).
template <class T>
constexpr DType kStorageOf = T::kMode == Mode::f32           ? DType::f32
                             : T::kMode == Mode::bf16_f32acc ? DType::bf16
                                                             : DType::f16;

/// The finish of each tile of an f32-accumulating dense forward (gemm's `finish`): act(tile + b) rounded into d.y
/// (f32acc_store_tile), the bias widened to f32 once per call into this thread's buffer.
template <class T>
auto f32acc_forward_finish(const DenseArgs& d) {
  thread_local std::vector<float> bias;
  const float* b = nullptr;
  if (d.b != nullptr) {
    grown(bias, d.n);
    widen_to_f32(kStorageOf<T>, d.b, bias.data(), d.n);
    b = bias.data();
  }
  const std::size_t n = d.n;
  const Act act = d.act;
  auto* y = static_cast<typename T::Storage*>(d.y);
  return [=](const float* tile, std::size_t ld, std::size_t i0, std::size_t j0, std::size_t rows, std::size_t cols) {
    f32acc_store_tile<T>(tile, ld, i0, j0, rows, cols, n, b, act, y);
  };
}

// The same on a team of threads (DenseArgs::threads > 1), defined in gemm_team.hpp (included at the end).
template <class T>
unsigned gemm_threads(std::size_t m, std::size_t n, std::size_t k, unsigned threads);
template <class T>
void dense_fwd_team(const DenseArgs& d, unsigned threads);
template <class T>
void dense_bwd_team(const DenseBwdArgs& d, unsigned threads);

template <class T>
void dense_fwd(const DenseArgs& d) {
  if (const unsigned team = gemm_threads<T>(d.m, d.n, d.k, d.threads); team > 1) return dense_fwd_team<T>(d, team);
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc;
  grown(acc, d.m * d.n);
  const View<S> x{static_cast<const S*>(d.x), std::ptrdiff_t(d.k), 1};
  const View<S> w{static_cast<const S*>(d.w), std::ptrdiff_t(d.n), 1};
  if constexpr (T::kMode == Mode::f16) {
    gemm<T>(d.m, d.n, d.k, x, w, acc.data());
    T::f16_epilogue(acc.data(), d.m, d.n, static_cast<const std::uint16_t*>(d.b), d.act,
                    static_cast<std::uint16_t*>(d.y));
  } else {
    gemm<T>(d.m, d.n, d.k, x, w, acc.data(), f32acc_forward_finish<T>(d));
  }
}

/// C (m × n) = A · B, rounded to the storage type: through the f32 epilogue of each finished tile
/// (f32-accumulating modes), or through the fp16 accumulator copied out (f16 modes).
template <class T>
void gemm_store(std::size_t m, std::size_t n, std::size_t k, View<typename T::Storage> a, View<typename T::Storage> b,
                std::vector<typename T::Acc>& acc, typename T::Storage* out) {
  grown(acc, m * n);
  if constexpr (T::kMode == Mode::f16) {
    gemm<T>(m, n, k, a, b, acc.data());
    std::memcpy(out, acc.data(), m * n * sizeof(std::uint16_t));
  } else {
    gemm<T>(m, n, k, a, b, acc.data(),
            [=](const float* tile, std::size_t ld, std::size_t i0, std::size_t j0, std::size_t rows, std::size_t cols) {
              f32acc_store_tile<T>(tile, ld, i0, j0, rows, cols, n, nullptr, Act::identity, out);
            });
  }
}

template <class T>
void dense_bwd(const DenseBwdArgs& d) {
  // The larger of its two GEMMs' teams (both have m·n·k multiply-adds; their output tiles differ).
  const unsigned team = std::max(gemm_threads<T>(d.m, d.k, d.n, d.threads), gemm_threads<T>(d.k, d.n, d.m, d.threads));
  if (team > 1) {
    return dense_bwd_team<T>(d, team);
  }
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc;
  const auto* x = static_cast<const S*>(d.x);
  const auto* w = static_cast<const S*>(d.w);
  const auto* dy = static_cast<const S*>(d.dy);
  const std::ptrdiff_t m = std::ptrdiff_t(d.m), n = std::ptrdiff_t(d.n), k = std::ptrdiff_t(d.k);
  if (d.dx != nullptr) {  // dX (m×k) = dY (m×n) · Wᵀ (n×k)
    gemm_store<T>(d.m, d.k, d.n, View<S>{dy, n, 1}, View<S>{w, 1, n}, acc, static_cast<S*>(d.dx));
  }
  if (d.dw != nullptr) {  // dW (k×n) = Xᵀ (k×m) · dY (m×n)
    gemm_store<T>(d.k, d.n, d.m, View<S>{x, 1, k}, View<S>{dy, n, 1}, acc, static_cast<S*>(d.dw));
  }
  (void)m;
  if (d.db != nullptr) {
    if constexpr (T::kMode == Mode::f16) {
      T::f16_bias_grad(static_cast<const std::uint16_t*>(d.dy), d.m, d.n, 0, d.n, static_cast<std::uint16_t*>(d.db));
    } else {
      dense_bias_grad(T::kMode, kStorageOf<T>, d.dy, d.m, d.n, d.db);
    }
  }
}

}  // namespace halfmap::detail

#include "kernels/common/gemm_team.hpp"  // IWYU pragma: export
