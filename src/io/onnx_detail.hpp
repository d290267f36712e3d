// Shared by the ONNX reader's two steps: onnx_read.cpp validates the protobuf into a Graph of checked constants and
// nodes; onnx_lower.cpp turns the Graph into halfmap's layers (include/halfmap/onnx.hpp), with onnx_pattern.cpp for
// the patterns of several nodes, onnx_attention.cpp for attention heads and onnx_eval.cpp's float64 evaluation for
// checking what they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halfmap/onnx.hpp"

namespace onnx {
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace halfmap::onnx::detail {

/// Throws Error("<file>: <what>").
[[noreturn]] void fail(const std::string& file, std::string_view what);

/// A constant (initializer or Constant node) whose data was checked against its dims: float types are widened
/// exactly to float in `f`; int64 and int32 tensors (Reshape's shape) are in `i`.
struct Tensor {
  std::string name;
  std::vector<std::int64_t> dims;
  Stored stored = Stored::f32;
  bool integer = false;
  std::vector<float> f;
  std::vector<std::int64_t> i;
  std::size_t count() const { return integer ? i.size() : f.size(); }
};

struct Node {
  std::string name, op, domain;
  std::vector<std::string> inputs, outputs;  // inputs: "" for an omitted optional input
  std::map<std::string, const ::onnx::AttributeProto*, std::less<>> attrs;
  /// "'name' (Op)", or "the Op node writing 'out'" when the node has no name.
  std::string label() const;
};

/// The graph after validation: every value a node reads is the input, a constant or the output of an earlier
/// node; no value is written twice; every constant's data matches its dims.
struct Graph {
  std::string file;
  std::string input, output;
  std::size_t features = 0;  // the input's last dimension, 0 when symbolic
  std::size_t seq = 0;       // a rank-3 input's second dimension (tokens per sequence); 0 for rank 2
  std::map<std::string, Tensor, std::less<>> constants;
  std::vector<Node> nodes;  // Constant nodes excluded (they are in `constants`), in the file's order
  std::int64_t ir_version = 0, opset = 0;
  std::string producer;
};

/// Integer, float and string attributes, with defaults; a wrong attribute type fails naming the node.
std::int64_t attr_int(const Graph& g, const Node& n, std::string_view name, std::int64_t def);
float attr_float(const Graph& g, const Node& n, std::string_view name, float def);
std::optional<std::vector<std::int64_t>> attr_ints(const Graph& g, const Node& n, std::string_view name);
std::string attr_string(const Graph& g, const Node& n, std::string_view name, const std::string& def);

inline bool is_onnx_domain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

/// The constant named v, or null when v is computed.
inline const Tensor* constant(const Graph& g, const std::string& v) {
  const auto it = g.constants.find(v);
  return it == g.constants.end() ? nullptr : &it->second;
}

inline Param param_of(const Tensor& t) { return Param{t.name, t.stored, t.f}; }

/// A layer of kind k read from node n: named by the node (else by its first output), its op, `width` in and out.
inline Layer layer_of(LayerKind k, const Node& n, std::size_t width) {
  Layer l;
  l.kind = k;
  l.name = n.name.empty() ? n.outputs[0] : n.name;
  l.ops = n.op;
  l.in = l.out = width;
  return l;
}

/// A float constant of n elements laid out as (n) or (1, n): a per-feature vector, or null.
inline const Tensor* feature_vector(const Graph& g, const std::string& v, std::size_t n) {
  const Tensor* t = constant(g, v);
  if (t == nullptr || t->integer || t->f.size() != n) return nullptr;
  if (t->dims.size() == 1 || (t->dims.size() == 2 && t->dims[0] == 1)) return t;
  return nullptr;
}

/// The nodes' common scope ("/encoder/mlp/act/Div", "/encoder/mlp/act/Mul" -> "/encoder/mlp/act"): the module
/// the exporter wrote them for; empty when they share none.
inline std::string scope_of(const std::vector<const Node*>& nodes) {
  std::string scope = nodes.front()->name;
  for (const Node* n : nodes) {
    std::size_t k = 0;
    while (k < scope.size() && k < n->name.size() && scope[k] == n->name[k]) ++k;
    scope.resize(k);
  }
  scope.resize(scope.rfind('/') == std::string::npos ? 0 : scope.rfind('/'));
  return scope;
}

// ---- onnx_pattern.cpp: one layer in several nodes (GELU's Erf and Tanh forms, layer and RMS norms) ------------

/// The layer the nodes from value `in` to value `out` compute, if they are one of the patterns (recognised by their
/// ops, their constants taken from their nodes) and compute it, checked in float64 on probe rows; else nullopt.
/// `f`: the width of `in` (not 0).
std::optional<Layer> read_pattern(const Graph& g, const std::vector<const Node*>& region, const std::string& in,
                                  const std::string& out, std::size_t f);

// ---- onnx_attention.cpp: one attention head (include/halfmap/onnx.hpp, "attention") ---------------------------

/// True if the nodes (a region of more than one node) hold a Softmax and a product of two computed values.
bool is_attention(const Graph& g, const std::vector<const Node*>& nodes);
/// The head the nodes from value `in` to value `out` compute, as two layers: the dense layer writing [q | k | v]
/// (the three projections side by side, Layer::sources their initializers) and the attention layer. Every node
/// must have a role, and the whole is checked in float64 on a probe sequence; else fails with a sentence naming
/// the nodes. `features`: the width of `in` (0 when the input's is symbolic).
std::pair<Layer, Layer> read_attention(const Graph& g, const std::vector<const Node*>& nodes, const std::string& in,
                                       const std::string& out, std::size_t features);

// ---- onnx_eval.cpp: float64 evaluation of a region on probe rows (the pattern check) ---------------------------

/// rows × cols values; a dimension of 1 broadcasts.
struct Mat {
  std::size_t rows = 0, cols = 0;
  std::vector<double> v;
  double at(std::size_t r, std::size_t c) const { return v[(rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : c)]; }
};

/// Evaluates the region's nodes on x (the value `in`; one sequence's tokens when the input is rank 3) into `vals`;
/// false when an op or a shape is not one the patterns use (Add, Sub, Mul, Div, Pow, Sqrt, Reciprocal, Erf, Tanh,
/// ReduceMean over the last axis, kept; attention's MatMul, Transpose (0, 2, 1) and Softmax over the last axis).
bool evaluate(const Graph& g, const std::vector<const Node*>& region, const std::string& in, const Mat& x,
              std::map<std::string, Mat>& vals);
/// Probe rows: `rows` rows of n values in about [-3, 3], each row with its own offset and one of four scales.
Mat probe(std::size_t n, std::size_t rows = 4);
double gelu_erf(double x);
double gelu_tanh(double x);

}  // namespace halfmap::onnx::detail
