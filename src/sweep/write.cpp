// A run's files: cells.csv, thresholds.json, thresholds.md, meta.json, peers.md when peer paths ran (and shard.json
// for a shard). cells.csv and thresholds.json hold no date, timing or thread count, so they are byte-identical for
// the same options whatever the threads, shards or run; meta.json holds those.

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "halfmap/atomic_file.hpp"
#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/kernel_spec.hpp"
#include "halfmap/loss_scale.hpp"
#include "sweep/output.hpp"
#include "sweep/thresholds.hpp"

namespace halfmap::sweep {

// ---- shared helpers (output.hpp) -------------------------------------------------------------------------------

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the folder {}: {}", dir, ec.message()));
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

std::string num(double v) { return fmt::format("{}", v); }

std::string keras_key() { return fmt::format("keras_2^{}", loss_scale::kKerasInitialLog2); }
std::string pytorch_key() { return fmt::format("pytorch_2^{}", loss_scale::kPytorchInitialLog2); }

json thresholds_doc(const json& settings, const json& results) {
  json doc;
  doc["format"] = kThresholdsFormat;
  doc["settings"] = settings;
  doc["results"] = results;
  doc["fp8"] = fp8_json(settings);
  return doc;
}

std::string thresholds_text(const json& doc) { return doc.dump(2) + "\n"; }

// ---- the documents -----------------------------------------------------------------------------------------------

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

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
                {"dense_amplifying_mkn", {z.amp_m, z.amp_k, z.amp_n}},
                {"softmax_rows_cols", {z.softmax_rows, z.softmax_cols}},
                {"xent_rows_cols", {z.xent_rows, z.xent_cols}},
                {"norm_rows_cols", {z.norm_rows, z.norm_cols}},
                {"attention_len", z.attn_len},
                {"attention_head_dims", z.head_dims}};
  s["attention_causal"] = o.attn_causal;
  s["eps"] = {{"layernorm", o.layernorm_eps}, {"rmsnorm", o.rmsnorm_eps}};
  s["s_grid"] = grid_json(o.s_grid);
  if (o.wide_s_grid) {
    s["wide_s_grid"] = grid_json(*o.wide_s_grid);
    s["wide_s_grid"]["applies_to"] =
        "f32 and bf16 storage of sum, sumsq, maxabs, dot, dense_fwd, mse, layernorm, rmsnorm, gelu, gelu_tanh, "
        "attention_prescale, attention_postscale";
  }
  s["S_grid"] = grid_json(o.S_grid);
  s["underflow_share"] = o.underflow_share;
  json tol;
  for (Mode m : {Mode::f32, Mode::f16_f32acc, Mode::f16, Mode::f16_model, Mode::bf16_f32acc, Mode::fp8_f32acc,
                 Mode::mxfp8_f32acc}) {
    tol[std::string(mode_name(m))] = forward_tolerance(m);
  }
  s["forward_tolerance"] = tol;
  s["threshold_lattice_log2"] = {
      {"s", {{"resolution", kThresholdLattice}, {"coarse", kThresholdCoarse}, {"margin", kThresholdMargin}}},
      {"S",
       {{"resolution", kWindowLattice}, {"scan", kWindowScan}, {"coarse", kWindowCoarse}, {"margin", kWindowMargin}}}};
  json wl = json::array();
  for (double l : kWindowLog2s) wl.push_back(l);
  s["window_log2_s"] = wl;
  s["loss_scales"] = {{"keras", loss_scale::kKerasInitial}, {"pytorch", loss_scale::kPytorchInitial}};
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
  if (!b.crossed.empty()) {
    j["crossed"] = b.crossed;
    if (!b.tensor.empty()) j["tensor"] = b.tensor;
  }
  return j;
}

json boundary_json(const Boundary& b) {
  return {{"onset", bound_json(b.onset)}, {"saturation", bound_json(b.saturation)}};
}

/// A forward boundary, and whether its onset is its inputs' storage onset (both found, at one lattice point).
json forward_json(const Boundary& b, const Boundary& storage) {
  json j = boundary_json(b);
  j["equals_storage"] = b.onset.kind == Bound::Kind::found && storage.onset.kind == Bound::Kind::found &&
                        b.onset.log2 == storage.onset.log2;
  return j;
}

json pairs_json(const std::vector<std::pair<double, double>>& v) {
  json a = json::array();
  for (const auto& [lo, hi] : v) a.push_back({jnum(lo), jnum(hi)});
  return a;
}

json window_json(const Window& w) {
  json j = {{"s", jnum(w.s)},
            {"log2_s", jnum(w.log2_s)},
            {"forward_status", status_name(w.forward_status)},
            {"S_min", bound_json(w.S_min)},
            {"S_max", bound_json(w.S_max)},
            {"empty", w.empty}};
  j["good_hull_log2"] = w.good_hull ? json{jnum(w.good_hull->first), jnum(w.good_hull->second)} : json(nullptr);
  j["bad_inside_log2"] = pairs_json(w.bad_inside);
  j[keras_key()] = w.keras_inside ? "inside" : "outside";
  j[pytorch_key()] = w.pytorch_inside ? "inside" : "outside";
  return j;
}

json item_json(const Options& o, const ItemResult& it) {
  const Experiment& e = o.experiments[it.experiment];
  json j;
  j["kernel"] = e.fwd.name;
  j["op"] = e.op_label();
  if (e.head_dim != 0) j["head_dim"] = e.head_dim;
  j["mode"] = mode_name(e.fwd.mode);
  j["isa"] = isa_name(e.fwd.isa);
  j["storage"] = dtype_name(e.fwd.storage);
  j["grad_kernel"] = e.bwd ? json(e.bwd->name) : json(nullptr);
  j["dist"] = dist_name(it.dist);
  // What decides the numbers (include/halfmap/kernel_spec.hpp), so that `halfmap compare` can name the cause when
  // two paths of one mode disagree, also across builds for different architectures.
  const KernelSpec spec = kernel_spec(e.fwd);
  j["spec"] = {{"accumulator", spec.accumulator},
               {"lanes", kernel_lanes_matter(e.fwd) ? json(e.fwd.lanes) : json(nullptr)},
               {"order", spec.order},
               {"fma", spec.fma},
               {"recipe", spec.recipe}};
  j["forward_tolerance"] = forward_tolerance(e.fwd.mode);
  j["s_grid"] = grid_json(s_grid_of(o, e));
  const Thresholds& t = it.thresholds;
  j["s_underflow"] = forward_json(t.s_underflow, t.storage_underflow);
  j["s_overflow"] = forward_json(t.s_overflow, t.storage_overflow);
  j["storage_underflow"] = boundary_json(t.storage_underflow);
  j["storage_overflow"] = boundary_json(t.storage_overflow);
  if (e.has_gradient()) {
    json ws = json::array();
    for (const Window& w : t.windows) ws.push_back(window_json(w));
    j["loss_scale_windows"] = ws;
  }
  return j;
}

/// The peer libraries (src/peers/): built (with version and threading) or missing (with the reason). A binary
/// that links no peers says so; a peer kernel dropped by its check on this CPU is listed by its name. The peer
/// paths are run only without a HALFMAP_ISA cap.
json peers_json() {
  json j;
  json built = json::array(), missing = json::array();
  for (const PeerLibrary& p : peer_libraries()) {
    (p.built ? built : missing).push_back({{"name", p.name}, {p.built ? "detail" : "reason", p.detail}});
  }
  j["built"] = built;
  j["missing"] = missing;
  if (peer_libraries().empty()) j["note"] = "this binary links no peer libraries";
  if (isa_cap()) j["note"] = "peer paths are held back by the HALFMAP_ISA cap";
  return j;
}

json meta_json(const Options& o, const Result& r, bool sharded) {
  const CpuFeatures& cpu = cpu_features();
  json j;
  j["halfmap"] = {{"version", HALFMAP_VERSION},
                  {"git_commit", HALFMAP_GIT_COMMIT},
                  {"compiler", HALFMAP_COMPILER},
                  {"cxx_flags", trim(HALFMAP_CXX_FLAGS)}};
  json features;
  for (const CpuFlag& f : kCpuFlags) features[std::string(f.name)] = cpu.*f.member;
  j["cpu"] = {{"model", cpu.model}, {"arch", kHostArch}, {"features", features}};
  json isas = json::array();
  for (Isa isa : kAllIsas) {
    if (isa_enabled(isa)) isas.push_back(isa_name(isa));
  }
  j["isas_enabled"] = isas;
  const std::optional<Isa> cap = isa_cap();
  j["isa_cap"] = cap ? json(isa_name(*cap)) : json(nullptr);
  j["peers"] = peers_json();
  const FpEnv env = read_fp_env();
  j["fp_env"] = {{"arch", env.arch}, {"ftz", env.ftz},     {"daz", env.daz},        {"fz16", env.fz16},
                 {"raw", env.raw},   {"ieee", env.ieee()}, {"text", env.describe()}};
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
      fmt::format("{},{},{},{},{},{},{},", e.fwd.name, e.op_label(), mode_name(e.fwd.mode), isa_name(e.fwd.isa),
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
  const json doc = thresholds_doc(settings, results);
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
  write_file_atomic(dir + "/thresholds.json", thresholds_text(doc));
  write_file_atomic(dir + "/thresholds.md", thresholds_markdown(doc));
  if (const std::optional<std::string> peers = peers_markdown(csv, doc, peers_json())) {
    write_file_atomic(dir + "/peers.md", *peers);
  } else {
    std::remove((dir + "/peers.md").c_str());  // no peer ran: an older run's table would describe other cells
  }
  write_file_atomic(dir + "/meta.json", meta_json(opts, result, sharded).dump(2) + "\n");
  // A complete run in a folder that once held a shard: the old manifest no longer describes these files.
  if (!sharded) std::remove((dir + "/shard.json").c_str());
}

}  // namespace halfmap::sweep
