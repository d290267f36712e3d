// The dtypes of the .npy reader and writer (npy_detail.hpp): the descr decoded, and elements converted to double
// (reading) and rounded from double (writing), in either byte order. halfmap's own: xtensor's xnpy only
// reinterprets native-endian buffers of the exact requested type.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "halfmap/half.hpp"
#include "npy_detail.hpp"

namespace halfmap::npy::detail {
namespace {

double decode_element(const unsigned char* p, const Dtype& dt) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < dt.size; ++i) u |= std::uint64_t(p[dt.big_endian ? dt.size - 1 - i : i]) << (8 * i);
  switch (dt.kind) {
    case Kind::Float:
      if (dt.size == 2) return to_f64(f16{std::uint16_t(u)});
      if (dt.size == 4) return double(std::bit_cast<float>(std::uint32_t(u)));
      return std::bit_cast<double>(u);
    case Kind::Int: {
      const int unused = 64 - 8 * int(dt.size);            // sign-extend: arithmetic right shift is defined in C++20
      return double(std::int64_t(u << unused) >> unused);  // 64-bit values beyond 2^53 round to nearest
    }
    case Kind::UInt:
      return double(u);
    case Kind::Bool:
      return u != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

/// The bits of `v` rounded to `dt`, or an Error if an integer or bool type cannot hold it.
std::uint64_t encode_element(double v, const Dtype& dt, const std::string& descr) {
  const int bits = 8 * int(dt.size);
  auto refuse = [&]() -> std::uint64_t {
    std::ostringstream s;
    s << "serialize: the value " << v << " is not representable as '" << descr << "'.";
    throw Error(s.str());
  };
  switch (dt.kind) {
    case Kind::Float:
      if (dt.size == 2) return to_f16(v).bits;
      if (dt.size == 4) return std::bit_cast<std::uint32_t>(static_cast<float>(v));
      return std::bit_cast<std::uint64_t>(v);
    // parse rounds INT64_MAX and UINT64_MAX (and the integers next to them) up to 2^63 and 2^64, which no
    // 64-bit integer holds: those two doubles are written as the extremes, so that serialize accepts every value
    // parse returns (the fuzz harness checks that round trip).
    case Kind::Int: {
      const double lim = std::ldexp(1.0, bits - 1);
      if (bits == 64 && v == lim) return std::uint64_t{0x7FFFFFFFFFFFFFFF};
      if (!(v == std::trunc(v) && v >= -lim && v < lim)) return refuse();
      const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      return std::uint64_t(std::int64_t(v)) & mask;
    }
    case Kind::UInt:
      if (bits == 64 && v == 0x1p64) return ~std::uint64_t{0};
      if (!(v == std::trunc(v) && v >= 0 && v < std::ldexp(1.0, bits))) return refuse();
      return std::uint64_t(v);
    case Kind::Bool:
      if (!(v == 0 || v == 1)) return refuse();
      return v == 1;
  }
  return 0;
}

}  // namespace

/// Decodes a simple descr ("<f2", ">i8", "|b1", "|u1"); anything else is an unsupported dtype, named.
Dtype decode_descr(const std::string& descr, const std::string& name) {
  auto unsupported = [&](const char* what) -> Dtype {
    fail(name, "unsupported dtype '" + shown(descr) + "' (" + what + "); " + kSupported + ".");
  };
  std::string_view s = descr;
  Dtype dt;
  if (!s.empty() && std::string_view("<>|=").find(s.front()) != std::string_view::npos) {
    // '|' (not applicable) and '=' (native) both mean this machine's order, as in NumPy; halfmap's targets are
    // little-endian, and std::endian says so rather than assuming it.
    dt.big_endian = s.front() == '>' || (s.front() != '<' && std::endian::native == std::endian::big);
    s.remove_prefix(1);
  }
  if (s.empty()) return unsupported("no type");
  const char kind = s.front();
  s.remove_prefix(1);
  switch (kind) {
    case 'f':
    case 'i':
    case 'u':
    case 'b':
    case '?':
      break;
    case 'c':
      return unsupported("complex");
    case 'O':
      return unsupported("Python objects, stored as a pickle");
    case 'U':
    case 'S':
    case 'a':
      return unsupported("strings");
    case 'V':
      return unsupported("raw bytes");
    case 'M':
    case 'm':
      return unsupported("dates or times");
    default:
      return unsupported("not a NumPy numeric type");
  }
  if (kind == '?' && s.empty()) s = "1";  // '?' is NumPy's one-character code for bool
  if (s.empty() || s.size() > 2 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return unsupported("no valid size in bytes");
  dt.size = std::size_t(s[0] - '0');
  if (s.size() == 2) dt.size = dt.size * 10 + std::size_t(s[1] - '0');
  if (kind == 'f') {
    if (dt.size != 2 && dt.size != 4 && dt.size != 8) return unsupported("a float of neither 2, 4 nor 8 bytes");
    dt.kind = Kind::Float;
  } else if (kind == 'i' || kind == 'u') {
    if (dt.size != 1 && dt.size != 2 && dt.size != 4 && dt.size != 8)
      return unsupported("an integer of neither 1, 2, 4 nor 8 bytes");
    dt.kind = kind == 'i' ? Kind::Int : Kind::UInt;
  } else {  // 'b1' is NumPy's descr of bool
    if (dt.size != 1) return unsupported("a bool of other than 1 byte");
    dt.kind = Kind::Bool;
  }
  return dt;
}

/// Converts elements [first, first + n) of the file's order (C or Fortran) into `out`, row-major.
void convert(const unsigned char* data, std::size_t first, std::size_t n, const Layout& l, double* out) {
  for (std::size_t k = first; k < first + n; ++k, data += l.dtype.size) {
    const std::size_t dst = l.fortran_order ? (k % l.rows) * l.cols + k / l.rows : k;
    out[dst] = decode_element(data, l.dtype);
  }
}

void encode(std::span<const double> values, std::size_t rows, std::size_t cols, bool fortran_order, const Dtype& dt,
            const std::string& descr, std::vector<unsigned char>& out) {
  const std::size_t n = values.size();
  for (std::size_t k = 0; k < n; ++k) {
    // The k-th element of the file's order: row-major for C order, column-major for Fortran order.
    const std::size_t src = fortran_order ? (k % rows) * cols + k / rows : k;
    const std::uint64_t u = encode_element(values[src], dt, descr);
    for (std::size_t i = 0; i < dt.size; ++i)
      out.push_back(static_cast<unsigned char>(u >> (8 * (dt.big_endian ? dt.size - 1 - i : i))));
  }
}

}  // namespace halfmap::npy::detail
