// Softmax cross-entropy: the mean loss over rows of logits with one label each, and its gradient
// dlogits = S (softmax - onehot) / rows from the same kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "halfmap/detmath.hpp"
#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Xent final : public Family {
 public:
  explicit Xent(const Setup& s) : k_(s.e.fwd), rows_(s.o.sizes.xent_rows), cols_(s.o.sizes.xent_cols) {
    s.add_input(*this, "logits", 0, rows_ * cols_, true);
    det::Xoshiro256ss rng(s.o.seed, det::name_key("xent"), det::name_key(dist_name(s.d)), 1);
    labels_.resize(rows_);
    for (auto& l : labels_) l = std::int32_t(rng.below(std::uint32_t(cols_)));
    out.resize(s.storage(), 1);
    grads.resize(1);
    grads[0].name = "dlogits";
    grads[0].resize(s.storage(), rows_ * cols_);
  }

  void forward() override {
    XentArgs a{rows_, cols_, inputs[0].tensor.data(), labels_.data(), 1.0f, nullptr, nullptr};
    out.val[0] = k_.xent(a);
    double loss = 0, c = 0;
    const double* x = in(0);
    for (std::size_t r = 0; r < rows_; ++r) {
      double mx = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < cols_; ++j) mx = std::max(mx, x[r * cols_ + j]);
      double sum = 0;
      for (std::size_t j = 0; j < cols_; ++j) sum += det::exp(x[r * cols_ + j] - mx);
      const double lse = mx + det::log(sum), label = x[r * cols_ + std::size_t(labels_[r])];
      loss += lse - label;
      c += std::fabs(lse) + std::fabs(label);  // a confident right answer cancels lse against the label's logit
    }
    oracle[0] = loss / double(rows_);
    cond.assign(1, c / double(rows_));
  }

  bool terms_flushed() const override { return false; }  // zero logits have a loss of log(cols)
  void unit_oracle() override {
    softmax_oracle(in(0), rows_, cols_, unit[0].data());
    for (std::size_t r = 0; r < rows_; ++r) {
      for (std::size_t j = 0; j < cols_; ++j) {
        double& v = unit[0][r * cols_ + j];
        v = (v - (std::size_t(labels_[r]) == j ? 1.0 : 0.0)) / double(rows_);
      }
    }
  }

  void gradient(double S) override {
    XentArgs a{rows_, cols_, inputs[0].tensor.data(), labels_.data(), float(S), nullptr, grads[0].data()};
    k_.xent(a);
  }

  std::string_view out_name() const override { return "loss"; }
  std::string_view out_stage() const override { return "loss"; }
  bool scalar_out() const override { return true; }

 private:
  const Kernel& k_;
  std::size_t rows_, cols_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

std::unique_ptr<Family> make_xent(const Setup& s) { return std::make_unique<Xent>(s); }

}  // namespace halfmap::sweep
