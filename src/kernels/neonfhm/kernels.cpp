// The neonfhm kernels: f16_f32acc done with FEAT_FHM's FMLAL/FMLAL2 (neonfhm/ops.hpp), in a fixed order that the
// f32 model reproduces bit for bit (Kernel::fixed_order f32, src/models/f32acc.cpp):
//   * reductions: 4 q registers of fp16 per step feed 8 f32x4 accumulators, so term i goes to f32 lane i % 32
//     from +0 (sum: x·1.0, exact; sumsq: x·x; dot: x·y); the tail runs the same instructions on a zero-padded
//     copy (adding +0·+0 leaves a lane as it was: a lane starts at +0 and round to nearest never makes it -0);
//     then the 32 lanes are folded with f32 adds (fold_lanes's order) and rounded once to fp16;
//   * dense forward: each output accumulates its k terms in order from +0 (FMLAL by a broadcast x_mk on 8
//     columns at a time), then acc + b, act and one rounding to fp16; dense backward: the same on transposed
//     copies, so dX, dW and db each accumulate over their inner index in order from +0.
// Each step is the widening f32 FMA of the neon path's f16_f32acc kernels; what differs from them is only the
// order, which neon leaves open. max|x| is exact in any order (the neon kernel covers it); mse, softmax and xent
// are not here: their terms (p - y, exp) are f32 values, not fp16 pairs, so FMLAL does not apply. No std::
// algorithm is called: its instantiations would be inline code outside this namespace (see ops.hpp).
#include <vector>

#include "kernels/common/gemm.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/neonfhm/ops.hpp"

namespace halfmap::paths::neonfhm {
namespace {

using namespace detail;
constexpr unsigned kRegs = 4, kLanes = Fhm::kW * kRegs;
constexpr std::uint16_t kOne = 0x3C00;  // fp16 1.0

/// Each step: 4 registers of fp16 x, each lane of register r FMLAL'd with 1.0 (sum), x itself (sumsq) or y's (dot).
template <Op kOp>
float reduce(const void* x, const void* y, std::size_t n) {
  Fhm acc[kRegs];
  for (Fhm& a : acc) a = Fhm::zero();
  padded_steps<kLanes, kOp>(x, y, n, [&acc](const std::uint16_t* xs, const std::uint16_t* ys) {
    for (std::size_t r = 0; r < kRegs; ++r) {
      const float16x8_t a = Fhm::load(xs + r * Fhm::kW);
      acc[r].fmlal(a, kOp == Op::sum ? Fhm::set1(kOne) : kOp == Op::sumsq ? a : Fhm::load(ys + r * Fhm::kW));
    }
  });
  float lanes[kLanes];
  for (std::size_t r = 0; r < kRegs; ++r) acc[r].store(lanes + r * Fhm::kW);
  return f32lanes_finish(Mode::f16_f32acc, lanes, kLanes);
}

/// Y = act(X·W + b), row by row, 8 columns at a time (a zero-padded copy of W's row for the last < 8).
void dense_fwd(const DenseArgs& d) {
  const auto* x = static_cast<const std::uint16_t*>(d.x);
  const auto* w = static_cast<const std::uint16_t*>(d.w);
  const auto* b = static_cast<const std::uint16_t*>(d.b);
  auto* y = static_cast<std::uint16_t*>(d.y);
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; j += Fhm::kW) {
      const std::size_t cols = d.n - j < Fhm::kW ? d.n - j : Fhm::kW;
      Fhm acc = Fhm::zero();
      for (std::size_t p = 0; p < d.k; ++p) {
        const std::uint16_t* wr = w + p * d.n + j;
        std::uint16_t pad[Fhm::kW] = {};
        for (std::size_t t = 0; cols < Fhm::kW && t < cols; ++t) pad[t] = wr[t];
        // x first, as f32acc_model_dense_fwd's fmaf(x, w, acc): with two NaN operands the first one's propagates.
        acc.fmlal(Fhm::set1(x[i * d.k + p]), Fhm::load(cols < Fhm::kW ? pad : wr));
      }
      float out[Fhm::kW];
      acc.store(out);
      f32acc_f16_row_epilogue(out, cols, b != nullptr ? b + j : nullptr, d.act, y + i * d.n + j);
    }
  }
}

/// dX = dY·Wᵀ, dW = Xᵀ·dY, db = 1ᵀ·dY, each as dense_fwd on exact transposed copies (dX[i][p] = Σ_j
/// dY[i][j]·W[p][j] over j in order, dW[p][j] = Σ_i X[i][p]·dY[i][j] over i in order, db by FMLAL with 1.0).
void dense_bwd(const DenseBwdArgs& d) {
  auto transpose = [](const std::uint16_t* src, std::size_t rows, std::size_t cols, std::vector<std::uint16_t>& dst) {
    grown(dst, rows * cols);  // grows only (scratch.hpp): no memset of the whole copy per call
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
    }
  };
  thread_local std::vector<std::uint16_t> t;
  if (d.dx != nullptr) {
    transpose(static_cast<const std::uint16_t*>(d.w), d.k, d.n, t);  // Wᵀ: n × k
    dense_fwd({d.m, d.k, d.n, d.dy, t.data(), nullptr, d.dx, Act::identity});
  }
  if (d.dw != nullptr) {
    transpose(static_cast<const std::uint16_t*>(d.x), d.m, d.k, t);  // Xᵀ: k × m
    dense_fwd({d.k, d.n, d.m, t.data(), d.dy, nullptr, d.dw, Act::identity});
  }
  if (d.db != nullptr) {
    t.assign(d.m, kOne);
    dense_fwd({1, d.n, d.m, t.data(), d.dy, nullptr, d.db, Act::identity});
  }
}

/// The neonfhm path's traits (kernels/common/rows.hpp).
struct Traits : PathTypes<Isa::neonfhm, Tag> {};

/// f16_f32acc in FMLAL's fixed order: the reductions and the dense kernels above.
using FhmRows = FixedOrderRows<Mode::f16_f32acc, Order{.lanes = kLanes, .fixed = FixedOrder::f32}, reduce<Op::sum>,
                               reduce<Op::sumsq>, reduce<Op::dot>, dense_fwd, dense_bwd>;

}  // namespace

PathLists lists() { return detail::kPathLists<Traits, FhmRows>; }

}  // namespace halfmap::paths::neonfhm
