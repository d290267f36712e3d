// The lattice scan of lattice.hpp: coarse points, then every refined switch scanned point by point (or bisected
// when the predicate is monotone), then the runs.
#include "sweep/lattice.hpp"

#include <algorithm>
#include <cmath>

namespace halfmap::sweep {

Lattice make_lattice(double lo_log2, double hi_log2, double res, double coarse_log2, double margin_log2) {
  Lattice L;
  L.res = res;
  L.lo = Index(std::ceil(lo_log2 / res));
  L.hi = Index(std::floor(hi_log2 / res));
  L.coarse = std::max<Index>(1, Index(std::llround(coarse_log2 / res)));
  L.margin = std::max<Index>(1, Index(std::llround(margin_log2 / res)));
  return L;
}

bool lattice_index(const Lattice& L, double log2, Index& k) {
  const double q = log2 / L.res;
  if (!(std::fabs(q) < 0x1p52) || q != std::floor(q)) return false;
  k = Index(q);
  return true;
}

bool Probe::operator()(Index k) {
  if (auto it = seen_.find(k); it != seen_.end()) return it->second;
  const bool v = f_(k);
  seen_.emplace(k, v);
  return v;
}

namespace {

/// The coarse points of the range: its ends and every multiple of the coarse spacing inside it.
std::vector<Index> coarse_points(const Lattice& L) {
  std::vector<Index> c{L.lo};
  Index k = L.lo - (((L.lo % L.coarse) + L.coarse) % L.coarse) + L.coarse;  // the first multiple above lo
  for (; k < L.hi; k += L.coarse) c.push_back(k);
  if (L.hi > L.lo) c.push_back(L.hi);
  return c;
}

/// Bisection on the lattice between a and b (p(a) != p(b)): leaves the adjacent pair in `p`'s cache.
void bisect(Probe& p, Index a, Index b) {
  const bool va = p(a);
  while (b - a > 1) {
    const Index mid = a + (b - a) / 2;
    (p(mid) == va ? a : b) = mid;
  }
}

/// Every lattice point of [a, b] clamped to the range; with a sub-lattice, every `sub`-th point (and both ends),
/// each pair of neighbours that differ then bisected to adjacent lattice points.
void scan_all(const Lattice& L, Probe& p, Index a, Index b) {
  a = std::max(a, L.lo);
  b = std::min(b, L.hi);
  if (L.sub <= 1) {
    for (Index k = a; k <= b; ++k) (void)p(k);
    return;
  }
  Index prev = a;
  for (Index k = a - (((a % L.sub) + L.sub) % L.sub) + L.sub;; k += L.sub) {
    const Index x = std::min(k, b);
    if (p(x) != p(prev)) bisect(p, prev, x);
    prev = x;
    if (x == b) break;
  }
}

/// The tail above the last switch's lower coarse point `from`: every point upwards until L.tail consecutive ones
/// after the last that differs from `end_value` (or the range's end). It follows a predicate that comes back a
/// binade later at the same phase of log2 s, and one that comes and goes at random (docs/thresholds.md).
void tail_scan(const Lattice& L, Probe& p, Index from, bool end_value) {
  Index last_diff = from;
  for (Index k = from; k <= L.hi && k - last_diff <= L.tail; ++k) {
    if (p(k) != end_value) last_diff = k;
  }
}

}  // namespace

std::vector<Run> scan(const Lattice& L, Probe& p, Refine which, bool monotone) {
  const std::vector<Index> c = coarse_points(L);
  std::vector<std::size_t> sw;  // switch i: between c[i] and c[i + 1]
  for (std::size_t i = 0; i + 1 < c.size(); ++i) {
    if (p(c[i]) != p(c[i + 1])) sw.push_back(i);
  }
  for (std::size_t j = 0; j < sw.size(); ++j) {
    const std::size_t i = sw[j];
    const bool first = j == 0, last = j + 1 == sw.size();
    if (which == Refine::ends && !first && !last) continue;
    if (monotone) {
      bisect(p, c[i], c[i + 1]);
      continue;
    }
    const bool both = which == Refine::all;
    if (last && L.tail > 0) {
      scan_all(L, p, c[i] - (first ? L.margin : 0), c[i]);
      tail_scan(L, p, c[i], p(c[i + 1]));
      continue;
    }
    scan_all(L, p, c[i] - (both || first ? L.margin : 0), c[i + 1] + (both || last ? L.margin : 0));
  }
  // Runs from the known points inside the range: agreeing neighbours fill the gap between them, disagreeing ones
  // that are not adjacent leave it unscanned (-1).
  std::vector<Run> runs;
  auto push = [&runs](Index lo, Index hi, int v) {
    if (!runs.empty() && runs.back().v == v && runs.back().hi + 1 == lo) {
      runs.back().hi = hi;
    } else {
      runs.push_back({lo, hi, v});
    }
  };
  const auto& seen = p.seen();
  Index prev = 0;
  bool prev_v = false, first = true;
  for (auto it = seen.lower_bound(L.lo); it != seen.end() && it->first <= L.hi; ++it) {
    const auto [k, v] = *it;
    if (!first && k > prev + 1) {
      if (v == prev_v) {
        push(prev + 1, k - 1, v ? 1 : 0);
      } else {
        push(prev + 1, k - 1, -1);
      }
    }
    push(k, k, v ? 1 : 0);
    prev = k;
    prev_v = v;
    first = false;
  }
  return runs;
}

}  // namespace halfmap::sweep
