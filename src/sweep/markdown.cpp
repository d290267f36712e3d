// thresholds.md: the thresholds.json document as Markdown tables, one section per op: its boundaries (onset and
// saturation), how many binades later than fp16 bf16 and f32 break, its loss-scale windows; then the recipes
// of the kernels listed.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "halfmap/kernel_spec.hpp"
#include "halfmap/loss_scale.hpp"
#include "halfmap/registry.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

namespace {

/// A window's S_max with what crossed just above it (format 4): "2^25.7178 (5.5185e+07) · gradient dX".
std::string s_max_text(const json& w) {
  const json& b = w["S_max"];
  if (!b.contains("crossed")) return b["text"].get<std::string>();
  return fmt::format("{} · {}{}", b["text"].get<std::string>(), b["crossed"].get<std::string>(),
                     b.contains("tensor") ? fmt::format(" {}", b["tensor"].get<std::string>()) : std::string());
}

}  // namespace

std::string window_text(const json& w) {
  if (w["empty"].get<bool>()) {
    return fmt::format("empty (S_min {}, S_max {})", w["S_min"]["text"].get<std::string>(), s_max_text(w));
  }
  std::string t = fmt::format("[{}, {}]", w["S_min"]["text"].get<std::string>(), s_max_text(w));
  // Good S outside the window: the hull of every good S and the bad stretches inside it.
  const json& bad = w.value("bad_inside_log2", json::array());
  if (bad.empty()) return t;
  t += fmt::format(", good also in [2^{}, 2^{}] but bad at", num(w["good_hull_log2"][0].get<double>()),
                   num(w["good_hull_log2"][1].get<double>()));
  for (std::size_t i = 0; i < bad.size() && i < 3; ++i) {
    t += fmt::format(" 2^{}..2^{}", num(bad[i][0].get<double>()), num(bad[i][1].get<double>()));
  }
  if (bad.size() > 3) t += fmt::format(" (+{} more)", bad.size() - 3);
  return t;
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
                   st["seed"].dump(), st["dists"].dump(), st["sizes"]["n"].dump(), st["sizes"]["dense_mkn"][0].dump(),
                   st["sizes"]["dense_mkn"][1].dump(), st["sizes"]["dense_mkn"][2].dump(),
                   st["sizes"]["softmax_rows_cols"][0].dump(), st["sizes"]["softmax_rows_cols"][1].dump(),
                   st["sizes"]["xent_rows_cols"][0].dump(), st["sizes"]["xent_rows_cols"][1].dump()));
  if (st["sizes"].contains("dense_amplifying_mkn")) {
    const json& a = st["sizes"]["dense_amplifying_mkn"];
    line(
        fmt::format("dense_fwd_amplifying: M×K×N = {}×{}×{}, X = ReLU of the base draws (non-negative, scaled by s), "
                    "W the base draws unscaled (unit variance), forward only.",
                    a[0].dump(), a[1].dump(), a[2].dump()));
  }
  if (st["sizes"].contains("norm_rows_cols") && st.contains("eps")) {
    line(
        fmt::format("layernorm and rmsnorm: rows × cols = {}×{}, ε = {:g} (layernorm) and {:g} (rmsnorm); γ = 1 + "
                    "0.1 z and β = 0.1 z' unscaled, x scaled by s.",
                    st["sizes"]["norm_rows_cols"][0].dump(), st["sizes"]["norm_rows_cols"][1].dump(),
                    st["eps"]["layernorm"].get<double>(), st["eps"]["rmsnorm"].get<double>()));
  }
  auto g = [&st](const char* grid, const char* key) { return num(st[grid][key].get<double>()); };
  std::string wide;
  if (st.contains("wide_s_grid")) {
    wide = fmt::format(" (2^{} to 2^{} in steps of 2^{} for {})", g("wide_s_grid", "min_log2"),
                       g("wide_s_grid", "max_log2"), g("wide_s_grid", "step_log2"),
                       st["wide_s_grid"]["applies_to"].get<std::string>());
  }
  const json& lat = st["threshold_lattice_log2"];
  line(fmt::format(
      "Input scale s from 2^{} to 2^{} in steps of 2^{}{}; loss scale S from 2^{} to 2^{} in steps of "
      "2^{}; underflow share {}. Thresholds are points of the lattice log2 s = k·2^{} (windows: log2 S = "
      "k·2^{}), whatever the grid.",
      g("s_grid", "min_log2"), g("s_grid", "max_log2"), g("s_grid", "step_log2"), wide, g("S_grid", "min_log2"),
      g("S_grid", "max_log2"), g("S_grid", "step_log2"), num(st["underflow_share"].get<double>()),
      num(std::log2(lat["s"]["resolution"].get<double>())), num(std::log2(lat["S"]["resolution"].get<double>()))));
  line("");
  line(fmt::format(
      "A value is printed as 2^log2 (scale). `≤ 2^a`, `< 2^a`, `≥ 2^b`, `> 2^b`: the threshold lies beyond the "
      "item's grid (a = its first point, b = its last). Overflow (s_overflow: a forward output is inf or NaN): the "
      "onset is the smallest s at which it happens, the saturation the s from which it happens at every s up to "
      "the grid's end. Underflow (s_underflow: the forward is lost to underflow, or has vanished: every term of every "
      "output lost a factor to flushing when stored, or its exact value rounds to zero in the output type; surviving "
      "inputs that cancel are not an underflow): the onset is the largest s at which it happens, the saturation the s "
      "up to which it happens at every s from the grid's start (`< 2^a`: never "
      "from the start), every lattice point from the last vanished one evaluated. Each onset names what crossed "
      "there: `· input X` (an input, when stored; `= storage`: the onset is the storage onset), `· intermediate "
      "var` (a statistic the kernel reports), `· output` (the exact result itself does not fit the output type) or "
      "`· arithmetic` (the path's own arithmetic crossed first; docs/thresholds.md, \"What crossed\"). Between "
      "saturation and onset lies "
      "the band where it comes and goes. A sum's onset is where its last input flushes: a sum of stored inputs is "
      "exact while any survive, so only storage loses it (docs/thresholds.md, \"What a sum's underflow onset is\"). "
      "Storage: the same for "
      "the inputs themselves when stored, which switch once (onset = saturation). Loss-scale window [S_min, S_max] "
      "at input scale s: the largest interval of S with every gradient finite and no more than the underflow share "
      "of them flushed to zero, S_max followed by the tensor that is first inf or NaN above it (`· gradient dW`); good "
      "S outside it are listed with the bad stretches between. Keras starts at 2^{}, "
      "PyTorch at 2^{}: `in`/`out` says whether that loss scale gives an `ok` gradient at this s (evaluated "
      "directly). See docs/sweep.md and docs/thresholds.md.",
      loss_scale::kKerasInitialLog2, loss_scale::kPytorchInitialLog2));
}

}  // namespace

std::string crossing_text(const json& boundary) {
  const json& on = boundary["onset"];
  if (!on.contains("crossed")) return {};
  return fmt::format(" · {}{}{}", on["crossed"].get<std::string>(),
                     on.contains("tensor") ? fmt::format(" {}", on["tensor"].get<std::string>()) : std::string(),
                     boundary.value("equals_storage", false) ? " = storage" : "");
}

namespace {

/// The thresholds of every item of one op; returns whether any of them has loss-scale windows.
bool op_table(Lines& line, const json& results, const std::string& op) {
  line("");
  line(fmt::format("## {}", op));
  line("");
  line(
      "| kernel | mode | isa | dist | s_underflow saturation | s_underflow onset | s_overflow onset | "
      "s_overflow saturation | storage underflow | storage overflow |");
  line("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  bool grad = false;
  auto t = [](const json& b, const char* which) { return b[which]["text"].get<std::string>(); };
  for (const json& q : results) {
    if (q["op"].get<std::string>() != op) continue;
    grad = grad || q.contains("loss_scale_windows");
    line(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |", q["kernel"].get<std::string>(),
                     q["mode"].get<std::string>(), q["isa"].get<std::string>(), q["dist"].get<std::string>(),
                     t(q["s_underflow"], "saturation"), t(q["s_underflow"], "onset") + crossing_text(q["s_underflow"]),
                     t(q["s_overflow"], "onset") + crossing_text(q["s_overflow"]), t(q["s_overflow"], "saturation"),
                     t(q["storage_underflow"], "onset"), t(q["storage_overflow"], "onset")));
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
      if (const Kernel* k = find_kernel(name))
        ks.push_back(k);
      else
        missing.push_back(name);
    }
  }
  line("");
  line("## Kernels: how to recompute these numbers");
  line("");
  line(
      "From halfmap's kernel registry (`halfmap info --kernel-spec` lists every kernel of a build): the storage "
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

/// A found onset's log2 of the first item of op's results with `dist` whose field `key` ("mode" or "kernel") is
/// `value`, or nothing.
std::optional<double> onset_log2(const json& results, const std::string& op, const char* key, const std::string& value,
                                 const std::string& dist, const char* boundary) {
  for (const json& q : results) {
    if (q["op"] != op || q[key] != value || q["dist"] != dist) continue;
    const json& b = q[boundary]["onset"];
    if (b["kind"] == "found") return b["log2"].get<double>();
    return std::nullopt;
  }
  return std::nullopt;
}

/// How many binades later than fp16 storage (f16_f32acc, its first path) bf16 and f32 overflow and underflow.
void binades_table(Lines& line, const json& results, const std::string& op) {
  std::vector<std::string> dists;
  for (const json& q : results) {
    if (q["op"] == op && std::find(dists.begin(), dists.end(), q["dist"]) == dists.end()) dists.push_back(q["dist"]);
  }
  std::string rows;
  for (const std::string& d : dists) {
    for (const char* mode : {"bf16_f32acc", "f32"}) {
      std::string cells;
      bool any = false;
      for (const char* b : {"s_overflow", "s_underflow", "storage_overflow", "storage_underflow"}) {
        const auto ref = onset_log2(results, op, "mode", "f16_f32acc", d, b);
        const auto got = onset_log2(results, op, "mode", mode, d, b);
        any = any || (ref && got);
        cells += ref && got ? fmt::format(" {:+.2f} |", *got - *ref) : std::string(" — |");
      }
      if (any) rows += fmt::format("| {} | {} |{}\n", d, mode, cells);
    }
  }
  if (rows.empty()) return;
  line("");
  line(
      fmt::format("Binades beyond fp16 storage for {} (onset of the first path of the mode minus that of the first "
                  "f16_f32acc path; — where either lies beyond its grid):",
                  op));
  line("");
  line("| dist | mode | s_overflow | s_underflow | storage overflow | storage underflow |");
  line("| --- | --- | --- | --- | --- | --- |");
  line.md += rows;
}

/// fp16 arithmetic against f32 arithmetic on the same fp16 storage, per path that has both: how many binades
/// the f32 statistics and accumulators (f16_f32acc) buy over fp16 ones (f16, or the f16 model on ref), for the
/// forward's overflow and underflow onsets. For layernorm and rmsnorm it is what computing the statistics in f32
/// buys; for the sums what an f32 accumulator does.
void fp16_arith_table(Lines& line, const json& results, const std::string& op) {
  std::string rows;
  for (const json& q : results) {
    if (q["op"] != op || (q["mode"] != "f16" && q["mode"] != "f16_model")) continue;
    const std::string isa = q["isa"], dist = q["dist"], kernel = q["kernel"];
    std::string twin;
    for (const json& t : results) {
      if (t["op"] == op && t["isa"] == isa && t["mode"] == "f16_f32acc") twin = t["kernel"];
    }
    if (twin.empty()) continue;
    std::string cells;
    bool any = false;
    for (const char* b : {"s_overflow", "s_underflow"}) {
      const auto f16 = onset_log2(results, op, "kernel", kernel, dist, b);
      const auto f32 = onset_log2(results, op, "kernel", twin, dist, b);
      cells += f16 ? fmt::format(" 2^{:.4f} |", *f16) : std::string(" — |");
      cells += f32 ? fmt::format(" 2^{:.4f} |", *f32) : std::string(" — |");
      const bool both = f16 && f32;
      any = any || both;
      cells += both ? fmt::format(" {:+.2f} |", std::string_view(b) == "s_overflow" ? *f32 - *f16 : *f16 - *f32)
                    : std::string(" — |");
    }
    if (any) rows += fmt::format("| {} | {} | {} |{}\n", dist, isa, kernel, cells);
  }
  if (rows.empty()) return;
  line("");
  line(
      fmt::format("fp16 arithmetic against f32 arithmetic on fp16 storage for {}: the forward's onsets of the "
                  "f16 kernel and of the f16_f32acc kernel of the same path, and the binades the f32 statistics "
                  "and accumulators buy (overflow: f32 onset minus f16 onset; underflow: f16 onset minus f32 "
                  "onset; — where either lies beyond its grid):",
                  op));
  line("");
  line(
      "| dist | isa | f16 kernel | f16 overflow | f16_f32acc overflow | binades bought | f16 underflow | "
      "f16_f32acc underflow | binades bought |");
  line("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  line.md += rows;
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
    const bool grad = op_table(line, results, op);
    binades_table(line, results, op);
    fp16_arith_table(line, results, op);
    if (grad) windows_table(line, st, results, op);
  }
  kernels_section(line, results);
  if (doc.contains("fp8")) line.md += fp8_markdown(doc["fp8"]);
  return line.md;
}

}  // namespace halfmap::sweep
