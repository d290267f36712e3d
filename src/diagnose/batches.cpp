// The compute section and the per-batch gradients (include/halfmap/diagnose.hpp, "compute" and "optimization"):
// one pass over the batches in order, split into contiguous ranges run on threads; each range converts a batch
// into every path's storage type once and runs the f32 baseline (the reference) and each path on it. Then the
// loss-scale window on at most kWindowBatches batches.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

GradStats compare_grads(const std::vector<double>& g, std::size_t nonfinite, const std::vector<double>& ref, double S,
                        DType storage) {
  const double min_norm = min_normal(storage);
  GradStats s;
  s.scale = S;
  s.count = g.size();
  s.nonfinite = nonfinite;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (ref[i] == 0) continue;  // zero in f32 too (e.g. a dead ReLU unit): nothing was lost
    ++s.reference_nonzero;
    const double v = g[i];
    if (v == 0) ++s.zero;
    if (v != 0 && std::fabs(v) < min_norm) ++s.subnormal;
  }
  return s;
}

namespace {

constexpr double kScales[3] = {1.0, loss_scale::kKerasInitial, loss_scale::kPytorchInitial};

/// What one batch gives on one path.
struct BatchRecord {
  double loss = 0;
  GradStats at[3];
};

/// A forward report accumulated over batches in order.
struct ForwardAcc {
  double loss_sum = 0, max_loss = -std::numeric_limits<double>::infinity();
  bool nan = false;
  std::size_t batches = 0, nonfinite = 0;
  std::optional<NonFinite> first;
  void add(const BatchForward& f) {
    ++batches;
    loss_sum += f.loss;
    if (std::isnan(f.loss)) nan = true;
    max_loss = std::max(max_loss, f.loss);
    if (f.first_nonfinite) {
      ++nonfinite;
      if (!first) first = f.first_nonfinite;
    }
  }
  void add(const ForwardAcc& o) {  // o covers later rows
    loss_sum += o.loss_sum;
    nan = nan || o.nan;
    max_loss = std::max(max_loss, o.max_loss);
    batches += o.batches;
    nonfinite += o.nonfinite;
    if (!first) first = o.first;
  }
  ForwardReport report(const PathInfo& p) const {
    ForwardReport r;
    r.path = p;
    r.loss = loss_sum / double(std::max<std::size_t>(batches, 1));
    r.max_batch_loss = nan ? std::numeric_limits<double>::quiet_NaN() : max_loss;
    r.nonfinite_batches = nonfinite;
    r.first_nonfinite = first;
    return r;
  }
};

std::size_t batch_rows(const Options& o, std::size_t rows) { return o.batch == 0 ? rows : std::min(o.batch, rows); }

BatchRef batch_ref(std::size_t b, std::size_t rows_per, std::size_t rows, const GradStats& g) {
  const std::size_t first = b * rows_per;
  return {b, first, std::min(first + rows_per, rows) - 1, g.nonfinite, g.underflow_share()};
}

BatchDistribution distribution(const std::vector<BatchRecord>& recs, int k, std::size_t rows_per, std::size_t rows,
                               double share) {
  BatchDistribution d;
  d.batches = recs.size();
  d.pooled.scale = kScales[k];
  std::vector<double> shares;
  shares.reserve(recs.size());
  for (const BatchRecord& b : recs) {
    const GradStats& g = b.at[k];
    d.pooled.add(g);
    shares.push_back(g.underflow_share());
    if (g.nonfinite > 0) ++d.batches_nonfinite;
    if (g.underflow_share() > share) ++d.batches_over_share;
  }
  std::vector<std::size_t> order(recs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto worse = [&](std::size_t a, std::size_t b) {
    const GradStats &x = recs[a].at[k], &y = recs[b].at[k];
    if (x.nonfinite != y.nonfinite) return x.nonfinite > y.nonfinite;
    if (x.underflow_share() != y.underflow_share()) return x.underflow_share() > y.underflow_share();
    return a < b;
  };
  const std::size_t top = std::min(kWorstBatches, order.size());
  std::partial_sort(order.begin(), order.begin() + long(top), order.end(), worse);
  for (std::size_t i = 0; i < top; ++i) {
    const GradStats& g = recs[order[i]].at[k];
    if (g.nonfinite > 0 || g.zero > 0) d.worst.push_back(batch_ref(order[i], rows_per, rows, g));
  }
  std::sort(shares.begin(), shares.end());
  if (!shares.empty()) {
    d.underflow_median = percentile(shares, 0.5);
    d.underflow_p99 = percentile(shares, 0.99);
    d.underflow_max = shares.back();
  }
  return d;
}

/// Every batch of [b0, b1): the baseline's and each path's forward, and the gradients at the three scales.
void measure_range(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                   const Weights& w0, const Options& o, std::size_t b0, std::size_t b1, ForwardAcc& base_acc,
                   std::vector<ForwardAcc>& accs, std::vector<std::vector<BatchRecord>>& recs,
                   std::atomic<std::size_t>& done, std::size_t total) {
  const std::size_t rows = x.rows(), per = batch_rows(o, rows);
  SeedRunner rb(base, x.cols(), o.hidden, per);
  rb.set_weights(w0);
  std::vector<SeedRunner> runners;
  for (const SeedPath& p : paths) {
    runners.emplace_back(p, x.cols(), o.hidden, per);
    runners.back().set_weights(w0);
  }
  std::vector<double> ref;
  std::size_t nf = 0;
  Staged staged;
  for (std::size_t b = b0; b < b1; ++b) {
    const std::size_t row0 = b * per, m = std::min(per, rows - row0);
    staged.fill(x, y, row0, m);
    rb.load(staged);
    base_acc.add(rb.forward());
    ref = rb.gradients(1.0, nf);
    for (std::size_t p = 0; p < paths.size(); ++p) {
      SeedRunner& r = runners[p];
      r.load(staged);
      const BatchForward f = r.forward();
      accs[p].add(f);
      BatchRecord& rec = recs[p][b];
      rec.loss = f.loss;
      for (int k = 0; k < 3; ++k) {
        const std::vector<double>& g = r.gradients(kScales[k], nf);
        rec.at[k] = compare_grads(g, nf, ref, kScales[k], paths[p].info.storage);
      }
    }
    const std::size_t n = done.fetch_add(1) + 1;
    if (b0 == 0) progress(o, "batches (compute, gradients)", n, total);
  }
}

/// The batches the window is measured on: all, or evenly spaced ones plus the worst at S = 1 and 2^16.
std::vector<std::size_t> window_batches(std::size_t n, const std::vector<OptimizationReport>& opt) {
  std::vector<std::size_t> out;
  if (n <= kWindowBatches) {
    out.resize(n);
    std::iota(out.begin(), out.end(), std::size_t{0});
    return out;
  }
  for (const OptimizationReport& r : opt) {
    for (const BatchDistribution* d : {&r.at_1, &r.at_pytorch}) {
      for (const BatchRef& w : d->worst) out.push_back(w.batch);
    }
  }
  const std::size_t spaced = kWindowBatches - std::min(out.size(), kWindowBatches / 2);
  for (std::size_t i = 0; i < spaced; ++i) out.push_back(i * n / spaced);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// S_min and S_max (log2) of one loaded batch; -1 / kWindowMaxLog2 + 1 stand for "none".
std::pair<int, int> batch_window(SeedRunner& r, const std::vector<double>& ref, double share) {
  std::size_t nf = 0;
  int s_min = kWindowMaxLog2 + 1;
  for (int k = 0; k <= kWindowMaxLog2; ++k) {
    const std::vector<double>& g = r.gradients(std::ldexp(1.0, k), nf);
    if (nf > 0) return {s_min, k - 1};
    if (s_min > kWindowMaxLog2 && compare_grads(g, nf, ref, 1.0, r.path().info.storage).underflow_share() <= share) {
      s_min = k;
    }
  }
  return {s_min, kWindowMaxLog2};
}

void measure_windows(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                     const Weights& w0, const Options& o, std::size_t nbatches, Report& r) {
  const std::vector<std::size_t> chosen = window_batches(nbatches, r.optimization);
  const std::size_t rows = x.rows(), per = batch_rows(o, rows);
  parallel_for(paths.size(), o.threads, [&](std::size_t p) {
    SeedRunner rb(base, x.cols(), o.hidden, per), run(paths[p], x.cols(), o.hidden, per);
    rb.set_weights(w0);
    run.set_weights(w0);
    std::vector<int> mins, maxs;
    std::size_t nf = 0;
    for (std::size_t b : chosen) {
      const std::size_t row0 = b * per, m = std::min(per, rows - row0);
      rb.load(x, y, row0, m);
      rb.forward();
      const std::vector<double> ref = rb.gradients(1.0, nf);
      run.load(x, y, row0, m);
      run.forward();
      const auto [lo, hi] = batch_window(run, ref, o.underflow_share);
      mins.push_back(lo);
      maxs.push_back(hi);
    }
    LossWindow& w = r.optimization[p].window;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      BatchWindow bw{chosen[i], std::nullopt, std::nullopt};
      if (mins[i] <= kWindowMaxLog2) bw.S_min_log2 = mins[i];
      if (maxs[i] >= 0) bw.S_max_log2 = maxs[i];
      w.per_batch.push_back(bw);
    }
    w.batches = chosen.size();
    w.excluded = chosen.size() / 100;  // nearly all: all but the worst 1 %
    std::sort(mins.begin(), mins.end(), std::greater<>());
    std::sort(maxs.begin(), maxs.end());
    if (!mins.empty() && mins[w.excluded] <= kWindowMaxLog2) w.S_min_log2 = mins[w.excluded];
    if (!maxs.empty() && maxs[w.excluded] >= 0) w.S_max_log2 = maxs[w.excluded];
    w.empty = !w.S_min_log2 || !w.S_max_log2 || *w.S_min_log2 > *w.S_max_log2;
    auto inside = [&w](int k) { return !w.empty && *w.S_min_log2 <= k && k <= *w.S_max_log2; };
    w.keras_inside = inside(loss_scale::kKerasInitialLog2);
    w.pytorch_inside = inside(loss_scale::kPytorchInitialLog2);
  });
}

}  // namespace

void measure_batches(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                     const Weights& w0, const Options& o, Report& r) {
  const std::size_t rows = x.rows(), per = batch_rows(o, rows), nb = batch_count(rows, o);
  const unsigned hw = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t nranges = std::min<std::size_t>(hw, nb);
  std::vector<ForwardAcc> base_acc(nranges);
  std::vector<std::vector<ForwardAcc>> accs(nranges, std::vector<ForwardAcc>(paths.size()));
  std::vector<std::vector<BatchRecord>> recs(paths.size(), std::vector<BatchRecord>(nb));
  std::atomic<std::size_t> done{0};
  parallel_for(nranges, unsigned(nranges), [&](std::size_t t) {
    measure_range(x, y, base, paths, w0, o, t * nb / nranges, (t + 1) * nb / nranges, base_acc[t], accs[t], recs, done,
                  nb);
  });
  for (std::size_t t = 1; t < nranges; ++t) {
    base_acc[0].add(base_acc[t]);
    for (std::size_t p = 0; p < paths.size(); ++p) accs[0][p].add(accs[t][p]);
  }
  r.baseline = base_acc[0].report(base.info);
  r.compute.clear();
  r.optimization.clear();
  for (std::size_t p = 0; p < paths.size(); ++p) {
    r.compute.push_back(accs[0][p].report(paths[p].info));
    OptimizationReport opt;
    opt.path = paths[p].info;
    opt.at_1 = distribution(recs[p], 0, per, rows, o.underflow_share);
    opt.at_keras = distribution(recs[p], 1, per, rows, o.underflow_share);
    opt.at_pytorch = distribution(recs[p], 2, per, rows, o.underflow_share);
    r.optimization.push_back(std::move(opt));
  }
  progress(o, "loss-scale windows", 0, 0);
  measure_windows(x, y, base, paths, w0, o, nb, r);
}

}  // namespace halfmap::diagnose
