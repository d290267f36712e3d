// peers.md: the classification of the peer paths (src/peers/) against halfmap's own, computed from this run's
// cells and thresholds. Written only when the run holds a peer experiment.
//
// For each peer kernel, among halfmap's kernels of the same op and storage type that ran here:
//   identical forward cells: at every distribution and every s of the grid, the forward columns (status of the
//     forward, non-finite and zero counts, relative error, scalar value) are equal;
//   same thresholds: otherwise, the onset and saturation texts of the four thresholds (s_underflow, s_overflow,
//     storage_underflow, storage_overflow) are equal at every distribution.
// "differs at" lists, against halfmap's kernel of the peer's mode (the ref path's where it ran), each
// distribution and threshold whose text differs.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sweep/output.hpp"

namespace halfmap::sweep {
namespace {

constexpr const char* kKeys[] = {"s_underflow", "s_overflow", "storage_underflow", "storage_overflow"};

/// The forward part of a cell, as compared (the first S of a gradient experiment stands for its s).
struct Fwd {
  std::size_t nonfinite, zero, count;
  double rel_err, value;
  bool operator==(const Fwd& o) const {
    auto same = [](double a, double b) { return a == b || (a != a && b != b); };
    return nonfinite == o.nonfinite && zero == o.zero && count == o.count && same(rel_err, o.rel_err) &&
           same(value, o.value);
  }
};

struct Seen {
  const Kernel* k = nullptr;
  std::map<std::string, std::vector<std::pair<double, Fwd>>> fwd;  // per dist: (log2 s, forward part)
  std::map<std::string, std::vector<std::string>> th;              // per dist: the four threshold texts
};

std::map<std::string, Seen> collect(const Options& opts, const Result& result, const json& doc) {
  std::map<std::string, Seen> seen;
  for (const ItemResult& it : result.items) {
    const Experiment& e = opts.experiments[it.experiment];
    Seen& s = seen[std::string(e.fwd.name)];
    s.k = &e.fwd;
    auto& v = s.fwd[std::string(dist_name(it.dist))];
    for (const Cell& c : it.cells) {
      if (!v.empty() && v.back().first == c.log2_s) continue;
      v.push_back({c.log2_s, Fwd{c.fwd_nonfinite, c.fwd_zero, c.fwd_count, c.fwd_rel_err, c.fwd_value.value_or(0)}});
    }
  }
  for (const json& r : doc.at("results")) {
    auto it = seen.find(r.at("kernel").get<std::string>());
    if (it == seen.end()) continue;
    std::vector<std::string> t;
    for (const char* key : kKeys) {  // each boundary's onset and saturation (halfmap-sweep-thresholds-2)
      for (const char* end : {"onset", "saturation"}) {
        t.push_back(r.contains(key) && r.at(key).contains(end) ? r.at(key).at(end).value("text", "?") : "-");
      }
    }
    it->second.th[r.at("dist").get<std::string>()] = t;
  }
  return seen;
}

std::string differs(const Seen& p, const Seen& h) {
  std::string out;
  for (const auto& [dist, t] : p.th) {
    const auto other = h.th.find(dist);
    if (other == h.th.end()) continue;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] == other->second[i]) continue;
      out += fmt::format("{}{} {} {}: {} vs {}", out.empty() ? "" : "; ", dist, kKeys[i / 2],
                         i % 2 ? "saturation" : "onset", t[i], other->second[i]);
    }
  }
  return out.empty() ? "none" : out;
}

std::string row(const Seen& p, const std::map<std::string, Seen>& seen) {
  std::vector<std::string> identical, same;
  const Seen* mode_ref = nullptr;
  for (const auto& [name, h] : seen) {
    if (h.k->isa == Isa::peer || h.k->op != p.k->op || h.k->storage != p.k->storage) continue;
    if (h.k->mode == p.k->mode && (mode_ref == nullptr || h.k->isa == Isa::ref)) mode_ref = &h;
    if (h.fwd == p.fwd) {
      identical.push_back(name);
    } else if (h.th == p.th) {
      same.push_back(name);
    }
  }
  std::string like;
  if (!identical.empty()) like = fmt::format("identical forward cells: {}", fmt::join(identical, ", "));
  if (!same.empty()) like += fmt::format("{}same thresholds: {}", like.empty() ? "" : "; ", fmt::join(same, ", "));
  if (like.empty()) like = "none";
  const std::string name(p.k->name);
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", name.substr(0, name.find('_')), op_name(p.k->op),
                     dtype_name(p.k->storage), name, like, mode_ref ? std::string(mode_ref->k->name) : "-",
                     mode_ref ? differs(p, *mode_ref) : "no halfmap kernel of its mode ran");
}

}  // namespace

std::optional<std::string> peers_markdown(const Options& opts, const Result& result, const json& doc) {
  const std::map<std::string, Seen> seen = collect(opts, result, doc);
  std::string rows;
  for (const auto& [name, p] : seen) {
    if (p.k->isa == Isa::peer) rows += row(p, seen);
  }
  if (rows.empty()) return std::nullopt;
  return "# Peer libraries against halfmap's paths\n\n"
         "Computed by `halfmap sweep` from this run's cells (src/sweep/peers_md.cpp). *behaves like*: halfmap's "
         "kernels of the same op and storage type whose forward cells are identical to the peer's at every "
         "distribution and s of the grid, else whose four thresholds are the same. *differs at*: each "
         "distribution and threshold where the peer differs from halfmap's kernel of its mode (*compared with*). "
         "The peers have a forward only (no gradient kernel), so they have no loss-scale windows. meta.json's "
         "`peers` names the libraries built and the ones missing, with the reason.\n\n"
         "| library | op | dtype | peer path | behaves like | compared with | differs at |\n"
         "| --- | --- | --- | --- | --- | --- | --- |\n" +
         rows;
}

}  // namespace halfmap::sweep
