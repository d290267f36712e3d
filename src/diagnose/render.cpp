// The report as text (sections data, compute, optimization, verdict; within 100 columns) and as JSON (the keys of
// include/halfmap/diagnose.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

namespace {

constexpr std::size_t kWidth = 100;
constexpr std::size_t kMaxColumnsShown = 24;
constexpr int kPathWidth = 24;

/// Wraps `text` after `label` to kWidth columns, continuation lines indented under the text.
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

std::string path_cell(const PathInfo& p) { return p.keras_like ? p.name + " *" : p.name; }

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
  s += fmt::format("{:<8}{:>6}{:>6}{:>11}  {:>9}{:>9}{:>10}  {:>9}{:>9}{:>10}\n", "column", "NaN", "inf",
                   "first bad", "fp16 inf", "flushed", "subnormal", "bf16 inf", "flushed", "subnormal");
  for (const ColumnStats* c : cols) {
    s += fmt::format("{:<8}{:>6}{:>6}{:>11}  {:>9}{:>9}{:>10}  {:>9}{:>9}{:>10}\n", c->name, c->nan, c->inf,
                     c->first_nonfinite_row ? fmt::format("row {}", *c->first_nonfinite_row) : "-", c->f16.overflow,
                     c->f16.flushed, c->f16.subnormal, c->bf16.overflow, c->bf16.flushed, c->bf16.subnormal);
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
      first = fmt::format("loss ({}), sum of (p-y)^2 too large from row {}", num(n->value), n->row);
    } else {
      first = fmt::format("loss ({}), (p-y)^2 too large from row {}", num(n->value), n->row);
    }
  }
  return fmt::format("{:<{}}{:<9}{:>10}  {:<7}{}\n", label, kPathWidth, dtype_name(f.path.storage), num(f.loss),
                     f.finite() ? "yes" : "no", first);
}

std::string compute_text(const Report& r) {
  std::string s = "== compute: the forward at the initial weights ==\n";
  s += "stages: dense_1 (its ReLU included), dense_2 (the prediction), loss.\n";
  s += fmt::format("{:<{}}{:<9}{:>10}  {:<7}{}\n", "path", kPathWidth, "storage", "loss", "finite",
                   "first non-finite");
  s += forward_row(r.baseline, r.baseline.path.name + " (baseline)");
  for (const ForwardReport& f : r.compute) s += forward_row(f, path_cell(f.path));
  return s;
}

/// A window end; S_max at the end of the search means "finite up to there at least".
std::string window_cell(const std::optional<int>& k) {
  if (!k) return "none";
  return *k == kWindowMaxLog2 ? fmt::format(">=2^{}", *k) : fmt::format("2^{}", *k);
}

std::string trajectory(const std::vector<ScaleRun>& runs) {
  auto one = [](const ScaleRun& x) {
    return x.first_step == x.last_step ? fmt::format("{} ({})", scale_text(x.scale), x.first_step)
                                       : fmt::format("{} ({}-{})", scale_text(x.scale), x.first_step, x.last_step);
  };
  if (runs.size() <= 2) {
    std::string s;
    for (const ScaleRun& x : runs) s += (s.empty() ? "" : ", ") + one(x);
    return s;
  }
  return fmt::format("{}, ..., {} [{} runs]", one(runs.front()), one(runs.back()), runs.size());
}

std::string optimization_text(const Report& r) {
  std::string s = "== optimization: gradients dW1, db1, dW2, db2 at the initial weights ==\n";
  const std::size_t count = r.optimization.empty() ? 0 : r.optimization.front().at_1.count;
  const std::size_t ref = r.optimization.empty() ? 0 : r.optimization.front().at_1.reference_nonzero;
  s += wrap("", fmt::format("{} values, {} non-zero in f32 at loss scale 1. underflow: the share of those that "
                            "are zero; subnormal: the share that are subnormal; threshold {}.",
                            count, ref, percent(r.options.underflow_share)));
  s += fmt::format("{:<{}}{:>6}{:>12}{:>11}{:>11}\n", "path", kPathWidth, "scale", "non-finite", "underflow",
                   "subnormal");
  for (const OptimizationReport& o : r.optimization) {
    bool first = true;
    for (const GradStats* g : {&o.at_1, &o.at_keras, &o.at_pytorch}) {
      s += fmt::format("{:<{}}{:>6}{:>12}{:>11}{:>11}\n", first ? path_cell(o.path) : "", kPathWidth,
                       scale_text(g->scale), g->nonfinite, percent(g->underflow_share()),
                       percent(g->subnormal_share()));
      first = false;
    }
  }
  s += "\n";
  s += wrap("", fmt::format("loss-scale window over S = 2^0 .. 2^{}: S_min, the smallest S with finite gradients "
                            "and underflow <= {}; S_max, the last S before a non-finite gradient.",
                            kWindowMaxLog2, percent(r.options.underflow_share)));
  s += fmt::format("{:<{}}{:>7}{:>7}{:>8}  {:<12}{}\n", "path", kPathWidth, "S_min", "S_max", "window",
                   "Keras 2^15", "PyTorch 2^16");
  for (const OptimizationReport& o : r.optimization) {
    const LossWindow& w = o.window;
    s += fmt::format("{:<{}}{:>7}{:>7}{:>8}  {:<12}{}\n", path_cell(o.path), kPathWidth, window_cell(w.S_min_log2),
                     window_cell(w.S_max_log2), w.empty ? "empty" : "ok", w.keras_inside ? "inside" : "outside",
                     w.pytorch_inside ? "inside" : "outside");
  }
  s += "\n";
  const Options& op = r.options;
  s += wrap("", fmt::format("dynamic loss scaling: {} steps of SGD (lr {}) on {}, f32 master weights; x2 after {} "
                            "good steps, x0.5 and a skipped step on a non-finite gradient; final loss in f32.",
                            op.steps, num(op.lr),
                            op.batch == 0 ? "the full data" : fmt::format("minibatches of {} rows", op.batch),
                            op.growth_interval.value_or(loss_scale::kGrowthInterval)));
  s += fmt::format("{:<{}}{:<9}{:>8}{:>8}{:>11}  {}\n", "path", kPathWidth, "framework", "skipped", "final",
                   "final loss", "scale (steps)");
  for (const OptimizationReport& o : r.optimization) {
    bool first = true;
    for (const Simulation& m : o.simulations) {
      s += fmt::format("{:<{}}{:<9}{:>8}{:>8}{:>11}  {}\n", first ? path_cell(o.path) : "", kPathWidth, m.framework,
                       m.skipped, scale_text(m.final_scale), num(m.final_loss), trajectory(m.runs));
      first = false;
    }
  }
  return s;
}

// ---- JSON ------------------------------------------------------------------------------------------------------

using Json = nlohmann::ordered_json;

Json jnum(double v) {
  if (std::isfinite(v)) return v;
  return num(v);
}

Json jstorage(const StorageEffect& e) {
  return Json{{"overflow", e.overflow}, {"flushed", e.flushed}, {"subnormal", e.subnormal}};
}

Json jcolumn(const ColumnStats& c) {
  Json j;
  j["name"] = c.name;
  j["count"] = c.count;
  j["nan"] = c.nan;
  j["inf"] = c.inf;
  j["first_nonfinite_row"] = c.first_nonfinite_row ? Json(*c.first_nonfinite_row) : Json(nullptr);
  j["min"] = jnum(c.min);
  j["max"] = jnum(c.max);
  j["p01"] = jnum(c.p01);
  j["p99"] = jnum(c.p99);
  j["abs_max"] = jnum(c.abs_max);
  j["mean"] = jnum(c.mean);
  j["std"] = jnum(c.std);
  j["near_zero_spread"] = c.near_zero_spread;
  j["f16"] = jstorage(c.f16);
  j["bf16"] = jstorage(c.bf16);
  return j;
}

Json jpath(const PathInfo& p) {
  return Json{{"path", p.name},
              {"mode", mode_name(p.mode)},
              {"isa", isa_name(p.isa)},
              {"storage", dtype_name(p.storage)},
              {"keras_like", p.keras_like}};
}

Json jforward(const ForwardReport& f) {
  Json j = jpath(f.path);
  j["loss"] = jnum(f.loss);
  j["finite"] = f.finite();
  if (const auto& n = f.first_nonfinite) {
    j["first_nonfinite"] = Json{{"stage", n->stage}, {"row", n->row}, {"column", n->column},
                                {"value", jnum(n->value)}, {"accumulated", n->accumulated}};
  } else {
    j["first_nonfinite"] = nullptr;
  }
  return j;
}

Json jgrads(const GradStats& g) {
  return Json{{"scale", g.scale},         {"count", g.count},
              {"reference_nonzero", g.reference_nonzero}, {"nonfinite", g.nonfinite},
              {"zero", g.zero},           {"subnormal", g.subnormal},
              {"underflow_share", g.underflow_share()},   {"subnormal_share", g.subnormal_share()}};
}

Json jopt(const OptimizationReport& o) {
  Json j = jpath(o.path);
  j["at"] = Json::array({jgrads(o.at_1), jgrads(o.at_keras), jgrads(o.at_pytorch)});
  const LossWindow& w = o.window;
  j["window"] = Json{{"S_min_log2", w.S_min_log2 ? Json(*w.S_min_log2) : Json(nullptr)},
                     {"S_max_log2", w.S_max_log2 ? Json(*w.S_max_log2) : Json(nullptr)},
                     {"empty", w.empty},
                     {"keras_inside", w.keras_inside},
                     {"pytorch_inside", w.pytorch_inside}};
  Json sims = Json::array();
  for (const Simulation& m : o.simulations) {
    Json runs = Json::array();
    for (const ScaleRun& x : m.runs) {
      runs.push_back(Json{{"scale", jnum(x.scale)}, {"first_step", x.first_step}, {"last_step", x.last_step}});
    }
    sims.push_back(Json{{"framework", m.framework},
                        {"initial_scale", m.initial_scale},
                        {"growth_interval", m.growth_interval},
                        {"steps", m.steps},
                        {"skipped", m.skipped},
                        {"final_scale", jnum(m.final_scale)},
                        {"final_loss", jnum(m.final_loss)},
                        {"runs", runs}});
  }
  j["simulations"] = sims;
  return j;
}

}  // namespace

std::string render_text(const Report& r) {
  const Options& o = r.options;
  std::string s = wrap("", fmt::format("halfmap diagnose: {} rows, {} feature columns; seed model Dense({}, ReLU) "
                                       "-> Dense(1), squared loss, seed {}. * marks Keras mixed_float16's path "
                                       "(fp16 storage, f32 accumulation).",
                                       r.data.rows, r.data.features.size(), o.hidden, o.seed));
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about "\n" + std::string&&.
  for (const std::string& section : {data_text(r), compute_text(r), optimization_text(r)}) {
    s += '\n';
    s += section;
  }
  s += '\n';
  s += fmt::format("== verdict: {} ==\n", boundary_name(r.verdict.boundary));
  s += wrap("reason: ", r.verdict.reason);
  s += wrap("fix:    ", r.verdict.fix);
  return s;
}

std::string render_json(const Report& r) {
  const Options& o = r.options;
  Json j;
  j["halfmap_diagnose"] = 1;
  j["options"] = Json{{"hidden", o.hidden},
                      {"seed", o.seed},
                      {"steps", o.steps},
                      {"lr", o.lr},
                      {"batch", o.batch},
                      {"growth_interval", o.growth_interval ? Json(*o.growth_interval) : Json(nullptr)},
                      {"underflow_share", o.underflow_share}};
  Json features = Json::array();
  for (const ColumnStats& c : r.data.features) features.push_back(jcolumn(c));
  j["data"] = Json{{"rows", r.data.rows},
                   {"feature_columns", r.data.features.size()},
                   {"features", features},
                   {"labels", jcolumn(r.data.labels)}};
  Json paths = Json::array();
  for (const ForwardReport& f : r.compute) paths.push_back(jforward(f));
  j["compute"] = Json{{"baseline", jforward(r.baseline)}, {"paths", paths}};
  Json opt = Json::array();
  for (const OptimizationReport& x : r.optimization) opt.push_back(jopt(x));
  j["optimization"] = Json{{"underflow_share", o.underflow_share}, {"paths", opt}};
  j["verdict"] = Json{{"boundary", boundary_name(r.verdict.boundary)},
                      {"reason", r.verdict.reason},
                      {"fix", r.verdict.fix}};
  return j.dump(2) + "\n";
}

}  // namespace halfmap::diagnose
