// Thresholds by bisection: where a predicate first switches on (an onset: overflow), or where a region where it
// holds ends (underflow), refined between two grid points to kBisectionPrecision. One builder makes every Bound.
#include "sweep/thresholds.hpp"

#include <functional>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "halfmap/detmath.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::sweep {

namespace {

using Pred = std::function<bool(double)>;

/// How a threshold prints when it lies beyond the grid: `below` before the first point, `above` after the last.
struct Relations {
  std::string_view below, above;
};

Bound beyond(Bound::Kind kind, double log2, const Relations& rel) {
  Bound b;
  b.kind = kind;
  b.log2 = log2;
  b.value = det::exp2(log2);
  b.text = fmt::format("{} 2^{}", kind == Bound::Kind::below_grid ? rel.below : rel.above, log2);
  return b;
}

/// Bisects [lo, hi] (log2) where `p` is false at lo and true at hi when `true_above`, the reverse otherwise.
/// `report_hi`: the reported scale is the bracket's upper end (else its lower end); both are observed scales.
Bound bisect(double lo, double hi, const Pred& p, bool true_above, bool report_hi) {
  while (hi - lo > kBisectionPrecision) {
    const double mid = 0.5 * (lo + hi);
    (p(mid) == true_above ? hi : lo) = mid;
  }
  Bound b;
  b.kind = Bound::Kind::found;
  b.bracket_lo = lo;
  b.bracket_hi = hi;
  b.log2 = report_hi ? hi : lo;
  b.value = det::exp2(b.log2);
  b.text = fmt::format("2^{:.4f} ({:.5g})", b.log2, b.value);
  return b;
}

/// Onset search: the smallest grid point where P holds (P false below it, assumed monotone inside the bracket),
/// refined by bisection. `report_hi`: the reported scale is the first one observed with P (else the last one
/// without).
Bound onset(const Grid& g, const std::vector<char>& grid_p, const Pred& p, bool report_hi, const Relations& rel) {
  std::size_t j = 0;
  while (j < grid_p.size() && !grid_p[j]) ++j;
  if (j == 0) return beyond(Bound::Kind::below_grid, g.log2_at(0), rel);
  if (j == grid_p.size()) return beyond(Bound::Kind::above_grid, g.log2_at(grid_p.size() - 1), rel);
  return bisect(g.log2_at(j - 1), g.log2_at(j), p, true, report_hi);
}

/// End of an underflow region: the largest grid point at or below `pivot` (log2) where U holds, extended upwards
/// while U holds, then the boundary to the next point by bisection (U true below, false above). Only the first
/// `limit` grid points are considered. `report_hi`: report the first scale observed without U.
Bound region_end(const Grid& g, const std::vector<char>& grid_u, std::size_t limit, double pivot, const Pred& u,
                 bool report_hi, const Relations& rel) {
  std::optional<std::size_t> j;
  for (std::size_t i = 0; i < limit; ++i) {
    if (g.log2_at(i) <= pivot && grid_u[i]) j = i;
  }
  if (!j) return beyond(Bound::Kind::below_grid, g.log2_at(0), rel);
  while (*j + 1 < limit && grid_u[*j + 1]) ++*j;
  if (*j + 1 >= limit) return beyond(Bound::Kind::above_grid, g.log2_at(*j), rel);
  return bisect(g.log2_at(*j), g.log2_at(*j + 1), u, false, report_hi);
}

/// The grid flags of one predicate over cells.
std::vector<char> flags(const std::vector<Cell>& cells, const std::function<bool(const Cell&)>& p) {
  std::vector<char> out(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) out[i] = p(cells[i]);
  return out;
}

/// The loss-scale window at input scale 2^log2_s: S_max the onset of a non-finite gradient, S_min the end of
/// the gradients' underflow region below it; whether the frameworks' initial scales give an ok gradient.
Window window_at(const Options& o, Runner& r, double log2_s) {
  const double share = o.underflow_share;
  const Grid& G = o.S_grid;
  Window w;
  w.log2_s = log2_s;
  r.set_s(log2_s);
  w.s = r.forward_cell().s;
  w.forward_status = r.forward_cell().status;
  std::vector<char> gover(G.size()), glost(G.size());
  for (std::size_t i = 0; i < G.size(); ++i) {
    const Cell c = r.cell_with_S(G.log2_at(i));
    gover[i] = c.grad_nonfinite > 0;
    glost[i] = grad_lost(c, share);
  }
  w.S_max = onset(G, gover, [&](double t) { return r.cell_with_S(t).grad_nonfinite > 0; }, false, {"<", "≥"});
  std::size_t limit = 0;
  while (limit < gover.size() && !gover[limit]) ++limit;
  w.S_min = region_end(G, glost, limit, std::numeric_limits<double>::infinity(),
                       [&](double t) { return grad_lost(r.cell_with_S(t), share); }, true, {"≤", ">"});
  w.empty = w.S_max.kind == Bound::Kind::below_grid || w.S_min.kind == Bound::Kind::above_grid ||
            (w.S_min.kind == Bound::Kind::found && w.S_max.kind == Bound::Kind::found && w.S_min.log2 > w.S_max.log2);
  auto inside = [&](double log2_S) {
    const Cell c = r.cell_with_S(log2_S);
    return c.grad_nonfinite == 0 && !grad_lost(c, share);
  };
  w.keras_inside = inside(loss_scale::kKerasInitialLog2);
  w.pytorch_inside = inside(loss_scale::kPytorchInitialLog2);
  return w;
}

}  // namespace

Thresholds thresholds_for(const Options& o, const Experiment& e, Runner& r, const std::vector<Cell>& fwd_cells) {
  const double share = o.underflow_share;
  const Mode mode = e.fwd.mode;
  const Grid& g = o.s_grid;
  auto overflowed = [](const Cell& c) { return c.fwd_nonfinite > 0; };
  auto lost = [&](const Cell& c) { return fwd_lost(c, share, mode); };
  auto stored_inf = [](const Cell& c) { return c.in_inf > 0 || c.in_nonfinite > 0; };
  auto flushed = [&](const Cell& c) { return data_flushed(c, share); };
  // Each predicate at any s, through the runner.
  auto at = [&r](const std::function<bool(const Cell&)>& p) {
    return [&r, p](double t) {
      r.set_s(t);
      return p(r.forward_cell());
    };
  };
  const std::vector<char> lost_flags = flags(fwd_cells, lost), flushed_flags = flags(fwd_cells, flushed);
  Thresholds th;
  th.s_overflow = onset(g, flags(fwd_cells, overflowed), at(overflowed), true, {"≤", ">"});
  th.s_underflow = region_end(g, lost_flags, lost_flags.size(), 0.0, at(lost), false, {"<", "≥"});
  th.storage_overflow = onset(g, flags(fwd_cells, stored_inf), at(stored_inf), true, {"≤", ">"});
  th.storage_underflow = region_end(g, flushed_flags, flushed_flags.size(), 0.0, at(flushed), false, {"<", "≥"});
  if (!e.has_gradient()) return th;
  for (double ls : kWindowLog2s) th.windows.push_back(window_at(o, r, ls));
  return th;
}

}  // namespace halfmap::sweep
