// FEAT_BF16's BFDOT and BFMMLA (arm64 only) against the BFDotAdd model of src/models/bfdot.cpp (the Arm ARM's
// pseudo-code without FEAT_EBF16: round to odd, subnormal inputs read as zero, tiny results flushed, default NaN,
// whatever FPCR says).
//   * BFDOT over every bf16 a0 (65536) against 296 b0 values: 40 structured ones (both signs, zeros, the smallest
//     and largest subnormals, 1, values near the extremes of the exponent range, inf, quiet and signalling NaNs)
//     and every 256th pattern (every exponent of both signs, with a varying fraction),
//     with a1, b1 and the accumulator cycling through structured sets (zeros, subnormals, f32 subnormal
//     accumulators, values that cancel, round, overflow to 2^128, NaN, inf): 19.4 M lanes; then 1 M lanes of
//     random bit patterns in all five operands. Not the 2^80 operand space, nor all 2^32 (a0, b0) pairs (too slow
//     under qemu): every a0 pattern meets every class of the other operands.
//   * Boundary facts with their bit patterns: round to odd (not to nearest), the flushes, overflow to inf at
//     2^128 (not max finite, and FLT_MAX plus half an ulp stays finite), cancellation to +0, default NaN.
//   * BFMMLA on 256 K random blocks (structured and random values): each of the 4 results is BFDotAdd chained
//     over pairs 0-1 then 2-3; the reverse order disagrees on some of the same blocks, so the order is pinned.
//   * How BFDotAdd differs from x86's vdpbf16ps on ordinary lanes (all operands and both results normal and
//     finite): measured against a model of vdpbf16ps written here from Intel's SDM (two f32 FMAs rounded to
//     nearest even, the odd element's first, DAZ/FTZ), since main has none; the shares are pinned. On x86-64 the
//     same binary checks that model against vdpbf16ps itself on such lanes (where the CPU has AVX512-BF16).
// Skipped (with the reason) where the CPU lacks FEAT_BF16 or AVX512-BF16: the instructions are never executed there.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "halfmap/cpu.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "hw/hw_convert.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

#if defined(__aarch64__)
std::uint32_t model_bits(std::uint32_t acc, std::uint16_t a0, std::uint16_t a1, std::uint16_t b0, std::uint16_t b1) {
  const float r = bfdot_model_step(std::bit_cast<float>(acc), bf16{a0}, bf16{a1}, bf16{b0}, bf16{b1});
  return std::bit_cast<std::uint32_t>(r);
}

/// BFDOT of one lane (lane 0 of 4; the others get +0).
std::uint32_t bfdot1(std::uint32_t acc, std::uint16_t a0, std::uint16_t a1, std::uint16_t b0, std::uint16_t b1) {
  std::uint16_t a[8] = {a0, a1}, b[8] = {b0, b1};
  std::uint32_t c[4] = {acc}, out[4] = {};
  test::hw::neonbf16_bfdot(a, b, c, 4, out);
  return out[0];
}

std::uint32_t f32(float v) { return std::bit_cast<std::uint32_t>(v); }

class Bfdot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_features().bf16) GTEST_SKIP() << "this CPU lacks FEAT_BF16 (HWCAP2 bf16)";
  }
};

constexpr std::uint16_t kB0[40] = {0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x3F80, 0xBF80, 0x3F81, 0x4000, 0xC0FF,
                                   0x7F7F, 0xFF7F, 0x7F00, 0x0100, 0x8180, 0x1F80, 0x5F80, 0x3E80, 0x4180, 0x3400,
                                   0x4A80, 0xB5A5, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x3C00, 0x2000, 0x6000,
                                   0x0A00, 0x7500, 0x3F7F, 0xBF7F, 0x4F00, 0x3001, 0x0081, 0x8081, 0x407F, 0x42C8};
constexpr std::uint16_t kA1[16] = {0x0000, 0x8000, 0x3F80, 0xBF80, 0x0001, 0x7F7F, 0xFF7F, 0x7F80,
                                   0xFF80, 0x7FC0, 0x3401, 0x0080, 0x4B00, 0xC000, 0x1F80, 0x6000};
constexpr std::uint16_t kB1[12] = {0x3F80, 0xBF80, 0x0000, 0x8000, 0x3F81, 0x0081,
                                   0x7F7F, 0x7F80, 0x2000, 0x5F00, 0xC2C8, 0x7F81};
constexpr std::uint32_t kAccs[28] = {0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF,
                                     0x00800000, 0x80800001, 0x33800000, 0x4B800000, 0xCB7FFFFF, 0x7F7FFFFF,
                                     0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00001, 0xFFC12345,
                                     0x477FE000, 0xC77FE000, 0x2F800000, 0x3F800001, 0x4F000000, 0x1F800000,
                                     0xDF800000, 0x00FFFFFF, 0x3F7FFFFF, 0x40490FDB};

TEST_F(Bfdot, EveryA0AgainstStructuredOperands) {
  const std::size_t n = 65536;
  std::vector<std::uint16_t> a(2 * n), b(2 * n);
  std::vector<std::uint32_t> acc(n), got(n);
  std::size_t mismatches = 0, lanes = 0;
  // kB0, then every 256th pattern (each exponent's fractions 0 and 0x80... of both signs: 256 more b0 values).
  std::vector<std::uint16_t> b0s(std::begin(kB0), std::end(kB0));
  for (std::uint32_t p = 0; p < 65536; p += 256) b0s.push_back(std::uint16_t(p | (p >> 8 & 0x7F)));
  for (std::size_t bi = 0; bi < b0s.size(); ++bi) {
    for (std::size_t i = 0; i < n; ++i) {
      a[2 * i] = std::uint16_t(i);
      b[2 * i] = b0s[bi];
      a[2 * i + 1] = kA1[(i + bi) % 16];
      b[2 * i + 1] = kB1[(i / 16 + bi) % 12];
      acc[i] = kAccs[(i / 192 + 3 * bi + i) % 28];
    }
    test::hw::neonbf16_bfdot(a.data(), b.data(), acc.data(), n, got.data());
    for (std::size_t i = 0; i < n; ++i, ++lanes) {
      const std::uint32_t want = model_bits(acc[i], a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1]);
      if (got[i] != want && mismatches++ < 10) {
        ADD_FAILURE() << fmt::format("BFDOT acc={:08X} a=({:04X},{:04X}) b=({:04X},{:04X}): got {:08X}, model {:08X}",
                                     acc[i], a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1], got[i], want);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << lanes << " lanes";
}

TEST_F(Bfdot, RandomBitPatterns) {
  const std::size_t n = 1 << 20;
  test::Rng rng(0xBFD07u);
  std::vector<std::uint16_t> a(2 * n), b(2 * n);
  std::vector<std::uint32_t> acc(n), got(n);
  for (std::size_t i = 0; i < 2 * n; ++i) a[i] = std::uint16_t(rng.bits()), b[i] = std::uint16_t(rng.bits());
  for (std::size_t i = 0; i < n; ++i) acc[i] = std::uint32_t(rng.bits());
  test::hw::neonbf16_bfdot(a.data(), b.data(), acc.data(), n, got.data());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t want = model_bits(acc[i], a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1]);
    if (got[i] != want && mismatches++ < 10) {
      ADD_FAILURE() << fmt::format("BFDOT acc={:08X} a=({:04X},{:04X}) b=({:04X},{:04X}): got {:08X}, model {:08X}",
                                   acc[i], a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1], got[i], want);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << n << " lanes";
}

// 1 + 2^-40·1: below half an ulp (2^-24); round to nearest would give 1.0, round to odd sets the last bit.
// 1 + (1 + 2^-7)·2^-23 = 1 + 2^-23 + 2^-30: round to odd keeps 1 + 2^-23 (already odd); 1 + 3·2^-24 gives
// 1 + 2^-23 too (nearest even would give 1 + 2^-22).
TEST_F(Bfdot, RoundsToOdd) {
  for (auto check : {bfdot1, model_bits}) {
    EXPECT_EQ(check(f32(1.0f), 0x2B80, 0, 0x3F80, 0), 0x3F800001u);  // 2^-40
    EXPECT_EQ(check(f32(1.0f), 0x3401, 0, 0x3F80, 0), 0x3F800001u);  // (1 + 2^-7)·2^-23
    EXPECT_EQ(check(f32(1.0f), 0x3440, 0, 0x3F80, 0), 0x3F800001u);  // 3·2^-24
    // The pair's sum is rounded to odd before the addition: 2^24 + 1 + 2^-20 (a0·b0 = 2^24, a1·b1 = 1 + 2^-7,
    // their sum rounded to odd 2^24 + 1), then + 0: 0x4B800001, where one exact rounding would give the same.
    EXPECT_EQ(check(0, 0x4B80, 0x3F81, 0x3F80, 0x3F80), 0x4B800001u);
  }
}

// Subnormal bf16 operands read as zero: 2^-133 · 1 = +0. A subnormal f32 accumulator reads as zero: 2^-149 + 0
// = +0, and -2^-149 + (-0 + -0) = -0 (zeros of one sign keep it; -0·1 + +0·+0 would be +0). 2^-70 · 2^-70 =
// 2^-140 is flushed: a zero of the product's sign, flushed before it is added (2^-126 - 2^-140 stays 2^-126).
// 2^-63·2^-63 = 2^-126 exactly stays (the smallest normal). A sum below 2^-126 is flushed: 2^-125 - (1 +
// 2^-7)·2^-126 = 2^-126 - 2^-133 gives +0, where round to nearest with subnormals would keep it.
TEST_F(Bfdot, FlushesSubnormalsWhateverFpcrSays) {
  for (auto check : {bfdot1, model_bits}) {
    EXPECT_EQ(check(0, 0x0001, 0, 0x3F80, 0), 0u);
    EXPECT_EQ(check(0x00000001, 0, 0, 0, 0), 0u);
    EXPECT_EQ(check(0x80000001, 0x8000, 0x8000, 0x3F80, 0x3F80), 0x80000000u);
    EXPECT_EQ(check(0x80000001, 0x8000, 0, 0x3F80, 0), 0u);
    EXPECT_EQ(check(0x80000000, 0x1C80, 0x8000, 0x9C80, 0x3F80), 0x80000000u);  // -(2^-140) -> -0
    EXPECT_EQ(check(0x00800000, 0x9C80, 0, 0x1C80, 0), 0x00800000u);
    EXPECT_EQ(check(0, 0x2000, 0, 0x2000, 0), 0x00800000u);  // 2^-63·2^-63 = 2^-126
    EXPECT_EQ(check(0x01000000, 0xA001, 0, 0x2000, 0), 0u);
  }
}

// Overflow: 2^127·2^127 is infinite (not the largest finite). FLT_MAX + 2^103 (half an ulp) is below 2^128
// exactly, so round to odd keeps FLT_MAX (nearest even would tie up to inf).
TEST_F(Bfdot, OverflowsToInfOnlyAt2To128) {
  for (auto check : {bfdot1, model_bits}) {
    EXPECT_EQ(check(0, 0x7F00, 0, 0x7F00, 0), 0x7F800000u);
    EXPECT_EQ(check(0, 0xFF00, 0, 0x7F00, 0), 0xFF800000u);
    EXPECT_EQ(check(0x7F7FFFFF, 0x7300, 0, 0x3F80, 0), 0x7F7FFFFFu);
    EXPECT_EQ(check(0x7F7FFFFF, 0x7380, 0, 0x3F80, 0), 0x7F800000u);  // + 2^104: exactly 2^128
  }
}

// x·y - x·y = +0 exactly; -0 + +0 = +0; -0·1 + -0·1 + -0 = -0.
TEST_F(Bfdot, CancellationGivesPlusZero) {
  for (auto check : {bfdot1, model_bits}) {
    EXPECT_EQ(check(0x80000000, 0x4049, 0xC049, 0x3FC0, 0x3FC0), 0u);
    EXPECT_EQ(check(0x80000000, 0x8000, 0x8000, 0x3F80, 0x3F80), 0x80000000u);
    EXPECT_EQ(check(f32(-1.0f), 0x3F80, 0, 0x3F80, 0), 0u);
  }
}

// Every NaN operand, inf·0 and inf - inf give the default NaN 0x7FC00000; no payload propagates.
TEST_F(Bfdot, NaNsAreTheDefaultNaN) {
  for (auto check : {bfdot1, model_bits}) {
    EXPECT_EQ(check(0x7FC12345, 0x3F80, 0, 0x3F80, 0), 0x7FC00000u);
    EXPECT_EQ(check(0x7F800001, 0x3F80, 0, 0x3F80, 0), 0x7FC00000u);
    EXPECT_EQ(check(0, 0xFFC1, 0, 0x3F80, 0), 0x7FC00000u);
    EXPECT_EQ(check(0, 0x7F81, 0, 0x3F80, 0), 0x7FC00000u);
    EXPECT_EQ(check(0, 0x7F80, 0, 0x0000, 0), 0x7FC00000u);
    EXPECT_EQ(check(0, 0x7F80, 0xFF80, 0x3F80, 0x3F80), 0x7FC00000u);
    EXPECT_EQ(check(f32(-INFINITY), 0x7F80, 0, 0x3F80, 0), 0x7FC00000u);
    EXPECT_EQ(check(f32(INFINITY), 0x3F80, 0, 0x3F80, 0), 0x7F800000u);
  }
}

// ---- BFMMLA ----------------------------------------------------------------------------------------------------

/// One BFMMLA result element (row i, column j) as the model: BFDotAdd over pairs (0, 1) then (2, 3), or the
/// reverse order when `reverse`.
std::uint32_t mmla_model(const std::uint16_t* a, const std::uint16_t* b, std::uint32_t acc, int i, int j,
                         bool reverse) {
  float s = std::bit_cast<float>(acc);
  for (int h0 = 0; h0 < 2; ++h0) {
    const int h = reverse ? 1 - h0 : h0;
    s = bfdot_model_step(s, bf16{a[4 * i + 2 * h]}, bf16{a[4 * i + 2 * h + 1]}, bf16{b[4 * j + 2 * h]},
                         bf16{b[4 * j + 2 * h + 1]});
  }
  return std::bit_cast<std::uint32_t>(s);
}

class Bfmmla : public Bfdot {};

TEST_F(Bfmmla, ChainsPairsZeroOneThenTwoThree) {
  const std::size_t blocks = 1 << 16;
  test::Rng rng(0xB33A);
  std::vector<std::uint16_t> a(8 * blocks), b(8 * blocks);
  std::vector<std::uint32_t> acc(4 * blocks), got(4 * blocks);
  auto value = [&](std::size_t i) -> std::uint16_t {
    switch (rng.bits() % 4) {
      case 0:
        return kB0[rng.bits() % std::size(kB0)];
      case 1:
        return std::uint16_t(rng.bits());
      default: {  // ordinary values of mixed magnitude: where the order of the two steps shows
        const std::uint32_t e = 127 - 12 + std::uint32_t(rng.bits() % 25);
        return std::uint16_t((rng.bits() & 0x8000u) | e << 7 | (rng.bits() & 0x7Fu) | (i & 0));
      }
    }
  };
  for (std::size_t i = 0; i < 8 * blocks; ++i) a[i] = value(i), b[i] = value(i);
  for (std::size_t i = 0; i < 4 * blocks; ++i) {
    acc[i] = rng.bits() % 3 == 0 ? kAccs[rng.bits() % 28] : std::uint32_t(value(i)) << 16 | (rng.bits() & 0xFFFFu);
  }
  test::hw::neonbf16_bfmmla(a.data(), b.data(), acc.data(), blocks, got.data());
  std::size_t mismatches = 0, reverse_differs = 0;
  for (std::size_t k = 0; k < blocks; ++k) {
    for (int e = 0; e < 4; ++e) {
      const int i = e / 2, j = e % 2;
      const std::uint32_t c = acc[4 * k + e], g = got[4 * k + e];
      const std::uint32_t want = mmla_model(&a[8 * k], &b[8 * k], c, i, j, false);
      if (mmla_model(&a[8 * k], &b[8 * k], c, i, j, true) != g) ++reverse_differs;
      if (g != want && mismatches++ < 10) {
        ADD_FAILURE() << fmt::format("BFMMLA block {} element ({}, {}) acc {:08X}: got {:08X}, model {:08X}", k, i, j,
                                     c, g, want);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << 4 * blocks << " elements";
  // Measured: 16,639 of the 262,144 elements differ from the reverse chain; at least 1 % must.
  EXPECT_GT(reverse_differs, 4 * blocks / 100) << "the blocks do not tell the two orders apart";
  RecordProperty("reverse_order_differs", int(reverse_differs));
  std::printf("BFMMLA: %zu of %zu elements would differ in the reverse pair order\n", reverse_differs, 4 * blocks);
}

#endif  // __aarch64__

// ---- BFDotAdd against x86's vdpbf16ps --------------------------------------------------------------------------

/// vdpbf16ps on one lane from Intel's SDM: acc += a1·b1, then acc += a0·b0, each an f32 FMA rounded to nearest
/// even; bf16 subnormal inputs and the f32 accumulator read as zero (DAZ), subnormal results flushed (FTZ).
/// Only used here on ordinary lanes (all normal and finite), where neither the flushing nor NaNs arise.
float vdpbf16ps_lane(float acc, bf16 a0, bf16 a1, bf16 b0, bf16 b1) {
  const float s = std::fma(to_f32(a1), to_f32(b1), acc);
  return std::fma(to_f32(a0), to_f32(b0), s);
}

bool normal(float v) { return std::isnormal(v); }

/// Random normal bf16 with exponents in [-8, 8], and f32 accumulators in the same range with random fractions.
/// (One draw per statement: the order of the draws is fixed, so every compiler sees the same values.)
bf16 draw_bf(test::Rng& rng) {
  const std::uint32_t e = 127 - 8 + std::uint32_t(rng.bits() % 17);
  const std::uint32_t sign = std::uint32_t(rng.bits()) & 0x8000u;
  const std::uint32_t frac = std::uint32_t(rng.bits()) & 0x7Fu;
  return bf16{std::uint16_t(sign | e << 7 | frac)};
}
float draw_acc(test::Rng& rng) {
  const std::uint32_t e = 127 - 8 + std::uint32_t(rng.bits() % 17);
  const std::uint32_t sign = std::uint32_t(rng.bits()) & 0x80000000u;
  const std::uint32_t frac = std::uint32_t(rng.bits()) & 0x7FFFFFu;
  return std::bit_cast<float>(sign | e << 23 | frac);
}

#if defined(__x86_64__)
// The vdpbf16ps model above against the instruction, on ordinary lanes of the comparison's distribution (where it
// is claimed to hold): the odd element's FMA first, then the even one's. The even-first order would differ on
// about 12 % of these lanes, so the test tells the orders apart. Measured on the x86 build host ("Oxide Virtual
// Turin-like Processor"): 0 mismatches of 1,048,576 lanes; the even-first order differs on 124,859.
TEST(Vdpbf16ps, TheModelIsTheInstructionOnOrdinaryLanes) {
  if (!isa_supported(Isa::avx512bf16)) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const std::size_t n = 1 << 20;
  test::Rng rng(0xD1FF + 1);
  std::vector<std::uint16_t> a(2 * n), b(2 * n);
  std::vector<std::uint32_t> acc(n), got(n);
  for (std::size_t i = 0; i < 2 * n; ++i) a[i] = draw_bf(rng).bits, b[i] = draw_bf(rng).bits;
  for (std::size_t i = 0; i < n; ++i) acc[i] = std::bit_cast<std::uint32_t>(draw_acc(rng));
  test::hw::avx512bf16_dpbf16ps(a.data(), b.data(), acc.data(), n, got.data());
  std::size_t ordinary = 0, mismatches = 0, even_first_differs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bf16 a0{a[2 * i]}, a1{a[2 * i + 1]}, b0{b[2 * i]}, b1{b[2 * i + 1]};
    const float c = std::bit_cast<float>(acc[i]), g = std::bit_cast<float>(got[i]);
    if (!normal(g)) continue;
    ++ordinary;
    const float want = vdpbf16ps_lane(c, a0, a1, b0, b1);
    if (std::fma(to_f32(a1), to_f32(b1), std::fma(to_f32(a0), to_f32(b0), c)) != g) ++even_first_differs;
    if (std::bit_cast<std::uint32_t>(want) != got[i] && mismatches++ < 10) {
      ADD_FAILURE() << fmt::format("vdpbf16ps acc={:08X} a=({:04X},{:04X}) b=({:04X},{:04X}): got {:08X}, model {:08X}",
                                   acc[i], a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1], got[i],
                                   std::bit_cast<std::uint32_t>(want));
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << ordinary << " ordinary lanes";
  EXPECT_GT(even_first_differs, ordinary / 20) << "the lanes do not tell the two orders apart";
  std::printf("vdpbf16ps: %zu ordinary lanes, model mismatches %zu, the even-first order differs on %zu\n", ordinary,
              mismatches, even_first_differs);
}
#endif

struct Comparison {
  std::size_t lanes = 0, differ = 0;
  std::map<std::uint64_t, std::size_t> by_ulps;
  double share() const { return double(differ) / double(lanes); }
  double one_ulp() const { return by_ulps.count(1) ? double(by_ulps.at(1)) / double(differ) : 0.0; }
};

/// BFDotAdd against the vdpbf16ps model on 400,000 lanes: a0, a1, b0, b1 random normal bf16 with exponents in
/// [-8, 8], the accumulator a random f32 in the same range (random sign and fraction; with `bf16_acc` only its top
/// 7 fraction bits, an accumulator of bf16 precision); only lanes where both results are normal count.
Comparison compare(bool bf16_acc) {
  test::Rng rng(0xD1FF);
  Comparison c;
  for (std::size_t i = 0; i < 400000; ++i) {
    const bf16 a0 = draw_bf(rng), a1 = draw_bf(rng), b0 = draw_bf(rng), b1 = draw_bf(rng);
    float acc = draw_acc(rng);
    if (bf16_acc) acc = std::bit_cast<float>(std::bit_cast<std::uint32_t>(acc) & 0xFFFF0000u);
    const float arm = bfdot_model_step(acc, a0, a1, b0, b1), x86 = vdpbf16ps_lane(acc, a0, a1, b0, b1);
    if (!normal(arm) || !normal(x86)) continue;
    ++c.lanes;
    if (arm == x86) continue;
    ++c.differ;
    const std::int64_t ia = std::bit_cast<std::int32_t>(arm), ix = std::bit_cast<std::int32_t>(x86);
    EXPECT_EQ(std::signbit(arm), std::signbit(x86)) << "a sign differs: acc " << acc;
    ++c.by_ulps[std::uint64_t(ia > ix ? ia - ix : ix - ia)];
  }
  std::string dist;
  for (const auto& [u, n] : c.by_ulps) dist += fmt::format(" {} ulp: {};", u, n);
  std::printf(
      "BFDotAdd vs vdpbf16ps (%s accumulators): %zu of %zu ordinary lanes differ (%.2f %%), %.2f %% of them "
      "by 1 ulp:%s\n",
      bf16_acc ? "bf16-precision" : "f32", c.differ, c.lanes, 100 * c.share(), 100 * c.one_ulp(), dist.c_str());
  return c;
}

// Model against model, so this runs on every machine; Vdpbf16ps.TheModelIsTheInstructionOnOrdinaryLanes pins the
// x86 side (on x86). Measured (seed 0xD1FF, qemu 7.2 and the x86 host alike: the models are plain C++):
//   f32 accumulators: 195,294 of 400,000 lanes differ (48.8 %), 94.1 % of them by 1 ulp, 4.7 % by 2, the rest by
//     more (up to 2048 ulps, where the difference meets cancellation);
//   bf16-precision accumulators: 93,119 of 400,000 (23.3 %), 96.3 % of them by 1 ulp (the accumulator's zero
//     low bits leave fewer sums inexact).
// Pinned within a few points.
TEST(BfdotVsVdpbf16ps, OrdinaryLanesDifferByRoundingAndOrder) {
  const Comparison f = compare(false), h = compare(true);
  RecordProperty("differ_share_pct", fmt::format("{:.2f}", 100 * f.share()));
  RecordProperty("differ_share_pct_bf16_acc", fmt::format("{:.2f}", 100 * h.share()));
  EXPECT_GT(f.lanes, 390000u);
  EXPECT_NEAR(f.share(), 0.488, 0.03);
  EXPECT_NEAR(f.one_ulp(), 0.941, 0.03);
  EXPECT_GT(h.lanes, 390000u);
  EXPECT_NEAR(h.share(), 0.234, 0.03);
  EXPECT_NEAR(h.one_ulp(), 0.964, 0.03);
}

// The model's fixed order (bfdot_model_reduce): pairs into lanes. x = [2^24, 1, 1, ...]: sequentially each pair
// (1 + 1 = 2) is added to 2^24 exactly; in lanes, the result folds the same value: equal here, but a subnormal
// input is flushed in every order.
TEST(BfdotModel, FlushesAndPadsInTheReduction) {
  std::vector<bf16> x(33, bf16{0x0001});  // bf16 subnormals: read as zero
  x[5] = bf16{0x3F80};
  EXPECT_EQ(bfdot_model_reduce(Op::sum, x.data(), nullptr, x.size(), 16), 1.0f);
  EXPECT_EQ(bfdot_model_reduce(Op::sumsq, x.data(), nullptr, x.size(), 1), 1.0f);
  // A flushed negative product is -0, and the pair's padded +0·+0 makes the pair's sum +0.
  std::vector<bf16> y(1, bf16{0x9C80});  // -2^-70, squared positive; dot with 2^-70 gives -2^-140 -> -0
  std::vector<bf16> z(1, bf16{0x1C80});
  const float r = bfdot_model_reduce(Op::dot, y.data(), z.data(), 1, 1);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(r), 0u) << "-0 from the flush, + (+0·+0, the pair's padding) = +0";
}

}  // namespace
}  // namespace halfmap
