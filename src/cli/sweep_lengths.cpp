// `halfmap sweep --lengths`: the length search of the reductions (include/halfmap/lengths.hpp; docs/thresholds.md,
// "Lengths"). Its options are checked before anything runs: bad input is one sentence and exit code 2, and the
// output folder is left untouched.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/sweep_args.hpp"
#include "halfmap/lengths.hpp"
#include "halfmap/parallel.hpp"
#include "halfmap/sweep.hpp"

namespace halfmap::cli {
namespace {

/// The sweep's options that do not apply to --lengths (which holds the scale and varies n), and the length search's
/// own, which need it.
constexpr const char* kNotForLengths[] = {
    "--s-min",    "--s-max",    "--s-step",           "--S-min",  "--S-max",         "--S-step",
    "--n",        "--dense",    "--dense-amplifying", "--rows",   "--cols",          "--xent",
    "--norm",     "--attn-len", "--head-dims",        "--causal", "--layernorm-eps", "--shard",
    "--plant-nan"};
constexpr const char* kLengthsOnly[] = {"--len-max", "--len-scales", "--len-step"};

/// A length: a positive integer, or 2^K (K an integer, 0..62).
std::optional<std::size_t> parse_length(std::string_view s) {
  std::size_t v = 0;
  if (s.size() > 2 && s.substr(0, 2) == "2^") {
    unsigned k = 0;
    if (!parse_uint(s.substr(2), k) || k > 62) return std::nullopt;
    return std::size_t{1} << k;
  }
  if (!parse_uint(s, v) || v == 0) return std::nullopt;
  return v;
}

/// `halfmap sweep --lengths`: the options of the length search (docs/thresholds.md, "Lengths: where a reduction
/// stops"); one sentence on bad input.
std::string build_length_options(const SweepArgs& a, const CLI::App& sub, sweep::LengthOptions& o) {
  for (const char* name : kNotForLengths) {
    if (sub.count(name) > 0) {
      return fmt::format(
          "{} does not apply to --lengths, which holds the input scale and varies the length (its "
          "options: --len-max, --len-scales, --len-step).",
          name);
    }
  }
  try {
    o.experiments = sweep::plan_length_experiments(split_list(a.kernels), split_list(a.paths));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (!a.dists.empty()) {
    o.seqs.clear();
    for (const std::string& d : split_list(a.dists)) {
      const auto q = sweep::parse_seq(d);
      if (!q) return fmt::format("unknown sequence '{}': expected ones, normal, uniform or lognormal.", d);
      o.seqs.push_back(*q);
    }
  }
  if (!a.len_max.empty()) {
    const auto n = parse_length(a.len_max);
    if (!n) return fmt::format("--len-max '{}' is not a length: give a positive integer or 2^K.", a.len_max);
    o.len_max = *n;
  }
  if (!a.len_scales.empty()) {
    o.log2_scales.clear();
    for (const std::string& s : split_list(a.len_scales)) {
      const auto l = parse_scale(s);
      if (!l) {
        return fmt::format("--len-scales '{}' is not a comma list of scales (2^E or positive numbers).", a.len_scales);
      }
      o.log2_scales.push_back(*l);
    }
  }
  if (!a.len_step.empty()) {
    const auto step = parse_step(a.len_step);
    if (!step) return fmt::format("--len-step '{}' is not a step: give 2^E (E > 0) or a factor above 1.", a.len_step);
    o.coarse_step_log2 = *step;
  }
  if (!parse_uint(a.seed, o.seed)) return fmt::format("--seed '{}' is not a non-negative integer.", a.seed);
  if (!parse_double(a.share, o.underflow_share)) return fmt::format("--underflow-share '{}' is not a number.", a.share);
  if (a.threads.empty()) {
    o.threads = default_threads();
  } else if (!parse_uint(a.threads, o.threads)) {
    return fmt::format("--threads '{}' is not a positive integer.", a.threads);
  }
  if (a.out.empty()) return "--out needs a folder.";
  return sweep::validate(o);
}

}  // namespace

int run_lengths_command(const SweepArgs& a, const CLI::App& sub) {
  sweep::LengthOptions o;
  if (const std::string err = build_length_options(a, sub, o); !err.empty()) return usage_error(err);
  const sweep::LengthRun r = sweep::run_lengths(o);
  sweep::write_length_outputs(a.out, o, r);
  if (a.quiet) return kExitOk;
  std::size_t found = 0;
  for (const sweep::LengthResult& x : r.results) found += x.found ? 1 : 0;
  return write_stdout(
      fmt::format("halfmap sweep --lengths: {} searches ({} kernels x {} sequences x {} scales), {} "
                  "onsets within n <= {}, {:.1f} s on {} threads -> {}/lengths.json, lengths.md\n",
                  r.results.size(), o.experiments.size(), o.seqs.size(), o.log2_scales.size(), found, o.len_max,
                  r.seconds, o.threads, a.out));
}

std::string_view lengths_only_option_given(const CLI::App& sub) {
  for (const char* name : kLengthsOnly) {
    if (sub.count(name) > 0) return name;
  }
  return {};
}

}  // namespace halfmap::cli
