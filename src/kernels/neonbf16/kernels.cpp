// The neonbf16 kernels: bf16_f32acc on FEAT_BF16's BFDOT and BFMMLA (neonbf16/ops.hpp), in a fixed order that
// src/models/bfdot.cpp reproduces bit for bit (Kernel::fixed_order bfdot):
//   * reductions: 4 q registers of bf16 per step feed 4 f32x4 accumulators through BFDOT, so the pair
//     (x[2q], x[2q+1]) goes to f32 lane q % 16 from +0 (sum: times bf16 1.0, sumsq: times itself, dot: times
//     y's pair); the tail runs the same instructions on a zero-padded copy of one whole step (each padded pair
//     adds +0, which can turn a lane's -0 into +0: the model pads the same way); the 16 lanes are folded with
//     f32 adds (fold_lanes's order) and rounded once to bf16;
//   * dense forward and backward: gemm.hpp's driver with an 8 × 8 BFMMLA tile (16 accumulators of 2 × 2 f32
//     blocks), k packed in fours (kKPack = 4: a q register is two rows of four k, BFMMLA's operand), so each
//     output chains BFDotAdd over its inner-index pairs in order from +0, k block after k block (kKc is a
//     multiple of 4: only the last group is padded with zeros); then + b (f32acc_model_add), act, and one
//     rounding to nearest even bf16 (subnormals kept); db is dense_bias_grad's plain f32 sum.
// max|x| is exact in any order (the ref kernel covers it). mse, softmax and xent are not here: their terms
// (p - y, exp) are f32 values, not bf16 pairs, so BFDOT and BFMMLA do not apply. No std:: algorithm is called
// directly (see ops.hpp).
#include "kernels/common/gemm.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/neonbf16/ops.hpp"

namespace halfmap::paths::neonbf16 {
namespace {

using namespace detail;
constexpr unsigned kRegs = 4, kStep = 8 * kRegs, kLanes = 4 * kRegs;  // 32 bf16 per step, 16 f32 lanes
constexpr std::uint16_t kOne = 0x3F80;                                // bf16 1.0

/// Each step: 4 registers of bf16 x, each pair of register r BFDOT'd with 1.0 (sum), x itself (sumsq) or y's (dot).
template <Op kOp>
float reduce(const void* x, const void* y, std::size_t n) {
  float32x4_t acc[kRegs];
  for (auto& a : acc) a = vdupq_n_f32(0.0f);
  padded_steps<kStep, kOp>(x, y, n, [&acc](const std::uint16_t* xs, const std::uint16_t* ys) {
    for (std::size_t r = 0; r < kRegs; ++r) {
      const bfloat16x8_t a = load_bf16(xs + r * 8);
      acc[r] = bfdot(acc[r], a, kOp == Op::sum ? set1_bf16(kOne) : kOp == Op::sumsq ? a : load_bf16(ys + r * 8));
    }
  });
  float lanes[kLanes];
  for (std::size_t r = 0; r < kRegs; ++r) vst1q_f32(lanes + 4 * r, acc[r]);
  return f32lanes_finish(Mode::bf16_f32acc, lanes, kLanes);
}

/// gemm.hpp traits: an 8 × 8 tile of BFMMLA 2 × 2 blocks over packed groups of 4 k.
struct MmlaGemm : Bf16PanelTraits<MmlaGemm> {
  // k blocks of 512 (a multiple of 4): the 8 KiB B micro-panel and the 64-row A block (64 KiB) stay in L1/L2.
  // Not tuned on hardware (qemu only).
  static constexpr std::size_t kMr = 8, kNr = 8, kKPack = 4, kMc = 64, kKc = 512, kNc = 1024;
  /// Rounded to nearest even bf16 (the portable to_bf16's bits), 4 at a time.
  static void store_out(const float* s, std::uint16_t* d, std::size_t n) {
    std::size_t j = 0;
    for (; j + 4 <= n; j += 4) vst1_u16(d + j, bf16_round(vld1q_f32(s + j)));
    if (j < n) {
      float in[4] = {};
      std::uint16_t out[4];
      for (std::size_t t = 0; j + t < n; ++t) in[t] = s[j + t];
      vst1_u16(out, bf16_round(vld1q_f32(in)));
      for (std::size_t t = 0; j + t < n; ++t) d[j + t] = out[t];
    }
  }
  /// acc + b with FADD's NaN choice fixed (arm_fadd), whatever operand order a C++ add gets.
  static float bias_add(float acc, float b) { return arm_fadd(acc, b); }
  /// c (8 × 8, row stride ldc) (+)= Σ over `groups` of a (8 rows × 4 k) · b (4 k × 8 columns). Accumulator
  /// acc[r][q] holds rows 2r, 2r+1 × columns 2q, 2q+1 as (c[2r][2q], c[2r][2q+1], c[2r+1][2q], c[2r+1][2q+1]).
  static void kernel(std::size_t groups, const std::uint16_t* a, const std::uint16_t* b, float* c, std::size_t ldc,
                     bool accumulate) {
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const float* top = c + (2 * r) * ldc + 2 * q;
        acc[r][q] = accumulate ? vcombine_f32(vld1_f32(top), vld1_f32(top + ldc)) : vdupq_n_f32(0.0f);
      }
    }
    for (std::size_t g = 0; g < groups; ++g, a += 32, b += 32) {
      bfloat16x8_t av[4], bv[4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) av[r] = load_bf16(a + 8 * r), bv[r] = load_bf16(b + 8 * r);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) acc[r][q] = vbfmmlaq_f32(acc[r][q], av[r], bv[q]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        float* top = c + (2 * r) * ldc + 2 * q;
        vst1_f32(top, vget_low_f32(acc[r][q]));
        vst1_f32(top + ldc, vget_high_f32(acc[r][q]));
      }
    }
  }
};

/// The neonbf16 path's traits (kernels/common/rows.hpp).
struct Traits : PathTypes<Isa::neonbf16, Tag> {};

/// bf16_f32acc in BFDotAdd's fixed order: the reductions above and the dense kernels on MmlaGemm.
struct BfdotRows
    : FixedOrderRows<Mode::bf16_f32acc, Order{.lanes = kLanes, .fixed = FixedOrder::bfdot}, reduce<Op::sum>,
                     reduce<Op::sumsq>, reduce<Op::dot>, dense_fwd<MmlaGemm>, dense_bwd<MmlaGemm>> {
  using Gemm = MmlaGemm;
};

}  // namespace

PathLists lists() { return detail::kPathLists<Traits, BfdotRows>; }

}  // namespace halfmap::paths::neonbf16
