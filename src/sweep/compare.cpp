// `halfmap compare`: one Markdown table per op across result folders (machines), grouping the paths that should
// agree (same op, mode and distribution) and marking the thresholds that differ.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "halfmap/atomic_file.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

namespace {

struct Source {
  std::string label;  // the folder's name and, from its meta.json, the CPU model
  json thresholds;
};

/// Two thresholds agree when both lie beyond the grid on the same side at the same limit, or both were found
/// within twice the lattice's resolution of each other (2^-9 in log2).
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

/// Reads one result folder; returns one sentence when it holds no sweep's thresholds.
std::string load_source(const std::string& d, Source& s) {
  const auto th = read_file(d + "/thresholds.json");
  if (!th) return fmt::format("{} holds no thresholds.json (the output of 'halfmap sweep').", d);
  try {
    s.thresholds = json::parse(*th);
    (void)s.thresholds.at("results").size();
  } catch (const std::exception&) {
    return fmt::format("{}/thresholds.json is not a sweep's thresholds file.", d);
  }
  // Each boundary is an onset and a saturation since format 2, and underflow has its format 3 definitions; an
  // older file's numbers cannot be set beside them.
  const json format = s.thresholds.value("format", json());
  if (std::none_of(kComparableFormats.begin(), kComparableFormats.end(), [&](const char* f) { return format == f; })) {
    return fmt::format(
        "{}/thresholds.json is in format {}, not {} or {}: it was written by an older halfmap; rerun the "
        "sweep there to compare it.",
        d, format.is_string() ? format.get<std::string>() : "(none)", kComparableFormats[0], kComparableFormats[1]);
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
  return {};
}

/// The title, the machines, whether their settings match, and how to read the tables.
std::string preamble(const std::vector<Source>& src) {
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
  md +=
      "\nPaths that should agree are those of the same op, mode and distribution (on any ISA or machine). A row "
      "agrees (✓) when each threshold (onset and saturation) lies within 2^-9 in log2 of the group's first row, or "
      "beyond the same grid "
      "limit; `≠ what` marks the thresholds that differ. fp16-accumulating paths (`f16`) differ in FMA kind "
      "(per-op F16C rounds the f32 FMA; native fp16 fuses) and in accumulation order (lanes), so marks there "
      "can be real differences of the hardware rather than errors; `f16_model` is the fused reference. Peer "
      "libraries' paths (`peer <library> <dtype>`, src/peers/) sit in the group of the mode they are compared "
      "with, beside halfmap's paths: a mark there is how the library differs (peers.md says why). After each mark, in "
      "parentheses, the cause: the fields of the two kernels' specs (thresholds.json's `spec`: accumulator, lanes, "
      "order of accumulation, fp16 FMA kind, rounding recipe; docs/kernel-spec.md) that differ "
      "from the group's first row, or `same spec: unexplained` where none does (a folder written before "
      "thresholds.json "
      "carried specs takes each kernel's from another folder's kernel of the same name).\n";
  return md;
}

/// A boundary as its onset and what crossed there, with its saturation when that differs:
/// "onset · crossed tensor (sat. saturation)".
std::string band_text(const json& b) {
  const std::string on = b["onset"]["text"].get<std::string>(), sat = b["saturation"]["text"].get<std::string>();
  const std::string what = crossing_text(b);
  return on == sat ? fmt::format("{}{}", on, what) : fmt::format("{}{} (sat. {})", on, what, sat);
}

/// Why `r` may differ from `first`: the fields of their kernel specs (thresholds.json's "spec": what decides the
/// numbers) that differ, e.g. "order: SIMD, not fixed vs sequential". A peer's cause is its library's (peers.md);
/// paths whose specs are identical and still differ are named as unexplained, for a person to look at.
std::string cause(const json& r, const json& first) {
  if (r["isa"] == "peer" || first["isa"] == "peer") return "a peer library's own arithmetic (peers.md)";
  if (!r.contains("spec") || !first.contains("spec")) return "spec not recorded (a folder from an older halfmap)";
  std::vector<std::string> why;
  for (const char* field : {"accumulator", "lanes", "order", "fma", "recipe"}) {
    const json& a = r["spec"][field];
    const json& b = first["spec"][field];
    if (a == b) continue;
    auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump(); };
    why.push_back(fmt::format("{} {} vs {}", field, text(a), text(b)));
  }
  if (why.empty()) return "same spec: unexplained";
  std::string out = why[0];
  for (std::size_t i = 1; i < why.size(); ++i) out += "; " + why[i];
  return out;
}

/// "✓", or "**≠ what, ...** (cause)" listing the thresholds of `r` that differ from the group's first row `first`
/// and the differences of their specs that explain it.
std::string agreement(const json& r, const json& first, bool& differs) {
  std::vector<std::string> diff;
  for (const char* b : {"s_underflow", "s_overflow"}) {
    for (const char* end : {"onset", "saturation"}) {
      if (!bounds_agree(r[b][end], first[b][end])) diff.push_back(fmt::format("{} {}", b, end));
    }
  }
  const json* w = window_at(r, 0.0);
  const json* w0 = window_at(first, 0.0);
  if (w != nullptr && w0 != nullptr) {
    if (!bounds_agree((*w)["S_min"], (*w0)["S_min"])) diff.push_back("S_min");
    if (!bounds_agree((*w)["S_max"], (*w0)["S_max"])) diff.push_back("S_max");
  }
  if (diff.empty()) return "✓";
  differs = true;
  std::string out = "**≠ " + diff[0];
  for (std::size_t i = 1; i < diff.size(); ++i) out += ", " + diff[i];
  return out + "** (" + cause(r, first) + ")";
}

/// A row's path: halfmap's ISA, or a peer's library and storage type ("peer onednn bf16"), so that the peers of a
/// group stand beside halfmap's paths under their own names.
std::string path_label(const json& r) {
  const std::string isa = r["isa"].get<std::string>();
  if (isa != "peer") return isa;
  const std::string k = r["kernel"].get<std::string>();
  return fmt::format("peer {} {}", k.substr(0, k.find('_')), r["storage"].get<std::string>());
}

/// The rows of one (op, mode, dist) group, machine by machine; returns whether any row disagrees.
bool group_rows(const std::vector<Source>& src, const std::string& op, const std::string& mode, const std::string& dist,
                std::string& body) {
  auto member = [&](const json& r) { return r["op"] == op && r["mode"] == mode && r["dist"] == dist; };
  std::size_t members = 0;
  for (const Source& s : src) {
    for (const json& r : s.thresholds["results"]) members += member(r) ? 1 : 0;
  }
  const json* first = nullptr;
  bool group_bad = false;
  for (std::size_t m = 0; m < src.size(); ++m) {
    for (const json& r : src[m].thresholds["results"]) {
      if (!member(r)) continue;
      std::string agrees = "—";
      if (first == nullptr) {
        first = &r;
        if (members > 1) agrees = "✓ (reference)";
      } else {
        agrees = agreement(r, *first, group_bad);
      }
      const json* w = window_at(r, 0.0);
      body += fmt::format("| {} | {} | M{} | {} | {} | {} | {} | {} |\n", mode, dist, m + 1, path_label(r),
                          band_text(r["s_underflow"]), band_text(r["s_overflow"]),
                          w == nullptr ? std::string("—") : window_text(*w), agrees);
    }
  }
  return group_bad;
}

/// One op's table; returns the number of its groups that disagree.
std::size_t op_section(const std::vector<Source>& src, const std::string& op, std::string& body) {
  body += fmt::format("\n## {}\n\n", op);
  body += "| mode | dist | machine | path | s_underflow | s_overflow | window at s = 1 | agrees |\n";
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
  std::size_t disagreeing = 0;
  for (const auto& [mode, dist] : groups) disagreeing += group_rows(src, op, mode, dist, body) ? 1 : 0;
  return disagreeing;
}

}  // namespace

std::string compare(const std::vector<std::string>& dirs, const std::string& out_file) {
  std::vector<Source> src;
  for (const std::string& d : dirs) {
    Source s;
    if (std::string err = load_source(d, s); !err.empty()) return err;
    src.push_back(std::move(s));
  }
  if (src.empty()) return "no result folder given.";
  // A kernel's spec follows from its registry entry, so a folder from before thresholds.json carried specs takes
  // them from another folder's kernel of the same name.
  std::map<std::string, json> specs;
  for (const Source& s : src) {
    for (const json& r : s.thresholds["results"]) {
      if (r.contains("spec")) specs.emplace(r["kernel"].get<std::string>(), r["spec"]);
    }
  }
  for (Source& s : src) {
    for (json& r : s.thresholds["results"]) {
      const auto it = specs.find(r["kernel"].get<std::string>());
      if (!r.contains("spec") && it != specs.end()) r["spec"] = it->second;
    }
  }

  std::string md = preamble(src);
  std::vector<std::string> ops;
  for (const Source& s : src) {
    for (const json& r : s.thresholds["results"]) {
      const std::string op = r["op"].get<std::string>();
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
  }
  std::size_t disagreeing = 0;
  std::string body;
  for (const std::string& op : ops) disagreeing += op_section(src, op, body);
  md += fmt::format("\n{} group(s) of paths that should agree do not.\n", disagreeing);
  md += body;
  const std::size_t slash = out_file.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_dirs(out_file.substr(0, slash));
  write_file_atomic(out_file, md);
  return {};
}

}  // namespace halfmap::sweep
