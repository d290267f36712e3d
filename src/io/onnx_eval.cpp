// The float64 evaluation behind the ONNX reader's pattern check (onnx_lower.cpp): a region of nodes evaluated on
// probe rows, and the layers' definitions it is compared with (onnx_detail.hpp).
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "onnx_detail.hpp"

namespace halfmap::onnx::detail {

namespace {

/// A float constant as a matrix: scalars and vectors are one row; rank 2 is itself; rank 3 and up must have
/// leading dimensions of 1 (a causal mask of (1, L, L)). Null when it is none of these.
std::optional<Mat> of_tensor(const Tensor& t) {
  if (t.integer) return std::nullopt;
  for (std::size_t k = 0; k + 2 < t.dims.size(); ++k)
    if (t.dims[k] != 1) return std::nullopt;
  Mat m;
  m.rows = t.dims.size() >= 2 ? std::size_t(t.dims[t.dims.size() - 2]) : 1;
  m.cols = t.f.size() / std::max<std::size_t>(m.rows, 1);
  m.v.assign(t.f.begin(), t.f.end());
  return m;
}

/// The value `name`: computed earlier in the region, or a constant as a matrix; false when it is neither.
bool get(const Graph& g, const std::map<std::string, Mat>& vals, const std::string& name, Mat& out) {
  if (const auto it = vals.find(name); it != vals.end()) return out = it->second, true;
  if (const Tensor* t = constant(g, name); t != nullptr)
    if (std::optional<Mat> m = of_tensor(*t)) return out = std::move(*m), true;
  return false;
}

/// Add, Sub, Mul, Div and Pow of a and the node's second operand, broadcast.
bool binary(const Graph& g, const std::map<std::string, Mat>& vals, const Node& n, const Mat& a, Mat& y) {
  const std::string& op = n.op;
  Mat b;
  if (n.inputs.size() != 2 || !get(g, vals, n.inputs[1], b)) return false;
  // A probe sequence shorter than the network's: a constant L × L operand (a causal mask) is cut to its
  // top-left block, the mask of the probe's tokens.
  if (b.rows > a.rows && b.cols > a.cols && a.rows > 1 && a.cols > 1 && constant(g, n.inputs[1]) != nullptr) {
    Mat cut{a.rows, a.cols, std::vector<double>(a.rows * a.cols)};
    for (std::size_t r = 0; r < a.rows; ++r)
      for (std::size_t c = 0; c < a.cols; ++c) cut.v[r * a.cols + c] = b.v[r * b.cols + c];
    b = std::move(cut);
  }
  if ((a.rows != b.rows && a.rows != 1 && b.rows != 1) || (a.cols != b.cols && a.cols != 1 && b.cols != 1))
    return false;
  y.rows = std::max(a.rows, b.rows);
  y.cols = std::max(a.cols, b.cols);
  y.v.resize(y.rows * y.cols);
  for (std::size_t r = 0; r < y.rows; ++r)
    for (std::size_t c = 0; c < y.cols; ++c) {
      const double p = a.at(r, c), q = b.at(r, c);
      y.v[r * y.cols + c] = op == "Add"   ? p + q
                            : op == "Sub" ? p - q
                            : op == "Mul" ? p * q
                            : op == "Div" ? p / q
                                          : std::pow(p, q);
    }
  return true;
}

/// ReduceMean over the last axis, kept: axes = [-1] or [1] (an attribute before opset 18, an input from it).
bool reduce_mean(const Graph& g, const Node& n, const Mat& a, Mat& y) {
  std::vector<std::int64_t> axes;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const Tensor* t = constant(g, n.inputs[1]);
    if (t == nullptr || !t->integer) return false;
    axes = t->i;
  } else if (auto attr = detail::attr_ints(g, n, "axes")) {
    axes = std::move(*attr);
  }
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != (g.seq != 0 ? 2 : 1))) return false;
  if (detail::attr_int(g, n, "keepdims", 1) != 1) return false;
  y.rows = a.rows;
  y.cols = 1;
  y.v.assign(a.rows, 0.0);
  for (std::size_t r = 0; r < a.rows; ++r) {
    double s = 0;
    for (std::size_t c = 0; c < a.cols; ++c) s += a.at(r, c);
    y.v[r] = s / double(a.cols);
  }
  return true;
}

/// MatMul of one sequence's matrices: a · b, b a computed value or a constant matrix.
bool matmul(const Graph& g, const std::map<std::string, Mat>& vals, const Node& n, const Mat& a, Mat& y) {
  Mat b;
  if (n.inputs.size() != 2 || !get(g, vals, n.inputs[1], b) || a.cols != b.rows) return false;
  y.rows = a.rows;
  y.cols = b.cols;
  y.v.assign(y.rows * y.cols, 0.0);
  for (std::size_t r = 0; r < y.rows; ++r)
    for (std::size_t k = 0; k < a.cols; ++k)
      for (std::size_t c = 0; c < y.cols; ++c) y.v[r * y.cols + c] += a.v[r * a.cols + k] * b.v[k * b.cols + c];
  return true;
}

/// Transpose of the last two axes of a sequence's matrix: perm (0, 2, 1) of a rank-3 value.
bool transpose(const Graph& g, const Node& n, const Mat& a, Mat& y) {
  const auto perm = detail::attr_ints(g, n, "perm");
  if (!perm || *perm != std::vector<std::int64_t>{0, 2, 1}) return false;
  y.rows = a.cols;
  y.cols = a.rows;
  y.v.resize(a.v.size());
  for (std::size_t r = 0; r < a.rows; ++r)
    for (std::size_t c = 0; c < a.cols; ++c) y.v[c * y.cols + r] = a.v[r * a.cols + c];
  return true;
}

/// Softmax over the last axis, in float64 with the row's max subtracted.
bool softmax(const Graph& g, const Node& n, const Mat& a, Mat& y) {
  const std::int64_t axis = detail::attr_int(g, n, "axis", g.opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 2) return false;
  y = a;
  for (std::size_t r = 0; r < y.rows; ++r) {
    double mx = -INFINITY, s = 0;
    for (std::size_t c = 0; c < y.cols; ++c) mx = std::max(mx, y.v[r * y.cols + c]);
    for (std::size_t c = 0; c < y.cols; ++c) s += (y.v[r * y.cols + c] = std::exp(y.v[r * y.cols + c] - mx));
    for (std::size_t c = 0; c < y.cols; ++c) y.v[r * y.cols + c] /= s;
  }
  return true;
}

/// y = node n applied to its first operand a (and what else it reads); false for an op or shape the patterns do
/// not use.
bool evaluate_node(const Graph& g, const std::map<std::string, Mat>& vals, const Node& n, const Mat& a, Mat& y) {
  const std::string& op = n.op;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") return binary(g, vals, n, a, y);
  if (op == "Sqrt" || op == "Reciprocal" || op == "Erf" || op == "Tanh") {
    y = a;
    for (double& e : y.v)
      e = op == "Sqrt" ? std::sqrt(e) : op == "Reciprocal" ? 1 / e : op == "Erf" ? std::erf(e) : std::tanh(e);
    return true;
  }
  if (op == "ReduceMean") return reduce_mean(g, n, a, y);
  if (op == "MatMul") return matmul(g, vals, n, a, y);
  if (op == "Transpose") return transpose(g, n, a, y);
  if (op == "Softmax") return softmax(g, n, a, y);
  return false;
}

}  // namespace

bool evaluate(const Graph& g, const std::vector<const Node*>& region, const std::string& in, const Mat& x,
              std::map<std::string, Mat>& vals) {
  vals[in] = x;
  for (const Node* n : region) {
    if (n->outputs.empty() || !is_onnx_domain(*n)) return false;
    Mat a, y;
    if (n->inputs.empty() || !get(g, vals, n->inputs[0], a)) return false;
    if (!evaluate_node(g, vals, *n, a, y)) return false;
    vals[n->outputs[0]] = std::move(y);
  }
  return true;
}

Mat probe(std::size_t n, std::size_t rows) {
  Mat x{rows, n, {}};
  x.v.resize(rows * n);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < n; ++c)
      x.v[r * n + c] =
          (double(r % 16) - 1.5) * 0.25 +
          std::ldexp(1.0, int(r % 4) - 2) * (std::fmod(double(c) * 0.618034 + 0.1 * double(r), 1.0) * 6 - 3);
  return x;
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
}

}  // namespace halfmap::onnx::detail
