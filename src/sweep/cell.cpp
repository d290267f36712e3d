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

void OutAcc::add(double got, double oracle, double cond, double min_norm) {
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
    max_cond = std::max(max_cond, std::isfinite(cond) ? std::fabs(cond) : 0.0);
  }
}

double OutAcc::rel_err(double u) const {
  if (!any_finite) return std::numeric_limits<double>::quiet_NaN();
  const double scale = std::max(max_oracle, u * max_cond);
  if (scale == 0) return max_diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return max_diff / scale;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16:
      return 0x1p-11;
    case DType::bf16:
      return 0x1p-8;
    case DType::f32:
      return 0x1p-24;
  }
  return 0x1p-24;
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

namespace {

/// Stores base[i] (times s when scaled; NaN at `plant`) into n elements of storage type T, widens each stored value
/// into val, and counts what storage did into `st`. One loop per storage type, the conversion inlined.
template <DType T>
void store_loop(const double* base, double s, bool scaled, std::size_t n, std::size_t plant, void* raw, double* val,
                InputStats& st) {
  constexpr double mn = T == DType::f16 ? 0x1p-14 : 0x1p-126;
  std::size_t nonfinite = 0, nonzero = 0, inf = 0, flushed = 0, subnormal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double v = scaled ? s * base[i] : base[i];
    if (i == plant) v = std::numeric_limits<double>::quiet_NaN();
    double stored;
    if constexpr (T == DType::f32) {
      const float f = float(v);
      static_cast<float*>(raw)[i] = f;
      stored = f;
    } else if constexpr (T == DType::f16) {
      const f16 h = detail::to_f16_branchless(v);
      static_cast<f16*>(raw)[i] = h;
      stored = to_f64(h);
    } else {
      const bf16 b = detail::to_bf16_exact_branchless(v);
      static_cast<bf16*>(raw)[i] = b;
      stored = double(to_f32(b));
    }
    val[i] = stored;
    const bool v_finite = std::isfinite(v), st_finite = std::isfinite(stored);
    nonfinite += !v_finite;
    nonzero += v != 0;
    inf += v_finite && std::isinf(stored);
    flushed += v != 0 && stored == 0;
    subnormal += stored != 0 && st_finite && std::fabs(stored) < mn;
    if (!st_finite && st.first_stored == kNone) st.first_stored = i;
    if (!v_finite && st.first_given == kNone) st.first_given = i;
  }
  st.count = n;
  st.nonfinite = nonfinite;
  st.nonzero = nonzero;
  st.inf = inf;
  st.flushed = flushed;
  st.subnormal = subnormal;
}

}  // namespace

void Runner::store_inputs(Cell& c) {
  if (stats_.size() != f_->inputs.size()) stats_.assign(f_->inputs.size(), InputStats{});
  for (std::size_t r = 0; r < f_->inputs.size(); ++r) {
    Input& in = f_->inputs[r];
    Tensor& t = in.tensor;
    const std::size_t plant = r == 0 && o_.plant_nan ? *o_.plant_nan : kNone;
    InputStats& st = stats_[r];
    // An unscaled input stores the same values at every s: stored once, its counts kept.
    if (!in.scaled && plant == kNone && st.valid) continue;
    st = InputStats{};
    switch (t.type()) {
      case DType::f32:
        store_loop<DType::f32>(in.base.data(), c.s, in.scaled, t.size(), plant, t.data(), t.val.data(), st);
        break;
      case DType::f16:
        store_loop<DType::f16>(in.base.data(), c.s, in.scaled, t.size(), plant, t.data(), t.val.data(), st);
        break;
      case DType::bf16:
        store_loop<DType::bf16>(in.base.data(), c.s, in.scaled, t.size(), plant, t.data(), t.val.data(), st);
        break;
    }
    st.valid = true;
  }
  // The first non-finite stored value comes first, unless an input was already NaN or inf before storage: then
  // the first such input does (data_nonfinite before data_overflow).
  const InputStats* given = nullptr;
  const InputStats* stored = nullptr;
  std::size_t given_r = 0, stored_r = 0;
  for (std::size_t r = 0; r < stats_.size(); ++r) {
    const InputStats& st = stats_[r];
    c.in_count += st.count;
    c.in_nonfinite += st.nonfinite;
    c.in_nonzero += st.nonzero;
    c.in_inf += st.inf;
    c.in_flushed += st.flushed;
    c.in_subnormal += st.subnormal;
    if (given == nullptr && st.first_given != kNone) given = &st, given_r = r;
    if (stored == nullptr && st.first_stored != kNone) stored = &st, stored_r = r;
  }
  if (given != nullptr) {
    const Tensor& t = f_->inputs[given_r].tensor;
    set_first(c, "input", t.name, given->first_given, t.val[given->first_given]);
  } else if (stored != nullptr) {
    const Tensor& t = f_->inputs[stored_r].tensor;
    set_first(c, "input", t.name, stored->first_stored, t.val[stored->first_stored]);
  }
}

namespace {

/// v rounded once to the storage type t (to nearest, ties to even), as a double.
double rounded_to(DType t, double v) {
  switch (t) {
    case DType::f16:
      return to_f64(detail::to_f16_branchless(v));
    case DType::bf16:
      return double(to_f32(detail::to_bf16_exact_branchless(v)));
    case DType::f32:
      return double(float(v));
  }
  return v;
}

}  // namespace

void Runner::count_outputs(Cell& c) {
  const Tensor& out = f_->out;
  const std::vector<double>& oracle = f_->oracle;
  OutAcc acc, exact;  // the kernel's outputs; the oracle rounded to the output type, against the oracle
  const std::vector<double>& cond = f_->cond;
  std::size_t oracle_beyond = 0;  // outputs whose oracle rounds to inf in the output type
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double cd = cond.empty() ? oracle[i] : cond[i], mn = min_normal(out.type());
    acc.add(out.val[i], oracle[i], cd, mn);
    const double r = rounded_to(out.type(), oracle[i]);
    oracle_beyond += std::isfinite(oracle[i]) && !std::isfinite(r);
    exact.add(r, oracle[i], cd, mn);
  }
  Cell rounded;
  rounded.fwd_nonfinite = exact.nonfinite;
  rounded.fwd_zero = exact.zero;
  rounded.fwd_oracle_nonzero = exact.oracle_nonzero;
  rounded.fwd_rel_err = exact.rel_err(unit_roundoff(out.type()));
  c.fwd_lost_in_output = fwd_lost(rounded, o_.underflow_share, e_.fwd.mode);
  c.fwd_count = acc.count;
  c.fwd_nonfinite = acc.nonfinite;
  c.fwd_oracle_nonzero = acc.oracle_nonzero;
  c.fwd_zero = acc.zero;
  Family::HiddenFirst hidden;
  const std::size_t hidden_count = f_->hidden_nonfinite(hidden);
  c.fwd_nonfinite += hidden_count;
  c.fwd_rel_err = acc.rel_err(unit_roundoff(out.type()));
  c.fwd_vanished = c.fwd_nonfinite == 0 && c.in_nonzero > 0 && (f_->terms_flushed() || below_range(c.s));
  if (out.size() == 1 && f_->scalar_out()) {
    c.fwd_value = out.val[0];
    c.fwd_oracle = oracle[0];
  }
  if (c.fwd_nonfinite > 0) {
    c.fwd_crossed = c.in_inf > 0 || c.in_nonfinite > 0 ? "input"
                    : hidden_count > 0                 ? "intermediate"
                    : oracle_beyond > 0                ? "output"
                                                       : "arithmetic";
  }
  if (!c.first_stage.empty()) return;  // an input came first
  if (hidden_count > 0) {              // the intermediate comes before the outputs
    set_first(c, f_->out_stage(), hidden.name, hidden.index, hidden.value);
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out.val[i])) {
      set_first(c, f_->out_stage(), f_->out_name(), i, out.val[i]);
      break;
    }
  }
}

bool Runner::below_range(double s) {
  const int k = f_->homogeneity();
  if (k == 0) return false;
  if (!given_max_) given_max_ = f_->given_max_at_unit_scale();
  if (!(*given_max_ > 0)) return false;  // the given data's exact result is zero: cancellation, not underflow
  // Every output of the given data at s is s^k times its value at s = 1; it rounds to zero in the output type
  // when at most half the smallest subnormal (the tie rounds to even, zero).
  const double largest = (k == 1 ? s : s * s) * *given_max_;
  return largest <= 0.5 * min_subnormal(f_->out.type());
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
      acc.add(t.val[i], f_->unit[g][i], f_->unit[g][i], min_normal(t.type()));
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
