// `halfmap diagnose` as a library (include/halfmap/diagnose.hpp): the cases of tests/diagnose_cases.hpp (issues 6
// and 12) give their verdicts on every path this CPU has, each section holds the evidence the verdict names, the
// batches, the simulated scalers and the .npy reading behave as the header says, and bad options and inputs are
// one sentence. The CLI (text, --json, exit codes) is tested by tests/diagnose_cli.cmake.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "diagnose_cases.hpp"
#include "halfmap/diagnose.hpp"

namespace halfmap::diagnose {
namespace {

using test::diagnose_case;
using test::DiagnoseCase;

npy::Array features_of(const DiagnoseCase& c) {
  npy::Array a;
  a.values = c.features;
  a.rows = c.rows;
  a.cols = c.cols;
  a.ndim = 2;
  a.descr = "<f8";
  return a;
}

npy::Array labels_of(const DiagnoseCase& c) {
  npy::Array a;
  a.values = c.labels;
  a.rows = c.rows;
  a.cols = 1;
  a.ndim = 1;
  a.descr = "<f8";
  return a;
}

/// The defaults, on one thread under the arm64 preset's emulator (its programs hang in pthread_create; see
/// tests/CMakeLists.txt). The thread count does not change the report: each range of batches and each
/// simulation is computed on its own.
Options defaults() {
  Options o;
#ifdef HALFMAP_TEST_NO_THREADS
  o.threads = 1;
#endif
  return o;
}

Options small() {
  Options o = defaults();
  o.steps = 40;  // enough for the trajectory; keeps the suite fast under qemu
  return o;
}

Report run_case(std::string_view name, const Options& o = small()) {
  const DiagnoseCase c = diagnose_case(name);
  return run(features_of(c), labels_of(c), o);
}

const OptimizationReport& keras_path(const Report& r) {
  for (const OptimizationReport& o : r.optimization) {
    if (o.path.keras_like) return o;
  }
  throw std::runtime_error("no Keras-like path");
}

const Simulation& sim(const OptimizationReport& o, std::string_view framework) {
  for (const Simulation& s : o.simulations) {
    if (s.framework == framework) return s;
  }
  throw std::runtime_error("no simulation");
}

TEST(Diagnose, PathsCoverEveryLowPrecisionModeOnceByDefault) {
  const Report r = run_case("small");
  ASSERT_FALSE(r.compute.empty());
  EXPECT_EQ(r.baseline.path.mode, Mode::f32);
  int keras = 0, f16acc = 0, f16 = 0, bf16 = 0;
  for (const ForwardReport& f : r.compute) {
    keras += f.path.keras_like ? 1 : 0;
    f16acc += f.path.mode == Mode::f16_f32acc ? 1 : 0;
    f16 += f.path.mode == Mode::f16 ? 1 : 0;
    bf16 += f.path.mode == Mode::bf16_f32acc ? 1 : 0;
  }
  EXPECT_EQ(keras, 1);
  EXPECT_EQ(f16acc, 1);  // each mode once, on its best ISA (the ref paths are always there)
  EXPECT_EQ(f16, 1);
  EXPECT_EQ(bf16, 1);
  ASSERT_EQ(r.optimization.size(), r.compute.size());
  Options all = small();
  all.all_paths = true;
  const Report ra = run_case("small", all);
  EXPECT_GT(ra.compute.size(), r.compute.size());  // at least f16_f32acc's ref twin more (arm64 has only that one)
  for (const ForwardReport& f : r.compute) {
    bool found = false;
    for (const ForwardReport& g : ra.compute) found = found || g.path.name == f.path.name;
    EXPECT_TRUE(found) << f.path.name;
  }
  int keras_all = 0;
  for (const ForwardReport& f : ra.compute) keras_all += f.path.keras_like ? 1 : 0;
  EXPECT_EQ(keras_all, 1);
}

// Progress in a log: whole "diagnose: ..." lines, no carriage return, and nothing from a run that ends within the
// first interval (the default, a minute), so that short diagnoses leave stderr empty.
TEST(Diagnose, ProgressInALogIsWholeLinesAndNoneForAShortRun) {
  Options o = small();
  o.progress = Progress::lines;
  testing::internal::CaptureStderr();
  (void)run_case("clean", o);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  o.progress_interval = std::chrono::milliseconds(0);
  testing::internal::CaptureStderr();
  (void)run_case("clean", o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), '\n');
  std::size_t lines = 0;
  for (std::size_t b = 0, e; (e = err.find('\n', b)) != std::string::npos; b = e + 1, ++lines) {
    EXPECT_EQ(err.compare(b, 10, "diagnose: "), 0) << err.substr(b, e - b);
  }
  EXPECT_GE(lines, 3u) << err;
}

TEST(Diagnose, PathFirstPutsOnePathFirst) {
  Options o = small();
  o.path_first = "f16_f32acc/ref";
  const Report r = run_case("small", o);
  ASSERT_FALSE(r.compute.empty());
  EXPECT_EQ(r.compute.front().path.name, "f16_f32acc/ref");
  EXPECT_EQ(r.optimization.front().path.name, "f16_f32acc/ref");
  EXPECT_EQ(r.compute.size(), 4u);  // added to the three defaults (ref is never a best ISA on x86-64 or arm64)
  o.path_first = "f16/nosuch";
  EXPECT_THROW(run_case("small", o), std::invalid_argument);
}

TEST(Diagnose, CleanStandardisedDataIsOkWithTheBackOffNote) {
  // Issue 12's false alarm: 2048 x 16 standard-normal features, labels linear times 0.1. Per-batch gradients at
  // 2^16 overflow on some batches, the scalers back off and train: ok, with a note that says how.
  const Report r = run_case("clean", defaults());
  EXPECT_EQ(r.verdict.boundary, Boundary::ok) << r.verdict.reason;
  EXPECT_EQ(r.data.batches, 64u);
  const OptimizationReport& k = keras_path(r);
  for (const Simulation& s : k.simulations) {
    EXPECT_EQ(s.outcome, Outcome::trains) << s.framework;
    EXPECT_LE(double(s.skipped), std::log2(s.initial_scale / s.final_scale) + 1 + double(s.growths)) << s.framework;
    EXPECT_LT(s.final_loss, r.baseline.loss) << s.framework;  // training lowers the loss
  }
  const Simulation& pt = sim(k, "pytorch");
  EXPECT_GT(pt.skipped, 0u);  // the back-off really happens
  ASSERT_FALSE(r.verdict.notes.empty());
  EXPECT_NE(r.verdict.notes[0].find("PyTorch backs off"), std::string::npos) << r.verdict.notes[0];
  EXPECT_NE(r.verdict.notes[0].find("then trains"), std::string::npos) << r.verdict.notes[0];
  EXPECT_TRUE(r.no_loss_scaling.warning.empty()) << r.no_loss_scaling.warning;
}

TEST(Diagnose, SmallIsOkWithoutSkipping) {
  const Report r = run_case("small");
  EXPECT_EQ(r.verdict.boundary, Boundary::ok) << r.verdict.reason;
  EXPECT_TRUE(r.baseline.finite());
  for (const ForwardReport& f : r.compute) EXPECT_TRUE(f.finite()) << f.path.name;
  for (const OptimizationReport& o : r.optimization) {
    EXPECT_EQ(o.at_1.pooled.nonfinite, 0u) << o.path.name;
    EXPECT_EQ(o.at_1.pooled.zero, 0u) << o.path.name;
    EXPECT_EQ(o.at_pytorch.pooled.nonfinite, 0u) << o.path.name;
    EXPECT_EQ(o.at_1.batches, 2u) << o.path.name;  // 64 rows in batches of 32
    EXPECT_TRUE(o.window.keras_inside && o.window.pytorch_inside) << o.path.name;
    for (const Simulation& s : o.simulations) {
      EXPECT_EQ(s.skipped, 0u) << o.path.name << " " << s.framework;
      EXPECT_EQ(s.final_scale, s.initial_scale);
      ASSERT_EQ(s.runs.size(), 1u);
      EXPECT_EQ(s.runs[0].last_step, 40u);
    }
  }
  // Training lowers the loss: the simulation really updates the f32 master weights.
  const Simulation& s = keras_path(r).simulations[0];
  EXPECT_LT(s.final_loss, r.baseline.loss);
}

TEST(Diagnose, NanIsDataWithItsIndex) {
  const Report r = run_case("nan");
  EXPECT_EQ(r.verdict.boundary, Boundary::data);
  const ColumnStats& c = r.data.features[test::kNanColumn];
  EXPECT_EQ(c.nan, 1u);
  ASSERT_TRUE(c.first_nonfinite_row.has_value());
  EXPECT_EQ(*c.first_nonfinite_row, test::kNanRow);
  EXPECT_NE(r.verdict.reason.find("x2"), std::string::npos) << r.verdict.reason;
  EXPECT_NE(r.verdict.reason.find("row 17"), std::string::npos) << r.verdict.reason;
  // The baseline fails too: the data check comes first because it names the cause.
  EXPECT_FALSE(r.baseline.finite());
  // Statistics are over the finite values.
  EXPECT_EQ(c.count, 64u);
  EXPECT_TRUE(std::isfinite(c.mean));
}

TEST(Diagnose, LargeOverflowsFp16Storage) {
  const Report r = run_case("large");
  EXPECT_EQ(r.verdict.boundary, Boundary::data) << r.verdict.reason;
  std::size_t overflow = 0;
  for (const ColumnStats& c : r.data.features) {
    overflow += c.f16.overflow;
    EXPECT_EQ(c.bf16.overflow, 0u);  // bf16 has f32's range
    EXPECT_GT(c.abs_max, 65504.0);
  }
  EXPECT_GT(overflow, 0u);
  EXPECT_TRUE(r.baseline.finite());
  // The fix states the statistics to normalise with.
  EXPECT_NE(r.verdict.fix.find("mean"), std::string::npos);
  EXPECT_NE(r.verdict.fix.find("std"), std::string::npos);
}

TEST(Diagnose, SquaredErrorOverflowIsCompute) {
  const Report r = run_case("compute");
  EXPECT_EQ(r.verdict.boundary, Boundary::compute) << r.verdict.reason;
  for (const ColumnStats& c : r.data.features) EXPECT_EQ(c.f16.overflow, 0u);
  EXPECT_EQ(r.data.labels.f16.overflow, 0u);
  EXPECT_TRUE(r.baseline.finite());
  EXPECT_GT(r.baseline.loss, 65504.0);
  for (const ForwardReport& f : r.compute) {
    if (f.path.storage == DType::f16) {
      ASSERT_FALSE(f.finite()) << f.path.name;
      EXPECT_EQ(f.first_nonfinite->stage, "loss") << f.path.name;
    } else {
      EXPECT_TRUE(f.finite()) << f.path.name;  // bf16: 9e4 is far inside its range
    }
  }
  EXPECT_NE(r.verdict.fix.find("float32"), std::string::npos);
}

TEST(Diagnose, AccumulatedSquaredErrorOverflowIsNamedAndNotKeras) {
  // Labels shifted by 50: every squared error (about 2500) fits fp16, but their sum over a batch of 32 rows
  // (about 8e4) does not. The paths that accumulate in fp16 (mode f16) overflow at the loss; f16_f32acc (Keras
  // mixed_float16's) sums in f32 and stays finite, and the verdict says so.
  DiagnoseCase c = diagnose_case("small");
  for (double& y : c.labels) y += 50.0;
  const Report r = run(features_of(c), labels_of(c), small());
  EXPECT_EQ(r.verdict.boundary, Boundary::compute) << r.verdict.reason;
  bool any_f16 = false;
  for (const ForwardReport& f : r.compute) {
    if (f.path.mode == Mode::f16) {
      any_f16 = true;
      ASSERT_FALSE(f.finite()) << f.path.name;
      EXPECT_EQ(f.first_nonfinite->stage, "loss") << f.path.name;
      EXPECT_TRUE(f.first_nonfinite->accumulated) << f.path.name;
      EXPECT_GT(f.first_nonfinite->row, 0u) << f.path.name;  // the running sum passes 65504 part-way
    } else {
      EXPECT_TRUE(f.finite()) << f.path.name;
    }
  }
  if (!any_f16) GTEST_SKIP() << "no fp16-arithmetic path on this CPU";
  EXPECT_NE(r.verdict.reason.find("running sum"), std::string::npos) << r.verdict.reason;
  EXPECT_NE(r.verdict.reason.find("Keras mixed_float16's path"), std::string::npos) << r.verdict.reason;
}

TEST(Diagnose, UnderflowWithoutLossScalingIsOkWithAWarning) {
  const Report r = run_case("underflow");
  EXPECT_EQ(r.verdict.boundary, Boundary::ok) << r.verdict.reason;
  for (const ColumnStats& c : r.data.features) {
    EXPECT_EQ(c.f16.flushed, 0u);
    EXPECT_EQ(c.f16.subnormal, 0u);
  }
  for (const ForwardReport& f : r.compute) EXPECT_TRUE(f.finite()) << f.path.name;
  for (const OptimizationReport& o : r.optimization) {
    if (o.path.storage != DType::f16) continue;
    EXPECT_GT(o.at_1.pooled.underflow_share(), 0.5) << o.path.name;
    EXPECT_EQ(o.at_keras.pooled.nonfinite, 0u) << o.path.name;
    EXPECT_LE(o.at_keras.pooled.underflow_share(), r.options.underflow_share) << o.path.name;
    ASSERT_FALSE(o.window.empty) << o.path.name;
    EXPECT_GT(*o.window.S_min_log2, 0) << o.path.name;
    EXPECT_LE(*o.window.S_min_log2, 15) << o.path.name;
    EXPECT_GE(*o.window.S_max_log2, 16) << o.path.name;
    EXPECT_TRUE(o.window.keras_inside) << o.path.name;
    for (const Simulation& s : o.simulations) EXPECT_EQ(s.outcome, Outcome::trains) << o.path.name;
  }
  EXPECT_GT(r.no_loss_scaling.underflow_share, 0.5);
  EXPECT_TRUE(r.no_loss_scaling.stalls);
  ASSERT_FALSE(r.no_loss_scaling.warning.empty());
  EXPECT_NE(r.no_loss_scaling.warning.find("without loss scaling"), std::string::npos);
  ASSERT_EQ(r.verdict.notes.size(), 2u);  // the scalers' note and the warning
  EXPECT_EQ(r.verdict.notes[1], r.no_loss_scaling.warning);
}

TEST(Diagnose, BatchesOfTwoScalesAreOptimization) {
  // Large batches force the scalers down; at the scale they settle at, the tiny batches' gradients underflow.
  const Report r = run_case("optimization", defaults());
  EXPECT_EQ(r.verdict.boundary, Boundary::optimization) << r.verdict.reason;
  const OptimizationReport& k = keras_path(r);
  for (const Simulation& s : k.simulations) {
    EXPECT_EQ(s.outcome, Outcome::underflows) << s.framework;
    EXPECT_GT(s.good_steps.underflow_share(), r.options.underflow_share) << s.framework;
  }
  EXPECT_NE(r.verdict.reason.find("underflow"), std::string::npos) << r.verdict.reason;
  EXPECT_NE(r.verdict.reason.find("window"), std::string::npos) << r.verdict.reason;
  EXPECT_FALSE(r.verdict.fix.empty());
  // The worst batches at S = 1 are the tiny ones (odd indices), named with their rows.
  ASSERT_FALSE(k.at_1.worst.empty());
  EXPECT_EQ(k.at_1.worst[0].batch % 2, 1u);
  EXPECT_EQ(k.at_1.worst[0].first_row, 32 * k.at_1.worst[0].batch);
  EXPECT_EQ(k.at_1.worst[0].last_row, k.at_1.worst[0].first_row + 31);
}

TEST(Diagnose, CollapseAndSkippingAfterTheBackOffAreOptimization) {
  // The verdict follows the scalers' outcome: the same report, with the Keras-like path's scaler made to
  // collapse or to keep skipping, turns from ok to optimization and says which.
  const Report base = run_case("small");
  ASSERT_EQ(base.verdict.boundary, Boundary::ok);
  for (Outcome bad : {Outcome::collapses, Outcome::keeps_skipping}) {
    Report r = base;
    for (OptimizationReport& o : r.optimization) {
      if (!o.path.keras_like) continue;
      Simulation& s = o.simulations[1];
      s.outcome = bad;
      s.skipped = s.late_skipped = 30;
      s.min_scale = s.final_scale = bad == Outcome::collapses ? 0.25 : 256;
    }
    const Verdict v = decide(r);
    EXPECT_EQ(v.boundary, Boundary::optimization) << v.reason;
    EXPECT_NE(v.reason.find(bad == Outcome::collapses ? "collapses" : "keeps skipping"), std::string::npos) << v.reason;
    EXPECT_NE(v.reason.find("PyTorch"), std::string::npos) << v.reason;
  }
}

TEST(Diagnose, StepsEpochsAndShuffle) {
  EXPECT_EQ(batch_count(2048, Options{}), 64u);
  Options o;
  o.batch = 0;
  EXPECT_EQ(batch_count(2048, o), 1u);
  o = Options{};
  o.batch = 100;
  EXPECT_EQ(batch_count(250, o), 3u);  // the last batch is shorter
  EXPECT_EQ(total_steps(250, o), kDefaultSteps);
  o.epochs = 4;
  EXPECT_EQ(total_steps(250, o), 12u);
  o = small();
  o.shuffle = 5;
  const Report a = run_case("small", o), b = run_case("small", o);
  EXPECT_EQ(keras_path(a).simulations[0].final_loss, keras_path(b).simulations[0].final_loss);  // reproducible
  const Report c = run_case("small");
  EXPECT_NE(keras_path(a).simulations[0].final_loss, keras_path(c).simulations[0].final_loss);  // shuffled
}

TEST(Diagnose, BaselineFailureWithFiniteData) {
  // Values of 1e20 fit f32 storage but their squared error (1e40) does not: the f32 baseline itself fails.
  DiagnoseCase c = diagnose_case("small");
  for (double& y : c.labels) y = 1e20;
  const Report r = run(features_of(c), labels_of(c), small());
  EXPECT_EQ(r.verdict.boundary, Boundary::baseline) << r.verdict.reason;
  EXPECT_EQ(r.verdict.fix, "the f32 baseline itself fails: fix the data or the loss first.");
}

TEST(Diagnose, SimulationBacksOffOnOverflow) {
  // Labels of 100 with features of order 1: the gradients at 2^15 and 2^16 overflow fp16, so the dynamic scaler
  // skips steps and halves until it is inside the window, then trains.
  DiagnoseCase c = diagnose_case("small");
  for (double& y : c.labels) y += 100.0;
  Options o = small();
  o.growth_interval = 5;
  const Report r = run(features_of(c), labels_of(c), o);
  const OptimizationReport& k = keras_path(r);
  EXPECT_GT(k.at_keras.pooled.nonfinite, 0u);
  for (const Simulation& s : k.simulations) {
    EXPECT_GT(s.skipped, 0u) << s.framework;
    ASSERT_GE(s.runs.size(), 2u) << s.framework;
    EXPECT_EQ(s.runs[0].scale, s.initial_scale);
    EXPECT_EQ(s.runs[1].scale, s.initial_scale / 2);
    // A skipped step leaves the weights as they were, so the first steps are skipped one after another.
    std::size_t steps = 0;
    for (const ScaleRun& x : s.runs) steps += x.last_step - x.first_step + 1;
    EXPECT_EQ(steps, 40u);
  }
}

TEST(Diagnose, JsonHasTheSectionsInOrder) {
  const Report r = run_case("optimization");
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(render_json(r));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"halfmap_diagnose", "options", "data", "compute", "optimization",
                                            "no_loss_scaling", "verdict"}));
  EXPECT_EQ(j["verdict"]["boundary"], "optimization");
  EXPECT_EQ(j["data"]["features"].size(), 4u);
  EXPECT_EQ(j["compute"]["paths"].size(), r.compute.size());
  const auto& p = j["optimization"]["paths"][0];
  EXPECT_TRUE(p["window"]["S_min_log2"].is_number());
  EXPECT_EQ(p["simulations"].size(), 2u);
  EXPECT_EQ(p["at"][0]["batches"], 8u);
  ASSERT_EQ(p["window"]["per_batch"].size(), 8u);  // every batch, when there are at most kWindowBatches
  EXPECT_EQ(p["window"]["per_batch"][3]["batch"], 3u);
  EXPECT_TRUE(p["simulations"][0]["outcome"].is_string());
  EXPECT_TRUE(j["verdict"]["notes"].is_array());
}

TEST(Diagnose, TextIsInReportOrderAndFits100Columns) {
  for (std::string_view name : test::kDiagnoseCases) {
    const Report r = run_case(name);
    const std::string t = render_text(r);
    const auto data = t.find("== data ==");
    const auto compute = t.find("== compute");
    const auto opt = t.find("== optimization");
    const auto verdict = t.find("== verdict: " + std::string(boundary_name(r.verdict.boundary)));
    ASSERT_NE(verdict, std::string::npos) << name;
    EXPECT_LT(data, compute);
    EXPECT_LT(compute, opt);
    EXPECT_LT(opt, verdict);
    std::size_t start = 0;
    while (start < t.size()) {
      const std::size_t end = t.find('\n', start);
      EXPECT_LE(end - start, 100u) << name << ": " << t.substr(start, end - start);
      start = end + 1;
    }
  }
}

TEST(Diagnose, BadOptionsAreOneSentence) {
  Options o;
  o.hidden = 0;
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.hidden = kMaxHidden + 1;
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.steps = 0;
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.lr = std::nan("");
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.underflow_share = 1;
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.growth_interval = 0;
  EXPECT_NE(validate(o), "");
  o = Options{};
  o.steps = 10;
  o.epochs = 1;
  EXPECT_NE(validate(o), "");  // one or the other
  o = Options{};
  o.epochs = 0;
  EXPECT_NE(validate(o), "");
  EXPECT_EQ(validate(Options{}), "");
}

TEST(Diagnose, BadInputsAreOneSentence) {
  const DiagnoseCase c = diagnose_case("small");
  const Table x = Table::from_array(features_of(c));
  npy::Array ya = labels_of(c);
  const Table y = Table::from_array(ya);
  EXPECT_EQ(check_inputs(x, y, Options{}), "");
  npy::Array short_y = ya;
  short_y.values.pop_back();
  short_y.rows = 63;
  EXPECT_NE(check_inputs(x, Table::from_array(short_y), Options{}).find("63"), std::string::npos);
  const Table wide_y = x;  // 4 columns
  EXPECT_NE(check_inputs(x, wide_y, Options{}).find("4 columns"), std::string::npos);
  const Table empty;
  EXPECT_NE(check_inputs(empty, y, Options{}), "");
  EXPECT_NE(check_inputs(x, empty, Options{}), "");
  npy::Array wide;
  wide.rows = 1;
  wide.cols = kMaxColumns + 1;
  wide.ndim = 2;
  wide.values.assign(wide.cols, 0.0);
  npy::Array one;
  one.rows = 1;
  one.cols = 1;
  one.values = {0.0};
  EXPECT_NE(check_inputs(Table::from_array(wide), Table::from_array(one), Options{}).find("columns"),
            std::string::npos);
  EXPECT_THROW(run(features_of(c), short_y, defaults()), std::invalid_argument);
}

TEST(Diagnose, TableReadsNpyFilesIntoColumns) {
  // Column-major in memory whatever the file's order; float when the dtype fits float, else double.
  const DiagnoseCase c = diagnose_case("small");
  const std::string dir = ::testing::TempDir();
  npy::save(dir + "/diag_c_f4.npy", c.features, c.rows, c.cols, 2, "<f4");
  npy::save(dir + "/diag_f_f8.npy", c.features, c.rows, c.cols, 2, ">f8", true);
  const Table a = Table::load(dir + "/diag_c_f4.npy");
  const Table b = Table::load(dir + "/diag_f_f8.npy");
  EXPECT_TRUE(a.is_f32());
  EXPECT_FALSE(b.is_f32());
  ASSERT_EQ(a.rows(), c.rows);
  ASSERT_EQ(b.cols(), c.cols);
  for (std::size_t r = 0; r < c.rows; ++r) {
    for (std::size_t j = 0; j < c.cols; ++j) {
      EXPECT_EQ(a.at(r, j), double(float(c.features[r * c.cols + j])));
      EXPECT_EQ(b.at(r, j), c.features[r * c.cols + j]);
    }
  }
  EXPECT_EQ(a.column_f32(1)[5], float(c.features[5 * c.cols + 1]));
  EXPECT_THROW(Table::load(dir + "/no-such-file.npy"), npy::Error);
}

TEST(Diagnose, OneDimensionalFeaturesAreOneColumn) {
  const DiagnoseCase c = diagnose_case("small");
  npy::Array x;
  x.rows = c.rows;
  x.cols = 1;
  x.ndim = 1;
  for (std::size_t r = 0; r < c.rows; ++r) x.values.push_back(c.features[r * c.cols]);
  const Report r = run(x, labels_of(c), small());
  ASSERT_EQ(r.data.features.size(), 1u);
  EXPECT_EQ(r.data.features[0].name, "x0");
}

TEST(Diagnose, ColumnStatistics) {
  // 1..100: numpy.percentile(x, 1) = 1.99, (x, 99) = 99.01; mean 50.5; population std sqrt((100^2 - 1) / 12).
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  v.push_back(std::numeric_limits<double>::infinity());
  v.push_back(70000.0);  // overflows fp16, not bf16
  v.push_back(1e-9);     // flushes in fp16 (below 2^-25), subnormal nowhere
  v.push_back(1e-6);     // subnormal in fp16
  npy::Array x;
  x.rows = v.size();
  x.cols = 1;
  x.values = v;
  npy::Array y = x;
  const Report full = run(x, y, small());
  const ColumnStats& s = full.data.features[0];
  EXPECT_EQ(s.inf, 1u);
  EXPECT_EQ(*s.first_nonfinite_row, 100u);
  EXPECT_EQ(s.f16.overflow, 1u);
  EXPECT_EQ(s.bf16.overflow, 0u);
  EXPECT_EQ(s.f16.flushed, 1u);
  EXPECT_EQ(s.f16.subnormal, 1u);
  EXPECT_EQ(s.max, 70000.0);
  EXPECT_EQ(s.min, 1e-9);
  EXPECT_EQ(full.verdict.boundary, Boundary::data);
  std::vector<double> w;
  for (int i = 1; i <= 100; ++i) w.push_back(i);
  npy::Array z;
  z.rows = 100;
  z.cols = 1;
  z.values = w;
  const Report zr = run(z, z, small());
  const ColumnStats& t = zr.data.features[0];
  EXPECT_NEAR(t.p01, 1.99, 1e-12);
  EXPECT_NEAR(t.p99, 99.01, 1e-12);
  EXPECT_DOUBLE_EQ(t.mean, 50.5);
  EXPECT_NEAR(t.std, std::sqrt((100.0 * 100.0 - 1.0) / 12.0), 1e-12);
  EXPECT_FALSE(t.near_zero_spread);
}

}  // namespace
}  // namespace halfmap::diagnose
