// `halfmap sweep`, `halfmap merge` and `halfmap compare`: the map of where each boundary of docs/numerics.md is crossed
// (see include/halfmap/sweep.hpp and docs/sweep.md). Every option is checked before
// anything is written: bad input is one sentence and exit code 2, and the output folder is left untouched.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/sweep_args.hpp"
#include "halfmap/detmath.hpp"
#include "halfmap/parallel.hpp"
#include "halfmap/sweep.hpp"

namespace halfmap::cli {
namespace {

/// "AxBxC" with `count` positive integers.
std::optional<std::vector<std::size_t>> parse_dims(const std::string& s, std::size_t count) {
  std::vector<std::size_t> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t x = s.find('x', start);
    std::size_t v = 0;
    if (!parse_uint(std::string_view(s).substr(start, x == std::string::npos ? std::string::npos : x - start), v)) {
      return std::nullopt;
    }
    out.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (out.size() != count) return std::nullopt;
  return out;
}

/// `--shard slurm`: K/N from the job array's variables. An array's ids may start at 0 or 1 (or anywhere), so K is
/// the id's place from SLURM_ARRAY_TASK_MIN; the ids must be contiguous (MAX - MIN + 1 = COUNT: `--array=1-8` or
/// `0-7`, with or without a `%` throttle), since a stepped or listed array (`0-7:2`, `1,3,5`) has no such place.
std::string shard_from_slurm(unsigned& k, unsigned& n) {
  const char* names[] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                         "SLURM_ARRAY_TASK_COUNT"};
  unsigned long long v[4] = {};
  for (int i = 0; i < 4; ++i) {
    const char* e = std::getenv(names[i]);
    if (e == nullptr || !parse_uint(std::string_view(e), v[i])) {
      return fmt::format(
          "--shard slurm needs {} set to a non-negative integer, as Slurm sets it in each task of a "
          "job array (sbatch --array=1-N).",
          names[i]);
    }
  }
  const auto [id, lo, hi, count] = std::tuple(v[0], v[1], v[2], v[3]);
  if (count == 0 || count > 1u << 20 || lo > hi || hi - lo + 1 != count || id < lo || id > hi) {
    return fmt::format(
        "--shard slurm: SLURM_ARRAY_TASK_ID={} MIN={} MAX={} COUNT={} is not a task of a contiguous "
        "job array (e.g. --array=1-4 or 0-3).",
        id, lo, hi, count);
  }
  k = static_cast<unsigned>(id - lo + 1);
  n = static_cast<unsigned>(count);
  return {};
}

/// --head-dims, --attn-len and --causal: the attention experiments' shape (the plan needs the head dimensions).
std::string parse_attention(const SweepArgs& a, sweep::Options& o) {
  sweep::Sizes& z = o.sizes;
  if (!a.head_dims.empty()) {
    z.head_dims.clear();
    for (const std::string& d : split_list(a.head_dims)) {
      std::size_t v = 0;
      if (!parse_uint(d, v) || v == 0 || v > 4096) {
        return fmt::format("--head-dims '{}' is not a comma list of head dimensions between 1 and 4096.", a.head_dims);
      }
      z.head_dims.push_back(v);
    }
    if (z.head_dims.empty()) return "--head-dims needs at least one head dimension.";
  }
  if (!a.attn_len.empty() && !parse_uint(a.attn_len, z.attn_len)) {
    return fmt::format("--attn-len '{}' is not a positive integer.", a.attn_len);
  }
  o.attn_causal = a.causal;
  return {};
}

/// --kernels, --paths and --dists: which experiments run, on which distributions.
std::string plan(const SweepArgs& a, sweep::Options& o) {
  try {
    o.experiments = sweep::plan_experiments(split_list(a.kernels), split_list(a.paths), o.sizes.head_dims);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (!a.dists.empty()) {
    o.dists.clear();
    for (const std::string& d : split_list(a.dists)) {
      const auto dist = sweep::parse_dist(d);
      if (!dist) return fmt::format("unknown distribution '{}': expected normal, uniform or lognormal.", d);
      o.dists.push_back(*dist);
    }
  }
  return {};
}

/// --s-min/-max/-step and --S-min/-max/-step: the grids of input and loss scales.
std::string parse_grids(const SweepArgs& a, sweep::Options& o) {
  struct GridArg {
    const std::string *lo, *hi, *step;
    sweep::Grid* grid;
    const char* name;
  };
  for (const GridArg& g : {GridArg{&a.s_min, &a.s_max, &a.s_step, &o.s_grid, "s"},
                           GridArg{&a.S_min, &a.S_max, &a.S_step, &o.S_grid, "S"}}) {
    const auto lo = parse_scale(*g.lo), hi = parse_scale(*g.hi);
    const auto step = parse_step(*g.step);
    if (!lo) return fmt::format("--{}-min '{}' is not a scale: give 2^E or a positive number.", g.name, *g.lo);
    if (!hi) return fmt::format("--{}-max '{}' is not a scale: give 2^E or a positive number.", g.name, *g.hi);
    if (!step)
      return fmt::format("--{}-step '{}' is not a step: give 2^E (E > 0) or a factor above 1.", g.name, *g.step);
    *g.grid = sweep::Grid{*lo, *hi, *step};
  }
  // An input-scale range given on the command line is every experiment's: the wide default grid is for defaults.
  // A step alone refines every experiment's grid by the same factor and keeps its range (the wide grid's step
  // 2^2 becomes 2^0.5 when --s-step 2^0.125 refines the default 2^0.5 four times).
  if (a.s_range_given) {
    o.wide_s_grid.reset();
  } else if (a.s_step_given && o.wide_s_grid) {
    o.wide_s_grid->step *= o.s_grid.step / sweep::Options{}.s_grid.step;
  }
  return {};
}

/// --n, --dense, --dense-amplifying, --rows, --cols, --xent and --norm: the experiments' sizes.
std::string parse_sizes(const SweepArgs& a, sweep::Sizes& z) {
  if (!a.n.empty() && !parse_uint(a.n, z.n)) return fmt::format("--n '{}' is not a positive integer.", a.n);
  if (!a.dense.empty()) {
    const auto d = parse_dims(a.dense, 3);
    if (!d) return fmt::format("--dense '{}' is not MxKxN (three positive integers, e.g. 32x64x32).", a.dense);
    z.dense_m = (*d)[0];
    z.dense_k = (*d)[1];
    z.dense_n = (*d)[2];
  }
  if (!a.dense_amp.empty()) {
    const auto d = parse_dims(a.dense_amp, 3);
    if (!d) {
      return fmt::format("--dense-amplifying '{}' is not MxKxN (three positive integers, e.g. 16x4096x16).",
                         a.dense_amp);
    }
    z.amp_m = (*d)[0];
    z.amp_k = (*d)[1];
    z.amp_n = (*d)[2];
  }
  if (!a.rows.empty() && !parse_uint(a.rows, z.softmax_rows)) {
    return fmt::format("--rows '{}' is not a positive integer.", a.rows);
  }
  if (!a.cols.empty() && !parse_uint(a.cols, z.softmax_cols)) {
    return fmt::format("--cols '{}' is not a positive integer.", a.cols);
  }
  if (!a.xent.empty()) {
    const auto d = parse_dims(a.xent, 2);
    if (!d) return fmt::format("--xent '{}' is not RxC (two positive integers, e.g. 32x16).", a.xent);
    z.xent_rows = (*d)[0];
    z.xent_cols = (*d)[1];
  }
  if (!a.norm.empty()) {
    const auto d = parse_dims(a.norm, 2);
    if (!d) return fmt::format("--norm '{}' is not RxC (two positive integers, e.g. 8x1024).", a.norm);
    z.norm_rows = (*d)[0];
    z.norm_cols = (*d)[1];
  }
  return {};
}

/// --layernorm-eps, --seed and --underflow-share: the numbers the cells are computed and judged with.
std::string parse_numerics(const SweepArgs& a, sweep::Options& o) {
  if (a.layernorm_eps == "torch") {
    o.layernorm_eps = kLayerNormEpsTorch;
  } else if (a.layernorm_eps == "keras") {
    o.layernorm_eps = kLayerNormEpsKeras;
  } else if (!a.layernorm_eps.empty()) {
    double e = 0;
    if (!parse_double(a.layernorm_eps, e) || !(e > 0) || e > 1) {
      return fmt::format("--layernorm-eps '{}' is not torch, keras or a number in (0, 1].", a.layernorm_eps);
    }
    o.layernorm_eps = float(e);
  }
  if (!parse_uint(a.seed, o.seed)) return fmt::format("--seed '{}' is not a non-negative integer.", a.seed);
  if (!parse_double(a.share, o.underflow_share)) {
    return fmt::format("--underflow-share '{}' is not a number.", a.share);
  }
  return {};
}

/// --threads, --shard, --plant-nan, --out and --quiet: how the run goes, not what it computes.
std::string parse_run(const SweepArgs& a, sweep::Options& o, bool& sharded) {
  if (a.threads.empty()) {
    o.threads = default_threads();  // HALFMAP_THREADS, else every CPU this process may run on
  } else if (!parse_uint(a.threads, o.threads)) {
    return fmt::format("--threads '{}' is not a positive integer.", a.threads);
  }
  sharded = !a.shard.empty();
  if (a.shard == "slurm") {
    if (std::string err = shard_from_slurm(o.shard_k, o.shard_n); !err.empty()) return err;
  } else if (sharded) {
    const std::size_t slash = a.shard.find('/');
    if (slash == std::string::npos || !parse_uint(std::string_view(a.shard).substr(0, slash), o.shard_k) ||
        !parse_uint(std::string_view(a.shard).substr(slash + 1), o.shard_n) || o.shard_k == 0 ||
        o.shard_k > o.shard_n) {
      return fmt::format("--shard '{}' is not K/N with 1 <= K <= N (e.g. 2/4).", a.shard);
    }
  }
  if (!a.plant_nan.empty()) {
    std::size_t idx = 0;
    if (!parse_uint(a.plant_nan, idx)) return fmt::format("--plant-nan '{}' is not an index.", a.plant_nan);
    o.plant_nan = idx;
  }
  if (a.out.empty()) return "--out needs a folder.";
  o.progress = a.quiet ? Progress::off : ::isatty(2) != 0 ? Progress::redraw : Progress::lines;
  return {};
}

/// Builds the options from the arguments, in the order of the steps above; returns one sentence on bad input.
std::string build_options(const SweepArgs& a, sweep::Options& o, bool& sharded) {
  if (std::string err = parse_attention(a, o); !err.empty()) return err;
  if (std::string err = plan(a, o); !err.empty()) return err;
  if (std::string err = parse_grids(a, o); !err.empty()) return err;
  if (std::string err = parse_sizes(a, o.sizes); !err.empty()) return err;
  if (std::string err = parse_numerics(a, o); !err.empty()) return err;
  if (std::string err = parse_run(a, o, sharded); !err.empty()) return err;
  return sweep::validate(o);
}

}  // namespace

Command add_sweep_command(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "sweep",
      "Map, for every kernel and path, where data, compute and optimization first overflow or underflow "
      "over input scales s and loss scales S; writes cells.csv, thresholds.json/.md, meta.json and, when "
      "peer paths ran, peers.md. The environment variable HALFMAP_TORCH=1 adds PyTorch's CPU kernels "
      "(tools/torch_peer.py) to the peer paths");
  auto a = std::make_shared<SweepArgs>();
  sub->add_option("--kernels", a->kernels, "Comma list of kernel names or ops (e.g. sum,dense_fwd); default: all");
  sub->add_option("--paths", a->paths, "Comma list of ISA paths and/or modes (e.g. avx512,f16); default: all");
  sub->add_option("--dists", a->dists, "Comma list of normal, uniform, lognormal; default: all three");
  auto s_range_given = [a](const std::string&) { a->s_range_given = true; };
  auto s_step_given = [a](const std::string&) { a->s_step_given = true; };
  sub->add_option("--s-min", a->s_min,
                  "Smallest input scale, 2^E or a value (default 2^-40; 2^-160 for f32 and bf16 storage of sum, "
                  "sumsq, maxabs, dot, dense_fwd, mse); --s-min or --s-max sets every experiment's range")
      ->each(s_range_given);
  sub->add_option("--s-max", a->s_max, "Largest input scale (default 2^40; 2^140 for the wide ones)")
      ->each(s_range_given);
  sub->add_option("--s-step", a->s_step,
                  "Input-scale step, 2^E or a factor > 1 (default 2^0.5; 2^2 for the wide ones); alone, it refines "
                  "every experiment's grid by the same factor and keeps its range")
      ->each(s_step_given);
  sub->add_option("--S-min", a->S_min, "Smallest loss scale (default 2^0)");
  sub->add_option("--S-max", a->S_max, "Largest loss scale (default 2^32)");
  sub->add_option("--S-step", a->S_step, "Loss-scale step (default 2^1)");
  sub->add_option("--n", a->n, "Length of the reductions and of mse (default 4096)");
  sub->add_option("--dense", a->dense, "Dense sizes MxKxN (default 32x64x32)");
  sub->add_option("--dense-amplifying", a->dense_amp,
                  "Sizes MxKxN of the amplifying dense layer, dense_fwd_amplifying: ReLU inputs, unit-variance "
                  "weights, forward only (default 16x4096x16)");
  sub->add_option("--rows", a->rows, "Softmax rows (default 32)");
  sub->add_option("--cols", a->cols, "Softmax columns (default 64)");
  sub->add_option("--xent", a->xent, "Cross-entropy sizes RxC (default 32x16)");
  sub->add_option("--norm", a->norm, "layernorm and rmsnorm sizes RxC, rows of a hidden size C (default 8x1024)");
  sub->add_option("--layernorm-eps", a->layernorm_eps,
                  "layernorm's epsilon: torch (1e-5, the default), keras (1e-3) or a number");
  sub->add_option("--attn-len", a->attn_len, "Attention's sequence length, queries = keys (default 32)");
  sub->add_option("--head-dims", a->head_dims, "Attention's head dimensions, one experiment each (default 64,128)");
  sub->add_flag("--causal", a->causal, "Mask attention's scores above the diagonal (default: not masked)");
  sub->add_option("--seed", a->seed, "Seed of the base inputs (default 1)");
  sub->add_option(
      "--underflow-share", a->share,
      "Share of non-zero values that may flush to zero before a boundary counts as crossed (default 0.001)");
  sub->add_option("--threads", a->threads,
                  "Worker threads (default: HALFMAP_THREADS, else every CPU this process may run on)");
  sub->add_option("--shard", a->shard,
                  "Run only shard K of N of the work items (K/N), for 'halfmap merge'; 'slurm' takes K/N "
                  "from the job array's SLURM_ARRAY_TASK_ID/MIN/MAX/COUNT (tools/sweep_slurm.sh)");
  sub->add_option("--plant-nan", a->plant_nan, "Testing aid: put a NaN at this index of the first input");
  sub->add_option("--out", a->out, "Output folder (default sweep-out)");
  sub->add_flag("--quiet", a->quiet,
                "No progress on stderr (else a line redrawn on a terminal, or a line a minute in a log)");
  sub->add_flag("--lengths", a->lengths,
                "Instead of the scale sweep, the length search of the reductions sum, sumsq and dot: per kernel, "
                "sequence (--dists: ones, normal, uniform, lognormal; default all four) and scale, the smallest "
                "length n at which the result overflows, is lost or stalls; writes lengths.json and lengths.md "
                "(docs/thresholds.md, \"Lengths\")");
  sub->add_option("--len-max", a->len_max, "--lengths: the largest length searched, N or 2^K (default 2^20)");
  sub->add_option("--len-scales", a->len_scales,
                  "--lengths: comma list of input scales, 2^E or values (default 2^0,2^-8)");
  sub->add_option("--len-step", a->len_step,
                  "--lengths: the coarse scan's step over n, 2^E or a factor > 1 (default 2^1: the powers of two)");
  return {sub, [a, sub] {
            if (a->lengths) return run_lengths_command(*a, *sub);
            if (const std::string_view name = lengths_only_option_given(*sub); !name.empty()) {
              return usage_error(fmt::format("{} needs --lengths.", name));
            }
            sweep::Options o;
            bool sharded = false;
            if (const std::string err = build_options(*a, o, sharded); !err.empty()) return usage_error(err);
            const sweep::Result r = sweep::run(o);
            sweep::write_outputs(a->out, o, r, sharded);
            if (a->quiet) return kExitOk;
            return write_stdout(fmt::format(
                "halfmap sweep: {} cells, {} kernels x {} distributions{}, {:.1f} s on {} "
                "threads -> {}/\n",
                r.cells, o.experiments.size(), o.dists.size(),
                sharded ? fmt::format(" (shard {}/{})", o.shard_k, o.shard_n) : "", r.seconds, o.threads, a->out));
          }};
}

Command add_merge_command(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "merge", "Join the folders of 'halfmap sweep --shard K/N' into one result, identical to a single run's");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("dirs", *dirs, "The shard folders")->required();
  sub->add_option("--out", *out, "Output folder")->required();
  return {sub, [dirs, out] {
            if (const std::string err = sweep::merge(*dirs, *out); !err.empty()) return usage_error(err);
            return kExitOk;
          }};
}

Command add_compare_command(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "compare",
      "One Markdown table of thresholds per op across result folders (machines), marking paths of the "
      "same mode that disagree");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("dirs", *dirs, "Result folders of 'halfmap sweep' (e.g. results/<machine>)")->required();
  sub->add_option("--out", *out, "Output Markdown file")->required();
  return {sub, [dirs, out] {
            if (const std::string err = sweep::compare(*dirs, *out); !err.empty()) return usage_error(err);
            return kExitOk;
          }};
}

}  // namespace halfmap::cli
