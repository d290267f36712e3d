// The ONNX reader's first step (include/halfmap/onnx.hpp): bytes -> onnx::ModelProto (libonnx-dev's protobuf
// classes) -> a validated Graph (onnx_detail.hpp). Protobuf parsing itself is safe on hostile bytes (bounded
// recursion, lengths checked against the buffer); what it does not check is ONNX's meaning: dims against data,
// external data, names read before they are written. That is checked here, before any constant is converted.
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "onnx_detail.hpp"

namespace halfmap::onnx {

std::string_view kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::dense:
      return "dense";
    case LayerKind::relu:
      return "relu";
    case LayerKind::sigmoid:
      return "sigmoid";
    case LayerKind::tanh:
      return "tanh";
    case LayerKind::gelu:
      return "gelu";
    case LayerKind::gelu_tanh:
      return "gelu_tanh";
    case LayerKind::layernorm:
      return "layernorm";
    case LayerKind::rmsnorm:
      return "rmsnorm";
    case LayerKind::softmax:
      return "softmax";
    case LayerKind::add:
      return "add";
    case LayerKind::attention:
      return "attention";
  }
  return "?";
}

std::string_view stored_name(Stored s) {
  switch (s) {
    case Stored::f32:
      return "float32";
    case Stored::f16:
      return "float16";
    case Stored::bf16:
      return "bfloat16";
  }
  return "?";
}

std::string_view supported_ops() {
  return "Gemm, MatMul (+ Add), Relu, Sigmoid, Tanh, Gelu and its Erf and Tanh patterns, LayerNormalization and "
         "its pattern, RMS normalisation's pattern, Softmax, residual Add, one-head attention (MatMul, Transpose, Div "
         "or Mul, Softmax, MatMul), Identity, Flatten, Reshape";
}

namespace detail {

void fail(const std::string& file, std::string_view what) { throw Error(fmt::format("{}: {}", file, what)); }

std::string Node::label() const {
  if (!name.empty()) return fmt::format("node '{}' ({})", name, op);
  return fmt::format("the {} node writing '{}'", op, outputs.empty() ? std::string() : outputs[0]);
}

namespace {

using ::onnx::AttributeProto;
using ::onnx::TensorProto;

const AttributeProto* find_attr(const Node& n, std::string_view name) {
  const auto it = n.attrs.find(name);
  return it == n.attrs.end() ? nullptr : it->second;
}

}  // namespace

std::int64_t attr_int(const Graph& g, const Node& n, std::string_view name, std::int64_t def) {
  const AttributeProto* a = find_attr(n, name);
  if (a == nullptr) return def;
  if (a->type() != AttributeProto::INT)
    fail(g.file, fmt::format("{}: attribute '{}' is not an integer.", n.label(), name));
  return a->i();
}

float attr_float(const Graph& g, const Node& n, std::string_view name, float def) {
  const AttributeProto* a = find_attr(n, name);
  if (a == nullptr) return def;
  if (a->type() != AttributeProto::FLOAT)
    fail(g.file, fmt::format("{}: attribute '{}' is not a float.", n.label(), name));
  return a->f();
}

std::optional<std::vector<std::int64_t>> attr_ints(const Graph& g, const Node& n, std::string_view name) {
  const AttributeProto* a = find_attr(n, name);
  if (a == nullptr) return std::nullopt;
  if (a->type() != AttributeProto::INTS)
    fail(g.file, fmt::format("{}: attribute '{}' is not a list of integers.", n.label(), name));
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

std::string attr_string(const Graph& g, const Node& n, std::string_view name, const std::string& def) {
  const AttributeProto* a = find_attr(n, name);
  if (a == nullptr) return def;
  if (a->type() != AttributeProto::STRING)
    fail(g.file, fmt::format("{}: attribute '{}' is not a string.", n.label(), name));
  return a->s();
}

namespace {

/// The most elements one constant may have: its data must be in the file, so this only keeps the products of
/// dims from overflowing before they are compared with the bytes that are there.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 40;

/// Printable: names come from the file, so control characters and overlong names are cut before they reach a
/// message.
std::string shown(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 200)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 200) out += "...";
  return out;
}

/// A tensor's data must be in the model itself, whole: external data and segments are refused.
void check_self_contained(const std::string& file, const TensorProto& t, const std::string& what) {
  if (t.data_location() == TensorProto::EXTERNAL || t.external_data_size() > 0) {
    std::string where;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") where = fmt::format(" ('{}')", shown(kv.value()));
    fail(file, fmt::format("{} keeps its data in an external file{}; halfmap reads self-contained models only (save "
                           "with onnx.save(model, path, save_as_external_data=False)).",
                           what, where));
  }
  if (t.has_segment())
    fail(file, fmt::format("{} is a segment of a tensor; segmented tensors are not supported.", what));
}

/// The tensor's dims into `dims`, and their product: each dim not negative, the product at most kMaxElements.
std::uint64_t read_dims(const std::string& file, const TensorProto& t, const std::string& what,
                        std::vector<std::int64_t>& dims) {
  std::uint64_t count = 1;
  for (const std::int64_t d : t.dims()) {
    if (d < 0) fail(file, fmt::format("{} has a negative dimension ({}).", what, d));
    if (d != 0 && count > kMaxElements / std::uint64_t(d))
      fail(file, fmt::format("{} declares more than 2^40 elements: its dims overflow.", what));
    count *= std::uint64_t(d);
    dims.push_back(d);
  }
  return count;
}

/// Each type's data is in raw_data (little-endian) or in its typed field (`have` elements); the count must match
/// the dims.
void check_count(const std::string& file, const TensorProto& t, const std::string& what, std::uint64_t count,
                 std::size_t have, std::size_t elem_bytes) {
  const bool raw = t.has_raw_data();
  const std::size_t raw_size = t.raw_data().size();
  if (raw) {
    if (raw_size != count * elem_bytes)
      fail(file, fmt::format("{} declares {} elements ({} bytes) but holds {} bytes of raw data.", what, count,
                             count * elem_bytes, raw_size));
  } else if (have != count) {
    fail(file, fmt::format("{} declares {} elements but holds {}.", what, count, have));
  }
}

/// float32 data, from raw bytes or float_data.
void read_f32(const std::string& file, const TensorProto& t, const std::string& what, std::uint64_t count,
              Tensor& out) {
  const bool raw = t.has_raw_data();
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(t.raw_data().data());
  check_count(file, t, what, count, std::size_t(t.float_data_size()), 4);
  out.stored = Stored::f32;
  out.f.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    if (raw) {
      std::uint32_t b = 0;
      for (int j = 3; j >= 0; --j) b = (b << 8) | bytes[4 * k + std::size_t(j)];
      out.f[k] = std::bit_cast<float>(b);
    } else {
      out.f[k] = t.float_data(int(k));
    }
  }
}

/// float16 and bfloat16 data, from raw bytes or int32_data (one 16-bit pattern each), widened exactly to float.
void read_16bit(const std::string& file, const TensorProto& t, const std::string& what, std::uint64_t count,
                Tensor& out) {
  const bool raw = t.has_raw_data();
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(t.raw_data().data());
  const bool half = t.data_type() == TensorProto::FLOAT16;
  check_count(file, t, what, count, std::size_t(t.int32_data_size()), 2);
  out.stored = half ? Stored::f16 : Stored::bf16;
  out.f.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    std::uint32_t b = 0;
    if (raw) {
      b = std::uint32_t(bytes[2 * k]) | std::uint32_t(bytes[2 * k + 1]) << 8;
    } else {
      const std::int32_t v = t.int32_data(int(k));
      if (v < 0 || v > 0xFFFF)
        fail(file, fmt::format("{} holds {} in its int32_data, which is no 16-bit pattern.", what, v));
      b = std::uint32_t(v);
    }
    out.f[k] = half ? to_f32(f16{std::uint16_t(b)}) : to_f32(bf16{std::uint16_t(b)});
  }
}

/// int64 and int32 data (Reshape's shape), from raw bytes or the typed field, as int64.
void read_integers(const std::string& file, const TensorProto& t, const std::string& what, std::uint64_t count,
                   Tensor& out) {
  const bool raw = t.has_raw_data();
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(t.raw_data().data());
  const bool wide = t.data_type() == TensorProto::INT64;
  check_count(file, t, what, count, std::size_t(wide ? t.int64_data_size() : t.int32_data_size()), wide ? 8 : 4);
  out.integer = true;
  out.i.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    if (raw) {
      std::uint64_t b = 0;
      const std::size_t w = wide ? 8 : 4;
      for (std::size_t j = w; j-- > 0;) b = (b << 8) | bytes[w * k + j];
      out.i[k] = wide ? std::int64_t(b) : std::int64_t(std::int32_t(std::uint32_t(b)));
    } else {
      out.i[k] = wide ? t.int64_data(int(k)) : t.int32_data(int(k));
    }
  }
}

/// Checks a TensorProto against its dims and converts it (float types exactly to float, integer types to int64).
Tensor read_tensor(const std::string& file, const TensorProto& t, const std::string& what) {
  Tensor out;
  out.name = t.name();
  check_self_contained(file, t, what);
  const std::uint64_t count = read_dims(file, t, what, out.dims);
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      read_f32(file, t, what, count, out);
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      read_16bit(file, t, what, count, out);
      break;
    case TensorProto::INT64:
    case TensorProto::INT32:
      read_integers(file, t, what, count, out);
      break;
    default:
      fail(file, fmt::format("{} has element type {} ({}); halfmap reads float32, float16 and bfloat16 weights "
                             "(and int64 shapes).",
                             what,
                             TensorProto::DataType_Name(TensorProto::DataType(t.data_type())).empty()
                                 ? std::string("unknown")
                                 : TensorProto::DataType_Name(TensorProto::DataType(t.data_type())),
                             t.data_type()));
  }
  return out;
}

/// A Constant node's value as a Tensor: attribute value (a tensor), value_float(s) or value_int(s).
Tensor constant_value(const Graph& g, const Node& n, const std::string& what) {
  if (n.attrs.size() != 1)
    fail(g.file, fmt::format("{} has {} attributes; a Constant has exactly one.", what, n.attrs.size()));
  const AttributeProto& a = *n.attrs.begin()->second;
  const std::string& key = n.attrs.begin()->first;
  Tensor t;
  if (key == "value" && a.type() == AttributeProto::TENSOR) {
    t = read_tensor(g.file, a.t(), what);
  } else if (key == "value_float" && a.type() == AttributeProto::FLOAT) {
    t.f = {a.f()};
  } else if (key == "value_floats" && a.type() == AttributeProto::FLOATS) {
    t.f.assign(a.floats().begin(), a.floats().end());
    t.dims = {std::int64_t(t.f.size())};
  } else if (key == "value_int" && a.type() == AttributeProto::INT) {
    t.integer = true;
    t.i = {a.i()};
  } else if (key == "value_ints" && a.type() == AttributeProto::INTS) {
    t.integer = true;
    t.i.assign(a.ints().begin(), a.ints().end());
    t.dims = {std::int64_t(t.i.size())};
  } else {
    fail(g.file, fmt::format("{} has a '{}' attribute; halfmap reads Constant values of tensor, float(s) and int(s).",
                             what, shown(key)));
  }
  t.name = n.outputs.empty() ? std::string() : n.outputs[0];
  return t;
}

/// Every value defined so far (input, constants, node outputs): a value is written once, and read after.
using Written = std::set<std::string, std::less<>>;

/// Marks `name` written by `by`; a second write fails.
void define(const std::string& file, Written& written, const std::string& name, const std::string& by) {
  if (name.empty()) return;
  if (!written.insert(name).second)
    fail(file, fmt::format("{} writes '{}', which is already defined.", by, shown(name)));
}

/// The model's header: a graph, its IR version, the default domain's opset and the producer; no sparse initializers.
void read_header(const ::onnx::ModelProto& m, Graph& g) {
  const std::string& file = g.file;
  if (!m.has_graph() || m.ir_version() <= 0) fail(file, "is not an ONNX model: it has no graph or no IR version.");
  g.ir_version = m.ir_version();
  for (const auto& op : m.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") g.opset = op.version();
  g.producer = shown(m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version()));
  if (m.graph().sparse_initializer_size() > 0) fail(file, "holds sparse initializers, which halfmap does not read.");
}

/// The initializers, each named once and checked against its dims.
void read_initializers(const ::onnx::GraphProto& gp, Graph& g, Written& written) {
  for (const TensorProto& t : gp.initializer()) {
    const std::string what = fmt::format("initializer '{}'", shown(t.name()));
    if (t.name().empty()) fail(g.file, "an initializer has no name.");
    define(g.file, written, t.name(), what);
    g.constants.emplace(t.name(), read_tensor(g.file, t, what));
  }
}

/// The input's shape when declared: rank 2 or 3, a fixed token count (rank 3), the features when not symbolic.
void read_input_shape(const ::onnx::TensorShapeProto& shape, Graph& g) {
  const std::string& file = g.file;
  const int rank = shape.dim_size();
  if (rank != 2 && rank != 3)
    fail(file, fmt::format("input '{}' has rank {}; halfmap reads rows × features (rank 2) or sequences × tokens × "
                           "features (rank 3).",
                           shown(g.input), rank));
  if (rank == 3) {
    const auto& t = shape.dim(1);
    if (!t.has_dim_value())
      fail(file, fmt::format("input '{}' has a symbolic token count; halfmap reads sequences of a fixed length "
                             "(export with a fixed second dimension).",
                             shown(g.input)));
    if (t.dim_value() <= 0 || t.dim_value() > std::int64_t(kMaxSeq))
      fail(file, fmt::format("input '{}' has sequences of {} tokens; halfmap reads 1 to {}.", shown(g.input),
                             t.dim_value(), kMaxSeq));
    g.seq = std::size_t(t.dim_value());
  }
  const auto& d = shape.dim(rank - 1);
  if (d.has_dim_value()) {
    if (d.dim_value() <= 0 || d.dim_value() > std::int64_t(1) << 24)
      fail(file, fmt::format("input '{}' has {} features.", shown(g.input), d.dim_value()));
    g.features = std::size_t(d.dim_value());
  }
}

/// The one data input: a float32 tensor. Inputs: IR < 4 lists the initializers among them; what remains is the data.
void read_input(const ::onnx::GraphProto& gp, Graph& g, Written& written) {
  const std::string& file = g.file;
  std::vector<const ::onnx::ValueInfoProto*> data_inputs;
  for (const auto& in : gp.input())
    if (!g.constants.contains(in.name())) data_inputs.push_back(&in);
  if (data_inputs.size() != 1)
    fail(file, fmt::format("has {} graph inputs besides its initializers; halfmap runs networks of one input (rows "
                           "× features).",
                           data_inputs.size()));
  const ::onnx::ValueInfoProto& in = *data_inputs[0];
  g.input = in.name();
  if (g.input.empty()) fail(file, "its graph input has no name.");
  define(file, written, g.input, "the graph input");
  const auto& tt = in.type().tensor_type();
  if (!in.type().has_tensor_type() || tt.elem_type() != TensorProto::FLOAT)
    fail(file,
         fmt::format("input '{}' is not a float32 tensor; halfmap feeds the network float32 rows.", shown(g.input)));
  if (tt.has_shape()) read_input_shape(tt.shape(), g);
}

/// The nodes in order, each reading only values written before it: Constant nodes and Identity copies of a
/// constant go to the constants, the others to g.nodes.
void read_nodes(const ::onnx::GraphProto& gp, Graph& g, Written& written) {
  const std::string& file = g.file;
  for (const ::onnx::NodeProto& np : gp.node()) {
    Node n;
    n.name = shown(np.name());
    n.op = shown(np.op_type());
    n.domain = shown(np.domain());
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const AttributeProto& a : np.attribute()) {
      if (!n.attrs.emplace(a.name(), &a).second)
        fail(file, fmt::format("{} has the attribute '{}' twice.", n.label(), shown(a.name())));
    }
    const std::string label = n.label();
    for (const std::string& v : n.inputs) {
      if (!v.empty() && !written.contains(v))
        fail(file, fmt::format("{} reads '{}', which no initializer, input or earlier node writes (the graph names a "
                               "missing value, is not in topological order, or has a cycle).",
                               label, shown(v)));
    }
    for (const std::string& v : n.outputs) define(file, written, v, label);
    // torch.onnx.export writes an initializer shared by several modules once, and an Identity of it for each
    // further use: that copy is the same constant (named by the initializer that holds its data).
    if (n.op == "Identity" && (n.domain.empty() || n.domain == "ai.onnx") && n.inputs.size() == 1 &&
        n.outputs.size() == 1 && g.constants.contains(n.inputs[0])) {
      Tensor copy = g.constants.at(n.inputs[0]);
      g.constants.emplace(n.outputs[0], std::move(copy));
      continue;
    }
    if (n.op == "Constant" && (n.domain.empty() || n.domain == "ai.onnx")) {
      if (n.outputs.size() != 1)
        fail(file, fmt::format("{} has {} outputs; a Constant has one.", label, n.outputs.size()));
      g.constants.emplace(n.outputs[0], constant_value(g, n, label));
      continue;
    }
    g.nodes.push_back(std::move(n));
  }
}

}  // namespace

Graph read_graph(const ::onnx::ModelProto& m, const std::string& file) {
  Graph g;
  g.file = file;
  read_header(m, g);
  const ::onnx::GraphProto& gp = m.graph();
  Written written;
  read_initializers(gp, g, written);
  read_input(gp, g, written);
  if (gp.output_size() != 1)
    fail(file, fmt::format("has {} graph outputs; halfmap runs networks of one output.", gp.output_size()));
  g.output = gp.output(0).name();
  read_nodes(gp, g, written);
  if (!written.contains(g.output))
    fail(file, fmt::format("its graph output '{}' is written by no node.", shown(g.output)));
  return g;
}

}  // namespace detail

namespace {

/// 3/4 of physical memory, as the .npy tables: a model is held twice (bytes and parsed) while it is read.
std::uint64_t memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::uint64_t>::max();
  return std::uint64_t(pages) * std::uint64_t(page) / 4 * 3;
}

}  // namespace

Network lower(const detail::Graph& g);  // onnx_lower.cpp

Network parse(std::span<const unsigned char> bytes, const std::string& name) {
  if (bytes.size() > kMaxModelBytes) detail::fail(name, "is larger than 2 GiB, protobuf's limit for one message.");
  ::onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromArray(bytes.data(), int(bytes.size())))
    detail::fail(name, "is not an ONNX model: it does not parse as an ONNX ModelProto (protobuf).");
  return lower(detail::read_graph(m, name));
}

Network load(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) detail::fail(path, "no such file.");
  if (!std::filesystem::is_regular_file(st)) detail::fail(path, "is not a regular file.");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) detail::fail(path, fmt::format("cannot be read ({}).", ec.message()));
  if (size > kMaxModelBytes) detail::fail(path, "is larger than 2 GiB, protobuf's limit for one message.");
  if (size > memory_budget()) detail::fail(path, "is larger than 3/4 of this machine's memory.");
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail(path, "cannot be opened for reading.");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  if (std::size_t(in.gcount()) != bytes.size())
    detail::fail(path, "truncated: the file became shorter while it was read.");
  return parse(bytes, path);
}

}  // namespace halfmap::onnx
