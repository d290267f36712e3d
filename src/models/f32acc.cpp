// The fixed-order f32-accumulating model (registry.hpp's f32acc_model_*): the bit-exact reference of the kernels
// with FixedOrder::f32, i.e. the neonfhm path's FMLAL/FMLAL2.
//
// One step, from the Arm ARM's FMLAL/FMLAL2 (vector) and FPMulAddH: each 32-bit lane computes addend + op1·op2 on
// the fp16 operands unpacked exactly, rounded once to f32 with FPCR's rounding mode. An fp16 × fp16 product has at
// most 22 significant bits and a magnitude in [2^-48, 2^32), so it is exact in f32 and the one rounding is the
// sum's: fmaf(f32(op1), f32(op2), addend), which also equals f32(op1)·f32(op2) + addend in f32. Under Linux user
// mode FPCR is 0: round to nearest even, FZ = 0 (f32 subnormal addends and results kept), FZ16 = 0 (fp16 subnormal
// operands kept), DN = 0 (NaN operands propagate), and halfmap never changes it, so nothing flushes here.
// NaNs follow the pseudo-code, not the host's FMA (whose operand order a compiler may swap, and whose default NaN
// is 0xFFC00000 on x86): FPProcessNaNs3 takes the first signalling NaN in the order addend, op1, op2, else the
// first quiet one, quieted; a quiet NaN addend with inf·0 gives the default NaN 0x7FC00000, and so does any
// invalid operation (inf·0, inf - inf) without NaN operands. tests/fhm_test.cpp pins all of this against FMLAL.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace {

constexpr std::uint32_t kDefaultNaN = 0x7FC00000u;  // Arm's FPDefaultNaN for f32

bool nan32(std::uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }
bool snan32(std::uint32_t b) { return nan32(b) && (b & 0x00400000u) == 0; }
float quiet(std::uint32_t b) { return std::bit_cast<float>(b | 0x00400000u); }

/// acc + f32(a)·f32(b) as FMLAL computes it (see the top of this file).
float fmlal_step(f16 a, f16 b, float acc) {
  const std::uint32_t c = std::bit_cast<std::uint32_t>(acc);
  const std::uint32_t x = std::bit_cast<std::uint32_t>(to_f32(a)), y = std::bit_cast<std::uint32_t>(to_f32(b));
  // to_f32 keeps an fp16 NaN's quiet bit (bit 9) as f32 bit 22, so the f32 patterns tell sNaN from qNaN.
  const bool inf_zero = (is_inf(a) && (b.bits & 0x7FFFu) == 0) || ((a.bits & 0x7FFFu) == 0 && is_inf(b));
  for (std::uint32_t v : {c, x, y}) {
    if (snan32(v)) return quiet(v);
  }
  if (nan32(c)) return inf_zero ? std::bit_cast<float>(kDefaultNaN) : acc;
  for (std::uint32_t v : {x, y}) {
    if (nan32(v)) return quiet(v);
  }
  const float r = std::fma(to_f32(a), to_f32(b), acc);
  return std::isnan(r) ? std::bit_cast<float>(kDefaultNaN) : r;
}

}  // namespace

float f32acc_model_add(float a, float b) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(a), y = std::bit_cast<std::uint32_t>(b);
  if (snan32(x)) return quiet(x);
  if (snan32(y)) return quiet(y);
  if (nan32(x)) return a;
  if (nan32(y)) return b;
  const float r = a + b;
  return std::isnan(r) ? std::bit_cast<float>(kDefaultNaN) : r;
}

float f32acc_model_step(Op op, float acc, f16 x, f16 y) {
  switch (op) {
    case Op::sum:
      return fmlal_step(x, f16{0x3C00}, acc);  // FMLAL by 1.0: exact product, one rounding
    case Op::sumsq:
      return fmlal_step(x, x, acc);
    default:
      return fmlal_step(x, y, acc);
  }
}

float f32acc_model_fold(float* acc, unsigned lanes) {
  for (unsigned w = lanes / 2; w >= 1; w /= 2) {
    for (unsigned j = 0; j < w; ++j) acc[j] = f32acc_model_add(acc[j], acc[j + w]);
  }
  return lanes == 0 ? 0.0f : acc[0];
}

float f32acc_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes) {
  if (op == Op::maxabs) return to_f32(f16_model_reduce(op, x, y, n, 1, FmaKind::none));
  if (lanes == 0 || (lanes & (lanes - 1)) != 0) lanes = 1;  // the fold needs a power of two
  std::vector<float> acc(lanes, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    float& a = acc[i % lanes];
    a = f32acc_model_step(op, a, x[i], y != nullptr ? y[i] : f16{});
  }
  return to_f32(to_f16(f32acc_model_fold(acc.data(), lanes)));
}

void f32acc_model_dense_fwd(const DenseArgs& d) {
  const auto* x = static_cast<const f16*>(d.x);
  const auto* w = static_cast<const f16*>(d.w);
  const auto* b = static_cast<const f16*>(d.b);
  auto* y = static_cast<f16*>(d.y);
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < d.k; ++p) acc = fmlal_step(x[i * d.k + p], w[p * d.n + j], acc);
      if (b != nullptr) acc = f32acc_model_add(acc, to_f32(b[j]));
      if (d.act == Act::relu && acc < 0.0f) acc = 0.0f;  // x < 0 ? 0 : x: -0 and NaN pass
      y[i * d.n + j] = to_f16(acc);
    }
  }
}

void f32acc_model_dense_bwd(const DenseBwdArgs& d) {
  const auto* x = static_cast<const f16*>(d.x);
  const auto* w = static_cast<const f16*>(d.w);
  const auto* dy = static_cast<const f16*>(d.dy);
  auto inner = [](std::size_t len, auto&& term_a, auto&& term_b) {
    float acc = 0.0f;
    for (std::size_t t = 0; t < len; ++t) acc = fmlal_step(term_a(t), term_b(t), acc);
    return to_f16(acc);
  };
  for (std::size_t i = 0; d.dx != nullptr && i < d.m; ++i) {
    for (std::size_t p = 0; p < d.k; ++p) {
      static_cast<f16*>(d.dx)[i * d.k + p] = inner(
          d.n, [&](std::size_t j) { return dy[i * d.n + j]; }, [&](std::size_t j) { return w[p * d.n + j]; });
    }
  }
  for (std::size_t p = 0; d.dw != nullptr && p < d.k; ++p) {
    for (std::size_t j = 0; j < d.n; ++j) {
      static_cast<f16*>(d.dw)[p * d.n + j] = inner(
          d.m, [&](std::size_t i) { return x[i * d.k + p]; }, [&](std::size_t i) { return dy[i * d.n + j]; });
    }
  }
  for (std::size_t j = 0; d.db != nullptr && j < d.n; ++j) {
    static_cast<f16*>(d.db)[j] = inner(
        d.m, [](std::size_t) { return f16{0x3C00}; }, [&](std::size_t i) { return dy[i * d.n + j]; });
  }
}

}  // namespace halfmap
