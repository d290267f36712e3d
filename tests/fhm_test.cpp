// FEAT_FHM's FMLAL/FMLAL2 (arm64 only) against the fixed-order f32 model of src/models/f32acc.cpp, which says each
// lane computes fmaf(f32(a), f32(b), acc): the fp16 product exact, one f32 rounding, no flushing under Linux's
// default FPCR (FZ = 0, FZ16 = 0, DN = 0, round to nearest even), with Arm's NaN rules.
//   * Exhaustive over every fp16 a (65536) against 2304 b values that cover every exponent, both signs,
//     subnormals, zeros, inf and NaN, with accumulators cycling through 24 f32 values chosen to round, cancel,
//     overflow and stay subnormal: f32acc_model_step bit for bit, NaN payloads included (the model picks NaNs
//     by the pseudo-code's FPProcessNaNs3 order, not by the host FMA's).
//   * Boundary facts with their bit patterns: no fp16 rounding of the product, subnormals kept in fp16 operands
//     and f32 accumulators, ties to even in f32, inf·0 = the default NaN, overflow to inf.
//   * The model's fixed order (f32acc_model_reduce): the lane count changes the result, so it must be the kernels'.
// Skipped (with the reason) where the CPU lacks FEAT_FHM: the instruction is never executed there.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "hw/hw_convert.hpp"

namespace halfmap {
namespace {

std::uint32_t model_bits(std::uint16_t a, std::uint16_t b, std::uint32_t acc) {
  return std::bit_cast<std::uint32_t>(f32acc_model_step(Op::dot, std::bit_cast<float>(acc), f16{a}, f16{b}));
}

/// FMLAL of one lane (lane 0 of a block of 8; the others get +0·+0 + +0).
std::uint32_t fmlal1(std::uint16_t a, std::uint16_t b, std::uint32_t acc, bool high = false) {
  std::uint16_t av[8] = {}, bv[8] = {};
  std::uint32_t cv[8] = {}, out[8] = {};
  const int l = high ? 4 : 0;  // lane 4 is FMLAL2's first
  av[l] = a;
  bv[l] = b;
  cv[l] = acc;
  test::hw::neonfhm_fmlal(av, bv, cv, 8, out);
  return out[l];
}

class Fmlal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_features().asimdfhm) GTEST_SKIP() << "this CPU lacks FEAT_FHM (HWCAP asimdfhm)";
    const FpEnv env = read_fp_env();
    ASSERT_TRUE(env.ieee()) << "FPCR flushes (" << env.describe() << "): the model assumes FZ = FZ16 = 0";
  }
};

/// 2304 b values: sign × 32 exponent fields × 4 fractions (0, 1, 0x200, 0x3FF), which include ±0, the smallest
/// and largest subnormals, 1, the largest finite, ±inf and quiet and signalling NaNs; then every 32nd pattern
/// (64 fractions of every exponent, both signs).
std::vector<std::uint16_t> b_values() {
  std::vector<std::uint16_t> v;
  for (std::uint32_t p = 0; p < 65536; p += 32) v.push_back(std::uint16_t(p));
  for (std::uint16_t s : {0x0000, 0x8000}) {
    for (std::uint16_t e = 0; e < 32; ++e) {
      for (std::uint16_t f : {0x000, 0x001, 0x200, 0x3FF}) v.push_back(std::uint16_t(s | (e << 10) | f));
    }
  }
  return v;
}

constexpr std::uint32_t kAccs[24] = {0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x80000001,
                                     0x007FFFFF, 0x00800000, 0x33800000, 0x4B800000, 0xCB7FFFFF, 0x7F7FFFFF,
                                     0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00000, 0x477FE000,
                                     0xC77FE000, 0x2F800000, 0x3F800001, 0x4F000000, 0x1F800000, 0xDF800000};

TEST_F(Fmlal, ExhaustiveOverAWithCoveringBAndAccumulators) {
  const std::vector<std::uint16_t> bs = b_values();
  std::vector<std::uint16_t> a(65536), b(65536);
  std::vector<std::uint32_t> acc(65536), got(65536);
  std::size_t mismatches = 0;
  for (std::size_t bi = 0; bi < bs.size(); ++bi) {
    for (std::size_t i = 0; i < 65536; ++i) {
      a[i] = std::uint16_t(i);
      b[i] = bs[bi];
      acc[i] = kAccs[(i + bi) % 24];
    }
    test::hw::neonfhm_fmlal(a.data(), b.data(), acc.data(), a.size(), got.data());
    for (std::size_t i = 0; i < 65536; ++i) {
      const std::uint32_t want = model_bits(a[i], b[i], acc[i]);
      if (got[i] != want && mismatches++ < 10) {
        ADD_FAILURE() << fmt::format("FMLAL a={:04X} b={:04X} acc={:08X}: got {:08X}, model {:08X}", a[i], b[i], acc[i],
                                     got[i], want);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << 65536 * bs.size() << " lanes";
}

// (1 + 2^-10)² = 1 + 2^-9 + 2^-20: fp16 would round the product to 1 + 2^-9 (0x3C02); FMLAL keeps it exact.
TEST_F(Fmlal, TheProductIsNotRoundedToFp16) {
  const float exact = 1.0f + 0x1p-9f + 0x1p-20f;
  EXPECT_EQ(fmlal1(0x3C01, 0x3C01, 0), std::bit_cast<std::uint32_t>(exact));
  EXPECT_EQ(fmlal1(0x3C01, 0x3C01, 0, true), std::bit_cast<std::uint32_t>(exact)) << "FMLAL2";
}

// 1 + (1 + 2^-10)·2^-14 = 1 + 2^-14 + 2^-24: 2^-24 is half an f32 ulp at 1, a tie, rounded to even (down).
// 1 + (1 + 3·2^-10)·2^-14 = 1 + 2^-14 + 3·2^-24: rounds up to 1 + 2^-14 + 2^-22.
TEST_F(Fmlal, OneRoundingToNearestEvenInF32) {
  EXPECT_EQ(fmlal1(0x3C01, 0x0400, 0x3F800000), std::bit_cast<std::uint32_t>(1.0f + 0x1p-14f));
  EXPECT_EQ(fmlal1(0x3C03, 0x0400, 0x3F800000), std::bit_cast<std::uint32_t>(1.0f + 0x1p-14f + 0x1p-22f));
}

// FZ16 = 0: 2^-24 (fp16 0x0001) · 1 is 2^-24 (0x33800000), not 0. FZ = 0: an f32 subnormal accumulator plus
// +0·+0 stays 2^-149 (0x00000001), and 2^-24·2^-24 = 2^-48 is a normal f32.
TEST_F(Fmlal, SubnormalsAreKept) {
  EXPECT_EQ(fmlal1(0x0001, 0x3C00, 0), 0x33800000u);
  EXPECT_EQ(fmlal1(0x0000, 0x0000, 0x00000001), 0x00000001u);
  EXPECT_EQ(fmlal1(0x0001, 0x0001, 0), 0x27800000u);
  // The smallest nonzero product is 2^-48, so an f32 subnormal result needs a subnormal accumulator.
  EXPECT_EQ(fmlal1(0x8000, 0x3C00, 0x00000001), 0x00000001u);
}

// inf·0 is invalid and gives the default NaN 0x7FC00000, also with a quiet NaN accumulator (FPMulAdd's special
// case: Arm does not propagate the addend's payload 0x7FC00001 there). A finite step never overflows f32: 65504²
// (about 2^32) is far below half an ulp of FLT_MAX (2^103), so only an infinite operand gives inf.
TEST_F(Fmlal, InvalidGivesTheDefaultNaNAndNothingFiniteOverflows) {
  EXPECT_EQ(fmlal1(0x7C00, 0x0000, 0x3F800000), 0x7FC00000u);
  EXPECT_EQ(fmlal1(0x7C00, 0x0000, 0x7FC00001), 0x7FC00000u);
  EXPECT_EQ(fmlal1(0x3C00, 0x3C00, 0x7FC00001), 0x7FC00001u) << "a NaN accumulator propagates otherwise";
  EXPECT_EQ(fmlal1(0x7BFF, 0x7BFF, 0x7F7FFFFF), 0x7F7FFFFFu);
  EXPECT_EQ(fmlal1(0x7C00, 0x3C00, 0x7F7FFFFF), 0x7F800000u);
}

// The fixed order matters: x = [32768, 2^-10 × 65535]. Sequentially each 2^-10 is a quarter of an f32 ulp at
// 32768 (2^-8) and is lost: 32768. In 32 lanes, lanes 1-31 each sum 2048 of them exactly (2), lane 0 holds
// 32768 (its own 2^-10 lost again), and the fold gives 32768 + 62 = 32830, which rounds to the fp16 32832.
TEST(F32AccModel, LanesChangeTheResult) {
  std::vector<f16> x(65536, f16{0x1400});  // 2^-10
  x[0] = to_f16(32768.0f);
  EXPECT_EQ(f32acc_model_reduce(Op::sum, x.data(), nullptr, x.size(), 1), 32768.0f);
  EXPECT_EQ(f32acc_model_reduce(Op::sum, x.data(), nullptr, x.size(), 32), 32832.0f);
  EXPECT_EQ(f32acc_model_reduce(Op::dot, x.data(), std::vector<f16>(x.size(), to_f16(1.0f)).data(), x.size(), 32),
            32832.0f)
      << "sum is dot with y = 1";
}

}  // namespace
}  // namespace halfmap
