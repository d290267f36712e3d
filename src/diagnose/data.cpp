// The data section: per-column statistics and what fp16 and bf16 storage do to the values.
#include <algorithm>
#include <cmath>
#include <limits>

#include "diagnose/internal.hpp"
#include "halfmap/half.hpp"

namespace halfmap::diagnose {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// numpy.percentile's default (linear interpolation between the closest ranks) of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

/// What storing v (finite) does: overflow to inf, a flush of a non-zero value to zero, or a subnormal result.
void count_storage(double v, StorageEffect& f16e, StorageEffect& bf16e) {
  const double h = to_f64(to_f16(v));
  const double b = double(to_f32(to_bf16_exact(v)));
  if (std::isinf(h)) ++f16e.overflow;
  if (std::isinf(b)) ++bf16e.overflow;
  if (v != 0 && h == 0) ++f16e.flushed;
  if (v != 0 && b == 0) ++bf16e.flushed;
  if (h != 0 && std::fabs(h) < 0x1p-14) ++f16e.subnormal;
  if (b != 0 && std::fabs(b) < 0x1p-126) ++bf16e.subnormal;
}

}  // namespace

ColumnStats column_stats(std::string name, const std::vector<double>& values) {
  ColumnStats c;
  c.name = std::move(name);
  c.count = values.size();
  std::vector<double> finite;
  finite.reserve(values.size());
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (std::isnan(v)) ++c.nan;
    if (std::isinf(v)) ++c.inf;
    if (!std::isfinite(v)) {
      if (!c.first_nonfinite_row) c.first_nonfinite_row = i;
      continue;
    }
    if (v != 0) ++c.nonzero;
    finite.push_back(v);
    sum += v;
    count_storage(v, c.f16, c.bf16);
  }
  if (finite.empty()) {
    c.min = c.max = c.p01 = c.p99 = c.abs_max = c.mean = c.std = kNaN;
    return c;
  }
  c.mean = sum / double(finite.size());
  double sq = 0;
  for (double v : finite) sq += (v - c.mean) * (v - c.mean);  // two passes: no cancellation from large means
  c.std = std::sqrt(sq / double(finite.size()));
  std::sort(finite.begin(), finite.end());
  c.min = finite.front();
  c.max = finite.back();
  c.p01 = percentile(finite, 0.01);
  c.p99 = percentile(finite, 0.99);
  c.abs_max = std::max(std::fabs(c.min), std::fabs(c.max));
  c.near_zero_spread = c.max - c.min <= 1e-6 * std::max(1.0, c.abs_max);
  return c;
}

}  // namespace halfmap::diagnose
