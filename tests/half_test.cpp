// The fp16/bf16 core of half.hpp: exhaustive round trips over all 65536 patterns, widening checked against an
// independent decoder, the boundary patterns of docs/numerics.md as named tests that print hex, and f64 -> fp16
// rounding checked against an independent correctly rounding reference (including the double-rounding traps).
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/storage.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::decode_bf16;
using test::decode_f16;
using test::hex;
using test::hex16;
using test::hex32;
using test::reference_to_f16;

float f32_from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint16_t f16_bits(std::uint32_t f32_bits) { return to_f16(f32_from_bits(f32_bits)).bits; }
std::uint16_t bf16_bits(std::uint32_t f32_bits) { return to_bf16(f32_from_bits(f32_bits)).bits; }

// ---- exhaustive round trips ------------------------------------------------------------------------------------

// Every fp16 pattern survives f16 -> f32 -> f16 unchanged, except that a signalling NaN comes back quiet: the
// narrowing sets the quiet bit (0x0200) and keeps sign and payload, as F16C vcvtps2ph and arm64 fcvt do.
TEST(HalfRoundTrip, AllF16ThroughF32AreIdentityAndSignallingNaNsBecomeQuiet) {
  int quieted = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const f16 h{std::uint16_t(b)};
    const f16 back = to_f16(to_f32(h));
    if (is_nan(h)) {
      const bool signalling = (b & 0x0200u) == 0;
      quieted += signalling;
      EXPECT_EQ(back.bits, std::uint16_t(b | 0x0200u)) << hex16(std::uint16_t(b)) << " -> " << hex(back);
    } else {
      EXPECT_EQ(back.bits, b) << hex16(std::uint16_t(b)) << " -> " << hex(back);
    }
  }
  EXPECT_EQ(quieted, 2 * 511);  // 0x7C01..0x7DFF and their negatives
}

TEST(HalfRoundTrip, AllF16ThroughF64AreIdentityAndSignallingNaNsBecomeQuiet) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const f16 h{std::uint16_t(b)};
    const f16 back = to_f16(to_f64(h));
    const std::uint16_t want = is_nan(h) ? std::uint16_t(b | 0x0200u) : std::uint16_t(b);
    EXPECT_EQ(back.bits, want) << hex16(std::uint16_t(b)) << " -> " << hex(back);
  }
}

TEST(HalfRoundTrip, AllBf16ThroughF32AreIdentityAndSignallingNaNsBecomeQuiet) {
  int nans = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const bf16 h{std::uint16_t(b)};
    const bf16 back = to_bf16(to_f32(h));
    if (is_nan(h)) {
      ++nans;
      EXPECT_EQ(back.bits, std::uint16_t(b | 0x0040u)) << hex16(std::uint16_t(b)) << " -> " << hex(back);
    } else {
      EXPECT_EQ(back.bits, b) << hex16(std::uint16_t(b)) << " -> " << hex(back);
    }
  }
  EXPECT_EQ(nans, 2 * 127);
}

// Widening is exact: every non-NaN fp16 pattern widens to the value the IEEE definition gives, in f32 and in
// f64 alike; NaNs widen to NaNs with sign and payload kept, bit for bit (to_f32 keeps a signalling NaN
// signalling: F16C vcvtph2ps instead sets the quiet bit, see exhaustive_conversion_test).
TEST(HalfWiden, AllF16ToF32AndF64AreExact) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const f16 h{std::uint16_t(b)};
    const double want = decode_f16(h.bits);
    const float f = to_f32(h);
    const double d = to_f64(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f) && std::isnan(d)) << hex16(h.bits);
      EXPECT_EQ(test::bits_of(f), (std::uint32_t(b & 0x8000u) << 16) | 0x7F800000u | ((b & 0x3FFu) << 13))
          << hex16(h.bits) << " -> " << hex(f);
      EXPECT_EQ(std::signbit(d), (b & 0x8000u) != 0) << hex16(h.bits);
      EXPECT_TRUE(is_nan(h));
    } else {
      EXPECT_EQ(double(f), want) << hex16(h.bits) << " -> " << hex(f);
      EXPECT_EQ(std::bit_cast<std::uint64_t>(d), std::bit_cast<std::uint64_t>(want))
          << hex16(h.bits) << " -> " << hex(d);
      EXPECT_EQ(std::signbit(f), (b & 0x8000u) != 0) << hex16(h.bits);  // -0 stays -0
      EXPECT_FALSE(is_nan(h));
      EXPECT_EQ(is_inf(h), std::isinf(want)) << hex16(h.bits);
      EXPECT_EQ(is_finite(h), std::isfinite(want)) << hex16(h.bits);
      EXPECT_EQ(is_subnormal(h), want != 0 && std::fabs(want) < 0x1p-14) << hex16(h.bits);
    }
  }
}

TEST(HalfWiden, AllBf16ToF32AreExact) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = to_f32(bf16{std::uint16_t(b)});
    const double want = decode_bf16(std::uint16_t(b));
    if (std::isnan(want)) {
      EXPECT_EQ(test::bits_of(f), b << 16) << hex16(std::uint16_t(b));
    } else {
      EXPECT_EQ(double(f), want) << hex16(std::uint16_t(b)) << " -> " << hex(f);
      EXPECT_EQ(test::bits_of(f), b << 16) << hex16(std::uint16_t(b));
    }
  }
}

// ---- f32 -> fp16 against an independent reference, and f64 against f32 ----------------------------------------

// A strided sample of all f32 patterns (stride 4099, a prime, so every residue of the low bits is visited) rounded
// by to_f16(float), by to_f16(double) of the same value (exact in double) and by the independent reference. The
// exhaustive test compares all 2^32 patterns with the hardware.
TEST(HalfNarrow, StridedF32PatternsMatchReferenceAndDoublePath) {
  constexpr std::uint64_t kStride = 4099;
  std::uint64_t checked = 0;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += kStride) {
    const float f = f32_from_bits(std::uint32_t(u));
    const f16 a = to_f16(f);
    const f16 b = to_f16(double(f));
    ASSERT_EQ(a.bits, b.bits) << hex32(std::uint32_t(u)) << ": to_f16(float) " << hex(a) << ", to_f16(double) "
                              << hex(b);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan(a)) << hex32(std::uint32_t(u));
    } else {
      ASSERT_EQ(a.bits, reference_to_f16(f)) << hex32(std::uint32_t(u)) << " -> " << hex(a);
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
}

// Random doubles of every magnitude that matters to fp16 (2^-30 .. 2^17), with full 53-bit significands: the
// f64 path must round once, correctly.
TEST(HalfNarrow, RandomDoublesAreCorrectlyRounded) {
  const std::uint64_t seed = test::case_seed(0xD0B1E);
  SCOPED_TRACE(fmt::format("seed 0x{:016X}", seed));
  test::Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const double d = std::ldexp(rng.uniform(-2.0, 2.0), rng.integer(-30, 16));
    const f16 got = to_f16(d);
    ASSERT_EQ(got.bits, reference_to_f16(d)) << hex(d) << " -> " << hex(got);
  }
}

// f16_model::round_finite (the fp16 value nearest a finite double, in f64 arithmetic) against to_f16: at every fp16
// value, at every midpoint between neighbours and one f64 ulp either side of it, both signs, beyond the largest
// finite value and below the smallest subnormal; then random doubles over every binade from 2^-60 to 2^20.
TEST(HalfNarrow, RoundFiniteMatchesToF16AtEveryValueAndMidpoint) {
  auto check = [](double d) {
    const double want = to_f64(to_f16(d));
    const double got = f16_model::round_finite(d);
    ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want)) << hex(d);
  };
  for (std::uint32_t b = 0; b < 0x7C00u; ++b) {  // every finite non-negative fp16 and the midpoint above it
    const double v = to_f64(f16{std::uint16_t(b)});
    const double mid = b + 1 < 0x7C00u ? (v + to_f64(f16{std::uint16_t(b + 1)})) / 2 : 65520.0;
    for (const double d : {v, std::nextafter(v, 0.0), std::nextafter(v, 1e300), mid, std::nextafter(mid, 0.0),
                           std::nextafter(mid, 1e300)}) {
      check(d);
      check(-d);
    }
  }
  for (const double d : {0x1p-25, 0x1p-26, 0x1p-1074, 0x1p-1022, 0x1p16, 0x1p100, 0x1.fffffffffffffp1023, 0.0}) {
    check(d);
    check(-d);
  }
  test::Rng rng(test::case_seed(0x50F7));
  for (int i = 0; i < 200000; ++i) check(std::ldexp(rng.uniform(-2.0, 2.0), rng.integer(-60, 20)));
}

// storage.hpp's branchless conversions against to_f16 and to_bf16_exact: every fp16 value and midpoint (and one f64
// ulp either side), specials, and random doubles over the f64 range that matters to each type.
TEST(HalfNarrow, BranchlessStoreConversionsMatch) {
  auto check = [](double d) {
    ASSERT_EQ(detail::to_f16_branchless(d).bits, to_f16(d).bits) << hex(d);
    ASSERT_EQ(detail::to_bf16_exact_branchless(d).bits, to_bf16_exact(d).bits) << hex(d);
  };
  for (std::uint32_t b = 0; b < 0x7C00u; ++b) {
    const double v = to_f64(f16{std::uint16_t(b)});
    const double mid = b + 1 < 0x7C00u ? (v + to_f64(f16{std::uint16_t(b + 1)})) / 2 : 65520.0;
    for (const double d : {v, std::nextafter(v, 0.0), std::nextafter(v, 1e300), mid, std::nextafter(mid, 0.0),
                           std::nextafter(mid, 1e300)}) {
      check(d);
      check(-d);
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (const double d : {0.0, 0x1p-25, 0x1p-1074, 0x1p-1022, 0x1p-149, 0x1p-150, 0x1.8p-150, 0x1p16, 0x1p100,
                         double(FLT_MAX), std::nextafter(double(FLT_MAX), inf), 0x1.FEp127, 0x1.FFp127, 0x1p128,
                         0x1.fffffffffffffp1023, inf, std::numeric_limits<double>::quiet_NaN()}) {
    check(d);
    check(-d);
  }
  test::Rng rng(test::case_seed(0xB1A5));
  for (int i = 0; i < 300000; ++i) check(std::ldexp(rng.uniform(-2.0, 2.0), rng.integer(-160, 140)));
}

// Doubles placed next to an fp16 rounding midpoint, closer than half an f32 ulp: rounding them to f32 first lands
// exactly on the midpoint, and the tie then goes to even, the wrong way. to_f16(double) must round once.
TEST(HalfNarrow, F64JustAboveMidpointRoundsUpNotThroughF32) {
  const double d = 1.0 + 0x1p-11 + 0x1p-40;  // midpoint of 0x3C00 and 0x3C01, plus a hair
  EXPECT_EQ(float(d), 1.0f + 0x1p-11f) << "the trap: f32 rounding lands on the midpoint";
  EXPECT_EQ(to_f16(float(d)).bits, 0x3C00) << "through f32: tie to even, down";
  EXPECT_EQ(to_f16(d).bits, 0x3C01) << hex(d) << " -> " << hex(to_f16(d));
  EXPECT_EQ(to_f16(-d).bits, 0xBC01) << hex(-d) << " -> " << hex(to_f16(-d));
}

TEST(HalfNarrow, F64JustBelowMidpointRoundsDownNotThroughF32) {
  const double d = 1.0 + 3 * 0x1p-11 - 0x1p-40;  // midpoint of 0x3C01 and 0x3C02, minus a hair
  EXPECT_EQ(to_f16(float(d)).bits, 0x3C02) << "through f32: tie to even, up";
  EXPECT_EQ(to_f16(d).bits, 0x3C01) << hex(d) << " -> " << hex(to_f16(d));
}

TEST(HalfNarrow, F64JustAboveSubnormalMidpointRoundsUp) {
  const double d = 0x1p-25 + 0x1p-60;  // midpoint of 0 and 2^-24, plus a hair
  EXPECT_EQ(to_f16(float(d)).bits, 0x0000) << "through f32: tie to even, to zero";
  EXPECT_EQ(to_f16(d).bits, 0x0001) << hex(d) << " -> " << hex(to_f16(d));
  EXPECT_EQ(to_f16(-d).bits, 0x8001);
}

TEST(HalfNarrow, F64JustBelowOverflowThresholdStaysFinite) {
  const double d = 65520.0 - 0x1p-30;  // below the overflow midpoint by less than an f32 ulp (2^-8 here)
  EXPECT_EQ(to_f16(float(d)).bits, 0x7C00) << "through f32: 65520, which overflows";
  EXPECT_EQ(to_f16(d).bits, 0x7BFF) << hex(d) << " -> " << hex(to_f16(d));
  EXPECT_EQ(to_f16(65520.0).bits, 0x7C00);
  EXPECT_EQ(to_f16(-d).bits, 0xFBFF);
}

TEST(HalfNarrow, F64SpecialValues) {
  EXPECT_EQ(to_f16(std::numeric_limits<double>::infinity()).bits, 0x7C00);
  EXPECT_EQ(to_f16(-std::numeric_limits<double>::infinity()).bits, 0xFC00);
  EXPECT_EQ(to_f16(DBL_MAX).bits, 0x7C00);
  EXPECT_EQ(to_f16(std::numeric_limits<double>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(to_f16(-std::numeric_limits<double>::denorm_min()).bits, 0x8000);
  EXPECT_EQ(to_f16(-0.0).bits, 0x8000);
  EXPECT_TRUE(is_nan(to_f16(std::numeric_limits<double>::quiet_NaN())));
  // a NaN keeps sign and its top payload bits, and comes out quiet
  EXPECT_EQ(to_f16(std::bit_cast<double>(0xFFF8000000000000ull)).bits, 0xFE00);
  EXPECT_EQ(to_f16(std::bit_cast<double>(0x7FF0040000000000ull)).bits, 0x7E01);
  EXPECT_EQ(to_f16(std::bit_cast<double>(0x7FF0000000000001ull)).bits, 0x7E00);  // signalling, low payload
}

// to_bf16_exact: f64 -> bf16 in one rounding (the sweep and diagnose store bf16 data with it).
TEST(HalfNarrow, Bf16FromF64RoundsOnce) {
  // Against the definition: the nearest bf16 value (ties to even), decoded independently of half.hpp.
  test::Rng rng(test::case_seed(0xBF16));
  auto check = [](double v) {
    const bf16 got = to_bf16_exact(v);
    EXPECT_EQ((got.bits & 0x8000u) != 0, std::signbit(v)) << test::hex(v);
    const std::uint16_t mag = got.bits & 0x7FFFu;
    const double a = std::fabs(v);
    const double g = test::decode_bf16(mag);
    if (std::isinf(g)) {
      EXPECT_GE(a, 0x1.FFp127) << test::hex(v);  // (2 - 2^-8) 2^127: the overflow midpoint
      return;
    }
    // Neighbours of the result's magnitude: nothing representable may be closer to |v|.
    const double lo = mag > 0 ? test::decode_bf16(std::uint16_t(mag - 1)) : -INFINITY;
    const double hi = test::decode_bf16(std::uint16_t(mag + 1));
    EXPECT_LE(std::fabs(g - a), std::fabs(lo - a)) << test::hex(v) << " -> " << test::hex(got);
    EXPECT_LE(std::fabs(g - a), std::fabs(hi - a)) << test::hex(v) << " -> " << test::hex(got);
    if (std::fabs(g - a) == std::fabs(lo - a) || std::fabs(g - a) == std::fabs(hi - a)) {
      EXPECT_EQ(got.bits & 1u, 0u) << "a tie must go to even: " << test::hex(v);
    }
  };
  // The double-rounding trap: just above a bf16 midpoint, but within half an f32 ulp of it.
  const double mid = 1.0 + 0x1p-8;                        // between 1 and 1 + 2^-7
  EXPECT_EQ(to_bf16_exact(mid + 0x1p-40).bits, 0x3F81);   // above the midpoint: up
  EXPECT_EQ(to_bf16(float(mid + 0x1p-40)).bits, 0x3F80);  // what rounding through f32 gets wrong
  EXPECT_EQ(to_bf16_exact(mid).bits, 0x3F80);             // the tie: to even
  EXPECT_EQ(to_bf16_exact(0x1.FFp127).bits, 0x7F80);      // overflow midpoint -> inf (tie to even)
  EXPECT_EQ(to_bf16_exact(0x1.FEFFFFFFFFp127).bits, 0x7F7F);
  EXPECT_EQ(to_bf16_exact(1e300).bits, 0x7F80);
  EXPECT_EQ(to_bf16_exact(0x1p-134).bits, 0x0000);             // half the smallest subnormal: tie to 0
  EXPECT_EQ(to_bf16_exact(0x1p-134 + 0x1p-160).bits, 0x0001);  // above it: the smallest subnormal
  EXPECT_EQ(to_bf16_exact(-0x1p-200).bits, 0x8000);
  for (int i = 0; i < 200000; ++i) {
    const int e = rng.integer(-140, 130);
    const double v = std::ldexp(rng.uniform(-2.0, 2.0), e);
    check(v);
    // and values within a few f64 ulps of a bf16 midpoint
    const std::uint16_t b = std::uint16_t(rng.integer(0x0001, 0x7F7E));
    const double m = (test::decode_bf16(b) + test::decode_bf16(std::uint16_t(b + 1))) / 2;
    check(std::nextafter(m, 0.0));
    check(std::nextafter(m, 1e308));
  }
}

// ---- the boundary patterns of docs/numerics.md ---------------------------------------------------------------------

#define EXPECT_F32_TO_F16(f32bits, want)                                                                        \
  do {                                                                                                          \
    const std::uint16_t got_ = f16_bits(f32bits);                                                               \
    EXPECT_EQ(got_, (want)) << fmt::format("0x{:08X} -> 0x{:04X}, want 0x{:04X}", std::uint32_t(f32bits), got_, \
                                           std::uint16_t(want));                                                \
    const std::uint16_t neg_ = f16_bits(std::uint32_t(f32bits) ^ 0x80000000u);                                  \
    EXPECT_EQ(neg_, std::uint16_t((want) ^ 0x8000u))                                                            \
        << fmt::format("negative mirror 0x{:08X} -> 0x{:04X}", std::uint32_t(f32bits) ^ 0x80000000u, neg_);     \
  } while (0)

TEST(F16Boundary, JustBelowOverflowGivesLargestFinite) { EXPECT_F32_TO_F16(0x477FEFFFu, 0x7BFF); }
TEST(F16Boundary, OverflowThreshold65520GivesInf) { EXPECT_F32_TO_F16(0x477FF000u, 0x7C00); }
TEST(F16Boundary, AboveOverflowThresholdGivesInf) {
  EXPECT_F32_TO_F16(0x477FF001u, 0x7C00);
  EXPECT_F32_TO_F16(0x47800000u, 0x7C00);  // 65536
  EXPECT_F32_TO_F16(0x7F7FFFFFu, 0x7C00);  // FLT_MAX
}
TEST(F16Boundary, UnderflowTieGoesToZero) { EXPECT_F32_TO_F16(0x33000000u, 0x0000); }  // 2^-25
TEST(F16Boundary, AboveUnderflowTieGivesMinSubnormal) { EXPECT_F32_TO_F16(0x33000001u, 0x0001); }
TEST(F16Boundary, BelowUnderflowTieGivesZero) {
  EXPECT_F32_TO_F16(0x32FFFFFFu, 0x0000);
  EXPECT_F32_TO_F16(0x00000001u, 0x0000);  // f32 denorm_min
}
TEST(F16Boundary, ZeroKeepsItsSign) { EXPECT_F32_TO_F16(0x00000000u, 0x0000); }

TEST(F16Boundary, LargestFiniteIs65504) {
  EXPECT_F32_TO_F16(test::bits_of(65504.0f), 0x7BFF);
  EXPECT_EQ(to_f32(f16{0x7BFF}), 65504.0f);
  EXPECT_EQ(f16_limits::kMax, 65504.0f);
  EXPECT_EQ(f16_limits::kOverflowFrom, 65520.0f);
  EXPECT_EQ(to_f16(f16_limits::kOverflowFrom).bits, f16_limits::kInfBits);
  EXPECT_EQ(to_f16(std::nextafter(f16_limits::kOverflowFrom, 0.0f)).bits, 0x7BFF);
}

TEST(F16Boundary, MinNormalIs2ToMinus14) {
  EXPECT_F32_TO_F16(test::bits_of(0x1p-14f), 0x0400);
  EXPECT_EQ(to_f32(f16{0x0400}), 0x1p-14f);
  EXPECT_EQ(f16_limits::kMinNormal, 0x1p-14f);
  EXPECT_FALSE(is_subnormal(f16{0x0400}));
  EXPECT_TRUE(is_subnormal(f16{0x03FF}));
  EXPECT_EQ(to_f32(f16{0x03FF}), 1023 * 0x1p-24f);  // largest subnormal
  // halfway between the largest subnormal and the smallest normal: tie to even, up to 0x0400
  EXPECT_F32_TO_F16(test::bits_of(0x1p-14f - 0x1p-25f), 0x0400);
}

TEST(F16Boundary, MinSubnormalIs2ToMinus24) {
  EXPECT_F32_TO_F16(test::bits_of(0x1p-24f), 0x0001);
  EXPECT_EQ(to_f32(f16{0x0001}), 0x1p-24f);
  EXPECT_EQ(f16_limits::kMinSubnormal, 0x1p-24f);
  EXPECT_F32_TO_F16(test::bits_of(3 * 0x1p-25f), 0x0002);  // 1.5 * 2^-24: tie to even, up
}

TEST(F16Boundary, EpsilonIs2ToMinus10) {
  EXPECT_F32_TO_F16(test::bits_of(1.0f + 0x1p-10f), 0x3C01);
  EXPECT_EQ(to_f32(f16{0x3C01}) - 1.0f, 0x1p-10f);
  EXPECT_EQ(f16_limits::kEpsilon, 0x1p-10f);
  EXPECT_F32_TO_F16(test::bits_of(1.0f + 0x1p-11f), 0x3C00);      // tie to even, down
  EXPECT_F32_TO_F16(test::bits_of(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie to even, up
  EXPECT_F32_TO_F16(test::bits_of(1.0f + 0x1p-11f) + 1, 0x3C01);  // just above the tie
}

TEST(F16Boundary, InfinityStaysInfinity) {
  EXPECT_F32_TO_F16(0x7F800000u, 0x7C00);
  EXPECT_TRUE(std::isinf(to_f32(f16{0x7C00})) && to_f32(f16{0x7C00}) > 0);
  EXPECT_TRUE(std::isinf(to_f32(f16{0xFC00})) && to_f32(f16{0xFC00}) < 0);
}

TEST(F16Boundary, NaNStaysNaNAndComesOutQuiet) {
  EXPECT_F32_TO_F16(0x7FC00000u, 0x7E00);  // the quiet NaN
  EXPECT_F32_TO_F16(0x7F800001u, 0x7E00);  // signalling, payload only in the low bits: quiet, payload lost
  EXPECT_F32_TO_F16(0x7FA00000u, 0x7F00);  // signalling, payload in the top bits: kept, quiet bit set
  EXPECT_F32_TO_F16(0x7F802000u, 0x7E01);  // lowest payload bit fp16 can hold
  EXPECT_F32_TO_F16(0x7FFFFFFFu, 0x7FFF);
}

// ---- bf16 facts ----------------------------------------------------------------------------------------------

#define EXPECT_F32_TO_BF16(f32bits, want)                                                                       \
  do {                                                                                                          \
    const std::uint16_t got_ = bf16_bits(f32bits);                                                              \
    EXPECT_EQ(got_, (want)) << fmt::format("0x{:08X} -> 0x{:04X}, want 0x{:04X}", std::uint32_t(f32bits), got_, \
                                           std::uint16_t(want));                                                \
    const std::uint16_t neg_ = bf16_bits(std::uint32_t(f32bits) ^ 0x80000000u);                                 \
    EXPECT_EQ(neg_, std::uint16_t((want) ^ 0x8000u))                                                            \
        << fmt::format("negative mirror 0x{:08X} -> 0x{:04X}", std::uint32_t(f32bits) ^ 0x80000000u, neg_);     \
  } while (0)

TEST(Bf16Boundary, LargestFiniteIsAbout3_39e38) {
  const float max = to_f32(bf16{0x7F7F});
  EXPECT_EQ(double(max), std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
  EXPECT_GT(max, 3.38e38f);
  EXPECT_LT(max, 3.40e38f);
  EXPECT_F32_TO_BF16(0x7F7F0000u, 0x7F7F);
  EXPECT_F32_TO_BF16(0x7F7F7FFFu, 0x7F7F);  // just below the overflow tie
}

TEST(Bf16Boundary, OverflowToInfFrom0x7F7F8000) {
  EXPECT_F32_TO_BF16(0x7F7F8000u, 0x7F80);  // the tie above the largest finite (odd 0x7F7F): up, to inf
  EXPECT_F32_TO_BF16(0x7F7FFFFFu, 0x7F80);  // FLT_MAX
  EXPECT_F32_TO_BF16(0x7F800000u, 0x7F80);  // inf stays inf
}

TEST(Bf16Boundary, EpsilonIs2ToMinus7) {
  EXPECT_EQ(to_f32(bf16{0x3F81}) - 1.0f, 0x1p-7f);
  EXPECT_EQ(bf16_limits::kEpsilon, 0x1p-7f);
  EXPECT_F32_TO_BF16(test::bits_of(1.0f + 0x1p-7f), 0x3F81);
}

TEST(Bf16Boundary, RoundsToNearestTiesToEven) {
  EXPECT_F32_TO_BF16(0x3F808000u, 0x3F80);  // 1 + 2^-8: tie, down to even
  EXPECT_F32_TO_BF16(0x3F818000u, 0x3F82);  // 1 + 3*2^-8: tie, up to even
  EXPECT_F32_TO_BF16(0x3F808001u, 0x3F81);  // above the tie
  EXPECT_F32_TO_BF16(0x3F807FFFu, 0x3F80);  // below the tie
  EXPECT_F32_TO_BF16(0x3FFF8000u, 0x4000);  // tie that carries into the exponent
}

// Subnormal f32 inputs are rounded like any other value (vcvtneps2bf16 would flush them to zero).
TEST(Bf16Boundary, SubnormalsAreRoundedNotFlushed) {
  EXPECT_F32_TO_BF16(0x00010000u, 0x0001);  // smallest bf16 subnormal
  EXPECT_F32_TO_BF16(0x00008000u, 0x0000);  // tie, down to even zero
  EXPECT_F32_TO_BF16(0x00018000u, 0x0002);  // tie, up to even
  EXPECT_F32_TO_BF16(0x00008001u, 0x0001);
  EXPECT_F32_TO_BF16(0x007FFFFFu, 0x0080);  // largest f32 subnormal rounds up to the smallest normal
}

TEST(Bf16Boundary, NaNStaysNaNAndComesOutQuiet) {
  EXPECT_F32_TO_BF16(0x7FC00000u, 0x7FC0);
  EXPECT_F32_TO_BF16(0x7F800001u, 0x7FC0);  // signalling with a low payload: quiet, low payload lost
  EXPECT_F32_TO_BF16(0x7F810000u, 0x7FC1);  // payload in the kept bits
  EXPECT_F32_TO_BF16(0x7FFFFFFFu, 0x7FFF);  // a NaN never rounds up into the sign bit
  EXPECT_TRUE(is_nan(bf16{0x7FC0}));
  EXPECT_FALSE(is_nan(bf16{0x7F80}));
}

// bf16 trades fp16's precision for f32's range (docs/numerics.md): fp16 overflows where bf16 does not, and bf16 is
// coarser.
TEST(Bf16Boundary, TradesPrecisionForRange) {
  EXPECT_EQ(to_f16(65536.0f).bits, 0x7C00);
  EXPECT_EQ(to_f32(to_bf16(65536.0f)), 65536.0f);
  EXPECT_EQ(to_f32(to_f16(1.0f + 0x1p-10f)), 1.0f + 0x1p-10f);
  EXPECT_EQ(to_f32(to_bf16(1.0f + 0x1p-10f)), 1.0f);
}

// ---- constexpr: the conversions are usable at compile time ---------------------------------------------------

static_assert(to_f16(65504.0f).bits == 0x7BFF);
static_assert(to_f16(65520.0f).bits == 0x7C00);
static_assert(to_f32(f16{0x0001}) == 0x1p-24f);
static_assert(to_bf16(1.0f).bits == 0x3F80);

}  // namespace
}  // namespace halfmap
