// The report as JSON (the keys of include/halfmap/diagnose.hpp, in that order).
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "diagnose/internal.hpp"
#include "diagnose/json.hpp"

namespace halfmap::diagnose {

Json jnum(double v) {
  if (std::isfinite(v)) return v;
  return num(v);
}

namespace {

Json jstorage(const StorageEffect& e) {
  return Json{{"overflow", e.overflow}, {"flushed", e.flushed}, {"subnormal", e.subnormal}};
}

}  // namespace

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
  j["fp8"] = Json::array();
  for (const Fp8Effect& e : c.fp8) {
    j["fp8"].push_back({{"format", e.format},
                        {"scale", e.scale == 0 ? Json(nullptr) : jnum(e.scale)},
                        {"clipped", e.clipped},
                        {"flushed", e.flushed},
                        {"subnormal", e.subnormal},
                        {"lost", e.lost}});
  }
  return j;
}

Json jpath(const PathInfo& p) {
  return Json{{"path", p.name},
              {"mode", mode_name(p.mode)},
              {"isa", isa_name(p.isa)},
              {"storage", dtype_name(p.storage)},
              {"keras_like", p.keras_like}};
}

namespace {

Json jforward(const ForwardReport& f) {
  Json j = jpath(f.path);
  j["loss"] = jnum(f.loss);
  j["max_batch_loss"] = jnum(f.max_batch_loss);
  j["nonfinite_batches"] = f.nonfinite_batches;
  j["finite"] = f.finite();
  if (const auto& n = f.first_nonfinite) {
    j["first_nonfinite"] = Json{{"stage", n->stage},
                                {"row", n->row},
                                {"column", n->column},
                                {"value", jnum(n->value)},
                                {"accumulated", n->accumulated}};
  } else {
    j["first_nonfinite"] = nullptr;
  }
  return j;
}

template <class T>
Json opt_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json jdist(const BatchDistribution& d) {
  const GradStats& g = d.pooled;
  Json worst = Json::array();
  for (const BatchRef& w : d.worst) {
    worst.push_back(Json{{"batch", w.batch},
                         {"first_row", w.first_row},
                         {"last_row", w.last_row},
                         {"nonfinite", w.nonfinite},
                         {"underflow_share", w.underflow_share}});
  }
  return Json{
      {"scale", g.scale},
      {"count", g.count},
      {"reference_nonzero", g.reference_nonzero},
      {"nonfinite", g.nonfinite},
      {"zero", g.zero},
      {"subnormal", g.subnormal},
      {"underflow_share", g.underflow_share()},
      {"subnormal_share", g.subnormal_share()},
      {"batches", d.batches},
      {"batches_nonfinite", d.batches_nonfinite},
      {"batches_over_share", d.batches_over_share},
      {"batch_underflow", Json{{"median", d.underflow_median}, {"p99", d.underflow_p99}, {"max", d.underflow_max}}},
      {"worst", worst}};
}

}  // namespace

Json jsim(const Simulation& m) {
  Json runs = Json::array();
  for (const ScaleRun& x : m.runs) {
    runs.push_back(Json{{"scale", jnum(x.scale)}, {"first_step", x.first_step}, {"last_step", x.last_step}});
  }
  return Json{{"framework", m.framework},
              {"initial_scale", m.initial_scale},
              {"growth_interval", m.growth_interval},
              {"steps", m.steps},
              {"skipped", m.skipped},
              {"backoff_skipped", m.backoff_skipped},
              {"late_skipped", m.late_skipped},
              {"growths", m.growths},
              {"settled_scale", m.settled_scale ? jnum(*m.settled_scale) : Json(nullptr)},
              {"min_scale", jnum(m.min_scale)},
              {"final_scale", jnum(m.final_scale)},
              {"underflow_share", m.good_steps.underflow_share()},
              {"final_loss", jnum(m.final_loss)},
              {"outcome", outcome_name(m.outcome)},
              {"runs", runs}};
}

namespace {

Json jopt(const OptimizationReport& o) {
  Json j = jpath(o.path);
  j["at"] = Json::array({jdist(o.at_1), jdist(o.at_keras), jdist(o.at_pytorch)});
  const LossWindow& w = o.window;
  Json per_batch = Json::array();
  for (const BatchWindow& b : w.per_batch) {
    per_batch.push_back(
        Json{{"batch", b.batch}, {"S_min_log2", opt_json(b.S_min_log2)}, {"S_max_log2", opt_json(b.S_max_log2)}});
  }
  j["window"] = Json{{"batches", w.batches},
                     {"excluded", w.excluded},
                     {"S_min_log2", opt_json(w.S_min_log2)},
                     {"S_max_log2", opt_json(w.S_max_log2)},
                     {"empty", w.empty},
                     {"keras_inside", w.keras_inside},
                     {"pytorch_inside", w.pytorch_inside},
                     {"per_batch", per_batch}};
  Json sims = Json::array();
  for (const Simulation& m : o.simulations) sims.push_back(jsim(m));
  j["simulations"] = sims;
  return j;
}

}  // namespace

std::string render_json(const Report& r) {
  const Options& o = r.options;
  Json j;
  j["halfmap_diagnose"] = 2;
  j["options"] = Json{{"hidden", o.hidden},
                      {"seed", o.seed},
                      {"batch", o.batch},
                      {"steps", total_steps(r.data.rows, o)},
                      {"epochs", opt_json(o.epochs)},
                      {"shuffle", opt_json(o.shuffle)},
                      {"lr", o.lr},
                      {"growth_interval", opt_json(o.growth_interval)},
                      {"underflow_share", o.underflow_share},
                      {"all_paths", o.all_paths},
                      {"path_first", o.path_first.empty() ? Json(nullptr) : Json(o.path_first)}};
  Json features = Json::array();
  for (const ColumnStats& c : r.data.features) features.push_back(jcolumn(c));
  j["data"] = Json{{"rows", r.data.rows},
                   {"feature_columns", r.data.features.size()},
                   {"batches", r.data.batches},
                   {"features", features},
                   {"labels", jcolumn(r.data.labels)}};
  Json paths = Json::array();
  for (const ForwardReport& f : r.compute) paths.push_back(jforward(f));
  j["compute"] = Json{{"baseline", jforward(r.baseline)}, {"paths", paths}};
  Json opt = Json::array();
  for (const OptimizationReport& x : r.optimization) opt.push_back(jopt(x));
  j["optimization"] = Json{{"underflow_share", o.underflow_share}, {"paths", opt}};
  const NoLossScaling& n = r.no_loss_scaling;
  j["no_loss_scaling"] = Json{{"path", n.path},
                              {"underflow_share", n.underflow_share},
                              {"batches_over_share", n.batches_over_share},
                              {"stalls", n.stalls},
                              {"warning", n.warning.empty() ? Json(nullptr) : Json(n.warning)}};
  j["verdict"] = Json{{"boundary", boundary_name(r.verdict.boundary)},
                      {"reason", r.verdict.reason},
                      {"fix", r.verdict.fix},
                      {"notes", r.verdict.notes}};
  return j.dump(2) + "\n";
}

}  // namespace halfmap::diagnose
