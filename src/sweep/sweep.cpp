// The sweep's engine: experiments per op, cells, thresholds by bisection, and the threaded run. Outputs are in
// output.cpp. Definitions: include/halfmap/sweep.hpp and README.md ("Results: how to read the sweep").
#include "halfmap/sweep.hpp"


#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "halfmap/detmath.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::sweep {

// ---- names ---------------------------------------------------------------------------------------------------

std::string_view dist_name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::uniform: return "uniform";
    case Dist::lognormal: return "lognormal";
  }
  return "?";
}

std::optional<Dist> parse_dist(std::string_view name) {
  for (Dist d : kAllDists) {
    if (dist_name(d) == name) return d;
  }
  return std::nullopt;
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::data_nonfinite: return "data_nonfinite";
    case Status::data_overflow: return "data_overflow";
    case Status::data_underflow: return "data_underflow";
    case Status::fwd_overflow: return "fwd_overflow";
    case Status::fwd_underflow: return "fwd_underflow";
    case Status::grad_overflow: return "grad_overflow";
    case Status::grad_underflow: return "grad_underflow";
  }
  return "?";
}

std::optional<Status> parse_status(std::string_view name) {
  for (Status s : kAllStatuses) {
    if (status_name(s) == name) return s;
  }
  return std::nullopt;
}

double forward_tolerance(Mode mode) {
  // Normwise relative error allowed in the forward outputs (README.md: chosen with margin over the largest error
  // that any kernel of the mode shows at s = 1 with the default sizes, measured by tests/sweep_test.cpp).
  switch (mode) {
    case Mode::f32: return 0x1p-16;
    case Mode::f16_f32acc: return 0x1p-8;
    case Mode::bf16_f32acc: return 0x1p-5;
    case Mode::f16:
    case Mode::f16_model: return 0x1p-2;
  }
  return 0;
}

std::size_t Grid::size() const {
  if (!(step > 0) || !(hi >= lo)) return 0;
  // A tiny slack so that a range that is a whole number of steps includes its end despite rounding.
  return std::size_t(std::floor((hi - lo) / step + 1e-9)) + 1;
}

bool Experiment::has_gradient() const {
  return fwd.op == Op::mse || fwd.op == Op::xent || (fwd.op == Op::dense_fwd && bwd.has_value());
}

// ---- planning ------------------------------------------------------------------------------------------------

namespace {

constexpr Op kSweepOps[] = {Op::sum,           Op::sumsq,   Op::maxabs,        Op::dot, Op::dense_fwd,
                            Op::mse,           Op::softmax, Op::softmax_naive, Op::xent};
constexpr Op kAllOps[] = {Op::sum, Op::sumsq,   Op::maxabs,        Op::dot,  Op::dense_fwd,
                          Op::dense_bwd, Op::mse, Op::softmax, Op::softmax_naive, Op::xent};
constexpr Mode kAllModes[] = {Mode::f32, Mode::f16_f32acc, Mode::f16, Mode::f16_model, Mode::bf16_f32acc};

std::optional<Op> parse_op(std::string_view s) {
  for (Op op : kAllOps) {
    if (op_name(op) == s) return op;
  }
  return std::nullopt;
}
std::optional<Mode> parse_mode(std::string_view s) {
  for (Mode m : kAllModes) {
    if (mode_name(m) == s) return m;
  }
  return std::nullopt;
}

std::string why_not_enabled(Isa isa) {
  if (!isa_compiled(isa)) return "it is not compiled into this build";
  if (!isa_supported(isa)) return fmt::format("this CPU lacks {}", isa_requirements(isa));
  return "it is above the HALFMAP_ISA cap";
}

}  // namespace

std::vector<Experiment> plan_experiments(const std::vector<std::string>& names, const std::vector<std::string>& paths) {
  std::vector<Isa> isas;
  std::vector<Mode> modes;
  for (const std::string& p : paths) {
    if (auto isa = parse_isa(p)) {
      if (!isa_enabled(*isa)) {
        throw std::invalid_argument(fmt::format("path '{}' cannot run here: {}.", p, why_not_enabled(*isa)));
      }
      isas.push_back(*isa);
    } else if (auto mode = parse_mode(p)) {
      modes.push_back(*mode);
    } else {
      throw std::invalid_argument(fmt::format(
          "unknown path '{}': expected an ISA (ref, avx2, avx512, avx512bf16, avx512fp16, neon, neonfp16) or a "
          "mode (f32, f16_f32acc, f16, f16_model, bf16_f32acc).",
          p));
    }
  }
  std::vector<Op> ops;
  std::vector<std::string_view> kernel_names;
  for (const std::string& n : names) {
    if (auto op = parse_op(n)) {
      ops.push_back(*op == Op::dense_bwd ? Op::dense_fwd : *op);
    } else if (const Kernel* k = find_kernel(n)) {
      if (!kernel_enabled(*k)) {
        throw std::invalid_argument(fmt::format("kernel '{}' cannot run here: {}.", n, why_not_enabled(k->isa)));
      }
      kernel_names.push_back(k->name);
    } else {
      throw std::invalid_argument(
          fmt::format("unknown kernel '{}': expected a kernel name (see 'halfmap info') or an op ({}).", n,
                      "sum, sumsq, maxabs, dot, dense_fwd, dense_bwd, mse, softmax, softmax_naive, xent"));
    }
  }

  auto find_bwd = [](const Kernel& f) -> const Kernel* {
    for (const Kernel& k : kernels()) {
      if (k.op == Op::dense_bwd && k.mode == f.mode && k.isa == f.isa && kernel_enabled(k)) return &k;
    }
    return nullptr;
  };
  auto selected = [&](const Kernel& k, const Kernel* bwd) {
    if (!isas.empty() && std::find(isas.begin(), isas.end(), k.isa) == isas.end()) return false;
    if (!modes.empty() && std::find(modes.begin(), modes.end(), k.mode) == modes.end()) return false;
    if (ops.empty() && kernel_names.empty()) return true;
    if (std::find(ops.begin(), ops.end(), k.op) != ops.end()) return true;
    for (std::string_view n : kernel_names) {
      if (n == k.name || (bwd != nullptr && n == bwd->name)) return true;
    }
    return false;
  };

  std::vector<Experiment> out;
  for (Op op : kSweepOps) {
    for (const Kernel& k : kernels()) {
      if (k.op != op || !kernel_enabled(k)) continue;
      const Kernel* bwd = op == Op::dense_fwd ? find_bwd(k) : nullptr;
      if (!selected(k, bwd)) continue;
      Experiment e{k, std::nullopt};
      if (bwd != nullptr) e.bwd = *bwd;
      out.push_back(e);
    }
  }
  if (out.empty()) {
    throw std::invalid_argument("no enabled kernel matches the --kernels and --paths given.");
  }
  return out;
}

// ---- validation ------------------------------------------------------------------------------------------------

namespace {

constexpr std::size_t kMaxElements = std::size_t{1} << 24;  // per tensor
constexpr std::size_t kMaxGrid = 100000;                     // points per grid
constexpr double kMaxCells = 5e7;
constexpr double kMaxLog2 = 1000;  // scales stay well inside f64

std::string check_grid(const Grid& g, std::string_view name) {
  if (!std::isfinite(g.lo) || !std::isfinite(g.hi) || !std::isfinite(g.step)) {
    return fmt::format("the {} grid must have finite bounds and step.", name);
  }
  if (std::fabs(g.lo) > kMaxLog2 || std::fabs(g.hi) > kMaxLog2) {
    return fmt::format("the {} grid must stay within 2^-{} .. 2^{}.", name, kMaxLog2, kMaxLog2);
  }
  if (g.lo > g.hi) return fmt::format("the {} grid's minimum 2^{} is above its maximum 2^{}.", name, g.lo, g.hi);
  if (!(g.step > 0)) return fmt::format("the {} grid's step must be above 2^0 (a log2 step above 0).", name);
  if ((g.hi - g.lo) / g.step >= double(kMaxGrid)) {
    return fmt::format("the {} grid would have more than {} points; use a larger step.", name, kMaxGrid);
  }
  return {};
}

std::size_t family_first_input(Op op, const Sizes& z) {
  switch (op) {
    case Op::dense_fwd: return z.dense_m * z.dense_k;
    case Op::softmax:
    case Op::softmax_naive: return z.softmax_rows * z.softmax_cols;
    case Op::xent: return z.xent_rows * z.xent_cols;
    default: return z.n;
  }
}

}  // namespace

std::string validate(const Options& o) {
  const Sizes& z = o.sizes;
  auto bad_dim = [](std::size_t v) { return v == 0 || v > (std::size_t{1} << 20); };
  if (bad_dim(z.n) || z.n > kMaxElements) return fmt::format("--n must be between 1 and {}.", kMaxElements);
  if (bad_dim(z.dense_m) || bad_dim(z.dense_k) || bad_dim(z.dense_n) || z.dense_m * z.dense_k > kMaxElements ||
      z.dense_k * z.dense_n > kMaxElements || z.dense_m * z.dense_n > kMaxElements ||
      double(z.dense_m) * double(z.dense_k) * double(z.dense_n) > 0x1p30) {
    return "--dense MxKxN needs every size at least 1, at most 2^24 elements per matrix and M*K*N at most 2^30.";
  }
  if (bad_dim(z.softmax_rows) || bad_dim(z.softmax_cols) || z.softmax_rows * z.softmax_cols > kMaxElements) {
    return fmt::format("--rows and --cols must be at least 1, with at most {} elements in all.", kMaxElements);
  }
  if (bad_dim(z.xent_rows) || bad_dim(z.xent_cols) || z.xent_rows * z.xent_cols > kMaxElements ||
      z.xent_cols > (std::size_t{1} << 24)) {
    return fmt::format("--xent RxC must be at least 1x1, with at most {} elements in all.", kMaxElements);
  }
  if (std::string e = check_grid(o.s_grid, "input-scale (s)"); !e.empty()) return e;
  if (std::string e = check_grid(o.S_grid, "loss-scale (S)"); !e.empty()) return e;
  if (!(o.underflow_share >= 0 && o.underflow_share < 1)) return "--underflow-share must be in [0, 1).";
  if (o.shard_n == 0 || o.shard_k == 0 || o.shard_k > o.shard_n) {
    return "--shard must be K/N with 1 <= K <= N.";
  }
  if (o.threads == 0 || o.threads > 1024) return "--threads must be between 1 and 1024.";
  if (o.dists.empty()) return "no distribution selected.";
  if (o.experiments.empty()) return "no kernel selected.";
  double cells = 0;
  for (const Experiment& e : o.experiments) {
    cells += double(o.s_grid.size()) * (e.has_gradient() ? double(o.S_grid.size()) : 1.0) * double(o.dists.size());
  }
  if (cells > kMaxCells) {
    return fmt::format("the sweep would have {:.3g} cells, more than {:.3g}; use coarser grids or fewer kernels.",
                       cells, kMaxCells);
  }
  if (o.plant_nan) {
    for (const Experiment& e : o.experiments) {
      const std::size_t size = family_first_input(e.fwd.op, z);
      if (*o.plant_nan >= size) {
        return fmt::format("--plant-nan {} is outside the first input of {} ({} elements).", *o.plant_nan,
                           e.fwd.name, size);
      }
    }
  }
  return {};
}

// ---- storage -----------------------------------------------------------------------------------------------------

namespace {

/// A tensor in the kernel's storage type, with its stored values widened (exactly) to f64 for the oracles.
struct Tensor {
  const char* name = "";  // a literal: cells keep a view of it
  DType type = DType::f32;
  std::vector<std::uint32_t> raw;  // room for size elements of any storage type, 4-byte aligned
  std::vector<double> val;
  void resize(DType t, std::size_t n) {
    type = t;
    raw.assign((n * dtype_size(t) + 3) / 4 + 1, 0);
    val.assign(n, 0.0);
  }
  std::size_t size() const { return val.size(); }
  void* data() { return raw.data(); }
  const void* data() const { return raw.data(); }
  void reload() {
    for (std::size_t i = 0; i < val.size(); ++i) val[i] = load(type, raw.data(), i);
  }
};

enum class Family { reduce, dense, mse, softmax, xent };

Family family_of(Op op) {
  switch (op) {
    case Op::dense_fwd:
    case Op::dense_bwd: return Family::dense;
    case Op::mse: return Family::mse;
    case Op::softmax:
    case Op::softmax_naive: return Family::softmax;
    case Op::xent: return Family::xent;
    default: return Family::reduce;
  }
}

std::string_view family_name(Family f) {
  switch (f) {
    case Family::reduce: return "reduce";
    case Family::dense: return "dense";
    case Family::mse: return "mse";
    case Family::softmax: return "softmax";
    case Family::xent: return "xent";
  }
  return "?";
}

/// The base draw of one role: `count` values from the distribution, from the stream (seed, family, dist, role).
/// Reductions share their draws (sum, sumsq, maxabs and dot see the same x), and so do softmax and softmax_naive.
std::vector<double> base_draw(std::uint64_t seed, Family fam, Dist d, unsigned role, std::size_t count) {
  det::Xoshiro256ss rng(seed, det::name_key(family_name(fam)), det::name_key(dist_name(d)), role);
  det::Normal normal;
  std::vector<double> v(count);
  for (double& x : v) {
    switch (d) {
      case Dist::uniform: x = rng.symmetric(); break;
      case Dist::normal: x = normal(rng); break;
      case Dist::lognormal: {
        const double z = normal(rng);
        const bool negative = (rng.next() >> 63) != 0;
        x = negative ? -det::exp(z) : det::exp(z);
        break;
      }
    }
  }
  return v;
}

/// Statistics of a set of outputs against their oracle.
struct OutAcc {
  std::size_t count = 0, nonfinite = 0, oracle_nonzero = 0, zero = 0, subnormal = 0;
  double max_diff = 0, max_oracle = 0;
  bool any_finite = false;
  void add(double got, double oracle, double min_norm) {
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
  double rel_err() const {
    if (!any_finite) return std::numeric_limits<double>::quiet_NaN();
    if (max_oracle == 0) return max_diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
    return max_diff / max_oracle;
  }
};

/// Runs one (experiment, distribution) pair at any (s, S): inputs drawn once, stored per s, forward per s,
/// gradient per S. Buffers are allocated once and reused.
class Runner {
 public:
  Runner(const Options& o, const Experiment& e, Dist d) : o_(o), e_(e), fam_(family_of(e.fwd.op)) {
    const Sizes& z = o.sizes;
    const DType t = e.fwd.storage;
    auto base = [&](unsigned role, std::size_t count) {
      if (role < o.base_override.size() && !o.base_override[role].empty()) {
        if (o.base_override[role].size() != count) {
          throw std::invalid_argument(fmt::format("base override of role {} has {} values, expected {}.", role,
                                                  o.base_override[role].size(), count));
        }
        return o.base_override[role];
      }
      return base_draw(o.seed, fam_, d, role, count);
    };
    auto input = [&](const char* name, unsigned role, std::size_t count, bool scaled) {
      inputs_.push_back({});
      inputs_.back().tensor.name = name;
      inputs_.back().tensor.resize(t, count);
      inputs_.back().base = base(role, count);
      inputs_.back().scaled = scaled;
    };
    switch (fam_) {
      case Family::reduce:
        input("x", 0, z.n, true);
        if (e.fwd.op == Op::dot) input("y", 1, z.n, true);
        out_.resize(t, 1);
        break;
      case Family::dense: {
        input("X", 0, z.dense_m * z.dense_k, true);
        input("W", 1, z.dense_k * z.dense_n, false);
        const double root = std::sqrt(double(z.dense_k));
        for (double& w : inputs_[1].base) w = w / root;
        bias_.resize(t, z.dense_n);
        out_.resize(t, z.dense_m * z.dense_n);
        oracle_.resize(z.dense_m * z.dense_n);
        g_ = base(2, z.dense_m * z.dense_n);
        dy_.resize(t, z.dense_m * z.dense_n);
        dy_.name = "dY";
        grads_.resize(3);
        grads_[0].name = "dX";
        grads_[0].resize(t, z.dense_m * z.dense_k);
        grads_[1].name = "dW";
        grads_[1].resize(t, z.dense_k * z.dense_n);
        grads_[2].name = "db";
        grads_[2].resize(t, z.dense_n);
        break;
      }
      case Family::mse:
        input("p", 0, z.n, true);
        input("y", 1, z.n, true);
        out_.resize(t, 1);
        grads_.resize(1);
        grads_[0].name = "dp";
        grads_[0].resize(t, z.n);
        break;
      case Family::softmax:
        input("x", 0, z.softmax_rows * z.softmax_cols, true);
        out_.resize(t, z.softmax_rows * z.softmax_cols);
        break;
      case Family::xent: {
        input("logits", 0, z.xent_rows * z.xent_cols, true);
        det::Xoshiro256ss rng(o.seed, det::name_key("xent"), det::name_key(dist_name(d)), 1);
        labels_.resize(z.xent_rows);
        for (auto& l : labels_) l = std::int32_t(rng.below(std::uint32_t(z.xent_cols)));
        out_.resize(t, 1);
        grads_.resize(1);
        grads_[0].name = "dlogits";
        grads_[0].resize(t, z.xent_rows * z.xent_cols);
        break;
      }
    }
    if (oracle_.empty()) oracle_.resize(out_.size());
    for (Tensor& g : grads_) unit_.emplace_back(g.size());
  }

  /// Stores the inputs at scale 2^log2_s, runs the forward, and fills the data and compute part of `fwd_cell_`.
  void set_s(double log2_s) {
    Cell& c = fwd_cell_;
    c = Cell{};
    c.log2_s = log2_s;
    c.s = det::exp2(log2_s);
    unit_ready_ = false;
    bool first_found = false, first_given = false;
    for (std::size_t r = 0; r < inputs_.size(); ++r) {
      Input& in = inputs_[r];
      Tensor& t = in.tensor;
      for (std::size_t i = 0; i < t.size(); ++i) {
        double v = in.scaled ? c.s * in.base[i] : in.base[i];
        if (r == 0 && o_.plant_nan && *o_.plant_nan == i) v = std::numeric_limits<double>::quiet_NaN();
        const double st = store(t.type, t.data(), i, v);
        t.val[i] = st;
        ++c.in_count;
        if (!std::isfinite(v)) ++c.in_nonfinite;
        if (v != 0) ++c.in_nonzero;
        if (std::isfinite(v) && std::isinf(st)) ++c.in_inf;
        if (v != 0 && st == 0) ++c.in_flushed;
        if (st != 0 && std::isfinite(st) && std::fabs(st) < min_normal(t.type)) ++c.in_subnormal;
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
    forward();
    OutAcc acc;
    for (std::size_t i = 0; i < out_.size(); ++i) acc.add(out_.val[i], oracle_[i], min_normal(out_.type));
    c.fwd_count = acc.count;
    c.fwd_nonfinite = acc.nonfinite;
    c.fwd_oracle_nonzero = acc.oracle_nonzero;
    c.fwd_zero = acc.zero;
    c.fwd_rel_err = acc.rel_err();
    if (out_.size() == 1 && (fam_ == Family::reduce || fam_ == Family::mse || fam_ == Family::xent)) {
      c.fwd_value = out_.val[0];
      c.fwd_oracle = oracle_[0];
    }
    first_found = first_found || first_given;
    if (!first_found) {
      for (std::size_t i = 0; i < out_.size(); ++i) {
        if (!std::isfinite(out_.val[i])) {
          set_first(c, fam_ == Family::mse || fam_ == Family::xent ? "loss" : "forward", out_name(), i,
                    out_.val[i]);
          break;
        }
      }
    }
    c.status = data_compute_status(c);
  }

  const Cell& forward_cell() const { return fwd_cell_; }

  /// The cell at the current s and loss scale 2^log2_S (runs the gradient).
  Cell cell_with_S(double log2_S) {
    Cell c = fwd_cell_;
    c.log2_S = log2_S;
    const double S = det::exp2(log2_S);
    c.S = S;
    if (!unit_ready_) compute_unit_oracle();
    gradient(S);
    bool first_found = !c.first_stage.empty();
    if (!first_found && fam_ == Family::dense) {
      for (std::size_t i = 0; i < dy_.size(); ++i) {
        if (!std::isfinite(dy_.val[i])) {
          set_first(c, "gradient", dy_.name, i, dy_.val[i]);
          first_found = true;
          break;
        }
      }
    }
    OutAcc acc;
    for (std::size_t g = 0; g < grads_.size(); ++g) {
      Tensor& t = grads_[g];
      t.reload();
      for (std::size_t i = 0; i < t.size(); ++i) {
        acc.add(t.val[i], unit_[g][i], min_normal(t.type));
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
    if (c.status == Status::ok) {
      if (c.grad_nonfinite > 0) {
        c.status = Status::grad_overflow;
      } else if (double(c.grad_zero) > o_.underflow_share * double(c.grad_oracle_nonzero)) {
        c.status = Status::grad_underflow;
      }
    }
    return c;
  }

 private:
  struct Input {
    Tensor tensor;
    std::vector<double> base;
    bool scaled = true;
  };

  static void set_first(Cell& c, std::string_view stage, std::string_view tensor, std::size_t i, double v) {
    c.first_stage = stage;
    c.first_tensor = tensor;
    c.first_index = i;
    c.first_value = v;
  }

  std::string_view out_name() const {
    switch (fam_) {
      case Family::reduce: return op_name(e_.fwd.op);
      case Family::dense: return "Y";
      case Family::mse:
      case Family::xent: return "loss";
      case Family::softmax: return "y";
    }
    return "?";
  }

  Status data_compute_status(const Cell& c) const {
    const double share = o_.underflow_share;
    if (c.in_nonfinite > 0) return Status::data_nonfinite;
    if (c.in_inf > 0) return Status::data_overflow;
    if (double(c.in_flushed) > share * double(c.in_nonzero)) return Status::data_underflow;
    if (c.fwd_nonfinite > 0) return Status::fwd_overflow;
    if (double(c.fwd_zero) > share * double(c.fwd_oracle_nonzero) || c.fwd_rel_err > forward_tolerance(e_.fwd.mode)) {
      return Status::fwd_underflow;
    }
    return Status::ok;
  }

  const double* in(std::size_t r) const { return inputs_[r].tensor.val.data(); }

  void forward() {
    const Sizes& z = o_.sizes;
    const Kernel& k = e_.fwd;
    switch (fam_) {
      case Family::reduce: {
        const Tensor& x = inputs_[0].tensor;
        const void* y = k.op == Op::dot ? inputs_[1].tensor.data() : nullptr;
        const float r = k.reduce(x.data(), y, x.size());
        out_.val[0] = r;
        const double* xv = in(0);
        double o = 0;
        switch (k.op) {
          case Op::sum:
            for (std::size_t i = 0; i < x.size(); ++i) o += xv[i];
            break;
          case Op::sumsq:
            for (std::size_t i = 0; i < x.size(); ++i) o += xv[i] * xv[i];
            break;
          case Op::dot:
            for (std::size_t i = 0; i < x.size(); ++i) o += xv[i] * in(1)[i];
            break;
          default:  // maxabs: NaN propagates
            for (std::size_t i = 0; i < x.size(); ++i) {
              const double a = std::fabs(xv[i]);
              o = (a > o || a != a) ? a : o;
              if (o != o) break;
            }
        }
        oracle_[0] = o;
        break;
      }
      case Family::dense: {
        const std::size_t m = z.dense_m, kk = z.dense_k, n = z.dense_n;
        DenseArgs a{m, n, kk, inputs_[0].tensor.data(), inputs_[1].tensor.data(), bias_.data(), out_.data(),
                    Act::identity};
        k.dense(a);
        out_.reload();
        const double* x = in(0);
        const double* w = in(1);
        for (std::size_t i = 0; i < m; ++i) {
          double* row = &oracle_[i * n];
          std::fill(row, row + n, 0.0);
          for (std::size_t p = 0; p < kk; ++p) {
            const double xv = x[i * kk + p];
            for (std::size_t j = 0; j < n; ++j) row[j] += xv * w[p * n + j];
          }
        }
        break;
      }
      case Family::mse: {
        LossArgs a{z.n, inputs_[0].tensor.data(), inputs_[1].tensor.data(), 1.0f, nullptr};
        out_.val[0] = k.loss(a);
        double o = 0;
        for (std::size_t i = 0; i < z.n; ++i) {
          const double d = in(0)[i] - in(1)[i];
          o += d * d;
        }
        oracle_[0] = o / double(z.n);
        break;
      }
      case Family::softmax: {
        SoftmaxArgs a{z.softmax_rows, z.softmax_cols, inputs_[0].tensor.data(), out_.data()};
        k.softmax(a);
        out_.reload();
        softmax_oracle(in(0), z.softmax_rows, z.softmax_cols, oracle_.data());
        break;
      }
      case Family::xent: {
        const std::size_t rows = z.xent_rows, cols = z.xent_cols;
        XentArgs a{rows, cols, inputs_[0].tensor.data(), labels_.data(), 1.0f, nullptr, nullptr};
        out_.val[0] = k.xent(a);
        double loss = 0;
        const double* x = in(0);
        for (std::size_t r = 0; r < rows; ++r) {
          double mx = -std::numeric_limits<double>::infinity();
          for (std::size_t j = 0; j < cols; ++j) mx = std::max(mx, x[r * cols + j]);
          double sum = 0;
          for (std::size_t j = 0; j < cols; ++j) sum += det::exp(x[r * cols + j] - mx);
          loss += (mx + det::log(sum)) - x[r * cols + std::size_t(labels_[r])];
        }
        oracle_[0] = loss / double(rows);
        break;
      }
    }
  }

  /// The stable softmax in f64 (the oracle of both softmax and softmax_naive).
  static void softmax_oracle(const double* x, std::size_t rows, std::size_t cols, double* y) {
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

  /// Gradient oracles at S = 1, from the exact upstream gradient (f64) and the stored inputs. A gradient's
  /// oracle at S is S times this, so only the zero pattern is needed: it does not depend on S.
  void compute_unit_oracle() {
    const Sizes& z = o_.sizes;
    switch (fam_) {
      case Family::dense: {
        const std::size_t m = z.dense_m, kk = z.dense_k, n = z.dense_n;
        const double mn = double(m) * double(n);
        std::vector<double> g1(m * n);
        for (std::size_t i = 0; i < m * n; ++i) g1[i] = g_[i] / mn;
        const double* x = in(0);
        const double* w = in(1);
        auto& dx = unit_[0];
        auto& dw = unit_[1];
        auto& db = unit_[2];
        std::fill(dx.begin(), dx.end(), 0.0);
        std::fill(dw.begin(), dw.end(), 0.0);
        std::fill(db.begin(), db.end(), 0.0);
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t p = 0; p < kk; ++p) {
            double acc = 0;
            for (std::size_t j = 0; j < n; ++j) acc += g1[i * n + j] * w[p * n + j];
            dx[i * kk + p] = acc;
          }
        }
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t p = 0; p < kk; ++p) {
            const double xv = x[i * kk + p];
            for (std::size_t j = 0; j < n; ++j) dw[p * n + j] += xv * g1[i * n + j];
          }
          for (std::size_t j = 0; j < n; ++j) db[j] += g1[i * n + j];
        }
        break;
      }
      case Family::mse:
        for (std::size_t i = 0; i < z.n; ++i) unit_[0][i] = 2.0 * (in(0)[i] - in(1)[i]) / double(z.n);
        break;
      case Family::xent: {
        const std::size_t rows = z.xent_rows, cols = z.xent_cols;
        softmax_oracle(in(0), rows, cols, unit_[0].data());
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t j = 0; j < cols; ++j) {
            double& v = unit_[0][r * cols + j];
            v = (v - (std::size_t(labels_[r]) == j ? 1.0 : 0.0)) / double(rows);
          }
        }
        break;
      }
      default: break;
    }
    unit_ready_ = true;
  }

  void gradient(double S) {
    const Sizes& z = o_.sizes;
    switch (fam_) {
      case Family::dense: {
        const std::size_t m = z.dense_m, kk = z.dense_k, n = z.dense_n;
        const double mn = double(m) * double(n);
        for (std::size_t i = 0; i < m * n; ++i) dy_.val[i] = store(dy_.type, dy_.data(), i, S * g_[i] / mn);
        DenseBwdArgs a{m,           n,           kk,          inputs_[0].tensor.data(), inputs_[1].tensor.data(),
                       dy_.data(), grads_[0].data(), grads_[1].data(), grads_[2].data()};
        e_.bwd->dense_bwd(a);
        break;
      }
      case Family::mse: {
        // The loss scale is an f32 argument; grid scales 2^k are exact in f32.
        LossArgs a{z.n, inputs_[0].tensor.data(), inputs_[1].tensor.data(), float(S), grads_[0].data()};
        e_.fwd.loss(a);
        break;
      }
      case Family::xent: {
        XentArgs a{z.xent_rows, z.xent_cols, inputs_[0].tensor.data(), labels_.data(), float(S), nullptr,
                   grads_[0].data()};
        e_.fwd.xent(a);
        break;
      }
      default: break;
    }
  }

  const Options& o_;
  const Experiment& e_;
  Family fam_;
  std::vector<Input> inputs_;
  Tensor bias_, out_, dy_;
  std::vector<Tensor> grads_;
  std::vector<double> oracle_, g_;
  std::vector<std::vector<double>> unit_;
  std::vector<std::int32_t> labels_;
  bool unit_ready_ = false;
  Cell fwd_cell_;
};

// ---- thresholds ----------------------------------------------------------------------------------------------

constexpr double kPrecision = 0x1p-10;  // final bracket width in log2: a relative precision of 2^(2^-10) - 1

std::string pow2_text(double log2) { return fmt::format("2^{}", log2); }

std::string found_text(double log2, double value) { return fmt::format("2^{:.4f} ({:.5g})", log2, value); }

/// Onset search: the smallest grid point where P holds (P false below it, assumed monotone inside the bracket),
/// refined by bisection. `report_hi`: the reported scale is the first one observed with P (else the last one
/// without). `below`, `above`: the relation printed before the grid's limit when the onset is beyond the grid.
template <class Pred>
Bound onset(const Grid& g, const std::vector<char>& grid_p, Pred p, bool report_hi, std::string_view below,
            std::string_view above) {
  Bound b;
  std::size_t j = 0;
  while (j < grid_p.size() && !grid_p[j]) ++j;
  if (j == 0) {
    b.kind = Bound::Kind::below_grid;
    b.log2 = g.log2_at(0);
    b.value = det::exp2(b.log2);
    b.text = fmt::format("{} {}", below, pow2_text(b.log2));
    return b;
  }
  if (j == grid_p.size()) {
    b.kind = Bound::Kind::above_grid;
    b.log2 = g.log2_at(grid_p.size() - 1);
    b.value = det::exp2(b.log2);
    b.text = fmt::format("{} {}", above, pow2_text(b.log2));
    return b;
  }
  double lo = g.log2_at(j - 1), hi = g.log2_at(j);
  while (hi - lo > kPrecision) {
    const double mid = 0.5 * (lo + hi);
    (p(mid) ? hi : lo) = mid;
  }
  b.kind = Bound::Kind::found;
  b.bracket_lo = lo;
  b.bracket_hi = hi;
  b.log2 = report_hi ? hi : lo;
  b.value = det::exp2(b.log2);
  b.text = found_text(b.log2, b.value);
  return b;
}

/// End of an underflow region: the largest grid point at or below `pivot` (log2) where U holds, extended upwards
/// while U holds, then the boundary to the next point by bisection (U true below, false above). Only the first
/// `limit` grid points are considered. `report_hi`: report the first scale observed without U.
template <class Pred>
Bound region_end(const Grid& g, const std::vector<char>& grid_u, std::size_t limit, double pivot, Pred u,
                 bool report_hi, std::string_view below, std::string_view above) {
  Bound b;
  std::optional<std::size_t> j;
  for (std::size_t i = 0; i < limit; ++i) {
    if (g.log2_at(i) <= pivot && grid_u[i]) j = i;
  }
  if (!j) {
    b.kind = Bound::Kind::below_grid;
    b.log2 = g.log2_at(0);
    b.value = det::exp2(b.log2);
    b.text = fmt::format("{} {}", below, pow2_text(b.log2));
    return b;
  }
  while (*j + 1 < limit && grid_u[*j + 1]) ++*j;
  if (*j + 1 >= limit) {
    b.kind = Bound::Kind::above_grid;
    b.log2 = g.log2_at(*j);
    b.value = det::exp2(b.log2);
    b.text = fmt::format("{} {}", above, pow2_text(b.log2));
    return b;
  }
  double lo = g.log2_at(*j), hi = g.log2_at(*j + 1);
  while (hi - lo > kPrecision) {
    const double mid = 0.5 * (lo + hi);
    (u(mid) ? lo : hi) = mid;
  }
  b.kind = Bound::Kind::found;
  b.bracket_lo = lo;
  b.bracket_hi = hi;
  b.log2 = report_hi ? hi : lo;
  b.value = det::exp2(b.log2);
  b.text = found_text(b.log2, b.value);
  return b;
}

bool fwd_lost(const Cell& c, double share, Mode mode) {
  return c.fwd_nonfinite == 0 &&
         (double(c.fwd_zero) > share * double(c.fwd_oracle_nonzero) || c.fwd_rel_err > forward_tolerance(mode));
}
bool data_flushed(const Cell& c, double share) { return double(c.in_flushed) > share * double(c.in_nonzero); }
bool grad_lost(const Cell& c, double share) {
  return c.grad_nonfinite == 0 && double(c.grad_zero) > share * double(c.grad_oracle_nonzero);
}

Thresholds thresholds_for(const Options& o, const Experiment& e, Runner& r, const std::vector<Cell>& fwd_cells) {
  const double share = o.underflow_share;
  const Mode mode = e.fwd.mode;
  const Grid& g = o.s_grid;
  std::vector<char> over(fwd_cells.size()), lost(fwd_cells.size()), inf(fwd_cells.size()), flushed(fwd_cells.size());
  for (std::size_t i = 0; i < fwd_cells.size(); ++i) {
    over[i] = fwd_cells[i].fwd_nonfinite > 0;
    lost[i] = fwd_lost(fwd_cells[i], share, mode);
    inf[i] = fwd_cells[i].in_inf > 0 || fwd_cells[i].in_nonfinite > 0;
    flushed[i] = data_flushed(fwd_cells[i], share);
  }
  auto at = [&r](double t) -> const Cell& {
    r.set_s(t);
    return r.forward_cell();
  };
  Thresholds th;
  th.s_overflow = onset(g, over, [&](double t) { return at(t).fwd_nonfinite > 0; }, true, "≤", ">");
  th.s_underflow = region_end(g, lost, lost.size(), 0.0, [&](double t) { return fwd_lost(at(t), share, mode); },
                              false, "<", "≥");
  th.storage_overflow = onset(
      g, inf,
      [&](double t) {
        const Cell& c = at(t);
        return c.in_inf > 0 || c.in_nonfinite > 0;
      },
      true, "≤", ">");
  th.storage_underflow = region_end(g, flushed, flushed.size(), 0.0,
                                    [&](double t) { return data_flushed(at(t), share); }, false, "<", "≥");
  if (!e.has_gradient()) return th;

  const Grid& G = o.S_grid;
  for (double ls : kWindowLog2s) {
    Window w;
    w.log2_s = ls;
    r.set_s(ls);
    w.s = r.forward_cell().s;
    w.forward_status = r.forward_cell().status;
    std::vector<char> gover(G.size()), glost(G.size());
    for (std::size_t i = 0; i < G.size(); ++i) {
      const Cell c = r.cell_with_S(G.log2_at(i));
      gover[i] = c.grad_nonfinite > 0;
      glost[i] = grad_lost(c, share);
    }
    w.S_max = onset(G, gover, [&](double t) { return r.cell_with_S(t).grad_nonfinite > 0; }, false, "<", "≥");
    std::size_t limit = 0;
    while (limit < gover.size() && !gover[limit]) ++limit;
    w.S_min = region_end(G, glost, limit, std::numeric_limits<double>::infinity(),
                         [&](double t) { return grad_lost(r.cell_with_S(t), share); }, true, "≤", ">");
    w.empty = w.S_max.kind == Bound::Kind::below_grid || w.S_min.kind == Bound::Kind::above_grid ||
              (w.S_min.kind == Bound::Kind::found && w.S_max.kind == Bound::Kind::found &&
               w.S_min.log2 > w.S_max.log2);
    auto inside = [&](double log2_S) {
      const Cell c = r.cell_with_S(log2_S);
      return c.grad_nonfinite == 0 && !grad_lost(c, share);
    };
    w.keras_inside = inside(15);
    w.pytorch_inside = inside(16);
    th.windows.push_back(w);
  }
  return th;
}

/// A rough cost of an item, to start the expensive ones first (the output does not depend on the order).
double item_cost(const Options& o, const Experiment& e) {
  const Sizes& z = o.sizes;
  double per = double(z.n);
  switch (family_of(e.fwd.op)) {
    case Family::dense: per = 3.0 * double(z.dense_m) * double(z.dense_k) * double(z.dense_n); break;
    case Family::softmax: per = double(z.softmax_rows * z.softmax_cols) * 8; break;
    case Family::xent: per = double(z.xent_rows * z.xent_cols) * 8; break;
    default: break;
  }
  if (e.fwd.mode == Mode::f16_model || (e.fwd.mode == Mode::f16 && e.fwd.isa == Isa::ref)) per *= 8;
  return per * double(o.s_grid.size()) * (e.has_gradient() ? double(o.S_grid.size()) : 1.0);
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long s = long(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

Cell evaluate_cell(const Options& opts, const Experiment& e, Dist d, double log2_s, std::optional<double> log2_S) {
  Runner r(opts, e, d);
  r.set_s(log2_s);
  if (!log2_S || !e.has_gradient()) return r.forward_cell();
  return r.cell_with_S(*log2_S);
}

Result run(const Options& opts) {
  if (std::string err = validate(opts); !err.empty()) throw std::invalid_argument(err);
  const auto start = std::chrono::steady_clock::now();
  Result result;
  const std::size_t nd = opts.dists.size();
  result.total_items = opts.experiments.size() * nd;
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < result.total_items; ++i) {
    if (i % opts.shard_n == opts.shard_k - 1) mine.push_back(i);
  }
  result.items.resize(mine.size());
  std::size_t total_cells = 0;
  for (std::size_t slot = 0; slot < mine.size(); ++slot) {
    ItemResult& it = result.items[slot];
    it.index = mine[slot];
    it.experiment = mine[slot] / nd;
    it.dist = opts.dists[mine[slot] % nd];
    const Experiment& e = opts.experiments[it.experiment];
    total_cells += opts.s_grid.size() * (e.has_gradient() ? opts.S_grid.size() : 1);
  }
  result.cells = total_cells;

  // Expensive items first; each writes only its own slot.
  std::vector<std::size_t> order(mine.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return item_cost(opts, opts.experiments[result.items[a].experiment]) >
           item_cost(opts, opts.experiments[result.items[b].experiment]);
  });

  std::atomic<std::size_t> next{0}, done_cells{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= order.size() || failed.load()) return;
      ItemResult& it = result.items[order[k]];
      try {
        const Experiment& e = opts.experiments[it.experiment];
        Runner r(opts, e, it.dist);
        const Grid& g = opts.s_grid;
        const Grid& G = opts.S_grid;
        std::vector<Cell> fwd_cells;
        fwd_cells.reserve(g.size());
        it.cells.reserve(g.size() * (e.has_gradient() ? G.size() : 1));
        for (std::size_t i = 0; i < g.size(); ++i) {
          r.set_s(g.log2_at(i));
          fwd_cells.push_back(r.forward_cell());
          if (e.has_gradient()) {
            for (std::size_t j = 0; j < G.size(); ++j) it.cells.push_back(r.cell_with_S(G.log2_at(j)));
            done_cells.fetch_add(G.size(), std::memory_order_relaxed);
          } else {
            it.cells.push_back(r.forward_cell());
            done_cells.fetch_add(1, std::memory_order_relaxed);
          }
        }
        it.thresholds = thresholds_for(opts, e, r, fwd_cells);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };

  const unsigned nthreads = std::max(1u, std::min<unsigned>(opts.threads, unsigned(std::max<std::size_t>(1, order.size()))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(work);
  std::atomic<bool> finished{false};
  std::thread progress;
  if (opts.progress) {
    progress = std::thread([&] {
      while (!finished.load()) {
        const std::size_t d = done_cells.load(std::memory_order_relaxed);
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double eta = d == 0 ? NAN : el * double(total_cells - d) / double(d);
        std::fprintf(stderr, "\rsweep: %zu / %zu cells (%.0f%%), ETA %s   ", d, total_cells,
                     total_cells ? 100.0 * double(d) / double(total_cells) : 100.0, format_eta(eta).c_str());
        std::fflush(stderr);
        for (int i = 0; i < 5 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  work();
  for (std::thread& t : pool) t.join();
  finished = true;
  if (progress.joinable()) {
    progress.join();
    std::fprintf(stderr, "\rsweep: %zu / %zu cells, done%20s\n", total_cells, total_cells, "");
  }
  if (error) std::rethrow_exception(error);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace halfmap::sweep
