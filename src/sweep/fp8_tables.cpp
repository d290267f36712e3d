// thresholds.json's "fp8" object and thresholds.md's fp8 section: the fp8 and MX element formats' ranges beside
// fp16's and bf16's, and Transformer Engine's delayed scaling (include/halfmap/fp8_scaling.hpp) under a one-step
// spike of a tensor's amax by 2^k. Computed from the models alone (fp8.hpp's rounding thresholds, the
// DelayedScaler), on the sweep's own draws (seed, distributions, n of the settings): the same on every machine,
// and the same for a run and a merge of its shards.
//
// The spike, for each distribution, format (E4M3, the forward's in Transformer Engine's HYBRID format; E5M2, the
// gradients') and k = 1 .. kMaxK (every binade: the lattice of k is the integers, and every point of it is
// computed): the tensor x (n draws rounded to float32) is cast at every step with the scaler's scale; at one step
// it is x·2^k. That step is cast with the scale of the steps before (fp8_max / amax), so the values whose
// |x|·2^k·s reaches the clip threshold saturate; afterwards the history holds a·2^k and every later cast of x uses
// a scale 2^k too small, flushing the values whose |x|·s' falls to the flush threshold, for as many steps as the
// history is long. The steps are counted by running the DelayedScaler itself over 3·history_len + 1 steps.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/fp8.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "halfmap/half.hpp"
#include "halfmap/mx.hpp"
#include "sweep/experiment.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {
namespace {

constexpr int kMaxK = 40;
constexpr std::size_t kHistoryLens[] = {1, 16, kTeAmaxHistoryLen};

struct Range {
  std::string name, what;
  double max, min_normal, min_subnormal;
};

std::vector<Range> ranges() {
  std::vector<Range> r = {
      {"fp16", "IEEE binary16", 65504.0, 0x1p-14, 0x1p-24},
      {"bf16", "bfloat16", double(to_f32(bf16{0x7F7F})), 0x1p-126, 0x1p-133},
  };
  for (Fp8 f : {Fp8::e4m3, Fp8::e5m2}) {
    const Fp8Format F = fp8_format(f);
    r.push_back({std::string(fp8_name(f)), fmt::format("OCP FP8 {} (MXFP8 element)", f == Fp8::e4m3 ? "E4M3" : "E5M2"),
                 double(F.max), std::ldexp(1.0, F.emin), std::ldexp(1.0, F.emin - F.mant_bits)});
  }
  for (MxElem t : {MxElem::e3m2, MxElem::e2m3, MxElem::e2m1}) {
    const MxElemFormat F = mx_format(t);
    r.push_back({std::string(mx_name(t)).substr(6), std::string(t == MxElem::e2m1 ? "MXFP4 element" : "MXFP6 element"),
                 double(F.max), std::ldexp(1.0, F.emin), std::ldexp(1.0, F.emin - F.mant_bits)});
  }
  return r;
}

/// Shares of the tensor's non-zero values clipped and flushed when cast with s (fp8.hpp's count_rounding).
struct Shares {
  double clipped = 0, flushed = 0;
};
Shares shares(const std::vector<float>& x, float s, const RoundingThresholds& t) {
  const auto nonzero = double(std::count_if(x.begin(), x.end(), [](float v) { return v != 0.0f; }));
  const RoundingCounts c = count_rounding(x.data(), x.size(), s, t);
  return nonzero > 0 ? Shares{double(c.clipped) / nonzero, double(c.flushed) / nonzero} : Shares{};
}

/// The DelayedScaler over steady steps, the spike at step 2H, and steady steps after: how many steps cast with
/// a scale other than the steady one before the spike, after it.
std::size_t steps_off_after_spike(float amax, float spike_amax, Fp8 f, std::size_t history_len) {
  DelayedScaler d(f, history_len);
  const std::size_t spike = 2 * history_len;
  float steady = 0;
  std::size_t off = 0;
  for (std::size_t step = 0; step <= 3 * history_len + 1; ++step) {
    if (step == spike) steady = d.scale();
    if (step > spike && d.scale() != steady) ++off;
    d.record(step == spike ? spike_amax : amax);
  }
  return off;
}

/// The smallest k whose share reaches `at_least`, or null beyond kMaxK.
json first_k(const std::vector<double>& share, double at_least) {
  for (std::size_t i = 0; i < share.size(); ++i)
    if (share[i] >= at_least) return int(i) + 1;
  return nullptr;
}
/// The smallest k whose share exceeds `base` (the share without a spike), or null beyond kMaxK.
json first_k_above(const std::vector<double>& share, double base) {
  for (std::size_t i = 0; i < share.size(); ++i)
    if (share[i] > base) return int(i) + 1;
  return nullptr;
}

}  // namespace

json fp8_json(const json& settings) {
  json out;
  json fr = json::array();
  for (const Range& r : ranges()) {
    fr.push_back({{"format", r.name},
                  {"what", r.what},
                  {"max", r.max},
                  {"min_normal", r.min_normal},
                  {"min_subnormal", r.min_subnormal},
                  {"normal_binades", std::log2(r.max / r.min_normal)},
                  {"binades", std::log2(r.max / r.min_subnormal)}});
  }
  out["formats"] = fr;

  const std::uint64_t seed = settings.value("seed", std::uint64_t{1});
  const std::size_t n = settings["sizes"].value("n", std::size_t{4096});
  json tensors = json::array();
  for (const json& dn : settings["dists"]) {
    const std::optional<Dist> d = parse_dist(dn.get<std::string>());
    if (!d) continue;
    const std::vector<double> draws = stream_draw(seed, "fp8_delayed_scaling", *d, 0, n);
    const std::vector<float> x(draws.begin(), draws.end());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    for (Fp8 f : {Fp8::e4m3, Fp8::e5m2}) {
      const RoundingThresholds t = fp8_thresholds(f);
      const float s0 = fp8_scale(amax, f);
      const double steady = shares(x, s0, t).flushed;
      std::vector<double> clipped, flushed;
      json steps = json::object();
      for (int k = 1; k <= kMaxK; ++k) {
        const float p = std::ldexp(1.0f, k);
        std::vector<float> spiked(x);
        for (float& v : spiked) v *= p;                                   // exact
        clipped.push_back(shares(spiked, s0, t).clipped);                 // the spike cast with the steady scale
        flushed.push_back(shares(x, fp8_scale(amax * p, f), t).flushed);  // x cast with the spike's scale
      }
      for (std::size_t h : kHistoryLens) steps[std::to_string(h)] = steps_off_after_spike(amax, amax * 2.0f, f, h);
      tensors.push_back({{"dist", dist_name(*d)},
                         {"format", fp8_name(f)},
                         {"role", f == Fp8::e4m3 ? "forward (HYBRID)" : "gradients (HYBRID)"},
                         {"amax", amax},
                         {"scale", s0},
                         {"flushed_steady", steady},
                         {"clipped_at_spike", clipped},
                         {"flushed_after_spike", flushed},
                         {"clip_onset_k", first_k_above(clipped, 0)},
                         {"clip_half_k", first_k(clipped, 0.5)},
                         {"flush_onset_k", first_k_above(flushed, steady)},
                         {"flush_1pct_k", first_k(flushed, 0.01)},
                         {"flush_half_k", first_k(flushed, 0.5)},
                         {"steps_with_the_spike_scale", steps}});
    }
  }
  out["delayed_scaling"] = {
      {"recipe",
       "Transformer Engine DelayedScaling: s = (fp8_max / max(amax history)) / 2^margin, "
       "margin 0, the cast before its amax is recorded"},
      {"n", n},
      {"k", {{"min", 1}, {"max", kMaxK}, {"step", 1}}},
      {"history_lens", json(std::vector<std::size_t>(std::begin(kHistoryLens), std::end(kHistoryLens)))},
      {"tensors", tensors}};
  return out;
}

namespace {

std::string kcell(const json& k) { return k.is_null() ? fmt::format("> {}", kMaxK) : fmt::format("{}", k.get<int>()); }
/// "1 step with a history of 1, 16 steps with 16, ..." from the first tensor's count (every tensor's is the same).
std::string steps_text(const json& ds) {
  std::string s;
  if (ds["tensors"].empty()) return "no tensor";
  for (const auto& [h, steps] : ds["tensors"][0]["steps_with_the_spike_scale"].items())
    s += fmt::format("{}{} step{} with a history of {}", s.empty() ? "" : ", ", steps.dump(),
                     steps.get<std::size_t>() == 1 ? "" : "s", h);
  return s;
}
std::string pct(double share) { return share == 0 ? "0" : fmt::format("{:.3g} %", 100 * share); }

}  // namespace

std::string fp8_markdown(const json& fp8) {
  std::string md = "\n## fp8 and MX formats, and delayed scaling\n\n";
  md +=
      "Computed from the models (include/halfmap/fp8.hpp, mx.hpp, fp8_scaling.hpp; src/sweep/fp8_tables.cpp), "
      "not from a kernel: the same on every machine. The formats' ranges beside fp16's and bf16's (binades: "
      "log2 of the largest finite over the smallest normal, and over the smallest subnormal):\n\n";
  md += "| format | | largest finite | smallest normal | smallest subnormal | normal binades | binades |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const json& f : fp8["formats"]) {
    md += fmt::format("| {} | {} | {:g} | 2^{:g} | 2^{:g} | {:.2f} | {:.2f} |\n", f["format"].get<std::string>(),
                      f["what"].get<std::string>(), f["max"].get<double>(), std::log2(f["min_normal"].get<double>()),
                      std::log2(f["min_subnormal"].get<double>()), f["normal_binades"].get<double>(),
                      f["binades"].get<double>());
  }
  const json& ds = fp8["delayed_scaling"];
  md += fmt::format(
      "\nDelayed scaling ({}) when a tensor's amax spikes by 2^k at one step, for every k from 1 to {} (n = {} "
      "values of each distribution). The spike's own cast uses the scale of the steps before: *clipped at the "
      "spike* is the share of the tensor saturated then. The spike then stays in the amax history, and every later "
      "cast of the unspiked tensor uses a scale 2^k too small: *flushed after* is the share of its non-zero values "
      "stored as zero (*before*: with the steady scale, no spike), and the *k* columns give the smallest spike that "
      "flushes more than before (onset), 1 % and half of them. "
      "That lasts as many steps as the DelayedScaler, run over the steps, casts with the spike's scale: {}; a "
      "sustained jump clips at one step only, and a sustained drop by 2^-k flushes like the spike, for as long.\n\n",
      ds["recipe"].get<std::string>(), kMaxK, ds["n"].dump(), steps_text(ds));
  md +=
      "| dist | format | role | amax | clipped at spike, k = 1 | k = 2 | k = 4 | k = 8 | flushed before | "
      "flushed after, k = 8 | k = 16 | flush onset k | 1 % from k | 50 % from k |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const json& t : ds["tensors"]) {
    const auto& c = t["clipped_at_spike"];
    const auto& f = t["flushed_after_spike"];
    md += fmt::format("| {} | {} | {} | {:.5g} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                      t["dist"].get<std::string>(), t["format"].get<std::string>(), t["role"].get<std::string>(),
                      t["amax"].get<double>(), pct(c[0].get<double>()), pct(c[1].get<double>()),
                      pct(c[3].get<double>()), pct(c[7].get<double>()), pct(t["flushed_steady"].get<double>()),
                      pct(f[7].get<double>()), pct(f[15].get<double>()), kcell(t["flush_onset_k"]),
                      kcell(t["flush_1pct_k"]), kcell(t["flush_half_k"]));
  }
  return md;
}

}  // namespace halfmap::sweep
