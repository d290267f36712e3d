// The pieces of the .npy reader and writer (include/halfmap/npy.hpp) that its three files share, along the data
// flow: npy_header.cpp reads the magic, version and header dict into a Layout checked against the file;
// npy_dtype.cpp decodes the dtype and converts elements to and from double; npy.cpp reads files and writes them.
// Internal to halfmap_npy: not installed, not part of the public header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "halfmap/npy.hpp"

namespace halfmap::npy::detail {

/// Magic (6), version (2), header length (2 in 1.0, 4 in 2.0 and 3.0): what header_end needs to see.
inline constexpr std::size_t kMaxPrefix = 12;
inline constexpr const char* kSupported = "halfmap reads f2, f4, f8, integer and bool arrays";

[[noreturn]] inline void fail(const std::string& name, const std::string& sentence) {
  throw Error(name + ": " + sentence);
}

/// Text from the file echoed in a message, cut short so that a hostile header cannot make the sentence huge.
inline std::string shown(const std::string& s) { return s.size() <= 24 ? s : s.substr(0, 24) + "..."; }

enum class Kind { Float, Int, UInt, Bool };

struct Dtype {
  Kind kind = Kind::Float;
  std::size_t size = 0;  // bytes per element
  bool big_endian = false;
};

/// Decodes a simple descr ("<f2", ">i8", "|b1", "|u1"); anything else is an unsupported dtype, named, as an Error
/// that starts with `name`.
Dtype decode_descr(const std::string& descr, const std::string& name);

/// Everything the header says, checked against the file's size and the limits.
struct Layout {
  std::string descr;
  Dtype dtype;
  bool fortran_order = false;
  std::size_t rows = 0, cols = 0;
  int ndim = 0;
  std::size_t count = 0;        // elements
  std::size_t data_offset = 0;  // where the data starts
  std::size_t data_bytes = 0;
};

/// From the file's first min(size, kMaxPrefix) bytes: checks magic and version, returns where the data starts
/// (the end of the header), which is checked to lie within the file and to be at most 64 KiB after the prefix.
std::size_t header_end(std::span<const unsigned char> prefix, std::uint64_t file_size, const std::string& name);

/// From the file's first `header_end` bytes: the dict, the dtype, the shape, and the data's size checked
/// against the file, the limit and the machine's memory. Nothing is allocated beyond the header's size.
Layout read_layout(std::span<const unsigned char> head, std::uint64_t file_size, const std::string& name,
                   std::size_t max_data_bytes);

/// Converts elements [first, first + n) of the file's order (C or Fortran) from `data` into `out` (l.count
/// doubles, row-major). Reads n * l.dtype.size bytes.
void convert(const unsigned char* data, std::size_t first, std::size_t n, const Layout& l, double* out);

/// Appends `values` (row-major, rows × cols) to `out` in the file's order (C, or Fortran if fortran_order), each
/// rounded to dtype `dt` in its byte order. Throws Error naming `descr` for a value an integer or bool type
/// cannot hold.
void encode(std::span<const double> values, std::size_t rows, std::size_t cols, bool fortran_order, const Dtype& dt,
            const std::string& descr, std::vector<unsigned char>& out);

}  // namespace halfmap::npy::detail
