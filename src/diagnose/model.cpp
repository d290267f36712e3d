// The seed model's paths, weights and runner (src/diagnose/model.hpp).
#include "diagnose/model.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "halfmap/detmath.hpp"

namespace halfmap::diagnose {

namespace {

const Kernel* find(Op op, Mode mode, Isa isa) {
  for (const Kernel& k : kernels()) {
    if (k.op == op && k.mode == mode && k.isa == isa && kernel_enabled(k)) return &k;
  }
  return nullptr;
}

std::optional<Path> make_path(Mode mode, Isa isa) {
  Path p;
  p.fwd = find(Op::dense_fwd, mode, isa);
  p.bwd = find(Op::dense_bwd, mode, isa);
  p.loss = find(Op::mse, mode, isa);
  if (p.fwd == nullptr || p.bwd == nullptr || p.loss == nullptr) return std::nullopt;
  p.info.name = fmt::format("{}/{}", mode_name(mode), isa_name(isa));
  p.info.mode = mode;
  p.info.isa = isa;
  p.info.storage = p.fwd->storage;
  return p;
}

}  // namespace

Path baseline_path() {
  std::optional<Path> best;
  for (Isa isa : kAllIsas) {
    if (auto p = make_path(Mode::f32, isa)) best = p;  // kAllIsas lists each chain from the lowest ISA up
  }
  if (!best) throw std::runtime_error("no enabled f32 dense_fwd, dense_bwd and mse kernels");
  return *best;
}

std::vector<Path> low_precision_paths() {
  std::vector<Path> out;
  for (Mode mode : {Mode::f16_f32acc, Mode::f16, Mode::bf16_f32acc}) {
    for (Isa isa : kAllIsas) {
      if (auto p = make_path(mode, isa)) out.push_back(*p);
    }
  }
  // Keras mixed_float16 stores fp16 and accumulates in f32: the f16_f32acc path on the best ISA.
  Path* keras = nullptr;
  for (Path& p : out) {
    if (p.info.mode == Mode::f16_f32acc) keras = &p;
  }
  if (keras != nullptr) keras->info.keras_like = true;
  return out;
}

Weights init_weights(std::size_t d, std::size_t h, std::uint64_t seed) {
  Weights w;
  w.d = d;
  w.h = h;
  auto glorot = [seed](std::vector<float>& v, std::size_t fan_in, std::size_t fan_out, std::string_view role) {
    det::Xoshiro256ss rng(seed, det::name_key("diagnose"), det::name_key(role), 0);
    const double a = std::sqrt(6.0 / double(fan_in + fan_out));
    v.resize(fan_in * fan_out);
    for (float& x : v) x = float(a * rng.symmetric());
  };
  glorot(w.w1, d, h, "W1");
  glorot(w.w2, h, 1, "W2");
  w.b1.assign(h, 0.0f);
  w.b2.assign(1, 0.0f);
  return w;
}

Runner::Runner(const Path& p, const std::vector<double>& x, const std::vector<double>& y, std::size_t rows,
               std::size_t d, std::size_t h)
    : p_(p), rows_(rows), d_(d), h_(h) {
  const DType t = p.info.storage;
  x_.resize(t, rows * d);
  for (std::size_t i = 0; i < rows * d; ++i) x_.set(i, x[i]);
  y_.resize(t, rows);
  for (std::size_t i = 0; i < rows; ++i) y_.set(i, y[i]);
  w1_.resize(t, d * h);
  b1_.resize(t, h);
  w2_.resize(t, h);
  b2_.resize(t, 1);
  hid_.resize(t, rows * h);
  pred_.resize(t, rows);
  dpred_.resize(t, rows);
  dhid_.resize(t, rows * h);
  dw1_.resize(t, d * h);
  db1_.resize(t, h);
  dw2_.resize(t, h);
  db2_.resize(t, 1);
}

void Runner::set_weights(const Weights& w) {
  // The f32 master weights are rounded once to the storage type, as a mixed-precision framework casts them.
  for (std::size_t i = 0; i < w.w1.size(); ++i) w1_.set(i, w.w1[i]);
  for (std::size_t i = 0; i < w.b1.size(); ++i) b1_.set(i, w.b1[i]);
  for (std::size_t i = 0; i < w.w2.size(); ++i) w2_.set(i, w.w2[i]);
  b2_.set(0, w.b2[0]);
}

float Runner::run_forward(std::size_t row0, std::size_t m, std::optional<double> S) {
  p_.fwd->dense(DenseArgs{m, h_, d_, x_.at(row0 * d_), w1_.data(), b1_.data(), hid_.data(), Act::relu});
  p_.fwd->dense(DenseArgs{m, 1, h_, hid_.data(), w2_.data(), b2_.data(), pred_.data(), Act::identity});
  // Loss scales are powers of two (or halvings of them): exact in f32.
  return p_.loss->loss(LossArgs{m, pred_.data(), y_.at(row0), S ? float(*S) : 1.0f, S ? dpred_.data() : nullptr});
}

ForwardReport Runner::forward(std::size_t row0, std::size_t m) {
  ForwardReport r;
  r.path = p_.info;
  r.loss = run_forward(row0, m, std::nullopt);
  for (std::size_t i = 0; i < m * h_; ++i) {
    const double v = hid_.get(i);
    if (!std::isfinite(v)) {
      r.first_nonfinite = NonFinite{"dense_1", row0 + i / h_, i % h_, v};
      return r;
    }
  }
  for (std::size_t i = 0; i < m; ++i) {
    const double v = pred_.get(i);
    if (!std::isfinite(v)) {
      r.first_nonfinite = NonFinite{"dense_2", row0 + i, 0, v};
      return r;
    }
  }
  if (!std::isfinite(r.loss)) {
    // The loss is one number: point at the first row whose squared error cannot be stored, the usual culprit;
    // failing that, at the row where the running sum of squared errors passes the largest finite value (a path
    // that accumulates in the storage type overflows there even though every term fits).
    const double limit = max_finite(p_.info.storage);
    std::optional<std::size_t> single, running;
    double sum = 0;
    for (std::size_t i = 0; i < m && !single; ++i) {
      const double e = pred_.get(i) - y_.get(row0 + i);
      if (e * e > limit) single = row0 + i;
      sum += e * e;
      if (!running && sum > limit) running = row0 + i;
    }
    NonFinite n{"loss", single.value_or(running.value_or(row0)), 0, r.loss};
    n.accumulated = !single.has_value();
    r.first_nonfinite = n;
  }
  return r;
}

Gradients Runner::gradients(std::size_t row0, std::size_t m, double S) {
  run_forward(row0, m, S);
  p_.bwd->dense_bwd(DenseBwdArgs{m, 1, h_, hid_.data(), w2_.data(), dpred_.data(), dhid_.data(), dw2_.data(),
                                 db2_.data()});
  // ReLU's derivative: zero where the stored activation is zero (the kernels' relu maps x < 0 to +0); a NaN
  // activation keeps its gradient, so a non-finite value is never hidden.
  for (std::size_t i = 0; i < m * h_; ++i) {
    if (hid_.get(i) == 0.0) dhid_.set(i, 0.0);
  }
  p_.bwd->dense_bwd(DenseBwdArgs{m, h_, d_, x_.at(row0 * d_), w1_.data(), dhid_.data(), nullptr, dw1_.data(),
                                 db1_.data()});
  Gradients g;
  g.values.reserve(dw1_.size() + db1_.size() + dw2_.size() + db2_.size());
  for (const TypedBuffer* b : {&dw1_, &db1_, &dw2_, &db2_}) {
    for (std::size_t i = 0; i < b->size(); ++i) {
      const double v = b->get(i);
      if (!std::isfinite(v)) ++g.nonfinite;
      g.values.push_back(v);
    }
  }
  return g;
}

}  // namespace halfmap::diagnose
