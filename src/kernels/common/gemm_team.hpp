// The GEMM driver of gemm.hpp on a team of threads (include/halfmap/parallel.hpp's run_team): dense_fwd and
// dense_bwd take this path when DenseArgs::threads (DenseBwdArgs::threads) allows more than one thread and the
// layer is large enough (gemm_threads). Included at the end of gemm.hpp, whose declarations it uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "halfmap/parallel.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/gemm.hpp"

namespace halfmap::detail {

// Out-of-line steps compiled without ISA flags (src/kernels/common/dense.cpp): inline functions here would be
// emitted by every ISA's object, each compiled with its own flags, and the linker would keep one for all.
/// The tm × tn split (tm · tn = size) of row_tiles × col_tiles micro-tiles with the fewest tiles in the largest
/// rectangle; among equals, the most row bands (disjoint rows of A and of the output per member).
struct TeamGrid {
  unsigned tm, tn;
};
TeamGrid team_grid(std::size_t row_tiles, std::size_t col_tiles, unsigned size);
/// [begin, end) of member `rank`'s equal share of `count` items (rows, columns) among `size`.
std::pair<std::size_t, std::size_t> team_share(std::size_t count, unsigned rank, unsigned size);

// Every output micro-tile is computed exactly as gemm() computes it: the same packed panels, the same k blocks in
// the same order, the same kernel calls, the same epilogue. Only which thread computes which tile changes, so a
// multi-threaded result is bit-identical to the single-threaded one. Per jc block × k block: the members pack
// the shared B panel together (each a contiguous run of its micro-panels), wait at a barrier, then each computes
// its own rectangle of whole micro-tiles, packing the A rows of that rectangle into its own thread_local buffer
// (allocated, so first touched, by the thread that reads it: NUMA-local), and waits again before B is repacked.
// The rectangles form a tm × tn grid (team_grid); rows are split first, so that members write disjoint rows of
// the output and pack disjoint rows of A, and columns only when the rows run out. Written by nobody else, a
// member's rows share at most the cache line at each end of its column range with a neighbour (NR columns of
// f32 are 64 bytes or more on every ISA); nothing a member writes per tile lands on another member's lines.

/// Multiply-adds below which one more thread costs more (waking it, a barrier per k block) than it saves.
inline constexpr double kTeamMinMacsPerThread = double(1 << 18);

/// How many threads gemm_team uses for an m × n × k GEMM when `threads` are allowed: at most one per micro-tile
/// of the output's first jc block and one per kTeamMinMacsPerThread multiply-adds; 1 means gemm() itself.
template <class T>
unsigned gemm_threads(std::size_t m, std::size_t n, std::size_t k, unsigned threads) {
  if (threads <= 1 || m == 0 || n == 0 || k == 0) return 1;
  const std::size_t tiles = ((m + T::kMr - 1) / T::kMr) * ((std::min(n, gemm_blocks<T>().nc) + T::kNr - 1) / T::kNr);
  const double macs = double(m) * double(n) * double(k);
  const double by_work = std::max(1.0, macs / kTeamMinMacsPerThread);
  return unsigned(std::min({double(threads), double(tiles), by_work}));
}

/// Member `team.rank()`'s share of gemm(m, n, k, a, b, acc, finish): called by every member of the team with the
/// same arguments. `bpack` is the shared B panel, room for ceil(min(n, nc) / NR) · NR × ceil(min(k, kc) / KP) · KP
/// packed values (gemm_team_bpack_size). Ends with a barrier: on return every tile of acc (or every finish call)
/// of every member is done.
template <class T, class Finish = std::nullptr_t>
void gemm_team(Team& team, std::size_t m, std::size_t n, std::size_t k, View<typename T::Storage> a,
               View<typename T::Storage> b, typename T::Acc* acc, Finish finish, typename T::Packed* bpack) {
  using Packed = typename T::Packed;
  using Acc = typename T::Acc;
  constexpr std::size_t MR = T::kMr, NR = T::kNr, KP = T::kKPack;
  constexpr bool kFinish = !std::is_same_v<Finish, std::nullptr_t>;
  const GemmBlocks blk = gemm_blocks<T>();  // whole micro-tiles (gemm_blocks_for)
  alignas(64) Acc tile[MR * NR];
  const View<typename T::Storage> bt{b.data, b.cs, b.rs};
  thread_local std::vector<Packed> apack_buf, line;
  const unsigned rank = team.rank(), size = team.size();
  const std::size_t row_tiles = (m + MR - 1) / MR;
  for (std::size_t jc = 0; jc < n; jc += blk.nc) {
    const std::size_t nc = std::min(blk.nc, n - jc);
    const std::size_t col_tiles = (nc + NR - 1) / NR;
    const TeamGrid grid = team_grid(row_tiles, col_tiles, size);
    const std::size_t ti = rank / grid.tn, tj = rank % grid.tn;
    const std::size_t i_begin = row_tiles * ti / grid.tm * MR;
    const std::size_t i_end = std::min(m, row_tiles * (ti + 1) / grid.tm * MR);
    const std::size_t j_begin = col_tiles * tj / grid.tn * NR;
    const std::size_t j_end = std::min(nc, col_tiles * (tj + 1) / grid.tn * NR);
    const std::size_t p_begin = col_tiles * rank / size, p_end = col_tiles * (rank + 1) / size;  // B panels packed
    for (std::size_t pc = 0; pc < k; pc += blk.kc) {
      const std::size_t kc = std::min(blk.kc, k - pc);
      const std::size_t groups = (kc + KP - 1) / KP;
      if (p_end > p_begin) {
        pack_panels<T, NR>(bt, jc + p_begin * NR, std::min(nc, p_end * NR) - p_begin * NR, pc, kc,
                           bpack + p_begin * NR * groups * KP, line);
      }
      team.barrier();
      const bool accumulate = pc > 0;
      const bool last = pc + kc == k;
      for (std::size_t ic = i_begin; ic < i_end; ic += blk.mc) {
        const std::size_t mc = std::min(blk.mc, i_end - ic);
        Packed* const apack = aligned_scratch(apack_buf, ((mc + MR - 1) / MR) * MR * groups * KP);
        pack_panels<T, MR>(a, ic, mc, pc, kc, apack, line);
        for (std::size_t jr = j_begin; jr < j_end; jr += NR) {
          const std::size_t nr = std::min(NR, nc - jr);
          const Packed* bp = bpack + (jr / NR) * NR * groups * KP;
          for (std::size_t ir = 0; ir < mc; ir += MR) {
            const std::size_t mr = std::min(MR, mc - ir);
            const Packed* ap = apack + (ir / MR) * MR * groups * KP;
            Acc* c = acc + (ic + ir) * n + jc + jr;
            if (!(kFinish && last) && mr == MR && nr == NR) {
              T::kernel(groups, ap, bp, c, n, accumulate);
              continue;
            }
            if (accumulate) {
              for (std::size_t i = 0; i < mr; ++i) std::copy(c + i * n, c + i * n + nr, tile + i * NR);
            }
            T::kernel(groups, ap, bp, tile, NR, accumulate);
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
      team.barrier();  // B is repacked, or the next phase reads acc, only when every member is done
    }
  }
}

/// Packed values gemm_team's shared B panel needs for an m × n × k GEMM.
template <class T>
std::size_t gemm_team_bpack_size(std::size_t n, std::size_t k) {
  const GemmBlocks blk = gemm_blocks<T>();
  const std::size_t groups = (std::min(k, blk.kc) + T::kKPack - 1) / T::kKPack;
  return ((std::min(n, blk.nc) + T::kNr - 1) / T::kNr) * T::kNr * groups * T::kKPack;
}

/// dense_fwd on a team of `threads` (from gemm_threads): bit-identical to the single-threaded path below, whose
/// steps it splits: gemm_team, and the fp16 epilogue (f16 modes) by rows, each member its share.
template <class T>
void dense_fwd_team(const DenseArgs& d, unsigned threads) {
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc;
  thread_local std::vector<typename T::Packed> bpack_buf;
  grown(acc, d.m * d.n);
  // Pointers, not the thread_local vectors themselves: inside the lambdas those names would be each worker's own.
  typename T::Acc* const accp = acc.data();
  typename T::Packed* const bpack = aligned_scratch(bpack_buf, gemm_team_bpack_size<T>(d.n, d.k));
  const View<S> x{static_cast<const S*>(d.x), std::ptrdiff_t(d.k), 1};
  const View<S> w{static_cast<const S*>(d.w), std::ptrdiff_t(d.n), 1};
  S* y = static_cast<S*>(d.y);
  if constexpr (T::kMode == Mode::f16) {
    const auto* b = static_cast<const std::uint16_t*>(d.b);
    run_team(threads, [&](Team& team) {
      gemm_team<T>(team, d.m, d.n, d.k, x, w, accp, nullptr, bpack);
      const auto [r0, r1] = team_share(d.m, team.rank(), team.size());
      T::f16_epilogue(accp + r0 * d.n, r1 - r0, d.n, b, d.act, y + r0 * d.n);
    });
  } else {
    const auto finish = f32acc_forward_finish<T>(d);
    run_team(threads, [&](Team& team) { gemm_team<T>(team, d.m, d.n, d.k, x, w, accp, finish, bpack); });
  }
}

/// gemm_store's work as one member of a team (see gemm_store below): the fp16 accumulator copied out by rows.
template <class T>
void gemm_store_team(Team& team, std::size_t m, std::size_t n, std::size_t k, View<typename T::Storage> a,
                     View<typename T::Storage> b, typename T::Acc* acc, typename T::Storage* out,
                     typename T::Packed* bpack) {
  if constexpr (T::kMode == Mode::f16) {
    gemm_team<T>(team, m, n, k, a, b, acc, nullptr, bpack);
    const auto [r0, r1] = team_share(m, team.rank(), team.size());
    std::memcpy(out + r0 * n, acc + r0 * n, (r1 - r0) * n * sizeof(std::uint16_t));
  } else {
    gemm_team<T>(
        team, m, n, k, a, b, acc,
        [=](const float* tile, std::size_t ld, std::size_t i0, std::size_t j0, std::size_t rows, std::size_t cols) {
          f32acc_store_tile<T>(tile, ld, i0, j0, rows, cols, n, nullptr, Act::identity, out);
        },
        bpack);
  }
}

/// dense_bwd on a team of `threads`: dX's GEMM, then dW's (each split over the whole team, each ending with a
/// barrier, so they may share the B panel), then db by columns.
template <class T>
void dense_bwd_team(const DenseBwdArgs& d, unsigned threads) {
  using S = typename T::Storage;
  thread_local std::vector<typename T::Acc> acc_dx, acc_dw;
  thread_local std::vector<typename T::Packed> bpack_buf;
  const auto* x = static_cast<const S*>(d.x);
  const auto* w = static_cast<const S*>(d.w);
  const auto* dy = static_cast<const S*>(d.dy);
  const std::ptrdiff_t n = std::ptrdiff_t(d.n), k = std::ptrdiff_t(d.k);
  if (d.dx != nullptr) grown(acc_dx, d.m * d.k);
  if (d.dw != nullptr) grown(acc_dw, d.k * d.n);
  typename T::Acc* const dx_acc = acc_dx.data();  // pointers: see dense_fwd_team
  typename T::Acc* const dw_acc = acc_dw.data();
  typename T::Packed* const bpack =
      aligned_scratch(bpack_buf, std::max(gemm_team_bpack_size<T>(d.k, d.n), gemm_team_bpack_size<T>(d.n, d.m)));
  run_team(threads, [&](Team& team) {
    if (d.dx != nullptr) {  // dX (m×k) = dY (m×n) · Wᵀ (n×k)
      gemm_store_team<T>(team, d.m, d.k, d.n, View<S>{dy, n, 1}, View<S>{w, 1, n}, dx_acc, static_cast<S*>(d.dx),
                         bpack);
    }
    if (d.dw != nullptr) {  // dW (k×n) = Xᵀ (k×m) · dY (m×n)
      gemm_store_team<T>(team, d.k, d.n, d.m, View<S>{x, 1, k}, View<S>{dy, n, 1}, dw_acc, static_cast<S*>(d.dw),
                         bpack);
    }
    if (d.db != nullptr) {
      const auto [j0, j1] = team_share(d.n, team.rank(), team.size());
      if constexpr (T::kMode == Mode::f16) {
        if (j1 > j0) {
          T::f16_bias_grad(static_cast<const std::uint16_t*>(d.dy), d.m, d.n, j0, j1,
                           static_cast<std::uint16_t*>(d.db));
        }
      } else if (j1 > j0) {
        dense_bias_grad_cols(T::kMode, kStorageOf<T>, d.dy, d.m, d.n, j0, j1, d.db);
      }
    }
  });
}

}  // namespace halfmap::detail
