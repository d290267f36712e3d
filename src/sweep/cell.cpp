// The Runner of cell.hpp: storing the inputs, counting what storage, the forward and the gradients did, and the
// first boundary crossed.
#include "sweep/cell.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "halfmap/detmath.hpp"

namespace halfmap::sweep {

namespace {

void set_first(Cell& c, std::string_view stage, std::string_view tensor, std::size_t i, double v) {
  c.first_stage = stage;
  c.first_tensor = tensor;
  c.first_index = i;
  c.first_value = v;
}

}  // namespace

void OutAcc::add(double got, double oracle, double min_norm) {
  ++count;
  const bool got_finite = std::isfinite(got);
  if (!got_finite) ++nonfinite;
  if (oracle != 0) ++oracle_nonzero;
  if (got == 0 && oracle != 0) ++zero;
  if (got_finite && got != 0 && std::fabs(got) < min_norm) ++subnormal;
  if (got_finite && std::isfinite(oracle)) {
    any_finite = true;
    max_diff = std::max(max_diff, std::fabs(got - oracle));
    max_oracle = std::max(max_oracle, std::fabs(oracle));
  }
}

double OutAcc::rel_err() const {
  if (!any_finite) return std::numeric_limits<double>::quiet_NaN();
  if (max_oracle == 0) return max_diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return max_diff / max_oracle;
}

bool fwd_lost(const Cell& c, double share, Mode mode) {
  return c.fwd_nonfinite == 0 &&
         (double(c.fwd_zero) > share * double(c.fwd_oracle_nonzero) || c.fwd_rel_err > forward_tolerance(mode));
}
bool data_flushed(const Cell& c, double share) { return double(c.in_flushed) > share * double(c.in_nonzero); }
bool grad_lost(const Cell& c, double share) {
  return c.grad_nonfinite == 0 && double(c.grad_zero) > share * double(c.grad_oracle_nonzero);
}

Runner::Runner(const Options& o, const Experiment& e, Dist d) : o_(o), e_(e), f_(make_family(o, e, d)) {}

void Runner::set_s(double log2_s) {
  Cell& c = fwd_cell_;
  c = Cell{};
  c.log2_s = log2_s;
  c.s = det::exp2(log2_s);
  unit_ready_ = false;
  store_inputs(c);
  f_->forward();
  count_outputs(c);
  c.status = data_compute_status(c);
}

void Runner::store_inputs(Cell& c) {
  bool first_found = false, first_given = false;
  for (std::size_t r = 0; r < f_->inputs.size(); ++r) {
    Input& in = f_->inputs[r];
    Tensor& t = in.tensor;
    for (std::size_t i = 0; i < t.size(); ++i) {
      double v = in.scaled ? c.s * in.base[i] : in.base[i];
      if (r == 0 && o_.plant_nan && *o_.plant_nan == i) v = std::numeric_limits<double>::quiet_NaN();
      const double st = t.set(i, v);
      t.val[i] = st;
      ++c.in_count;
      if (!std::isfinite(v)) ++c.in_nonfinite;
      if (v != 0) ++c.in_nonzero;
      if (std::isfinite(v) && std::isinf(st)) ++c.in_inf;
      if (v != 0 && st == 0) ++c.in_flushed;
      if (st != 0 && std::isfinite(st) && std::fabs(st) < min_normal(t.type())) ++c.in_subnormal;
      if (!first_found && !std::isfinite(st)) {
        first_found = true;
        set_first(c, "input", t.name, i, st);
      }
      // An input that was already NaN or inf before storage comes first, as its status does (data_nonfinite
      // before data_overflow).
      if (!first_given && !std::isfinite(v)) {
        first_given = true;
        set_first(c, "input", t.name, i, st);
      }
    }
  }
}

void Runner::count_outputs(Cell& c) {
  const Tensor& out = f_->out;
  const std::vector<double>& oracle = f_->oracle;
  OutAcc acc;
  for (std::size_t i = 0; i < out.size(); ++i) acc.add(out.val[i], oracle[i], min_normal(out.type()));
  c.fwd_count = acc.count;
  c.fwd_nonfinite = acc.nonfinite;
  c.fwd_oracle_nonzero = acc.oracle_nonzero;
  c.fwd_zero = acc.zero;
  c.fwd_rel_err = acc.rel_err();
  if (out.size() == 1 && f_->scalar_out()) {
    c.fwd_value = out.val[0];
    c.fwd_oracle = oracle[0];
  }
  if (!c.first_stage.empty()) return;  // an input came first
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out.val[i])) {
      set_first(c, f_->out_stage(), f_->out_name(), i, out.val[i]);
      break;
    }
  }
}

Status Runner::data_compute_status(const Cell& c) const {
  const double share = o_.underflow_share;
  if (c.in_nonfinite > 0) return Status::data_nonfinite;
  if (c.in_inf > 0) return Status::data_overflow;
  if (data_flushed(c, share)) return Status::data_underflow;
  if (c.fwd_nonfinite > 0) return Status::fwd_overflow;
  if (fwd_lost(c, share, e_.fwd.mode)) return Status::fwd_underflow;
  return Status::ok;
}

Cell Runner::cell_with_S(double log2_S) {
  Cell c = fwd_cell_;
  c.log2_S = log2_S;
  const double S = det::exp2(log2_S);
  c.S = S;
  if (!unit_ready_) {
    f_->unit_oracle();
    unit_ready_ = true;
  }
  f_->gradient(S);
  count_gradients(c);
  if (c.status == Status::ok) {
    if (c.grad_nonfinite > 0) {
      c.status = Status::grad_overflow;
    } else if (grad_lost(c, o_.underflow_share)) {
      c.status = Status::grad_underflow;
    }
  }
  return c;
}

void Runner::count_gradients(Cell& c) {
  bool first_found = !c.first_stage.empty();
  if (const Tensor* up = f_->upstream(); up != nullptr && !first_found) {
    for (std::size_t i = 0; i < up->size(); ++i) {
      if (!std::isfinite(up->val[i])) {
        set_first(c, "gradient", up->name, i, up->val[i]);
        first_found = true;
        break;
      }
    }
  }
  OutAcc acc;
  for (std::size_t g = 0; g < f_->grads.size(); ++g) {
    Tensor& t = f_->grads[g];
    t.reload();
    for (std::size_t i = 0; i < t.size(); ++i) {
      acc.add(t.val[i], f_->unit[g][i], min_normal(t.type()));
      if (!first_found && !std::isfinite(t.val[i])) {
        set_first(c, "gradient", t.name, i, t.val[i]);
        first_found = true;
      }
    }
  }
  c.grad_count = acc.count;
  c.grad_nonfinite = acc.nonfinite;
  c.grad_oracle_nonzero = acc.oracle_nonzero;
  c.grad_zero = acc.zero;
  c.grad_subnormal = acc.subnormal;
}

}  // namespace halfmap::sweep
