// `halfmap diagnose`'s driver: option and input checks, then the sections in report order (data, compute,
// optimization, verdict). See include/halfmap/diagnose.hpp.
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

std::string validate(const Options& o) {
  if (o.hidden < 1 || o.hidden > kMaxHidden) return fmt::format("--hidden must be between 1 and {}.", kMaxHidden);
  if (o.steps < 1 || o.steps > kMaxSteps) return fmt::format("--steps must be between 1 and {}.", kMaxSteps);
  if (!std::isfinite(o.lr) || !(o.lr > 0) || o.lr > 1e6) return "--lr must be a number above 0 and at most 1e6.";
  if (o.batch > kMaxElements) return fmt::format("--batch must be at most {} (0: the full data).", kMaxElements);
  if (o.growth_interval && (*o.growth_interval < 1 || *o.growth_interval > kMaxSteps * 100)) {
    return fmt::format("--growth-interval must be between 1 and {}.", kMaxSteps * 100);
  }
  if (!(o.underflow_share >= 0 && o.underflow_share < 1)) return "--underflow-share must be in [0, 1).";
  return {};
}

std::string check_inputs(const npy::Array& features, const npy::Array& labels, const Options& o) {
  if (features.rows == 0 || features.cols == 0 || features.values.empty()) return "the features array is empty.";
  if (labels.rows == 0 || labels.cols == 0 || labels.values.empty()) return "the labels array is empty.";
  if (labels.cols != 1) {
    return fmt::format("the labels have {} columns; the seed model has one output, so give one column (shape (n,) "
                       "or (n, 1)).",
                       labels.cols);
  }
  if (features.rows != labels.rows) {
    return fmt::format("the features have {} rows but the labels have {}; they must match row for row.",
                       features.rows, labels.rows);
  }
  if (features.cols > kMaxColumns) {
    return fmt::format("the features have {} columns, more than the {} halfmap diagnose accepts.", features.cols,
                       kMaxColumns);
  }
  if (features.values.size() != features.rows * features.cols || labels.values.size() != labels.rows) {
    return "the arrays' values do not match their shapes.";
  }
  if (features.values.size() > kMaxElements) {
    return fmt::format("the features hold {} values, more than the {} halfmap diagnose accepts.",
                       features.values.size(), kMaxElements);
  }
  if (double(features.rows) * double(features.cols) * double(o.hidden) > double(kMaxWork)) {
    return fmt::format("rows x columns x hidden is above {}: use a sample of the rows or a smaller --hidden.",
                       kMaxWork);
  }
  return {};
}

namespace {

DataReport data_section(const npy::Array& features, const npy::Array& labels) {
  DataReport d;
  d.rows = features.rows;
  std::vector<double> col(features.rows);
  for (std::size_t c = 0; c < features.cols; ++c) {
    for (std::size_t r = 0; r < features.rows; ++r) col[r] = features.at(r, c);
    d.features.push_back(column_stats(fmt::format("x{}", c), col));
  }
  d.labels = column_stats("y", labels.values);
  return d;
}

void progress(const Options& o, const std::string& what) {
  if (o.progress) std::fprintf(stderr, "\rdiagnose: %-60s", what.c_str());
}

}  // namespace

Report run(const npy::Array& features, const npy::Array& labels, const Options& o) {
  if (std::string e = validate(o); !e.empty()) throw std::invalid_argument(e);
  if (std::string e = check_inputs(features, labels, o); !e.empty()) throw std::invalid_argument(e);
  const std::size_t rows = features.rows, d = features.cols, h = o.hidden;
  Report r;
  r.options = o;
  progress(o, "data");
  r.data = data_section(features, labels);

  const Weights w0 = init_weights(d, h, o.seed);
  Runner base(baseline_path(), features.values, labels.values, rows, d, h);
  base.set_weights(w0);
  r.baseline = base.forward(0, rows);
  // The reference for underflow: which gradient elements are non-zero in f32 at S = 1.
  const std::vector<double> reference = base.gradients(0, rows, 1.0).values;

  for (const Path& p : low_precision_paths()) {
    progress(o, p.info.name);
    Runner run(p, features.values, labels.values, rows, d, h);
    run.set_weights(w0);
    r.compute.push_back(run.forward(0, rows));
    OptimizationReport opt;
    opt.path = p.info;
    opt.at_1 = grad_stats(run, reference, 1.0);
    opt.at_keras = grad_stats(run, reference, loss_scale::kKerasInitial);
    opt.at_pytorch = grad_stats(run, reference, loss_scale::kPytorchInitial);
    opt.window = loss_window(run, reference, o.underflow_share);
    opt.simulations.push_back(simulate(run, base, w0, o, "keras", loss_scale::kKerasInitial));
    opt.simulations.push_back(simulate(run, base, w0, o, "pytorch", loss_scale::kPytorchInitial));
    r.optimization.push_back(std::move(opt));
  }
  if (o.progress) std::fprintf(stderr, "\r%-80s\r", "");
  r.verdict = decide(r);
  return r;
}

}  // namespace halfmap::diagnose
