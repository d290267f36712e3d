// The verdict of `halfmap diagnose --model`: the first boundary crossed, in the order of
// include/halfmap/diagnose_model.hpp, named by layer, and the smallest fix the evidence supports.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "diagnose/internal.hpp"
#include "halfmap/diagnose_model.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

namespace {

const onnx::Layer& layer_of(const ModelReport& r, std::size_t l) { return r.net.layers[l]; }

std::string layer_text(const ModelReport& r, std::size_t l) {
  const onnx::Layer& layer = layer_of(r, l);
  return fmt::format("layer '{}' ({}, {})", layer.name, onnx::kind_name(layer.kind), layer.ops);
}

std::string binades(double log2v) { return fmt::format("2^{:.1f}", log2v); }

std::optional<ModelVerdict> nonfinite_features(const ModelReport& r) {
  for (const ColumnStats& c : r.data.features) {
    if (c.nan + c.inf == 0) continue;
    ModelVerdict v;
    v.boundary = Boundary::data;
    v.reason = fmt::format("column {} of the features holds {} NaN and {} inf; the first is at row {}.", c.name, c.nan,
                           c.inf, *c.first_nonfinite_row);
    v.fix = fmt::format(
        "fix the data: remove or impute the non-finite values (the first at row {} of column {}); no "
        "precision setting can fix them.",
        *c.first_nonfinite_row, c.name);
    return v;
  }
  return std::nullopt;
}

std::optional<ModelVerdict> nonfinite_weights(const ModelReport& r) {
  for (const WeightCheck& w : r.weights) {
    if (w.nan + w.inf == 0) continue;
    ModelVerdict v;
    v.boundary = Boundary::data;
    v.reason = fmt::format(
        "initializer '{}' holds {} NaN and {} inf (the first at index {}): the network's weights "
        "are not finite before any precision is involved.",
        w.name, w.nan, w.inf, *w.first_nonfinite);
    v.fix = fmt::format(
        "restore '{}' from a checkpoint taken before the NaN, and find the training step that wrote "
        "it (a loss scale that overflowed without skipping the step, or a learning rate too large).",
        w.name);
    return v;
  }
  return std::nullopt;
}

std::optional<ModelVerdict> baseline(const ModelReport& r) {
  const auto l = r.baseline.first_nonfinite_layer();
  if (!l && r.baseline.loss && r.baseline.loss->nonfinite_batches > 0) {
    ModelVerdict v;
    v.boundary = Boundary::baseline;
    v.layer = "loss";
    v.path = r.baseline.path.name;
    v.reason =
        fmt::format("the f32 loss ({}) is not finite on {} batches, the first batch {}, with a finite forward.",
                    loss_name(r.loss), r.baseline.loss->nonfinite_batches, *r.baseline.loss->first_nonfinite_batch);
    v.fix =
        "no half-precision setting can help while float32 itself fails: check the labels against the loss "
        "(their scale for mse; classes for xent).";
    return v;
  }
  if (!l) return std::nullopt;
  const Where& w = *r.baseline.layers[*l].first_nonfinite;
  ModelVerdict v;
  v.boundary = Boundary::baseline;
  v.layer = layer_of(r, *l).name;
  v.path = r.baseline.path.name;
  v.reason = fmt::format(
      "the f32 forward is not finite: {} gives {} at batch {}, row {}, column {}, with finite "
      "data and weights.",
      layer_text(r, *l), num(w.value), w.batch, w.row, w.column);
  v.fix =
      "no half-precision setting can help while float32 itself fails: look at this layer's weights and inputs "
      "(their scale, or a division by a near-zero variance).";
  return v;
}

/// The storage types the low-precision paths that ran store in.
bool ran_storage(const ModelReport& r, DType t) {
  for (const PathForward& p : r.paths)
    if (p.path.storage == t) return true;
  return false;
}

std::optional<ModelVerdict> storage(const ModelReport& r) {
  const bool f16 = ran_storage(r, DType::f16), bf16 = ran_storage(r, DType::bf16);
  std::string reason;
  for (const ColumnStats& c : r.data.features) {
    if (!storage_crossed(c, r.options.underflow_share)) continue;
    if ((f16 && c.f16.overflow > 0) || (bf16 && c.bf16.overflow > 0)) {
      reason += fmt::format("feature column {}: {} of {} values overflow fp16 storage (abs max {}). ", c.name,
                            c.f16.overflow, c.count, num(c.abs_max));
    } else if ((f16 && double(c.f16.flushed) > r.options.underflow_share * double(c.nonzero)) ||
               (bf16 && double(c.bf16.flushed) > r.options.underflow_share * double(c.nonzero))) {
      reason += fmt::format(
          "feature column {}: {} of {} non-zero values flush to zero in fp16 storage ({} in "
          "bf16). ",
          c.name, c.f16.flushed, c.nonzero, c.bf16.flushed);
    }
  }
  std::string weights;
  for (const WeightCheck& w : r.weights) {
    if ((f16 && w.f16_overflow > 0) || (bf16 && w.bf16_overflow > 0)) {
      reason += fmt::format("initializer '{}': {} of {} values overflow fp16 storage (abs max {}). ", w.name,
                            w.f16_overflow, w.count, num(w.abs_max));
      weights += fmt::format("{}'{}'", weights.empty() ? "" : ", ", w.name);
    }
  }
  if (reason.empty()) return std::nullopt;
  reason.pop_back();
  ModelVerdict v;
  v.boundary = Boundary::data;
  v.reason = reason;
  v.fix = weights.empty()
              ? "normalise the inputs before the network, x' = (x - mean) / std per column (the data section gives "
                "both)."
              : fmt::format(
                    "keep the layers of {} in float32, or rescale those weights (and the layer after them) "
                    "so that they fit fp16.",
                    weights);
  return v;
}

/// An attention head that is not finite: what overflowed is its q·kᵀ (the product the head stores), so the reason
/// gives that product's f32 peak, and the fix the placement of 1/√d (issue 23's finding: scaling q before the
/// product moves the overflow log2 √d binades later) or float32 for the head.
void attention_advice(const ModelReport& r, std::size_t layer, const onnx::Layer& head, const std::string& storage,
                      double max, ModelVerdict& v) {
  const double prod = r.baseline.layers[layer].product_max_abs;
  if (!(prod > 0)) return;
  const double gain = 0.5 * std::log2(double(head.out));  // log2 √d
  const std::string autocast =
      "Keras: dtype=\"float32\" on the attention layer; PyTorch: run it outside torch.autocast";
  v.reason.pop_back();
  v.reason += fmt::format(". Its q·kᵀ{} peaks at {} in f32, {:.1f} binades {} {}'s largest finite.",
                          head.prescale ? " (q scaled by 1/√d first)" : " (before its 1/√d)", binades(std::log2(prod)),
                          std::abs(std::log2(prod / max)), prod > max ? "past" : "below", storage);
  if (!head.prescale) {
    const double moved = std::log2(prod) - gain;
    v.fix = fmt::format(
        "scale q by 1/√d before q·kᵀ, as PyTorch's nn.MultiheadAttention and Keras's MultiHeadAttention "
        "do: the product then peaks at {} ({} {}'s {}); or keep head '{}' in float32 ({}).",
        binades(moved), std::pow(2.0, moved) < max ? "below" : "still past", storage, num(max), v.layer, autocast);
  } else {
    v.fix = fmt::format(
        "keep head '{}' in float32 ({}), or normalise q and k (a LayerNorm on each) so that |q·kᵀ| "
        "stays below {}.",
        v.layer, autocast, num(max));
  }
}

/// A low-precision path's layer crosses the compute boundary when an output is not finite, or when more than the
/// underflow share of the outputs non-zero in f32 are zero (they collapsed: an fp16 variance that overflowed makes
/// 1/√var zero, softmax probabilities below fp16's smallest subnormal vanish).
bool crossed(const ModelReport& r, const PathForward& p, std::size_t l) {
  return p.layers[l].nonfinite > 0 || p.layers[l].flush_share() > r.options.underflow_share;
}

std::optional<ModelVerdict> compute(const ModelReport& r) {
  const PathForward* first = nullptr;
  std::size_t layer = 0;
  for (const PathForward& p : r.paths)
    for (std::size_t l = 0; l < p.layers.size() && (first == nullptr || l < layer); ++l)
      if (crossed(r, p, l)) {
        first = &p;
        layer = l;
        break;
      }
  // At that layer, name Keras mixed_float16's path when it crosses there too (what the user runs).
  for (const PathForward& p : r.paths)
    if (first != nullptr && p.path.keras_like && crossed(r, p, layer)) first = &p;
  if (first == nullptr) {
    for (const PathForward& p : r.paths) {
      if (!p.loss || p.loss->nonfinite_batches == 0) continue;
      ModelVerdict v;
      v.boundary = Boundary::compute;
      v.layer = "loss";
      v.path = p.path.name;
      v.reason = fmt::format(
          "every layer's output is finite, but the loss ({}) is not on {}: {} of {} batches, the "
          "first batch {}; in f32 it is {}.",
          loss_name(r.loss), path_label(p.path), p.loss->nonfinite_batches, r.data.batches,
          *p.loss->first_nonfinite_batch, num(r.baseline.loss->loss));
      v.fix =
          "keep the loss in float32: make the network's output float32 (Keras: a final "
          "Activation('linear', dtype='float32'); PyTorch: compute the loss outside torch.autocast).";
      return v;
    }
    return std::nullopt;
  }
  const LayerForward& at = first->layers[layer];
  const double base_max = r.baseline.layers[layer].max_abs;
  ModelVerdict v;
  v.boundary = Boundary::compute;
  v.layer = layer_of(r, layer).name;
  v.path = first->path.name;
  std::string clears, also;
  for (const PathForward& p : r.paths) {
    if (&p == first) continue;
    if (crossed(r, p, layer)) {
      also += fmt::format("{}{}", also.empty() ? "" : ", ", p.path.name);
    } else {
      clears += fmt::format("{}on {} it does not cross (its {} {:.1f} binades below the largest finite)",
                            clears.empty() ? "" : "; ", path_label(p.path),
                            p.layers[layer].product_max_abs > p.layers[layer].max_abs ? "q·kᵀ peaks" : "largest |y|",
                            p.headroom_log2(layer));
    }
  }
  const std::string tail = fmt::format("{}{}", clears.empty() ? std::string() : fmt::format("; {}", clears),
                                       also.empty() ? std::string() : fmt::format("; it crosses on {} too", also));
  const std::string storage = std::string(dtype_name(first->path.storage));
  if (at.nonfinite > 0) {
    const Where& w = *at.first_nonfinite;
    v.reason = fmt::format(
        "{} output is not finite on {} from batch {}, row {}, column {} ({}); in f32 its largest "
        "|y| is {} against {}'s largest finite {}{}.",
        layer_text(r, layer), path_label(first->path), w.batch, w.row, w.column, num(w.value),
        base_max > 0 ? binades(std::log2(base_max)) : std::string("0"), storage, num(max_finite(first->path.storage)),
        tail);
    v.fix = fmt::format(
        "keep layer '{}' in float32 (Keras: dtype=\"float32\" on that layer; PyTorch: run it outside "
        "torch.autocast), or normalise its input so that its outputs stay below {}.",
        v.layer, num(max_finite(first->path.storage)));
    if (const onnx::Layer& head = layer_of(r, layer); head.kind == onnx::LayerKind::attention)
      attention_advice(r, layer, head, storage, max_finite(first->path.storage), v);
  } else {
    v.reason = fmt::format(
        "{} output collapses to zero on {}: {:.1f} % of its outputs that are non-zero in f32 are "
        "zero there (an intermediate that overflowed or underflowed {}, e.g. a variance summed in "
        "{}){}.",
        layer_text(r, layer), path_label(first->path), 100 * at.flush_share(), storage, storage, tail);
    v.fix = fmt::format(
        "keep layer '{}' in float32 (Keras: dtype=\"float32\" on that layer; PyTorch: run it outside "
        "torch.autocast), or use a kernel that keeps its statistics in float32, as f16_f32acc does.",
        v.layer);
  }
  return v;
}

std::string window_range(const NetWindow& w) {
  if (w.batches == 0) return "not measured";
  if (w.empty) return "empty";
  return fmt::format("2^{} .. 2^{}", *w.S_min_log2, *w.S_max_log2);
}

std::optional<ModelVerdict> optimization(const ModelReport& r) {
  // --train: a simulated scaler that fails (the Keras path's first, as the user runs it).
  std::vector<const PathForward*> order;
  for (const PathForward& p : r.paths)
    if (p.path.keras_like) order.push_back(&p);
  for (const PathForward& p : r.paths)
    if (!p.path.keras_like) order.push_back(&p);
  for (const PathForward* p : order) {
    std::string what;
    for (const Simulation& m : p->simulations)
      if (m.outcome != Outcome::trains) what += (what.empty() ? "" : "; ") + failure_text(m, r.options.underflow_share);
    if (what.empty()) continue;
    ModelVerdict v;
    v.boundary = Boundary::optimization;
    v.path = p->path.name;
    v.layer = p->window.lower_layer.empty() ? p->window.upper_layer : p->window.lower_layer;
    std::string ends;
    if (!p->window.lower_layer.empty()) ends = fmt::format("its lower end set by '{}'", p->window.lower_layer);
    if (!p->window.upper_layer.empty())
      ends += fmt::format("{}its upper end set by '{}'", ends.empty() ? "" : ", ", p->window.upper_layer);
    v.reason = fmt::format("training from the file's weights on {}: {}. The network's loss-scale window there is {}{}.",
                           path_label(p->path), what, window_range(p->window),
                           ends.empty() ? std::string() : fmt::format(" ({})", ends));
    if (!p->window.empty && p->window.batches > 0) {
      const int k = std::min((*p->window.S_min_log2 + *p->window.S_max_log2) / 2, 24);
      v.fix = fmt::format(
          "use a fixed loss scale inside the window, e.g. 2^{}: Keras LossScaleOptimizer(opt, "
          "dynamic=False, initial_scale=2**{}), PyTorch GradScaler(init_scale=2**{}, "
          "growth_interval=10**9); or keep the layers that set its ends in float32.",
          k, k, k);
    } else {
      v.fix =
          "no loss scale serves every layer on this path: keep the layers that underflow or overflow in float32 "
          "(Keras: dtype=\"float32\"; PyTorch: outside torch.autocast), or normalise their inputs.";
    }
    return v;
  }
  for (const PathForward& p : r.paths) {
    if (!p.loss || !p.window.empty || p.window.batches == 0) continue;
    const NetWindow& w = p.window;
    ModelVerdict v;
    v.boundary = Boundary::optimization;
    v.path = p.path.name;
    v.layer = w.lower_layer;
    const std::string lower =
        w.S_min_log2 ? fmt::format("layer '{}' needs S >= 2^{}", w.lower_layer, *w.S_min_log2)
                     : fmt::format("layer '{}' underflows at every S up to 2^{}", w.lower_layer, kWindowMaxLog2);
    const std::string upper = w.S_max_log2
                                  ? fmt::format("layer '{}' overflows above 2^{}", w.upper_layer, *w.S_max_log2)
                                  : fmt::format("layer '{}' overflows already at S = 1", w.upper_layer);
    v.reason = fmt::format(
        "no loss scale keeps every layer's gradients finite and at most {:.1f} % underflowed on {} "
        "(over {} batches): {}, and {}.",
        100 * r.options.underflow_share, path_label(p.path), w.batches, lower, upper);
    v.fix = fmt::format(
        "keep layer '{}' or '{}' in float32 (Keras: dtype=\"float32\"; PyTorch: outside "
        "torch.autocast), or normalise the activations that feed them; no single loss scale serves "
        "both.",
        w.lower_layer, w.upper_layer);
    return v;
  }
  return std::nullopt;
}

}  // namespace

/// With a loss: the no-loss-scaling warning, and the layers whose gradients overflow at the scalers' initial
/// scales (a scaler backs off from them: not a fault, but where the window ends).
std::vector<std::string> gradient_notes(const ModelReport& r) {
  std::vector<std::string> notes;
  if (!r.no_loss_scaling.warning.empty()) notes.push_back(r.no_loss_scaling.warning);
  for (const PathForward& p : r.paths) {
    const NetWindow& w = p.window;
    if (!p.loss || w.empty || w.batches == 0) continue;
    std::string set_by;
    if (!w.lower_layer.empty()) set_by += fmt::format("its lower end set by '{}'", w.lower_layer);
    if (!w.upper_layer.empty())
      set_by += fmt::format("{}its upper end set by '{}'", set_by.empty() ? "" : ", ", w.upper_layer);
    notes.push_back(fmt::format(
        "{}: loss scales 2^{} .. 2^{} keep every layer's gradients finite and under the "
        "underflow share{}; Keras's 2^15 is {}, PyTorch's 2^16 {}.",
        path_label(p.path), *w.S_min_log2, *w.S_max_log2, set_by.empty() ? std::string() : fmt::format(" ({})", set_by),
        w.keras_inside ? "inside" : "outside", w.pytorch_inside ? "inside" : "outside"));
  }
  for (const PathForward& p : r.paths) {
    if (!p.path.keras_like || p.simulations.empty()) continue;
    std::string s;
    bool backed_off = false;
    for (const Simulation& m : p.simulations)
      if (m.outcome == Outcome::trains) {
        s += (s.empty() ? "" : "; ") + scaler_note(m);
        backed_off = backed_off || m.skipped > 0;
      }
    if (s.empty()) continue;
    notes.push_back(fmt::format("dynamic loss scaling on {} over {} steps from the file's weights: {}{}.",
                                path_label(p.path), p.simulations.front().steps, s,
                                backed_off ? "; backing off from the initial scale is the scaler doing its job" : ""));
  }
  for (const PathForward& p : r.paths) {
    std::string over;
    for (int k = 1; k < 3; ++k)
      for (const LayerGrads& g : p.grads)
        if (g.params[k].nonfinite + g.input[k].nonfinite > 0) {
          over = fmt::format("at S = {} layer '{}' is the first whose gradients overflow",
                             scale_text(g.params[k].scale), g.name);
          break;
        }
    if (!over.empty())
      notes.push_back(fmt::format("{}: {} (a dynamic scaler backs off from there).", path_label(p.path), over));
  }
  return notes;
}

ModelVerdict decide_model(const ModelReport& r) {
  for (auto rule : {nonfinite_features, nonfinite_weights, baseline, storage, compute, optimization})
    if (std::optional<ModelVerdict> v = rule(r)) {
      for (std::string& n : gradient_notes(r)) v->notes.push_back(std::move(n));
      return *v;
    }
  ModelVerdict v;
  v.boundary = Boundary::ok;
  v.reason = r.loss == Loss::none
                 ? "every layer's output is finite on every path that ran, with finite data and weights."
                 : fmt::format(
                       "every layer's output and the loss ({}) are finite on every path that ran, with finite "
                       "data and weights.",
                       loss_name(r.loss));
  v.fix = r.loss == Loss::none ? "none needed for the forward pass." : "none needed for the forward pass and the loss.";
  v.notes = gradient_notes(r);
  for (const PathForward& p : r.paths) {
    std::size_t tight = 0;
    for (std::size_t l = 1; l < p.layers.size(); ++l)
      if (p.headroom_log2(l) < p.headroom_log2(tight)) tight = l;
    if (p.layers.empty() || !std::isfinite(p.headroom_log2(tight))) continue;
    const LayerForward& t = p.layers[tight];
    const bool product = t.product_max_abs > t.max_abs;
    v.notes.push_back(fmt::format("{}: the tightest layer is {}, {} {}, {:.1f} binades below {}'s largest finite.",
                                  path_label(p.path), layer_text(r, tight), product ? "its q·kᵀ peaks at" : "max |y|",
                                  binades(std::log2(product ? t.product_max_abs : t.max_abs)), p.headroom_log2(tight),
                                  dtype_name(p.path.storage)));
    for (std::size_t l = 0; l < p.layers.size(); ++l)
      if (p.layers[l].flush_share() > r.options.underflow_share)
        v.notes.push_back(fmt::format("{}: {} flushes {:.2f} % of the outputs that are non-zero in f32 to zero.",
                                      path_label(p.path), layer_text(r, l), 100 * p.layers[l].flush_share()));
  }
  return v;
}

}  // namespace halfmap::diagnose
