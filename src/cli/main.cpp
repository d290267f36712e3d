// `halfmap`: the command-line entry point. Parses with CLI11, turns every parse error into one sentence, the
// usage and exit code 2, refuses an invalid HALFMAP_ISA before any subcommand runs, then dispatches.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.hpp"
#include "halfmap/cpu.hpp"
#include "halfmap/parallel.hpp"

namespace {

using halfmap::cli::Command;

/// Every subcommand, in the order `--help` lists them. A new one is one line here, one declaration in
/// command.hpp and one source file.
using AddCommand = Command (*)(CLI::App&);
constexpr AddCommand kCommands[] = {
    halfmap::cli::add_info_command,    halfmap::cli::add_sweep_command,    halfmap::cli::add_merge_command,
    halfmap::cli::add_compare_command, halfmap::cli::add_diagnose_command,
};

std::string version_line() {
  return fmt::format("halfmap {} (git {}, {})", HALFMAP_VERSION, HALFMAP_GIT_COMMIT, HALFMAP_COMPILER);
}

std::string subcommand_names(const CLI::App& app) {
  std::string out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    out += out.empty() ? "" : ", ";
    out += sub->get_name();
  }
  return out;
}

std::string full_name(const CLI::App& app) {
  return app.get_parent() == nullptr ? app.get_name() : app.get_parent()->get_name() + " " + app.get_name();
}

/// The app whose arguments the error is about: the one left holding arguments nobody claimed (checked on the
/// subcommand first, since `halfmap -x info` leaves "-x" on the root), else the chosen subcommand, else the root.
const CLI::App& failing_app(const CLI::App& root, const CLI::App* sub) {
  if (sub != nullptr && !sub->remaining(false).empty()) return *sub;
  if (!root.remaining(false).empty()) return root;
  return sub != nullptr ? *sub : root;
}

/// The one sentence for a parse error, worded for the user rather than in CLI11's words where it matters:
/// arguments nobody claimed are the common mistake, so the first is named along with what was expected. This
/// is checked before the error's type because CLI11 reports a missing subcommand before the unclaimed
/// arguments that explain it (`halfmap frobnicate`).
std::string describe(const CLI::ParseError& e, const CLI::App& failing, const CLI::App& root) {
  const std::vector<std::string> extras = failing.remaining(false);
  if (!extras.empty()) {
    const std::string& first = extras.front();
    if (first.size() > 1 && first[0] == '-') {
      return fmt::format("unknown option '{}' for '{}'; see '{} --help'.", first, full_name(failing),
                         full_name(failing));
    }
    if (&failing == &root) {
      return fmt::format("unknown subcommand '{}'; expected one of: {}.", first, subcommand_names(root));
    }
    return fmt::format("unexpected argument '{}' for '{}'.", first, full_name(failing));
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && &failing == &root && root.get_subcommands().empty()) {
    return fmt::format("no subcommand given; expected one of: {}.", subcommand_names(root));
  }
  std::string what = e.what();
  if (!what.empty() && what.back() != '.') what += '.';
  return what;
}

/// The usage of `app` as `--help` prints it, with the full command name. Called through the formatter because
/// App::help() on the root shows the chosen subcommand's help instead, which is wrong for `halfmap -x info`.
std::string usage(const CLI::App& app) {
  return app.get_formatter()->make_help(&app, full_name(app), CLI::AppFormatMode::Normal);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "halfmap maps where fp16 and bf16 arithmetic overflows, underflows or loses precision, kernel by "
      "kernel and ISA path by ISA path.",
      "halfmap"};
  app.set_version_flag("--version", version_line(), "Print the version and git commit, then exit");
  app.require_subcommand(1);  // exactly one; describe() words the error when there is none

  std::vector<Command> commands;
  for (AddCommand add : kCommands) commands.push_back(add(app));

  auto chosen = [&]() -> const Command* {
    for (const Command& c : commands) {
      if (c.app->parsed()) return &c;
    }
    return nullptr;
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help or --version: CLI11 prints them to stdout, exit 0
    }
    const Command* c = chosen();
    const CLI::App& failing = failing_app(app, c != nullptr ? c->app : nullptr);
    std::fputs(fmt::format("halfmap: {}\n\n{}", describe(e, failing, app), usage(failing)).c_str(), stderr);
    return halfmap::cli::kExitUsage;
  }

  const Command* c = chosen();
  if (c == nullptr) return halfmap::cli::kExitUsage;  // unreachable: require_subcommand(1) throws first

  // Every subcommand runs kernels or reports which may run, so a cap that names no usable ISA is bad input
  // for all of them: refuse before anything is printed.
  // Likewise HALFMAP_THREADS, the default thread count of every command that runs on threads.
  for (const std::string& err : {halfmap::isa_cap_error(), halfmap::threads_env_error()}) {
    if (!err.empty()) {
      std::fputs(fmt::format("halfmap: {}\n", err).c_str(), stderr);
      return halfmap::cli::kExitUsage;
    }
  }

  try {
    return c->run();
  } catch (const std::exception& e) {
    std::fputs(fmt::format("halfmap: {} failed: {}\n", c->app->get_name(), e.what()).c_str(), stderr);
    return halfmap::cli::kExitFailure;
  }
}
