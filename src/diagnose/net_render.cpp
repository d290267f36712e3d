// The report of `halfmap diagnose --model` as text (sections model, data, layers, verdict; within 100 columns) and
// as JSON (the keys of include/halfmap/diagnose_model.hpp).
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "diagnose/internal.hpp"
#include "diagnose/json.hpp"
#include "halfmap/diagnose_model.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::diagnose {

namespace {

std::string log2_cell(double v) { return v > 0 && std::isfinite(v) ? fmt::format("2^{:.1f}", std::log2(v)) : num(v); }

std::string model_text(const ModelReport& r) {
  std::string s = "== model ==\n";
  s += wrap(
      "", fmt::format("{}: {} layers from input '{}' ({} features) to output '{}'; written by {}, IR {}, opset "
                      "{}.",
                      r.file, r.net.layers.size(), r.net.input, r.net.features, r.net.output,
                      r.net.producer.empty() ? "an unnamed producer" : r.net.producer, r.net.ir_version, r.net.opset));
  s += fmt::format("  {:<3} {:<28} {:<10} {:>6} {:>6}  {}\n", "#", "layer", "kind", "in", "out", "from");
  for (std::size_t l = 0; l < r.net.layers.size(); ++l) {
    const onnx::Layer& x = r.net.layers[l];
    const std::string ops = x.ops.size() <= 39 ? x.ops : x.ops.substr(0, 36) + "...";
    s += fmt::format("  {:<3} {:<28} {:<10} {:>6} {:>6}  {}\n", l, x.name.substr(0, 28), onnx::kind_name(x.kind), x.in,
                     x.out, ops);
    std::string params;
    if (!x.weight.empty()) params += fmt::format("{} {}", x.weight.name, onnx::stored_name(x.weight.stored));
    if (!x.bias.empty()) params += fmt::format(", {} {}", x.bias.name, onnx::stored_name(x.bias.stored));
    if (x.epsilon > 0) params += fmt::format(", eps {:g}", x.epsilon);
    if (x.kind == onnx::LayerKind::attention)
      params = fmt::format("one head of d = {} over {} tokens, 1/√d on {}{}", x.out, r.net.seq,
                           x.prescale ? "q before q·kᵀ (prescale)" : "q·kᵀ after the product (postscale)",
                           x.causal ? ", causal mask" : "");
    if (!params.empty()) s += wrap("      ", params);
  }
  return s;
}

std::string data_text(const ModelReport& r) {
  std::string s = "== data ==\n";
  std::size_t nonfinite = 0, f16_over = 0, flushed = 0;
  double abs_max = 0;
  for (const ColumnStats& c : r.data.features) {
    nonfinite += c.nan + c.inf;
    f16_over += c.f16.overflow;
    flushed += c.f16.flushed;
    if (std::isfinite(c.abs_max)) abs_max = std::max(abs_max, c.abs_max);
  }
  const std::size_t seq = std::max<std::size_t>(r.net.seq, 1), samples = r.data.rows / seq;
  const std::size_t batch = r.options.batch == 0 ? samples : std::min(r.options.batch, samples);
  const std::string rows = r.net.seq == 0
                               ? fmt::format("{} rows in {} batches of {}", r.data.rows, r.data.batches, batch)
                               : fmt::format("{} sequences of {} tokens ({} rows) in {} batches of {}", samples,
                                             r.net.seq, r.data.rows, r.data.batches, batch);
  s += wrap("", fmt::format("{}; {} feature columns: {} values not finite, abs max {}, {} overflow fp16 storage, {} "
                            "non-zero values flush to zero in it.",
                            rows, r.data.features.size(), nonfinite, num(abs_max), f16_over, flushed));
  for (const WeightCheck& w : r.weights)
    if (w.nan + w.inf + w.f16_overflow > 0)
      s += wrap("  ", fmt::format("initializer '{}' ({}, {} values): {} NaN, {} inf, {} overflow fp16 storage.", w.name,
                                  onnx::stored_name(w.stored), w.count, w.nan, w.inf, w.f16_overflow));
  return s;
}

std::string layers_text(const ModelReport& r) {
  std::string s = "== layers ==\n";
  s += wrap("",
            "Per path and layer, over all batches: the largest finite |y|; its headroom to the storage type's "
            "largest finite value, in binades (an attention head's: of its q·kᵀ when that is larger); the outputs that "
            "are not finite, and the first; the share of the "
            "outputs non-zero in f32 that are zero here.");
  auto one = [&](const PathForward& p) {
    s += fmt::format("{}{}\n", path_cell(p.path), p.baseline ? " (baseline)" : "");
    s += fmt::format("  {:<3} {:<28} {:>9} {:>9} {:>10} {:>22} {:>8}\n", "#", "layer", "max |y|", "headroom",
                     "not finite", "first (batch,row,col)", "flushed");
    for (std::size_t l = 0; l < p.layers.size(); ++l) {
      const LayerForward& x = p.layers[l];
      const std::string first = x.first_nonfinite ? fmt::format("{},{},{}", x.first_nonfinite->batch,
                                                                x.first_nonfinite->row, x.first_nonfinite->column)
                                                  : "-";
      s += fmt::format("  {:<3} {:<28} {:>9} {:>9} {:>10} {:>22} {:>8}\n", l, x.name.substr(0, 28),
                       log2_cell(x.max_abs), fmt::format("{:.1f}", p.headroom_log2(l)), x.nonfinite, first,
                       fmt::format("{:.2f} %", 100 * x.flush_share()));
    }
  };
  one(r.baseline);
  for (const PathForward& p : r.paths) one(p);
  s += wrap("",
            "fp8 and MX: the f32 baseline's outputs of each layer cast batch by batch, as an fp8 step casts a "
            "GEMM's input: clipped/flushed values (+lost: in MX blocks with a NaN or inf). e4m3, e5m2: the "
            "batch's output cast with Transformer Engine's current scaling, s = max / amax; mx*: OCP MX blocks "
            "of 32 along a row. Subnormal counts in --json.");
  s += fmt::format("  {:<3} {:<12}", "#", "layer");
  for (std::string_view f : kFp8Storages) s += fmt::format("{:>11}", f);
  s += "\n";
  for (std::size_t l = 0; l < r.baseline.layers.size(); ++l) {
    const LayerForward& x = r.baseline.layers[l];
    s += fmt::format("  {:<3} {:<12}", l, x.name.substr(0, 12));
    for (const Fp8Effect& e : x.fp8)
      s += fmt::format("{:>11}", e.lost > 0 ? fmt::format("{}/{} +{}", e.clipped, e.flushed, e.lost)
                                            : fmt::format("{}/{}", e.clipped, e.flushed));
    s += "\n";
  }
  return s;
}

std::string share_cell(const GradStats& g) {
  if (g.count == 0) return "-";
  if (g.nonfinite > 0) return fmt::format("{} inf", g.nonfinite);
  return fmt::format("{:.2f} %", 100 * g.underflow_share());
}

std::string window_cell(const std::optional<int>& lo, const std::optional<int>& hi) {
  return fmt::format("{}..{}", lo ? fmt::format("2^{}", *lo) : "none", hi ? fmt::format("2^{}", *hi) : "none");
}

std::string gradients_text(const ModelReport& r) {
  std::string s = "== gradients ==\n";
  s += wrap("",
            fmt::format("The loss ({}) per path, the mean of the batch losses; then per layer and batch, at the "
                        "loss scales 1, 2^15 (Keras) and 2^16 (PyTorch), pooled over the batches: the share of "
                        "the parameter gradients (dW and db; dγ and dβ) and of the input gradient that are zero "
                        "where the f32 baseline's at S = 1 are not (underflow), or the count that is not finite; and "
                        "each layer's loss-scale window (finite, and at most the underflow share) over the "
                        "measured batches.",
                        loss_name(r.loss)));
  s += fmt::format("{}: loss {}{}\n", path_cell(r.baseline.path), num(r.baseline.loss->loss),
                   r.baseline.loss->nonfinite_batches
                       ? fmt::format(", {} batches not finite", r.baseline.loss->nonfinite_batches)
                       : std::string());
  for (const PathForward& p : r.paths) {
    s += fmt::format(
        "{}: loss {}{}\n", path_cell(p.path), num(p.loss->loss),
        p.loss->nonfinite_batches ? fmt::format(", {} batches not finite", p.loss->nonfinite_batches) : std::string());
    s += fmt::format("  {:<3} {:<24} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>13}\n", "#", "layer", "dθ 1", "dθ 2^15",
                     "dθ 2^16", "dx 1", "dx 2^15", "dx 2^16", "window");
    for (std::size_t l = 0; l < p.grads.size(); ++l) {
      const LayerGrads& g = p.grads[l];
      if (!g.has_params && !g.has_input) continue;
      s += fmt::format("  {:<3} {:<24} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>13}\n", l, g.name.substr(0, 24),
                       share_cell(g.params[0]), share_cell(g.params[1]), share_cell(g.params[2]),
                       share_cell(g.input[0]), share_cell(g.input[1]), share_cell(g.input[2]),
                       window_cell(g.window.S_min_log2, g.window.S_max_log2));
    }
    const NetWindow& w = p.window;
    s +=
        wrap("  ", fmt::format("window of the network over {} batches: {}{}{}.", w.batches,
                               w.empty ? "empty" : window_cell(w.S_min_log2, w.S_max_log2),
                               w.lower_layer.empty() ? "" : fmt::format("; its lower end set by '{}'", w.lower_layer),
                               w.upper_layer.empty() ? "" : fmt::format("; its upper end set by '{}'", w.upper_layer)));
  }
  return s;
}

Json jgrad(const GradStats& g) {
  return Json{{"scale", g.scale},
              {"count", g.count},
              {"reference_nonzero", g.reference_nonzero},
              {"nonfinite", g.nonfinite},
              {"zero", g.zero},
              {"subnormal", g.subnormal},
              {"underflow_share", g.underflow_share()}};
}

Json jparam(const onnx::Param& p) {
  if (p.empty()) return nullptr;
  return Json{{"name", p.name}, {"stored", onnx::stored_name(p.stored)}};
}

Json jlayers(const PathForward& p) {
  Json layers = Json::array();
  for (std::size_t l = 0; l < p.layers.size(); ++l) {
    const LayerForward& x = p.layers[l];
    Json j;
    j["name"] = x.name;
    j["kernel"] = x.kernel;
    j["count"] = x.count;
    j["max_abs"] = jnum(x.max_abs);
    j["max_abs_log2"] = x.max_abs > 0 ? Json(std::log2(x.max_abs)) : Json(nullptr);
    j["product_max_abs"] = x.product_max_abs > 0 ? jnum(x.product_max_abs) : Json(nullptr);
    const double h = p.headroom_log2(l);
    j["headroom_log2"] = std::isfinite(h) ? Json(h) : Json(nullptr);
    j["nonfinite"] = x.nonfinite;
    j["first_nonfinite"] = x.first_nonfinite ? Json{{"batch", x.first_nonfinite->batch},
                                                    {"row", x.first_nonfinite->row},
                                                    {"column", x.first_nonfinite->column},
                                                    {"value", jnum(x.first_nonfinite->value)}}
                                             : Json(nullptr);
    j["reference_nonzero"] = x.reference_nonzero;
    j["flushed"] = x.flushed;
    j["flush_share"] = x.flush_share();
    if (p.baseline) {
      j["fp8"] = Json::array();
      for (const Fp8Effect& e : x.fp8)
        j["fp8"].push_back({{"format", e.format},
                            {"clipped", e.clipped},
                            {"flushed", e.flushed},
                            {"subnormal", e.subnormal},
                            {"lost", e.lost}});
    } else {
      j["fp8"] = nullptr;
    }
    layers.push_back(std::move(j));
  }
  return layers;
}

/// A window's end (log2), or null where there is none.
Json jend(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

/// The options that shaped the report.
Json joptions(const ModelReport& r) {
  return Json{{"loss", loss_name(r.loss)},
              {"batch", r.options.batch},
              {"all_paths", r.options.all_paths},
              {"path_first", r.options.path_first.empty() ? Json(nullptr) : Json(r.options.path_first)},
              {"underflow_share", r.options.underflow_share},
              {"train", r.options.steps ? Json(*r.options.steps) : Json(nullptr)},
              {"lr", r.options.lr},
              {"growth_interval", r.options.growth_interval ? Json(*r.options.growth_interval) : Json(nullptr)}};
}

/// The network as read: its file and producer, its input and output, and its layers.
Json jmodel(const ModelReport& r) {
  Json layers = Json::array();
  for (const onnx::Layer& l : r.net.layers)
    layers.push_back(
        Json{{"name", l.name},
             {"kind", onnx::kind_name(l.kind)},
             {"ops", l.ops},
             {"in", l.in},
             {"out", l.out},
             {"weight", jparam(l.weight)},
             {"bias", jparam(l.bias)},
             {"epsilon", l.epsilon > 0 ? Json(l.epsilon) : Json(nullptr)},
             {"attention", l.kind == onnx::LayerKind::attention
                               ? Json{{"scale", l.prescale ? "prescale" : "postscale"}, {"causal", l.causal}}
                               : Json(nullptr)}});
  return Json{
      {"file", r.file},       {"producer", r.net.producer}, {"ir_version", r.net.ir_version}, {"opset", r.net.opset},
      {"input", r.net.input}, {"output", r.net.output},     {"features", r.net.features},     {"seq", r.net.seq},
      {"layers", layers}};
}

/// Each weight's check: NaN, inf, the largest |w| and what overflows in fp16 and bf16.
Json jweights(const ModelReport& r) {
  Json weights = Json::array();
  for (const WeightCheck& w : r.weights)
    weights.push_back(Json{{"name", w.name},
                           {"stored", onnx::stored_name(w.stored)},
                           {"count", w.count},
                           {"nan", w.nan},
                           {"inf", w.inf},
                           {"abs_max", jnum(w.abs_max)},
                           {"f16_overflow", w.f16_overflow},
                           {"bf16_overflow", w.bf16_overflow}});
  return weights;
}

/// A path's loss over the batches, or null without a loss.
Json jloss(const PathForward& p) {
  return p.loss ? Json{{"loss", jnum(p.loss->loss)},
                       {"nonfinite_batches", p.loss->nonfinite_batches},
                       {"first_nonfinite_batch",
                        p.loss->first_nonfinite_batch ? Json(*p.loss->first_nonfinite_batch) : Json(nullptr)}}
                : Json(nullptr);
}

/// Each layer's gradients at S = 1, 2^15 and 2^16 (null where it has none), and its window.
Json jgrads(const PathForward& p) {
  Json grads = Json::array();
  for (const LayerGrads& g : p.grads) {
    auto three = [](const GradStats* at) { return Json::array({jgrad(at[0]), jgrad(at[1]), jgrad(at[2])}); };
    grads.push_back(
        Json{{"name", g.name},
             {"params", g.has_params ? three(g.params) : Json(nullptr)},
             {"input", g.has_input ? three(g.input) : Json(nullptr)},
             {"window", Json{{"S_min_log2", jend(g.window.S_min_log2)}, {"S_max_log2", jend(g.window.S_max_log2)}}}});
  }
  return grads;
}

/// A low-precision path's network window (with a loss), else null.
Json jnet_window(const PathForward& p) {
  if (!p.loss || p.baseline) return nullptr;
  const NetWindow& w = p.window;
  auto name = [](const std::string& v) { return v.empty() ? Json(nullptr) : Json(v); };
  return Json{{"batches", w.batches},
              {"S_min_log2", jend(w.S_min_log2)},
              {"S_max_log2", jend(w.S_max_log2)},
              {"empty", w.empty},
              {"keras_inside", w.keras_inside},
              {"pytorch_inside", w.pytorch_inside},
              {"lower_layer", name(w.lower_layer)},
              {"upper_layer", name(w.upper_layer)}};
}

/// One path: what it is, its forward layer by layer, its loss, gradients, window and simulations.
Json jpath_forward(const PathForward& p) {
  Json x = jpath(p.path);
  x["baseline"] = p.baseline;
  x["finite"] = !p.first_nonfinite_layer();
  x["layers"] = jlayers(p);
  x["loss"] = jloss(p);
  x["gradients"] = jgrads(p);
  x["window"] = jnet_window(p);
  Json sims = Json::array();
  for (const Simulation& m : p.simulations) sims.push_back(jsim(m));
  x["simulations"] = sims;
  return x;
}

/// With --train: each low-precision path's two scalers (diagnose_model.hpp, "Training").
std::string training_text(const ModelReport& r) {
  const Options& o = r.options;
  std::string s = "== training ==\n";
  s += wrap("", fmt::format("{} steps of SGD (lr {}) from the file's weights on batches in order, f32 master weights "
                            "rounded to each path's storage type; dynamic loss scaling x2 after {} good steps, x0.5 "
                            "and a skipped step on a non-finite gradient; final loss on the f32 path over every "
                            "batch; underflow over the good steps.",
                            *o.steps, num(o.lr), o.growth_interval.value_or(loss_scale::kGrowthInterval)));
  s += fmt::format("  {:<28} {:<8} {:>8} {:>7} {:>7} {:>10} {:>10}  {}\n", "path", "scaler", "skipped", "growths",
                   "final", "underflow", "final loss", "outcome");
  std::string runs;
  for (const PathForward& p : r.paths)
    for (std::size_t i = 0; i < p.simulations.size(); ++i) {
      const Simulation& m = p.simulations[i];
      s += fmt::format("  {:<28} {:<8} {:>8} {:>7} {:>7} {:>9.2f}% {:>10}  {}\n", i == 0 ? path_cell(p.path) : "",
                       m.framework, m.skipped, m.growths, scale_text(m.final_scale),
                       100 * m.good_steps.underflow_share(), num(m.final_loss), outcome_name(m.outcome));
      runs += wrap("  ", fmt::format("{} {}: {}", p.path.name, m.framework, trajectory(m.runs)));
    }
  return s + "the scale's runs (scale (steps)):\n" + runs;
}

}  // namespace

std::string render_model_text(const ModelReport& r) {
  std::string s = wrap("", fmt::format("halfmap diagnose --model: the network's forward on {} rows, in f32 and in "
                                       "each precision mode. * marks f16_f32acc (fp16 storage, f32 accumulation: "
                                       "Keras mixed_float16's GEMMs).",
                                       r.data.rows));
  if (r.loss != Loss::none && r.options.steps)
    return sections_and_verdict(s, {model_text(r), data_text(r), layers_text(r), gradients_text(r), training_text(r)},
                                r.verdict.boundary, r.verdict.reason, r.verdict.fix, r.verdict.notes);
  if (r.loss != Loss::none)
    return sections_and_verdict(s, {model_text(r), data_text(r), layers_text(r), gradients_text(r)}, r.verdict.boundary,
                                r.verdict.reason, r.verdict.fix, r.verdict.notes);
  return sections_and_verdict(s, {model_text(r), data_text(r), layers_text(r)}, r.verdict.boundary, r.verdict.reason,
                              r.verdict.fix, r.verdict.notes);
}

std::string render_model_json(const ModelReport& r) {
  Json j;
  j["halfmap_diagnose_model"] = 1;
  j["options"] = joptions(r);
  j["model"] = jmodel(r);
  Json cols = Json::array();
  for (const ColumnStats& c : r.data.features) cols.push_back(jcolumn(c));
  j["data"] = Json{{"rows", r.data.rows}, {"batches", r.data.batches}, {"features", cols}};
  j["weights"] = jweights(r);
  Json paths = Json::array();
  paths.push_back(jpath_forward(r.baseline));
  for (const PathForward& p : r.paths) paths.push_back(jpath_forward(p));
  j["paths"] = paths;
  const ModelNoLossScaling& n = r.no_loss_scaling;
  j["no_loss_scaling"] = n.path.empty() ? Json(nullptr)
                                        : Json{{"path", n.path},
                                               {"layer", n.layer.empty() ? Json(nullptr) : Json(n.layer)},
                                               {"underflow_share", n.underflow_share},
                                               {"warning", n.warning.empty() ? Json(nullptr) : Json(n.warning)}};
  const ModelVerdict& v = r.verdict;
  j["verdict"] = Json{{"boundary", boundary_name(v.boundary)},
                      {"layer", v.layer.empty() ? Json(nullptr) : Json(v.layer)},
                      {"path", v.path.empty() ? Json(nullptr) : Json(v.path)},
                      {"reason", v.reason},
                      {"fix", v.fix},
                      {"notes", v.notes}};
  return j.dump(2) + "\n";
}

}  // namespace halfmap::diagnose
