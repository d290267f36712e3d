// Scans of a predicate on an absolute lattice of log2 scales: the points k·res (k an integer), the same points
// whatever grid the sweep's cells use, so that a threshold found on it does not depend on the grid
// (docs/thresholds.md). Internal to src/sweep.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace halfmap::sweep {

using Index = std::int64_t;

/// A search range on the lattice: points lo..hi (inclusive, lattice units), coarse points every `coarse` points,
/// and `margin` points scanned beyond each end of a refined switch.
struct Lattice {
  double res = 0x1p-10;
  Index lo = 0, hi = 0;
  Index coarse = 512, margin = 512;
  /// When > 0 (one binade), the last switch is scanned from its lower coarse point upwards, instead of over its
  /// margin, until `tail` consecutive points after the last one that differs from the range's end value.
  Index tail = 0;
  /// When > 1, a scan visits every `sub`-th point and bisects each pair of neighbours that differ down to adjacent
  /// points: switches are exact to the lattice, stretches narrower than `sub` points between equal ones unseen.
  Index sub = 1;
  double log2_at(Index k) const { return double(k) * res; }
};

/// The lattice of [lo_log2, hi_log2] (its points inside the range) with resolution `res` and the coarse spacing
/// and margin given in log2 (each rounded to whole lattice steps, at least one).
Lattice make_lattice(double lo_log2, double hi_log2, double res, double coarse_log2, double margin_log2);

/// The lattice index of log2, or nothing when log2 is not a lattice point.
bool lattice_index(const Lattice& L, double log2, Index& k);

/// A predicate's values at lattice points, each evaluated once.
class Probe {
 public:
  explicit Probe(std::function<bool(Index)> f) : f_(std::move(f)) {}
  bool operator()(Index k);
  /// Records a value known without evaluating (a grid cell on the lattice).
  void seed(Index k, bool v) { seen_.emplace(k, v); }
  const std::map<Index, bool>& seen() const { return seen_; }

 private:
  std::function<bool(Index)> f_;
  std::map<Index, bool> seen_;
};

/// A maximal stretch of lattice points with one value: 0 false, 1 true, -1 not scanned (between two coarse points
/// that differ, in the middle of the range, when only the outermost switches were refined).
struct Run {
  Index lo = 0, hi = 0;
  int v = 0;
};

/// Which switches of the coarse pattern are scanned point by point: every one with a margin on both sides, or
/// only the first (with the margin below it) and the last (with the margin above it): all that an onset or a
/// saturation depends on.
enum class Refine { all, ends };

/// The predicate's runs over [L.lo, L.hi]. The coarse points are evaluated; each refined switch (two consecutive
/// coarse points that differ) is scanned at every lattice point between them and over its margins, or, when
/// `monotone` (the predicate provably switches once), bisected on the lattice to its exact switch. Between two
/// points that were not scanned and agree, the value is taken as theirs (docs/thresholds.md says why).
std::vector<Run> scan(const Lattice& L, Probe& p, Refine which, bool monotone);

}  // namespace halfmap::sweep
