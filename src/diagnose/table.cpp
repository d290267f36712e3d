// The user's arrays, held once, column by column (include/halfmap/diagnose.hpp, "Data"): read from a .npy file in
// chunks by npy::load_chunked (the reader's own checks and conversion), so that no row-major or double copy of the
// whole array ever exists.
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "halfmap/diagnose.hpp"

namespace halfmap::diagnose {

/// Builds a Table's columns (a friend of Table).
struct TableBuilder {
  static Table make(std::size_t rows, std::size_t cols, int ndim, bool f32) {
    Table t;
    t.rows_ = rows;
    t.cols_ = cols;
    t.ndim_ = ndim;
    if (f32) {
      t.f32_.resize(rows * cols);
    } else {
      t.f64_.resize(rows * cols);
    }
    return t;
  }
  /// Stores the element at column-major index i.
  static void put(Table& t, std::size_t i, double v) {
    if (t.f64_.empty()) {
      t.f32_[i] = float(v);  // exact: the dtype fits float (checked by the caller)
    } else {
      t.f64_[i] = v;
    }
  }
};

namespace {

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : std::uint64_t{1} << 34;
}

}  // namespace

Table Table::from_array(const npy::Array& a) {
  bool f32 = true;
  for (double v : a.values) {
    if (!std::isnan(v) && double(float(v)) != v) {
      f32 = false;
      break;
    }
  }
  Table t = TableBuilder::make(a.rows, a.cols, a.ndim, f32);
  const std::size_t n = std::min(a.values.size(), a.rows * a.cols);
  for (std::size_t k = 0; k < n; ++k) TableBuilder::put(t, (k % a.cols) * a.rows + k / a.cols, a.values[k]);
  return t;
}

Table Table::load(const std::string& path) {
  // The limit is memory: the columns (4 or 8 bytes a value) may take at most 3/4 of the machine's.
  const std::uint64_t budget = physical_memory() / 4 * 3;
  Table t;
  bool fortran = false;
  npy::load_chunked(
      path, std::size_t(budget),
      [&](const npy::Info& info) {
        const std::uint64_t need = std::uint64_t(info.rows) * info.cols * (info.float_exact ? 4 : 8);
        if (need > budget) {
          throw npy::Error(
              fmt::format("{}: the array needs {} MiB as {}, more than 3/4 of this machine's {} MiB "
                          "of memory.",
                          path, need >> 20, info.float_exact ? "float" : "double", physical_memory() >> 20));
        }
        t = TableBuilder::make(info.rows, info.cols, info.ndim, info.float_exact);
        fortran = info.fortran_order;
      },
      [&](std::size_t first, std::span<const double> v) {
        const std::size_t rows = t.rows(), cols = t.cols();
        for (std::size_t i = 0; i < v.size(); ++i) {
          const std::size_t k = first + i;  // Fortran order is column-major already
          TableBuilder::put(t, fortran ? k : (k % cols) * rows + k / cols, v[i]);
        }
      });
  return t;
}

}  // namespace halfmap::diagnose
