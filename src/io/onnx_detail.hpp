// Shared by the ONNX reader's two steps: onnx_read.cpp validates the protobuf into a Graph of checked constants and
// nodes; onnx_lower.cpp turns the Graph into halfmap's layers (include/halfmap/onnx.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  std::size_t features = 0;  // the input's second dimension, 0 when symbolic
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

}  // namespace halfmap::onnx::detail
