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

/// One projection of the head's input: MatMul(in, W), with its bias Add when one follows.
struct Proj {
  const Tensor* w = nullptr;
  const Tensor* b = nullptr;
  std::string value;
};

// The nodes are given roles by what they read: the projections (MatMul of `in` by a constant, with its bias
// Add), then walking back from the output P·v: Softmax, the mask Add, the scale, q·kᵀ and the Transpose of k.
// One step per role, in that order, each refusing with a sentence naming the region when a node does not fit;
// then the check in float64 and the two layers.
class HeadReader {
 public:
  HeadReader(const Graph& g, const std::vector<const Node*>& nodes, const std::string& in, const std::string& out,
             std::size_t features)
      : g_(g),
        nodes_(nodes),
        in_(in),
        out_(out),
        features_(features),
        first_(*nodes.front()),
        where_(fmt::format("{} .. {}", first_.label(), nodes.back()->label())) {}

  /// The steps: the roles, the check, the layers.
  std::pair<Layer, Layer> read() {
    check_input();
    index_writers();
    read_projections();
    read_output();
    read_scores();
    check_all_placed();
    check_values();
    const std::string scope = scope_of(nodes_);
    Layer qkv = fused_projection(scope);
    Layer head = head_layer(scope);
    return {std::move(qkv), std::move(head)};
  }

 private:
  /// Fails naming the region, what does not fit and the one form halfmap reads.
  [[noreturn]] void refuse(std::string_view why) const {
    fail(g_.file, fmt::format("{} read as attention: {}; halfmap reads one head, softmax(q·kᵀ/√d [+ causal mask])·v "
                              "with q, k and v projected from one value.",
                              where_, why));
  }
  void check_input();
  void index_writers();
  void read_projections();
  void read_output();
  void read_scores();
  const Node* read_mask(const Node* cur);
  void check_all_placed() const;
  void check_values() const;
  Mat project(const Mat& x, const Proj& p) const;
  bool is_head_output(const Mat& q, const Mat& k, const Mat& v, const Mat& y) const;
  Layer fused_projection(const std::string& scope) const;
  Layer head_layer(const std::string& scope) const;

  /// The node writing value v in the region, or null.
  const Node* writer_of(const std::string& v) const {
    const auto it = writer_.find(v);
    return it != writer_.end() ? it->second : nullptr;
  }
  /// Which of the three projections writes v, or -1.
  int proj_of(const std::string& v) const {
    for (std::size_t k = 0; k < 3; ++k)
      if (projs_[k].value == v) return int(k);
    return -1;
  }
  /// A Div or Mul of a computed value by a float scalar constant: the scale 1/√d.
  bool scale_node(const Node* n) const {
    if (n == nullptr || (n->op != "Div" && n->op != "Mul") || n->inputs.size() != 2) return false;
    const Tensor* c = constant(g_, n->inputs[1]);
    return c != nullptr && !c->integer && c->f.size() == 1 && constant(g_, n->inputs[0]) == nullptr;
  }

  const Graph& g_;
  const std::vector<const Node*>& nodes_;
  const std::string& in_;
  const std::string& out_;
  const std::size_t features_;
  const Node& first_;
  const std::string where_;
  std::size_t f_ = 0, d_ = 0;  // the input's width and the head's
  std::map<std::string, const Node*> writer_;
  std::set<const Node*> used_;
  std::vector<Proj> projs_;
  std::set<const Node*> projection_nodes_;
  const Node* pv_ = nullptr;  // the output P·v
  int iq_ = -1, ik_ = -1, iv_ = -1;
  bool causal_ = false, prescale_ = false;
};

// A head reads sequences of tokens of a known width.
void HeadReader::check_input() {
  if (g_.seq == 0) refuse("the input is rows × features (rank 2); attention needs sequences × tokens × features");
  if (features_ == 0) refuse("the input's feature count is symbolic");
  f_ = features_;
}

// Which node writes each value: the walk back from the output follows it.
void HeadReader::index_writers() {
  for (const Node* n : nodes_)
    for (const std::string& v : n->outputs) writer_[v] = n;
}

// The three projections: MatMul(in, W), each with its bias Add when one follows, all of one width d.
void HeadReader::read_projections() {
  for (const Node* n : nodes_) {
    if (n->op != "MatMul" || n->inputs.size() != 2 || n->inputs[0] != in_) continue;
    const Tensor* w = constant(g_, n->inputs[1]);
    if (w == nullptr || w->integer || w->dims.size() != 2 || std::size_t(w->dims[0]) != f_ || w->dims[1] <= 0)
      refuse(fmt::format("{} is not a projection of the {} features by a constant matrix", n->label(), f_));
    Proj p{w, nullptr, n->outputs[0]};
    used_.insert(n);
    projection_nodes_.insert(n);
    for (const Node* a : nodes_)
      if (a->op == "Add" && a->inputs.size() == 2 && (a->inputs[0] == p.value || a->inputs[1] == p.value)) {
        const std::string& other = a->inputs[0] == p.value ? a->inputs[1] : a->inputs[0];
        if (const Tensor* b = feature_vector(g_, other, std::size_t(w->dims[1]))) {
          p.b = b;
          p.value = a->outputs[0];
          used_.insert(a);
          projection_nodes_.insert(a);
        }
        break;
      }
    projs_.push_back(p);
  }
  if (projs_.size() != 3) refuse(fmt::format("{} projections of its input, not 3", projs_.size()));
  d_ = std::size_t(projs_[0].w->dims[1]);
  for (const Proj& p : projs_)
    if (std::size_t(p.w->dims[1]) != d_) refuse("q, k and v have different widths");
}

// The output: P·V, whose second operand names v.
void HeadReader::read_output() {
  pv_ = writer_of(out_);
  if (pv_ == nullptr || !is_product(g_, *pv_)) refuse("its output is not a product P·v");
  used_.insert(pv_);
  iv_ = proj_of(pv_->inputs[1]);
  if (iv_ < 0) refuse("the product's second operand is not a projection of the input");
}

// Walk back from P: Softmax, then the optional mask Add, then the optional scale, then QKᵀ, naming q and k; the
// scale may instead be on q before the product (prescale).
void HeadReader::read_scores() {
  const Node* sm = writer_of(pv_->inputs[0]);
  if (sm == nullptr || sm->op != "Softmax") refuse("the product's first operand is not a Softmax");
  const std::int64_t axis = attr_int(g_, *sm, "axis", g_.opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 2) refuse(fmt::format("{} is over axis {}, not the keys (-1)", sm->label(), axis));
  used_.insert(sm);
  const Node* cur = read_mask(writer_of(sm->inputs[0]));
  bool scaled = false;
  if (scale_node(cur)) {
    scaled = true;
    used_.insert(cur);
    cur = writer_of(cur->inputs[0]);
  }
  if (cur == nullptr || !is_product(g_, *cur)) refuse("the scores are not a product q·kᵀ");
  const Node* qk = cur;
  used_.insert(qk);
  const Node* tr = writer_of(qk->inputs[1]);
  if (tr == nullptr || tr->op != "Transpose" || proj_of(tr->inputs[0]) < 0)
    refuse("the second operand of q·kᵀ is not a transposed projection of the input");
  used_.insert(tr);
  ik_ = proj_of(tr->inputs[0]);
  iq_ = proj_of(qk->inputs[0]);
  if (iq_ < 0) {
    const Node* s = writer_of(qk->inputs[0]);
    if (scaled || !scale_node(s) || proj_of(s->inputs[0]) < 0)
      refuse("the first operand of q·kᵀ is neither a projection nor a scaled one");
    scaled = prescale_ = true;
    used_.insert(s);
    iq_ = proj_of(s->inputs[0]);
  }
  if (!scaled) refuse("it has no scale 1/√d (a Div or a Mul by a constant)");
  if (iq_ == ik_ || iq_ == iv_ || ik_ == iv_) refuse("q, k and v are not three different projections");
}

// The optional mask Add before the Softmax (cur): the causal mask or nothing. Returns the node before it.
const Node* HeadReader::read_mask(const Node* cur) {
  if (cur == nullptr || cur->op != "Add" || cur->inputs.size() != 2) return cur;
  const int k = constant(g_, cur->inputs[1]) != nullptr ? 1 : constant(g_, cur->inputs[0]) != nullptr ? 0 : -1;
  if (k < 0) refuse(fmt::format("{} adds two computed values to the scores", cur->label()));
  const Tensor& m = *constant(g_, cur->inputs[std::size_t(k)]);
  bool ok = !m.integer && m.dims.size() >= 2 && m.f.size() == g_.seq * g_.seq && std::size_t(m.dims.back()) == g_.seq;
  for (std::size_t i = 0; ok && i < g_.seq; ++i)
    for (std::size_t j = 0; ok && j < g_.seq; ++j) {
      const float v = m.f[i * g_.seq + j];
      ok = j <= i ? v == 0 : (std::isinf(v) && v < 0);
    }
  if (!ok)
    refuse(fmt::format("its mask '{}' is not the causal one (0 on and below the diagonal, -inf above, {} × {})", m.name,
                       g_.seq, g_.seq));
  causal_ = true;
  used_.insert(cur);
  return writer_of(cur->inputs[std::size_t(1 - k)]);
}

// A node the walk did not reach would be computed and thrown away, or change the head: refuse it.
void HeadReader::check_all_placed() const {
  for (const Node* n : nodes_)
    if (!used_.contains(n)) refuse(fmt::format("{} has no place in one head", n->label()));
}

// The check: the region, evaluated in f64 on a probe sequence of at most 32 tokens (its cost is bounded
// whatever the file declares), is the head.
void HeadReader::check_values() const {
  const Mat x = probe(f_, std::min<std::size_t>(g_.seq, 32));
  const Mat q = project(x, projs_[std::size_t(iq_)]), k = project(x, projs_[std::size_t(ik_)]),
            v = project(x, projs_[std::size_t(iv_)]);
  std::map<std::string, Mat> vals;
  bool same =
      evaluate(g_, nodes_, in_, x, vals) && vals.contains(out_) && vals[out_].rows == x.rows && vals[out_].cols == d_;
  if (same) same = is_head_output(q, k, v, vals[out_]);
  if (!same) refuse("evaluated in float64 on a probe sequence it is not softmax(q·kᵀ/√d)·v");
}

// x·W + b in float64: one of q, k and v on the probe.
Mat HeadReader::project(const Mat& x, const Proj& p) const {
  Mat y{x.rows, d_, std::vector<double>(x.rows * d_, 0.0)};
  for (std::size_t t = 0; t < x.rows; ++t)
    for (std::size_t j = 0; j < d_; ++j) {
      double a = p.b != nullptr ? double(p.b->f[j]) : 0.0;
      for (std::size_t i = 0; i < f_; ++i) a += x.v[t * f_ + i] * double(p.w->f[i * d_ + j]);
      y.v[t * d_ + j] = a;
    }
  return y;
}

// Whether y, the region's output, is softmax(q·kᵀ/√d [+ causal mask])·v within 1e-5 (relative above 1).
bool HeadReader::is_head_output(const Mat& q, const Mat& k, const Mat& v, const Mat& y) const {
  bool same = true;
  const double c = 1 / std::sqrt(double(d_));
  for (std::size_t i = 0; same && i < q.rows; ++i) {
    const std::size_t keys = causal_ ? i + 1 : q.rows;
    std::vector<double> p(keys);
    double mx = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < keys; ++j) {
      double s = 0;
      for (std::size_t e = 0; e < d_; ++e) s += q.v[i * d_ + e] * k.v[j * d_ + e];
      mx = std::max(mx, p[j] = s * c);
    }
    for (double& e : p) sum += (e = std::exp(e - mx));
    for (std::size_t e = 0; same && e < d_; ++e) {
      double o = 0;
      for (std::size_t j = 0; j < keys; ++j) o += p[j] / sum * v.v[j * d_ + e];
      same = std::abs(y.v[i * d_ + e] - o) <= 1e-5 * std::max(1.0, std::abs(o));
    }
  }
  return same;
}

// The first layer: [q | k | v] by one dense layer, the three projections' weights side by side.
Layer HeadReader::fused_projection(const std::string& scope) const {
  Layer qkv;
  qkv.kind = LayerKind::dense;
  qkv.name = (scope.empty() ? first_.name : scope) + "/qkv";
  qkv.ops = "MatMul+Add ×3";
  qkv.in = f_;
  qkv.out = 3 * d_;
  const Proj* order[3] = {&projs_[std::size_t(iq_)], &projs_[std::size_t(ik_)], &projs_[std::size_t(iv_)]};
  const bool any_bias = order[0]->b || order[1]->b || order[2]->b;
  qkv.weight.stored = order[0]->w->stored;
  qkv.weight.values.assign(f_ * 3 * d_, 0.0f);
  if (any_bias) qkv.bias.values.assign(3 * d_, 0.0f);
  for (std::size_t part = 0; part < 3; ++part) {
    const Proj& p = *order[part];
    qkv.weight.name += (part ? ", " : "") + p.w->name;
    for (std::size_t i = 0; i < f_; ++i)
      for (std::size_t j = 0; j < d_; ++j) qkv.weight.values[i * 3 * d_ + part * d_ + j] = p.w->f[i * d_ + j];
    qkv.sources.push_back(param_of(*p.w));
    if (p.b != nullptr) {
      std::copy(p.b->f.begin(), p.b->f.end(), qkv.bias.values.begin() + std::ptrdiff_t(part * d_));
      qkv.bias.name += (qkv.bias.name.empty() ? "" : ", ") + p.b->name;
      qkv.bias.stored = p.b->stored;
      qkv.sources.push_back(param_of(*p.b));
    }
  }
  return qkv;
}

// The second layer: the head on [q | k | v], named by its nodes' ops but the projections'.
Layer HeadReader::head_layer(const std::string& scope) const {
  Layer head;
  head.kind = LayerKind::attention;
  head.name = scope.empty() ? out_ : scope;
  for (const Node* n : nodes_)
    if (!projection_nodes_.contains(n)) head.ops += (head.ops.empty() ? "" : "+") + n->op;
  head.in = 3 * d_;
  head.out = d_;
  head.prescale = prescale_;
  head.causal = causal_;
  return head;
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

std::pair<Layer, Layer> read_attention(const Graph& g, const std::vector<const Node*>& nodes, const std::string& in,
                                       const std::string& out, std::size_t features) {
  return HeadReader(g, nodes, in, out, features).read();
}

}  // namespace halfmap::onnx::detail
