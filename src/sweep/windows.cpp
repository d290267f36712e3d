// The loss-scale windows: at a fixed input scale, which loss scales S give good gradients (every gradient finite,
// no more than the underflow share flushed), scanned on the absolute lattice of kWindowLattice over the S grid's
// range; the window is the largest contiguous interval of good S (docs/thresholds.md).
#include <map>
#include <string_view>
#include <utility>

#include "halfmap/loss_scale.hpp"
#include "sweep/thresholds.hpp"

namespace halfmap::sweep {

namespace {

/// The largest run of good S (the lowest of equal ones), or null.
const Run* largest_good(const std::vector<Run>& runs) {
  const Run* best = nullptr;
  for (const Run& r : runs) {
    if (r.v == 1 && (best == nullptr || r.hi - r.lo > best->hi - best->lo)) best = &r;
  }
  return best;
}

/// An empty window's S_max: the largest S below the first non-finite gradient.
Bound finite_up_to(const Lattice& L, const std::vector<Run>& over) {
  for (const Run& r : over) {
    if (r.v != 1) continue;
    if (r.lo == L.lo) return beyond(Bound::Kind::below_grid, L.log2_at(L.lo), {"<", "≥"});
    return found_at(L, r.lo - 1, +1);
  }
  return beyond(Bound::Kind::above_grid, L.log2_at(L.hi), {"<", "≥"});
}

}  // namespace

Window window_at(const Options& o, Runner& r, double log2_s) {
  const double share = o.underflow_share;
  const Grid& G = o.S_grid;
  Lattice L = make_lattice(G.lo, G.log2_at(G.size() - 1), kWindowLattice, kWindowCoarse, kWindowMargin);
  L.sub = Index(kWindowScan / kWindowLattice);
  Window w;
  w.log2_s = log2_s;
  r.set_s(log2_s);
  w.s = r.forward_cell().s;
  w.forward_status = r.forward_cell().status;
  struct At {
    bool nonfinite = false, lost = false;  // a gradient is non-finite; the gradients are lost
    std::string_view stage, tensor;        // the cell's first non-finite value (Cell::first_stage, first_tensor)
  };
  std::map<Index, At> known;  // S -> what the cell at S did
  auto at = [&](Index k) -> const At& {
    auto it = known.find(k);
    if (it == known.end()) {
      const Cell c = r.cell_with_S(L.log2_at(k));
      it = known.emplace(k, At{c.grad_nonfinite > 0, grad_lost(c, share), c.first_stage, c.first_tensor}).first;
    }
    return it->second;
  };
  // What crossed just beyond a window's end: the first non-finite value (a gradient, or the stored dY) above S_max,
  // the gradients flushed below S_min (docs/thresholds.md, "What crossed").
  auto name_end = [&](Bound& b, Index beyond_k) {
    const At& a = at(beyond_k);
    if (a.nonfinite) {
      b.crossed = a.stage;
      b.tensor = a.tensor;
    } else if (a.lost) {
      b.crossed = "gradient";
    }
  };
  Probe good([&](Index k) { return !at(k).nonfinite && !at(k).lost; });
  const std::vector<Run> runs = scan(L, good, Refine::all, false);
  if (const Run* best = largest_good(runs)) {
    w.S_min =
        best->lo == L.lo ? beyond(Bound::Kind::below_grid, L.log2_at(L.lo), {"≤", ">"}) : found_at(L, best->lo, -1);
    w.S_max =
        best->hi == L.hi ? beyond(Bound::Kind::above_grid, L.log2_at(L.hi), {"<", "≥"}) : found_at(L, best->hi, +1);
    if (best->lo != L.lo) name_end(w.S_min, best->lo - 1);
    if (best->hi != L.hi) name_end(w.S_max, best->hi + 1);
    Index lo = L.hi, hi = L.lo;
    for (const Run& x : runs) {
      if (x.v == 1) lo = std::min(lo, x.lo), hi = std::max(hi, x.hi);
    }
    w.good_hull = std::make_pair(L.log2_at(lo), L.log2_at(hi));
    for (const Run& x : runs) {
      if (x.v != 1 && x.lo > lo && x.hi < hi) w.bad_inside.emplace_back(L.log2_at(x.lo), L.log2_at(x.hi));
    }
  } else {
    w.empty = true;
    w.S_min = beyond(Bound::Kind::above_grid, L.log2_at(L.hi), {"≤", ">"});
    Probe over([&](Index k) { return at(k).nonfinite; });
    w.S_max = finite_up_to(L, scan(L, over, Refine::ends, false));
  }
  // The frameworks' initial scales are coarse points of the default lattice, already evaluated by the scan.
  auto inside = [&](double log2_S) {
    Index k = 0;
    if (lattice_index(L, log2_S, k) && k >= L.lo && k <= L.hi) return !at(k).nonfinite && !at(k).lost;
    const Cell c = r.cell_with_S(log2_S);
    return c.grad_nonfinite == 0 && !grad_lost(c, share);
  };
  w.keras_inside = inside(loss_scale::kKerasInitialLog2);
  w.pytorch_inside = inside(loss_scale::kPytorchInitialLog2);
  return w;
}

}  // namespace halfmap::sweep
