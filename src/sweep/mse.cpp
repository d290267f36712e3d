// The squared loss: mean((p - y)^2) forward, and its gradient dp = S 2 (p - y) / n from the same kernel.
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Mse final : public Family {
 public:
  explicit Mse(const Setup& s) : k_(s.e.fwd), n_(s.o.sizes.n) {
    s.add_input(*this, "p", 0, n_, true);
    s.add_input(*this, "y", 1, n_, true);
    out.resize(s.storage(), 1);
    grads.resize(1);
    grads[0].name = "dp";
    grads[0].resize(s.storage(), n_);
  }

  void forward() override {
    LossArgs a{n_, inputs[0].tensor.data(), inputs[1].tensor.data(), 1.0f, nullptr};
    out.val[0] = k_.loss(a);
    double o = 0, c = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      const double d = in(0)[i] - in(1)[i], m = std::fabs(in(0)[i]) + std::fabs(in(1)[i]);
      o += d * d;
      c += m * m;  // the difference cancels from |p| + |y|
    }
    oracle[0] = o / double(n_);
    cond.assign(1, c / double(n_));
  }

  int homogeneity() const override { return 2; }

  double given_max_at_unit_scale() const override {
    double o = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      const double d = inputs[0].base[i] - inputs[1].base[i];
      o += d * d;
    }
    return o / double(n_);
  }

  void unit_oracle() override {
    for (std::size_t i = 0; i < n_; ++i) unit[0][i] = 2.0 * (in(0)[i] - in(1)[i]) / double(n_);
  }

  void gradient(double S) override {
    // The loss scale is an f32 argument; grid scales 2^k are exact in f32.
    LossArgs a{n_, inputs[0].tensor.data(), inputs[1].tensor.data(), float(S), grads[0].data()};
    k_.loss(a);
  }

  std::string_view out_name() const override { return "loss"; }
  std::string_view out_stage() const override { return "loss"; }
  bool scalar_out() const override { return true; }

 private:
  const Kernel& k_;
  std::size_t n_;
};

}  // namespace

std::unique_ptr<Family> make_mse(const Setup& s) { return std::make_unique<Mse>(s); }

}  // namespace halfmap::sweep
