// What `halfmap sweep` parses, shared by the scale sweep (sweep.cpp) and the length search (sweep_lengths.cpp): the
// options as given, and the parsers of lists, numbers, scales and steps. Each parser returns no value (or false) on
// bad input; the caller turns that into one sentence and exit code 2.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

namespace halfmap::cli {

/// The options of `halfmap sweep` as given on the command line (strings, parsed and checked before anything runs).
struct SweepArgs {
  std::string kernels, paths, dists;
  std::string s_min = "2^-40", s_max = "2^40", s_step = "2^0.5";
  bool s_range_given = false;  // --s-min or --s-max
  bool s_step_given = false;   // --s-step
  std::string S_min = "2^0", S_max = "2^32", S_step = "2^1";
  std::string n, dense, dense_amp, rows, cols, xent, norm, layernorm_eps, attn_len, head_dims;
  bool causal = false;
  std::string seed = "1";
  std::string share = "0.001";
  std::string threads;
  std::string shard;
  std::string plant_nan;
  std::string out = "sweep-out";
  bool quiet = false;
  bool lengths = false;  // --lengths: the length search instead of the scale sweep
  std::string len_max, len_scales, len_step;
};

/// Prints "halfmap: <sentence>" to stderr and returns kExitUsage.
int usage_error(std::string_view sentence);
/// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_list(const std::string& s);
/// A finite number, the whole of `s`.
bool parse_double(std::string_view s, double& out);
/// A non-negative integer, the whole of `s`.
template <class T>
bool parse_uint(std::string_view s, T& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}
/// A scale given as `2^E` (E: the log2 exponent, any real) or as a positive value; returns its log2.
std::optional<double> parse_scale(std::string_view s);
/// A grid step given as `2^E` (E > 0) or as a factor above 1; returns its log2 (may be <= 0: validate says so).
std::optional<double> parse_step(std::string_view s);

/// `halfmap sweep --lengths` (sweep_lengths.cpp): checks its options, runs the length search and writes its files.
int run_lengths_command(const SweepArgs& a, const CLI::App& sub);
/// The first option given that only --lengths takes (--len-max, --len-scales, --len-step), or empty.
std::string_view lengths_only_option_given(const CLI::App& sub);

}  // namespace halfmap::cli
