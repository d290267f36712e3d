// thresholds.json's "fp8" object (src/sweep/fp8_tables.cpp) against independent recounts: the spike's clipped and
// flushed shares through fp8.hpp's to_fp8 in both overflow modes (not the thresholds the table uses), the onsets
// against the shares around them, the steps against the history length, and the formats' ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "halfmap/fp8.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "sweep/experiment.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {
namespace {

json settings() { return json{{"seed", 7}, {"dists", {"normal", "lognormal"}}, {"sizes", {{"n", 1000}}}}; }

TEST(SweepFp8, SpikeSharesMatchTheModelCastValueByValue) {
  const json fp8 = fp8_json(settings());
  const json& tensors = fp8["delayed_scaling"]["tensors"];
  ASSERT_EQ(tensors.size(), 4u);
  for (const json& t : tensors) {
    const Dist d = *parse_dist(t["dist"].get<std::string>());
    const Fp8 f = t["format"] == "e4m3" ? Fp8::e4m3 : Fp8::e5m2;
    const std::vector<double> draws = stream_draw(7, "fp8_delayed_scaling", d, 0, 1000);
    const std::vector<float> x(draws.begin(), draws.end());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(t["amax"].get<float>(), amax);
    const float s0 = fp8_scale(amax, f);
    for (int k : {1, 3, 8, 20}) {
      const float p = std::ldexp(1.0f, k), s1 = fp8_scale(amax * p, f);
      std::size_t clipped = 0, flushed = 0;
      for (float v : x) {
        clipped += to_fp8(v * p * s0, f, Fp8Overflow::saturate) != to_fp8(v * p * s0, f, Fp8Overflow::nonsaturating);
        flushed += (to_fp8(v * s1, f, Fp8Overflow::saturate) & 0x7F) == 0;
      }
      EXPECT_DOUBLE_EQ(t["clipped_at_spike"][k - 1].get<double>(), double(clipped) / 1000) << t.dump() << " k " << k;
      EXPECT_DOUBLE_EQ(t["flushed_after_spike"][k - 1].get<double>(), double(flushed) / 1000) << " k " << k;
    }
    // The onset is the first k past the steady share, the 1 % point the first at 1 %.
    const auto& fl = t["flushed_after_spike"];
    const int onset = t["flush_onset_k"].get<int>();
    EXPECT_GT(fl[onset - 1].get<double>(), t["flushed_steady"].get<double>());
    if (onset > 1) {
      EXPECT_LE(fl[onset - 2].get<double>(), t["flushed_steady"].get<double>());
    }
    const int one = t["flush_1pct_k"].get<int>();
    EXPECT_GE(fl[one - 1].get<double>(), 0.01);
    if (one > 1) {
      EXPECT_LT(fl[one - 2].get<double>(), 0.01);
    }
    for (const auto& [h, steps] : t["steps_with_the_spike_scale"].items())
      EXPECT_EQ(std::to_string(steps.get<int>()), h);
  }
}

TEST(SweepFp8, FormatsRanges) {
  const json fp8 = fp8_json(settings());
  std::map<std::string, json> by;
  for (const json& f : fp8["formats"]) by[f["format"]] = f;
  EXPECT_EQ(by["fp16"]["binades"].get<double>(), 40.0 + std::log2(65504.0 / 65536.0));
  EXPECT_EQ(by["e4m3"]["max"].get<double>(), 448.0);
  EXPECT_EQ(by["e4m3"]["min_subnormal"].get<double>(), 0x1p-9);
  EXPECT_EQ(by["e5m2"]["min_normal"].get<double>(), 0x1p-14);
  EXPECT_EQ(by["e2m1"]["max"].get<double>(), 6.0);
  EXPECT_EQ(by["e2m1"]["min_subnormal"].get<double>(), 0.5);
  EXPECT_EQ(by["e3m2"]["min_subnormal"].get<double>(), 0x1p-4);
  EXPECT_EQ(by["e2m3"]["min_subnormal"].get<double>(), 0x1p-3);
  // The Markdown names every format and every tensor.
  const std::string md = fp8_markdown(fp8);
  for (const char* s : {"| e4m3 |", "| e2m1 |", "| lognormal | e5m2 |", "1024 steps with a history of 1024"})
    EXPECT_NE(md.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace halfmap::sweep
