// `halfmap diagnose`: which boundary of NUMERICS.md a user's data (features and labels saved with numpy.save)
// crosses first in fp16 or bf16 training of a small dense network, and the smallest fix (include/halfmap/
// diagnose.hpp defines the model, the sections and the verdict). Exit codes: 0 for a completed diagnosis whatever
// the verdict; 2 for bad input (an option, a file the .npy reader refuses, arrays that do not fit together),
// with one sentence on stderr and nothing on stdout or in --out; 1 if the report cannot be written.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "halfmap/diagnose.hpp"
#include "halfmap/npy.hpp"
#include "halfmap/atomic_file.hpp"

namespace halfmap::cli {
namespace {

struct DiagnoseArgs {
  std::string features, labels, out;
  bool json = false;
  diagnose::Options o;
  std::size_t growth_interval = 0;
  CLI::Option* growth_option = nullptr;  // given: overrides the frameworks' defaults
};

int refuse(std::string_view sentence) {
  std::fputs(fmt::format("halfmap: {}\n", sentence).c_str(), stderr);
  return kExitUsage;
}

/// The --out file's folder must exist: checked before the diagnosis runs, so a typo is bad input (exit 2).
std::string check_out(const std::string& out) {
  if (out.empty()) return {};
  const std::filesystem::path p(out);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return fmt::format("--out {}: the folder {} does not exist.", out, dir.string());
  if (std::filesystem::is_directory(p, ec)) return fmt::format("--out {} is a folder; give a file name.", out);
  return {};
}

int run_diagnose(DiagnoseArgs& a) {
  if (a.growth_option->count() > 0) a.o.growth_interval = a.growth_interval;
  if (std::string e = diagnose::validate(a.o); !e.empty()) return refuse(e);
  if (std::string e = check_out(a.out); !e.empty()) return refuse(e);
  // The reader refuses more data than the diagnosis accepts before allocating it (f8: 8 bytes a value).
  constexpr std::size_t kMaxBytes = diagnose::kMaxElements * 8;
  npy::Array x, y;
  try {
    x = npy::load(a.features, kMaxBytes);
    y = npy::load(a.labels, kMaxBytes);
  } catch (const npy::Error& e) {
    return refuse(e.what());
  }
  if (std::string e = diagnose::check_inputs(x, y, a.o); !e.empty()) {
    return refuse(fmt::format("{} and {}: {}", a.features, a.labels, e));
  }
  a.o.progress = ::isatty(2) != 0;
  const diagnose::Report r = diagnose::run(x, y, a.o);
  const std::string text = a.json ? diagnose::render_json(r) : diagnose::render_text(r);
  if (a.out.empty()) return write_stdout(text);
  write_file_atomic(a.out, text);  // throws on failure: main prints it, exit 1
  return kExitOk;
}

}  // namespace

Command add_diagnose_command(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "diagnose",
      "Which boundary (data, compute, optimization) your data crosses first when a small dense network trains on "
      "it in fp16/bf16, and the smallest fix. Features and labels are .npy files (numpy.save). Exit 0 for a "
      "completed diagnosis whatever the verdict, 2 for bad input.");
  sub->footer(
      "Model: Dense(hidden, ReLU) -> Dense(1), squared loss, Glorot-uniform weights from --seed, run with halfmap's "
      "kernels in f32 (the baseline) and on every fp16/bf16 path this CPU has (f16_f32acc is Keras "
      "mixed_float16's: fp16 storage, f32 accumulation). Report: data (per column: NaN/inf and the first row, "
      "range, p01/p99, what fp16 and bf16 storage overflow, flush or make subnormal), compute (is each forward "
      "finite; the first stage and element that is not), optimization (gradient underflow and overflow at loss "
      "scales 1, 2^15, 2^16; the window over 2^0..2^40: S_min the smallest scale with at most --underflow-share of "
      "the gradients that are non-zero in f32 flushed to zero, S_max the last scale before a non-finite gradient; "
      "dynamic loss scaling simulated with Keras's and PyTorch's defaults). Verdict, first match: non-finite data "
      "(named by column and row); the f32 baseline fails; data overflows or flushes in fp16/bf16 storage; a "
      "low-precision forward is non-finite (compute); gradients underflow at scale 1 or overflow at 2^15/2^16, or "
      "the window is empty (optimization); ok.");
  auto a = std::make_shared<DiagnoseArgs>();
  sub->add_option("--features", a->features, "Features: a .npy file, rows x columns (1-D: one column)")->required();
  sub->add_option("--labels", a->labels, "Labels: a .npy file, one per row (shape (n,) or (n, 1))")->required();
  sub->add_flag("--json", a->json, "Print the report as JSON (keys: include/halfmap/diagnose.hpp)");
  sub->add_option("--hidden", a->o.hidden,
                  fmt::format("Hidden units of Dense(hidden, ReLU) (default 16, 1 to {})", diagnose::kMaxHidden));
  sub->add_option("--seed", a->o.seed, "Seed of the Glorot-uniform initial weights (default 1)");
  sub->add_option("--steps", a->o.steps,
                  fmt::format("Training steps of the loss-scaling simulation (default 200, 1 to {})",
                              diagnose::kMaxSteps));
  sub->add_option("--lr", a->o.lr, "SGD learning rate of the simulation (default 0.01)");
  sub->add_option("--batch", a->o.batch, "Rows per step of the simulation, in order (default 0: the full data)");
  a->growth_option = sub->add_option("--growth-interval", a->growth_interval,
                  "Good steps before the loss scale doubles (default: the frameworks' 2000)");
  sub->add_option("--underflow-share", a->o.underflow_share,
                  "Share of the gradients (non-zero in f32) that may be zero before underflow counts (default 0.01)");
  sub->add_option("--out", a->out, "Write the report to this file (through a temporary file) instead of stdout");
  return {sub, [a] { return run_diagnose(*a); }};
}

}  // namespace halfmap::cli
