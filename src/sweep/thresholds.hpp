// The thresholds of one work item on the absolute lattices of sweep.hpp (docs/sweep.md,
// docs/thresholds.md). Internal to src/sweep.
#pragma once

#include <string_view>
#include <vector>

#include "halfmap/sweep.hpp"
#include "sweep/cell.hpp"
#include "sweep/lattice.hpp"

namespace halfmap::sweep {

/// How a bound prints when it lies beyond the search range: `below` before its start, `above` after its end.
struct Relations {
  std::string_view below, above;
};

/// A bound beyond the range, at the range's end `log2`.
Bound beyond(Bound::Kind kind, double log2, const Relations& rel);
/// A bound found at lattice point k; the switch lies between k and k + `side` (-1 or +1).
Bound found_at(const Lattice& L, Index k, int side);

/// The thresholds of an item from its forward cells on its s grid (one per point, in order), refined with `r`
/// (which it leaves at some s). Windows only for experiments with a gradient.
Thresholds thresholds_for(const Options& o, const Experiment& e, Runner& r, const std::vector<Cell>& fwd_cells);

/// The loss-scale window at input scale 2^log2_s (src/sweep/windows.cpp).
Window window_at(const Options& o, Runner& r, double log2_s);

}  // namespace halfmap::sweep
