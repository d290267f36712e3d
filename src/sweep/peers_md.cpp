// peers.md: the classification of the peer paths (src/peers/) against halfmap's own, computed from a run's
// cells.csv and thresholds document, so that a sweep and a merge of its shards write the same table. Written only
// when the results hold a peer experiment.
//
// For each peer kernel, among halfmap's kernels of the same op and storage type in the results:
//   identical forward cells: at every distribution and every s of the grid, the forward columns (non-finite and
//     zero counts, relative error, scalar value) are equal;
//   same thresholds: otherwise, the onset and saturation texts of the four thresholds (s_underflow, s_overflow,
//     storage_underflow, storage_overflow), and the loss-scale window at s = 1 where both have one, are equal at
//     every distribution;
// and, after them, the other peers whose forward cells are identical (PyTorch's bf16 linear and oneDNN's matmul).
// "differs at" lists, against halfmap's kernel of the peer's mode (the ref path's where it ran), each
// distribution and threshold whose text differs. Then the peers not mapped, from meta.json's `peers`.
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sweep/output.hpp"

namespace halfmap::sweep {
namespace {

constexpr const char* kKeys[] = {"s_underflow", "s_overflow", "storage_underflow", "storage_overflow"};

/// The forward part of a cell, as compared (the first S of a gradient experiment stands for its s).
struct Fwd {
  std::string_view nonfinite, zero, count;  // integers: compared as text
  double rel_err, value;                    // NaN when the column is empty
  bool operator==(const Fwd& o) const {
    auto same = [](double a, double b) { return a == b || (a != a && b != b); };
    return nonfinite == o.nonfinite && zero == o.zero && count == o.count && same(rel_err, o.rel_err) &&
           same(value, o.value);
  }
};

/// One kernel of the results: what the document says of it, its forward cells and its thresholds' texts.
struct Seen {
  std::string op, mode, isa, storage;
  std::map<std::string, std::vector<std::pair<std::string_view, Fwd>>> fwd;    // per dist: (log2 s, forward)
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> th;  // per dist: (threshold, text)
  bool peer() const { return isa == "peer"; }
};

double number(std::string_view s) {
  if (s.empty()) return NAN;
  double v = NAN;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

/// A kernel in one experiment: (kernel name, the experiment's op label). One kernel can be in several
/// experiments (attention at each head dimension: attention_prescale_d64, attention_prescale_d128).
using Key = std::pair<std::string, std::string>;

/// The kernels of the document, with their threshold texts.
std::map<Key, Seen> from_doc(const json& doc) {
  std::map<Key, Seen> seen;
  for (const json& r : doc.at("results")) {
    Seen& s = seen[{r.at("kernel").get<std::string>(), r.at("op").get<std::string>()}];
    s.op = r.at("op").get<std::string>();
    s.mode = r.at("mode").get<std::string>();
    s.isa = r.at("isa").get<std::string>();
    s.storage = r.at("storage").get<std::string>();
    auto& t = s.th[r.at("dist").get<std::string>()];
    for (const char* key : kKeys) {  // each boundary's onset and saturation (halfmap-sweep-thresholds-3)
      for (const char* end : {"onset", "saturation"}) {
        t.push_back({fmt::format("{} {}", key, end),
                     r.contains(key) && r.at(key).contains(end) ? r.at(key).at(end).value("text", "?") : "-"});
      }
    }
    for (const json& w : r.value("loss_scale_windows", json::array())) {
      if (w.at("log2_s").get<double>() == 0) t.push_back({"window at s = 1", window_text(w)});
    }
  }
  return seen;
}

/// Fills the forward cells of the kernels that matter (the peers, and halfmap's of a peer's op and storage) from
/// cells.csv's text, which `seen` then points into.
void add_cells(const std::string& csv, std::map<Key, Seen>& seen) {
  std::set<std::pair<std::string, std::string>> peer_kinds;
  for (const auto& [name, s] : seen) {
    if (s.peer()) peer_kinds.insert({s.op, s.storage});
  }
  std::size_t pos = csv.find('\n');  // past the header
  while (pos != std::string::npos && pos + 1 < csv.size()) {
    const std::size_t start = pos + 1, end = csv.find('\n', start);
    const std::string_view line(csv.data() + start, (end == std::string::npos ? csv.size() : end) - start);
    pos = end;
    const std::size_t comma = line.find(','), comma2 = line.find(',', comma + 1);
    if (comma == std::string_view::npos || comma2 == std::string_view::npos) continue;
    auto it = seen.find({std::string(line.substr(0, comma)), std::string(line.substr(comma + 1, comma2 - comma - 1))});
    if (it == seen.end() || !peer_kinds.count({it->second.op, it->second.storage})) continue;
    std::vector<std::string_view> f;  // the columns up to fwd_value (csv_header: 24 of them)
    for (std::size_t a = 0; f.size() < 24;) {
      const std::size_t b = line.find(',', a);
      f.push_back(line.substr(a, b == std::string_view::npos ? line.size() - a : b - a));
      if (b == std::string_view::npos) break;
      a = b + 1;
    }
    if (f.size() < 24) continue;
    auto& v = it->second.fwd[std::string(f[6])];
    if (!v.empty() && v.back().first == f[7]) continue;
    v.push_back({f[7], Fwd{f[19], f[21], f[18], number(f[22]), number(f[23])}});
  }
}

/// Whether two kernels' thresholds agree at every distribution, on the keys both have.
bool same_thresholds(const Seen& p, const Seen& h) {
  if (p.th.size() != h.th.size()) return false;
  for (const auto& [dist, t] : p.th) {
    const auto other = h.th.find(dist);
    if (other == h.th.end()) return false;
    for (std::size_t i = 0; i < t.size() && i < other->second.size(); ++i) {
      if (t[i] != other->second[i]) return false;
    }
  }
  return true;
}

std::string differs(const Seen& p, const Seen& h) {
  std::string out;
  for (const auto& [dist, t] : p.th) {
    const auto other = h.th.find(dist);
    if (other == h.th.end()) continue;
    for (std::size_t i = 0; i < t.size() && i < other->second.size(); ++i) {
      if (t[i] == other->second[i]) continue;
      out += fmt::format("{}{} {}: {} vs {}", out.empty() ? "" : "; ", dist, t[i].first, t[i].second,
                         other->second[i].second);
    }
  }
  return out.empty() ? "none" : out;
}

std::string row(const std::string& name, const Seen& p, const std::map<Key, Seen>& seen) {
  std::vector<std::string> identical, same, peers;
  const std::pair<const Key, Seen>* mode_ref = nullptr;
  for (const auto& entry : seen) {
    const std::string& other = entry.first.first;
    const Seen& h = entry.second;
    if (h.op != p.op || h.storage != p.storage || other == name) continue;
    if (h.peer()) {
      if (h.fwd == p.fwd) peers.push_back(other);
      continue;
    }
    if (h.mode == p.mode && (mode_ref == nullptr || h.isa == "ref")) mode_ref = &entry;
    if (h.fwd == p.fwd) {
      identical.push_back(other);
    } else if (same_thresholds(p, h)) {
      same.push_back(other);
    }
  }
  std::string like;
  if (!identical.empty()) like = fmt::format("identical forward cells: {}", fmt::join(identical, ", "));
  if (!same.empty()) like += fmt::format("{}same thresholds: {}", like.empty() ? "" : "; ", fmt::join(same, ", "));
  if (like.empty()) like = "none";
  if (!peers.empty()) like += fmt::format("; identical forward cells (peers): {}", fmt::join(peers, ", "));
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", name.substr(0, name.find('_')), p.op, p.storage, name,
                     like, mode_ref ? mode_ref->first.first : "-",
                     mode_ref ? differs(p, mode_ref->second) : "no halfmap kernel of its mode ran");
}

/// The peers meta.json names as not built, not run, refused or dropped, with the reason.
std::string not_mapped(const json& peers) {
  std::string md;
  for (const json& m : peers.value("missing", json::array())) {
    md += fmt::format("| {} | {} |\n", m.value("name", "?"), m.value("reason", "?"));
  }
  if (md.empty()) return {};
  return "\nNot mapped in this run (meta.json's `peers.missing`: a library not built or not run, an op it refuses, "
         "a kernel that failed its check):\n\n| library or kernel | reason |\n| --- | --- |\n" +
         md;
}

/// Why the fp8 and MX formats have no peer (issue 25): a fact of Debian 12's packages, not of this run.
constexpr const char* kNoFp8Peer =
    "\nfp8 (OCP E4M3, E5M2) and the MX formats have no peer: none of Debian 12's libraries implements them. "
    "PyTorch 1.13 has no float8 dtype (float8_e4m3fn and float8_e5m2 came in 2.1), oneDNN 2.6 has no fp8 matmul, "
    "and XNNPACK, Eigen and OpenBLAS have no 8-bit float type. halfmap's fp8 conversions are checked against "
    "include/halfmap/fp8.hpp's model, which follows the OCP 8-bit Floating Point Specification (OFP8) rev. 1.0, on "
    "every float32 pattern (tests/fp8_convert_test.cpp).\n";

}  // namespace

std::optional<std::string> peers_markdown(const std::string& csv, const json& doc, const json& peers) {
  std::map<Key, Seen> seen = from_doc(doc);
  add_cells(csv, seen);
  std::string rows;
  for (const auto& [key, p] : seen) {
    if (p.peer()) rows += row(key.first, p, seen);
  }
  if (rows.empty()) return std::nullopt;
  return "# Peer libraries against halfmap's paths\n\n"
         "Computed from this run's cells.csv and thresholds.json (src/sweep/peers_md.cpp; `halfmap merge` writes the "
         "same from the joined shards). *behaves like*: halfmap's kernels of the same op and storage type whose "
         "forward cells are identical to the peer's at every distribution and s of the grid, else whose thresholds "
         "are the same (the four boundaries' onsets and saturations, and the loss-scale window at s = 1 where both "
         "have one); then the other peers with identical forward cells. *differs at*: each distribution and "
         "threshold where the peer differs from halfmap's kernel of its mode (*compared with*). Most peers have a "
         "forward only (no gradient kernel), so they have no loss-scale windows; PyTorch's dense layer and "
         "cross-entropy have torch's autograd gradients.\n\n"
         "| library | op | dtype | peer path | behaves like | compared with | differs at |\n"
         "| --- | --- | --- | --- | --- | --- | --- |\n" +
         rows + not_mapped(peers) + kNoFp8Peer;
}

}  // namespace halfmap::sweep
