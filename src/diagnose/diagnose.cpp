// `halfmap diagnose`'s driver: option and input checks, then the sections in report order (data, compute and
// gradients over the batches, the simulations, verdict), and the small pieces they share (threads, progress).
// See include/halfmap/diagnose.hpp.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

std::string validate(const Options& o) {
  if (o.hidden < 1 || o.hidden > kMaxHidden) return fmt::format("--hidden must be between 1 and {}.", kMaxHidden);
  if (o.steps && (*o.steps < 1 || *o.steps > kMaxSteps)) {
    return fmt::format("--steps must be between 1 and {}.", kMaxSteps);
  }
  if (o.epochs && (*o.epochs < 1 || *o.epochs > kMaxSteps)) {
    return fmt::format("--epochs must be between 1 and {}.", kMaxSteps);
  }
  if (o.steps && o.epochs) return "give --steps or --epochs, not both.";
  if (!std::isfinite(o.lr) || !(o.lr > 0) || o.lr > 1e6) return "--lr must be a number above 0 and at most 1e6.";
  if (o.growth_interval && (*o.growth_interval < 1 || *o.growth_interval > kMaxSteps)) {
    return fmt::format("--growth-interval must be between 1 and {}.", kMaxSteps);
  }
  if (!(o.underflow_share >= 0 && o.underflow_share < 1)) return "--underflow-share must be in [0, 1).";
  if (o.threads > 1024) return "--threads must be at most 1024 (0: one per hardware thread).";
  return {};
}

std::string check_inputs(const Table& features, const Table& labels, const Options& o) {
  if (features.rows() == 0 || features.cols() == 0) return "the features array is empty.";
  if (labels.rows() == 0 || labels.cols() == 0) return "the labels array is empty.";
  if (labels.cols() != 1) {
    return fmt::format(
        "the labels have {} columns; the seed model has one output, so give one column (shape (n,) "
        "or (n, 1)).",
        labels.cols());
  }
  if (features.rows() != labels.rows()) {
    return fmt::format("the features have {} rows but the labels have {}; they must match row for row.",
                       features.rows(), labels.rows());
  }
  if (features.cols() > kMaxColumns) {
    return fmt::format("the features have {} columns, more than the {} halfmap diagnose accepts.", features.cols(),
                       kMaxColumns);
  }
  if (total_steps(features.rows(), o) > kMaxSteps) {
    return fmt::format("--epochs {} over {} batches is more than {} steps.", o.epochs.value_or(0),
                       batch_count(features.rows(), o), kMaxSteps);
  }
  return {};
}

std::size_t batch_count(std::size_t rows, const Options& o) {
  const std::size_t per = o.batch == 0 ? rows : std::min(o.batch, rows);
  return per == 0 ? 0 : (rows + per - 1) / per;
}

std::size_t total_steps(std::size_t rows, const Options& o) {
  if (o.steps) return *o.steps;
  if (o.epochs) return *o.epochs * batch_count(rows, o);
  return kDefaultSteps;
}

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& work) {
  const unsigned hw = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t nthreads = std::max<std::size_t>(1, std::min<std::size_t>(hw, n));
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto loop = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < nthreads; ++t) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

namespace {
std::mutex progress_mutex;
ProgressPacer progress_pacer(Progress::off, kProgressLineInterval, {});  // the current run's (begin_progress)
}  // namespace

void begin_progress(const Options& o) {
  const std::lock_guard lock(progress_mutex);
  progress_pacer = ProgressPacer(o.progress, o.progress_interval, ProgressPacer::Clock::now());
}

void progress(const Options& o, const std::string& what, std::size_t done, std::size_t total) {
  if (o.progress == Progress::off) return;
  // A redrawn line is also drawn at the end of each stage (done == total, or a stage without a count).
  const std::lock_guard lock(progress_mutex);
  if (!progress_pacer.due(ProgressPacer::Clock::now(), total == 0 || done == total)) return;
  const std::string line = total == 0 ? what : fmt::format("{} {} / {}", what, done, total);
  if (o.progress == Progress::lines) {
    std::fprintf(stderr, "diagnose: %s\n", line.c_str());
  } else {
    std::fprintf(stderr, "\rdiagnose: %-68s", line.c_str());
  }
}

void end_progress(const Options& o) {
  if (o.progress == Progress::redraw) std::fprintf(stderr, "\r%-80s\r", "");
}

Report run(const Table& features, const Table& labels, const Options& o) {
  if (std::string e = validate(o); !e.empty()) throw std::invalid_argument(e);
  if (std::string e = check_inputs(features, labels, o); !e.empty()) throw std::invalid_argument(e);
  const SeedPath base = baseline_path();
  const std::vector<SeedPath> paths = low_precision_paths(o.all_paths, o.path_first);
  Report r;
  r.options = o;
  begin_progress(o);
  progress(o, "data", 0, 0);
  r.data = data_section(features, labels, o);
  r.data.batches = batch_count(features.rows(), o);
  const Weights w0 = init_weights(features.cols(), o.hidden, o.seed);
  measure_batches(features, labels, base, paths, w0, o, r);
  simulate_all(features, labels, base, paths, w0, o, r);
  end_progress(o);
  r.no_loss_scaling = no_loss_scaling(r);
  r.verdict = decide(r);
  return r;
}

Report run(const npy::Array& features, const npy::Array& labels, const Options& o) {
  return run(Table::from_array(features), Table::from_array(labels), o);
}

}  // namespace halfmap::diagnose
