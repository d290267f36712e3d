// The simulation of dynamic loss scaling with the frameworks' defaults (include/halfmap/diagnose.hpp, "Dynamic
// loss scaling simulation"): per path and framework, one task on a thread, the batches drawn in order or from a
// per-epoch permutation, and the outcome that the verdict follows.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "diagnose/internal.hpp"
#include "halfmap/detmath.hpp"

namespace halfmap::diagnose {

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::trains:
      return "trains";
    case Outcome::collapses:
      return "collapses";
    case Outcome::keeps_skipping:
      return "keeps_skipping";
    case Outcome::underflows:
      return "underflows";
  }
  return "?";
}

namespace {

// The kernels take the loss scale as an f32: it stays a normal f32 however often it is halved.
constexpr double kMinScale = 0x1p-126;
// The f32 loss of the final weights is evaluated over all rows in chunks of this many rows.
constexpr std::size_t kEvalRows = 4096;

/// The rows of each epoch: in order (empty permutation) or shuffled anew per epoch.
class BatchOrder {
 public:
  BatchOrder(std::size_t rows, std::size_t per, const std::optional<std::uint64_t>& shuffle)
      : rows_(rows), per_(per), batches_((rows + per - 1) / per), shuffle_(shuffle) {}
  /// Rows of step `step` (from 0): first row and count; `idx` points into the permutation when shuffled.
  std::size_t next(std::size_t step, std::size_t& row0, const std::size_t*& idx) {
    const std::size_t epoch = step / batches_, b = step % batches_;
    if (shuffle_ && (perm_.empty() || epoch != epoch_)) {
      perm_.resize(rows_);
      std::iota(perm_.begin(), perm_.end(), std::size_t{0});
      det::Xoshiro256ss rng(*shuffle_, det::name_key("diagnose-shuffle"), epoch, 0);
      for (std::size_t i = rows_ - 1; i > 0; --i) std::swap(perm_[i], perm_[std::size_t(rng.unit() * double(i + 1))]);
      epoch_ = epoch;
    }
    row0 = b * per_;
    idx = shuffle_ ? perm_.data() + row0 : nullptr;
    return std::min(per_, rows_ - row0);
  }

 private:
  std::size_t rows_, per_, batches_;
  std::optional<std::uint64_t> shuffle_;
  std::vector<std::size_t> perm_;
  std::size_t epoch_ = 0;
};

/// The f32 loss over all rows of each of `weights` on the baseline path (Simulation::final_loss), in one pass over
/// the rows: each chunk of kEvalRows rows is converted once and then run with every set of weights, so the cost of
/// reading the table is paid once rather than once per simulation. Chunks in ranges on threads; the chunks' losses
/// are summed in row order, so the result does not depend on the threads.
std::vector<double> final_losses(const Table& x, const Table& y, const SeedPath& base,
                                 const std::vector<Weights>& weights, const Options& o) {
  const std::size_t rows = x.rows(), per = std::min(rows, kEvalRows), chunks = (rows + per - 1) / per;
  const unsigned hw = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t nranges = std::min<std::size_t>(hw, chunks);
  std::vector<std::vector<double>> loss(weights.size(), std::vector<double>(chunks));
  parallel_for(nranges, unsigned(nranges), [&](std::size_t t) {
    SeedRunner eval(base, x.cols(), o.hidden, per);
    Staged staged;
    for (std::size_t c = t * chunks / nranges; c < (t + 1) * chunks / nranges; ++c) {
      const std::size_t row0 = c * per, m = std::min(per, rows - row0);
      staged.fill(x, y, row0, m);
      eval.load(staged);
      for (std::size_t s = 0; s < weights.size(); ++s) {
        eval.set_weights(weights[s]);
        loss[s][c] = eval.forward().loss;
      }
    }
  });
  std::vector<double> out;
  for (const std::vector<double>& l : loss) {
    double sum = 0;
    for (std::size_t c = 0; c < chunks; ++c) sum += l[c] * double(std::min(per, rows - c * per));
    out.push_back(sum / double(rows));
  }
  return out;
}

}  // namespace

Outcome outcome_of(const Simulation& s, double share) {
  if (!s.settled_scale || s.min_scale < 1.0) return Outcome::collapses;
  const double allowed = std::log2(s.initial_scale / s.final_scale) + 1.0 + double(s.growths);
  if (double(s.skipped) > std::max(allowed, 1.0)) return Outcome::keeps_skipping;
  if (s.good_steps.underflow_share() > share) return Outcome::underflows;
  return Outcome::trains;
}

DynamicScaler::DynamicScaler(Simulation& sim, double initial) : sim_(sim), scale_(initial) {
  sim_.initial_scale = initial;
  sim_.min_scale = initial;
}

void DynamicScaler::step(std::size_t k) {
  if (sim_.runs.empty() || sim_.runs.back().scale != scale_) sim_.runs.push_back({scale_, k, k});
  sim_.runs.back().last_step = k;
}

void DynamicScaler::skip() {
  ++sim_.skipped;
  ++(sim_.settled_scale ? sim_.late_skipped : sim_.backoff_skipped);
  scale_ = std::max(scale_ * loss_scale::kBackoffFactor, kMinScale);
  sim_.min_scale = std::min(sim_.min_scale, scale_);
  good_ = 0;
}

void DynamicScaler::good() {
  if (!sim_.settled_scale) sim_.settled_scale = scale_;
  if (++good_ == sim_.growth_interval) {
    scale_ *= loss_scale::kGrowthFactor;
    ++sim_.growths;
    good_ = 0;
  }
}

void DynamicScaler::finish(double underflow_share) {
  sim_.final_scale = scale_;
  sim_.outcome = outcome_of(sim_, underflow_share);
}

namespace {

/// One simulation; its final weights are left in `w` (from `start`), for final_losses.
Simulation simulate(const Table& x, const Table& y, const SeedPath& path, const SeedPath& base, const Weights& start,
                    const Options& o, std::string framework, double initial, Weights& w) {
  Simulation sim;
  sim.framework = std::move(framework);
  sim.growth_interval = o.growth_interval.value_or(loss_scale::kGrowthInterval);
  sim.steps = total_steps(x.rows(), o);
  const std::size_t per = o.batch == 0 ? x.rows() : std::min(o.batch, x.rows());
  SeedRunner r(path, x.cols(), o.hidden, per), ref_runner(base, x.cols(), o.hidden, per);
  BatchOrder order(x.rows(), per, o.shuffle);
  w = start;
  const float lr = float(o.lr);
  DynamicScaler scaler(sim, initial);
  std::size_t nf = 0;
  for (std::size_t step = 1; step <= sim.steps; ++step) {
    scaler.step(step);
    const double scale = scaler.scale();
    std::size_t row0 = 0;
    const std::size_t* idx = nullptr;
    const std::size_t m = order.next(step - 1, row0, idx);
    r.set_weights(w);
    r.load(x, y, row0, m, idx);
    r.forward();
    const std::vector<double>& g = r.gradients(scale, nf);
    if (nf > 0) {  // skip the step and back off, as both frameworks do
      scaler.skip();
      continue;
    }
    // The reference: the f32 baseline's gradient at the same weights on the same rows.
    ref_runner.set_weights(w);
    ref_runner.load(x, y, row0, m, idx);
    ref_runner.forward();
    std::size_t ref_nf = 0;
    const std::vector<double>& ref = ref_runner.gradients(1.0, ref_nf);
    sim.good_steps.add(compare_grads(g, nf, ref, scale, path.info.storage));
    // Unscale (exact: the scale is a power of two) and round to f32, then plain SGD on the f32 master weights.
    std::size_t i = 0;
    for (std::vector<float>* p : {&w.w1, &w.b1, &w.w2, &w.b2}) {
      for (float& v : *p) v -= lr * float(g[i++] / scale);
    }
    scaler.good();
  }
  scaler.finish(o.underflow_share);
  return sim;
}

}  // namespace

void simulate_all(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                  const Weights& w0, const Options& o, Report& r) {
  const double initial[2] = {loss_scale::kKerasInitial, loss_scale::kPytorchInitial};
  std::vector<Simulation> sims(paths.size() * 2);
  std::vector<Weights> final_weights(sims.size());
  std::atomic<std::size_t> done{0};
  parallel_for(sims.size(), o.threads, [&](std::size_t i) {
    sims[i] =
        simulate(x, y, paths[i / 2], base, w0, o, i % 2 == 0 ? "keras" : "pytorch", initial[i % 2], final_weights[i]);
    progress(o, "loss-scaling simulations", done.fetch_add(1) + 1, sims.size());
  });
  progress(o, "final losses", 0, 0);
  const std::vector<double> losses = final_losses(x, y, base, final_weights, o);
  for (std::size_t i = 0; i < sims.size(); ++i) sims[i].final_loss = losses[i];
  for (std::size_t i = 0; i < sims.size(); ++i) r.optimization[i / 2].simulations.push_back(std::move(sims[i]));
}

}  // namespace halfmap::diagnose
