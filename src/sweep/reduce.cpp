// The reductions (sum, sumsq, maxabs, dot): one scalar against its f64 sum of the stored inputs.
#include <algorithm>
#include <cmath>

#include "sweep/experiment.hpp"

namespace halfmap::sweep {

namespace {

class Reduce final : public Family {
 public:
  explicit Reduce(const Setup& s) : k_(s.e.fwd) {
    s.add_input(*this, "x", 0, s.o.sizes.n, true);
    if (k_.op == Op::dot) s.add_input(*this, "y", 1, s.o.sizes.n, true);
    out.resize(s.storage(), 1);
  }

  void forward() override {
    const Tensor& x = inputs[0].tensor;
    const void* y = k_.op == Op::dot ? inputs[1].tensor.data() : nullptr;
    out.val[0] = k_.reduce(x.data(), y, x.size());
    oracle[0] = exact(x.size());
    if (k_.op == Op::sum || k_.op == Op::dot) {  // terms of both signs: the magnitudes they cancel from
      double c = 0;
      for (std::size_t i = 0; i < x.size(); ++i) c += std::fabs(in(0)[i] * (k_.op == Op::dot ? in(1)[i] : 1.0));
      cond.assign(1, c);
    }
  }

  bool terms_flushed() const override {
    if (k_.op != Op::dot) return Family::terms_flushed();
    // A product x_i y_i is a term while both were nonzero before storage; it is flushed when either factor is.
    const Input &x = inputs[0], &y = inputs[1];
    for (std::size_t i = 0; i < x.base.size(); ++i) {
      if (x.base[i] != 0 && y.base[i] != 0 && x.tensor.val[i] != 0 && y.tensor.val[i] != 0) return false;
    }
    return true;
  }

  int homogeneity() const override { return k_.op == Op::sumsq || k_.op == Op::dot ? 2 : 1; }

  double given_max_at_unit_scale() const override {
    const std::vector<double>& x = inputs[0].base;
    double o = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      switch (k_.op) {
        case Op::sum:
          o += x[i];
          break;
        case Op::sumsq:
          o += x[i] * x[i];
          break;
        case Op::dot:
          o += x[i] * inputs[1].base[i];
          break;
        default:
          o = std::max(o, std::fabs(x[i]));
      }
    }
    return std::fabs(o);
  }

  std::string_view out_name() const override { return op_name(k_.op); }
  bool scalar_out() const override { return true; }

 private:
  double exact(std::size_t n) const {
    const double* xv = in(0);
    double o = 0;
    switch (k_.op) {
      case Op::sum:
        for (std::size_t i = 0; i < n; ++i) o += xv[i];
        break;
      case Op::sumsq:
        for (std::size_t i = 0; i < n; ++i) o += xv[i] * xv[i];
        break;
      case Op::dot:
        for (std::size_t i = 0; i < n; ++i) o += xv[i] * in(1)[i];
        break;
      default:  // maxabs: NaN propagates
        for (std::size_t i = 0; i < n; ++i) {
          const double a = std::fabs(xv[i]);
          o = (a > o || a != a) ? a : o;
          if (o != o) break;
        }
    }
    return o;
  }

  const Kernel& k_;
};

}  // namespace

std::unique_ptr<Family> make_reduce(const Setup& s) { return std::make_unique<Reduce>(s); }

}  // namespace halfmap::sweep
