// The data section's fp8 and MX counts (src/diagnose/fp8.cpp, which classifies by thresholds) against the models
// value by value: per-tensor formats through fp8.hpp's to_fp8 in both overflow modes (clipped: the saturating and
// the non-saturating cast differ), MX through mx.hpp's mx_quantize with the clip decided in double from the
// element type's definition. And the recipe of fp8_scaling.hpp: Transformer Engine's scale rule and its delayed
// scaling's history.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "diagnose/internal.hpp"
#include "diagnose/net_runner.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "halfmap/mx.hpp"

namespace halfmap::diagnose {
namespace {

constexpr MxElem kMxOrder[] = {MxElem::e4m3, MxElem::e5m2, MxElem::e3m2, MxElem::e2m3, MxElem::e2m1};

Fp8Effect model_per_tensor(const std::vector<float>& x, Fp8 f) {
  Fp8Effect e;
  float amax = 0;
  bool nan = false;
  for (float v : x) {
    nan = nan || std::isnan(v);
    amax = std::max(amax, std::fabs(v));
  }
  const float s = fp8_scale(nan ? std::numeric_limits<float>::quiet_NaN() : amax, f);
  e.scale = s;
  const int mant = fp8_format(f).mant_bits;
  for (float v : x) {
    if (v == 0 || std::isnan(v)) continue;
    const float y = v * s;
    const std::uint8_t sat = to_fp8(y, f, Fp8Overflow::saturate), non = to_fp8(y, f, Fp8Overflow::nonsaturating);
    const unsigned mag = sat & 0x7Fu;
    if (sat != non) {
      ++e.clipped;
    } else if (mag == 0) {
      ++e.flushed;
    } else if (mag < (1u << mant)) {
      ++e.subnormal;
    }
  }
  return e;
}

Fp8Effect model_mx(const std::vector<float>& x, MxElem t) {
  Fp8Effect e;
  const MxElemFormat F = mx_format(t);
  // The rounding's top in double: the value after the largest finite as if the exponent range went on, the
  // midpoint, and whether a tie there goes up (the largest finite's encoding is odd).
  const double top_ulp = std::ldexp(1.0, F.emax - F.mant_bits), mid = double(F.max) + top_ulp / 2;
  const bool tie_up = (F.max_bits & 1u) != 0;
  const std::uint32_t mag_mask = (std::uint32_t{1} << (F.bits - 1)) - 1;
  for (std::size_t b = 0; b < x.size(); b += kMxBlock) {
    std::array<float, kMxBlock> block{};  // the short last block padded with zeros
    const std::size_t len = std::min(kMxBlock, x.size() - b);
    std::copy(x.begin() + long(b), x.begin() + long(b + len), block.begin());
    const MxBlock q = mx_quantize(std::span<const float, kMxBlock>(block), t);
    if (q.scale == kE8M0Nan) {
      e.lost += len;
      continue;
    }
    for (std::size_t i = 0; i < len; ++i) {
      if (block[i] == 0) continue;
      const double y = std::fabs(double(block[i])) * std::ldexp(1.0, 127 - int(q.scale));
      const std::uint32_t mag = q.elems[i] & mag_mask;
      if (y > mid || (y == mid && tie_up)) {
        ++e.clipped;
        EXPECT_EQ(mag, F.max_bits) << "a clipped value is stored as the largest finite";
      } else if (mag == 0) {
        ++e.flushed;
      } else if (mag < (1u << F.mant_bits)) {
        ++e.subnormal;
      }
    }
  }
  return e;
}

void expect_same(const Fp8Effect& got, const Fp8Effect& want, std::string_view what) {
  EXPECT_EQ(got.clipped, want.clipped) << what << " clipped";
  EXPECT_EQ(got.flushed, want.flushed) << what << " flushed";
  EXPECT_EQ(got.subnormal, want.subnormal) << what << " subnormal";
  EXPECT_EQ(got.lost, want.lost) << what << " lost";
  EXPECT_EQ(got.scale, want.scale) << what << " scale";
}

void expect_all_match(const std::vector<float>& x) {
  const std::vector<Fp8Effect> got = fp8_effects(x.data(), x.size());
  ASSERT_EQ(got.size(), std::size(kFp8Storages));
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].format, kFp8Storages[k]);
  expect_same(got[0], model_per_tensor(x, Fp8::e4m3), "e4m3");
  expect_same(got[1], model_per_tensor(x, Fp8::e5m2), "e5m2");
  for (std::size_t k = 0; k < std::size(kMxOrder); ++k)
    expect_same(got[2 + k], model_mx(x, kMxOrder[k]), mx_name(kMxOrder[k]));
}

// Magnitudes over 60 binades, so that every format flushes, keeps subnormals and (MX) clips; odd length, so the
// last MX block is short; zeros and both signs.
TEST(DiagnoseFp8, CountsMatchTheModelsValueByValue) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> binade(-40, 20), sign(0, 1), zero(0, 19);
    std::vector<float> x(1000 + 7 * seed);
    for (float& v : x) v = zero(rng) == 0 ? 0.0f : (sign(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), binade(rng));
    expect_all_match(x);
    const std::vector<Fp8Effect> got = fp8_effects(x.data(), x.size());
    std::size_t flushed = 0, clipped = 0, subnormal = 0;
    for (const Fp8Effect& e : got) flushed += e.flushed, clipped += e.clipped, subnormal += e.subnormal;
    EXPECT_GT(flushed, 0u);
    EXPECT_GT(clipped, 0u);
    EXPECT_GT(subnormal, 0u);
  }
}

// The boundaries exactly: values on and next to each format's flush tie and clip tie, scaled by the block's
// power of two (MX) or placed so that amax maps to the largest finite (per-tensor).
TEST(DiagnoseFp8, ValuesOnTheTiesMatchTheModels) {
  std::vector<float> x;
  for (float centre : {0x1p-10f, 0x1p-17f, 0x1p-5f, 0x1p-4f, 0x1p-3f, 0x1p-2f, 7.0f, 7.75f, 30.0f, 464.0f, 61440.0f})
    for (float v : {std::nextafter(centre, 0.0f), centre, std::nextafter(centre, 1e9f)}) x.push_back(v);
  expect_all_match(x);
  // One block holding its own largest value, so the shared exponent puts each centre on an element type's tie.
  for (float top : {4.0f, 6.0f, 7.0f, 7.5f, 7.75f, 28.0f, 30.0f, 32.0f, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f}) {
    std::vector<float> b(kMxBlock, 0.0f);
    b[0] = top;
    b[1] = std::nextafter(top, 0.0f);
    b[2] = std::nextafter(top, 1e9f);
    b[3] = top / 64;
    expect_all_match(b);
  }
}

TEST(DiagnoseFp8, NonFiniteValues) {
  std::vector<float> x(70, 1.0f);
  x[40] = std::numeric_limits<float>::infinity();
  const std::vector<Fp8Effect> inf = fp8_effects(x.data(), x.size());
  EXPECT_EQ(inf[0].scale, 1.0) << "amax = inf: Transformer Engine keeps the previous scale (1 at the first cast)";
  EXPECT_EQ(inf[0].clipped, 1u) << "the saturating cast clips the inf";
  EXPECT_EQ(inf[2].lost, 32u) << "the MX block of rows 32 .. 63 gets the NaN scale";
  expect_all_match(x);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Fp8Effect> nan = fp8_effects(x.data(), x.size());
  EXPECT_EQ(nan[1].scale, 1.0);
  EXPECT_EQ(nan[1].clipped + nan[1].flushed, 0u);
  expect_all_match(x);
  // A float64 column is rounded to float32 first: 1e300 is an infinity there.
  const std::vector<double> d = {1.0, 1e300, -2.0};
  EXPECT_EQ(fp8_effects(d.data(), d.size())[0].clipped, 1u);
}

TEST(Fp8Scaling, TransformerEngineRule) {
  EXPECT_EQ(fp8_scale(2.0f, Fp8::e4m3), 224.0f);
  EXPECT_EQ(fp8_scale(2.0f, Fp8::e5m2), 28672.0f);
  EXPECT_EQ(fp8_scale(2.0f, Fp8::e4m3, 1), 112.0f) << "margin 1 halves the scale";
  EXPECT_EQ(fp8_scale(0.0f, Fp8::e4m3, 0, 3.0f), 3.0f) << "amax 0 keeps the previous scale";
  EXPECT_EQ(fp8_scale(std::numeric_limits<float>::infinity(), Fp8::e4m3, 0, 3.0f), 3.0f);
  EXPECT_EQ(fp8_scale(std::numeric_limits<float>::quiet_NaN(), Fp8::e4m3, 0, 3.0f), 3.0f);
}

// A one-step spike of 2^k in the amax: the cast at the spike uses the old scale (k binades too large), and the
// spike then holds the scale 2^k too small for exactly history_len steps.
TEST(Fp8Scaling, DelayedScalingHistory) {
  for (std::size_t len : {1u, 4u, 16u}) {
    DelayedScaler d(Fp8::e4m3, len);
    EXPECT_EQ(d.scale(), 1.0f) << "before any amax: 1";
    for (int i = 0; i < 20; ++i) d.record(1.0f);
    EXPECT_EQ(d.scale(), 448.0f);
    d.record(1024.0f);  // the spike, cast with the scale 448
    std::size_t small = 0;
    for (int i = 0; i < 40; ++i) {
      small += d.scale() == 448.0f / 1024.0f;
      d.record(1.0f);
    }
    EXPECT_EQ(small, len) << "history " << len;
    EXPECT_EQ(d.scale(), 448.0f);
  }
  DelayedScaler d(Fp8::e5m2, 8);
  d.record(2.0f);
  d.record(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(d.scale(), 28672.0f) << "a NaN in the history keeps the scale";
}

/// `halfmap diagnose --model`'s per-layer counts (LayerForward::fp8, the f32 baseline's only) against the models
/// on the baseline's own outputs: per batch one per-tensor cast with that batch's scale, MX blocks along each row (a
/// row of 40 has a block of 8). Batches of 6 over 20 rows (the last one shorter), with inputs growing 4x from batch
/// to batch, so that one scale for all rows, or blocks across rows, would count otherwise.
TEST(ModelFp8, LayerCountsAreThoseOfEachBatchsCast) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  onnx::Network net;
  net.features = 5;
  auto add = [&](onnx::LayerKind k, std::size_t in, std::size_t out) {
    onnx::Layer l;
    l.kind = k;
    l.in = in;
    l.out = out;
    l.name = std::string(onnx::kind_name(k));
    if (k == onnx::LayerKind::dense) {
      for (std::size_t i = 0; i < in * out; ++i) l.weight.values.push_back(0.5f * n(rng));
      for (std::size_t i = 0; i < out; ++i) l.bias.values.push_back(0.1f * n(rng));
    }
    net.layers.push_back(l);
  };
  add(onnx::LayerKind::dense, 5, 40);
  add(onnx::LayerKind::gelu, 40, 40);
  add(onnx::LayerKind::dense, 40, 3);
  const std::size_t rows = 20, batch = 6;
  npy::Array xa;
  xa.rows = rows;
  xa.cols = 5;
  xa.ndim = 2;
  for (std::size_t i = 0; i < rows * 5; ++i) xa.values.push_back(double(n(rng) * std::ldexp(1.0f, 2 * int(i / 30))));
  const Table x = Table::from_array(xa);
  Options o;
  o.batch = batch;
#ifdef HALFMAP_TEST_NO_THREADS
  o.threads = 1;  // under the emulator: no thread (tests/CMakeLists.txt, sweep_test)
#else
  o.threads = 2;  // the layers' counts are summed over threads
#endif
  const ModelReport r = run_model(net, "net.onnx", x, Loss::none, nullptr, o);

  NetRunner run(net, baseline_net_path(net, Loss::none), Loss::none, rows, rows, 1);
  run.load(x, nullptr, 0, rows);
  run.forward();
  for (std::size_t l = 0; l < net.layers.size(); ++l) {
    const std::size_t width = net.layers[l].out;
    const auto* y = static_cast<const float*>(run.out(l).data());
    std::vector<Fp8Effect> want(std::size(kFp8Storages));
    auto sum = [](Fp8Effect& into, const Fp8Effect& e) {
      into.clipped += e.clipped;
      into.flushed += e.flushed;
      into.subnormal += e.subnormal;
      into.lost += e.lost;
    };
    for (std::size_t r0 = 0; r0 < rows; r0 += batch) {
      const std::vector<float> b(y + r0 * width, y + std::min(rows, r0 + batch) * width);
      sum(want[0], model_per_tensor(b, Fp8::e4m3));
      sum(want[1], model_per_tensor(b, Fp8::e5m2));
      for (std::size_t row = 0; row * width < b.size(); ++row) {
        const std::vector<float> one(b.begin() + long(row * width), b.begin() + long((row + 1) * width));
        for (std::size_t k = 0; k < std::size(kMxOrder); ++k) sum(want[2 + k], model_mx(one, kMxOrder[k]));
      }
    }
    const std::vector<Fp8Effect>& got = r.baseline.layers[l].fp8;
    ASSERT_EQ(got.size(), std::size(kFp8Storages)) << net.layers[l].name;
    std::size_t any = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].format, kFp8Storages[k]);
      want[k].scale = 0;  // one scale per batch: none reported
      expect_same(got[k], want[k], fmt::format("layer {} {}", l, kFp8Storages[k]));
      any += got[k].clipped + got[k].flushed;
    }
    EXPECT_GT(any, 0u) << "the case must count something";
    for (const PathForward& p : r.paths) EXPECT_TRUE(p.layers[l].fp8.empty()) << "the baseline's only";
  }
}

}  // namespace
}  // namespace halfmap::diagnose
