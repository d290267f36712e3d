// Scalar steps of the dense layer shared by every ISA (compiled without ISA flags; see kernels/common/gemm.hpp).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "halfmap/cpu.hpp"
#include "halfmap/f16_model.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/gemm.hpp"    // and gemm_team.hpp
#include "kernels/common/reduce.hpp"  // arm_fadd

namespace halfmap {
namespace {

f16 relu(f16 v, Act act) {
  // x < 0 ? 0 : x: -0 and NaN pass through unchanged, as in the frameworks.
  const bool negative = (v.bits & 0x8000u) != 0 && (v.bits & 0x7FFFu) != 0 && (v.bits & 0x7FFFu) <= 0x7C00u;
  return act == Act::relu && negative ? f16{} : v;
}

const f16* as_f16(const void* p) { return static_cast<const f16*>(p); }
f16* as_f16(void* p) { return static_cast<f16*>(p); }

}  // namespace

namespace detail {

namespace {

std::size_t round_down(std::size_t v, std::size_t step) { return std::max(step, v / step * step); }

/// The tests' blocks (set_gemm_blocks_for_tests); mc == 0: none.
std::atomic<std::size_t> g_test_mc{0}, g_test_kc{0}, g_test_nc{0};

}  // namespace

GemmBlocks gemm_blocks_for(std::size_t mr, std::size_t nr, std::size_t kpack, std::size_t elem, GemmBlocks fallback) {
  const CacheSizes& c = cache_sizes();
  GemmBlocks b = fallback;
  const std::size_t kstep = std::max<std::size_t>(kpack, 8);
  if (c.l1d != 0) b.kc = std::min(fallback.kc, round_down(c.l1d * 3 / 4 / (mr * elem), kstep));
  if (c.l2 != 0) b.mc = round_down(c.l2 * 3 / 10 / (b.kc * elem), mr);
  if (c.l3_share != 0) b.nc = round_down(c.l3_share / 2 / (b.kc * elem), nr);
  return b;
}

GemmBlocks gemm_blocks_override(GemmBlocks blocks, std::size_t mr, std::size_t nr, std::size_t kpack) {
  const std::size_t mc = g_test_mc.load(std::memory_order_relaxed);
  if (mc == 0) return blocks;
  return {round_down(mc, mr), round_down(g_test_kc.load(std::memory_order_relaxed), kpack),
          round_down(g_test_nc.load(std::memory_order_relaxed), nr)};
}

}  // namespace detail

void set_gemm_blocks_for_tests(std::size_t mc, std::size_t kc, std::size_t nc) {
  detail::g_test_kc.store(kc, std::memory_order_relaxed);
  detail::g_test_nc.store(nc, std::memory_order_relaxed);
  detail::g_test_mc.store(kc == 0 || nc == 0 ? 0 : mc, std::memory_order_relaxed);
}

namespace detail {

void f16_dense_epilogue(const std::uint16_t* acc, std::size_t m, std::size_t n, const std::uint16_t* b, Act act,
                        std::uint16_t* out) {
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      f16 v{acc[i * n + j]};
      if (b != nullptr) v = f16_model::add(v, f16{b[j]});
      out[i * n + j] = relu(v, act).bits;
    }
  }
}

void f32acc_f16_row_epilogue(const float* acc, std::size_t n, const std::uint16_t* b, Act act, std::uint16_t* out) {
  for (std::size_t j = 0; j < n; ++j) {
    float v = b != nullptr ? arm_fadd(acc[j], to_f32(f16{b[j]})) : acc[j];  // NaNs as FADD picks them
    if (act == Act::relu && v < 0.0f) v = 0.0f;                             // -0 and NaN pass, as relu() above
    out[j] = to_f16(v).bits;
  }
}

void dense_bias_grad(Mode mode, DType storage, const void* dy, std::size_t m, std::size_t n, void* db) {
  dense_bias_grad_cols(mode, storage, dy, m, n, 0, n, db);
}

void dense_bias_grad_cols(Mode mode, DType storage, const void* dy, std::size_t m, std::size_t n, std::size_t j0,
                          std::size_t j1, void* db) {
  if (mode == Mode::f16 || mode == Mode::f16_model) {
    for (std::size_t j = j0; j < j1; ++j) {
      f16 acc{};
      for (std::size_t i = 0; i < m; ++i) acc = f16_model::add(acc, as_f16(dy)[i * n + j]);
      as_f16(db)[j] = acc;
    }
    return;
  }
  const std::size_t cols = j1 - j0, size = dtype_size(storage);
  std::vector<float> row(cols), acc(cols, 0.0f);
  for (std::size_t i = 0; i < m; ++i) {
    const char* base = static_cast<const char*>(dy) + (i * n + j0) * size;
    widen_to_f32(storage, base, row.data(), cols);
    for (std::size_t j = 0; j < cols; ++j) acc[j] += row[j];
  }
  for (std::size_t j = 0; j < cols; ++j) {
    switch (storage) {
      case DType::f32:
        static_cast<float*>(db)[j0 + j] = acc[j];
        break;
      case DType::f16:
        static_cast<f16*>(db)[j0 + j] = to_f16(acc[j]);
        break;
      case DType::bf16:
        static_cast<bf16*>(db)[j0 + j] = to_bf16(acc[j]);
        break;
    }
  }
}

TeamGrid team_grid(std::size_t row_tiles, std::size_t col_tiles, unsigned size) {
  TeamGrid best{size, 1};
  std::size_t best_cost = SIZE_MAX;
  for (unsigned tm = size; tm >= 1; --tm) {
    if (size % tm != 0) continue;
    const unsigned tn = size / tm;
    const std::size_t cost = ((row_tiles + tm - 1) / tm) * ((col_tiles + tn - 1) / tn);
    if (cost < best_cost) best = {tm, tn}, best_cost = cost;
  }
  return best;
}

std::pair<std::size_t, std::size_t> team_share(std::size_t count, unsigned rank, unsigned size) {
  return {count * rank / size, count * (rank + 1) / size};
}

void widen_to_f32(DType t, const void* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::f32:
        dst[i] = static_cast<const float*>(src)[i];
        break;
      case DType::f16:
        dst[i] = to_f32(static_cast<const f16*>(src)[i]);
        break;
      case DType::bf16:
        dst[i] = to_f32(static_cast<const bf16*>(src)[i]);
        break;
    }
  }
}
}  // namespace detail
}  // namespace halfmap
