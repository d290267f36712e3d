// Reading (and, for tests and examples, writing) NumPy .npy files: the input format of `halfmap diagnose`.
//
// What is accepted: format versions 1.0, 2.0 and 3.0; dtypes f2, f4, f8, signed ('i') and unsigned ('u')
// integers of 1, 2, 4 and 8 bytes and bool ('b1' as NumPy writes it, or '?'), each little- or big-endian ('<',
// '>'; '|' and '=' mean this machine's order, as in NumPy); C or Fortran order; 1-D or 2-D shapes. Everything else
// (object arrays, structured dtypes, complex, 0-D or 3-D+ shapes, a pickle) is rejected with one sentence. Values are
// converted exactly to double (fp16, fp32, fp64 and integers of up to 53 bits; larger integers round to nearest),
// row-major.
//
// The header is validated before any allocation: the declared data size must match the bytes that follow it
// and fit the memory limit, so a hostile file can neither crash the reader nor make it allocate more than the
// file holds.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace halfmap::npy {

/// Bad input: one sentence for the user (no trailing newline), naming the file when one is known.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An array as read: `values` row-major, rows × cols. A 1-D array of n has rows = n, cols = 1, ndim = 1.
struct Array {
  std::vector<double> values;
  std::size_t rows = 0;
  std::size_t cols = 0;
  int ndim = 0;
  std::string descr;  // the file's dtype descr, e.g. "<f2", ">i8"
  bool fortran_order = false;

  double at(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
};

/// The most bytes of array data `load` accepts by default: also bounded by the machine's physical memory.
inline constexpr std::size_t kDefaultMaxDataBytes = std::size_t{8} << 30;

/// Parses a whole .npy file held in memory. `name` is used in error messages only. Throws Error.
Array parse(std::span<const unsigned char> bytes, const std::string& name = "input",
            std::size_t max_data_bytes = kDefaultMaxDataBytes);

/// Reads and parses the file at `path`. Throws Error (missing, unreadable, not .npy, truncated, unsupported,
/// empty, too large).
Array load(const std::string& path, std::size_t max_data_bytes = kDefaultMaxDataBytes);

/// What a file's header declares, for readers that keep their own layout (load_chunked).
struct Info {
  std::size_t rows = 0, cols = 0;
  int ndim = 0;
  std::string descr;
  bool fortran_order = false;
  bool float_exact = false;  // every value of the dtype is a float exactly (f2, f4; integers and bool of <= 2 bytes)
};

/// Reads the file at `path` as `load` does (the same checks and sentences), but instead of building an Array
/// calls `begin` once with the header, before anything is allocated (it may throw Error to refuse), and then
/// `chunk(first, values)` for consecutive runs of elements in the file's order (C: row-major; Fortran:
/// column-major), converted exactly to double, `first` counting from 0. At most 1 MiB of the file is held.
void load_chunked(const std::string& path, std::size_t max_data_bytes, const std::function<void(const Info&)>& begin,
                  const std::function<void(std::size_t first, std::span<const double> values)>& chunk);

/// Writes `values` (row-major, rows × cols; ndim 1 requires cols == 1) as a version 1.0 .npy file of dtype
/// `descr` (any dtype `parse` accepts), in C order or, if `fortran_order`, Fortran order. Values are rounded to
/// the dtype (round to nearest even for floats; integers must be representable, except that 2^63 and 2^64, what
/// parse makes of INT64_MAX and UINT64_MAX, are written as those: serialize accepts every value parse returns).
/// For tests and examples.
/// Throws Error on a bad descr or a write failure.
std::vector<unsigned char> serialize(std::span<const double> values, std::size_t rows, std::size_t cols, int ndim,
                                     const std::string& descr, bool fortran_order = false);
void save(const std::string& path, std::span<const double> values, std::size_t rows, std::size_t cols, int ndim,
          const std::string& descr, bool fortran_order = false);

}  // namespace halfmap::npy
