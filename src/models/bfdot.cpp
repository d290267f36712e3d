// The BFDOT/BFMMLA model (registry.hpp's bfdot_model_*): the bit-exact reference of the neonbf16 kernels
// (FixedOrder::bfdot).
//
// One step is the Arm ARM's BFDotAdd(addend, a0, a1, b0, b1) without FEAT_EBF16 (or with FPCR.EBF = 0, its reset
// value), which ignores the rest of FPCR:
//     prod   = BFAdd(BFMul(a0, b0), BFMul(a1, b1))
//     result = BFAdd(addend, prod)
// BFMul and BFAdd unpack their operands with BFUnpack, which reads a zero exponent field as zero (bf16 and f32
// subnormal inputs, the addend included, are zeros of their sign) and every NaN as a quiet NaN; any NaN operand,
// inf·0 and inf - inf give the default NaN 0x7FC00000 (no payload propagates). Otherwise the exact value is rounded
// by BFRound: a result whose exact magnitude is below 2^-126 is a zero of its sign (flushed before rounding),
// otherwise it is rounded to odd (truncated, and the last bit set if anything was cut off) to 24 bits; an exact
// magnitude of 2^128 or more is an infinity of its sign (round to odd never carries into the exponent, so that is
// the only overflow). An exact zero sum of operands that are not both zeros of one sign is +0.
// QEMU's target/arm/vec_helper.c bfdotadd computes the same with softfloat (float_round_to_odd_inf, flush to zero
// with tininess before rounding, inputs flushed, default NaN); tests/bf16_test.cpp pins this model against
// BFDOT and BFMMLA as executed.
//
// The exact sums are found without a wider type: each product of two bf16 values has at most 16 significant bits
// and lies in [2^-252, 2^256), so it is exact in f64; a sum of two f64 values is rounded to odd at 53 bits from
// its TwoSum error, and rounding to odd twice (53 bits, then 24) is rounding to odd once, because 53 > 24.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace {

constexpr std::uint32_t kDefaultNaN = 0x7FC00000u;

enum class Kind { zero, normal, inf, nan };

/// BFUnpack of an f32 pattern (a bf16 operand is its top half): zero exponent is zero, all NaNs alike.
struct Unpacked {
  Kind kind;
  bool neg;
  double value;  // exact for normal; 0 otherwise
};
Unpacked unpack(std::uint32_t b) {
  const bool neg = (b >> 31) != 0;
  const std::uint32_t e = (b >> 23) & 0xFFu, f = b & 0x7FFFFFu;
  if (e == 0) return {Kind::zero, neg, 0.0};
  if (e == 0xFFu) return {f == 0 ? Kind::inf : Kind::nan, neg, 0.0};
  return {Kind::normal, neg, double(std::bit_cast<float>(b))};
}

std::uint32_t zero_bits(bool neg) { return neg ? 0x80000000u : 0u; }
std::uint32_t inf_bits(bool neg) { return neg ? 0xFF800000u : 0x7F800000u; }

/// BFRound of an exact value v != 0 given as v = hi (an f64 already rounded to odd at 53 bits, see round_odd_53).
std::uint32_t bf_round(double v) {
  const bool neg = std::signbit(v);
  const double a = std::fabs(v);
  if (a < 0x1p-126) return zero_bits(neg);
  if (a >= 0x1p128) return inf_bits(neg);
  const std::uint64_t u = std::bit_cast<std::uint64_t>(a);
  const std::uint32_t exp = std::uint32_t(u >> 52) - 1023 + 127;  // 1 .. 254: normal in f32
  std::uint32_t mant = std::uint32_t((u >> 29) & 0x7FFFFFu);
  if ((u & ((std::uint64_t{1} << 29) - 1)) != 0) mant |= 1u;  // round to odd
  return zero_bits(neg) | exp << 23 | mant;
}

/// x + y rounded to odd at f64's 53 bits (x, y finite; the exact sum nonzero, of magnitude well inside f64).
double round_odd_53(double x, double y) {
  const double s = x + y;
  // TwoSum: s + err == x + y exactly.
  const double yv = s - x;
  const double err = (x - (s - yv)) + (y - yv);
  if (err == 0.0) return s;
  // The exact sum lies strictly between s and its neighbour towards err; the odd one of the two is the result.
  const double other = std::nextafter(s, err > 0 ? INFINITY : -INFINITY);
  return (std::bit_cast<std::uint64_t>(s) & 1u) != 0 ? s : other;
}

/// BFMul: the product of two bf16 operands widened to f32 patterns.
std::uint32_t bf_mul(std::uint32_t x, std::uint32_t y) {
  const Unpacked a = unpack(x), b = unpack(y);
  if (a.kind == Kind::nan || b.kind == Kind::nan) return kDefaultNaN;
  const bool neg = a.neg != b.neg;
  if ((a.kind == Kind::inf && b.kind == Kind::zero) || (a.kind == Kind::zero && b.kind == Kind::inf)) {
    return kDefaultNaN;
  }
  if (a.kind == Kind::inf || b.kind == Kind::inf) return inf_bits(neg);
  if (a.kind == Kind::zero || b.kind == Kind::zero) return zero_bits(neg);
  return bf_round(a.value * b.value);  // exact in f64: 8 × 8 significant bits
}

/// BFAdd of two f32 patterns.
std::uint32_t bf_add(std::uint32_t x, std::uint32_t y) {
  const Unpacked a = unpack(x), b = unpack(y);
  if (a.kind == Kind::nan || b.kind == Kind::nan) return kDefaultNaN;
  const bool ainf = a.kind == Kind::inf, binf = b.kind == Kind::inf;
  if (ainf && binf && a.neg != b.neg) return kDefaultNaN;
  if (ainf) return inf_bits(a.neg);
  if (binf) return inf_bits(b.neg);
  if (a.kind == Kind::zero && b.kind == Kind::zero && a.neg == b.neg) return zero_bits(a.neg);
  const double sum = round_odd_53(a.value, b.value);
  if (sum == 0.0) return 0u;  // an exact zero: +0
  return bf_round(sum);
}

std::uint32_t widen(bf16 v) { return std::uint32_t(v.bits) << 16; }

}  // namespace

float bfdot_model_step(float addend, bf16 a0, bf16 a1, bf16 b0, bf16 b1) {
  const std::uint32_t prod = bf_add(bf_mul(widen(a0), widen(b0)), bf_mul(widen(a1), widen(b1)));
  return std::bit_cast<float>(bf_add(std::bit_cast<std::uint32_t>(addend), prod));
}

float bfdot_model_reduce(Op op, const bf16* x, const bf16* y, std::size_t n, unsigned lanes) {
  if (op == Op::maxabs) {  // exact in any order: the largest |x| (bits with the sign cleared order them)
    std::uint16_t key = 0;
    for (std::size_t i = 0; i < n; ++i) key = std::uint16_t(x[i].bits & 0x7FFFu) > key ? x[i].bits & 0x7FFFu : key;
    return to_f32(bf16{key});
  }
  if (lanes == 0 || (lanes & (lanes - 1)) != 0) lanes = 1;  // the fold needs a power of two
  const std::size_t block = 2 * std::size_t(lanes);
  const std::size_t padded = (n + block - 1) / block * block;
  std::vector<float> acc(lanes, 0.0f);
  const bf16 one{0x3F80}, zero{0};
  auto at = [&](const bf16* v, std::size_t i) { return i < n ? v[i] : zero; };
  for (std::size_t q = 0; 2 * q < padded; ++q) {
    const std::size_t i = 2 * q;
    const bf16 x0 = at(x, i), x1 = at(x, i + 1);
    bf16 y0 = one, y1 = one;  // sum: x·1
    if (op == Op::sumsq) y0 = x0, y1 = x1;
    if (op == Op::dot) y0 = at(y, i), y1 = at(y, i + 1);
    float& a = acc[q % lanes];
    a = bfdot_model_step(a, x0, x1, y0, y1);
  }
  return to_f32(to_bf16(f32acc_model_fold(acc.data(), lanes)));
}

namespace {

/// Σ over the inner index t < len (padded with zeros to a multiple of 4, as BFMMLA takes 4 at a time) of
/// a(t)·b(t), by BFDotAdd on the pairs (2q, 2q + 1) in order from +0.
template <class A, class B>
float chain(std::size_t len, A&& a, B&& b) {
  const std::size_t padded = (len + 3) / 4 * 4;
  const bf16 zero{0};
  float acc = 0.0f;
  for (std::size_t t = 0; t < padded; t += 2) {
    const bf16 a0 = t < len ? a(t) : zero, a1 = t + 1 < len ? a(t + 1) : zero;
    const bf16 b0 = t < len ? b(t) : zero, b1 = t + 1 < len ? b(t + 1) : zero;
    acc = bfdot_model_step(acc, a0, a1, b0, b1);
  }
  return acc;
}

}  // namespace

void bfdot_model_dense_fwd(const DenseArgs& d) {
  const auto* x = static_cast<const bf16*>(d.x);
  const auto* w = static_cast<const bf16*>(d.w);
  const auto* b = static_cast<const bf16*>(d.b);
  auto* y = static_cast<bf16*>(d.y);
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; ++j) {
      float acc = chain(
          d.k, [&](std::size_t p) { return x[i * d.k + p]; }, [&](std::size_t p) { return w[p * d.n + j]; });
      if (b != nullptr) acc = f32acc_model_add(acc, to_f32(b[j]));
      if (d.act == Act::relu && acc < 0.0f) acc = 0.0f;  // x < 0 ? 0 : x: -0 and NaN pass
      y[i * d.n + j] = to_bf16(acc);
    }
  }
}

void bfdot_model_dense_bwd(const DenseBwdArgs& d) {
  const auto* x = static_cast<const bf16*>(d.x);
  const auto* w = static_cast<const bf16*>(d.w);
  const auto* dy = static_cast<const bf16*>(d.dy);
  for (std::size_t i = 0; d.dx != nullptr && i < d.m; ++i) {
    for (std::size_t p = 0; p < d.k; ++p) {
      static_cast<bf16*>(d.dx)[i * d.k + p] = to_bf16(chain(
          d.n, [&](std::size_t j) { return dy[i * d.n + j]; }, [&](std::size_t j) { return w[p * d.n + j]; }));
    }
  }
  for (std::size_t p = 0; d.dw != nullptr && p < d.k; ++p) {
    for (std::size_t j = 0; j < d.n; ++j) {
      static_cast<bf16*>(d.dw)[p * d.n + j] = to_bf16(chain(
          d.m, [&](std::size_t i) { return x[i * d.k + p]; }, [&](std::size_t i) { return dy[i * d.n + j]; }));
    }
  }
  for (std::size_t j = 0; d.db != nullptr && j < d.n; ++j) {  // plain f32 adds in row order (dense_bias_grad)
    float acc = 0.0f;
    for (std::size_t i = 0; i < d.m; ++i) acc = f32acc_model_add(acc, to_f32(dy[i * d.n + j]));
    static_cast<bf16*>(d.db)[j] = to_bf16(acc);
  }
}

}  // namespace halfmap
