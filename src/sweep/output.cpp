// The sweep's files: cells.csv, thresholds.json, thresholds.md, meta.json (and shard.json for a shard), the merge of
// shards and the cross-machine comparison. cells.csv and thresholds.json hold no date, timing or thread count,
// so they are byte-identical for the same options whatever the threads, shards or run; meta.json holds those.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "halfmap/atomic_file.hpp"
#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/sweep.hpp"

namespace halfmap::sweep {

using json = nlohmann::ordered_json;

// ---- files -----------------------------------------------------------------------------------------------------

namespace {

void make_dirs(const std::string& dir) {
  std::string part;
  std::stringstream ss(dir);
  std::string seg;
  if (!dir.empty() && dir[0] == '/') part = "/";
  while (std::getline(ss, seg, '/')) {
    if (seg.empty()) continue;
    part += seg;
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error(fmt::format("cannot create the folder {}: {}", part, std::strerror(errno)));
    }
    part += '/';
  }
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// ---- numbers ------------------------------------------------------------------------------------------------------

/// Shortest round-trip text of a double (fmt's `{}`), the same on every machine; "inf", "-inf", "nan".
std::string num(double v) { return fmt::format("{}", v); }
std::string opt_num(const std::optional<double>& v) { return v ? num(*v) : std::string(); }

/// JSON cannot hold inf or NaN: those become null (they do not occur in thresholds; kept safe anyway).
json jnum(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json grid_json(const Grid& g) {
  return {{"min_log2", g.lo}, {"max_log2", g.hi}, {"step_log2", g.step}, {"points", g.size()}};
}

json settings_json(const Options& o) {
  json s;
  s["seed"] = o.seed;
  json d = json::array();
  for (Dist x : o.dists) d.push_back(dist_name(x));
  s["dists"] = d;
  const Sizes& z = o.sizes;
  s["sizes"] = {{"n", z.n},
                {"dense_mkn", {z.dense_m, z.dense_k, z.dense_n}},
                {"softmax_rows_cols", {z.softmax_rows, z.softmax_cols}},
                {"xent_rows_cols", {z.xent_rows, z.xent_cols}}};
  s["s_grid"] = grid_json(o.s_grid);
  s["S_grid"] = grid_json(o.S_grid);
  s["underflow_share"] = o.underflow_share;
  json tol;
  for (Mode m : {Mode::f32, Mode::f16_f32acc, Mode::f16, Mode::f16_model, Mode::bf16_f32acc}) {
    tol[std::string(mode_name(m))] = forward_tolerance(m);
  }
  s["forward_tolerance"] = tol;
  s["bisection_precision_log2"] = 0x1p-10;
  json wl = json::array();
  for (double l : kWindowLog2s) wl.push_back(l);
  s["window_log2_s"] = wl;
  s["loss_scales"] = {{"keras", kKerasLossScale}, {"pytorch", kPytorchLossScale}};
  if (o.plant_nan) s["plant_nan"] = *o.plant_nan;
  if (!o.base_override.empty()) s["base_override"] = true;
  json ks = json::array();
  for (const Experiment& e : o.experiments) ks.push_back(e.fwd.name);
  s["kernels"] = ks;
  return s;
}

json bound_json(const Bound& b) {
  json j;
  switch (b.kind) {
    case Bound::Kind::found:
      j["kind"] = "found";
      j["value"] = jnum(b.value);
      j["log2"] = jnum(b.log2);
      j["bracket_log2"] = {jnum(b.bracket_lo), jnum(b.bracket_hi)};
      break;
    case Bound::Kind::below_grid:
    case Bound::Kind::above_grid:
      j["kind"] = b.kind == Bound::Kind::below_grid ? "below_grid" : "above_grid";
      j["grid_limit"] = jnum(b.value);
      j["grid_limit_log2"] = jnum(b.log2);
      break;
  }
  j["text"] = b.text;
  return j;
}

json item_json(const Options& o, const ItemResult& it) {
  const Experiment& e = o.experiments[it.experiment];
  json j;
  j["kernel"] = e.fwd.name;
  j["op"] = op_name(e.fwd.op);
  j["mode"] = mode_name(e.fwd.mode);
  j["isa"] = isa_name(e.fwd.isa);
  j["storage"] = dtype_name(e.fwd.storage);
  j["grad_kernel"] = e.bwd ? json(e.bwd->name) : json(nullptr);
  j["dist"] = dist_name(it.dist);
  j["forward_tolerance"] = forward_tolerance(e.fwd.mode);
  const Thresholds& t = it.thresholds;
  j["s_underflow"] = bound_json(t.s_underflow);
  j["s_overflow"] = bound_json(t.s_overflow);
  j["storage_underflow"] = bound_json(t.storage_underflow);
  j["storage_overflow"] = bound_json(t.storage_overflow);
  if (e.has_gradient()) {
    json ws = json::array();
    for (const Window& w : t.windows) {
      ws.push_back({{"s", jnum(w.s)},
                    {"log2_s", jnum(w.log2_s)},
                    {"forward_status", status_name(w.forward_status)},
                    {"S_min", bound_json(w.S_min)},
                    {"S_max", bound_json(w.S_max)},
                    {"empty", w.empty},
                    {"keras_2^15", w.keras_inside ? "inside" : "outside"},
                    {"pytorch_2^16", w.pytorch_inside ? "inside" : "outside"}});
    }
    j["loss_scale_windows"] = ws;
  }
  return j;
}

std::string thresholds_text(const json& settings, const json& results) {
  json doc;
  doc["format"] = "halfmap-sweep-thresholds-1";
  doc["settings"] = settings;
  doc["results"] = results;
  return doc.dump(2) + "\n";
}

// ---- thresholds.md ------------------------------------------------------------------------------------------------

std::string window_text(const json& w) {
  if (w["empty"].get<bool>()) {
    return fmt::format("empty (S_min {}, S_max {})", w["S_min"]["text"].get<std::string>(),
                       w["S_max"]["text"].get<std::string>());
  }
  return fmt::format("[{}, {}]", w["S_min"]["text"].get<std::string>(), w["S_max"]["text"].get<std::string>());
}

std::string thresholds_markdown(const json& doc) {
  const json& st = doc["settings"];
  std::string md;
  auto line = [&md](std::string_view s) {
    md += s;
    md += '\n';
  };
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
  line("A value is printed as 2^log2 (scale). `≤ 2^a`, `< 2^a`, `≥ 2^b`, `> 2^b`: the threshold lies beyond the "
       "grid (a = its first point, b = its last). s_underflow: the largest s at which the forward is still lost to "
       "underflow (`< 2^a`: none on the grid); s_overflow: the smallest s at which a forward output is inf or NaN; "
       "storage: the same for the inputs themselves when stored. Loss-scale window [S_min, S_max] at input scale s: "
       "S_max is the largest S with every gradient finite, S_min the smallest S at which no more than the underflow "
       "share of the gradients flush to zero. Keras starts at 2^15, PyTorch at 2^16: `in`/`out` says whether that "
       "loss scale gives an `ok` gradient at this s (evaluated directly). See README.md, \"Results: how to read the "
       "sweep\".");
  std::string op;
  for (const json& r : doc["results"]) {
    if (r["op"].get<std::string>() == op) continue;
    op = r["op"].get<std::string>();
    line("");
    line(fmt::format("## {}", op));
    line("");
    line("| kernel | mode | isa | dist | s_underflow | s_overflow | storage underflow | storage overflow |");
    line("| --- | --- | --- | --- | --- | --- | --- | --- |");
    bool grad = false;
    for (const json& q : doc["results"]) {
      if (q["op"].get<std::string>() != op) continue;
      grad = grad || q.contains("loss_scale_windows");
      line(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |", q["kernel"].get<std::string>(),
                       q["mode"].get<std::string>(), q["isa"].get<std::string>(), q["dist"].get<std::string>(),
                       q["s_underflow"]["text"].get<std::string>(), q["s_overflow"]["text"].get<std::string>(),
                       q["storage_underflow"]["text"].get<std::string>(),
                       q["storage_overflow"]["text"].get<std::string>()));
    }
    if (!grad) continue;
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
    for (const json& q : doc["results"]) {
      if (q["op"].get<std::string>() != op || !q.contains("loss_scale_windows")) continue;
      std::string row = fmt::format("| {} | {} |", q["kernel"].get<std::string>(), q["dist"].get<std::string>());
      for (const json& w : q["loss_scale_windows"]) {
        const std::string fs = w["forward_status"].get<std::string>();
        row += fmt::format(" {} K {} P {}{} |", window_text(w),
                           w["keras_2^15"].get<std::string>() == "inside" ? "in" : "out",
                           w["pytorch_2^16"].get<std::string>() == "inside" ? "in" : "out",
                           fs == "ok" ? "" : fmt::format(" ({})", fs));
      }
      line(row);
    }
  }
  return md;
}

json meta_json(const Options& o, const Result& r, bool sharded) {
  const CpuFeatures& cpu = cpu_features();
  json j;
  j["halfmap"] = {{"version", HALFMAP_VERSION},
                  {"git_commit", HALFMAP_GIT_COMMIT},
                  {"compiler", HALFMAP_COMPILER},
                  {"cxx_flags", trim(HALFMAP_CXX_FLAGS)}};
#if defined(__x86_64__)
  const char* arch = "x86-64";
#else
  const char* arch = "arm64";
#endif
  j["cpu"] = {{"model", cpu.model},
              {"arch", arch},
              {"features",
               {{"avx2", cpu.avx2},
                {"fma", cpu.fma},
                {"f16c", cpu.f16c},
                {"avx512f", cpu.avx512f},
                {"avx512bw", cpu.avx512bw},
                {"avx512vl", cpu.avx512vl},
                {"avx512_bf16", cpu.avx512_bf16},
                {"avx512_fp16", cpu.avx512_fp16},
                {"asimd", cpu.asimd},
                {"fphp", cpu.fphp},
                {"asimdhp", cpu.asimdhp},
                {"asimdfhm", cpu.asimdfhm}}}};
  json isas = json::array();
  for (Isa isa : kAllIsas) {
    if (isa_enabled(isa)) isas.push_back(isa_name(isa));
  }
  j["isas_enabled"] = isas;
  const std::optional<Isa> cap = isa_cap();
  j["isa_cap"] = cap ? json(isa_name(*cap)) : json(nullptr);
  const FpEnv env = read_fp_env();
  j["fp_env"] = {{"arch", env.arch},   {"ftz", env.ftz},   {"daz", env.daz},       {"fz16", env.fz16},
                 {"raw", env.raw},     {"ieee", env.ieee()}, {"text", env.describe()}};
  j["settings"] = settings_json(o);
  j["shard"] = sharded ? json({o.shard_k, o.shard_n}) : json(nullptr);
  j["threads"] = o.threads;
  j["items"] = r.items.size();
  j["cells"] = r.cells;
  j["seconds"] = std::round(r.seconds * 1000) / 1000;
  j["date"] = utc_now();
  return j;
}

}  // namespace

// ---- cells.csv -------------------------------------------------------------------------------------------------

std::string csv_header() {
  return "kernel,op,mode,isa,storage,grad_kernel,dist,log2_s,s,log2_S,S,status,"
         "in_count,in_nonfinite,in_nonzero,in_inf,in_flushed,in_subnormal,"
         "fwd_count,fwd_nonfinite,fwd_oracle_nonzero,fwd_zero,fwd_rel_err,fwd_value,fwd_oracle,"
         "grad_count,grad_nonfinite,grad_oracle_nonzero,grad_zero,grad_subnormal,"
         "first_nonfinite_stage,first_nonfinite_tensor,first_nonfinite_index,first_nonfinite_value\n";
}

std::string csv_rows(const Options& opts, const ItemResult& item) {
  const Experiment& e = opts.experiments[item.experiment];
  const std::string prefix =
      fmt::format("{},{},{},{},{},{},{},", e.fwd.name, op_name(e.fwd.op), mode_name(e.fwd.mode), isa_name(e.fwd.isa),
                  dtype_name(e.fwd.storage), e.bwd ? e.bwd->name : std::string_view("none"), dist_name(item.dist));
  const bool grad = e.has_gradient();
  fmt::memory_buffer out;
  for (const Cell& c : item.cells) {
    auto o = std::back_inserter(out);
    fmt::format_to(o, "{}{},{},{},{},{},", prefix, num(c.log2_s), num(c.s), opt_num(c.log2_S), opt_num(c.S),
                   status_name(c.status));
    fmt::format_to(o, "{},{},{},{},{},{},", c.in_count, c.in_nonfinite, c.in_nonzero, c.in_inf, c.in_flushed,
                   c.in_subnormal);
    fmt::format_to(o, "{},{},{},{},{},{},{},", c.fwd_count, c.fwd_nonfinite, c.fwd_oracle_nonzero, c.fwd_zero,
                   std::isnan(c.fwd_rel_err) ? std::string() : num(c.fwd_rel_err), opt_num(c.fwd_value),
                   opt_num(c.fwd_oracle));
    if (grad) {
      fmt::format_to(o, "{},{},{},{},{},", c.grad_count, c.grad_nonfinite, c.grad_oracle_nonzero, c.grad_zero,
                     c.grad_subnormal);
    } else {
      fmt::format_to(o, ",,,,,");
    }
    if (c.first_stage.empty()) {
      fmt::format_to(o, "none,none,,\n");  // text columns never empty, so pandas reads them as text throughout
    } else {
      fmt::format_to(o, "{},{},{},{}\n", c.first_stage, c.first_tensor, c.first_index, num(c.first_value));
    }
  }
  return fmt::to_string(out);
}

// ---- writing a run ------------------------------------------------------------------------------------------------

void write_outputs(const std::string& dir, const Options& opts, const Result& result, bool sharded) {
  make_dirs(dir);
  std::string csv = csv_header();
  json results = json::array();
  json items = json::array();
  for (const ItemResult& it : result.items) {
    const std::string rows = csv_rows(opts, it);
    csv += rows;
    results.push_back(item_json(opts, it));
    items.push_back({{"index", it.index}, {"rows", it.cells.size()}});
  }
  const json settings = settings_json(opts);
  const std::string th = thresholds_text(settings, results);
  // The shard manifest first and meta.json last: a folder with meta.json is complete.
  if (sharded) {
    json sj;
    sj["format"] = "halfmap-sweep-shard-1";
    sj["shard"] = {opts.shard_k, opts.shard_n};
    sj["total_items"] = result.total_items;
    sj["items"] = items;
    sj["settings"] = settings;
    write_file_atomic(dir + "/shard.json", sj.dump(2) + "\n");
  }
  write_file_atomic(dir + "/cells.csv", csv);
  write_file_atomic(dir + "/thresholds.json", th);
  write_file_atomic(dir + "/thresholds.md", thresholds_markdown(json::parse(th)));
  write_file_atomic(dir + "/meta.json", meta_json(opts, result, sharded).dump(2) + "\n");
  // A complete run in a folder that once held a shard: the old manifest no longer describes these files.
  if (!sharded) std::remove((dir + "/shard.json").c_str());
}

// ---- merge ---------------------------------------------------------------------------------------------------------

std::string merge(const std::vector<std::string>& dirs, const std::string& out) {
  struct Shard {
    std::string dir;
    json manifest, thresholds, meta;
    std::string csv;
  };
  std::vector<Shard> shards;
  for (const std::string& d : dirs) {
    Shard s;
    s.dir = d;
    const auto man = read_file(d + "/shard.json");
    if (!man) return fmt::format("{} holds no shard.json: it is not the output of 'halfmap sweep --shard K/N'.", d);
    const auto th = read_file(d + "/thresholds.json");
    const auto csv = read_file(d + "/cells.csv");
    const auto meta = read_file(d + "/meta.json");
    if (!th || !csv || !meta) return fmt::format("{} lacks cells.csv, thresholds.json or meta.json.", d);
    try {
      s.manifest = json::parse(*man);
      s.thresholds = json::parse(*th);
      s.meta = json::parse(*meta);
      (void)s.manifest.at("shard").at(1).get<unsigned>();
      (void)s.manifest.at("items").size();
      (void)s.thresholds.at("results").size();
    } catch (const std::exception&) {
      return fmt::format("{} holds a shard.json, thresholds.json or meta.json that is not a sweep's.", d);
    }
    s.csv = *csv;
    shards.push_back(std::move(s));
  }
  if (shards.empty()) return "no shard folder given.";
  const json& settings = shards[0].manifest["settings"];
  const unsigned n = shards[0].manifest["shard"][1].get<unsigned>();
  const std::size_t total = shards[0].manifest["total_items"].get<std::size_t>();
  std::vector<int> seen(n + 1, 0);
  for (const Shard& s : shards) {
    if (s.manifest["settings"] != settings || s.manifest["shard"][1].get<unsigned>() != n ||
        s.manifest["total_items"].get<std::size_t>() != total) {
      return fmt::format("{} is a shard of a different sweep (other options, kernels or shard count) than {}.", s.dir,
                         shards[0].dir);
    }
    const unsigned k = s.manifest["shard"][0].get<unsigned>();
    if (k == 0 || k > n || seen[k]++) return fmt::format("shard {}/{} is given twice or is invalid ({}).", k, n, s.dir);
  }
  for (unsigned k = 1; k <= n; ++k) {
    if (!seen[k]) return fmt::format("shard {}/{} is missing: every shard of the sweep is needed.", k, n);
  }
  const std::string header = csv_header();
  std::vector<std::string> rows(total);
  std::vector<json> results(total);
  std::vector<char> have(total, 0);
  for (const Shard& s : shards) {
    if (s.csv.compare(0, header.size(), header) != 0) return fmt::format("{}/cells.csv has another header.", s.dir);
    std::size_t pos = header.size();
    const json& items = s.manifest["items"];
    if (items.size() != s.thresholds["results"].size()) {
      return fmt::format("{}: shard.json and thresholds.json disagree on the items.", s.dir);
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::size_t idx = items[i]["index"].get<std::size_t>();
      const std::size_t count = items[i]["rows"].get<std::size_t>();
      if (idx >= total || have[idx]) return fmt::format("{}: item {} is out of range or repeated.", s.dir, idx);
      std::size_t end = pos;
      for (std::size_t r = 0; r < count; ++r) {
        end = s.csv.find('\n', end);
        if (end == std::string::npos) return fmt::format("{}/cells.csv is shorter than shard.json says.", s.dir);
        ++end;
      }
      rows[idx] = s.csv.substr(pos, end - pos);
      pos = end;
      results[idx] = s.thresholds["results"][i];
      have[idx] = 1;
    }
    if (pos != s.csv.size()) return fmt::format("{}/cells.csv is longer than shard.json says.", s.dir);
  }
  for (std::size_t i = 0; i < total; ++i) {
    if (!have[i]) return fmt::format("item {} is in no shard.", i);
  }
  std::string csv = header;
  json res = json::array();
  for (std::size_t i = 0; i < total; ++i) {
    csv += rows[i];
    res.push_back(results[i]);
  }
  const std::string th = thresholds_text(settings, res);
  json meta;
  meta["merged_from"] = json::array();
  for (const Shard& s : shards) meta["merged_from"].push_back(s.meta);
  meta["settings"] = settings;
  meta["date"] = utc_now();
  make_dirs(out);
  write_file_atomic(out + "/cells.csv", csv);
  write_file_atomic(out + "/thresholds.json", th);
  write_file_atomic(out + "/thresholds.md", thresholds_markdown(json::parse(th)));
  write_file_atomic(out + "/meta.json", meta.dump(2) + "\n");
  return {};
}

// ---- compare ---------------------------------------------------------------------------------------------------

namespace {

/// Two thresholds agree when both lie beyond the grid on the same side at the same limit, or both were found
/// within twice the bisection precision of each other (2^-9 in log2).
bool bounds_agree(const json& a, const json& b) {
  if (a["kind"] != b["kind"]) return false;
  if (a["kind"].get<std::string>() != "found") return a["grid_limit_log2"] == b["grid_limit_log2"];
  return std::fabs(a["log2"].get<double>() - b["log2"].get<double>()) <= 0x1p-9;
}

const json* window_at(const json& r, double log2_s) {
  if (!r.contains("loss_scale_windows")) return nullptr;
  for (const json& w : r["loss_scale_windows"]) {
    if (w["log2_s"].get<double>() == log2_s) return &w;
  }
  return nullptr;
}

}  // namespace

std::string compare(const std::vector<std::string>& dirs, const std::string& out_file) {
  struct Source {
    std::string label;
    json thresholds;
  };
  std::vector<Source> src;
  for (const std::string& d : dirs) {
    const auto th = read_file(d + "/thresholds.json");
    if (!th) return fmt::format("{} holds no thresholds.json (the output of 'halfmap sweep').", d);
    Source s;
    try {
      s.thresholds = json::parse(*th);
      (void)s.thresholds.at("results").size();
    } catch (const std::exception&) {
      return fmt::format("{}/thresholds.json is not a sweep's thresholds file.", d);
    }
    std::string base = d;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const std::size_t slash = base.find_last_of('/');
    s.label = slash == std::string::npos ? base : base.substr(slash + 1);
    if (const auto meta = read_file(d + "/meta.json")) {
      try {
        const json m = json::parse(*meta);
        // A merged folder's meta.json lists its shards' (the first one names the machine).
        const json& one = m.contains("merged_from") && !m["merged_from"].empty() ? m["merged_from"][0] : m;
        if (one.contains("cpu")) s.label += fmt::format(" ({})", one["cpu"]["model"].get<std::string>());
      } catch (const std::exception&) {
      }
    }
    src.push_back(std::move(s));
  }
  if (src.empty()) return "no result folder given.";

  std::string md = "# halfmap sweep: thresholds across machines\n\n";
  md += "Machines:\n\n";
  for (std::size_t i = 0; i < src.size(); ++i) md += fmt::format("- M{}: {}\n", i + 1, src[i].label);
  bool same_settings = true;
  for (const Source& s : src) {
    json a = s.thresholds["settings"], b = src[0].thresholds["settings"];
    a.erase("kernels");
    b.erase("kernels");
    same_settings = same_settings && a == b;
  }
  md += same_settings ? "\nAll folders were swept with the same settings (seed, sizes, grids, share).\n"
                      : "\n**The folders were swept with different settings: thresholds may differ for that reason "
                        "alone.**\n";
  md += "\nPaths that should agree are those of the same op, mode and distribution (on any ISA or machine). A row "
        "agrees (✓) when each threshold lies within 2^-9 in log2 of the group's first row, or beyond the same grid "
        "limit; `≠ what` marks the thresholds that differ. fp16-accumulating paths (`f16`) differ in FMA kind "
        "(per-op F16C rounds the f32 FMA; native fp16 fuses) and in accumulation order (lanes), so marks there "
        "can be real differences of the hardware rather than errors; `f16_model` is the fused reference.\n";

  std::vector<std::string> ops;
  for (const Source& s : src) {
    for (const json& r : s.thresholds["results"]) {
      const std::string op = r["op"].get<std::string>();
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
  }
  std::size_t disagreeing = 0;
  std::string body;
  for (const std::string& op : ops) {
    body += fmt::format("\n## {}\n\n", op);
    body += "| mode | dist | machine | isa | s_underflow | s_overflow | window at s = 1 | agrees |\n";
    body += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    // Groups by (mode, dist) in order of first appearance.
    std::vector<std::pair<std::string, std::string>> groups;
    for (const Source& s : src) {
      for (const json& r : s.thresholds["results"]) {
        if (r["op"].get<std::string>() != op) continue;
        std::pair<std::string, std::string> g{r["mode"].get<std::string>(), r["dist"].get<std::string>()};
        if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
      }
    }
    for (const auto& [mode, dist] : groups) {
      const json* first = nullptr;
      std::size_t members = 0;
      for (const Source& s : src) {
        for (const json& r : s.thresholds["results"]) {
          if (r["op"] == op && r["mode"] == mode && r["dist"] == dist) ++members;
        }
      }
      bool group_bad = false;
      for (std::size_t m = 0; m < src.size(); ++m) {
        for (const json& r : src[m].thresholds["results"]) {
          if (r["op"] != op || r["mode"] != mode || r["dist"] != dist) continue;
          const json* w = window_at(r, 0.0);
          std::string agrees = "—";
          if (first == nullptr) {
            first = &r;
            if (members > 1) agrees = "✓ (reference)";
          } else {
            std::vector<std::string> diff;
            if (!bounds_agree(r["s_underflow"], (*first)["s_underflow"])) diff.push_back("s_underflow");
            if (!bounds_agree(r["s_overflow"], (*first)["s_overflow"])) diff.push_back("s_overflow");
            const json* w0 = window_at(*first, 0.0);
            if (w != nullptr && w0 != nullptr) {
              if (!bounds_agree((*w)["S_min"], (*w0)["S_min"])) diff.push_back("S_min");
              if (!bounds_agree((*w)["S_max"], (*w0)["S_max"])) diff.push_back("S_max");
            }
            if (diff.empty()) {
              agrees = "✓";
            } else {
              group_bad = true;
              agrees = "**≠ " + diff[0];
              for (std::size_t i = 1; i < diff.size(); ++i) agrees += ", " + diff[i];
              agrees += "**";
            }
          }
          body += fmt::format("| {} | {} | M{} | {} | {} | {} | {} | {} |\n", mode, dist, m + 1,
                              r["isa"].get<std::string>(), r["s_underflow"]["text"].get<std::string>(),
                              r["s_overflow"]["text"].get<std::string>(),
                              w == nullptr ? std::string("—") : window_text(*w), agrees);
        }
      }
      disagreeing += group_bad ? 1 : 0;
    }
  }
  md += fmt::format("\n{} group(s) of paths that should agree do not.\n", disagreeing);
  md += body;
  const std::size_t slash = out_file.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_dirs(out_file.substr(0, slash));
  write_file_atomic(out_file, md);
  return {};
}

}  // namespace halfmap::sweep
