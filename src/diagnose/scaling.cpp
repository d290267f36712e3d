// The optimization section: gradient statistics at a loss scale, the loss-scale window, and the simulation of
// dynamic loss scaling with the frameworks' defaults.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diagnose/internal.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

namespace {
// The kernels take the loss scale as an f32: it stays a normal f32 however often it is halved.
constexpr double kMinScale = 0x1p-126;
}  // namespace

GradStats grad_stats(Runner& r, const std::vector<double>& reference, double S) {
  const Gradients g = r.gradients(0, r.rows(), S);
  const double min_norm = min_normal(r.path().info.storage);
  GradStats s;
  s.scale = S;
  s.count = g.values.size();
  s.nonfinite = g.nonfinite;
  for (std::size_t i = 0; i < g.values.size(); ++i) {
    if (reference[i] == 0) continue;  // zero in f32 too (e.g. a dead ReLU unit): nothing was lost
    ++s.reference_nonzero;
    const double v = g.values[i];
    if (v == 0) ++s.zero;
    if (v != 0 && std::fabs(v) < min_norm) ++s.subnormal;
  }
  return s;
}

LossWindow loss_window(Runner& r, const std::vector<double>& reference, double share) {
  LossWindow w;
  std::vector<GradStats> at;
  for (int k = 0; k <= kWindowMaxLog2; ++k) at.push_back(grad_stats(r, reference, std::ldexp(1.0, k)));
  auto good = [share](const GradStats& s) { return s.nonfinite == 0 && s.underflow_share() <= share; };
  int first_bad = kWindowMaxLog2 + 1;
  for (int k = 0; k <= kWindowMaxLog2; ++k) {
    if (at[std::size_t(k)].nonfinite > 0) {
      first_bad = k;
      break;
    }
  }
  if (first_bad > 0) w.S_max_log2 = first_bad - 1;
  for (int k = 0; k < first_bad; ++k) {
    if (good(at[std::size_t(k)])) {
      w.S_min_log2 = k;
      break;
    }
  }
  w.empty = !w.S_min_log2 || !w.S_max_log2;
  w.keras_inside = good(at[loss_scale::kKerasInitialLog2]);
  w.pytorch_inside = good(at[loss_scale::kPytorchInitialLog2]);
  return w;
}

Simulation simulate(Runner& r, Runner& eval, const Weights& start, const Options& o, std::string framework,
                    double initial) {
  Simulation sim;
  sim.framework = std::move(framework);
  sim.initial_scale = initial;
  sim.growth_interval = o.growth_interval.value_or(loss_scale::kGrowthInterval);
  sim.steps = o.steps;
  Weights w = start;
  const std::size_t rows = r.rows();
  const std::size_t batch = o.batch == 0 ? rows : std::min(o.batch, rows);
  const float lr = float(o.lr);
  double scale = initial;
  std::size_t good = 0, row0 = 0;
  for (std::size_t step = 1; step <= o.steps; ++step) {
    if (sim.runs.empty() || sim.runs.back().scale != scale) sim.runs.push_back({scale, step, step});
    sim.runs.back().last_step = step;
    const std::size_t m = std::min(batch, rows - row0);
    r.set_weights(w);
    const Gradients g = r.gradients(row0, m, scale);
    row0 = row0 + m == rows ? 0 : row0 + m;
    if (g.nonfinite > 0) {  // skip the step and back off, as both frameworks do
      ++sim.skipped;
      scale = std::max(scale * loss_scale::kBackoffFactor, kMinScale);
      good = 0;
      continue;
    }
    // Unscale (exact: the scale is a power of two) and round to f32, then plain SGD on the f32 master weights.
    std::size_t i = 0;
    for (std::vector<float>* p : {&w.w1, &w.b1, &w.w2, &w.b2}) {
      for (float& v : *p) v -= lr * float(g.values[i++] / scale);
    }
    if (++good == sim.growth_interval) {
      scale *= loss_scale::kGrowthFactor;
      good = 0;
    }
    if (o.progress && step % 100 == 0) {
      std::fprintf(stderr, "\rdiagnose: %s, %s: step %zu / %zu   ", r.path().info.name.c_str(),
                   sim.framework.c_str(), step, o.steps);
    }
  }
  sim.final_scale = scale;
  eval.set_weights(w);
  sim.final_loss = eval.forward(0, eval.rows()).loss;
  return sim;
}

}  // namespace halfmap::diagnose
