// fp8.hpp's E4M3 and E5M2: the 256 values of each decoded from their definitions, every value round-tripped, and
// to_fp8 in both overflow modes against an oracle written here from the definition (the two neighbours of |x|
// among the format's values, their midpoint exact in double, ties to the even pattern, the value past the
// largest finite as if the exponent range were unbounded). Inputs: every 97th float32 pattern (stride 4099 under
// ASan and on arm64, which runs under qemu), every pattern within ±64 of each value and each midpoint, and the
// special values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "halfmap/fp8.hpp"
#include "halfmap/half.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::kPatternStride;

struct Oracle {
  Fp8 f;
  std::vector<double> values;  // the positive finite values, pattern k at index k (0 .. max_bits)
  double next;                 // the value after the largest finite if the exponent range were unbounded

  explicit Oracle(Fp8 fmt) : f(fmt) {
    const Fp8Format F = fp8_format(f);
    for (int k = 0; k <= F.max_bits; ++k) {
      const int field = k >> F.mant_bits, mant = k & ((1 << F.mant_bits) - 1);
      values.push_back(field == 0 ? std::ldexp(mant, F.emin - F.mant_bits)
                                  : std::ldexp(1.0 + std::ldexp(mant, -F.mant_bits), field - F.bias));
    }
    // max_bits is S.e.m with m odd for E5M2 (11) and even for E4M3 (110): the next step is one ulp up.
    next = values.back() + std::ldexp(1.0, F.emax - F.mant_bits);
  }

  std::uint8_t operator()(float x, Fp8Overflow o) const {
    const Fp8Format F = fp8_format(f);
    const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    const std::uint8_t over = sign | (o == Fp8Overflow::saturate ? F.max_bits
                                      : f == Fp8::e4m3           ? F.nan_bits
                                                                 : F.inf_bits);
    if (std::isnan(x)) return sign | F.nan_bits;
    if (std::isinf(x)) return over;
    const double a = std::abs(double(x));
    if (a >= next) return over;
    // The largest value <= a, and the one after it (or `next`).
    const std::size_t i = std::size_t(std::upper_bound(values.begin(), values.end(), a) - values.begin()) - 1;
    const double lo = values[i], hi = i + 1 < values.size() ? values[i + 1] : next;
    std::size_t k = i;
    if (a > lo) {
      const double mid = (lo + hi) / 2;                      // exact: both have at most 4 significant bits
      if (a > mid || (a == mid && (i & 1) == 1)) k = i + 1;  // a tie goes to the even pattern
    }
    if (k >= values.size()) return over;
    return std::uint8_t(sign | k);
  }
};

class Fp8Test : public ::testing::TestWithParam<Fp8> {};

TEST_P(Fp8Test, DecodesEveryPatternFromItsDefinition) {
  const Fp8 f = GetParam();
  const Oracle oracle(f);
  for (int b = 0; b < 256; ++b) {
    const auto bits = std::uint8_t(b);
    const float v = from_fp8(bits, f);
    if (fp8_is_nan(bits, f)) {
      EXPECT_TRUE(std::isnan(v)) << b;
      continue;
    }
    if (fp8_is_inf(bits, f)) {
      EXPECT_EQ(v, (b & 0x80 ? -1.0f : 1.0f) * INFINITY) << b;
      continue;
    }
    EXPECT_EQ(double(v), (b & 0x80 ? -1.0 : 1.0) * oracle.values[std::size_t(b & 0x7F)]) << b;
    EXPECT_EQ(std::signbit(v), (b & 0x80) != 0) << b;
    // E5M2 is the upper byte of binary16.
    if (f == Fp8::e5m2) {
      EXPECT_EQ(v, to_f32(f16{std::uint16_t(b << 8)})) << b;
    }
  }
}

TEST(Fp8, TheFormatsAsTheSpecificationStatesThem) {
  EXPECT_EQ(from_fp8(0x7E, Fp8::e4m3), 448.0f);
  EXPECT_EQ(from_fp8(0x08, Fp8::e4m3), 0x1p-6f);
  EXPECT_EQ(from_fp8(0x01, Fp8::e4m3), 0x1p-9f);
  EXPECT_TRUE(std::isnan(from_fp8(0x7F, Fp8::e4m3)) && std::isnan(from_fp8(0xFF, Fp8::e4m3)));
  int e4m3_nans = 0, e5m2_nans = 0, e4m3_infs = 0;
  for (int b = 0; b < 256; ++b) {
    e4m3_nans += fp8_is_nan(std::uint8_t(b), Fp8::e4m3);
    e5m2_nans += fp8_is_nan(std::uint8_t(b), Fp8::e5m2);
    e4m3_infs += std::isinf(from_fp8(std::uint8_t(b), Fp8::e4m3));
  }
  EXPECT_EQ(e4m3_nans, 2);  // one per sign
  EXPECT_EQ(e5m2_nans, 6);
  EXPECT_EQ(e4m3_infs, 0);
  EXPECT_EQ(from_fp8(0x7B, Fp8::e5m2), 57344.0f);
  EXPECT_EQ(from_fp8(0x01, Fp8::e5m2), 0x1p-16f);
  EXPECT_EQ(from_fp8(0x7C, Fp8::e5m2), INFINITY);
  // The overflow boundaries: 448 + 16 ties to 448 (even); 57344 + 4096 ties up, past the largest finite.
  EXPECT_EQ(to_fp8(464.0f, Fp8::e4m3, Fp8Overflow::nonsaturating), 0x7E);
  EXPECT_EQ(to_fp8(std::nextafter(464.0f, 1e9f), Fp8::e4m3, Fp8Overflow::nonsaturating), 0x7F);
  EXPECT_EQ(to_fp8(std::nextafter(464.0f, 1e9f), Fp8::e4m3, Fp8Overflow::saturate), 0x7E);
  EXPECT_EQ(to_fp8(-1e30f, Fp8::e4m3, Fp8Overflow::saturate), 0xFE);
  EXPECT_EQ(to_fp8(std::nextafter(61440.0f, 0.0f), Fp8::e5m2, Fp8Overflow::nonsaturating), 0x7B);
  EXPECT_EQ(to_fp8(61440.0f, Fp8::e5m2, Fp8Overflow::nonsaturating), 0x7C);
  EXPECT_EQ(to_fp8(-INFINITY, Fp8::e5m2, Fp8Overflow::saturate), 0xFB);
  EXPECT_EQ(to_fp8(INFINITY, Fp8::e4m3, Fp8Overflow::nonsaturating), 0x7F);
  // Subnormals are kept and half the smallest one ties to zero; the sign of zero is kept.
  EXPECT_EQ(to_fp8(0x1p-10f, Fp8::e4m3, Fp8Overflow::saturate), 0x00);
  EXPECT_EQ(to_fp8(std::nextafter(0x1p-10f, 1.0f), Fp8::e4m3, Fp8Overflow::saturate), 0x01);
  EXPECT_EQ(to_fp8(-0.0f, Fp8::e5m2, Fp8Overflow::saturate), 0x80);
  EXPECT_EQ(to_fp8(-NAN, Fp8::e5m2, Fp8Overflow::saturate), 0xFE);
}

TEST_P(Fp8Test, EveryValueRoundTrips) {
  const Fp8 f = GetParam();
  for (int b = 0; b < 256; ++b) {
    const auto bits = std::uint8_t(b);
    if (fp8_is_nan(bits, f) || fp8_is_inf(bits, f)) continue;
    for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonsaturating})
      EXPECT_EQ(to_fp8(from_fp8(bits, f), f, o), bits) << b;
  }
}

TEST_P(Fp8Test, RoundsAsTheOracleOnStridedAndBoundaryPatterns) {
  const Fp8 f = GetParam();
  const Oracle oracle(f);
  std::vector<std::uint32_t> probes;
  // Around each value, each midpoint and the overflow threshold, both signs.
  std::vector<double> points(oracle.values.begin(), oracle.values.end());
  for (std::size_t i = 0; i < oracle.values.size(); ++i)
    points.push_back((oracle.values[i] + (i + 1 < oracle.values.size() ? oracle.values[i + 1] : oracle.next)) / 2);
  points.push_back(oracle.next);
  for (double p : points)
    for (int d = -64; d <= 64; ++d) {
      const std::uint32_t u = std::bit_cast<std::uint32_t>(float(p)) + std::uint32_t(d);
      probes.push_back(u);
      probes.push_back(u | 0x80000000u);
    }
  for (float s : {0.0f, INFINITY, NAN, 0x1p-149f, 0x1p-126f, 3.4e38f})
    for (float v : {s, -s}) probes.push_back(std::bit_cast<std::uint32_t>(v));
  std::size_t mismatches = 0;
  auto check = [&](std::uint32_t u) {
    const float x = std::bit_cast<float>(u);
    for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonsaturating}) {
      const std::uint8_t got = to_fp8(x, f, o), want = oracle(x, o);
      if (got != want && ++mismatches <= 10)
        ADD_FAILURE() << fp8_name(f) << (o == Fp8Overflow::saturate ? " sat" : " nonsat") << " 0x" << std::hex << u
                      << ": got 0x" << int(got) << ", want 0x" << int(want);
    }
  };
  for (std::uint32_t u : probes) check(u);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += kPatternStride) check(std::uint32_t(u));
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(Fp8::e4m3, Fp8::e5m2),
                         [](const auto& info) { return std::string(fp8_name(info.param)); });

// The rounding thresholds, at the ties the header's table states: E4M3's 464 ties down to 448 (even), E5M2's 61440
// up, the largest subnormal's tie up into the smallest normal (its pattern is odd), half the smallest subnormal
// down to zero. And each threshold against to_fp8 on both sides.
TEST(Fp8Thresholds, SitOnTheTies) {
  constexpr RoundingThresholds e4 = fp8_thresholds(Fp8::e4m3), e5 = fp8_thresholds(Fp8::e5m2);
  EXPECT_EQ(e4.clip_min, std::nextafter(464.0f, 1e9f));
  EXPECT_EQ(e4.flush_max, 0x1p-10f);
  EXPECT_EQ(e4.normal_min, 7.5f * 0x1p-9f);
  EXPECT_EQ(e5.clip_min, 61440.0f);
  EXPECT_EQ(e5.flush_max, 0x1p-17f);
  EXPECT_EQ(e5.normal_min, 3.5f * 0x1p-16f);
  for (Fp8 f : {Fp8::e4m3, Fp8::e5m2}) {
    const RoundingThresholds t = fp8_thresholds(f);
    const Fp8Format F = fp8_format(f);
    auto enc = [&](float y) { return to_fp8(y, f, Fp8Overflow::nonsaturating) & 0x7F; };
    EXPECT_EQ(enc(t.flush_max), 0);
    EXPECT_NE(enc(std::nextafter(t.flush_max, 1.0f)), 0);
    EXPECT_GE(enc(t.normal_min), 1 << F.mant_bits);
    EXPECT_LT(enc(std::nextafter(t.normal_min, 0.0f)), 1 << F.mant_bits);
    EXPECT_GT(enc(t.clip_min), F.max_bits);
    EXPECT_EQ(enc(std::nextafter(t.clip_min, 0.0f)), F.max_bits);
  }
}

}  // namespace
}  // namespace halfmap
