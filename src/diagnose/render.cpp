// The report as text (sections data, compute, optimization, verdict; within 100 columns) and as JSON (the keys of
// include/halfmap/diagnose.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.3g}", v);
}

std::string scale_text(double s) {
  int e = 0;
  if (s > 0 && std::isfinite(s) && std::frexp(s, &e) == 0.5) return fmt::format("2^{}", e - 1);
  return num(s);
}

std::string path_cell(const PathInfo& p) { return p.keras_like ? p.name + " *" : p.name; }

constexpr std::size_t kWidth = 100;

std::string wrap(std::string_view label, std::string_view text) {
  std::string out(label), line;
  const std::string indent(label.size(), ' ');
  std::size_t col = label.size();
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t sp = text.find(' ', i);
    const std::string_view word = text.substr(i, sp == std::string_view::npos ? std::string_view::npos : sp - i);
    if (col > label.size() && col + 1 + word.size() > kWidth) {
      out += "\n" + indent;
      col = indent.size();
    } else if (col > label.size()) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    if (sp == std::string_view::npos) break;
    i = sp + 1;
  }
  return out + "\n";
}

namespace {

constexpr std::size_t kMaxColumnsShown = 24;
constexpr int kPathWidth = 24;

std::string percent(double share) { return fmt::format("{:.1f} %", 100.0 * share); }

bool has_findings(const ColumnStats& c) {
  return c.nan + c.inf > 0 || c.near_zero_spread || c.f16.overflow + c.f16.flushed + c.f16.subnormal > 0 ||
         c.bf16.overflow + c.bf16.flushed + c.bf16.subnormal > 0;
}

/// The columns shown in text: all if few, else those with findings first, then the first others, in order.
std::vector<const ColumnStats*> shown_columns(const DataReport& d, std::size_t& hidden) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < d.features.size() && idx.size() < kMaxColumnsShown; ++i) {
    if (d.features.size() <= kMaxColumnsShown || has_findings(d.features[i])) idx.push_back(i);
  }
  for (std::size_t i = 0; i < d.features.size() && idx.size() < kMaxColumnsShown; ++i) {
    if (std::find(idx.begin(), idx.end(), i) == idx.end()) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end());
  hidden = d.features.size() - idx.size();
  std::vector<const ColumnStats*> out;
  for (std::size_t i : idx) out.push_back(&d.features[i]);
  out.push_back(&d.labels);
  return out;
}

std::string data_text(const Report& r) {
  std::string s = "== data ==\n";
  std::size_t hidden = 0;
  const auto cols = shown_columns(r.data, hidden);
  s += fmt::format("{:<8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}  {}\n", "column", "min", "max", "p01", "p99",
                   "abs max", "mean", "std", "spread");
  for (const ColumnStats* c : cols) {
    s += fmt::format("{:<8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}  {}\n", c->name, num(c->min), num(c->max),
                     num(c->p01), num(c->p99), num(c->abs_max), num(c->mean), num(c->std),
                     c->near_zero_spread ? "near zero" : "ok");
  }
  s += "\n";
  s += fmt::format("{:<8}{:>6}{:>6}{:>11}  {:>9}{:>9}{:>10}  {:>9}{:>9}{:>10}\n", "column", "NaN", "inf", "first bad",
                   "fp16 inf", "flushed", "subnormal", "bf16 inf", "flushed", "subnormal");
  for (const ColumnStats* c : cols) {
    s += fmt::format("{:<8}{:>6}{:>6}{:>11}  {:>9}{:>9}{:>10}  {:>9}{:>9}{:>10}\n", c->name, c->nan, c->inf,
                     c->first_nonfinite_row ? fmt::format("row {}", *c->first_nonfinite_row) : "-", c->f16.overflow,
                     c->f16.flushed, c->f16.subnormal, c->bf16.overflow, c->bf16.flushed, c->bf16.subnormal);
  }
  s += "\nfp8 and MX storage: clipped/flushed values of each column (+lost: in MX blocks with a NaN or inf).\n"
       "e4m3, e5m2: the column cast with Transformer Engine's current scaling, s = max / amax; mx*: OCP MX\n"
       "blocks of 32 rows, one power-of-two scale each. Subnormal counts in --json.\n";
  s += fmt::format("{:<8}", "column");
  for (std::string_view f : kFp8Storages) s += fmt::format("{:>12}", f);
  s += "\n";
  for (const ColumnStats* c : cols) {
    s += fmt::format("{:<8}", c->name);
    for (const Fp8Effect& e : c->fp8)
      s += fmt::format("{:>12}", e.lost > 0 ? fmt::format("{}/{} +{}", e.clipped, e.flushed, e.lost)
                                            : fmt::format("{}/{}", e.clipped, e.flushed));
    s += "\n";
  }
  if (hidden > 0) s += fmt::format("({} more feature columns without findings: see --json)\n", hidden);
  return s;
}

std::string forward_row(const ForwardReport& f, std::string_view label) {
  std::string first = "-";
  if (const auto& n = f.first_nonfinite) {
    if (n->stage != "loss") {
      first = fmt::format("{} row {} col {} ({})", n->stage, n->row, n->column, num(n->value));
    } else if (n->accumulated) {
      first = fmt::format("loss ({}), sum of (p-y)^2 too large at row {}", num(n->value), n->row);
    } else {
      first = fmt::format("loss ({}), (p-y)^2 too large at row {}", num(n->value), n->row);
    }
  }
  return fmt::format("{:<{}}{:<6}{:>10}{:>10}{:>8}  {}\n", label, kPathWidth, dtype_name(f.path.storage), num(f.loss),
                     num(f.max_batch_loss), f.nonfinite_batches, first);
}

std::string compute_text(const Report& r) {
  std::string s = "== compute: the forward at the initial weights, every batch ==\n";
  s += wrap("",
            fmt::format("{} batches of {} rows, in order. stages: dense_1 (its ReLU included), dense_2 (the "
                        "prediction), loss (the batch mean). loss: the mean of the batch losses.",
                        r.data.batches, r.options.batch == 0 ? r.data.rows : std::min(r.options.batch, r.data.rows)));
  s += fmt::format("{:<{}}{:<6}{:>10}{:>10}{:>8}  {}\n", "path", kPathWidth, "type", "loss", "max loss", "bad",
                   "first non-finite");
  s += forward_row(r.baseline, r.baseline.path.name + " (f32)");
  for (const ForwardReport& f : r.compute) s += forward_row(f, path_cell(f.path));
  return s;
}

/// A window end; S_max at the end of the search means "finite up to there at least".
std::string window_cell(const std::optional<int>& k) {
  if (!k) return "none";
  return *k == kWindowMaxLog2 ? fmt::format(">=2^{}", *k) : fmt::format("2^{}", *k);
}

}  // namespace

std::string trajectory(const std::vector<ScaleRun>& runs) {
  auto one = [](const ScaleRun& x) {
    return x.first_step == x.last_step ? fmt::format("{} ({})", scale_text(x.scale), x.first_step)
                                       : fmt::format("{} ({}-{})", scale_text(x.scale), x.first_step, x.last_step);
  };
  if (runs.size() <= 4) {
    std::string s;
    for (const ScaleRun& x : runs) s += (s.empty() ? "" : ", ") + one(x);
    return s;
  }
  return fmt::format("{}, ..., {} [{} runs]", one(runs.front()), one(runs.back()), runs.size());
}

namespace {

std::string worst_text(const BatchDistribution& d) {
  std::string s;
  for (const BatchRef& w : d.worst) {
    s += fmt::format("{}{} (rows {}-{}{})", s.empty() ? "" : ", ", w.batch, w.first_row, w.last_row,
                     w.nonfinite > 0 ? fmt::format(", {} non-finite", w.nonfinite) : "");
  }
  return s.empty() ? "-" : s;
}

std::string gradients_text(const Report& r) {
  std::string s = "== optimization: gradients dW1, db1, dW2, db2 of every batch at the initial weights ==\n";
  const std::size_t count = r.optimization.empty() ? 0 : r.optimization.front().at_1.pooled.count;
  s += wrap("", fmt::format("{} batches x {} values. underflow: the share of the values non-zero in f32 (same "
                            "batch, S = 1) that are zero, pooled, and its median and max over batches; over: "
                            "batches above the {} share; bad: batches with a non-finite value.",
                            r.data.batches, r.data.batches == 0 ? 0 : count / r.data.batches,
                            percent(r.options.underflow_share)));
  s += fmt::format("{:<{}}{:>6}{:>10}{:>8}{:>8}{:>7}{:>7}\n", "path", kPathWidth, "scale", "underflow", "median", "max",
                   "over", "bad");
  std::string worst;
  for (const OptimizationReport& o : r.optimization) {
    bool first = true;
    for (const BatchDistribution* d : {&o.at_1, &o.at_keras, &o.at_pytorch}) {
      s += fmt::format("{:<{}}{:>6}{:>10}{:>8}{:>8}{:>7}{:>7}\n", first ? path_cell(o.path) : "", kPathWidth,
                       scale_text(d->pooled.scale), percent(d->pooled.underflow_share()), percent(d->underflow_median),
                       percent(d->underflow_max), d->batches_over_share, d->batches_nonfinite);
      if (!d->worst.empty()) {
        worst +=
            wrap("  ", fmt::format("{} at {}: batch {}", o.path.name, scale_text(d->pooled.scale), worst_text(*d)));
      }
      first = false;
    }
  }
  if (!worst.empty()) s += "worst batches (index, rows):\n" + worst;
  return s;
}

std::string window_table(const Report& r) {
  std::string s =
      wrap("", fmt::format("loss-scale window over S = 2^0 .. 2^{}, per batch: S_min, the smallest S "
                           "with finite gradients and underflow <= {}; S_max, the last S before a "
                           "non-finite gradient; shown for nearly all batches (all but the worst 1 %), with the "
                           "lowest and highest S_max of the batches themselves.",
                           kWindowMaxLog2, percent(r.options.underflow_share)));
  s += fmt::format("{:<{}}{:>8}{:>7}{:>7}{:>8}  {:<12}{:<14}{}\n", "path", kPathWidth, "batches", "S_min", "S_max",
                   "window", "Keras 2^15", "PyTorch 2^16", "S_max per batch");
  for (const OptimizationReport& o : r.optimization) {
    const LossWindow& w = o.window;
    // The spread of the batches' own S_max: how much the batches differ.
    std::optional<int> lo, hi;
    bool none = false;
    for (const BatchWindow& b : w.per_batch) {
      if (!b.S_max_log2) {
        none = true;
        continue;
      }
      lo = std::min(lo.value_or(*b.S_max_log2), *b.S_max_log2);
      hi = std::max(hi.value_or(*b.S_max_log2), *b.S_max_log2);
    }
    const std::string spread = none || !lo ? "none .. " + window_cell(hi) : window_cell(lo) + " .. " + window_cell(hi);
    s += fmt::format("{:<{}}{:>8}{:>7}{:>7}{:>8}  {:<12}{:<14}{}\n", path_cell(o.path), kPathWidth, w.batches,
                     window_cell(w.S_min_log2), window_cell(w.S_max_log2), w.empty ? "empty" : "ok",
                     w.keras_inside ? "inside" : "outside", w.pytorch_inside ? "inside" : "outside", spread);
  }
  return s;
}

std::string simulation_table(const Report& r) {
  const Options& op = r.options;
  std::string s = wrap(
      "", fmt::format("dynamic loss scaling: {} steps of SGD (lr {}) on batches of {} rows{}, f32 master weights; "
                      "x2 after {} good steps, x0.5 and a skipped step on a non-finite gradient; final loss in f32; "
                      "underflow over the good steps.",
                      total_steps(r.data.rows, op), num(op.lr),
                      op.batch == 0 ? r.data.rows : std::min(op.batch, r.data.rows),
                      op.shuffle ? fmt::format(" shuffled each epoch (seed {})", *op.shuffle) : " in order",
                      op.growth_interval.value_or(loss_scale::kGrowthInterval)));
  s += fmt::format("{:<{}}{:<8}{:>8}{:>7}{:>10}{:>11}  {}\n", "path", kPathWidth, "scaler", "skipped", "final",
                   "underflow", "final loss", "outcome");
  std::string runs;
  for (const OptimizationReport& o : r.optimization) {
    bool first = true;
    for (const Simulation& m : o.simulations) {
      s += fmt::format("{:<{}}{:<8}{:>8}{:>7}{:>10}{:>11}  {}\n", first ? path_cell(o.path) : "", kPathWidth,
                       m.framework, m.skipped, scale_text(m.final_scale), percent(m.good_steps.underflow_share()),
                       num(m.final_loss), outcome_name(m.outcome));
      runs += wrap("  ", fmt::format("{} {}: {}", o.path.name, m.framework, trajectory(m.runs)));
      first = false;
    }
  }
  return s + "scale (steps):\n" + runs;
}

std::string optimization_text(const Report& r) {
  return gradients_text(r) + "\n" + window_table(r) + "\n" + simulation_table(r);
}

}  // namespace

std::string render_text(const Report& r) {
  const Options& o = r.options;
  std::string s = wrap("", fmt::format("halfmap diagnose: {} rows, {} feature columns; seed model Dense({}, ReLU) "
                                       "-> Dense(1), squared loss, seed {}. * marks f16_f32acc (fp16 storage, "
                                       "f32 accumulation: an f32-accumulating GEMM, Keras mixed_float16 on a GPU).",
                                       r.data.rows, r.data.features.size(), o.hidden, o.seed));
  return sections_and_verdict(s, {data_text(r), compute_text(r), optimization_text(r)}, r.verdict.boundary,
                              r.verdict.reason, r.verdict.fix, r.verdict.notes);
}

std::string sections_and_verdict(std::string head, std::initializer_list<std::string> sections, Boundary boundary,
                                 const std::string& reason, const std::string& fix,
                                 const std::vector<std::string>& notes) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about "\n" + std::string&&.
  for (const std::string& section : sections) {
    head += '\n';
    head += section;
  }
  head += '\n';
  head += fmt::format("== verdict: {} ==\n", boundary_name(boundary));
  head += wrap("reason: ", reason);
  head += wrap("fix:    ", fix);
  for (const std::string& n : notes) head += wrap("note:   ", n);
  return head;
}

}  // namespace halfmap::diagnose
