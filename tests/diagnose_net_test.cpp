// The network runner of `halfmap diagnose --model` (src/diagnose/net_runner.hpp) on the f32 baseline path: its
// forward against a float64 evaluation of the layers' definitions, and its backward (every layer kind, the residual
// Add's two gradient paths, attention in both placements with and without its causal mask, mse and xent with a
// final softmax) against central finite differences of that float64
// loss. The f32 kernels round, so the bound is relative: |g - fd| <= 2e-3 · max|fd| + 1e-6 per parameter tensor.
// Then the model verdict's rule for --train on a synthetic report: a failing scaler is the optimization verdict.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "diagnose/net_runner.hpp"
#include "net_reference.hpp"

namespace halfmap::diagnose {
namespace {

using onnx::Layer;
using onnx::LayerKind;

Layer layer(LayerKind k, std::size_t in, std::size_t out, std::mt19937& rng) {
  Layer l;
  l.kind = k;
  l.in = in;
  l.out = out;
  l.name = std::string(onnx::kind_name(k));
  std::normal_distribution<float> n(0.0f, 0.7f);
  if (k == LayerKind::dense) {
    l.weight.values.resize(in * out);
    l.bias.values.resize(out);
  } else if (k == LayerKind::layernorm || k == LayerKind::rmsnorm) {
    l.weight.values.resize(out);
    if (k == LayerKind::layernorm) l.bias.values.resize(out);
    l.epsilon = 1e-5;
  }
  for (float& v : l.weight.values) v = n(rng) + (k == LayerKind::dense ? 0.0f : 1.0f);
  for (float& v : l.bias.values) v = 0.3f * n(rng);
  return l;
}

/// The network in float64 (the layers' definitions), and its loss.
double loss64(const onnx::Network& net, const std::vector<double>& x, std::size_t rows, Loss loss,
              const std::vector<double>& labels) {
  const std::vector<double> p = onnx::testing::forward64(net, x, rows).back();
  const std::size_t width = net.layers.back().out;
  double sum = 0;
  if (loss == Loss::mse) {
    for (std::size_t i = 0; i < p.size(); ++i) sum += (p[i] - labels[i]) * (p[i] - labels[i]);
    return sum / double(p.size());
  }
  // xent: a final softmax is the loss's own; -log p[label] of its output.
  for (std::size_t r = 0; r < rows; ++r) sum -= std::log(p[r * width + std::size_t(labels[r])]);
  return sum / double(rows);
}

struct Case {
  const char* name;
  Loss loss;
  std::vector<LayerKind> kinds;
  std::size_t seq = 0;  // attention: tokens per sequence (the rows are 2 sequences)
  bool prescale = false, causal = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class NetGradients : public ::testing::TestWithParam<Case> {};

TEST_P(NetGradients, MatchFiniteDifferencesOnTheF32Path) {
  const Case& c = GetParam();
  std::mt19937 rng(11);
  onnx::Network net;
  net.features = 5;
  net.seq = c.seq;
  std::size_t width = 5;
  for (std::size_t i = 0; i < c.kinds.size(); ++i) {
    const LayerKind k = c.kinds[i];
    // A dense layer before attention computes [q | k | v] of a head of 4; the head gives 4.
    const bool qkv = i + 1 < c.kinds.size() && c.kinds[i + 1] == LayerKind::attention;
    const std::size_t out = k == LayerKind::attention ? width / 3
                            : k == LayerKind::dense   ? (qkv          ? 12
                                                         : width == 5 ? 6
                                                                      : width)
                                                      : width;
    Layer l = layer(k, width, out, rng);
    if (k == LayerKind::add) l.skip = 1;  // the first dense layer's output
    l.prescale = c.prescale;
    l.causal = c.causal;
    net.layers.push_back(l);
    width = out;
  }
  const std::size_t rows = c.seq != 0 ? 2 * c.seq : 7;
  std::normal_distribution<double> n(0.0, 1.0);
  npy::Array xa, ya;
  xa.rows = rows;
  xa.cols = 5;
  xa.ndim = 2;
  for (std::size_t i = 0; i < rows * 5; ++i) xa.values.push_back(double(float(n(rng))));
  ya.rows = rows;
  ya.cols = c.loss == Loss::mse ? width : 1;
  ya.ndim = 2;
  for (std::size_t i = 0; i < ya.rows * ya.cols; ++i)
    ya.values.push_back(c.loss == Loss::mse ? double(float(n(rng))) : double(i % width));
  const Table x = Table::from_array(xa), y = Table::from_array(ya);

  NetRunner run(net, baseline_net_path(net, c.loss), c.loss, rows, rows, 1);
  run.load(x, &y, 0, rows);
  run.forward();
  const double L = run.backward(0, rows, 1.0f);
  std::vector<double> xs(xa.values), labels(ya.values);
  EXPECT_NEAR(L, loss64(net, xs, rows, c.loss, labels), 1e-4 * std::max(1.0, std::abs(L)));

  for (std::size_t li = 0; li < net.layers.size(); ++li) {
    if (li > run.last_backward_layer()) continue;
    std::size_t nonfinite = 0;
    const std::vector<double> g = run.param_grads(li, nonfinite);
    ASSERT_EQ(nonfinite, 0u);
    Layer& l = net.layers[li];
    std::vector<float*> params;
    for (float& v : l.weight.values) params.push_back(&v);
    for (float& v : l.bias.values) params.push_back(&v);
    ASSERT_EQ(g.size(), params.size()) << l.name;
    std::vector<double> fd(params.size());
    double fd_max = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const float keep = *params[i];
      const double h = 1e-3;
      *params[i] = float(double(keep) + h);
      const double up = loss64(net, xs, rows, c.loss, labels);
      *params[i] = float(double(keep) - h);
      const double down = loss64(net, xs, rows, c.loss, labels);
      // The steps as stored in float: divide by what was really added.
      *params[i] = float(double(keep) + h);
      const double hu = double(*params[i]) - double(keep);
      *params[i] = float(double(keep) - h);
      const double hd = double(keep) - double(*params[i]);
      *params[i] = keep;
      fd[i] = (up - down) / (hu + hd);
      fd_max = std::max(fd_max, std::abs(fd[i]));
    }
    for (std::size_t i = 0; i < params.size(); ++i)
      EXPECT_NEAR(g[i], fd[i], 2e-3 * fd_max + 1e-6) << c.name << ": layer " << li << " (" << l.name << ") param " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, NetGradients,
    ::testing::Values(
        Case{"mse_norm_gelu_residual",
             Loss::mse,
             {LayerKind::dense, LayerKind::layernorm, LayerKind::gelu, LayerKind::dense, LayerKind::add,
              LayerKind::tanh, LayerKind::dense}},
        Case{"mse_rms_relu_sigmoid_softmax",
             Loss::mse,
             {LayerKind::dense, LayerKind::rmsnorm, LayerKind::gelu_tanh, LayerKind::dense, LayerKind::relu,
              LayerKind::dense, LayerKind::sigmoid, LayerKind::dense, LayerKind::softmax}},
        Case{"xent_softmax_is_the_loss",
             Loss::xent,
             {LayerKind::dense, LayerKind::gelu, LayerKind::dense, LayerKind::add, LayerKind::dense,
              LayerKind::softmax}},
        Case{"mse_attention_postscale",
             Loss::mse,
             {LayerKind::dense, LayerKind::attention, LayerKind::dense, LayerKind::gelu, LayerKind::dense},
             5,
             false,
             false},
        Case{"xent_attention_prescale_causal",
             Loss::xent,
             {LayerKind::dense, LayerKind::attention, LayerKind::dense, LayerKind::softmax},
             4,
             true,
             true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace halfmap::diagnose

namespace halfmap::diagnose {
namespace {

/// A report whose forward, loss and window are fine; its Keras path's simulation is given.
ModelReport trained(Outcome keras, Outcome pytorch) {
  ModelReport r;
  r.loss = Loss::mse;
  r.options.steps = 50;
  onnx::Layer fc;
  fc.name = "fc";
  r.net.layers.push_back(fc);
  auto path = [&](const char* name, Mode mode, DType storage, bool keras_like, bool baseline) {
    PathForward p;
    p.path.name = name;
    p.path.mode = mode;
    p.path.storage = storage;
    p.path.keras_like = keras_like;
    p.baseline = baseline;
    LayerForward l;
    l.name = "fc";
    l.count = 10;
    l.max_abs = 1;
    p.layers.push_back(l);
    p.loss = PathLoss{};
    p.loss->loss = 0.5;
    if (!baseline) {
      p.window.batches = 8;
      p.window.S_min_log2 = 4;
      p.window.S_max_log2 = 12;
      p.window.empty = false;
      p.window.upper_layer = "fc";
    }
    return p;
  };
  r.baseline = path("f32/avx512", Mode::f32, DType::f32, false, true);
  r.paths.push_back(path("f16_f32acc/avx512", Mode::f16_f32acc, DType::f16, true, false));
  for (auto [framework, outcome, initial] : {std::tuple{"keras", keras, 32768.0}, {"pytorch", pytorch, 65536.0}}) {
    Simulation m;
    m.framework = framework;
    m.outcome = outcome;
    m.initial_scale = initial;
    m.steps = 50;
    m.skipped = outcome == Outcome::trains ? 3 : 50;
    m.final_scale = outcome == Outcome::trains ? 4096 : 0x1p-35;
    m.min_scale = m.final_scale;
    if (outcome == Outcome::trains) m.settled_scale = 4096;
    r.paths[0].simulations.push_back(m);
  }
  return r;
}

TEST(ModelVerdict, AScalerThatFailsIsOptimizationWithAFixedScaleInTheWindow) {
  const ModelVerdict v = decide_model(trained(Outcome::trains, Outcome::collapses));
  EXPECT_EQ(v.boundary, Boundary::optimization);
  EXPECT_EQ(v.path, "f16_f32acc/avx512");
  EXPECT_NE(v.reason.find("PyTorch's scaler (from 2^16) collapses"), std::string::npos) << v.reason;
  EXPECT_EQ(v.reason.find("Keras's scaler"), std::string::npos) << v.reason;  // it trains
  EXPECT_NE(v.reason.find("2^4 .. 2^12"), std::string::npos) << v.reason;
  EXPECT_NE(v.fix.find("2^8"), std::string::npos) << v.fix;  // the window's middle
}

TEST(ModelVerdict, ScalersThatTrainAreANoteNotAFault) {
  const ModelVerdict v = decide_model(trained(Outcome::trains, Outcome::trains));
  EXPECT_EQ(v.boundary, Boundary::ok);
  bool noted = false;
  for (const std::string& n : v.notes)
    noted = noted || n.find("Keras backs off 3 times, to 2^12, then trains") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace halfmap::diagnose
