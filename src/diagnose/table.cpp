// The user's arrays, held once, column by column (include/halfmap/diagnose.hpp, "Data"): read from a .npy file in
// chunks with the .npy reader's own header checks and element conversion, so that no row-major or double copy of
// the whole array ever exists.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "halfmap/diagnose.hpp"
#include "io/npy_detail.hpp"

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

namespace detail = npy::detail;

/// Every value of these dtypes is a float exactly: f2, f4, and integers and bool of at most 2 bytes.
bool fits_float(const detail::Dtype& d) {
  return d.kind == detail::Kind::Float ? d.size <= 4 : d.size <= 2;
}

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : std::uint64_t{1} << 34;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void read_exact(std::FILE* f, unsigned char* dst, std::size_t n, const std::string& name) {
  if (std::fread(dst, 1, n, f) == n) return;
  if (std::feof(f)) detail::fail(name, "truncated: the file became shorter while it was read.");
  detail::fail(name, std::string("cannot be read (") + std::strerror(errno) + ").");
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
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) detail::fail(path, "no such file.");
  if (ec) detail::fail(path, "cannot be read (" + ec.message() + ").");
  if (st.type() == fs::file_type::directory) detail::fail(path, "is a directory, not a .npy file.");
  if (st.type() != fs::file_type::regular) detail::fail(path, "is not a regular file.");
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) detail::fail(path, std::string("cannot be read (") + std::strerror(errno) + ").");
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) detail::fail(path, "cannot be read (" + ec.message() + ").");

  std::vector<unsigned char> head(std::size_t(std::min<std::uint64_t>(size, detail::kMaxPrefix)));
  read_exact(f.get(), head.data(), head.size(), path);
  const std::size_t data_offset = detail::header_end(head, size, path);
  const std::size_t have = head.size();
  head.resize(data_offset);
  read_exact(f.get(), head.data() + have, data_offset - have, path);
  // The limit is memory: the columns (4 or 8 bytes a value) may take at most 3/4 of the machine's.
  const std::uint64_t budget = physical_memory() / 4 * 3;
  detail::Layout l = detail::read_layout(head, size, path, std::size_t(budget));
  const bool f32 = fits_float(l.dtype);
  const std::uint64_t need = std::uint64_t(l.count) * (f32 ? 4 : 8);
  if (need > budget) {
    detail::fail(path, fmt::format("the array needs {} MiB as {}, more than 3/4 of this machine's {} MiB of memory.",
                                   need >> 20, f32 ? "float" : "double", physical_memory() >> 20));
  }
  Table t = TableBuilder::make(l.rows, l.cols, l.ndim, f32);
  // Decode each chunk in file order (a C-order layout makes convert write element k to out[k - first]), then
  // place it in its column.
  detail::Layout flat = l;
  flat.fortran_order = false;
  const std::size_t chunk = (std::size_t{1} << 20) / l.dtype.size;
  std::vector<unsigned char> buf(std::min(l.count, chunk) * l.dtype.size);
  std::vector<double> vals(std::min(l.count, chunk));
  for (std::size_t k = 0; k < l.count; k += chunk) {
    const std::size_t n = std::min(chunk, l.count - k);
    read_exact(f.get(), buf.data(), n * l.dtype.size, path);
    detail::convert(buf.data(), 0, n, flat, vals.data());
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t e = k + i;
      TableBuilder::put(t, l.fortran_order ? e : (e % l.cols) * l.rows + e / l.cols, vals[i]);
    }
  }
  return t;
}

}  // namespace halfmap::diagnose
