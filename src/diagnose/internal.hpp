// The parts of `halfmap diagnose` (include/halfmap/diagnose.hpp), one source file each.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "diagnose/seed_model.hpp"
#include "halfmap/diagnose.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::diagnose {

/// data.cpp: the statistics of one column (`n` values in row order), and of every column on `threads` threads.
template <class T>
ColumnStats column_stats(std::string name, const T* values, std::size_t n);
DataReport data_section(const Table& features, const Table& labels, const Options& o);
/// fp8.cpp: what storing the column in each fp8 and MX format does (ColumnStats::fp8).
template <class T>
std::vector<Fp8Effect> fp8_effects(const T* values, std::size_t n);
/// fp8.cpp: adds what casting one batch of a layer's outputs (rows × cols, row-major) does to `into` (one entry per
/// kFp8Storages format, in order): one per-tensor cast of the whole batch, MX blocks along each row.
void add_fp8_effects(const float* values, std::size_t rows, std::size_t cols, std::vector<Fp8Effect>& into);

/// Gradient statistics of `g` (at scale S) against the f32 reference gradients `ref` (at S = 1) of the same
/// batch: count, elements non-zero in the reference, and among those the zero and subnormal ones.
GradStats compare_grads(const std::vector<double>& g, std::size_t nonfinite, const std::vector<double>& ref, double S,
                        DType storage);

/// batches.cpp: the compute section and the per-batch gradients at S = 1, 2^15, 2^16 over every batch in order,
/// then the window on at most kWindowBatches of them. Fills r.baseline, r.compute and r.optimization (without
/// simulations).
void measure_batches(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                     const Weights& w0, const Options& o, Report& r);

/// scaling.cpp: dynamic loss scaling of every path with both frameworks' defaults, on threads; fills each
/// OptimizationReport's simulations.
void simulate_all(const Table& x, const Table& y, const SeedPath& base, const std::vector<SeedPath>& paths,
                  const Weights& w0, const Options& o, Report& r);

/// scaling.cpp: dynamic loss scaling as both frameworks ship it (halfmap/loss_scale.hpp), keeping a Simulation's
/// record: call step() at the start of each step, then skip() on a non-finite gradient or good() once the step's
/// update is applied; finish() sets the final scale and the outcome.
class DynamicScaler {
 public:
  DynamicScaler(Simulation& sim, double initial);
  double scale() const { return scale_; }
  void step(std::size_t k);  // k counts from 1
  void skip();
  void good();
  void finish(double underflow_share);

 private:
  Simulation& sim_;
  double scale_;
  std::size_t good_ = 0;
};

/// scaling.cpp: a finished simulation's outcome (diagnose.hpp: collapses, keeps_skipping, underflows, trains).
Outcome outcome_of(const Simulation& s, double share);
/// verdict.cpp: what a failing scaler did, with its numbers; how one that trains behaved ("PyTorch backs off once,
/// to 2^15, then trains").
std::string failure_text(const Simulation& m, double share);
std::string scaler_note(const Simulation& m);
/// render.cpp: a scale's trajectory as runs, "2^16 (1), 2^15 (2-200)".
std::string trajectory(const std::vector<ScaleRun>& runs);

/// verdict.cpp: whether storing a column in fp16 or bf16 overflows, or flushes more than `share` of its non-zero
/// values; a path's name, marked when it is Keras mixed_float16's.
bool storage_crossed(const ColumnStats& c, double share);
std::string path_label(const PathInfo& p);
/// verdict.cpp: what happens without loss scaling (S = 1) on the Keras-like path (see the header).
NoLossScaling no_loss_scaling(const Report& r);

/// diagnose.cpp: runs `work(i)` for i < n on up to `threads` threads (0: the hardware's), each taking the next i.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& work);
/// Starts a run's progress, paced by ProgressPacer (progress.hpp) from this call.
void begin_progress(const Options& o);
/// A progress line on stderr when o.progress (rate-limited; `done` of `total` units of `what`).
void progress(const Options& o, const std::string& what, std::size_t done, std::size_t total);
/// Clears a redrawn progress line at the end of a run (before the report goes to stdout).
void end_progress(const Options& o);

/// render.cpp helpers shared with verdict.cpp: "2^15" for powers of two, else a short %g.
std::string scale_text(double s);
/// A number in at most 9 characters, e.g. "1.23e+05", "-0.5", "nan".
std::string num(double v);
/// `text` after `label`, wrapped to 100 columns, continuation lines indented under the text, ending in '\n'.
std::string wrap(std::string_view label, std::string_view text);
/// `head`, then each section after a blank line, then the verdict's block (boundary, reason, fix, notes).
std::string sections_and_verdict(std::string head, std::initializer_list<std::string> sections, Boundary boundary,
                                 const std::string& reason, const std::string& fix,
                                 const std::vector<std::string>& notes);
/// "f16_f32acc/avx512 *" for the Keras-like path, else the name.
std::string path_cell(const PathInfo& p);
/// numpy.percentile's default (linear interpolation between the closest ranks) of sorted values.
double percentile(const std::vector<double>& sorted, double q);

}  // namespace halfmap::diagnose
