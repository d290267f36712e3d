// `halfmap diagnose --model --train STEPS` (include/halfmap/diagnose_model.hpp, "Training"): the network trained on
// from the file's weights with each framework's dynamic loss scaling, on every low-precision path.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "diagnose/internal.hpp"
#include "diagnose/net_runner.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::diagnose {

namespace {

/// Every layer's parameter gradients of the runner's last backward, in layer order; their non-finite count.
std::vector<double> all_param_grads(const NetRunner& run, std::size_t layers, std::size_t& nonfinite) {
  std::vector<double> g;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::vector<double> p = run.param_grads(l, nonfinite);
    g.insert(g.end(), p.begin(), p.end());
  }
  return g;
}

struct Batches {
  std::size_t rows, per, count;
  std::size_t first(std::size_t b) const { return b * per; }
  std::size_t size(std::size_t b) const { return std::min(per, rows - b * per); }
};

/// One simulation on `path`; the final weights are left in `w` (a copy of the file's at the start).
Simulation simulate(const onnx::Network& net, const Table& x, const Table* y, Loss loss, const NetPath& path,
                    const NetPath& base, const Batches& batches, const Options& o, std::string framework,
                    double initial, onnx::Network& w) {
  Simulation sim;
  sim.framework = std::move(framework);
  sim.growth_interval = o.growth_interval.value_or(loss_scale::kGrowthInterval);
  sim.steps = *o.steps;
  NetRunner run(net, path, loss, batches.per, batches.per, 1), ref(net, base, loss, batches.per, batches.per, 1);
  w = net;
  const float lr = float(o.lr);
  DynamicScaler scaler(sim, initial);
  for (std::size_t step = 1; step <= sim.steps; ++step) {
    scaler.step(step);
    const double scale = scaler.scale();
    const std::size_t b = (step - 1) % batches.count, m = batches.size(b);
    run.set_params(w);
    run.load(x, y, batches.first(b), m);
    run.forward();
    run.backward(0, m, float(scale));
    std::size_t nf = 0;
    const std::vector<double> g = all_param_grads(run, net.layers.size(), nf);
    if (nf > 0) {  // skip the step and back off, as both frameworks do
      scaler.skip();
      continue;
    }
    ref.set_params(w);
    ref.load(x, y, batches.first(b), m);
    ref.forward();
    ref.backward(0, m, 1.0f);
    std::size_t ref_nf = 0;
    const std::vector<double> r = all_param_grads(ref, net.layers.size(), ref_nf);
    sim.good_steps.add(compare_grads(g, nf, r, scale, path.info.storage));
    // Unscale (exact: the scale is a power of two) and round to f32, then plain SGD on the f32 master weights,
    // in param_grads' order: weight, then bias.
    std::size_t i = 0;
    for (std::size_t l = 0; l < w.layers.size() && l <= run.last_backward_layer(); ++l)
      for (std::vector<float>* p : {&w.layers[l].weight.values, &w.layers[l].bias.values})
        for (float& v : *p) v -= lr * float(g[i++] / scale);
    scaler.good();
  }
  scaler.finish(o.underflow_share);
  return sim;
}

}  // namespace

void simulate_model(const onnx::Network& net, const Table& x, const Table* y, Loss loss, const NetPath& base,
                    const std::vector<NetPath>& low, std::size_t batch_rows, const Options& o, ModelReport& r) {
  const Batches batches{x.rows(), batch_rows, (x.rows() + batch_rows - 1) / batch_rows};
  const double initial[2] = {loss_scale::kKerasInitial, loss_scale::kPytorchInitial};
  std::vector<Simulation> sims(low.size() * 2);
  std::vector<onnx::Network> final_weights(sims.size());
  std::atomic<std::size_t> done{0};
  parallel_for(sims.size(), o.threads, [&](std::size_t i) {
    sims[i] = simulate(net, x, y, loss, low[i / 2], base, batches, o, i % 2 == 0 ? "keras" : "pytorch", initial[i % 2],
                       final_weights[i]);
    progress(o, "loss-scaling simulations", done.fetch_add(1) + 1, sims.size());
  });
  // The final weights' loss on the f32 baseline path: the mean of the batch losses, every batch.
  parallel_for(sims.size(), o.threads, [&](std::size_t i) {
    NetRunner eval(net, base, loss, batches.per, batches.per, 1);
    eval.set_params(final_weights[i]);
    double sum = 0;
    for (std::size_t b = 0; b < batches.count; ++b) {
      eval.load(x, y, batches.first(b), batches.size(b));
      eval.forward();
      sum += eval.loss(0, batches.size(b));
    }
    sims[i].final_loss = sum / double(batches.count);
  });
  for (std::size_t i = 0; i < sims.size(); ++i) r.paths[i / 2].simulations.push_back(std::move(sims[i]));
}

}  // namespace halfmap::diagnose
