// The ONNX reader's second step (include/halfmap/onnx.hpp): a validated Graph -> halfmap's chain of layers.
//
// The nodes are cut into regions: a region starts at the chain's current value and ends at the first value
// through which everything computed since flows (when that value is the only one still to be read). One node is
// one layer (Gemm, MatMul, Relu, ...); several nodes must be one of the patterns the exporters write (GELU's Erf
// and Tanh forms, layer normalisation before opset 17, RMS normalisation), read by onnx_pattern.cpp: recognised by
// their ops, their constants taken from their nodes, and then checked by evaluating the region in float64 on probe
// rows against the layer it is read as. A region with a Softmax and a product of two computed values is an
// attention head, read by onnx_attention.cpp. A residual Add is read where its earlier operand is a layer's
// output; any other node that reads a value from before its region ends the reading with a sentence.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "onnx_detail.hpp"

namespace halfmap::onnx {

namespace {

using detail::constant;
using detail::fail;
using detail::feature_vector;
using detail::Graph;
using detail::is_onnx_domain;
using detail::Node;
using detail::param_of;
using detail::Tensor;

// ---- regions -> layers -----------------------------------------------------------------------------------------

/// Nodes from the chain's value `in` to the next value `out` through which everything flows.
struct Region {
  std::vector<const Node*> nodes;
  std::string in, out;
};

class Lowering {
 public:
  explicit Lowering(const Graph& g) : g_(g) {}

  Network run() {
    Network net;
    net.input = g_.input;
    net.output = g_.output;
    net.ir_version = g_.ir_version;
    net.opset = g_.opset;
    net.producer = g_.producer;
    features_ = g_.features;
    count_readers();
    std::string cur = g_.input;
    std::vector<const Node*> region;
    std::vector<Region> regions;
    std::set<std::string> derived{cur};          // values computed from `cur` within the region
    std::map<std::string, std::size_t> pending;  // derived values' reads still to come
    pending[cur] = readers_[cur];
    std::set<std::string> boundaries{cur};  // the values between regions: where a residual may branch off
    for (const Node& n : g_.nodes) {
      bool reads_chain = false;
      for (const std::string& v : n.inputs) {
        if (v.empty() || constant(g_, v) != nullptr) continue;
        if (const auto skip = skip_of_.find(&n); skip != skip_of_.end() && skip->second == v) {
          // A residual Add's earlier operand: not counted among the reads that keep a region open.
          if (derived.contains(v) || boundaries.contains(v)) continue;
          fail(g_.file, fmt::format("{} adds '{}', a value from inside an earlier layer's pattern: a residual "
                                    "connection must start at a layer's output.",
                                    n.label(), v));
        }
        if (!derived.contains(v))
          fail(g_.file, fmt::format("{} reads '{}', computed before the layer it belongs to: halfmap reads chains of "
                                    "layers with residual Adds; other branches are not supported yet.",
                                    n.label(), v));
        reads_chain = true;
        if (--pending[v] == 0) pending.erase(v);
      }
      if (!reads_chain)
        fail(g_.file,
             fmt::format("{} computes from constants only; halfmap reads layers applied to the input.", n.label()));
      region.push_back(&n);
      for (const std::string& v : n.outputs) {
        if (v.empty()) continue;
        derived.insert(v);
        if (readers_[v] > 0) pending[v] = readers_[v];
      }
      if (pending.size() == 1 && pending.begin()->first != cur && derived.contains(pending.begin()->first)) {
        const std::string next = pending.begin()->first;
        regions.push_back(Region{region, cur, next});
        region.clear();
        cur = next;
        boundaries.insert(cur);
        derived = {cur};
        pending = {{cur, readers_[cur]}};
      } else if (pending.empty()) {
        break;  // nothing left to read: the output was computed (checked below)
      }
    }
    if (!region.empty() || cur != g_.output)
      fail(g_.file, fmt::format("its graph output '{}' is not the end of one chain of layers from input '{}'.",
                                g_.output, g_.input));
    lower_regions(regions, net);
    if (net.layers.empty()) fail(g_.file, "has no layer between its input and its output.");
    net.features = net.layers.front().in;
    net.seq = g_.seq;
    return net;
  }

 private:
  /// Counts each value's readers. An Add of two computed values is a residual connection: its operand computed
  /// earlier (the graph input, or the output of an earlier node) is the skip, and that read is not counted, so that
  /// the layers between the branch and the Add still close their regions.
  void count_readers() {
    std::map<std::string, std::size_t> producer;  // node order; the graph input is 0, node k is k + 1
    producer[g_.input] = 0;
    for (std::size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& v : g_.nodes[k].outputs) producer[v] = k + 1;
    for (const Node& n : g_.nodes) {
      if (n.op == "Add" && is_onnx_domain(n) && n.inputs.size() == 2 && constant(g_, n.inputs[0]) == nullptr &&
          constant(g_, n.inputs[1]) == nullptr && producer.contains(n.inputs[0]) && producer.contains(n.inputs[1]) &&
          n.inputs[0] != n.inputs[1])
        skip_of_[&n] = producer[n.inputs[0]] < producer[n.inputs[1]] ? n.inputs[0] : n.inputs[1];
      for (const std::string& v : n.inputs) {
        if (v.empty() || constant(g_, v) != nullptr) continue;
        if (const auto skip = skip_of_.find(&n); skip != skip_of_.end() && skip->second == v) continue;
        ++readers_[v];
      }
    }
    ++readers_[g_.output];  // the output is read by the user
  }

  [[noreturn]] void unsupported(const Node& n) {
    fail(g_.file,
         fmt::format("{} is not supported{}; halfmap reads {}.", n.label(),
                     is_onnx_domain(n) ? std::string() : fmt::format(" (domain '{}')", n.domain), supported_ops()));
  }

  /// The features' axis: 1 for rows × features, 2 for sequences × tokens × features.
  std::int64_t last_axis() const { return g_.seq != 0 ? 2 : 1; }

  std::size_t need_features(const Node& n) {
    if (features_ == 0)
      fail(g_.file,
           fmt::format("{}: the input's feature count is symbolic and no dense layer before it fixes it.", n.label()));
    return features_;
  }

  Layer start(LayerKind k, const Node& n) { return detail::layer_of(k, n, features_); }

  /// True if the region is one node that is a layer by itself (a MatMul's bias Add included).
  bool standalone(const Region& r, const Network& net) const {
    if (r.nodes.size() != 1) return false;
    const Node& n = *r.nodes[0];
    static const std::set<std::string, std::less<>> layer_ops = {"Gemm",     "MatMul",  "Relu",    "Sigmoid",
                                                                 "Tanh",     "Gelu",    "Softmax", "LayerNormalization",
                                                                 "Identity", "Flatten", "Reshape"};
    if (layer_ops.contains(n.op) || !is_onnx_domain(n) || skip_of_.contains(&n)) return true;
    if (n.op != "Add" || net.layers.empty() || n.inputs.size() != 2) return false;
    const Layer& prev = net.layers.back();
    return prev.kind == LayerKind::dense && prev.ops == "MatMul" && prev.bias.empty() &&
           (feature_vector(g_, n.inputs[0], prev.out) != nullptr ||
            feature_vector(g_, n.inputs[1], prev.out) != nullptr);
  }

  /// Standalone regions become one layer each; a run of the others is read as patterns, longest first.
  void lower_regions(const std::vector<Region>& regions, Network& net) {
    static const std::set<std::string, std::less<>> pattern_ops = {"Add",  "Sub",        "Mul", "Div",  "Pow",
                                                                   "Sqrt", "Reciprocal", "Erf", "Tanh", "ReduceMean"};
    values_[g_.input] = {0, features_};
    for (std::size_t i = 0; i < regions.size();) {
      if (standalone(regions[i], net)) {
        lower_node(*regions[i].nodes[0], net);
        values_[regions[i].out] = {net.layers.size(), features_};
        ++i;
        continue;
      }
      if (detail::is_attention(g_, regions[i].nodes)) {
        auto [qkv, head] = detail::read_attention(g_, regions[i].nodes, regions[i].in, regions[i].out, features_);
        features_ = head.out;
        net.layers.push_back(std::move(qkv));
        net.layers.push_back(std::move(head));
        values_[regions[i].out] = {net.layers.size(), features_};
        ++i;
        continue;
      }
      for (const Node* n : regions[i].nodes)
        if (!pattern_ops.contains(n->op) || !is_onnx_domain(*n)) {
          if (regions[i].nodes.size() > 1)
            fail(g_.file,
                 fmt::format("{} .. {} branch from '{}' and join again (a residual connection or a "
                             "branch): halfmap reads chains of layers; branches and residual connections "
                             "are not supported yet.",
                             regions[i].nodes.front()->label(), regions[i].nodes.back()->label(), regions[i].in));
          unsupported(*n);
        }
      std::size_t end = i + 1;
      while (end < regions.size() && !standalone(regions[end], net)) ++end;
      bool read = false;
      for (std::size_t last = end; last > i && !read; --last) {
        std::vector<const Node*> nodes;
        for (std::size_t k = i; k < last; ++k)
          nodes.insert(nodes.end(), regions[k].nodes.begin(), regions[k].nodes.end());
        const std::size_t f = need_features(*nodes.front());
        if (std::optional<Layer> l = detail::read_pattern(g_, nodes, regions[i].in, regions[last - 1].out, f)) {
          net.layers.push_back(std::move(*l));
          values_[regions[last - 1].out] = {net.layers.size(), features_};
          i = last;
          read = true;
        }
      }
      if (!read) {
        std::string joined;
        for (const Node* n : regions[i].nodes) joined += (joined.empty() ? "" : "+") + n->op;
        fail(g_.file,
             fmt::format("{} .. {} ({}, and what follows them) form no layer halfmap knows; it reads "
                         "{}.",
                         regions[i].nodes.front()->label(), regions[i].nodes.back()->label(), joined, supported_ops()));
      }
    }
  }

  void lower_dense(const Node& n, const Tensor& w, bool trans_b, const std::string& bias, Network& net) {
    if (w.integer || w.dims.size() != 2)
      fail(g_.file, fmt::format("{}: its weight '{}' is not a float matrix.", n.label(), w.name));
    const std::size_t rows = std::size_t(w.dims[0]), cols = std::size_t(w.dims[1]);
    const std::size_t k = trans_b ? cols : rows, m = trans_b ? rows : cols;
    if (features_ != 0 && k != features_)
      fail(g_.file, fmt::format("{}: its weight '{}' has {} inputs, but the layer before it gives {} features.",
                                n.label(), w.name, k, features_));
    if (k == 0 || m == 0) fail(g_.file, fmt::format("{}: its weight '{}' is empty.", n.label(), w.name));
    features_ = k;
    Layer l = start(LayerKind::dense, n);
    l.in = k;
    l.out = m;
    l.weight = param_of(w);
    if (trans_b) {
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < m; ++j) l.weight.values[i * m + j] = w.f[j * k + i];
    }
    if (!bias.empty()) {
      const Tensor* b = feature_vector(g_, bias, m);
      if (b == nullptr)
        fail(g_.file, fmt::format("{}: its bias '{}' is not a constant vector of {} values.", n.label(), bias, m));
      l.bias = param_of(*b);
    }
    features_ = m;
    net.layers.push_back(std::move(l));
  }

  /// A node that is a layer by itself, by its op; a residual Add by the value it adds.
  void lower_node(const Node& n, Network& net) {
    const std::string& op = n.op;
    const bool std_domain = is_onnx_domain(n);
    if (std_domain && op == "Gemm") return lower_gemm(n, net);
    if (std_domain && op == "MatMul") {
      if (n.inputs.size() != 2 || input(n, 1) == nullptr)
        fail(g_.file, fmt::format("{}: its second operand is not a constant; halfmap reads MatMul(x, W).", n.label()));
      return lower_dense(n, *input(n, 1), false, {}, net);
    }
    if (const auto skip = skip_of_.find(&n); skip != skip_of_.end()) return lower_residual(n, skip->second, net);
    if (std_domain && op == "Add") return lower_bias(n, net);
    if (std_domain && (op == "Relu" || op == "Sigmoid" || op == "Tanh")) {
      need_features(n);
      net.layers.push_back(start(op == "Relu"      ? LayerKind::relu
                                 : op == "Sigmoid" ? LayerKind::sigmoid
                                                   : LayerKind::tanh,
                                 n));
      return;
    }
    if (op == "Gelu" && (std_domain || n.domain == "com.microsoft")) return lower_gelu(n, net);
    if (std_domain && op == "Softmax") return lower_softmax(n, net);
    if (std_domain && op == "LayerNormalization") return lower_layernorm(n, net);
    if (std_domain && (op == "Identity" || op == "Flatten" || op == "Reshape")) return check_shape_kept(n);
    unsupported(n);
  }

  /// The node's input i when it is a constant, else null (computed, omitted or absent).
  const Tensor* input(const Node& n, std::size_t i) const {
    return i < n.inputs.size() && !n.inputs[i].empty() ? constant(g_, n.inputs[i]) : nullptr;
  }

  /// Gemm(x, W, b) with the defaults but transB: a dense layer.
  void lower_gemm(const Node& n, Network& net) {
    if (g_.seq != 0)
      fail(g_.file, fmt::format("{}: Gemm takes rank-2 values, and this network's input is rank 3.", n.label()));
    if (n.inputs.size() < 2 || input(n, 1) == nullptr)
      fail(g_.file, fmt::format("{}: its B is not a constant; halfmap reads Gemm(x, W, b).", n.label()));
    if (detail::attr_int(g_, n, "transA", 0) != 0 || detail::attr_float(g_, n, "alpha", 1) != 1 ||
        detail::attr_float(g_, n, "beta", 1) != 1)
      fail(g_.file, fmt::format("{}: transA, alpha or beta is not the default; halfmap reads Gemm with transA = 0, "
                                "alpha = beta = 1.",
                                n.label()));
    return lower_dense(n, *input(n, 1), detail::attr_int(g_, n, "transB", 0) != 0,
                       n.inputs.size() > 2 ? n.inputs[2] : std::string(), net);
  }

  /// A residual Add of `skip`, which must be an earlier layer's output of the current width.
  void lower_residual(const Node& n, const std::string& skip, Network& net) {
    const auto from = values_.find(skip);
    if (from == values_.end())
      fail(g_.file, fmt::format("{} adds '{}', which is not a layer's output: a residual connection must start at "
                                "one.",
                                n.label(), skip));
    if (from->second.second != features_)
      fail(g_.file, fmt::format("{} adds '{}' of {} features to a value of {}.", n.label(), skip, from->second.second,
                                features_));
    Layer l = start(LayerKind::add, n);
    l.skip = from->second.first;
    net.layers.push_back(std::move(l));
  }

  /// Any other Add: a bias after a MatMul (b + x or x + b), folded into that dense layer.
  void lower_bias(const Node& n, Network& net) {
    Layer* prev = net.layers.empty() ? nullptr : &net.layers.back();
    const std::string& bias = input(n, 0) != nullptr ? n.inputs[0] : n.inputs.size() > 1 ? n.inputs[1] : std::string();
    if (prev != nullptr && prev->kind == LayerKind::dense && prev->ops == "MatMul" && prev->bias.empty() &&
        feature_vector(g_, bias, prev->out) != nullptr) {
      prev->bias = param_of(*feature_vector(g_, bias, prev->out));
      prev->ops = "MatMul+Add";
      return;
    }
    fail(g_.file, fmt::format("{} adds something other than a bias of {} values to a MatMul's output; halfmap reads "
                              "Add only as a MatMul's bias.",
                              n.label(), features_));
  }

  /// Gelu (opset 20, or Microsoft's contrib op): exact or tanh, by its `approximate`.
  void lower_gelu(const Node& n, Network& net) {
    need_features(n);
    const std::string approx = detail::attr_string(g_, n, "approximate", "none");
    if (approx != "none" && approx != "tanh")
      fail(g_.file, fmt::format("{}: approximate = '{}'; GELU's are 'none' and 'tanh'.", n.label(), approx));
    net.layers.push_back(start(approx == "tanh" ? LayerKind::gelu_tanh : LayerKind::gelu, n));
  }

  /// Softmax over the features only.
  void lower_softmax(const Node& n, Network& net) {
    need_features(n);
    const std::int64_t axis = detail::attr_int(g_, n, "axis", g_.opset >= 13 ? -1 : 1);
    if (axis != -1 && axis != last_axis())
      fail(g_.file, fmt::format("{}: axis {}; halfmap reads softmax over the features (axis -1 or {}).", n.label(),
                                axis, last_axis()));
    net.layers.push_back(start(LayerKind::softmax, n));
  }

  /// LayerNormalization (opset 17) over the features, with its constant scale, optional bias and ε.
  void lower_layernorm(const Node& n, Network& net) {
    const std::size_t f = need_features(n);
    const std::int64_t axis = detail::attr_int(g_, n, "axis", -1);
    if (axis != -1 && axis != last_axis())
      fail(g_.file, fmt::format("{}: axis {}; halfmap normalises over the features (axis -1 or {}).", n.label(), axis,
                                last_axis()));
    const Tensor* gamma = n.inputs.size() > 1 ? feature_vector(g_, n.inputs[1], f) : nullptr;
    if (gamma == nullptr)
      fail(g_.file, fmt::format("{}: its scale is not a constant vector of {} values.", n.label(), f));
    Layer l = start(LayerKind::layernorm, n);
    l.weight = param_of(*gamma);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor* beta = feature_vector(g_, n.inputs[2], f);
      if (beta == nullptr)
        fail(g_.file, fmt::format("{}: its bias is not a constant vector of {} values.", n.label(), f));
      l.bias = param_of(*beta);
    }
    l.epsilon = detail::attr_float(g_, n, "epsilon", 1e-5f);
    if (!(l.epsilon > 0)) fail(g_.file, fmt::format("{}: epsilon {} is not positive.", n.label(), l.epsilon));
    net.layers.push_back(std::move(l));
  }

  /// Identity, Flatten and Reshape add no layer: they are read only where they keep the shape.
  void check_shape_kept(const Node& n) {
    const std::string& op = n.op;
    if ((op == "Flatten" || op == "Reshape") && g_.seq != 0)
      fail(g_.file, fmt::format("{} changes the shape of sequences × tokens × features; halfmap keeps it.", n.label()));
    if (op == "Identity" || op == "Flatten") {
      if (op == "Flatten" && detail::attr_int(g_, n, "axis", 1) != 1)
        fail(g_.file, fmt::format("{}: axis {}; halfmap keeps rows × features (axis 1).", n.label(),
                                  detail::attr_int(g_, n, "axis", 1)));
      return;
    }
    const std::size_t f = need_features(n);
    const Tensor* shape = input(n, 1);
    const bool keeps = shape != nullptr && shape->integer && shape->i.size() == 2 &&
                       (shape->i[0] == -1 || (shape->i[0] == 0 && detail::attr_int(g_, n, "allowzero", 0) == 0)) &&
                       (shape->i[1] == std::int64_t(f) || (shape->i[1] == -1 && shape->i[0] == 0));
    if (!keeps)
      fail(g_.file, fmt::format("{} changes the shape; halfmap reads Reshape only to (-1, {}).", n.label(), f));
  }

  const Graph& g_;
  std::size_t features_ = 0;
  std::map<std::string, std::size_t> readers_;
  std::map<const Node*, std::string> skip_of_;                         // residual Adds and their earlier operand
  std::map<std::string, std::pair<std::size_t, std::size_t>> values_;  // layer outputs: (value index, width)
};

}  // namespace

Network lower(const detail::Graph& g) { return Lowering(g).run(); }

}  // namespace halfmap::onnx
