// `halfmap merge`: joins the folders of `halfmap sweep --shard K/N` into the files of one whole run. Every shard
// must be present once and come from the same sweep; the joined cells.csv, thresholds.json, thresholds.md and
// peers.md are byte-identical to those of the same sweep run in one piece.
#include <cstdio>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "halfmap/atomic_file.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

namespace {

struct Shard {
  std::string dir;
  json manifest, thresholds, meta;
  std::string csv;
};

/// Reads one shard folder into `s`; returns one sentence when it is not a shard's.
std::string load_shard(const std::string& d, Shard& s) {
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
  return {};
}

/// Checks that the shards are all of one sweep and that each of its N shards is given exactly once.
std::string check_set(const std::vector<Shard>& shards) {
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
  return {};
}

/// Every item's cells.csv rows and thresholds result, by global item index.
struct Joined {
  std::vector<std::string> rows;
  std::vector<json> results;
  std::vector<char> have;
};

/// Moves one shard's items into their slots; returns one sentence when its files disagree.
std::string join_shard(const Shard& s, const std::string& header, Joined& j) {
  if (s.csv.compare(0, header.size(), header) != 0) return fmt::format("{}/cells.csv has another header.", s.dir);
  std::size_t pos = header.size();
  const json& items = s.manifest["items"];
  if (items.size() != s.thresholds["results"].size()) {
    return fmt::format("{}: shard.json and thresholds.json disagree on the items.", s.dir);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::size_t idx = items[i]["index"].get<std::size_t>();
    const std::size_t count = items[i]["rows"].get<std::size_t>();
    if (idx >= j.have.size() || j.have[idx]) return fmt::format("{}: item {} is out of range or repeated.", s.dir, idx);
    std::size_t end = pos;
    for (std::size_t r = 0; r < count; ++r) {
      end = s.csv.find('\n', end);
      if (end == std::string::npos) return fmt::format("{}/cells.csv is shorter than shard.json says.", s.dir);
      ++end;
    }
    j.rows[idx] = s.csv.substr(pos, end - pos);
    pos = end;
    j.results[idx] = s.thresholds["results"][i];
    j.have[idx] = 1;
  }
  if (pos != s.csv.size()) return fmt::format("{}/cells.csv is longer than shard.json says.", s.dir);
  return {};
}

}  // namespace

std::string merge(const std::vector<std::string>& dirs, const std::string& out) {
  std::vector<Shard> shards;
  for (const std::string& d : dirs) {
    Shard s;
    if (std::string err = load_shard(d, s); !err.empty()) return err;
    shards.push_back(std::move(s));
  }
  if (shards.empty()) return "no shard folder given.";
  if (std::string err = check_set(shards); !err.empty()) return err;
  const json& settings = shards[0].manifest["settings"];
  const std::size_t total = shards[0].manifest["total_items"].get<std::size_t>();
  const std::string header = csv_header();
  Joined j{std::vector<std::string>(total), std::vector<json>(total), std::vector<char>(total, 0)};
  for (const Shard& s : shards) {
    if (std::string err = join_shard(s, header, j); !err.empty()) return err;
  }
  for (std::size_t i = 0; i < total; ++i) {
    if (!j.have[i]) return fmt::format("item {} is in no shard.", i);
  }
  std::string csv = header;
  json res = json::array();
  for (std::size_t i = 0; i < total; ++i) {
    csv += j.rows[i];
    res.push_back(j.results[i]);
  }
  const json doc = thresholds_doc(settings, res);
  json meta;
  meta["merged_from"] = json::array();
  for (const Shard& s : shards) meta["merged_from"].push_back(s.meta);
  meta["settings"] = settings;
  meta["date"] = utc_now();
  make_dirs(out);
  write_file_atomic(out + "/cells.csv", csv);
  write_file_atomic(out + "/thresholds.json", thresholds_text(doc));
  write_file_atomic(out + "/thresholds.md", thresholds_markdown(doc));
  // The shards ran one binary on one machine: the first one's peers stand for all.
  if (const auto peers = peers_markdown(csv, doc, shards[0].meta.value("peers", json::object()))) {
    write_file_atomic(out + "/peers.md", *peers);
  } else {
    std::remove((out + "/peers.md").c_str());
  }
  write_file_atomic(out + "/meta.json", meta.dump(2) + "\n");
  return {};
}

}  // namespace halfmap::sweep
