// The dense layer: Y = X W (+ b = 0) forward, and the dense_bwd kernel of the same mode and ISA for dX, dW, db
// from the upstream gradient dY = S G / (M N) stored in the storage type. X is scaled by s; W is the base draw
// divided by sqrt(K), unscaled. The amplifying layer (Experiment::amplifying; forward only) is the layer whose output
// leaves the inputs' range first: X is the base draw through ReLU (non-negative, post-activation), W the base draw
// unscaled, so that Y is about sqrt(K/2) times X's scale (docs/sweep.md, "Experiments").
#include <algorithm>
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Dense final : public Family {
 public:
  explicit Dense(const Setup& s)
      : e_(s.e),
        m_(s.e.amplifying ? s.o.sizes.amp_m : s.o.sizes.dense_m),
        k_(s.e.amplifying ? s.o.sizes.amp_k : s.o.sizes.dense_k),
        n_(s.e.amplifying ? s.o.sizes.amp_n : s.o.sizes.dense_n) {
    const DType t = s.storage();
    s.add_input(*this, "X", 0, m_ * k_, true);
    s.add_input(*this, "W", 1, k_ * n_, false);
    if (s.e.amplifying) {
      for (double& x : inputs[0].base) x = std::max(x, 0.0);
    } else {
      const double root = std::sqrt(double(k_));
      for (double& w : inputs[1].base) w = w / root;
    }
    bias_.resize(t, n_);
    out.resize(t, m_ * n_);
    oracle.resize(m_ * n_);
    if (s.e.amplifying) return;  // forward only
    g_ = s.base(2, m_ * n_);
    dy_.resize(t, m_ * n_);
    dy_.name = "dY";
    grads.resize(3);
    grads[0].name = "dX";
    grads[0].resize(t, m_ * k_);
    grads[1].name = "dW";
    grads[1].resize(t, k_ * n_);
    grads[2].name = "db";
    grads[2].resize(t, n_);
  }

  void forward() override {
    DenseArgs a{m_, n_, k_, inputs[0].tensor.data(), inputs[1].tensor.data(), bias_.data(), out.data(), Act::identity};
    e_.fwd.dense(a);
    out.reload();
    const double* x = in(0);
    const double* w = in(1);
    cond.resize(m_ * n_);
    for (std::size_t i = 0; i < m_; ++i) {
      double* row = &oracle[i * n_];
      double* crow = &cond[i * n_];
      std::fill(row, row + n_, 0.0);
      std::fill(crow, crow + n_, 0.0);
      for (std::size_t p = 0; p < k_; ++p) {
        const double xv = x[i * k_ + p];
        for (std::size_t j = 0; j < n_; ++j) {
          row[j] += xv * w[p * n_ + j];
          crow[j] += std::fabs(xv * w[p * n_ + j]);
        }
      }
    }
  }

  /// Y(i, j)'s terms are X(i, p) W(p, j) (the bias is zero): a term is left when both factors survived storage,
  /// and one exists for some (i, j) exactly when some p has a surviving X in column p and a surviving W in row p.
  bool terms_flushed() const override {
    const Tensor &x = inputs[0].tensor, &w = inputs[1].tensor;
    for (std::size_t p = 0; p < k_; ++p) {
      bool x_left = false, w_left = false;
      for (std::size_t i = 0; i < m_ && !x_left; ++i) x_left = x.val[i * k_ + p] != 0;
      for (std::size_t j = 0; j < n_ && !w_left; ++j) w_left = w.val[p * n_ + j] != 0;
      if (x_left && w_left) return false;
    }
    return true;
  }

  int homogeneity() const override { return 1; }  // X is scaled, W and the zero bias are not

  double given_max_at_unit_scale() const override {
    const std::vector<double>&x = inputs[0].base, &w = inputs[1].base;
    double most = 0;
    std::vector<double> row(n_);
    for (std::size_t i = 0; i < m_; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (std::size_t p = 0; p < k_; ++p) {
        for (std::size_t j = 0; j < n_; ++j) row[j] += x[i * k_ + p] * w[p * n_ + j];
      }
      for (double v : row) most = std::max(most, std::fabs(v));
    }
    return most;
  }

  void unit_oracle() override {
    const double mn = double(m_) * double(n_);
    std::vector<double> g1(m_ * n_);
    for (std::size_t i = 0; i < m_ * n_; ++i) g1[i] = g_[i] / mn;
    const double* x = in(0);
    const double* w = in(1);
    auto& dx = unit[0];
    auto& dw = unit[1];
    auto& db = unit[2];
    std::fill(dx.begin(), dx.end(), 0.0);
    std::fill(dw.begin(), dw.end(), 0.0);
    std::fill(db.begin(), db.end(), 0.0);
    for (std::size_t i = 0; i < m_; ++i) {
      for (std::size_t p = 0; p < k_; ++p) {
        double acc = 0;
        for (std::size_t j = 0; j < n_; ++j) acc += g1[i * n_ + j] * w[p * n_ + j];
        dx[i * k_ + p] = acc;
      }
    }
    for (std::size_t i = 0; i < m_; ++i) {
      for (std::size_t p = 0; p < k_; ++p) {
        const double xv = x[i * k_ + p];
        for (std::size_t j = 0; j < n_; ++j) dw[p * n_ + j] += xv * g1[i * n_ + j];
      }
      for (std::size_t j = 0; j < n_; ++j) db[j] += g1[i * n_ + j];
    }
  }

  void gradient(double S) override {
    const double mn = double(m_) * double(n_);
    for (std::size_t i = 0; i < m_ * n_; ++i) dy_.val[i] = dy_.set(i, S * g_[i] / mn);
    DenseBwdArgs a{m_,
                   n_,
                   k_,
                   inputs[0].tensor.data(),
                   inputs[1].tensor.data(),
                   dy_.data(),
                   grads[0].data(),
                   grads[1].data(),
                   grads[2].data()};
    e_.bwd->dense_bwd(a);
  }

  std::string_view out_name() const override { return "Y"; }
  const Tensor* upstream() const override { return &dy_; }

 private:
  const Experiment& e_;
  std::size_t m_, k_, n_;
  Tensor bias_, dy_;
  std::vector<double> g_;  // the exact upstream gradient at S = M N (dY = S g / (M N))
};

}  // namespace

std::unique_ptr<Family> make_dense(const Setup& s) { return std::make_unique<Dense>(s); }

}  // namespace halfmap::sweep
