// The data section: per-column statistics and what fp16 and bf16 storage (and fp8 and MX: fp8.cpp) do to the
// values, one column at a time (contiguous in the Table), columns on threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "diagnose/internal.hpp"
#include "halfmap/half.hpp"

namespace halfmap::diagnose {

double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// What storing v (finite) does: overflow to inf, a flush of a non-zero value to zero, or a subnormal result.
template <class T>
void count_storage(T v, StorageEffect& f16e, StorageEffect& bf16e) {
  // Normal and finite in fp16 (so in bf16 too) stays so when stored: nothing to count, the common case.
  const T a = v < 0 ? -v : v;
  if (a >= T(0x1p-14) && a <= T(65504)) return;
  const double h = to_f64(to_f16(v));
  double b = 0;
  if constexpr (std::is_same_v<T, float>) {
    b = double(to_f32(to_bf16(v)));  // a float rounds once to bf16
  } else {
    b = double(to_f32(to_bf16_exact(v)));
  }
  if (std::isinf(h)) ++f16e.overflow;
  if (std::isinf(b)) ++bf16e.overflow;
  if (v != 0 && h == 0) ++f16e.flushed;
  if (v != 0 && b == 0) ++bf16e.flushed;
  if (h != 0 && std::fabs(h) < 0x1p-14) ++f16e.subnormal;
  if (b != 0 && std::fabs(b) < 0x1p-126) ++bf16e.subnormal;
}

/// numpy.percentile's linear interpolation of the finite values, without sorting them all: the two closest ranks
/// by selection (nth_element, then the smallest value above it). Reorders `v`.
template <class T>
double select_percentile(std::vector<T>& v, double q) {
  const double pos = q * double(v.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos));
  std::nth_element(v.begin(), v.begin() + long(lo), v.end());
  const double a = v[lo];
  if (lo + 1 >= v.size() || pos == double(lo)) return a;
  const double b = double(*std::min_element(v.begin() + long(lo) + 1, v.end()));
  return a + (pos - double(lo)) * (b - a);
}

}  // namespace

template <class T>
ColumnStats column_stats(std::string name, const T* values, std::size_t n) {
  ColumnStats c;
  c.name = std::move(name);
  c.count = n;
  std::vector<T> finite;  // the values' own type: exact, and half the memory of double for float columns
  finite.reserve(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T v = values[i];
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
  c.fp8 = fp8_effects(values, n);
  if (finite.empty()) {
    c.min = c.max = c.p01 = c.p99 = c.abs_max = c.mean = c.std = kNaN;
    return c;
  }
  c.mean = sum / double(finite.size());
  double sq = 0;
  for (const T v : finite)
    sq += (double(v) - c.mean) * (double(v) - c.mean);  // two passes: no cancellation from large means
  c.std = std::sqrt(sq / double(finite.size()));
  const auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
  c.min = *lo;
  c.max = *hi;
  c.p01 = select_percentile(finite, 0.01);
  c.p99 = select_percentile(finite, 0.99);
  c.abs_max = std::max(std::fabs(c.min), std::fabs(c.max));
  c.near_zero_spread = c.max - c.min <= 1e-6 * std::max(1.0, c.abs_max);
  return c;
}

template ColumnStats column_stats<float>(std::string, const float*, std::size_t);
template ColumnStats column_stats<double>(std::string, const double*, std::size_t);

namespace {

ColumnStats table_column(std::string name, const Table& t, std::size_t c) {
  return t.is_f32() ? column_stats(std::move(name), t.column_f32(c), t.rows())
                    : column_stats(std::move(name), t.column_f64(c), t.rows());
}

}  // namespace

DataReport data_section(const Table& features, const Table& labels, const Options& o) {
  DataReport d;
  d.rows = features.rows();
  d.features.resize(features.cols());
  parallel_for(features.cols() + 1, o.threads, [&](std::size_t c) {
    if (c == features.cols()) {
      d.labels = table_column("y", labels, 0);
    } else {
      d.features[c] = table_column(fmt::format("x{}", c), features, c);
    }
    progress(o, "data columns", c + 1, features.cols() + 1);
  });
  return d;
}

}  // namespace halfmap::diagnose
