// GELU, elementwise: y = GELU(x) forward (x scaled by s), and the backward of the same kernel from the upstream
// gradient dy = S G / n stored in the storage type: dx = dy·GELU'(x). The oracles are f64 (std::erf, std::tanh,
// std::exp) on the stored x.
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Gelu final : public Family {
 public:
  explicit Gelu(const Setup& s) : k_(s.e.fwd), tanh_(s.e.fwd.op == Op::gelu_tanh), n_(s.o.sizes.n) {
    const DType t = s.storage();
    s.add_input(*this, "x", 0, n_, true);
    out.resize(t, n_);
    g_ = s.base(1, n_);
    dy_.resize(t, n_);
    dy_.name = "dy";
    grads.resize(1);
    grads[0].name = "dx";
    grads[0].resize(t, n_);
  }

  void forward() override {
    k_.gelu(GeluArgs{n_, inputs[0].tensor.data(), out.data(), nullptr, nullptr});
    out.reload();
    for (std::size_t i = 0; i < n_; ++i) oracle[i] = 0.5 * in(0)[i] * (1.0 + shape(in(0)[i]));
  }

  void unit_oracle() override {
    for (std::size_t i = 0; i < n_; ++i) unit[0][i] = g_[i] / double(n_) * derivative(in(0)[i]);
  }

  void gradient(double S) override {
    for (std::size_t i = 0; i < n_; ++i) dy_.val[i] = dy_.set(i, S * g_[i] / double(n_));
    k_.gelu(GeluArgs{n_, inputs[0].tensor.data(), nullptr, dy_.data(), grads[0].data()});
  }

  std::string_view out_name() const override { return "y"; }
  const Tensor* upstream() const override { return &dy_; }

 private:
  static constexpr double kK0 = 0.79788456080286536, kC = 0.044715;
  /// erf(x/√2) or tanh(√(2/π)(x + c x³)): GELU(x) = x/2 (1 + shape).
  double shape(double x) const { return tanh_ ? std::tanh(kK0 * (x + kC * x * x * x)) : std::erf(x / std::sqrt(2.0)); }
  double derivative(double x) const {
    if (tanh_) {
      const double t = shape(x);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kK0 * (1 + 3 * kC * x * x);
    }
    return 0.5 * (1 + shape(x)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  }

  const Kernel& k_;
  bool tanh_;
  std::size_t n_;
  Tensor dy_;
  std::vector<double> g_;  // the exact upstream gradient at S = n (dy = S g / n)
};

}  // namespace

std::unique_ptr<Family> make_gelu(const Setup& s) { return std::make_unique<Gelu>(s); }

}  // namespace halfmap::sweep
