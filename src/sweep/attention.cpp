// Attention of one head, not causal by default (an encoder's, where every score counts): O = softmax(QKᵀ/√d)·V
// forward, with Q and K scaled together by s (the activations they are projected from grow with s) and V unscaled,
// and the backward of the same kernel from the upstream gradient dO = S G / (len d) stored in the storage type:
// dQ, dK and dV. The head dimension d is the experiment's (Experiment::head_dim: 64 and 128 by default).
//
// The scores overflowing is the forward's first boundary: the kernel reports S as stored (AttentionArgs::scores),
// and a non-finite score counts as a non-finite forward value named "scores", even where the mask or a -inf left
// O finite. The oracles are f64, with the exact 1/√d.
#include <algorithm>
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Attention final : public Family {
 public:
  explicit Attention(const Setup& s)
      : k_(s.e.fwd),
        L_(s.o.sizes.attn_len),
        d_(s.e.head_dim),
        causal_(s.o.attn_causal),
        c_(1.0 / std::sqrt(double(d_))) {
    const DType t = s.storage();
    const std::size_t ld = L_ * d_;
    s.add_input(*this, "q", 0, ld, true);
    s.add_input(*this, "k", 1, ld, true);
    s.add_input(*this, "v", 2, ld, false);
    out.resize(t, ld);
    scores_.resize(t, L_ * L_);
    g_ = s.base(3, ld);
    dout_.resize(t, ld);
    dout_.name = "dout";
    grads.resize(3);
    const char* names[] = {"dq", "dk", "dv"};
    for (std::size_t i = 0; i < 3; ++i) {
      grads[i].name = names[i];
      grads[i].resize(t, ld);
    }
    p_.resize(L_ * L_);
  }

  void forward() override {
    k_.attention(AttentionArgs{L_, d_, causal_, inputs[0].tensor.data(), inputs[1].tensor.data(),
                               inputs[2].tensor.data(), out.data(), scores_.data(), nullptr, nullptr, nullptr, nullptr,
                               1});
    out.reload();
    scores_.reload();
    const double *q = in(0), *k = in(1), *v = in(2);
    cond.assign(L_ * d_, 0.0);
    std::vector<double> srow(L_);
    for (std::size_t i = 0; i < L_; ++i) {
      const std::size_t valid = causal_ ? i + 1 : L_;
      double m = -INFINITY;
      for (std::size_t j = 0; j < valid; ++j) {
        double acc = 0;
        for (std::size_t p = 0; p < d_; ++p) acc += q[i * d_ + p] * k[j * d_ + p];
        srow[j] = acc * c_;
        m = std::max(m, srow[j]);
      }
      double sum = 0;
      for (std::size_t j = 0; j < valid; ++j) sum += std::exp(srow[j] - m);
      for (std::size_t j = 0; j < L_; ++j) p_[i * L_ + j] = j < valid ? std::exp(srow[j] - m) / sum : 0.0;
      for (std::size_t p = 0; p < d_; ++p) {
        double o = 0, mag = 0;
        for (std::size_t j = 0; j < valid; ++j) {
          o += p_[i * L_ + j] * v[j * d_ + p];
          mag += p_[i * L_ + j] * std::fabs(v[j * d_ + p]);
        }
        oracle[i * d_ + p] = o;
        cond[i * d_ + p] = mag;
      }
    }
  }

  std::size_t hidden_nonfinite(HiddenFirst& first) const override {
    std::size_t count = 0;
    for (std::size_t i = 0; i < L_ * L_; ++i) {
      if (std::isfinite(scores_.val[i])) continue;
      if (count++ == 0) first = {"scores", i, scores_.val[i]};
    }
    return count;
  }

  void unit_oracle() override {
    const double ld = double(L_) * double(d_);
    const double *q = in(0), *k = in(1), *v = in(2);
    auto& dq = unit[0];
    auto& dk = unit[1];
    auto& dv = unit[2];
    std::fill(dq.begin(), dq.end(), 0.0);
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    std::vector<double> dp(L_);
    for (std::size_t i = 0; i < L_; ++i) {
      const double* go = g_.data() + i * d_;
      double delta = 0;
      for (std::size_t j = 0; j < L_; ++j) {
        double acc = 0;
        for (std::size_t p = 0; p < d_; ++p) acc += go[p] / ld * v[j * d_ + p];
        dp[j] = acc;
        delta += p_[i * L_ + j] * acc;
        for (std::size_t p = 0; p < d_; ++p) dv[j * d_ + p] += p_[i * L_ + j] * go[p] / ld;
      }
      for (std::size_t j = 0; j < L_; ++j) {
        const double ds = p_[i * L_ + j] * (dp[j] - delta) * c_;  // the gradient of the unscaled product
        if (ds == 0) continue;
        for (std::size_t p = 0; p < d_; ++p) {
          dq[i * d_ + p] += ds * k[j * d_ + p];
          dk[j * d_ + p] += ds * q[i * d_ + p];
        }
      }
    }
  }

  void gradient(double S) override {
    const double ld = double(L_) * double(d_);
    for (std::size_t i = 0; i < L_ * d_; ++i) dout_.val[i] = dout_.set(i, S * g_[i] / ld);
    k_.attention(AttentionArgs{L_, d_, causal_, inputs[0].tensor.data(), inputs[1].tensor.data(),
                               inputs[2].tensor.data(), nullptr, nullptr, dout_.data(), grads[0].data(),
                               grads[1].data(), grads[2].data(), 1});
  }

  std::string_view out_name() const override { return "o"; }
  const Tensor* upstream() const override { return &dout_; }
  bool terms_flushed() const override { return false; }  // O averages V, which is not scaled

 private:
  const Kernel& k_;
  std::size_t L_, d_;
  bool causal_;
  double c_;
  Tensor scores_, dout_;
  std::vector<double> g_;  // the exact upstream gradient at S = len d (dO = S g / (len d))
  std::vector<double> p_;  // the oracle's probabilities, for the gradient oracle
};

}  // namespace

std::unique_ptr<Family> make_attention(const Setup& s) { return std::make_unique<Attention>(s); }

}  // namespace halfmap::sweep
