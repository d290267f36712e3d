// Planning the sweep: the names of distributions and statuses, the grids, which experiments the options select,
// and the validation of every option before anything runs. Definitions: include/halfmap/sweep.hpp.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "halfmap/sweep.hpp"

namespace halfmap::sweep {

// ---- names ---------------------------------------------------------------------------------------------------

std::string_view dist_name(Dist d) {
  switch (d) {
    case Dist::normal:
      return "normal";
    case Dist::uniform:
      return "uniform";
    case Dist::lognormal:
      return "lognormal";
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
    case Status::ok:
      return "ok";
    case Status::data_nonfinite:
      return "data_nonfinite";
    case Status::data_overflow:
      return "data_overflow";
    case Status::data_underflow:
      return "data_underflow";
    case Status::fwd_overflow:
      return "fwd_overflow";
    case Status::fwd_underflow:
      return "fwd_underflow";
    case Status::grad_overflow:
      return "grad_overflow";
    case Status::grad_underflow:
      return "grad_underflow";
  }
  return "?";
}

double forward_tolerance(Mode mode) {
  // Normwise relative error allowed in the forward outputs (docs/sweep.md, "Statuses": chosen with margin over the
  // largest error that any kernel of the mode shows at s = 1 with the default sizes, measured by tests/sweep_test.cpp).
  switch (mode) {
    case Mode::f32:
      return 0x1p-16;
    case Mode::f16_f32acc:
      return 0x1p-8;
    case Mode::bf16_f32acc:
      return 0x1p-5;
    case Mode::f16:
    case Mode::f16_model:
      return 0x1p-2;
    case Mode::fp8_f32acc:
    case Mode::mxfp8_f32acc:
      return 0x1p-2;
  }
  return 0;
}

std::size_t Grid::size() const {
  if (!(step > 0) || !(hi >= lo)) return 0;
  // A tiny slack so that a range that is a whole number of steps includes its end despite rounding.
  return std::size_t(std::floor((hi - lo) / step + 1e-9)) + 1;
}

bool wide_grid_applies(const Experiment& e) {
  return op_info(e.fwd.op).wide_s_grid && (e.fwd.storage == DType::f32 || e.fwd.storage == DType::bf16);
}

Grid s_grid_of(const Options& o, const Experiment& e) {
  Grid g = o.wide_s_grid && wide_grid_applies(e) ? *o.wide_s_grid : o.s_grid;
  if (!e.amplifying || g.lo >= 0) return g;
  const std::size_t last = g.size() - 1;
  std::size_t i = 0;
  while (i < last && g.log2_at(i) < 0) ++i;  // the first point at or above s = 1
  return Grid{g.log2_at(i), g.hi, g.step};
}

std::string Experiment::op_label() const {
  if (amplifying) return fmt::format("{}_amplifying", op_name(fwd.op));
  return head_dim == 0 ? std::string(op_name(fwd.op)) : fmt::format("{}_d{}", op_name(fwd.op), head_dim);
}

bool Experiment::has_gradient() const {
  switch (op_info(fwd.op).gradient) {
    case Gradient::own:
      return !fwd.forward_only;
    case Gradient::dense_bwd:
      return bwd.has_value();
    case Gradient::none:
      return false;
  }
  return false;
}

// ---- planning ------------------------------------------------------------------------------------------------

namespace {

std::optional<Op> parse_op(std::string_view s) {
  for (const OpInfo& row : kOpTable) {
    if (row.name == s) return row.op;
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
  switch (isa_state(isa)) {
    case IsaState::not_compiled:
      return "it is not compiled into this build";
    case IsaState::unsupported:
      return fmt::format("this CPU lacks {}", isa_requirements(isa));
    case IsaState::enabled:  // not called for an enabled ISA
    case IsaState::capped:
      break;
  }
  return "it is above the HALFMAP_ISA cap";
}

}  // namespace

namespace {

/// The paths option: ISA names (each must be enabled here) and mode names.
struct PathFilter {
  std::vector<Isa> isas;
  std::vector<Mode> modes;
};
PathFilter parse_paths(const std::vector<std::string>& paths) {
  PathFilter f;
  for (const std::string& p : paths) {
    if (auto isa = parse_isa(p)) {
      if (!isa_enabled(*isa)) {
        throw std::invalid_argument(fmt::format("path '{}' cannot run here: {}.", p, why_not_enabled(*isa)));
      }
      f.isas.push_back(*isa);
    } else if (auto mode = parse_mode(p)) {
      f.modes.push_back(*mode);
    } else {
      throw std::invalid_argument(
          fmt::format("unknown path '{}': expected an ISA (ref, avx2, avx512, avx512bf16, avx512fp16, neon, neonfp16, "
                      "neonfhm, neonbf16, sve) or a mode (f32, f16_f32acc, f16, f16_model, bf16_f32acc, fp8_f32acc, "
                      "mxfp8_f32acc).",
                      p));
    }
  }
  return f;
}

/// The kernels option: op names (dense_bwd selects the dense experiments that run one: not the amplifying layer)
/// and kernel names (each must be enabled here).
struct NameFilter {
  std::vector<Op> ops;
  bool dense_bwd = false;
  std::vector<std::string_view> kernel_names;
};
NameFilter parse_names(const std::vector<std::string>& names) {
  NameFilter f;
  for (const std::string& n : names) {
    if (auto op = parse_op(n)) {
      if (*op == Op::dense_bwd) {
        f.dense_bwd = true;
      } else {
        f.ops.push_back(*op);
      }
    } else if (const Kernel* k = find_kernel(n)) {
      if (!kernel_enabled(*k)) {
        throw std::invalid_argument(fmt::format("kernel '{}' cannot run here: {}.", n, why_not_enabled(k->isa)));
      }
      f.kernel_names.push_back(k->name);
    } else {
      std::string ops;
      for (const OpInfo& row : kOpTable) ops += (ops.empty() ? "" : ", ") + std::string(row.name);
      throw std::invalid_argument(
          fmt::format("unknown kernel '{}': expected a kernel name (see 'halfmap info') or an op ({}).", n, ops));
    }
  }
  return f;
}

/// A peer kernel's library: its name up to the first '_' (<lib>_<dtype>_<op>__peer).
std::string_view library_of(const Kernel& k) { return k.name.substr(0, k.name.find('_')); }

/// The enabled dense_bwd kernel of a dense_fwd kernel's mode and ISA (and, for a peer, of its library), or null.
const Kernel* find_bwd(const Kernel& f) {
  for (const Kernel& k : kernels()) {
    if (k.op == Op::dense_bwd && k.mode == f.mode && k.isa == f.isa && kernel_enabled(k) &&
        (f.isa != Isa::peer || library_of(k) == library_of(f))) {
      return &k;
    }
  }
  return nullptr;
}

bool selected(const PathFilter& pf, const NameFilter& nf, const Kernel& k, const Kernel* bwd) {
  if (!pf.isas.empty() && std::find(pf.isas.begin(), pf.isas.end(), k.isa) == pf.isas.end()) return false;
  if (!pf.modes.empty() && std::find(pf.modes.begin(), pf.modes.end(), k.mode) == pf.modes.end()) return false;
  if (nf.ops.empty() && !nf.dense_bwd && nf.kernel_names.empty()) return true;
  if (std::find(nf.ops.begin(), nf.ops.end(), k.op) != nf.ops.end()) return true;
  if (nf.dense_bwd && bwd != nullptr) return true;
  for (std::string_view n : nf.kernel_names) {
    if (n == k.name || (bwd != nullptr && n == bwd->name)) return true;
  }
  return false;
}

}  // namespace

std::vector<Experiment> plan_experiments(const std::vector<std::string>& names, const std::vector<std::string>& paths,
                                         const std::vector<std::size_t>& head_dims) {
  const PathFilter pf = parse_paths(paths);
  const NameFilter nf = parse_names(names);
  std::vector<Experiment> out;
  for (const OpInfo& row : kOpTable) {
    if (!row.swept) continue;
    const Op op = row.op;
    // The op's variants, each with its kernels together, so that each op label's items are contiguous: attention's
    // head dimensions; dense's initialised and amplifying layers.
    std::vector<std::pair<std::size_t, bool>> variants{{0, false}};  // (head dimension, amplifying)
    if (is_attention(op)) {
      variants.clear();
      for (std::size_t d : head_dims) variants.emplace_back(d, false);
    }
    if (op == Op::dense_fwd) variants.emplace_back(0, true);
    for (const auto& [d, amplifying] : variants) {
      for (const Kernel& k : kernels()) {
        if (k.op != op || !kernel_enabled(k)) continue;
        // The amplifying layer has no backward: a dense_bwd name does not select it.
        const Kernel* bwd = op == Op::dense_fwd && !amplifying ? find_bwd(k) : nullptr;
        if (!selected(pf, nf, k, bwd)) continue;
        Experiment e{k, std::nullopt};
        if (bwd != nullptr) e.bwd = *bwd;
        e.head_dim = d;
        e.amplifying = amplifying;
        out.push_back(e);
      }
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
constexpr std::size_t kMaxGrid = 100000;                    // points per grid
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

std::size_t family_first_input(const Experiment& e, const Sizes& z) {
  switch (e.fwd.op) {
    case Op::attention_prescale:
    case Op::attention_postscale:
      return z.attn_len * e.head_dim;
    case Op::dense_fwd:
      return e.amplifying ? z.amp_m * z.amp_k : z.dense_m * z.dense_k;
    case Op::softmax:
    case Op::softmax_naive:
      return z.softmax_rows * z.softmax_cols;
    case Op::xent:
      return z.xent_rows * z.xent_cols;
    case Op::layernorm:
    case Op::rmsnorm:
      return z.norm_rows * z.norm_cols;
    default:
      return z.n;
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
  if (bad_dim(z.amp_m) || bad_dim(z.amp_k) || bad_dim(z.amp_n) || z.amp_m * z.amp_k > kMaxElements ||
      z.amp_k * z.amp_n > kMaxElements || z.amp_m * z.amp_n > kMaxElements ||
      double(z.amp_m) * double(z.amp_k) * double(z.amp_n) > 0x1p30) {
    return "--dense-amplifying MxKxN needs every size at least 1, at most 2^24 elements per matrix and M*K*N at most "
           "2^30.";
  }
  if (bad_dim(z.softmax_rows) || bad_dim(z.softmax_cols) || z.softmax_rows * z.softmax_cols > kMaxElements) {
    return fmt::format("--rows and --cols must be at least 1, with at most {} elements in all.", kMaxElements);
  }
  if (bad_dim(z.norm_rows) || bad_dim(z.norm_cols) || z.norm_rows * z.norm_cols > kMaxElements) {
    return fmt::format("--norm RxC needs both sizes at least 1 and at most {} elements in all.", kMaxElements);
  }
  if (z.attn_len == 0 || z.attn_len > 4096) return "--attn-len must be between 1 and 4096.";
  if (z.head_dims.empty()) return "--head-dims needs at least one head dimension.";
  for (std::size_t d : z.head_dims) {
    if (d == 0 || d > 4096) return "--head-dims must list dimensions between 1 and 4096.";
  }
  for (const Experiment& e : o.experiments) {
    if (is_attention(e.fwd.op) && e.head_dim == 0) return "an attention experiment has no head dimension.";
    if (e.amplifying && (e.fwd.op != Op::dense_fwd || e.bwd)) return "only a forward dense experiment amplifies.";
  }
  if (bad_dim(z.xent_rows) || bad_dim(z.xent_cols) || z.xent_rows * z.xent_cols > kMaxElements ||
      z.xent_cols > (std::size_t{1} << 24)) {
    return fmt::format("--xent RxC must be at least 1x1, with at most {} elements in all.", kMaxElements);
  }
  if (std::string e = check_grid(o.s_grid, "input-scale (s)"); !e.empty()) return e;
  if (o.wide_s_grid) {
    if (std::string e = check_grid(*o.wide_s_grid, "wide input-scale (s)"); !e.empty()) return e;
  }
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
    const double per_s = e.has_gradient() ? double(o.S_grid.size()) : 1.0;
    cells += double(s_grid_of(o, e).size()) * per_s * double(o.dists.size());
  }
  if (cells > kMaxCells) {
    return fmt::format("the sweep would have {:.3g} cells, more than {:.3g}; use coarser grids or fewer kernels.",
                       cells, kMaxCells);
  }
  if (o.plant_nan) {
    for (const Experiment& e : o.experiments) {
      const std::size_t size = family_first_input(e, z);
      if (*o.plant_nan >= size) {
        return fmt::format("--plant-nan {} is outside the first input of {} ({} elements).", *o.plant_nan, e.fwd.name,
                           size);
      }
    }
  }
  return {};
}

}  // namespace halfmap::sweep
