// The patterns the exporters write for one layer in several nodes (include/halfmap/onnx.hpp): GELU's Erf and Tanh
// forms, layer normalisation before opset 17 and RMS normalisation, read from a region of the ONNX reader's second
// step (onnx_lower.cpp) by their ops and constants, then checked by evaluating the region in float64 on probe rows.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "onnx_detail.hpp"

namespace halfmap::onnx::detail {

namespace {

/// y[r][c] of the layer a pattern is read as, in float64, from the probe rows x.
using Reference = std::function<double(const Mat&, std::size_t, std::size_t)>;

/// A norm's γ (op "Mul") or β ("Add"): the first per-feature vector operand of a node of that op.
const Tensor* vector_operand(const Graph& g, const std::vector<const Node*>& region, std::string_view op,
                             std::size_t f) {
  for (const Node* n : region)
    if (n->op == op)
      for (const std::string& v : n->inputs)
        if (const Tensor* t = feature_vector(g, v, f); t != nullptr) return t;
  return nullptr;
}

/// ε: the scalar added to a mean (the Add whose other operand is a ReduceMean's output).
std::optional<double> epsilon_of(const Graph& g, const std::vector<const Node*>& region) {
  std::set<std::string> means;
  for (const Node* n : region)
    if (n->op == "ReduceMean") means.insert(n->outputs[0]);
  for (const Node* n : region)
    if (n->op == "Add" && n->inputs.size() == 2)
      for (int k = 0; k < 2; ++k)
        if (means.contains(n->inputs[std::size_t(k)]))
          if (const Tensor* t = constant(g, n->inputs[std::size_t(1 - k)]); t && !t->integer && t->f.size() == 1)
            return double(t->f[0]);
  return std::nullopt;
}

/// Layer or RMS normalisation over a row, with the layer's γ, β and ε: what a norm pattern must compute.
Reference norm_reference(const Layer& l) {
  const bool layer = l.kind == LayerKind::layernorm;
  const std::vector<float> gamma = l.weight.values, beta = l.bias.values;
  const double e = l.epsilon;
  return [layer, gamma, beta, e](const Mat& x, std::size_t r, std::size_t c) {
    double mean = 0, ss = 0;
    for (std::size_t j = 0; j < x.cols; ++j) mean += x.at(r, j);
    mean = layer ? mean / double(x.cols) : 0.0;
    for (std::size_t j = 0; j < x.cols; ++j) ss += (x.at(r, j) - mean) * (x.at(r, j) - mean);
    const double y = (x.at(r, c) - mean) / std::sqrt(ss / double(x.cols) + e);
    return y * (gamma.empty() ? 1.0 : double(gamma[c])) + (beta.empty() ? 0.0 : double(beta[c]));
  };
}

/// The check: the region, evaluated in f64 on probe rows of f values, is the layer it is read as.
bool computes(const Graph& g, const std::vector<const Node*>& region, const std::string& in, const std::string& out,
              std::size_t f, const Reference& ref) {
  const Mat x = probe(f);
  std::map<std::string, Mat> vals;
  bool same =
      evaluate(g, region, in, x, vals) && vals.contains(out) && vals[out].rows == x.rows && vals[out].cols == x.cols;
  for (std::size_t r = 0; same && r < x.rows; ++r)
    for (std::size_t c = 0; same && c < x.cols; ++c) {
      const double want = ref(x, r, c), got = vals[out].at(r, c);
      same = std::abs(got - want) <= 1e-5 * std::max(1.0, std::abs(want));
    }
  return same;
}

}  // namespace

std::optional<Layer> read_pattern(const Graph& g, const std::vector<const Node*>& region, const std::string& in,
                                  const std::string& out, std::size_t f) {
  std::multiset<std::string> ops;
  std::string joined;
  for (const Node* n : region) {
    ops.insert(n->op);
    joined += (joined.empty() ? "" : "+") + n->op;
  }
  const Node& first = *region.front();
  // The pattern's name: its nodes' common scope ("/encoder/mlp/act/Div", "/encoder/mlp/act/Mul" ->
  // "/encoder/mlp/act"), the module the exporter wrote it for; else its first node's name.
  const std::string scope = scope_of(region);
  Layer l = layer_of(LayerKind::gelu, first, f);
  if (!scope.empty()) l.name = scope;
  l.ops = joined;
  Reference ref;
  const std::size_t means = ops.count("ReduceMean");
  if (ops.contains("Erf") && means == 0) {
    l.kind = LayerKind::gelu;
    ref = [](const Mat& x, std::size_t r, std::size_t c) { return gelu_erf(x.at(r, c)); };
  } else if (ops.contains("Tanh") && means == 0) {
    l.kind = LayerKind::gelu_tanh;
    ref = [](const Mat& x, std::size_t r, std::size_t c) { return gelu_tanh(x.at(r, c)); };
  } else if (means == 2 || means == 1) {
    l.kind = means == 2 ? LayerKind::layernorm : LayerKind::rmsnorm;
    const std::optional<double> eps = epsilon_of(g, region);
    if (!eps || !(*eps > 0)) return std::nullopt;
    l.epsilon = *eps;
    if (const Tensor* gamma = vector_operand(g, region, "Mul", f)) l.weight = param_of(*gamma);
    if (l.kind == LayerKind::layernorm)
      if (const Tensor* beta = vector_operand(g, region, "Add", f)) l.bias = param_of(*beta);
    ref = norm_reference(l);
  } else {
    return std::nullopt;
  }
  if (!computes(g, region, in, out, f, ref)) return std::nullopt;
  return l;
}

}  // namespace halfmap::onnx::detail
