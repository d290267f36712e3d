// half.hpp's narrowing conversions against hardware, over every f32 bit pattern where the machine allows it, and
// the f16 model's add, sub and mul over every pair of fp16 patterns.
//
//   x86-64: all 2^32 f32 patterns -> fp16, to_f16 vs F16C vcvtps2ph (round to nearest even), on every hardware
//           thread; all 2^32 -> bf16, to_bf16 vs an independent reference written here, and vs AVX512-BF16
//           vcvtneps2bf16 for every input that is not an f32 subnormal (that instruction treats subnormal inputs
//           as zero, by design, while to_bf16 rounds them: see half.hpp).
//   arm64:  the same comparisons with fcvtn, over a strided subset (stride 251, a prime, so all low-bit residues
//           are visited) plus every pattern within +-4096 of each boundary of docs/numerics.md, because the suite runs
//           under qemu there.
// The hardware calls live in tests/hw/*.cpp, compiled with their ISA flags; this file is compiled without any.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "halfmap/cpu.hpp"
#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "hw/hw_convert.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::hex32;

/// to_bf16 rewritten from the definition, independently of half.hpp's integer trick: the two bf16 candidates
/// around |x| are the truncation t (the upper 16 bits) and t + 1, both exact f32 values (bf16 is the upper half of
/// an f32), and their midpoint is exact in double; |x| above it rounds up, on it rounds to the even one. Above
/// the largest finite bf16 (0x7F7F) the next value is 2^128, as if the exponent were unbounded, so 0x7F7F8000 and
/// up overflow to inf.
std::uint16_t reference_to_bf16(std::uint32_t u) {
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7FC0u | ((a >> 16) & 0x3Fu));  // quiet NaN
  if (a == 0x7F800000u) return sign | 0x7F80u;
  const std::uint32_t t = a >> 16;
  const double x = double(std::bit_cast<float>(a));
  const double lo = double(std::bit_cast<float>(t << 16));
  const double next = t == 0x7F7Fu ? 0x1p128 : double(std::bit_cast<float>((t + 1) << 16));
  const double mid = (lo + next) / 2;
  std::uint32_t q = t;
  if (x > mid || (x == mid && (t & 1))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

/// Mismatches found by worker threads: a count and the first few, in hex.
class Mismatches {
 public:
  void add(std::uint32_t input, std::uint32_t got, std::uint32_t want) {
    if (count_.fetch_add(1) < kKeep) {
      std::lock_guard<std::mutex> lock(mu_);
      first_.push_back(fmt::format("{} -> 0x{:04X}, want 0x{:04X}", hex32(input), got, want));
    }
  }
  std::uint64_t count() const { return count_.load(); }
  std::string first() {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(first_.begin(), first_.end());
    std::string s;
    for (const auto& m : first_) s += "\n  " + m;
    return s;
  }

 private:
  static constexpr std::uint64_t kKeep = 16;
  std::atomic<std::uint64_t> count_{0};
  std::mutex mu_;
  std::vector<std::string> first_;
};

/// Runs fn(first, count) over all 2^32 patterns in blocks of 2^16, on every hardware thread.
template <class Fn>
double for_all_f32_patterns(Fn fn) {
  constexpr std::uint64_t kBlock = 1u << 16;
  constexpr std::uint64_t kBlocks = (std::uint64_t{1} << 32) / kBlock;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::uint64_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (std::uint64_t b; (b = next.fetch_add(1)) < kBlocks;) fn(std::uint32_t(b * kBlock), std::size_t(kBlock));
    });
  }
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The boundaries of docs/numerics.md (and their negatives), as f32 patterns; the arm64 subset covers +-4096 around
/// each.
constexpr std::uint32_t kBoundaries[] = {
    0x477FF000u,  // 65520: overflow to inf
    0x477FE000u,  // 65504: largest finite
    0x33000000u,  // 2^-25: underflow tie
    0x33800000u,  // 2^-24: smallest subnormal
    0x387FC000u,  // 2^-14 - 2^-25: largest subnormal / smallest normal tie
    0x38800000u,  // 2^-14: smallest normal
    0x3F800000u,  // 1: epsilon and ties around it
    0x7F800000u,  // inf, and the NaNs above it
    0x7FC00000u,  // the quiet NaN
    0x00000000u,  // zero and the f32 subnormals
    0x7F7F8000u,  // bf16 overflow tie
};

#if defined(__aarch64__)
/// A prime, so every residue of the low bits is visited; 17 million patterns take a few seconds under qemu.
constexpr std::uint64_t kArm64Stride = 251;

std::vector<std::uint32_t> arm64_subset() {
  std::vector<std::uint32_t> v;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += kArm64Stride) v.push_back(std::uint32_t(u));
  for (std::uint32_t b : kBoundaries) {
    for (std::uint32_t s : {0u, 0x80000000u}) {
      for (std::int64_t d = -4096; d <= 4096; ++d) {
        const std::int64_t u = std::int64_t(b | s) + d;
        if (u >= 0 && u <= 0xFFFFFFFFll) v.push_back(std::uint32_t(u));
      }
    }
  }
  while (v.size() % 4 != 0) v.push_back(0);
  return v;
}
#endif

// One pass computes to_f16(float) once per pattern and checks it against the hardware, and checks that the f64
// path (the same template, used by the fused multiply-add model) gives the same bits on the same value, which is
// exact in double.
TEST(ExhaustiveF16, NarrowingMatchesHardwareAndTheDoublePathOnEveryF32Pattern) {
  Mismatches bad, bad_double;
  auto check = [&](std::uint32_t u, std::uint16_t hw) {
    const float f = std::bit_cast<float>(u);
    const std::uint16_t lib = to_f16(f).bits;
    if (lib != hw) bad.add(u, lib, hw);
    const std::uint16_t dbl = to_f16(double(f)).bits;
    if (dbl != lib) bad_double.add(u, dbl, lib);
  };
#if defined(__x86_64__)
  if (!cpu_features().f16c) GTEST_SKIP() << "CPU lacks F16C (with OS AVX state): no hardware to compare with";
  const double seconds = for_all_f32_patterns([&](std::uint32_t first, std::size_t count) {
    std::vector<std::uint16_t> hw(count);
    test::hw::f16c_narrow_range(first, count, hw.data());
    for (std::size_t j = 0; j < count; ++j) check(first + std::uint32_t(j), hw[j]);
  });
  const std::uint64_t checked = std::uint64_t{1} << 32;
  const char* what = "F16C vcvtps2ph";
#elif defined(__aarch64__)
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> patterns = arm64_subset();
  std::vector<std::uint16_t> hw(patterns.size());
  test::hw::neon_narrow(patterns.data(), patterns.size(), hw.data());
  for (std::size_t j = 0; j < patterns.size(); ++j) check(patterns[j], hw[j]);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t checked = patterns.size();
  const char* what = "arm64 fcvtn";
#endif
  RecordProperty("patterns", std::to_string(checked));
  RecordProperty("seconds", fmt::format("{:.2f}", seconds));
  std::printf("  %llu patterns against %s in %.2f s\n", static_cast<unsigned long long>(checked), what, seconds);
  EXPECT_EQ(bad.count(), 0u) << "to_f16 (got) differs from " << what << " (want):" << bad.first();
  EXPECT_EQ(bad_double.count(), 0u) << "to_f16(double) (got) differs from to_f16(float) (want):" << bad_double.first();
}

// Widening is exact for every non-NaN pattern, bit for bit with the hardware. For NaNs the hardware (F16C
// vcvtph2ps, arm64 fcvtl) sets the quiet bit of a signalling NaN, whereas to_f32 keeps it signalling and otherwise
// keeps sign and payload: asserted exactly, so a change either way is noticed.
TEST(ExhaustiveF16, WideningMatchesHardwareOnEveryF16Pattern) {
  std::vector<std::uint32_t> hw(65536);
#if defined(__x86_64__)
  if (!cpu_features().f16c) GTEST_SKIP() << "CPU lacks F16C (with OS AVX state): no hardware to compare with";
  test::hw::f16c_widen_all(hw.data());
#elif defined(__aarch64__)
  test::hw::neon_widen_all(hw.data());
#endif
  int signalling = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const std::uint32_t lib = test::bits_of(to_f32(f16{std::uint16_t(b)}));
    if (is_nan(f16{std::uint16_t(b)})) {
      signalling += (b & 0x0200u) == 0;
      EXPECT_EQ(hw[b], lib | 0x00400000u) << fmt::format("0x{:04X}: to_f32 0x{:08X}, hardware 0x{:08X}", b, lib, hw[b]);
    } else {
      EXPECT_EQ(lib, hw[b]) << fmt::format("0x{:04X}: to_f32 0x{:08X}, hardware 0x{:08X}", b, lib, hw[b]);
    }
  }
  EXPECT_EQ(signalling, 2 * 511);
}

TEST(ExhaustiveBf16, NarrowingMatchesIndependentReferenceOnEveryF32Pattern) {
  Mismatches bad;
#if defined(__x86_64__)
  const double seconds = for_all_f32_patterns([&](std::uint32_t first, std::size_t count) {
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t u = first + std::uint32_t(j);
      const std::uint16_t lib = to_bf16(std::bit_cast<float>(u)).bits, want = reference_to_bf16(u);
      if (lib != want) bad.add(u, lib, want);
    }
  });
  const std::uint64_t checked = std::uint64_t{1} << 32;
#elif defined(__aarch64__)
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> patterns = arm64_subset();
  for (std::uint32_t u : patterns) {
    const std::uint16_t lib = to_bf16(std::bit_cast<float>(u)).bits, want = reference_to_bf16(u);
    if (lib != want) bad.add(u, lib, want);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t checked = patterns.size();
#endif
  std::printf("  %llu patterns in %.2f s\n", static_cast<unsigned long long>(checked), seconds);
  EXPECT_EQ(bad.count(), 0u) << "to_bf16 (got) differs from the reference (want):" << bad.first();
}

// ---- the f16 model's operations --------------------------------------------------------------------------------

/// Whether r (fp16 bits) is x correctly rounded to fp16 (to nearest even, inf from 65520 up, the sign kept, a NaN
/// exactly where x is NaN), from decode_f16's values of the patterns around r: independent of half.hpp.
class RoundingCheck {
 public:
  RoundingCheck() {
    for (std::uint32_t b = 0; b < 0x10000; ++b) value_[b] = test::decode_f16(std::uint16_t(b));
    for (std::uint32_t m = 0; m < 0x7C00; ++m) {
      lo_[m] = m == 0 ? 0.0 : (value_[m - 1] + value_[m]) / 2;  // exact: 12 significant bits
      hi_[m] = m == 0x7BFF ? 65520.0 : (value_[m] + value_[m + 1]) / 2;
    }
  }
  double value(std::uint16_t b) const { return value_[b]; }
  bool ok(double x, std::uint16_t r) const {
    if (std::isnan(x) || (r & 0x7FFFu) > 0x7C00u) return std::isnan(x) && (r & 0x7FFFu) > 0x7C00u;
    if (std::signbit(x) != ((r & 0x8000u) != 0)) return false;
    const double a = std::fabs(x);
    const std::uint32_t m = r & 0x7FFFu;
    if (m == 0x7C00u) return a >= 65520.0;
    const bool even = (m & 1) == 0;
    return (a > lo_[m] || (a == lo_[m] && even)) && (a < hi_[m] || (a == hi_[m] && even));
  }

 private:
  std::vector<double> value_ = std::vector<double>(0x10000), lo_ = std::vector<double>(0x7C00),
                      hi_ = std::vector<double>(0x7C00);
};

// f16_model::add, sub and mul (one f32 operation, rounded once to fp16) against the exact result rounded once
// (docs/numerics.md, "Rounding through float32"): on x86-64 every pair of fp16 patterns (2^32, read as a = u >> 16,
// b = u & 0xFFFF), on arm64 the strided subset. The exact sum, difference and product of two fp16 values are exact
// in double (at most 41 and 22 significant bits), and double's zero signs are IEEE's, as f32's. These are the only
// operations of the model that the kernels share (docs/contributing.md, "A reference shares no code with what it
// checks"): each is checked on every operand pair.
TEST(ExhaustiveF16Model, AddSubMulAreCorrectlyRoundedOnEveryPair) {
  const RoundingCheck check;
  Mismatches bad_add, bad_sub, bad_mul;
  auto run = [&](std::uint32_t u) {
    const auto a = std::uint16_t(u >> 16), b = std::uint16_t(u & 0xFFFFu);
    const double va = check.value(a), vb = check.value(b);
    const std::uint16_t sum = f16_model::add(f16{a}, f16{b}).bits;
    const std::uint16_t diff = f16_model::sub(f16{a}, f16{b}).bits;
    const std::uint16_t prod = f16_model::mul(f16{a}, f16{b}).bits;
    if (!check.ok(va + vb, sum)) bad_add.add(u, sum, test::reference_to_f16(va + vb));
    if (!check.ok(va - vb, diff)) bad_sub.add(u, diff, test::reference_to_f16(va - vb));
    if (!check.ok(va * vb, prod)) bad_mul.add(u, prod, test::reference_to_f16(va * vb));
  };
#if defined(__x86_64__)
  const double seconds = for_all_f32_patterns([&](std::uint32_t first, std::size_t count) {
    for (std::size_t j = 0; j < count; ++j) run(first + std::uint32_t(j));
  });
  const std::uint64_t checked = std::uint64_t{1} << 32;
#elif defined(__aarch64__)
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> patterns = arm64_subset();
  for (std::uint32_t u : patterns) run(u);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t checked = patterns.size();
#endif
  std::printf("  %llu pairs in %.2f s\n", static_cast<unsigned long long>(checked), seconds);
  EXPECT_EQ(bad_add.count(), 0u) << "a + b (pair a << 16 | b -> got, want):" << bad_add.first();
  EXPECT_EQ(bad_sub.count(), 0u) << "a - b (pair a << 16 | b -> got, want):" << bad_sub.first();
  EXPECT_EQ(bad_mul.count(), 0u) << "a * b (pair a << 16 | b -> got, want):" << bad_mul.first();
}

#if defined(__x86_64__)
// vcvtneps2bf16 rounds to nearest even like to_bf16, but treats subnormal inputs as zero whatever MXCSR says. So:
// every non-subnormal pattern must match bit for bit, and every subnormal one must give the signed zero from the
// hardware (asserted, so that the reason for excluding them stays true) while to_bf16 rounds it.
TEST(ExhaustiveBf16, NarrowingMatchesAvx512Bf16ExceptOnF32Subnormals) {
  if (!isa_supported(Isa::avx512bf16)) {
    GTEST_SKIP() << "CPU lacks avx512bf16 (" << isa_requirements(Isa::avx512bf16) << ")";
  }
  Mismatches bad, flush;
  std::atomic<std::uint64_t> subnormals{0};
  const double seconds = for_all_f32_patterns([&](std::uint32_t first, std::size_t count) {
    std::vector<std::uint16_t> hw(count);
    test::hw::avx512bf16_narrow_range(first, count, hw.data());
    std::uint64_t sub = 0;
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t u = first + std::uint32_t(j);
      const bool subnormal = (u & 0x7F800000u) == 0 && (u & 0x007FFFFFu) != 0;
      if (subnormal) {
        ++sub;
        const auto zero = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
        if (hw[j] != zero) flush.add(u, hw[j], zero);
        continue;
      }
      const std::uint16_t lib = to_bf16(std::bit_cast<float>(u)).bits;
      if (lib != hw[j]) bad.add(u, lib, hw[j]);
    }
    subnormals += sub;
  });
  std::printf("  2^32 patterns in %.2f s (%llu subnormal)\n", seconds,
              static_cast<unsigned long long>(subnormals.load()));
  EXPECT_EQ(subnormals.load(), 2 * ((std::uint64_t{1} << 23) - 1));
  EXPECT_EQ(bad.count(), 0u) << "to_bf16 (got) differs from vcvtneps2bf16 (want):" << bad.first();
  EXPECT_EQ(flush.count(), 0u) << "vcvtneps2bf16 (got) did not flush a subnormal to zero (want):" << flush.first();
}
#endif

}  // namespace
}  // namespace halfmap
