// The verdict: the first boundary crossed, in the order of include/halfmap/diagnose.hpp, and the smallest fix.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

std::string_view boundary_name(Boundary b) {
  switch (b) {
    case Boundary::ok: return "ok";
    case Boundary::data: return "data";
    case Boundary::baseline: return "baseline";
    case Boundary::compute: return "compute";
    case Boundary::optimization: return "optimization";
  }
  return "?";
}

namespace {

/// Every column in report order: the features, then the labels.
std::vector<const ColumnStats*> columns(const Report& r) {
  std::vector<const ColumnStats*> out;
  for (const ColumnStats& c : r.data.features) out.push_back(&c);
  out.push_back(&r.data.labels);
  return out;
}

std::string where(const ColumnStats& c, std::size_t feature_count) {
  if (c.name == "y") return fmt::format("labels[{}]", *c.first_nonfinite_row);
  if (feature_count == 1) return fmt::format("features[{}]", *c.first_nonfinite_row);
  return fmt::format("features[{}, {}]", *c.first_nonfinite_row, c.name.substr(1));
}

std::optional<Verdict> nonfinite_data(const Report& r) {
  for (const ColumnStats* c : columns(r)) {
    if (c->nan + c->inf == 0) continue;
    Verdict v{Boundary::data, "", ""};
    v.reason = fmt::format("column {} holds {} NaN and {} inf; the first is at row {} ({}).", c->name, c->nan, c->inf,
                           *c->first_nonfinite_row, where(*c, r.data.features.size()));
    v.fix = fmt::format("fix the data: remove or impute the non-finite values (the first at row {} of column {}) "
                        "before training; no precision setting can fix them.",
                        *c->first_nonfinite_row, c->name);
    return v;
  }
  return std::nullopt;
}

std::string nonfinite_text(const ForwardReport& f) {
  const NonFinite& n = *f.first_nonfinite;
  if (n.stage == "loss" && n.accumulated) {
    return fmt::format("the loss ({}; every squared error fits, their running sum passes the largest finite value "
                       "at row {})", num(n.value), n.row);
  }
  if (n.stage == "loss") return fmt::format("the loss ({}; first large squared error at row {})", num(n.value), n.row);
  return fmt::format("{} at row {}, column {} ({})", n.stage, n.row, n.column, num(n.value));
}

bool storage_crossed(const ColumnStats& c, double share) {
  const double allowed = share * double(c.nonzero);
  return c.f16.overflow + c.bf16.overflow > 0 || double(c.f16.flushed) > allowed || double(c.bf16.flushed) > allowed;
}

std::optional<Verdict> storage_data(const Report& r) {
  const double share = r.options.underflow_share;
  std::string reason, stats;
  bool labels = false;
  for (const ColumnStats* c : columns(r)) {
    if (!storage_crossed(*c, share)) continue;
    if (c->f16.overflow + c->bf16.overflow > 0) {
      reason += fmt::format("{}: {} of {} values overflow fp16 storage (abs max {} > 65504){}. ", c->name,
                            c->f16.overflow, c->count, num(c->abs_max),
                            c->bf16.overflow > 0 ? fmt::format(", {} overflow bf16", c->bf16.overflow) : "");
    } else {
      reason += fmt::format("{}: {} of {} non-zero values flush to zero in fp16 storage ({} in bf16). ", c->name,
                            c->f16.flushed, c->nonzero, c->bf16.flushed);
    }
    labels = labels || c->name == "y";
    stats += fmt::format("{}{}: mean {}, std {}{}", stats.empty() ? "" : "; ", c->name, num(c->mean), num(c->std),
                         c->near_zero_spread ? " (constant: drop it rather than divide by its std)" : "");
  }
  if (reason.empty()) return std::nullopt;
  reason.pop_back();
  Verdict v{Boundary::data, reason, ""};
  v.fix = fmt::format("normalise {} before training, x' = (x - mean) / std per column, with {}{}.",
                      labels ? "the inputs and the labels" : "the inputs", stats,
                      labels ? " (predict the normalised labels and undo the scaling on the predictions)" : "");
  return v;
}

/// The path to name for a boundary: the Keras mixed_float16 one if it crosses, else the first that does.
/// `others` lists the other paths that cross; `keras_clear` is set to a sentence when the Keras path exists and
/// does not cross (the boundary is then one of halfmap's other paths, e.g. fp16 arithmetic, which a
/// mixed_float16 user does not run: the reason must say so).
template <class T, class Crossed>
const T* pick(const std::vector<T>& items, Crossed crossed, std::string& others, std::string& keras_clear) {
  const T* chosen = nullptr;
  const T* keras = nullptr;
  for (const T& t : items) {
    if (t.path.keras_like) keras = &t;
    if (crossed(t) && t.path.keras_like) chosen = &t;
  }
  for (const T& t : items) {
    if (!crossed(t)) continue;
    if (chosen == nullptr) chosen = &t;
    if (&t != chosen) others += fmt::format("{}{}", others.empty() ? "" : ", ", t.path.name);
  }
  if (chosen != nullptr && keras != nullptr && !crossed(*keras)) {
    keras_clear = fmt::format(" Keras mixed_float16's path ({}) does not cross it.", keras->path.name);
  }
  return chosen;
}

std::string path_label(const PathInfo& p) {
  return p.keras_like ? fmt::format("{} (Keras mixed_float16)", p.name) : p.name;
}

std::optional<Verdict> compute(const Report& r) {
  std::string others;
  std::string keras_clear;
  const ForwardReport* f =
      pick(r.compute, [](const ForwardReport& x) { return !x.finite(); }, others, keras_clear);
  if (f == nullptr) return std::nullopt;
  Verdict v{Boundary::compute, "", ""};
  v.reason = fmt::format("the forward is finite in f32 but not on {}: the first non-finite value is {}{}.{}",
                         path_label(f->path), nonfinite_text(*f),
                         others.empty() ? "" : fmt::format("; also non-finite on {}", others), keras_clear);
  const std::string& stage = f->first_nonfinite->stage;
  if (stage == "loss") {
    v.fix = "keep the loss in float32: make the model's output float32 (Keras: a final "
            "Activation('linear', dtype='float32')), so that the squared error is never stored in fp16.";
  } else if (stage == "dense_2") {
    v.fix = "keep dense_2 (the output layer) in float32 (Keras: dtype='float32' on that layer).";
  } else {
    v.fix = "keep dense_1's output in float32 (Keras: dtype='float32' on that layer).";
  }
  return v;
}

bool optimization_crossed(const OptimizationReport& o, double share) {
  return o.at_1.underflow_share() > share || o.at_keras.nonfinite > 0 || o.at_pytorch.nonfinite > 0 ||
         o.window.empty;
}

std::string window_text(const LossWindow& w) {
  if (w.empty) {
    return fmt::format("empty (S_min {}, S_max {})", w.S_min_log2 ? fmt::format("2^{}", *w.S_min_log2) : "none",
                       w.S_max_log2 ? fmt::format("2^{}", *w.S_max_log2) : "none");
  }
  return fmt::format("[2^{}, {}2^{}]", *w.S_min_log2, *w.S_max_log2 == kWindowMaxLog2 ? ">=" : "", *w.S_max_log2);
}

std::optional<Verdict> optimization(const Report& r) {
  const double share = r.options.underflow_share;
  std::string others;
  std::string keras_clear;
  const OptimizationReport* o =
      pick(r.optimization, [share](const OptimizationReport& x) { return optimization_crossed(x, share); }, others,
           keras_clear);
  if (o == nullptr) return std::nullopt;
  Verdict v{Boundary::optimization, "", ""};
  std::string what;
  if (o->at_1.underflow_share() > share) {
    what = fmt::format("{:.1f} % of the gradients that are non-zero in f32 are zero at loss scale 1 (underflow)",
                       100.0 * o->at_1.underflow_share());
  }
  for (const GradStats* g : {&o->at_keras, &o->at_pytorch}) {
    if (g->nonfinite > 0) {
      what += fmt::format("{}{} gradient value{} non-finite at loss scale {}", what.empty() ? "" : "; ",
                          g->nonfinite, g->nonfinite == 1 ? " is" : "s are", scale_text(g->scale));
    }
  }
  if (what.empty()) what = "no loss scale gives finite gradients without underflow";
  std::string sims;
  for (const Simulation& m : o->simulations) {
    sims += fmt::format("{}{} skipped {} of {} steps (final scale {})", sims.empty() ? "" : ", ", m.framework,
                        m.skipped, m.steps, scale_text(m.final_scale));
  }
  v.reason = fmt::format("on {}, {}; the loss-scale window is {}{}. Dynamic loss scaling: {}.{}",
                         path_label(o->path), what, window_text(o->window),
                         others.empty() ? "" : fmt::format(" (also crossed on {})", others), sims, keras_clear);
  const LossWindow& w = o->window;
  if (w.empty) {
    v.fix = "no loss scale works on this path: normalise the data (so that gradients are of order 1) or keep this "
            "model's gradients in float32.";
  } else if (w.keras_inside && w.pytorch_inside) {
    v.fix = fmt::format("train with a loss scale inside {}: the defaults Keras 2^15 and PyTorch 2^16 are inside, so "
                        "keep dynamic loss scaling on (LossScaleOptimizer, GradScaler); never train this without it.",
                        window_text(w));
  } else {
    const int k = (*w.S_min_log2 + *w.S_max_log2) / 2;
    v.fix = fmt::format("start the loss scale at 2^{}, inside {} (Keras 2^15 is {}, PyTorch 2^16 is {}): "
                        "LossScaleOptimizer(opt, initial_scale=2**{}), GradScaler(init_scale=2**{}).",
                        k, window_text(w), w.keras_inside ? "inside" : "outside",
                        w.pytorch_inside ? "inside" : "outside", k, k);
  }
  return v;
}

}  // namespace

Verdict decide(const Report& r) {
  if (auto v = nonfinite_data(r)) return *v;
  if (!r.baseline.finite()) {
    return {Boundary::baseline,
            fmt::format("the f32 baseline ({}) is non-finite with finite data: {}.", r.baseline.path.name,
                        nonfinite_text(r.baseline)),
            "the f32 baseline itself fails: fix the data or the loss first."};
  }
  if (auto v = storage_data(r)) return *v;
  if (auto v = compute(r)) return *v;
  if (auto v = optimization(r)) return *v;
  return {Boundary::ok,
          "no boundary is crossed: the data fits fp16 and bf16 storage, every low-precision forward is finite, and "
          "the gradients neither underflow at loss scale 1 nor overflow at 2^15 or 2^16.",
          "none needed."};
}

}  // namespace halfmap::diagnose
