// The verdict: the first boundary crossed, in the order of include/halfmap/diagnose.hpp, and the smallest fix.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "diagnose/internal.hpp"

namespace halfmap::diagnose {

bool storage_crossed(const ColumnStats& c, double share) {
  const double allowed = share * double(c.nonzero);
  return c.f16.overflow + c.bf16.overflow > 0 || double(c.f16.flushed) > allowed || double(c.bf16.flushed) > allowed;
}

std::string path_label(const PathInfo& p) {
  return p.keras_like ? fmt::format("{} (Keras mixed_float16)", p.name) : p.name;
}

std::string_view boundary_name(Boundary b) {
  switch (b) {
    case Boundary::ok:
      return "ok";
    case Boundary::data:
      return "data";
    case Boundary::baseline:
      return "baseline";
    case Boundary::compute:
      return "compute";
    case Boundary::optimization:
      return "optimization";
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
    Verdict v{Boundary::data, "", "", {}};
    v.reason = fmt::format("column {} holds {} NaN and {} inf; the first is at row {} ({}).", c->name, c->nan, c->inf,
                           *c->first_nonfinite_row, where(*c, r.data.features.size()));
    v.fix = fmt::format(
        "fix the data: remove or impute the non-finite values (the first at row {} of column {}) "
        "before training; no precision setting can fix them.",
        *c->first_nonfinite_row, c->name);
    return v;
  }
  return std::nullopt;
}

std::string nonfinite_text(const ForwardReport& f) {
  const NonFinite& n = *f.first_nonfinite;
  if (n.stage == "loss" && n.accumulated) {
    return fmt::format(
        "the loss ({}; every squared error fits, their running sum passes the largest finite value "
        "at row {})",
        num(n.value), n.row);
  }
  if (n.stage == "loss") return fmt::format("the loss ({}; first large squared error at row {})", num(n.value), n.row);
  return fmt::format("{} at row {}, column {} ({})", n.stage, n.row, n.column, num(n.value));
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
  Verdict v{Boundary::data, reason, "", {}};
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

std::optional<Verdict> compute(const Report& r) {
  std::string others;
  std::string keras_clear;
  const ForwardReport* f = pick(
      r.compute, [](const ForwardReport& x) { return !x.finite(); }, others, keras_clear);
  if (f == nullptr) return std::nullopt;
  Verdict v{Boundary::compute, "", "", {}};
  v.reason = fmt::format(
      "the forward is finite in f32 but not on {} ({} of {} batches): the first non-finite "
      "value is {}{}.{}",
      path_label(f->path), f->nonfinite_batches, r.data.batches, nonfinite_text(*f),
      others.empty() ? "" : fmt::format("; also non-finite on {}", others), keras_clear);
  const std::string& stage = f->first_nonfinite->stage;
  if (stage == "loss") {
    v.fix =
        "keep the loss in float32: make the model's output float32 (Keras: a final "
        "Activation('linear', dtype='float32')), so that the squared error is never stored in fp16.";
  } else if (stage == "dense_2") {
    v.fix = "keep dense_2 (the output layer) in float32 (Keras: dtype='float32' on that layer).";
  } else {
    v.fix = "keep dense_1's output in float32 (Keras: dtype='float32' on that layer).";
  }
  return v;
}

/// The first simulation of a path whose scaler fails, or null.
const Simulation* failing(const OptimizationReport& o) {
  for (const Simulation& m : o.simulations) {
    if (m.outcome != Outcome::trains) return &m;
  }
  return nullptr;
}

std::string window_text(const LossWindow& w) {
  if (w.empty) {
    return fmt::format("empty (S_min {}, S_max {})", w.S_min_log2 ? fmt::format("2^{}", *w.S_min_log2) : "none",
                       w.S_max_log2 ? fmt::format("2^{}", *w.S_max_log2) : "none");
  }
  return fmt::format("[2^{}, {}2^{}]", *w.S_min_log2, *w.S_max_log2 == kWindowMaxLog2 ? ">=" : "", *w.S_max_log2);
}

std::string framework_name(const Simulation& m) { return m.framework == "keras" ? "Keras" : "PyTorch"; }

std::string times(std::size_t n) {
  if (n == 1) return "once";
  if (n == 2) return "twice";
  return fmt::format("{} times", n);
}

}  // namespace

/// What a failing scaler did, with the numbers.
std::string failure_text(const Simulation& m, double share) {
  const std::string who = fmt::format("{}'s scaler (from {})", framework_name(m), scale_text(m.initial_scale));
  switch (m.outcome) {
    case Outcome::collapses:
      if (!m.settled_scale) {
        return fmt::format("{} collapses: all {} steps skipped, the scale fell to {}", who, m.steps,
                           scale_text(m.final_scale));
      }
      return fmt::format("{} collapses: the scale fell to {} (below 1), {} of {} steps skipped", who,
                         scale_text(m.min_scale), m.skipped, m.steps);
    case Outcome::keeps_skipping:
      return fmt::format(
          "{} keeps skipping after its back-off: {} of {} steps skipped ({} during the back-off to "
          "{}, {} after it, {} growths), final scale {}",
          who, m.skipped, m.steps, m.backoff_skipped, scale_text(m.settled_scale.value_or(0)), m.late_skipped,
          m.growths, scale_text(m.final_scale));
    case Outcome::underflows:
      return fmt::format(
          "{} settles at {} where {:.1f} % of the gradients (non-zero in f32) underflow to zero over "
          "its good steps, above the {:.1f} % share",
          who, scale_text(m.final_scale), 100.0 * m.good_steps.underflow_share(), 100.0 * share);
    case Outcome::trains:
      break;
  }
  return who + " trains";
}

namespace {

std::optional<Verdict> optimization(const Report& r) {
  const double share = r.options.underflow_share;
  std::string others;
  std::string keras_clear;
  const OptimizationReport* o = pick(
      r.optimization, [](const OptimizationReport& x) { return failing(x) != nullptr; }, others, keras_clear);
  if (o == nullptr) return std::nullopt;
  Verdict v{Boundary::optimization, "", "", {}};
  std::string what;
  for (const Simulation& m : o->simulations) {
    if (m.outcome != Outcome::trains) what += (what.empty() ? "" : "; ") + failure_text(m, share);
  }
  const BatchDistribution& at16 = o->at_pytorch;
  v.reason = fmt::format(
      "on {}, {}. The loss-scale window of nearly all batches is {}{}; at 2^16, {} of {} "
      "batches have non-finite gradients.{}",
      path_label(o->path), what, window_text(o->window),
      others.empty() ? "" : fmt::format(" (scalers also fail on {})", others), at16.batches_nonfinite, at16.batches,
      keras_clear);
  const LossWindow& w = o->window;
  if (w.empty) {
    v.fix =
        "no loss scale works for nearly all batches on this path: normalise the data (features and labels to "
        "order 1, so that every batch's gradients are of the same size) or keep this model's gradients in "
        "float32 (Keras: dtype='float32' on the layers whose gradients fail).";
  } else {
    const int k = std::min((*w.S_min_log2 + *w.S_max_log2) / 2, 24);
    v.fix = fmt::format(
        "use a fixed loss scale inside the window {}, e.g. 2^{}: Keras "
        "LossScaleOptimizer(opt, dynamic=False, initial_scale=2**{}), PyTorch "
        "GradScaler(init_scale=2**{}, growth_interval=10**9); or normalise the data.",
        window_text(w), k, k, k);
  }
  return v;
}

}  // namespace

/// How one scaler that trains behaved: "PyTorch backs off once, to 2^15, then trains".
std::string scaler_note(const Simulation& m) {
  if (m.skipped == 0) {
    return fmt::format("{} trains at {} without skipping a step", framework_name(m), scale_text(m.initial_scale));
  }
  return fmt::format("{} backs off {}, to {}, then trains", framework_name(m), times(m.skipped),
                     scale_text(m.final_scale));
}

namespace {

std::vector<std::string> ok_notes(const Report& r) {
  std::vector<std::string> notes;
  const OptimizationReport* keras = nullptr;
  for (const OptimizationReport& o : r.optimization) {
    if (o.path.keras_like) keras = &o;
  }
  if (keras == nullptr && !r.optimization.empty()) keras = &r.optimization.front();
  if (keras != nullptr) {
    std::string s;
    for (const Simulation& m : keras->simulations) s += (s.empty() ? "" : "; ") + scaler_note(m);
    bool backed_off = false;
    for (const Simulation& m : keras->simulations) backed_off = backed_off || m.skipped > 0;
    notes.push_back(fmt::format("dynamic loss scaling on {}: {}, over {} steps of batches of {} rows{}.",
                                path_label(keras->path), s, total_steps(r.data.rows, r.options),
                                r.options.batch == 0 ? r.data.rows : std::min(r.options.batch, r.data.rows),
                                backed_off ? "; backing off from the initial scale is the scaler doing its job, "
                                             "not a fault"
                                           : ""));
  }
  return notes;
}

}  // namespace

NoLossScaling no_loss_scaling(const Report& r) {
  NoLossScaling n;
  const OptimizationReport* o = nullptr;
  for (const OptimizationReport& x : r.optimization) {
    if (x.path.keras_like) o = &x;
  }
  if (o == nullptr && !r.optimization.empty()) o = &r.optimization.front();
  if (o == nullptr) return n;
  const double share = r.options.underflow_share;
  n.path = o->path.name;
  n.underflow_share = o->at_1.pooled.underflow_share();
  n.batches = o->at_1.batches;
  n.batches_over_share = o->at_1.batches_over_share;
  n.stalls = n.underflow_share > 0.5;
  if (n.underflow_share > share) {
    n.warning = fmt::format(
        "without loss scaling (S = 1: a custom loop without LossScaleOptimizer, PyTorch without GradScaler), "
        "{:.1f} % of the gradients that are non-zero in f32 underflow to zero on {} ({} of {} batches above the "
        "{:.1f} % share){}.",
        100.0 * n.underflow_share, n.path, n.batches_over_share, n.batches, 100.0 * share,
        n.stalls ? ": that alone would stall training, so keep loss scaling on"
                 : ": training would lose those updates, so keep loss scaling on");
  }
  return n;
}

Verdict decide(const Report& r) {
  if (auto v = nonfinite_data(r)) return *v;
  if (!r.baseline.finite()) {
    return {Boundary::baseline,
            fmt::format("the f32 baseline ({}) is non-finite with finite data: {}.", r.baseline.path.name,
                        nonfinite_text(r.baseline)),
            "the f32 baseline itself fails: fix the data or the loss first.",
            {}};
  }
  if (auto v = storage_data(r)) return *v;
  if (auto v = compute(r)) return *v;
  Verdict v;
  if (auto o = optimization(r)) {
    v = *o;
  } else {
    v = {Boundary::ok,
         "no boundary is crossed: the data fits fp16 and bf16 storage, every low-precision forward is finite on "
         "every batch, and the simulated dynamic loss scalers of Keras and PyTorch settle at a scale where the "
         "gradients neither overflow nor underflow.",
         "none needed.", ok_notes(r)};
  }
  const NoLossScaling n = no_loss_scaling(r);
  if (!n.warning.empty()) v.notes.push_back(n.warning);
  return v;
}

}  // namespace halfmap::diagnose
