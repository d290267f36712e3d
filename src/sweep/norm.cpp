// Layer and RMS normalisation of rows: y = x̂ γ + β forward (x scaled by s; γ = 1 + 0.1 z and β = 0.1 z', unscaled,
// as trained gains and biases sit near their initialisation), and the backward of the same kernel from the
// upstream gradient dy = S G / (rows cols) stored in the storage type: dx, dγ and (layernorm) dβ.
//
// The statistics overflowing is the forward's first boundary here, before any y: an fp16 v = Σ d²/n that is inf
// gives r = 1/√inf = 0 and a finite, wrong y = β. The kernel reports its μ and v (NormArgs::mean, var), and a
// non-finite one counts as a non-finite forward value named "var" (or "mean").
#include <algorithm>
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Norm final : public Family {
 public:
  explicit Norm(const Setup& s)
      : k_(s.e.fwd),
        rms_(s.e.fwd.op == Op::rmsnorm),
        rows_(s.o.sizes.norm_rows),
        cols_(s.o.sizes.norm_cols),
        eps_(rms_ ? s.o.rmsnorm_eps : s.o.layernorm_eps) {
    const DType t = s.storage();
    s.add_input(*this, "x", 0, rows_ * cols_, true);
    s.add_input(*this, "gamma", 1, cols_, false);
    for (double& g : inputs[1].base) g = 1.0 + 0.1 * g;
    if (!rms_) {
      s.add_input(*this, "beta", 2, cols_, false);
      for (double& b : inputs[2].base) b = 0.1 * b;
    }
    out.resize(t, rows_ * cols_);
    mean_.resize(rows_);
    var_.resize(rows_);
    g_ = s.base(3, rows_ * cols_);
    dy_.resize(t, rows_ * cols_);
    dy_.name = "dy";
    grads.resize(rms_ ? 2 : 3);
    grads[0].name = "dx";
    grads[0].resize(t, rows_ * cols_);
    grads[1].name = "dgamma";
    grads[1].resize(t, cols_);
    if (!rms_) {
      grads[2].name = "dbeta";
      grads[2].resize(t, cols_);
    }
    xh_.resize(rows_ * cols_);
    r_.resize(rows_);
  }

  void forward() override {
    NormArgs a{rows_,
               cols_,
               inputs[0].tensor.data(),
               inputs[1].tensor.data(),
               beta_data(),
               eps_,
               out.data(),
               mean_.data(),
               var_.data(),
               nullptr,
               nullptr,
               nullptr,
               nullptr};
    k_.norm(a);
    out.reload();
    const double* x = in(0);
    const double* g = in(1);
    cond.resize(rows_ * cols_);
    for (std::size_t i = 0; i < rows_; ++i) {
      const double* xi = x + i * cols_;
      double mu = 0, v = 0;
      if (!rms_) {
        for (std::size_t j = 0; j < cols_; ++j) mu += xi[j];
        mu /= double(cols_);
      }
      for (std::size_t j = 0; j < cols_; ++j) v += (xi[j] - mu) * (xi[j] - mu);
      v /= double(cols_);
      const double r = 1.0 / std::sqrt(v + double(eps_));
      r_[i] = r;
      for (std::size_t j = 0; j < cols_; ++j) {
        const double b = rms_ ? 0.0 : in(2)[j];
        xh_[i * cols_ + j] = (xi[j] - mu) * r;
        oracle[i * cols_ + j] = xh_[i * cols_ + j] * g[j] + b;
        // x_j - μ cancels: its terms' magnitudes, normalised, times |γ|, plus |β|
        cond[i * cols_ + j] = (std::fabs(xi[j]) + std::fabs(mu)) * r * std::fabs(g[j]) + std::fabs(b);
      }
    }
  }

  std::size_t hidden_nonfinite(HiddenFirst& first) const override {
    std::size_t count = 0;
    for (std::size_t i = 0; i < rows_; ++i) {
      for (const auto& [name, stat] : {std::pair{"mean", &mean_}, std::pair{"var", &var_}}) {
        if (std::isfinite((*stat)[i])) continue;
        if (count++ == 0) first = {name, i, double((*stat)[i])};
      }
    }
    return count;
  }

  void unit_oracle() override {
    const double rc = double(rows_) * double(cols_);
    const double* g = in(1);
    auto& dx = unit[0];
    auto& dg = unit[1];
    std::fill(dg.begin(), dg.end(), 0.0);
    if (!rms_) std::fill(unit[2].begin(), unit[2].end(), 0.0);
    for (std::size_t i = 0; i < rows_; ++i) {
      double a = 0, b = 0;
      for (std::size_t j = 0; j < cols_; ++j) {
        const double dyv = g_[i * cols_ + j] / rc, gv = dyv * g[j], xh = xh_[i * cols_ + j];
        a += gv;
        b += gv * xh;
        dg[j] += dyv * xh;
        if (!rms_) unit[2][j] += dyv;
      }
      a = rms_ ? 0.0 : a / double(cols_);
      b /= double(cols_);
      for (std::size_t j = 0; j < cols_; ++j) {
        const double gv = g_[i * cols_ + j] / rc * g[j];
        dx[i * cols_ + j] = r_[i] * (gv - a - xh_[i * cols_ + j] * b);
      }
    }
  }

  void gradient(double S) override {
    const double rc = double(rows_) * double(cols_);
    for (std::size_t i = 0; i < rows_ * cols_; ++i) dy_.val[i] = dy_.set(i, S * g_[i] / rc);
    NormArgs a{rows_,
               cols_,
               inputs[0].tensor.data(),
               inputs[1].tensor.data(),
               beta_data(),
               eps_,
               nullptr,
               nullptr,
               nullptr,
               dy_.data(),
               grads[0].data(),
               grads[1].data(),
               rms_ ? nullptr : grads[2].data()};
    k_.norm(a);
  }

  std::string_view out_name() const override { return "y"; }
  const Tensor* upstream() const override { return &dy_; }
  bool terms_flushed() const override { return false; }  // y = β + γ x̂ is never left with nothing

 private:
  const void* beta_data() const { return rms_ ? nullptr : inputs[2].tensor.data(); }

  const Kernel& k_;
  bool rms_;
  std::size_t rows_, cols_;
  float eps_;
  std::vector<float> mean_, var_;
  Tensor dy_;
  std::vector<double> g_;       // the exact upstream gradient at S = rows cols (dy = S g / (rows cols))
  std::vector<double> xh_, r_;  // the oracle's x̂ and r, for the gradient oracle
};

}  // namespace

std::unique_ptr<Family> make_norm(const Setup& s) { return std::make_unique<Norm>(s); }

}  // namespace halfmap::sweep
