// One attention head as the exporters write it (include/halfmap/onnx.hpp, "attention"), read from a region of the
// ONNX reader's second step (onnx_lower.cpp) into the fused projection and the head.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "onnx_detail.hpp"

namespace halfmap::onnx::detail {

namespace {

/// A MatMul of two computed values (not x·W): attention's QKᵀ or P·V.
bool is_product(const Graph& g, const Node& n) {
  return n.op == "MatMul" && is_onnx_domain(n) && n.inputs.size() == 2 && constant(g, n.inputs[0]) == nullptr &&
         constant(g, n.inputs[1]) == nullptr;
}

}  // namespace

bool is_attention(const Graph& g, const std::vector<const Node*>& nodes) {
  bool softmax = false, product = false;
  for (const Node* n : nodes) {
    softmax = softmax || (n->op == "Softmax" && is_onnx_domain(*n));
    product = product || is_product(g, *n);
  }
  return softmax && product && nodes.size() > 1;
}

// The nodes are given roles by what they read: the projections (MatMul of `in` by a constant, with its bias
// Add), then walking back from the output P·v: Softmax, the mask Add, the scale, q·kᵀ and the Transpose of k.
std::pair<Layer, Layer> read_attention(const Graph& g, const std::vector<const Node*>& nodes, const std::string& in,
                                       const std::string& out, std::size_t features) {
  const Node& first = *nodes.front();
  const std::string where = fmt::format("{} .. {}", first.label(), nodes.back()->label());
  auto refuse = [&](std::string_view why) {
    fail(g.file, fmt::format("{} read as attention: {}; halfmap reads one head, softmax(q·kᵀ/√d [+ causal mask])·v "
                             "with q, k and v projected from one value.",
                             where, why));
  };
  if (g.seq == 0) refuse("the input is rows × features (rank 2); attention needs sequences × tokens × features");
  if (features == 0) refuse("the input's feature count is symbolic");
  const std::size_t f = features;
  std::map<std::string, const Node*> writer;
  for (const Node* n : nodes)
    for (const std::string& v : n->outputs) writer[v] = n;
  std::set<const Node*> used;
  // The three projections: MatMul(in, W), each with its bias Add when one follows.
  struct Proj {
    const Tensor* w = nullptr;
    const Tensor* b = nullptr;
    std::string value;
  };
  std::vector<Proj> projs;
  std::set<const Node*> projection_nodes;
  for (const Node* n : nodes) {
    if (n->op != "MatMul" || n->inputs.size() != 2 || n->inputs[0] != in) continue;
    const Tensor* w = constant(g, n->inputs[1]);
    if (w == nullptr || w->integer || w->dims.size() != 2 || std::size_t(w->dims[0]) != f || w->dims[1] <= 0)
      refuse(fmt::format("{} is not a projection of the {} features by a constant matrix", n->label(), f));
    Proj p{w, nullptr, n->outputs[0]};
    used.insert(n);
    projection_nodes.insert(n);
    for (const Node* a : nodes)
      if (a->op == "Add" && a->inputs.size() == 2 && (a->inputs[0] == p.value || a->inputs[1] == p.value)) {
        const std::string& other = a->inputs[0] == p.value ? a->inputs[1] : a->inputs[0];
        if (const Tensor* b = feature_vector(g, other, std::size_t(w->dims[1]))) {
          p.b = b;
          p.value = a->outputs[0];
          used.insert(a);
          projection_nodes.insert(a);
        }
        break;
      }
    projs.push_back(p);
  }
  if (projs.size() != 3) refuse(fmt::format("{} projections of its input, not 3", projs.size()));
  const std::size_t d = std::size_t(projs[0].w->dims[1]);
  for (const Proj& p : projs)
    if (std::size_t(p.w->dims[1]) != d) refuse("q, k and v have different widths");
  // The output: P·V.
  const Node* pv = writer.contains(out) ? writer[out] : nullptr;
  if (pv == nullptr || !is_product(g, *pv)) refuse("its output is not a product P·v");
  used.insert(pv);
  auto proj_of = [&](const std::string& v) -> int {
    for (std::size_t k = 0; k < 3; ++k)
      if (projs[k].value == v) return int(k);
    return -1;
  };
  const int iv = proj_of(pv->inputs[1]);
  if (iv < 0) refuse("the product's second operand is not a projection of the input");
  // Walk back from P: Softmax, then the optional mask Add, then the optional scale, then QKᵀ.
  const Node* sm = writer.contains(pv->inputs[0]) ? writer[pv->inputs[0]] : nullptr;
  if (sm == nullptr || sm->op != "Softmax") refuse("the product's first operand is not a Softmax");
  const std::int64_t axis = attr_int(g, *sm, "axis", g.opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 2) refuse(fmt::format("{} is over axis {}, not the keys (-1)", sm->label(), axis));
  used.insert(sm);
  const Node* cur = writer.contains(sm->inputs[0]) ? writer[sm->inputs[0]] : nullptr;
  bool causal = false, prescale = false, scaled = false;
  auto scale_node = [&](const Node* n) {
    if (n == nullptr || (n->op != "Div" && n->op != "Mul") || n->inputs.size() != 2) return false;
    const Tensor* c = constant(g, n->inputs[1]);
    return c != nullptr && !c->integer && c->f.size() == 1 && constant(g, n->inputs[0]) == nullptr;
  };
  if (cur != nullptr && cur->op == "Add" && cur->inputs.size() == 2) {
    const int k = constant(g, cur->inputs[1]) != nullptr ? 1 : constant(g, cur->inputs[0]) != nullptr ? 0 : -1;
    if (k < 0) refuse(fmt::format("{} adds two computed values to the scores", cur->label()));
    const Tensor& m = *constant(g, cur->inputs[std::size_t(k)]);
    bool ok = !m.integer && m.dims.size() >= 2 && m.f.size() == g.seq * g.seq &&
              std::size_t(m.dims.back()) == g.seq;
    for (std::size_t i = 0; ok && i < g.seq; ++i)
      for (std::size_t j = 0; ok && j < g.seq; ++j) {
        const float v = m.f[i * g.seq + j];
        ok = j <= i ? v == 0 : (std::isinf(v) && v < 0);
      }
    if (!ok)
      refuse(fmt::format("its mask '{}' is not the causal one (0 on and below the diagonal, -inf above, {} × {})",
                         m.name, g.seq, g.seq));
    causal = true;
    used.insert(cur);
    cur = writer.contains(cur->inputs[std::size_t(1 - k)]) ? writer[cur->inputs[std::size_t(1 - k)]] : nullptr;
  }
  if (scale_node(cur)) {
    scaled = true;
    used.insert(cur);
    cur = writer.contains(cur->inputs[0]) ? writer[cur->inputs[0]] : nullptr;
  }
  if (cur == nullptr || !is_product(g, *cur)) refuse("the scores are not a product q·kᵀ");
  const Node* qk = cur;
  used.insert(qk);
  const Node* tr = writer.contains(qk->inputs[1]) ? writer[qk->inputs[1]] : nullptr;
  if (tr == nullptr || tr->op != "Transpose" || proj_of(tr->inputs[0]) < 0)
    refuse("the second operand of q·kᵀ is not a transposed projection of the input");
  used.insert(tr);
  const int ik = proj_of(tr->inputs[0]);
  int iq = proj_of(qk->inputs[0]);
  if (iq < 0) {
    const Node* s = writer.contains(qk->inputs[0]) ? writer[qk->inputs[0]] : nullptr;
    if (scaled || !scale_node(s) || proj_of(s->inputs[0]) < 0)
      refuse("the first operand of q·kᵀ is neither a projection nor a scaled one");
    scaled = prescale = true;
    used.insert(s);
    iq = proj_of(s->inputs[0]);
  }
  if (!scaled) refuse("it has no scale 1/√d (a Div or a Mul by a constant)");
  if (iq == ik || iq == iv || ik == iv) refuse("q, k and v are not three different projections");
  for (const Node* n : nodes)
    if (!used.contains(n))
      refuse(fmt::format("{} has no place in one head", n->label()));
  // The check: the region, evaluated in f64 on a probe sequence of at most 32 tokens (its cost is bounded
  // whatever the file declares), is the head.
  const Mat x = probe(f, std::min<std::size_t>(g.seq, 32));
  auto project = [&](const Proj& p) {
    Mat y{x.rows, d, std::vector<double>(x.rows * d, 0.0)};
    for (std::size_t t = 0; t < x.rows; ++t)
      for (std::size_t j = 0; j < d; ++j) {
        double a = p.b != nullptr ? double(p.b->f[j]) : 0.0;
        for (std::size_t i = 0; i < f; ++i) a += x.v[t * f + i] * double(p.w->f[i * d + j]);
        y.v[t * d + j] = a;
      }
    return y;
  };
  const Mat q = project(projs[std::size_t(iq)]), k = project(projs[std::size_t(ik)]),
            v = project(projs[std::size_t(iv)]);
  std::map<std::string, Mat> vals;
  bool same = evaluate(g, nodes, in, x, vals) && vals.contains(out) && vals[out].rows == x.rows &&
              vals[out].cols == d;
  const double c = 1 / std::sqrt(double(d));
  for (std::size_t i = 0; same && i < x.rows; ++i) {
    const std::size_t keys = causal ? i + 1 : x.rows;
    std::vector<double> p(keys);
    double mx = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < keys; ++j) {
      double s = 0;
      for (std::size_t e = 0; e < d; ++e) s += q.v[i * d + e] * k.v[j * d + e];
      mx = std::max(mx, p[j] = s * c);
    }
    for (double& e : p) sum += (e = std::exp(e - mx));
    for (std::size_t e = 0; same && e < d; ++e) {
      double o = 0;
      for (std::size_t j = 0; j < keys; ++j) o += p[j] / sum * v.v[j * d + e];
      same = std::abs(vals[out].v[i * d + e] - o) <= 1e-5 * std::max(1.0, std::abs(o));
    }
  }
  if (!same) refuse("evaluated in float64 on a probe sequence it is not softmax(q·kᵀ/√d)·v");
  // The layers: [q | k | v] by one dense layer, then the head.
  const std::string scope = scope_of(nodes);
  Layer qkv;
  qkv.kind = LayerKind::dense;
  qkv.name = (scope.empty() ? first.name : scope) + "/qkv";
  qkv.ops = "MatMul+Add ×3";
  qkv.in = f;
  qkv.out = 3 * d;
  const Proj* order[3] = {&projs[std::size_t(iq)], &projs[std::size_t(ik)], &projs[std::size_t(iv)]};
  const bool any_bias = order[0]->b || order[1]->b || order[2]->b;
  qkv.weight.stored = order[0]->w->stored;
  qkv.weight.values.assign(f * 3 * d, 0.0f);
  if (any_bias) qkv.bias.values.assign(3 * d, 0.0f);
  for (std::size_t part = 0; part < 3; ++part) {
    const Proj& p = *order[part];
    qkv.weight.name += (part ? ", " : "") + p.w->name;
    for (std::size_t i = 0; i < f; ++i)
      for (std::size_t j = 0; j < d; ++j) qkv.weight.values[i * 3 * d + part * d + j] = p.w->f[i * d + j];
    qkv.sources.push_back(param_of(*p.w));
    if (p.b != nullptr) {
      std::copy(p.b->f.begin(), p.b->f.end(), qkv.bias.values.begin() + std::ptrdiff_t(part * d));
      qkv.bias.name += (qkv.bias.name.empty() ? "" : ", ") + p.b->name;
      qkv.bias.stored = p.b->stored;
      qkv.sources.push_back(param_of(*p.b));
    }
  }
  Layer head;
  head.kind = LayerKind::attention;
  head.name = scope.empty() ? out : scope;
  for (const Node* n : nodes)
    if (!projection_nodes.contains(n)) head.ops += (head.ops.empty() ? "" : "+") + n->op;
  head.in = 3 * d;
  head.out = d;
  head.prescale = prescale;
  head.causal = causal;
  return {std::move(qkv), std::move(head)};
}

}  // namespace halfmap::onnx::detail
