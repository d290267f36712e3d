// How a `halfmap` subcommand plugs into main.cpp. Each subcommand lives in its own file and exposes one
// function that adds itself to the top-level CLI11 app; main.cpp lists those functions in one table, parses,
// checks what every subcommand needs checked (HALFMAP_ISA), and calls the chosen one's `run`.
#pragma once

#include <cstdio>
#include <functional>
#include <string_view>

#include <CLI/CLI.hpp>

namespace halfmap::cli {

/// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command was valid but could not complete (e.g. a write failed)
inline constexpr int kExitUsage = 2;    // bad input: option, argument, subcommand or HALFMAP_ISA

struct Command {
  /// The subcommand's CLI11 app, owned by the parent app.
  CLI::App* app;
  /// Called once after a successful parse if this subcommand was chosen; returns the process exit code. Options
  /// are bound to state the lambda owns, so nothing global is needed. It must not change the floating-point
  /// environment, and must print nothing partial on error: build the output, then write it with write_stdout.
  std::function<int()> run;
};

/// Adds `halfmap info` to `parent`.
Command add_info_command(CLI::App& parent);
/// Adds `halfmap sweep`, `halfmap merge` and `halfmap compare` (src/cli/sweep.cpp).
Command add_sweep_command(CLI::App& parent);
Command add_merge_command(CLI::App& parent);
Command add_compare_command(CLI::App& parent);
/// Adds `halfmap diagnose` (src/cli/diagnose.cpp).
Command add_diagnose_command(CLI::App& parent);

/// Writes `text` to stdout in one piece and flushes. Returns kExitOk, or prints one sentence to stderr and
/// returns kExitFailure if stdout could not take it (closed pipe, full disk).
inline int write_stdout(std::string_view text) {
  const bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
  if (ok) return kExitOk;
  std::fputs("halfmap: could not write the output to stdout.\n", stderr);
  return kExitFailure;
}

}  // namespace halfmap::cli
