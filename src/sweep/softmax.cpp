// Softmax, stable and naive, row by row; both against the stable softmax in f64.
#include <algorithm>
#include <limits>

#include "halfmap/detmath.hpp"
#include "sweep/experiment.hpp"

namespace halfmap::sweep {

void softmax_oracle(const double* x, std::size_t rows, std::size_t cols, double* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < cols; ++j) mx = std::max(mx, xr[j]);
    double sum = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      y[r * cols + j] = det::exp(xr[j] - mx);
      sum += y[r * cols + j];
    }
    for (std::size_t j = 0; j < cols; ++j) y[r * cols + j] /= sum;
  }
}

namespace {

class Softmax final : public Family {
 public:
  explicit Softmax(const Setup& s) : k_(s.e.fwd), rows_(s.o.sizes.softmax_rows), cols_(s.o.sizes.softmax_cols) {
    s.add_input(*this, "x", 0, rows_ * cols_, true);
    out.resize(s.storage(), rows_ * cols_);
  }

  void forward() override {
    SoftmaxArgs a{rows_, cols_, inputs[0].tensor.data(), out.data()};
    k_.softmax(a);
    out.reload();
    softmax_oracle(in(0), rows_, cols_, oracle.data());
  }

  std::string_view out_name() const override { return "y"; }
  bool terms_flushed() const override { return false; }  // a row of zeros has a softmax of 1/cols

 private:
  const Kernel& k_;
  std::size_t rows_, cols_;
};

}  // namespace

std::unique_ptr<Family> make_softmax(const Setup& s) { return std::make_unique<Softmax>(s); }

}  // namespace halfmap::sweep
