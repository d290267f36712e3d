// The fp8 conversion kernels (conversions.hpp's Fp8Conversion, kernels/common/fp8_convert.hpp) against fp8.hpp's
// model, bit for bit, on every path this CPU runs:
//   encoding: every float32 pattern (all 2^32 in release builds; under ASan and on arm64, which runs under qemu,
//     every 251st plus every pattern within ±4096 of each boundary of the formats), in both overflow modes;
//   decoding: all 256 patterns;
//   every length from 0 to 3 vectors past the widest path, at every misalignment, with guard bytes on both sides
//   (the vector body, the tail, and nothing written outside).
// The MX element conversions (conversions.hpp's MxConversion) likewise against mx.hpp: encoding on a strided sample
// plus every pattern near each element type's boundaries, every element decoded, and whole blocks quantised.
// The roundings in float32 that the scaled modes cast with (Fp8RoundFn, MxRoundFn) likewise: fp8's on every
// pattern the encoding sees, against the encoding read back; MX blocks against mx_quantize read back.
// fp8_test and mx_test check the models themselves against oracles written from the definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "halfmap/conversions.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/mx.hpp"
#include "halfmap/registry.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

std::vector<const Fp8Conversion*> enabled(Fp8 f) {
  std::vector<const Fp8Conversion*> v;
  for (const Fp8Conversion& c : fp8_conversions())
    if (c.format == f && conversion_enabled(c)) v.push_back(&c);
  return v;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__aarch64__)
constexpr bool kAllPatterns = false;
#else
constexpr bool kAllPatterns = true;
#endif

/// A prime, so every residue of the low bits is visited: 17 million patterns, a few seconds under qemu or ASan.
constexpr std::uint64_t kSampleStride = 251;

/// The patterns to encode, in blocks: all 2^32, or the sampled subset.
std::vector<std::uint32_t> sampled_patterns() {
  std::vector<std::uint32_t> v;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += kSampleStride) v.push_back(std::uint32_t(u));
  // The formats' boundaries: largest finite, the overflow ties (464, 61440), the binades around them, the smallest
  // normals and subnormals and half of these, 1, zero and the float32 subnormals, inf and the NaNs; and ties
  // between two normals (1.0625 in E4M3, 1.125 in E5M2) and two subnormals (3·2^-10, 3·2^-17), where a path that
  // rounds to fp16 first lands exactly on the tie for every pattern within ±4096 of it (neonfp16).
  const float kBoundaries[] = {448.0f,  464.0f,  480.0f,   512.0f,   57344.0f, 61440.0f, 65536.0f,
                               0x1p-6f, 0x1p-9f, 0x1p-10f, 0x1p-14f, 0x1p-16f, 0x1p-17f, 1.0f,
                               0.0f,    1.0625f, 1.125f,   0x3p-10f, 0x3p-17f};
  std::vector<std::uint32_t> centres;
  for (float b : kBoundaries) centres.push_back(std::bit_cast<std::uint32_t>(b));
  centres.push_back(0x7F800000u);
  centres.push_back(0x7FC00000u);
  for (std::uint32_t c : centres)
    for (std::uint32_t s : {0u, 0x80000000u})
      for (std::int64_t d = -4096; d <= 4096; ++d) {
        const std::int64_t u = std::int64_t(c | s) + d;
        if (u >= 0 && u <= 0xFFFFFFFFll) v.push_back(std::uint32_t(u));
      }
  return v;
}

/// Mismatches per kernel and overflow mode: a count and the first few.
class Mismatches {
 public:
  void add(const std::string& where, std::uint32_t input, unsigned got, unsigned want) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& [count, first] = by_kernel_[where];
    if (++count <= 8) first += fmt::format("\n  {} -> 0x{:02X}, want 0x{:02X}", test::hex32(input), got, want);
  }
  std::string report() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& [where, entry] : by_kernel_)
      s += fmt::format("\n{}: {} mismatches{}", where, entry.first, entry.second);
    return s;
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return by_kernel_.empty();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<std::uint64_t, std::string>> by_kernel_;
};

class Fp8Encode : public ::testing::TestWithParam<Fp8> {};

TEST_P(Fp8Encode, EveryFloat32PatternMatchesTheModelOnEveryPath) {
  const Fp8 f = GetParam();
  const std::vector<const Fp8Conversion*> convs = enabled(f);
  ASSERT_FALSE(convs.empty()) << "the ref conversion is always enabled";
  Mismatches bad;
  // One block: the model once per pattern and overflow mode, then every kernel on the same inputs.
  auto check = [&](const std::uint32_t* patterns, std::size_t count) {
    const float* x = reinterpret_cast<const float*>(patterns);
    std::vector<std::uint8_t> want(count), got(count);
    // The rounding onto the grid in float32 (Fp8RoundFn) against the model's encoding read back.
    std::vector<float> want_v(count), got_v(count);
    for (std::size_t j = 0; j < count; ++j) want_v[j] = from_fp8(to_fp8(x[j], f, Fp8Overflow::saturate), f);
    for (const Fp8Conversion* c : convs) {
      c->round(x, count, 1.0f, 1.0f, got_v.data());
      for (std::size_t j = 0; j < count; ++j)
        if (test::bits_of(got_v[j]) != test::bits_of(want_v[j]))
          bad.add(fmt::format("{} round", c->name), patterns[j], test::bits_of(got_v[j]), test::bits_of(want_v[j]));
    }
    for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonsaturating}) {
      for (std::size_t j = 0; j < count; ++j) want[j] = to_fp8(std::bit_cast<float>(patterns[j]), f, o);
      for (const Fp8Conversion* c : convs) {
        c->encode(o)(x, got.data(), count);
        for (std::size_t j = 0; j < count; ++j)
          if (got[j] != want[j])
            bad.add(fmt::format("{} {}", c->name, o == Fp8Overflow::saturate ? "saturating" : "non-saturating"),
                    patterns[j], got[j], want[j]);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t checked = 0;
  if (kAllPatterns) {
    constexpr std::uint64_t kBlock = 1u << 16, kBlocks = (std::uint64_t{1} << 32) / kBlock;
    std::atomic<std::uint64_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
      pool.emplace_back([&] {
        std::vector<std::uint32_t> block(kBlock);
        for (std::uint64_t b; (b = next.fetch_add(1)) < kBlocks;) {
          for (std::uint64_t j = 0; j < kBlock; ++j) block[j] = std::uint32_t(b * kBlock + j);
          check(block.data(), block.size());
        }
      });
    for (auto& th : pool) th.join();
    checked = std::uint64_t{1} << 32;
  } else {
    const std::vector<std::uint32_t> patterns = sampled_patterns();
    check(patterns.data(), patterns.size());
    checked = patterns.size();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string names;
  for (const Fp8Conversion* c : convs) names += std::string(names.empty() ? "" : ", ") + std::string(c->name);
  std::printf("  %llu patterns, both overflow modes and the rounding in float32, on %s in %.1f s\n",
              static_cast<unsigned long long>(checked), names.c_str(), seconds);
  EXPECT_TRUE(bad.empty()) << "kernel (got) differs from to_fp8 (want):" << bad.report();
}

TEST_P(Fp8Encode, Every8BitPatternDecodesAsTheModelOnEveryPath) {
  const Fp8 f = GetParam();
  std::vector<std::uint8_t> all(256);
  for (unsigned b = 0; b < 256; ++b) all[b] = static_cast<std::uint8_t>(b);
  for (const Fp8Conversion* c : enabled(f)) {
    std::vector<float> got(256);
    c->decode(all.data(), got.data(), all.size());
    for (unsigned b = 0; b < 256; ++b) {
      const std::uint32_t want = test::bits_of(from_fp8(std::uint8_t(b), f));
      EXPECT_EQ(test::bits_of(got[b]), want) << fmt::format("{}: 0x{:02X}", c->name, b);
    }
  }
}

// Every length through the vector body and the tail, at every misalignment, with guard values on both sides. The
// inputs mix normals, subnormals, overflows, infinities and NaNs of both signs.
TEST_P(Fp8Encode, EveryLengthAndAlignmentWritesExactlyItsOutputs) {
  const Fp8 f = GetParam();
  constexpr std::size_t kMaxN = 3 * 16 + 1, kGuard = 8;
  constexpr std::uint8_t kGuardByte = 0xA5;
  const float kValues[] = {0.0f,    -0.0f,  1.0f, -1.5f,     0x1p-8f, -0x1p-12f, 0x1p-17f, 300.0f,
                           -464.0f, 470.0f, 6e4f, -61440.0f, 1e30f,   -1e-30f,   0.1f,     -3.3f};
  std::vector<float> src(kMaxN + 16);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = kValues[(i * 7) % std::size(kValues)];
  src[5] = std::numeric_limits<float>::infinity();
  src[11] = -std::numeric_limits<float>::quiet_NaN();
  for (const Fp8Conversion* c : enabled(f)) {
    for (std::size_t off = 0; off < 16; ++off) {
      for (std::size_t n = 0; n <= kMaxN; ++n) {
        for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonsaturating}) {
          std::vector<std::uint8_t> out(n + 2 * kGuard + off, kGuardByte);
          c->encode(o)(src.data() + off, out.data() + kGuard + off, n);
          for (std::size_t i = 0; i < out.size(); ++i) {
            const bool inside = i >= kGuard + off && i < kGuard + off + n;
            const std::uint8_t want = inside ? to_fp8(src[off + i - kGuard - off], f, o) : kGuardByte;
            ASSERT_EQ(out[i], want) << fmt::format("{} n={} offset={} byte {}", c->name, n, off, i);
          }
          // And back: the decoded values land exactly where they belong.
          std::vector<float> back(n + 2 * kGuard + off, -7.0f);
          c->decode(out.data() + kGuard + off, back.data() + kGuard + off, n);
          for (std::size_t i = 0; i < back.size(); ++i) {
            const bool inside = i >= kGuard + off && i < kGuard + off + n;
            const std::uint32_t want = test::bits_of(inside ? from_fp8(out[i], f) : -7.0f);
            ASSERT_EQ(test::bits_of(back[i]), want)
                << fmt::format("{} decode n={} offset={} float {}", c->name, n, off, i);
          }
        }
      }
    }
  }
}

// The rounding with a scale and an unscale that round (3.5 and its reciprocal): every length through the vector
// body and the tail, at every misalignment, with guards on both sides, out of place and in place.
TEST_P(Fp8Encode, RoundIsTheScaledCastReadBackTimesTheUnscaleAtEveryLength) {
  const Fp8 f = GetParam();
  constexpr std::size_t kMaxN = 3 * 16 + 1, kGuard = 8;
  constexpr float kGuardValue = -7.0f, kScale = 3.5f, kUnscale = 1.0f / kScale;
  const float kValues[] = {0.0f,    -0.0f,  1.0f,   -1.5f, 0x1p-8f, -0x1p-12f, 0x1p-17f, 128.0f,
                           -132.6f, 134.3f, 1.7e4f, -2e4f, 1e30f,   -1e-30f,   0.1f,     -3.3f};
  std::vector<float> src(kMaxN + 16);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = kValues[(i * 7) % std::size(kValues)];
  src[5] = std::numeric_limits<float>::infinity();
  src[11] = -std::numeric_limits<float>::quiet_NaN();
  auto want_of = [&](float v) { return from_fp8(to_fp8(v * kScale, f, Fp8Overflow::saturate), f) * kUnscale; };
  for (const Fp8Conversion* c : enabled(f)) {
    for (std::size_t off = 0; off < 16; ++off) {
      for (std::size_t n = 0; n <= kMaxN; ++n) {
        std::vector<float> out(n + 2 * kGuard + off, kGuardValue);
        c->round(src.data() + off, n, kScale, kUnscale, out.data() + kGuard + off);
        std::vector<float> in_place(src.begin() + long(off), src.begin() + long(off + n));
        c->round(in_place.data(), n, kScale, kUnscale, in_place.data());
        for (std::size_t i = 0; i < out.size(); ++i) {
          const bool inside = i >= kGuard + off && i < kGuard + off + n;
          const float want = inside ? want_of(src[i - kGuard]) : kGuardValue;
          ASSERT_EQ(test::bits_of(out[i]), test::bits_of(want))
              << fmt::format("{} n={} offset={} float {}", c->name, n, off, i);
          if (inside) {
            ASSERT_EQ(test::bits_of(in_place[i - kGuard - off]), test::bits_of(want))
                << fmt::format("{} in place n={} offset={}", c->name, n, off);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Encode, ::testing::Values(Fp8::e4m3, Fp8::e5m2),
                         [](const auto& info) { return std::string(fp8_name(info.param)); });

// The paths that have conversions: ref everywhere, avx2 and avx512 on x86-64, neon (integer lanes) and neonfp16
// (through fp16) on arm64; each format once per path, named <format>_convert__<isa>.
TEST(Fp8Conversions, EveryCompiledVectorPathHasBothFormats) {
#if defined(__x86_64__)
  const Isa kPaths[] = {Isa::ref, Isa::avx2, Isa::avx512};
#else
  const Isa kPaths[] = {Isa::ref, Isa::neon, Isa::neonfp16};
#endif
  for (Isa isa : kPaths) {
    for (Fp8 f : {Fp8::e4m3, Fp8::e5m2}) {
      const auto n = std::count_if(fp8_conversions().begin(), fp8_conversions().end(), [&](const Fp8Conversion& c) {
        return c.isa == isa && c.format == f && c.name == fmt::format("{}_convert__{}", fp8_name(f), isa_name(isa));
      });
      EXPECT_EQ(n, 1) << fp8_name(f) << " on " << isa_name(isa);
    }
  }
  EXPECT_EQ(fp8_conversions().size(), 2 * std::size(kPaths));
}

// ---- MX element conversions and block quantisation (conversions.hpp's MxConversion) -------------------------------

std::vector<const MxConversion*> enabled_mx(MxElem t) {
  std::vector<const MxConversion*> v;
  for (const MxConversion& c : mx_conversions())
    if (c.elem == t && conversion_enabled(c)) v.push_back(&c);
  return v;
}

class MxConvert : public ::testing::TestWithParam<MxElem> {};

// Every 97th float32 pattern (every 4099th under ASan and qemu) and every pattern within ±4096 of the element
// type's boundaries: its largest finite and the tie above it, its smallest normal and subnormal and half of that.
TEST_P(MxConvert, EncodeMatchesTheModel) {
  const MxElem t = GetParam();
  const MxElemFormat F = mx_format(t);
  std::vector<std::uint32_t> patterns;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += test::kPatternStride) patterns.push_back(std::uint32_t(u));
  const float top_tie = F.max + std::ldexp(0.5f, F.emax - F.mant_bits);
  // ... and a tie between two normals (above 1) and between two subnormals, where a path that rounds to fp16 first
  // lands exactly on the tie for every pattern within ±4096 of it (neonfp16).
  const float normal_tie = 1.0f + std::ldexp(1.0f, -F.mant_bits - 1);
  const float subnormal_tie = std::ldexp(1.5f, F.emin - F.mant_bits);
  for (float c : {F.max, top_tie, std::ldexp(1.0f, F.emin), std::ldexp(1.0f, F.emin - F.mant_bits),
                  std::ldexp(1.0f, F.emin - F.mant_bits - 1), 1.0f, 0.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), normal_tie, subnormal_tie})
    for (std::uint32_t s : {0u, 0x80000000u})
      for (std::int64_t d = -4096; d <= 4096; ++d) {
        const std::int64_t u = std::int64_t(std::bit_cast<std::uint32_t>(c) | s) + d;
        if (u >= 0 && u <= 0xFFFFFFFFll) patterns.push_back(std::uint32_t(u));
      }
  const float* x = reinterpret_cast<const float*>(patterns.data());
  std::vector<std::uint8_t> want(patterns.size()), got(patterns.size());
  for (std::size_t j = 0; j < patterns.size(); ++j) want[j] = mx_round_elem(x[j], t);
  for (const MxConversion* c : enabled_mx(t)) {
    c->encode(x, got.data(), patterns.size());
    std::size_t bad = 0;
    for (std::size_t j = 0; j < patterns.size(); ++j)
      if (got[j] != want[j] && ++bad <= 8)
        ADD_FAILURE() << fmt::format("{}: {} -> 0x{:02X}, want 0x{:02X}", c->name, test::hex32(patterns[j]), got[j],
                                     want[j]);
    EXPECT_EQ(bad, 0u) << c->name << " over " << patterns.size() << " patterns";
  }
}

TEST_P(MxConvert, EveryElementDecodesAsTheModel) {
  const MxElem t = GetParam();
  const unsigned count = 1u << mx_format(t).bits;
  std::vector<std::uint8_t> all(count);
  for (unsigned b = 0; b < count; ++b) all[b] = static_cast<std::uint8_t>(b);
  for (const MxConversion* c : enabled_mx(t)) {
    std::vector<float> got(count);
    c->decode(all.data(), got.data(), count);
    for (unsigned b = 0; b < count; ++b)
      EXPECT_EQ(test::bits_of(got[b]), test::bits_of(mx_elem_value(std::uint8_t(b), t)))
          << fmt::format("{}: 0x{:02X}", c->name, b);
  }
}

// Blocks of every kind: magnitudes from float32's subnormals to its largest, zero blocks, blocks holding a NaN or an
// inf, and blocks whose elements span more binades than the element type (flushing inside the block).
TEST_P(MxConvert, QuantizeMatchesTheModelBlockByBlock) {
  const MxElem t = GetParam();
  constexpr std::size_t kBlocks = 600;
  std::mt19937_64 rng(test::case_seed(static_cast<std::uint64_t>(t), 25));
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> sign(0, 1), spread(0, 40), centre(-140, 120);
  std::vector<float> x(kBlocks * kMxBlock);
  for (std::size_t b = 0; b < kBlocks; ++b) {
    const int c = centre(rng), w = spread(rng);
    for (std::size_t i = 0; i < kMxBlock; ++i) {
      const int e = std::clamp(c - std::uniform_int_distribution<int>(0, w)(rng), -149, 127);
      x[b * kMxBlock + i] = (sign(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), e);
    }
    if (b % 50 == 1) std::fill_n(x.begin() + long(b * kMxBlock), kMxBlock, 0.0f);
    if (b % 50 == 2) x[b * kMxBlock + 7] = std::numeric_limits<float>::quiet_NaN();
    if (b % 50 == 3) x[b * kMxBlock + 31] = -std::numeric_limits<float>::infinity();
    if (b % 50 == 4) x[b * kMxBlock] = std::numeric_limits<float>::max();
  }
  for (const MxConversion* c : enabled_mx(t)) {
    std::vector<std::uint8_t> scales(kBlocks), elems(kBlocks * kMxBlock);
    c->quantize(x.data(), kBlocks, scales.data(), elems.data());
    for (std::size_t b = 0; b < kBlocks; ++b) {
      const MxBlock want = mx_quantize(std::span<const float, kMxBlock>(x.data() + b * kMxBlock, kMxBlock), t);
      ASSERT_EQ(scales[b], want.scale) << c->name << " block " << b;
      for (std::size_t i = 0; i < kMxBlock; ++i)
        ASSERT_EQ(elems[b * kMxBlock + i], want.elems[i]) << c->name << " block " << b << " element " << i;
    }
  }
}

/// The model of MxRoundFn: blocks of kMxBlock along x (the last padded with zeros), each value read back as
/// mx_value of its block's mx_quantize.
std::vector<float> model_mx_round(std::span<const float> x, MxElem t) {
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += kMxBlock) {
    std::array<float, kMxBlock> v{};
    std::copy(x.begin() + long(b), x.begin() + long(std::min(x.size(), b + kMxBlock)), v.begin());
    const MxBlock q = mx_quantize(std::span<const float, kMxBlock>(v), t);
    for (std::size_t i = 0; i < kMxBlock && b + i < x.size(); ++i) out[b + i] = mx_value(q, i, t);
  }
  return out;
}

// The blocks read back in float32 (MxRoundFn): the random blocks of the test above at every length around a block
// (the last block partial), out of place and in place; and every sampled float32 pattern below the element type's
// top binade (or saturating inside it) as an element at scale 1, each block anchored by 2^emax.
TEST_P(MxConvert, RoundIsTheQuantisedBlockReadBack) {
  const MxElem t = GetParam();
  const MxElemFormat F = mx_format(t);
  std::mt19937_64 rng(test::case_seed(static_cast<std::uint64_t>(t), 26));
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> sign(0, 1), spread(0, 40), centre(-140, 120);
  std::vector<float> x(40 * kMxBlock);
  for (std::size_t b = 0; b < 40; ++b) {
    const int c = centre(rng), w = spread(rng);
    for (std::size_t i = 0; i < kMxBlock; ++i) {
      const int e = std::clamp(c - std::uniform_int_distribution<int>(0, w)(rng), -149, 127);
      x[b * kMxBlock + i] = (sign(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), e);
    }
  }
  x[2 * kMxBlock + 7] = std::numeric_limits<float>::quiet_NaN();
  x[3 * kMxBlock + 31] = -std::numeric_limits<float>::infinity();
  std::fill_n(x.begin() + 4 * long(kMxBlock), kMxBlock, 0.0f);
  const float anchor = std::ldexp(1.0f, F.emax);
  std::vector<float> grid;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += test::kPatternStride) {
    const float v = std::bit_cast<float>(std::uint32_t(u));
    if (!(std::fabs(v) < 2.0f * anchor)) continue;
    if (grid.size() % kMxBlock == 0) grid.push_back(anchor);
    grid.push_back(v);
  }
  const std::vector<float> want_grid = model_mx_round(grid, t);
  for (const MxConversion* c : enabled_mx(t)) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33},
                          std::size_t{5 * kMxBlock - 3}, x.size()}) {
      const std::span<const float> in(x.data(), n);
      const std::vector<float> want = model_mx_round(in, t);
      std::vector<float> got(n + 1, -7.0f), in_place(in.begin(), in.end());
      c->round(in.data(), n, got.data());
      c->round(in_place.data(), n, in_place.data());
      ASSERT_EQ(test::bits_of(got[n]), test::bits_of(-7.0f)) << c->name << " wrote past n = " << n;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(test::bits_of(got[i]), test::bits_of(want[i])) << c->name << " n = " << n << " value " << i;
        ASSERT_EQ(test::bits_of(in_place[i]), test::bits_of(want[i])) << c->name << " in place, n = " << n;
      }
    }
    std::vector<float> got(grid.size());
    c->round(grid.data(), grid.size(), got.data());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < grid.size(); ++i)
      if (test::bits_of(got[i]) != test::bits_of(want_grid[i]) && ++bad <= 8)
        ADD_FAILURE() << fmt::format("{}: {} -> {}, want {}", c->name, test::hex32(test::bits_of(grid[i])),
                                     test::hex32(test::bits_of(got[i])), test::hex32(test::bits_of(want_grid[i])));
    EXPECT_EQ(bad, 0u) << c->name << " over " << grid.size() << " values";
  }
}

INSTANTIATE_TEST_SUITE_P(Elements, MxConvert,
                         ::testing::Values(MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1),
                         [](const auto& info) { return std::string(mx_name(info.param)); });

TEST(MxConversions, EveryCompiledVectorPathHasEveryElementType) {
#if defined(__x86_64__)
  const Isa kPaths[] = {Isa::ref, Isa::avx2, Isa::avx512};
#else
  const Isa kPaths[] = {Isa::ref, Isa::neon, Isa::neonfp16};
#endif
  for (Isa isa : kPaths)
    for (MxElem t : {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
      const auto n = std::count_if(mx_conversions().begin(), mx_conversions().end(), [&](const MxConversion& c) {
        return c.isa == isa && c.elem == t && c.name == fmt::format("{}_convert__{}", mx_name(t), isa_name(isa));
      });
      EXPECT_EQ(n, 1) << mx_name(t) << " on " << isa_name(isa);
    }
  EXPECT_EQ(mx_conversions().size(), 5 * std::size(kPaths));
}

}  // namespace
}  // namespace halfmap
