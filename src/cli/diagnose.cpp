// `halfmap diagnose`: which boundary of docs/numerics.md a user's data (features and labels saved with numpy.save)
// crosses first in fp16 or bf16 training of a small dense network, and the smallest fix (include/halfmap/
// diagnose.hpp defines the model, the sections and the verdict). Exit codes: 0 for a completed diagnosis whatever
// the verdict; 2 for bad input (an option, a file the .npy reader refuses, arrays that do not fit together),
// with one sentence on stderr and nothing on stdout or in --out; 1 if the report cannot be written.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "halfmap/atomic_file.hpp"
#include "halfmap/diagnose.hpp"
#include "halfmap/diagnose_model.hpp"
#include "halfmap/loss_scale.hpp"
#include "halfmap/npy.hpp"
#include "halfmap/onnx.hpp"
#include "halfmap/parallel.hpp"

namespace halfmap::cli {
namespace {

struct DiagnoseArgs {
  std::string features, labels, out, model;
  bool json = false;
  diagnose::Options o;
  std::size_t growth_interval = 0, steps = 0, epochs = 0;
  std::uint64_t shuffle = 0;
  // Given: override the defaults (the frameworks' growth interval; kDefaultSteps; rows in order).
  CLI::Option *growth_option = nullptr, *steps_option = nullptr, *epochs_option = nullptr, *shuffle_option = nullptr;
  std::vector<CLI::Option*> seed_model_options;  // meaningless with --model
  diagnose::Loss loss = diagnose::Loss::none;
  std::string loss_text;
  CLI::Option* loss_option = nullptr;
  std::size_t train = 0;
  CLI::Option *train_option = nullptr, *lr_option = nullptr;
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
  if (!std::filesystem::is_directory(dir, ec))
    return fmt::format("--out {}: the folder {} does not exist.", out, dir.string());
  if (std::filesystem::is_directory(p, ec)) return fmt::format("--out {} is a folder; give a file name.", out);
  return {};
}

/// `--model`: the network's forward, layer by layer, on every path (include/halfmap/diagnose_model.hpp).
int run_model(DiagnoseArgs& a) {
  if (a.loss_option->count() > 0) {
    if (a.loss_text != "mse" && a.loss_text != "xent")
      return refuse(fmt::format("--loss {}: the losses are mse and xent.", a.loss_text));
    a.loss = a.loss_text == "mse" ? diagnose::Loss::mse : diagnose::Loss::xent;
  }
  // --lr and --growth-interval shape the training of --train; the seed model's other options mean nothing here.
  const bool training = a.train_option->count() > 0;
  for (const CLI::Option* opt : a.seed_model_options) {
    if (opt->count() == 0) continue;
    if (training && (opt == a.lr_option || opt == a.growth_option)) continue;
    if (opt == a.lr_option || opt == a.growth_option)
      return refuse(fmt::format("{} applies to --train with --model (or to the seed model).", opt->get_name()));
    return refuse(
        fmt::format("{} applies to the seed model; with --model the network is the file's.", opt->get_name()));
  }
  if (training) {
    if (a.loss == diagnose::Loss::none)
      return refuse("--train needs --loss mse or --loss xent (and --labels): training needs gradients.");
    if (a.train < 1 || a.train > diagnose::kMaxSteps)
      return refuse(fmt::format("--train must be between 1 and {} steps.", diagnose::kMaxSteps));
    a.o.steps = a.train;
    if (a.growth_option->count() > 0) a.o.growth_interval = a.growth_interval;
  }
  if (a.loss == diagnose::Loss::none && !a.labels.empty())
    return refuse(
        "--labels needs --loss mse or --loss xent with --model (without a loss the network's forward is "
        "diagnosed).");
  if (a.loss != diagnose::Loss::none && a.labels.empty())
    return refuse(fmt::format("--loss {} needs --labels.", diagnose::loss_name(a.loss)));
  if (a.o.threads == 0) a.o.threads = threads_env().value_or(0);
  if (std::string e = diagnose::validate(a.o); !e.empty()) return refuse(e);
  if (std::string e = check_out(a.out); !e.empty()) return refuse(e);
  onnx::Network net;
  diagnose::Table x, y;
  try {
    net = onnx::load(a.model);
    x = diagnose::Table::load(a.features);
    if (!a.labels.empty()) y = diagnose::Table::load(a.labels);
  } catch (const onnx::Error& e) {
    return refuse(e.what());
  } catch (const npy::Error& e) {
    return refuse(e.what());
  }
  const diagnose::Table* labels = a.labels.empty() ? nullptr : &y;
  if (std::string e = diagnose::check_model_inputs(net, x, a.loss, labels); !e.empty())
    return refuse(fmt::format("{} and {}: {}", a.model, a.features, e));
  a.o.progress = ::isatty(2) != 0 ? Progress::redraw : Progress::lines;
  diagnose::ModelReport r;
  try {
    r = diagnose::run_model(net, a.model, x, a.loss, labels, a.o);
  } catch (const std::invalid_argument& e) {  // a --path this CPU does not run for this network
    return refuse(e.what());
  }
  const std::string text = a.json ? diagnose::render_model_json(r) : diagnose::render_model_text(r);
  if (a.out.empty()) return write_stdout(text);
  write_file_atomic(a.out, text);
  return kExitOk;
}

int run_diagnose(DiagnoseArgs& a) {
  if (!a.model.empty()) return run_model(a);
  if (a.train_option->count() > 0)
    return refuse("--train applies to --model; the seed model trains for --steps or --epochs.");
  if (a.loss_option->count() > 0)
    return refuse("--loss applies to --model; the seed model's loss is the squared error.");
  if (a.labels.empty())
    return refuse("--labels is required (the labels of the seed model's squared loss), unless --model is given.");
  if (a.growth_option->count() > 0) a.o.growth_interval = a.growth_interval;
  if (a.steps_option->count() > 0) a.o.steps = a.steps;
  if (a.epochs_option->count() > 0) a.o.epochs = a.epochs;
  if (a.shuffle_option->count() > 0) a.o.shuffle = a.shuffle;
  if (a.o.threads == 0) a.o.threads = threads_env().value_or(0);  // HALFMAP_THREADS; still 0: the hardware's
  if (std::string e = diagnose::validate(a.o); !e.empty()) return refuse(e);
  if (std::string e = check_out(a.out); !e.empty()) return refuse(e);
  diagnose::Table x, y;
  try {
    x = diagnose::Table::load(a.features);
    y = diagnose::Table::load(a.labels);
  } catch (const npy::Error& e) {
    return refuse(e.what());
  }
  if (std::string e = diagnose::check_inputs(x, y, a.o); !e.empty()) {
    return refuse(fmt::format("{} and {}: {}", a.features, a.labels, e));
  }
  a.o.progress = ::isatty(2) != 0 ? Progress::redraw : Progress::lines;
  diagnose::Report r;
  try {
    r = diagnose::run(x, y, a.o);
  } catch (const std::invalid_argument& e) {  // a --path this CPU does not run
    return refuse(e.what());
  }
  const std::string text = a.json ? diagnose::render_json(r) : diagnose::render_text(r);
  if (a.out.empty()) return write_stdout(text);
  write_file_atomic(a.out, text);  // throws on failure: main prints it, exit 1
  return kExitOk;
}

/// The subcommand, with its description and its footer (the seed model, the paths, the report and the verdict).
CLI::App* add_subcommand(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "diagnose",
      "Which boundary (data, compute, optimization) your data crosses first when a small dense network trains on "
      "it in fp16/bf16, and the smallest fix. Features and labels are .npy files (numpy.save). Exit 0 for a "
      "completed diagnosis whatever the verdict, 2 for bad input.");
  sub->footer(
      "Model: Dense(hidden, ReLU) -> Dense(1), squared loss averaged per batch, Glorot-uniform weights from --seed, "
      "trained as the frameworks train: mini-batches of --batch rows (default 32, Keras fit's default) in order or "
      "--shuffle'd, with dynamic loss scaling simulated with Keras's (2^15) and PyTorch's (2^16) defaults. Run "
      "with halfmap's kernels in f32 (the baseline) and once per precision mode on its best ISA (--all-paths: "
      "every ISA and the scalar ref twins). Which path models which framework on a CPU, as far as halfmap's peer "
      "benchmarks and sweep paths (src/peers) show: f16_f32acc (marked *; fp16 storage, f32 accumulation) is what an "
      "f32-accumulating GEMM does (a GPU's under Keras mixed_float16; not measured here); f16 rounds every "
      "operation to fp16, as Eigen's half arithmetic does in the Eigen::half GEMM that TensorFlow's CPU kernels "
      "build on (how closely they agree is not measured yet); bf16_f32acc accumulates in f32 like oneDNN's bf16 "
      "matmul, and both flush subnormals: halfmap's avx512bf16 kernel through vdpbf16ps, oneDNN's matmul with "
      "vdpbf16ps or AMX (its peer check shows a subnormal result flushed on Zen 4 and on an AMX Xeon); the ref twin "
      "keeps them. PyTorch's CPU kernels are not measured. "
      "Report: data (per column: NaN/inf and the first row, range, p01/p99, what fp16 and bf16 storage overflow, "
      "flush or make subnormal), compute (each path's forward over every batch; the first stage and row that is "
      "not finite), optimization (per-batch gradients at loss scales 1, 2^15, 2^16: underflow share pooled, "
      "median and max over batches, the worst batches; the loss-scale window of nearly all batches; the "
      "simulated scalers and their outcome). Verdict, first match: non-finite data (named by column and row); "
      "the f32 baseline fails; data overflows or flushes in fp16/bf16 storage; a low-precision forward is "
      "non-finite (compute); a simulated scaler collapses, keeps skipping after its back-off, or settles where "
      "gradients underflow (optimization); ok (a scaler that backs off and then trains is not a fault: a note "
      "says so). A note also says what happens without loss scaling (S = 1). With --model net.onnx the network is "
      "yours (include/halfmap/diagnose_model.hpp): its forward on the features, layer by layer, on the f32 baseline "
      "and each mode's best ISA (largest |y| and headroom, non-finite and collapsed outputs, per layer), and with "
      "--loss mse|xent --labels its gradients per layer at S = 1, 2^15, 2^16 and each layer's loss-scale window "
      "(--train STEPS: the scalers simulated on the network from its weights); the verdict names the first layer "
      "and boundary.");
  return sub;
}

/// The inputs: the features, the labels or the network, and the report's form and loss.
void add_input_options(CLI::App* sub, DiagnoseArgs& a) {
  sub->add_option("--features", a.features, "Features: a .npy file, rows x columns (1-D: one column)")->required();
  sub->add_option("--labels", a.labels,
                  "Labels: a .npy file, one per row (shape (n,) or (n, 1); with --model --loss mse: rows x the "
                  "network's outputs); required without --model");
  sub->add_option("--model", a.model,
                  fmt::format("Diagnose this ONNX network (torch.onnx.export, tf2onnx) instead of the seed model: its "
                              "forward on the features, layer by layer, on every path. It reads {}.",
                              onnx::supported_ops()));
  sub->add_flag("--json", a.json, "Print the report as JSON (keys: include/halfmap/diagnose.hpp)");
  a.loss_option = sub->add_option("--loss", a.loss_text,
                                  "With --model: the loss whose gradients are diagnosed, mse (labels of the network's "
                                  "output width) or xent (integer classes; a final Softmax is the loss's own); "
                                  "default: none, the forward only");
}

/// The seed model's and the training simulation's options (--lr and --growth-interval also shape --train).
void add_training_options(CLI::App* sub, DiagnoseArgs& a) {
  a.seed_model_options.push_back(
      sub->add_option("--hidden", a.o.hidden,
                      fmt::format("Hidden units of Dense(hidden, ReLU) (default 16, 1 to {})", diagnose::kMaxHidden)));
  a.seed_model_options.push_back(
      sub->add_option("--seed", a.o.seed, "Seed of the Glorot-uniform initial weights (default 1)"));
  sub->add_option(
      "--batch", a.o.batch,
      "Rows per mini-batch, or sequences for a --model of sequences (default 32, Keras fit's default; 0: all rows)");
  a.steps_option = sub->add_option("--steps", a.steps,
                                   fmt::format("Training steps of the loss-scaling simulation (default {}, 1 to {})",
                                               diagnose::kDefaultSteps, diagnose::kMaxSteps));
  a.epochs_option =
      sub->add_option("--epochs", a.epochs,
                      fmt::format("Train the simulation for this many epochs instead of --steps (not both; at most "
                                  "{} steps in all)",
                                  diagnose::kMaxSteps));
  a.shuffle_option = sub->add_option(
      "--shuffle", a.shuffle, "Shuffle the rows anew each epoch of the simulation, with this seed (default: in order)");
  a.lr_option =
      sub->add_option("--lr", a.o.lr, "SGD learning rate of the simulation (default 0.01, above 0 and at most 1e6)");
  a.seed_model_options.push_back(a.lr_option);
  a.train_option = sub->add_option(
      "--train", a.train,
      fmt::format("With --model and --loss: train the network from the file's weights for this many steps (1 to {}) "
                  "on every low-precision path with Keras's and PyTorch's dynamic loss scaling (--lr, "
                  "--growth-interval apply)",
                  diagnose::kMaxSteps));
  a.growth_option =
      sub->add_option("--growth-interval", a.growth_interval,
                      fmt::format("Good steps before the loss scale doubles (default: the frameworks' {}, 1 to {})",
                                  loss_scale::kGrowthInterval, diagnose::kMaxSteps));
}

/// How the diagnosis runs and judges: the underflow share, the paths, the threads and where the report goes.
void add_run_options(CLI::App* sub, DiagnoseArgs& a) {
  sub->add_option("--underflow-share", a.o.underflow_share,
                  "Share of the gradients (non-zero in f32) that may be zero before underflow counts (default 0.01, "
                  "in [0, 1))");
  sub->add_flag("--all-paths", a.o.all_paths,
                "Run every enabled path: the lower ISAs and the scalar ref twins of each mode too");
  sub->add_option("--path", a.o.path_first,
                  "Put this path (<mode>/<isa>, e.g. f16/avx512fp16) first, adding it if it is not a default one");
  sub->add_option("--threads", a.o.threads,
                  "Threads (default: HALFMAP_THREADS, else 0: one per hardware thread; at most 1024)");
  sub->add_option("--out", a.out, "Write the report to this file (through a temporary file) instead of stdout");
}

}  // namespace

Command add_diagnose_command(CLI::App& parent) {
  CLI::App* sub = add_subcommand(parent);
  auto a = std::make_shared<DiagnoseArgs>();
  add_input_options(sub, *a);
  add_training_options(sub, *a);
  add_run_options(sub, *a);
  for (CLI::Option* opt : {a->steps_option, a->epochs_option, a->shuffle_option, a->growth_option})
    a->seed_model_options.push_back(opt);
  return {sub, [a] { return run_diagnose(*a); }};
}

}  // namespace halfmap::cli
