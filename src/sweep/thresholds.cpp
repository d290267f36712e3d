// The thresholds over s: each boundary's predicate scanned on the absolute lattice of kThresholdLattice (lattice.hpp),
// its onset and saturation read off the runs. The storage predicates are monotone in s (storing rounds s·x
// monotonically), so they are bisected on the lattice; the forward predicates are not, so each of their outermost
// coarse switches is scanned point by point with a margin (docs/thresholds.md).
#include "sweep/thresholds.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "halfmap/detmath.hpp"

namespace halfmap::sweep {

Bound beyond(Bound::Kind kind, double log2, const Relations& rel) {
  Bound b;
  b.kind = kind;
  b.log2 = log2;
  b.value = det::exp2(log2);
  b.text = fmt::format("{} 2^{}", kind == Bound::Kind::below_grid ? rel.below : rel.above, log2);
  return b;
}

Bound found_at(const Lattice& L, Index k, int side) {
  Bound b;
  b.kind = Bound::Kind::found;
  b.log2 = L.log2_at(k);
  b.value = det::exp2(b.log2);
  b.bracket_lo = L.log2_at(side < 0 ? k - 1 : k);
  b.bracket_hi = L.log2_at(side < 0 ? k : k + 1);
  b.text = fmt::format("2^{:.4f} ({:.5g})", b.log2, b.value);
  return b;
}

namespace {

const Relations kOver{"≤", ">"}, kUnder{"<", "≥"};

/// An overflow-like boundary from its runs over L: the first true point, and the start of the final true run.
Boundary rising(const Lattice& L, const std::vector<Run>& runs) {
  const Run* first = nullptr;
  for (const Run& r : runs) {
    if (r.v == 1) {
      first = &r;
      break;
    }
  }
  auto start = [&L](const Run& r) {
    return r.lo == L.lo ? beyond(Bound::Kind::below_grid, L.log2_at(L.lo), kOver) : found_at(L, r.lo, -1);
  };
  const Bound none = beyond(Bound::Kind::above_grid, L.log2_at(L.hi), kOver);
  if (first == nullptr) return {none, none};
  return {start(*first), runs.back().v == 1 ? start(runs.back()) : none};
}

/// An underflow-like boundary over L: the onset, the last true point of `onset_runs`, and the saturation, the end
/// of the first run of `sat_runs` when it is true from the range's start.
Boundary falling(const Lattice& L, const std::vector<Run>& onset_runs, const std::vector<Run>& sat_runs,
                 bool domain_is_range) {
  const Run* last = nullptr;
  for (const Run& r : onset_runs) {
    if (r.v == 1) last = &r;
  }
  auto end = [&](const Run& r) {
    return r.hi == L.hi && domain_is_range ? beyond(Bound::Kind::above_grid, L.log2_at(L.hi), kUnder)
                                           : found_at(L, r.hi, +1);
  };
  const Bound none = beyond(Bound::Kind::below_grid, L.log2_at(L.lo), kUnder);
  if (last == nullptr) return {none, none};
  return {end(*last), sat_runs.front().v == 1 ? end(sat_runs.front()) : none};
}

/// The forward predicates at one s. The forward is lost to underflow when it is `lost` (fwd_lost) or `vanished`
/// (Cell::fwd_vanished: every term of every output lost a factor to flushing when stored, or every output of the
/// given data rounds to zero in the output type; nothing was left to lose). `vanished` is monotone in s, as
/// storing and |s^k y| are; an oracle that is zero by cancellation of surviving terms is not vanished.
struct Flags {
  bool over = false, lost = false, vanished = false, stored_inf = false, flushed = false;
  // What crossed (Bound::crossed) when the forward overflowed, and when it was lost or vanished; the tensor named.
  std::string_view over_crossed, under_crossed, over_tensor, under_tensor;
};

Flags flags_of(const Cell& c, double share, Mode mode, std::string_view out_name) {
  Flags f;
  f.over = c.fwd_nonfinite > 0;
  f.lost = fwd_lost(c, share, mode);
  f.vanished = c.fwd_vanished;
  f.stored_inf = c.in_inf > 0 || c.in_nonfinite > 0;
  f.flushed = data_flushed(c, share);
  f.over_crossed = c.fwd_crossed;
  f.over_tensor = c.fwd_crossed == "input" || c.fwd_crossed == "intermediate" ? c.first_tensor : out_name;
  if (f.lost || f.vanished) {
    // Inputs flushed when stored (past the share, or every term of every output), else the output type alone
    // losing the exact result, else the path's arithmetic.
    const bool input = f.vanished || f.flushed;
    f.under_crossed = input ? "input" : c.fwd_lost_in_output ? "output" : "arithmetic";
    f.under_tensor = input ? std::string_view{} : out_name;
  }
  return f;
}

/// Names what crossed at a bound's lattice point, where the boundary holds there: the Flags' overflow crossing for
/// an overflow bound, their underflow crossing otherwise.
template <class At>
void name_crossing(const Lattice& L, At& at, bool overflow, Bound& b) {
  Index k = 0;
  if (!lattice_index(L, b.log2, k) || k < L.lo || k > L.hi) return;
  const Flags& f = at(k);
  const bool holds = overflow ? f.over : f.lost || f.vanished;
  if (!holds) return;
  b.crossed = overflow ? f.over_crossed : f.under_crossed;
  b.tensor = overflow ? f.over_tensor : f.under_tensor;
}

/// The runs of "a or b" from the runs of a and of b, which both cover the same points in order.
std::vector<Run> runs_or(const std::vector<Run>& a, const std::vector<Run>& b) {
  std::vector<Run> out;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const Index lo = std::max(a[i].lo, b[j].lo), hi = std::min(a[i].hi, b[j].hi);
    const int v = a[i].v == 1 || b[j].v == 1 ? 1 : (a[i].v == -1 || b[j].v == -1 ? -1 : 0);
    if (!out.empty() && out.back().v == v) {
      out.back().hi = hi;
    } else {
      out.push_back({lo, hi, v});
    }
    // Both cover the same points in order: step past whichever ends here (both when they end together).
    if (a[i].hi == hi) ++i;
    if (b[j].hi == hi) ++j;
  }
  return out;
}

/// The end of the underflow domain: from the first coarse point at or above s = 1, the coarse points upwards
/// while the forward is lost, plus the margin (the region of the pivot s = 1, as lost forwards are found there).
Index underflow_domain_end(const Lattice& L, Probe& lost) {
  Index c = L.lo;
  if (L.hi >= 0) c = std::max<Index>(L.lo, 0);
  c = c + (L.coarse - ((c % L.coarse) + L.coarse) % L.coarse) % L.coarse;  // up to a coarse point
  c = std::min(c, L.hi);
  while (c < L.hi && lost(c)) c = std::min(c + L.coarse, L.hi);
  return std::min(c + L.margin, L.hi);
}

/// The runs of `underflowed` that the saturation is read from: its first run from D.lo, evaluated at every lattice
/// point. Below the last vanished point (vanished is monotone, so its runs are exact) every point is underflowed;
/// from there up, every point is evaluated until the first that is not underflowed, so that the run's end is the
/// largest s below which every lattice point is lost or vanished (docs/thresholds.md).
std::vector<Run> saturation_runs(const Lattice& D, Probe& underflowed, const std::vector<Run>& vanished_runs) {
  if (!underflowed(D.lo)) return {{D.lo, D.lo, 0}};
  Index k = D.lo;
  if (!vanished_runs.empty() && vanished_runs.front().v == 1) k = vanished_runs.front().hi;
  while (k < D.hi && underflowed(k + 1)) ++k;
  std::vector<Run> runs{{D.lo, k, 1}};
  if (k < D.hi) runs.push_back({k + 1, k + 1, 0});
  return runs;
}

}  // namespace

Thresholds thresholds_for(const Options& o, const Experiment& e, Runner& r, const std::vector<Cell>& fwd_cells) {
  const double share = o.underflow_share;
  const Mode mode = e.fwd.mode;
  const std::string_view out_name = r.out_name();
  const Grid& g = s_grid_of(o, e);
  const Lattice L = make_lattice(g.lo, g.log2_at(g.size() - 1), kThresholdLattice, kThresholdCoarse, kThresholdMargin);
  // Every s evaluated once for the four predicates; the grid's cells on the lattice are known already.
  std::map<Index, Flags> known;
  for (const Cell& c : fwd_cells) {
    Index k = 0;
    if (lattice_index(L, c.log2_s, k)) known.emplace(k, flags_of(c, share, mode, out_name));
  }
  auto at = [&](Index k) -> const Flags& {
    auto it = known.find(k);
    if (it == known.end()) {
      r.set_s(L.log2_at(k));
      it = known.emplace(k, flags_of(r.forward_cell(), share, mode, out_name)).first;
    }
    return it->second;
  };
  Probe over([&](Index k) { return at(k).over; }), lost([&](Index k) { return at(k).lost; });
  Probe vanished([&](Index k) { return at(k).vanished; });
  Probe underflowed([&](Index k) { return at(k).lost || at(k).vanished; });
  Probe stored_inf([&](Index k) { return at(k).stored_inf; }), flushed([&](Index k) { return at(k).flushed; });
  Thresholds th;
  th.s_overflow = rising(L, scan(L, over, Refine::ends, false));
  th.storage_overflow = rising(L, scan(L, stored_inf, Refine::ends, true));
  const std::vector<Run> flushed_runs = scan(L, flushed, Refine::ends, true);
  th.storage_underflow = falling(L, flushed_runs, flushed_runs, true);
  Lattice D = L;
  D.hi = underflow_domain_end(L, underflowed);
  // The onset: the last lost point, scanned on until a whole binade is clean (a lost forward comes back a binade
  // later at the same phase, or sooner), or the vanished region's end. The saturation: the first switch of either.
  Lattice T = D;
  T.tail = Index(1 / kThresholdLattice);  // one binade
  const std::vector<Run> vanished_runs = scan(D, vanished, Refine::ends, true);
  const std::vector<Run> onset_runs = runs_or(scan(T, lost, Refine::ends, false), vanished_runs);
  th.s_underflow = falling(D, onset_runs, saturation_runs(D, underflowed, vanished_runs), D.hi == L.hi);
  for (Bound* b : {&th.s_overflow.onset, &th.s_overflow.saturation}) name_crossing(L, at, true, *b);
  for (Bound* b : {&th.s_underflow.onset, &th.s_underflow.saturation}) name_crossing(L, at, false, *b);
  if (!e.has_gradient()) return th;
  for (double ls : kWindowLog2s) th.windows.push_back(window_at(o, r, ls));
  return th;
}

}  // namespace halfmap::sweep
