// The length search's files (include/halfmap/lengths.hpp): lengths.json, every search with its onset and the
// lengths it evaluated, and lengths.md, the table of onsets (docs/thresholds.md, "Lengths: where a reduction stops").
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "halfmap/atomic_file.hpp"
#include "halfmap/detmath.hpp"
#include "halfmap/kernel_spec.hpp"
#include "halfmap/lengths.hpp"
#include "sweep/output.hpp"

namespace halfmap::sweep {

// ---- the files ---------------------------------------------------------------------------------------------------

namespace {

inline constexpr const char* kLengthsFormat = "halfmap-lengths-1";

json jnum(double v) { return std::isfinite(v) ? json(v) : json(num(v)); }

std::string lanes_text(const Kernel& k) { return kernel_lanes_matter(k) ? fmt::format("{}", k.lanes) : "-"; }

std::string scale_text(double log2_s) { return fmt::format("2^{}", log2_s); }

json lengths_doc(const LengthOptions& o, const LengthRun& run) {
  json s;
  s["seed"] = o.seed;
  json seqs = json::array();
  for (Seq q : o.seqs) seqs.push_back(seq_name(q));
  s["sequences"] = seqs;
  s["log2_scales"] = o.log2_scales;
  s["len_max"] = o.len_max;
  s["coarse_step_log2"] = o.coarse_step_log2;
  s["check_margin"] = o.check_margin;
  s["underflow_share"] = o.underflow_share;
  s["stall"] = "f(2n) = f(n) while the exact result rounded to the output type moved; sequence ones and op sumsq";
  json tol;
  for (Mode m : kAllModes) tol[std::string(mode_name(m))] = forward_tolerance(m);
  s["forward_tolerance"] = tol;

  json results = json::array();
  for (const LengthResult& r : run.results) {
    const Kernel& k = o.experiments[r.experiment].fwd;
    const KernelSpec spec = kernel_spec(k);
    json j;
    j["kernel"] = k.name;
    j["op"] = op_name(k.op);
    j["mode"] = mode_name(k.mode);
    j["isa"] = isa_name(k.isa);
    j["storage"] = dtype_name(k.storage);
    j["lanes"] = kernel_lanes_matter(k) ? json(k.lanes) : json(nullptr);
    j["order"] = spec.order;
    j["fma"] = spec.fma;
    j["sequence"] = seq_name(r.seq);
    j["log2_s"] = r.log2_s;
    j["s"] = det::exp2(r.log2_s);
    j["stall_checked"] = stall_applies(k.op, r.seq);
    json on;
    if (r.refused) {
      on["kind"] = "refused";
      on["n"] = r.refused_n;
      on["message"] = *r.refused;
    } else if (r.found) {
      on["kind"] = "found";
      on["n"] = r.onset.n;
      on["event"] = length_event_name(r.onset.event);
      on["value"] = jnum(r.onset.value);
      on["exact"] = jnum(r.onset.exact);
      on["rel_err"] = jnum(r.onset.rel_err);
      if (r.onset.value_at_2n) on["value_at_2n"] = jnum(*r.onset.value_at_2n);
      if (r.onset.exact_at_2n) on["exact_at_2n"] = jnum(*r.onset.exact_at_2n);
    } else {
      on["kind"] = "none_within_range";
      on["len_max"] = o.len_max;
    }
    j["onset"] = on;
    json check;
    if (r.found) {
      check["above"] = r.check_lo <= r.check_hi ? json{r.check_lo, r.check_hi} : json::array();
      check["violations"] = r.violations;
    }
    j["check"] = check;
    j["evaluations"] = r.evaluations;
    results.push_back(j);
  }
  json doc;
  doc["format"] = kLengthsFormat;
  doc["settings"] = s;
  doc["results"] = results;
  return doc;
}

std::string event_text(const LengthResult& r) {
  const LengthCell& c = r.onset;
  switch (c.event) {
    case LengthEvent::stall:
      return fmt::format("stall: f(n) = f(2n) = {} (exact {} and {})", num(c.value), num(c.exact),
                         num(c.exact_at_2n.value_or(0)));
    case LengthEvent::fwd_overflow:
      return fmt::format("overflow: {} (exact {})", num(c.value), num(c.exact));
    case LengthEvent::fwd_underflow:
      return fmt::format("lost: {} (exact {}, rel. err {:.3g})", num(c.value), num(c.exact), c.rel_err);
    case LengthEvent::data_overflow:
      return "data_overflow (an input became inf when stored)";
    case LengthEvent::data_underflow:
      return "data_underflow (inputs flushed when stored)";
    case LengthEvent::none:
      break;
  }
  return "-";
}

}  // namespace

std::string lengths_json_text(const LengthOptions& o, const LengthRun& run) {
  return lengths_doc(o, run).dump(2) + "\n";
}

std::string lengths_markdown_text(const LengthOptions& o, const LengthRun& run) {
  std::string md = "# Lengths: where the reductions stop\n\n";
  md += fmt::format(
      "The smallest length n (1 to {}) at which each kernel's forward is bad, for inputs that are the first n "
      "elements of one sequence at scale s: the sweep's status at length n (`fwd_overflow`, `fwd_underflow`: lost) "
      "or a stall (f(2n) = f(n) where a correctly rounded result moves; checked for `ones` and sumsq). "
      "Coarse step 2^{}, then bisection on the integers; `not monotone` lists lengths above the onset that were "
      "good again. Definitions: docs/thresholds.md, \"Lengths: where a reduction stops\" (halfmap's "
      "repository).\n",
      o.len_max, o.coarse_step_log2);
  for (const OpInfo& row : kOpTable) {
    bool any = false;
    for (const LengthResult& r : run.results) any = any || o.experiments[r.experiment].fwd.op == row.op;
    if (!any) continue;
    md += fmt::format("\n## {}\n\n", row.name);
    md += "| kernel | lanes | sequence | s | onset n | what happened there |\n";
    md += "| --- | --- | --- | --- | --- | --- |\n";
    for (const LengthResult& r : run.results) {
      const Kernel& k = o.experiments[r.experiment].fwd;
      if (k.op != row.op) continue;
      std::string onset = r.found ? fmt::format("{}", r.onset.n) : fmt::format("none ≤ {}", o.len_max);
      std::string what = r.found ? event_text(r) : "-";
      if (r.refused) {
        onset = "-";
        what = fmt::format("refused by the library at n = {}: {}", r.refused_n, *r.refused);
      }
      if (!r.violations.empty()) {
        std::string list;
        for (std::size_t i = 0; i < r.violations.size() && i < 3; ++i) {
          list += (i ? ", " : "") + fmt::format("{}", r.violations[i]);
        }
        if (r.violations.size() > 3) list += ", ...";
        what += fmt::format("; not monotone: good again at {}", list);
      }
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", k.name, lanes_text(k), seq_name(r.seq),
                        scale_text(r.log2_s), onset, what);
    }
  }
  return md;
}

void write_length_outputs(const std::string& dir, const LengthOptions& o, const LengthRun& run) {
  make_dirs(dir);
  write_file_atomic(dir + "/lengths.json", lengths_json_text(o, run));
  write_file_atomic(dir + "/lengths.md", lengths_markdown_text(o, run));
}

}  // namespace halfmap::sweep
