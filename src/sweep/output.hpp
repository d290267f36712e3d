// What the sweep's output files share (src/sweep/{write,markdown,merge,compare}.cpp). Internal to src/sweep.
//
// thresholds.json is the one document every later step reads: `halfmap merge` joins shards' documents, `halfmap
// compare` reads several machines', and thresholds.md is rendered from the document (in memory for a run and a
// merge), so that the Markdown of a merged sweep is byte-identical to that of the same sweep run in one piece.
#pragma once

#include <array>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "halfmap/sweep.hpp"

namespace halfmap::sweep {

using json = nlohmann::ordered_json;

/// thresholds.json's "format": 2 since each boundary became an onset and a saturation, 3 since underflow's
/// `vanished` counts flushed terms and out-of-range results rather than zero oracles, cancellation is measured
/// against its terms' magnitude, and the underflow saturation is found at every lattice point
/// (docs/thresholds.md): a format 2 file's underflow thresholds mean something else. Format 4 adds what crossed
/// at each forward bound (`crossed`, `tensor`) and `equals_storage`; its numbers mean what format 3's do, so
/// `halfmap compare` sets the two side by side (kComparableFormats).
inline constexpr const char* kThresholdsFormat = "halfmap-sweep-thresholds-4";
inline constexpr std::array<const char*, 2> kComparableFormats = {"halfmap-sweep-thresholds-3",
                                                                  "halfmap-sweep-thresholds-4"};

/// Creates `dir` and its parents (mode 0755). Throws std::runtime_error naming the folder that failed.
void make_dirs(const std::string& dir);
/// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::string& path);
/// The current time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_now();
/// Shortest round-trip text of a double (fmt's `{}`), the same on every machine; "inf", "-inf", "nan".
std::string num(double v);
/// What crossed at a forward boundary's onset, as the tables print it after the onset: " · input X = storage",
/// " · arithmetic Y", " · output loss", " · intermediate var"; empty when the file names nothing (format 3, or the
/// boundary does not hold in the range). docs/thresholds.md, "What crossed".
std::string crossing_text(const json& boundary);

/// The thresholds.json document: format, settings, results (one object per item, in index order), fp8.
json thresholds_doc(const json& settings, const json& results);
/// Its "fp8" object (src/sweep/fp8_tables.cpp): the fp8 and MX formats' ranges and Transformer Engine's delayed
/// scaling under a spike of the amax, from the models and the settings' draws alone; and its thresholds.md section.
json fp8_json(const json& settings);
std::string fp8_markdown(const json& fp8);
/// Its text: dumped with an indent of 2 and a trailing newline.
std::string thresholds_text(const json& doc);
/// thresholds.md from the document.
std::string thresholds_markdown(const json& doc);
/// peers.md (src/sweep/peers_md.cpp): the peer paths classified against halfmap's from cells.csv's text and the
/// thresholds document, with the peers not mapped from meta.json's `peers` object; nullopt when the results hold
/// no peer kernel. A run and a merge of its shards give the same text.
std::optional<std::string> peers_markdown(const std::string& csv, const json& doc, const json& peers);
/// A window object's "[S_min, S_max]" (or "empty (S_min .., S_max ..)").
std::string window_text(const json& w);

/// The keys of a window's "inside" verdicts for Keras's and PyTorch's initial scales ("keras_2^15", ...).
std::string keras_key();
std::string pytorch_key();

}  // namespace halfmap::sweep
