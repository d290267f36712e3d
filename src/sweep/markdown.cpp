// thresholds.md: the thresholds.json document as Markdown tables, one section per op, then the recipes of the
// kernels listed.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "halfmap/kernel_spec.hpp"
#include "halfmap/loss_scale.hpp"
#include "halfmap/registry.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

std::string window_text(const json& w) {
  if (w["empty"].get<bool>()) {
    return fmt::format("empty (S_min {}, S_max {})", w["S_min"]["text"].get<std::string>(),
                       w["S_max"]["text"].get<std::string>());
  }
  return fmt::format("[{}, {}]", w["S_min"]["text"].get<std::string>(), w["S_max"]["text"].get<std::string>());
}

namespace {

/// Appends lines to a Markdown text.
struct Lines {
  std::string md;
  void operator()(std::string_view s) {
    md += s;
    md += '\n';
  }
};

/// The title, the settings and how to read the tables.
void preamble(Lines& line, const json& st) {
  line("# halfmap sweep: thresholds");
  line("");
  line(fmt::format("Seed {}, distributions {}, sizes: n = {}, dense M×K×N = {}×{}×{}, softmax {}×{}, xent {}×{}.",
                   st["seed"].dump(), st["dists"].dump(), st["sizes"]["n"].dump(),
                   st["sizes"]["dense_mkn"][0].dump(), st["sizes"]["dense_mkn"][1].dump(),
                   st["sizes"]["dense_mkn"][2].dump(), st["sizes"]["softmax_rows_cols"][0].dump(),
                   st["sizes"]["softmax_rows_cols"][1].dump(), st["sizes"]["xent_rows_cols"][0].dump(),
                   st["sizes"]["xent_rows_cols"][1].dump()));
  auto g = [&st](const char* grid, const char* key) { return num(st[grid][key].get<double>()); };
  line(fmt::format("Input scale s from 2^{} to 2^{} in steps of 2^{}; loss scale S from 2^{} to 2^{} in steps of "
                   "2^{}; underflow share {}; thresholds bisected to a log2 width of 2^-10.",
                   g("s_grid", "min_log2"), g("s_grid", "max_log2"), g("s_grid", "step_log2"),
                   g("S_grid", "min_log2"), g("S_grid", "max_log2"), g("S_grid", "step_log2"),
                   num(st["underflow_share"].get<double>())));
  line("");
  line(fmt::format(
      "A value is printed as 2^log2 (scale). `≤ 2^a`, `< 2^a`, `≥ 2^b`, `> 2^b`: the threshold lies beyond the "
      "grid (a = its first point, b = its last). s_underflow: the largest s at which the forward is still lost to "
      "underflow (`< 2^a`: none on the grid); s_overflow: the smallest s at which a forward output is inf or NaN; "
      "storage: the same for the inputs themselves when stored. Loss-scale window [S_min, S_max] at input scale s: "
      "S_max is the largest S with every gradient finite, S_min the smallest S at which no more than the underflow "
      "share of the gradients flush to zero. Keras starts at 2^{}, PyTorch at 2^{}: `in`/`out` says whether that "
      "loss scale gives an `ok` gradient at this s (evaluated directly). See README.md, \"Results: how to read the "
      "sweep\".",
      loss_scale::kKerasInitialLog2, loss_scale::kPytorchInitialLog2));
}

/// The thresholds of every item of one op; returns whether any of them has loss-scale windows.
bool op_table(Lines& line, const json& results, const std::string& op) {
  line("");
  line(fmt::format("## {}", op));
  line("");
  line("| kernel | mode | isa | dist | s_underflow | s_overflow | storage underflow | storage overflow |");
  line("| --- | --- | --- | --- | --- | --- | --- | --- |");
  bool grad = false;
  for (const json& q : results) {
    if (q["op"].get<std::string>() != op) continue;
    grad = grad || q.contains("loss_scale_windows");
    line(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |", q["kernel"].get<std::string>(),
                     q["mode"].get<std::string>(), q["isa"].get<std::string>(), q["dist"].get<std::string>(),
                     q["s_underflow"]["text"].get<std::string>(), q["s_overflow"]["text"].get<std::string>(),
                     q["storage_underflow"]["text"].get<std::string>(),
                     q["storage_overflow"]["text"].get<std::string>()));
  }
  return grad;
}

/// The loss-scale windows of every item of one op, one column per input scale of `window_log2_s`.
void windows_table(Lines& line, const json& st, const json& results, const std::string& op) {
  line("");
  line(fmt::format("Loss-scale windows of {} (forward status at s in parentheses when it is not ok):", op));
  line("");
  std::string head = "| kernel | dist |";
  std::string rule = "| --- | --- |";
  for (const json& l : st["window_log2_s"]) {
    head += fmt::format(" s = 2^{} |", num(l.get<double>()));
    rule += " --- |";
  }
  line(head);
  line(rule);
  const std::string keras = keras_key(), pytorch = pytorch_key();
  for (const json& q : results) {
    if (q["op"].get<std::string>() != op || !q.contains("loss_scale_windows")) continue;
    std::string row = fmt::format("| {} | {} |", q["kernel"].get<std::string>(), q["dist"].get<std::string>());
    for (const json& w : q["loss_scale_windows"]) {
      const std::string fs = w["forward_status"].get<std::string>();
      row += fmt::format(" {} K {} P {}{} |", window_text(w), w[keras].get<std::string>() == "inside" ? "in" : "out",
                         w[pytorch].get<std::string>() == "inside" ? "in" : "out",
                         fs == "ok" ? "" : fmt::format(" ({})", fs));
    }
    line(row);
  }
}

/// What it takes to recompute the numbers of every kernel listed (include/halfmap/kernel_spec.hpp), from this
/// build's registry. A kernel this build lacks (a merge of another machine's shards) is named, without its spec.
void kernels_section(Lines& line, const json& results) {
  std::vector<const Kernel*> ks;
  std::vector<std::string> seen, missing;
  for (const json& r : results) {
    for (const char* key : {"kernel", "grad_kernel"}) {
      if (!r[key].is_string()) continue;
      const std::string name = r[key].get<std::string>();
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      if (const Kernel* k = find_kernel(name)) ks.push_back(k);
      else missing.push_back(name);
    }
  }
  line("");
  line("## Kernels: how to recompute these numbers");
  line("");
  line("From halfmap's kernel registry (`halfmap info --kernel-spec` lists every kernel of a build): the storage "
       "and accumulator types, the fp16 lanes and the order they are folded in, the kind of fp16 FMA, and the "
       "recipe, every step at which an intermediate is rounded. The f16 family (modes f16 and f16_model) is bit "
       "for bit the f16 model (src/models/) run with the kernel's lanes and FMA.");
  line("");
  line.md += kernel_spec_table(ks);
  line("");
  line.md += kernel_recipe_table(ks);
  if (!missing.empty()) {
    std::string names;
    for (const std::string& n : missing) names += (names.empty() ? "" : ", ") + n;
    line("");
    line(fmt::format("Not in this build (merged from another machine's shards): {}.", names));
  }
}

}  // namespace

std::string thresholds_markdown(const json& doc) {
  const json& st = doc["settings"];
  const json& results = doc["results"];
  Lines line;
  preamble(line, st);
  std::string op;
  for (const json& r : results) {
    if (r["op"].get<std::string>() == op) continue;
    op = r["op"].get<std::string>();
    if (op_table(line, results, op)) windows_table(line, st, results, op);
  }
  kernels_section(line, results);
  return line.md;
}

}  // namespace halfmap::sweep
