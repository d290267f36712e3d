// The .npy reader and writer of include/halfmap/npy.hpp: files read (whole in memory, or from disk in chunks) and
// written. The header is read in npy_header.cpp, the dtypes converted in npy_dtype.cpp (npy_detail.hpp).
//
// What xtensor's xnpy.hpp (Debian libxtensor-dev 0.24.3) is used for, and why not more: its header writer
// (xt::detail::write_header, the NumPy layout: the dict in key order, padded with spaces to a multiple of 64
// bytes, then '\n') writes every header `serialize` produces, and its magic string is the one npy_header.cpp
// checks. Its reading path is not safe on hostile input, so the reader is halfmap's own (npy_header.cpp), and it
// validates everything before it allocates:
//   * parse_typestring runs a std::regex whose matcher recurses once per character: a 200 kB descr overflows
//     the stack (segfault, reproduced with g++ 12);
//   * parse_header calls back() on an empty string for the header "\n" (undefined behaviour; an assertion
//     failure with _GLIBCXX_ASSERTIONS), reads a shape of (-1,) as SIZE_MAX and (x,) as 0 without an error, and
//     refuses the keys in any order but NumPy's, which the format says readers must not rely on;
//   * read_header_1_0 sign-extends the length bytes (they are plain char), ignores short reads and knows no
//     version 3.0; load_npy_file allocates whatever the shape declares and never compares it with the file;
//   * its errors name neither the file nor the problem ("invalid typestring", "invalid header").
// The dtype conversions (f2, big-endian, integers, bool to double) are halfmap's too: xnpy only reinterprets
// native-endian buffers of the exact requested type.
#include "halfmap/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>

#include <xtensor/xnpy.hpp>

#include "npy_detail.hpp"

namespace halfmap::npy {
namespace {

using detail::fail;

Array make_array(const detail::Layout& l) {
  Array a;
  a.values.resize(l.count);
  a.rows = l.rows;
  a.cols = l.cols;
  a.ndim = l.ndim;
  a.descr = l.descr;
  a.fortran_order = l.fortran_order;
  return a;
}

/// A file opened with fopen, closed on every path.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

/// Reads exactly n bytes or throws: a file that shrank while read is truncated, anything else a read error.
void read_exact(std::FILE* f, unsigned char* dst, std::size_t n, const std::string& name) {
  if (std::fread(dst, 1, n, f) == n) return;
  if (std::feof(f)) fail(name, "truncated: the file became shorter while it was read.");
  fail(name, std::string("cannot be read (") + std::strerror(errno) + ").");
}

}  // namespace

Array parse(std::span<const unsigned char> bytes, const std::string& name, std::size_t max_data_bytes) {
  const std::size_t prefix = std::min(bytes.size(), detail::kMaxPrefix);
  const std::size_t data_offset = detail::header_end(bytes.first(prefix), bytes.size(), name);
  const detail::Layout l = detail::read_layout(bytes.first(data_offset), bytes.size(), name, max_data_bytes);
  Array a = make_array(l);
  detail::convert(bytes.data() + l.data_offset, 0, l.count, l, a.values.data());
  return a;
}

void load_chunked(const std::string& path, std::size_t max_data_bytes, const std::function<void(const Info&)>& begin,
                  const std::function<void(std::size_t, std::span<const double>)>& chunk) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) fail(path, "no such file.");
  if (ec) fail(path, "cannot be read (" + ec.message() + ").");
  if (st.type() == fs::file_type::directory) fail(path, "is a directory, not a .npy file.");
  if (st.type() != fs::file_type::regular) fail(path, "is not a regular file.");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, std::string("cannot be read (") + std::strerror(errno) + ").");
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot be read (" + ec.message() + ").");

  // Magic, version and header length first; then exactly the header they declare, which header_end checked
  // to lie within the file and to be small; then the data, converted in chunks.
  std::vector<unsigned char> head(std::size_t(std::min<std::uint64_t>(size, detail::kMaxPrefix)));
  read_exact(f.get(), head.data(), head.size(), path);
  const std::size_t data_offset = detail::header_end(head, size, path);
  const std::size_t have = head.size();
  head.resize(data_offset);
  read_exact(f.get(), head.data() + have, data_offset - have, path);
  const detail::Layout l = detail::read_layout(head, size, path, max_data_bytes);
  const bool is_float = l.dtype.kind == detail::Kind::Float;
  begin(Info{l.rows, l.cols, l.ndim, l.descr, l.fortran_order, is_float ? l.dtype.size <= 4 : l.dtype.size <= 2});

  // convert() places element k at out[k] for a C-order layout: with first = 0 it decodes a chunk in file order.
  detail::Layout flat = l;
  flat.fortran_order = false;
  const std::size_t n_chunk = (std::size_t{1} << 20) / l.dtype.size;
  std::vector<unsigned char> buf(std::min(l.count, n_chunk) * l.dtype.size);
  std::vector<double> vals(std::min(l.count, n_chunk));
  for (std::size_t k = 0; k < l.count; k += n_chunk) {
    const std::size_t n = std::min(n_chunk, l.count - k);
    read_exact(f.get(), buf.data(), n * l.dtype.size, path);
    detail::convert(buf.data(), 0, n, flat, vals.data());
    chunk(k, std::span<const double>(vals.data(), n));
  }
}

Array load(const std::string& path, std::size_t max_data_bytes) {
  Array a;
  load_chunked(
      path, max_data_bytes,
      [&a](const Info& info) {
        a.values.resize(info.rows * info.cols);
        a.rows = info.rows;
        a.cols = info.cols;
        a.ndim = info.ndim;
        a.descr = info.descr;
        a.fortran_order = info.fortran_order;
      },
      [&a](std::size_t first, std::span<const double> v) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          const std::size_t k = first + i;  // the k-th element of the file's order, placed row-major
          a.values[a.fortran_order ? (k % a.rows) * a.cols + k / a.rows : k] = v[i];
        }
      });
  return a;
}

std::vector<unsigned char> serialize(std::span<const double> values, std::size_t rows, std::size_t cols, int ndim,
                                     const std::string& descr, bool fortran_order) {
  const std::string name = "serialize";
  if (ndim != 1 && ndim != 2) fail(name, "ndim must be 1 or 2, not " + std::to_string(ndim) + ".");
  if (ndim == 1 && cols != 1) fail(name, "a 1-D array has cols == 1.");
  if ((cols != 0 && rows > values.size() / cols) || rows * cols != values.size())
    fail(name, "rows × cols is not the number of values.");
  const detail::Dtype dt = detail::decode_descr(descr, name);

  std::vector<std::size_t> shape{rows};
  if (ndim == 2) shape.push_back(cols);
  std::ostringstream header;
  xt::detail::write_header(header, descr, fortran_order, shape);
  const std::string h = header.str();

  std::vector<unsigned char> out(h.begin(), h.end());
  out.reserve(h.size() + values.size() * dt.size);
  detail::encode(values, rows, cols, fortran_order, dt, descr, out);
  return out;
}

void save(const std::string& path, std::span<const double> values, std::size_t rows, std::size_t cols, int ndim,
          const std::string& descr, bool fortran_order) {
  const std::vector<unsigned char> bytes = serialize(values, rows, cols, ndim, descr, fortran_order);
  // Written beside the target and renamed over it, so that a failed write leaves nothing half-written.
  const std::string tmp = path + ".tmp";
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    bool ok = f && std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size();
    const int err = errno;
    if (f) ok = std::fclose(f.release()) == 0 && ok;
    if (!ok) {
      std::remove(tmp.c_str());
      fail(path, std::string("cannot be written (") + std::strerror(err ? err : errno) + ").");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, std::string("cannot be written (") + std::strerror(err) + ").");
  }
}

}  // namespace halfmap::npy
