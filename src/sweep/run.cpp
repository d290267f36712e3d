// The threaded run: this shard's work items, most expensive first, on a pool of threads that each take the next
// item; progress on stderr. Each item writes only its own slot, so the result does not depend on the
// thread count or the order.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "halfmap/sweep.hpp"
#include "sweep/cell.hpp"
#include "sweep/thresholds.hpp"

namespace halfmap::sweep {

namespace {

using Clock = std::chrono::steady_clock;

/// A rough cost of an item, to start the expensive ones first (the output does not depend on the order).
double item_cost(const Options& o, const Experiment& e) {
  const Sizes& z = o.sizes;
  double per = double(z.n);
  switch (family_of(e.fwd.op)) {
    case FamilyKind::dense:
      per = e.amplifying ? double(z.amp_m) * double(z.amp_k) * double(z.amp_n)
                         : 3.0 * double(z.dense_m) * double(z.dense_k) * double(z.dense_n);
      break;
    case FamilyKind::softmax:
      per = double(z.softmax_rows * z.softmax_cols) * 8;
      break;
    case FamilyKind::xent:
      per = double(z.xent_rows * z.xent_cols) * 8;
      break;
    case FamilyKind::norm:
      per = double(z.norm_rows * z.norm_cols) * 4;
      break;
    case FamilyKind::attention:
      per = 8.0 * double(z.attn_len * z.attn_len) * double(e.head_dim);
      break;
    default:
      break;
  }
  if (e.fwd.mode == Mode::f16_model) per *= 8;  // the scalar model rounds every operation
  return per * double(s_grid_of(o, e).size()) * (e.has_gradient() ? double(o.S_grid.size()) : 1.0);
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long s = long(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

/// This shard's items (index order) with their experiment and distribution; `result.cells` counts their cells.
void plan_items(const Options& opts, Result& result) {
  const std::size_t nd = opts.dists.size();
  result.total_items = opts.experiments.size() * nd;
  for (std::size_t i = 0; i < result.total_items; ++i) {
    if (i % opts.shard_n != opts.shard_k - 1) continue;
    ItemResult it;
    it.index = i;
    it.experiment = i / nd;
    it.dist = opts.dists[i % nd];
    const Experiment& e = opts.experiments[it.experiment];
    result.cells += s_grid_of(opts, e).size() * (e.has_gradient() ? opts.S_grid.size() : 1);
    result.items.push_back(std::move(it));
  }
}

/// The progress on stderr, written by the worker threads themselves as they finish rows of cells (no thread of its
/// own: under the arm64 test preset's emulator a program hangs in its first pthread_create, and a one-thread sweep
/// must run there), paced by ProgressPacer (progress.hpp); a last line only if it wrote one before.
class Reporter {
 public:
  Reporter(Progress mode, std::chrono::milliseconds interval, std::size_t total, Clock::time_point start)
      : mode_(mode),
        pacer_(mode, interval, start),
        total_(total),
        start_(start),
        next_(pacer_.next().time_since_epoch().count()) {}

  /// `cells` more are done; writes the line when one is due and no other thread is writing it.
  void add(std::size_t cells) {
    const std::size_t d = done_.fetch_add(cells, std::memory_order_relaxed) + cells;
    if (mode_ == Progress::off) return;
    const Clock::time_point now = Clock::now();
    // Most calls stop here, on one relaxed load; the pacer itself is read and moved under the lock.
    if (now.time_since_epoch().count() < next_.load(std::memory_order_relaxed)) return;
    const std::unique_lock lock(write_, std::try_to_lock);
    if (!lock.owns_lock() || !pacer_.due(now)) return;
    next_.store(pacer_.next().time_since_epoch().count(), std::memory_order_relaxed);
    const double el = std::chrono::duration<double>(now - start_).count();
    const double eta = d == 0 ? NAN : el * double(total_ - d) / double(d);
    const double pct = total_ ? 100.0 * double(d) / double(total_) : 100.0;
    if (mode_ == Progress::redraw) {
      std::fprintf(stderr, "\rsweep: %zu / %zu cells (%.0f%%), ETA %s   ", d, total_, pct, format_eta(eta).c_str());
    } else {
      std::fprintf(stderr, "sweep: %zu / %zu cells (%.0f%%) after %s, ETA %s\n", d, total_, pct, format_eta(el).c_str(),
                   format_eta(eta).c_str());
    }
    std::fflush(stderr);
    wrote_ = true;
  }

  /// The last line, once every worker has returned.
  void finish() const {
    const double el = std::chrono::duration<double>(Clock::now() - start_).count();
    if (mode_ == Progress::redraw) {
      std::fprintf(stderr, "\rsweep: %zu / %zu cells, done%20s\n", total_, total_, "");
    } else if (mode_ == Progress::lines && wrote_) {
      std::fprintf(stderr, "sweep: %zu / %zu cells, done after %s\n", total_, total_, format_eta(el).c_str());
    }
  }

 private:
  const Progress mode_;
  ProgressPacer pacer_;  // under write_
  const std::size_t total_;
  const Clock::time_point start_;
  std::atomic<std::size_t> done_{0};
  std::atomic<Clock::rep> next_;  // pacer_.next(), for the check without the lock
  std::mutex write_;
  bool wrote_ = false;  // written under write_; read by finish() after the workers joined
};

/// Every cell of one item on the grids, then its thresholds; each row of cells is reported to `progress`.
void run_item(const Options& opts, ItemResult& it, Reporter& progress) {
  const Experiment& e = opts.experiments[it.experiment];
  Runner r(opts, e, it.dist);
  const Grid& g = s_grid_of(opts, e);
  const Grid& G = opts.S_grid;
  std::vector<Cell> fwd_cells;
  fwd_cells.reserve(g.size());
  it.cells.reserve(g.size() * (e.has_gradient() ? G.size() : 1));
  for (std::size_t i = 0; i < g.size(); ++i) {
    r.set_s(g.log2_at(i));
    fwd_cells.push_back(r.forward_cell());
    if (e.has_gradient()) {
      for (std::size_t j = 0; j < G.size(); ++j) it.cells.push_back(r.cell_with_S(G.log2_at(j)));
      progress.add(G.size());
    } else {
      it.cells.push_back(r.forward_cell());
      progress.add(1);
    }
  }
  it.thresholds = thresholds_for(opts, e, r, fwd_cells);
}

}  // namespace

Cell evaluate_cell(const Options& opts, const Experiment& e, Dist d, double log2_s, std::optional<double> log2_S) {
  Runner r(opts, e, d);
  r.set_s(log2_s);
  if (!log2_S || !e.has_gradient()) return r.forward_cell();
  return r.cell_with_S(*log2_S);
}

Result run(const Options& opts) {
  if (std::string err = validate(opts); !err.empty()) throw std::invalid_argument(err);
  const auto start = Clock::now();
  Result result;
  plan_items(opts, result);

  // Expensive items first; each writes only its own slot.
  std::vector<std::size_t> order(result.items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return item_cost(opts, opts.experiments[result.items[a].experiment]) >
           item_cost(opts, opts.experiments[result.items[b].experiment]);
  });

  std::atomic<std::size_t> next{0};
  Reporter progress(opts.progress, opts.progress_interval, result.cells, start);
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < order.size() && !failed.load();) {
      try {
        run_item(opts, result.items[order[k]], progress);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };

  const unsigned nthreads =
      std::max(1u, std::min<unsigned>(opts.threads, unsigned(std::max<std::size_t>(1, order.size()))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  progress.finish();
  if (error) std::rethrow_exception(error);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace halfmap::sweep
