// mx.hpp's microscaling blocks: the FP6 and FP4 element types decoded from their definitions, their rounding
// (nearest even, subnormals kept, saturating) against an oracle written here on strided and boundary float32
// patterns, the FP8 elements as fp8.hpp's saturating conversion, and the block rule: the shared scale
// 2^(⌊log2 amax⌋ − emax), the clipping of the top binade it implies, and the NaN, zero and tiny blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "halfmap/mx.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::kPatternStride;

/// The element type's positive values from the definition, encoding k at index k.
std::vector<double> values_of(MxElem t) {
  const MxElemFormat F = mx_format(t);
  std::vector<double> v;
  for (std::uint32_t k = 0; k <= F.max_bits; ++k) {
    const int field = int(k >> F.mant_bits), mant = int(k & ((1u << F.mant_bits) - 1));
    v.push_back(field == 0 ? std::ldexp(mant, F.emin - F.mant_bits)
                           : std::ldexp(1.0 + std::ldexp(mant, -F.mant_bits), field - F.bias));
  }
  return v;
}

/// Round to nearest even among the values, saturating; NaN -> +0 (the block's scale carries it).
std::uint8_t oracle(float x, MxElem t, const std::vector<double>& v) {
  const MxElemFormat F = mx_format(t);
  if (std::isnan(x)) return 0;
  const std::uint8_t sign = std::signbit(x) ? std::uint8_t(1u << (F.bits - 1)) : 0;
  const double a = std::abs(double(x));
  if (a >= v.back()) return sign | std::uint8_t(F.max_bits);
  const std::size_t i = std::size_t(std::upper_bound(v.begin(), v.end(), a) - v.begin()) - 1;
  std::size_t k = i;
  if (a > v[i]) {
    const double mid = (v[i] + v[i + 1]) / 2;
    if (a > mid || (a == mid && (i & 1) == 1)) k = i + 1;
  }
  return sign | std::uint8_t(k);
}

class MxElemTest : public ::testing::TestWithParam<MxElem> {};

TEST_P(MxElemTest, DecodesEveryEncodingFromItsDefinition) {
  const MxElem t = GetParam();
  const MxElemFormat F = mx_format(t);
  const std::vector<double> v = values_of(t);
  EXPECT_EQ(v.back(), double(F.max));
  if (t == MxElem::e4m3 || t == MxElem::e5m2) return;  // fp8_test decodes every FP8 pattern
  for (std::uint32_t k = 0; k < (1u << F.bits); ++k) {
    const float got = mx_elem_value(std::uint8_t(k), t);
    const double want = (k >> (F.bits - 1) ? -1.0 : 1.0) * v[k & F.max_bits];
    EXPECT_EQ(double(got), want) << k;
  }
}

TEST(MxElem, TheSpecificationsValues) {
  std::vector<float> e2m1;
  for (std::uint8_t k = 0; k < 8; ++k) e2m1.push_back(mx_elem_value(k, MxElem::e2m1));
  EXPECT_EQ(e2m1, (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 3, 4, 6}));
  EXPECT_EQ(mx_elem_value(0x1F, MxElem::e3m2), 28.0f);
  EXPECT_EQ(mx_elem_value(0x01, MxElem::e3m2), 0.0625f);
  EXPECT_EQ(mx_elem_value(0x1F, MxElem::e2m3), 7.5f);
  EXPECT_EQ(mx_elem_value(0x01, MxElem::e2m3), 0.125f);
  EXPECT_EQ(mx_elem_value(0x20, MxElem::e2m3), -0.0f);
  EXPECT_EQ(e8m0_value(127), 1.0f);
  EXPECT_EQ(e8m0_value(0), 0x1p-127f);
  EXPECT_EQ(e8m0_value(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(e8m0_value(kE8M0Nan)));
}

TEST_P(MxElemTest, RoundsAsTheOracleOnStridedAndBoundaryPatterns) {
  const MxElem t = GetParam();
  const std::vector<double> v = values_of(t);
  std::vector<double> points(v);
  for (std::size_t i = 0; i + 1 < v.size(); ++i) points.push_back((v[i] + v[i + 1]) / 2);
  std::size_t mismatches = 0;
  auto check = [&](std::uint32_t u) {
    const float x = std::bit_cast<float>(u);
    const std::uint8_t got = mx_round_elem(x, t);
    // The FP8 elements are fp8.hpp's saturating conversion (but for a NaN, which the scale carries).
    const std::uint8_t want = t == MxElem::e4m3 && !std::isnan(x)   ? to_fp8(x, Fp8::e4m3, Fp8Overflow::saturate)
                              : t == MxElem::e5m2 && !std::isnan(x) ? to_fp8(x, Fp8::e5m2, Fp8Overflow::saturate)
                                                                    : oracle(x, t, v);
    if (got != want && ++mismatches <= 10)
      ADD_FAILURE() << mx_name(t) << " 0x" << std::hex << u << ": got 0x" << int(got) << ", want 0x" << int(want);
  };
  for (double p : points)
    for (int d = -64; d <= 64; ++d) {
      const std::uint32_t u = std::bit_cast<std::uint32_t>(float(p)) + std::uint32_t(d);
      check(u);
      check(u | 0x80000000u);
    }
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += kPatternStride) check(std::uint32_t(u));
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Types, MxElemTest,
                         ::testing::Values(MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1),
                         [](const auto& info) { return std::string(mx_name(info.param)); });

std::array<float, kMxBlock> block_of(float first, float rest) {
  std::array<float, kMxBlock> b;
  b.fill(rest);
  b[0] = first;
  return b;
}

TEST(MxBlock, TheScalePutsTheMaximumInTheTopBinadeAndClipsWhatItsLargestDoesNotCover) {
  // amax 1: X = 2^(0 − emax); 1 is stored as 2^emax exactly.
  for (MxElem t : {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
    const MxBlock b = mx_quantize(block_of(1.0f, 0.25f), t);
    EXPECT_EQ(int(b.scale), 127 - mx_format(t).emax) << mx_name(t);
    EXPECT_EQ(mx_value(b, 0, t), 1.0f) << mx_name(t);
    EXPECT_EQ(mx_value(b, 1, t), 0.25f) << mx_name(t);
  }
  // amax 1.99: the same scale, and 1.99·2^emax is past each type's largest (1.75, 1.75, 1.75, 1.875, 1.5 ·2^emax).
  const float clipped[] = {1.75f, 1.75f, 1.75f, 1.875f, 1.5f};
  int i = 0;
  for (MxElem t : {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
    const MxBlock b = mx_quantize(block_of(-1.99f, 0.0f), t);
    EXPECT_EQ(mx_value(b, 0, t), -clipped[i++]) << mx_name(t);
  }
}

TEST(MxBlock, NanZeroAndTinyBlocks) {
  const MxBlock nan = mx_quantize(block_of(1.0f, NAN), MxElem::e2m1);
  EXPECT_EQ(nan.scale, kE8M0Nan);
  EXPECT_TRUE(std::isnan(mx_value(nan, 0, MxElem::e2m1)));
  EXPECT_EQ(mx_quantize(block_of(INFINITY, 1.0f), MxElem::e4m3).scale, kE8M0Nan);
  const MxBlock zero = mx_quantize(block_of(0.0f, 0.0f), MxElem::e3m2);
  EXPECT_EQ(zero.scale, 0);
  EXPECT_EQ(mx_value(zero, 5, MxElem::e3m2), 0.0f);
  // amax 2^-140 wants 2^(-140 - 8); the scale stops at 2^-127 and the element 2^-13 is below E4M3's 2^-9.
  const MxBlock tiny = mx_quantize(block_of(0x1p-140f, 0.0f), MxElem::e4m3);
  EXPECT_EQ(tiny.scale, 0);
  EXPECT_EQ(mx_value(tiny, 0, MxElem::e4m3), 0.0f);
}

TEST(MxBlock, EveryElementIsItsQuotientRoundedOnRandomBlocks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-60, 60);
  for (MxElem t : {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
    const std::vector<double> v = values_of(t);
    for (int trial = 0; trial < 2000; ++trial) {
      std::array<float, kMxBlock> x;
      const int s = e(rng);
      for (float& y : x) y = std::ldexp(n(rng), s);
      const MxBlock b = mx_quantize(x, t);
      float amax = 0;
      for (float y : x) amax = std::max(amax, std::abs(y));
      const int shared = int(std::floor(std::log2(double(amax)))) - mx_format(t).emax;
      ASSERT_EQ(int(b.scale), shared + 127);
      for (std::size_t k = 0; k < kMxBlock; ++k) {
        const float q = std::ldexp(x[k], -shared);
        const std::uint8_t want = t == MxElem::e4m3   ? to_fp8(q, Fp8::e4m3, Fp8Overflow::saturate)
                                  : t == MxElem::e5m2 ? to_fp8(q, Fp8::e5m2, Fp8Overflow::saturate)
                                                      : oracle(q, t, v);
        ASSERT_EQ(b.elems[k], want) << mx_name(t) << " trial " << trial << " element " << k;
      }
    }
  }
}

// The shared exponent read from amax's bits, against std::ilogb (normals, float32 subnormals, the clamp's both
// ends and zero), and 2^-e from its bits against std::ldexp for every exponent.
TEST(MxSharedExp, FromBitsMatchesIlogbAndLdexp) {
  for (MxElem t : {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
    const int emax = mx_format(t).emax;
    for (std::uint32_t bits : {0x00000001u, 0x00000003u, 0x00400000u, 0x007FFFFFu, 0x00800000u, 0x3F800000u,
                               0x3FFFFFFFu, 0x7F7FFFFFu, 0x0A000000u, 0x75000000u}) {
      const float amax = std::bit_cast<float>(bits);
      EXPECT_EQ(mx_shared_exp_of(amax, t), std::clamp(std::ilogb(amax) - emax, -127, 127)) << test::hex32(bits);
    }
    EXPECT_EQ(mx_shared_exp_of(0.0f, t), -127);
  }
  for (int e = -127; e <= 127; ++e) EXPECT_EQ(mx_unscale(e), std::ldexp(1.0f, -e)) << e;
}

}  // namespace
}  // namespace halfmap
