// The float64 evaluation behind the ONNX reader's pattern check (onnx_lower.cpp): a region of nodes evaluated on
// probe rows, and the layers' definitions it is compared with (onnx_detail.hpp).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "onnx_detail.hpp"

namespace halfmap::onnx::detail {

namespace {

Mat of_tensor(const Tensor& t) {
  Mat m;
  m.rows = t.dims.size() == 2 ? std::size_t(t.dims[0]) : 1;
  m.cols = t.f.size() / std::max<std::size_t>(m.rows, 1);
  m.v.assign(t.f.begin(), t.f.end());
  return m;
}

}  // namespace

bool evaluate(const Graph& g, const std::vector<const Node*>& region, const std::string& in, const Mat& x,
              std::map<std::string, Mat>& vals) {
  vals[in] = x;
  auto get = [&](const std::string& name, Mat& out) {
    if (const auto it = vals.find(name); it != vals.end()) return out = it->second, true;
    if (const Tensor* t = constant(g, name); t != nullptr && !t->integer && t->dims.size() <= 2) {
      out = of_tensor(*t);
      return true;
    }
    return false;
  };
  for (const Node* n : region) {
    if (n->outputs.empty() || !is_onnx_domain(*n)) return false;
    const std::string& op = n->op;
    Mat a, b, y;
    if (n->inputs.empty() || !get(n->inputs[0], a)) return false;
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") {
      if (n->inputs.size() != 2 || !get(n->inputs[1], b)) return false;
      if ((a.rows != b.rows && a.rows != 1 && b.rows != 1) || (a.cols != b.cols && a.cols != 1 && b.cols != 1))
        return false;
      y.rows = std::max(a.rows, b.rows);
      y.cols = std::max(a.cols, b.cols);
      y.v.resize(y.rows * y.cols);
      for (std::size_t r = 0; r < y.rows; ++r)
        for (std::size_t c = 0; c < y.cols; ++c) {
          const double p = a.at(r, c), q = b.at(r, c);
          y.v[r * y.cols + c] = op == "Add" ? p + q : op == "Sub" ? p - q : op == "Mul" ? p * q : op == "Div" ? p / q
                                                                                                : std::pow(p, q);
        }
    } else if (op == "Sqrt" || op == "Reciprocal" || op == "Erf" || op == "Tanh") {
      y = a;
      for (double& e : y.v) e = op == "Sqrt" ? std::sqrt(e) : op == "Reciprocal" ? 1 / e : op == "Erf" ? std::erf(e)
                                                                                             : std::tanh(e);
    } else if (op == "ReduceMean") {
      // The last axis, kept: axes = [-1] or [1] (an attribute before opset 18, an input from it).
      std::vector<std::int64_t> axes;
      if (n->inputs.size() > 1 && !n->inputs[1].empty()) {
        const Tensor* t = constant(g, n->inputs[1]);
        if (t == nullptr || !t->integer) return false;
        axes = t->i;
      } else if (auto a = detail::attr_ints(g, *n, "axes")) {
        axes = std::move(*a);
      }
      if (axes.size() != 1 || (axes[0] != -1 && axes[0] != 1)) return false;
      if (detail::attr_int(g, *n, "keepdims", 1) != 1) return false;
      y.rows = a.rows;
      y.cols = 1;
      y.v.assign(a.rows, 0.0);
      for (std::size_t r = 0; r < a.rows; ++r) {
        double s = 0;
        for (std::size_t c = 0; c < a.cols; ++c) s += a.at(r, c);
        y.v[r] = s / double(a.cols);
      }
    } else {
      return false;
    }
    vals[n->outputs[0]] = std::move(y);
  }
  return true;
}

Mat probe(std::size_t n) {
  Mat x{4, n, {}};
  x.v.resize(4 * n);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < n; ++c)
      x.v[r * n + c] = (double(r) - 1.5) * 0.25 + std::ldexp(1.0, int(r) - 2) * (std::fmod(double(c) * 0.618034 + 0.1 * double(r), 1.0) * 6 - 3);
  return x;
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
}

}  // namespace halfmap::onnx::detail
