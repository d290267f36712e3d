// The thresholds of one work item, found by bisection between grid points (README.md, "Results: how to read the
// sweep"). Internal to src/sweep.
#pragma once

#include <vector>

#include "halfmap/sweep.hpp"
#include "sweep/cell.hpp"

namespace halfmap::sweep {

/// The final bracket width in log2: a relative precision of 2^(2^-10) - 1.
inline constexpr double kBisectionPrecision = 0x1p-10;

/// The thresholds of an item from its forward cells on the s grid (one per point, in order), refined with `r`
/// (which it leaves at some s). Windows only for experiments with a gradient.
Thresholds thresholds_for(const Options& o, const Experiment& e, Runner& r, const std::vector<Cell>& fwd_cells);

}  // namespace halfmap::sweep
