// The .npy reader and writer of include/halfmap/npy.hpp.
//
// What xtensor's xnpy.hpp (Debian libxtensor-dev 0.24.3) is used for, and why not more: its header writer
// (xt::detail::write_header, the NumPy layout: the dict in key order, padded with spaces to a multiple of 64
// bytes, then '\n') writes every header `serialize` produces, and its magic string is the one checked here. Its
// reading path is not safe on hostile input, so the reader below is halfmap's own, and it validates everything
// before it allocates:
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

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>
#include <string_view>
#include <system_error>

#include <xtensor/xnpy.hpp>

#include "halfmap/half.hpp"

namespace halfmap::npy {
namespace {

constexpr std::string_view kMagic{xt::detail::magic_string, xt::detail::magic_string_length};  // "\x93NUMPY"
constexpr std::size_t kMaxPrefix = 12;  // magic (6), version (2), header length (2 in 1.0, 4 in 2.0 and 3.0)
// NumPy writes headers of a few hundred bytes for the shapes halfmap reads (and itself refuses more than 10000
// by default); the cap keeps a hostile length from making load() read a huge header.
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 16;
constexpr const char* kSupported = "halfmap reads f2, f4, f8, integer and bool arrays";

[[noreturn]] void fail(const std::string& name, const std::string& sentence) { throw Error(name + ": " + sentence); }

/// Text from the file echoed in a message, cut short so that a hostile header cannot make the sentence huge.
std::string shown(const std::string& s) { return s.size() <= 24 ? s : s.substr(0, 24) + "..."; }

enum class Kind { Float, Int, UInt, Bool };

struct Dtype {
  Kind kind = Kind::Float;
  std::size_t size = 0;  // bytes per element
  bool big_endian = false;
};

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
    case 'f': case 'i': case 'u': case 'b': case '?': break;
    case 'c': return unsupported("complex");
    case 'O': return unsupported("Python objects, stored as a pickle");
    case 'U': case 'S': case 'a': return unsupported("strings");
    case 'V': return unsupported("raw bytes");
    case 'M': case 'm': return unsupported("dates or times");
    default: return unsupported("not a NumPy numeric type");
  }
  if (kind == '?' && s.empty()) s = "1";  // '?' is NumPy's one-character code for bool
  if (s.empty() || s.size() > 2 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return unsupported("no size in bytes");
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
    if (dt.size != 1) return unsupported("a bool of more than 1 byte");
    dt.kind = Kind::Bool;
  }
  return dt;
}

/// "(3,)", "(2, 3)", "()": the shape as Python prints it, for messages.
std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// The fields of the header's dict. Parses the Python literal NumPy writes ({'descr': '<f8', 'fortran_order':
/// False, 'shape': (3, 4), }) strictly but in any key order and spacing; nothing here can read out of bounds.
struct HeaderDict {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

class DictParser {
 public:
  DictParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  HeaderDict parse() {
    HeaderDict d;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    if (!eat('{')) malformed("it is not a Python dict literal (it does not start with '{')");
    while (!eat('}')) {
      const std::string key = quoted("a quoted key");
      if (!eat(':')) malformed("expected ':' after the key '" + shown(key) + "'");
      if (key == "descr") {
        once(seen_descr, key);
        skip_space();
        if (pos_ < s_.size() && (s_[pos_] == '[' || s_[pos_] == '{'))
          fail(name_, std::string("unsupported dtype (a structured dtype, with named fields); ") + kSupported + ".");
        d.descr = quoted("a quoted dtype after 'descr'");
      } else if (key == "fortran_order") {
        once(seen_fortran, key);
        if (word("True")) d.fortran_order = true;
        else if (word("False")) d.fortran_order = false;
        else malformed("'fortran_order' is neither True nor False");
      } else if (key == "shape") {
        once(seen_shape, key);
        d.shape = tuple();
      } else {
        malformed("unexpected key '" + shown(key) +
                  "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      if (eat(',')) continue;
      if (!eat('}')) malformed("expected ',' or '}' after the value of '" + shown(key) + "'");
      break;
    }
    skip_space();
    if (pos_ != s_.size()) malformed("there is text after the dict's closing '}'");
    if (!seen_descr) malformed("it has no 'descr' key");
    if (!seen_fortran) malformed("it has no 'fortran_order' key");
    if (!seen_shape) malformed("it has no 'shape' key");
    return d;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) { fail(name_, "malformed .npy header: " + what + "."); }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    skip_space();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) malformed("the key '" + key + "' appears twice");
    seen = true;
  }

  /// A '...' or "..." string of printable ASCII without escapes (all that keys and simple dtypes need).
  std::string quoted(const char* what) {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) malformed(std::string("expected ") + what);
    const char quote = s_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      const char c = s_[pos_];
      if (c < 0x20 || c > 0x7E || c == '\\') malformed("a string holds a character other than printable ASCII");
      ++pos_;
    }
    if (pos_ >= s_.size()) malformed("a string is not closed");
    ++pos_;
    return std::string(s_.substr(start, pos_ - 1 - start));
  }

  /// A tuple of non-negative integers: (), (3,), (2, 3), (2, 3,).
  std::vector<std::size_t> tuple() {
    std::vector<std::size_t> dims;
    if (!eat('(')) malformed("'shape' is not a tuple");
    if (eat(')')) return dims;
    for (;;) {
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '-') fail(name_, "the shape has a negative dimension.");
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') malformed("expected a dimension in 'shape'");
      std::size_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        const std::size_t digit = std::size_t(s_[pos_++] - '0');
        if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10)
          fail(name_, "the array is too large: a dimension of its shape does not fit in 64 bits.");
        v = v * 10 + digit;
      }
      dims.push_back(v);
      if (eat(',')) {
        if (eat(')')) return dims;
        continue;
      }
      if (!eat(')')) malformed("expected ',' or ')' in 'shape'");
      if (dims.size() == 1) malformed("'shape' is (" + std::to_string(v) + "), an integer, not the tuple (" +
                                      std::to_string(v) + ",)");
      return dims;
    }
  }

  std::string_view s_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::uint64_t>::max();
  return std::uint64_t(pages) * std::uint64_t(page);
}

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

/// From the file's first min(size, 12) bytes: checks magic and version, returns where the data starts (the end
/// of the header), which is checked to lie within the file.
std::size_t header_end(std::span<const unsigned char> prefix, std::uint64_t file_size, const std::string& name) {
  const std::string_view start(reinterpret_cast<const char*>(prefix.data()), std::min(prefix.size(), kMagic.size()));
  if (start != kMagic) {
    if (prefix.size() >= 2 && prefix[0] == 'P' && prefix[1] == 'K')
      fail(name, "not a .npy file (it is a zip archive; an .npz holds .npy files, extract one with unzip).");
    if (prefix.size() >= 2 && prefix[0] == 0x80 && prefix[1] >= 2 && prefix[1] <= 5)
      fail(name, "not a .npy file (it is a Python pickle).");
    fail(name, "not a .npy file (the first bytes are not \\x93NUMPY).");
  }
  if (prefix.size() < 8) fail(name, "truncated: the file ends inside the .npy header.");
  const unsigned major = prefix[6], minor = prefix[7];
  if ((major < 1 || major > 3) || minor != 0)
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   "; halfmap reads versions 1.0, 2.0 and 3.0.");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (prefix.size() < 8 + len_bytes) fail(name, "truncated: the file ends inside the .npy header.");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= std::size_t(prefix[8 + i]) << (8 * i);
  const std::uint64_t after = file_size - (8 + len_bytes);
  if (header_len > after)
    fail(name, "truncated: the header is declared " + std::to_string(header_len) + " bytes long but only " +
                   std::to_string(after) + " bytes follow.");
  if (header_len > kMaxHeaderBytes)
    fail(name, "malformed .npy header: it is declared " + std::to_string(header_len) +
                   " bytes long, more than the 65536 halfmap reads (NumPy writes a few hundred).");
  return 8 + len_bytes + header_len;
}

/// From the file's first `header_end` bytes: the dict, the dtype, the shape, and the data's size checked
/// against the file, the limit and the machine's memory. Nothing is allocated beyond the header's size.
Layout read_layout(std::span<const unsigned char> head, std::uint64_t file_size, const std::string& name,
                   std::size_t max_data_bytes) {
  const std::size_t dict_start = head[6] == 1 ? 10 : 12;
  std::string_view text(reinterpret_cast<const char*>(head.data()) + dict_start, head.size() - dict_start);
  if (text.empty() || text.back() != '\n') fail(name, "malformed .npy header: it does not end with a newline.");
  text.remove_suffix(1);
  HeaderDict dict = DictParser(text, name).parse();

  Layout l;
  l.descr = dict.descr;
  l.dtype = decode_descr(dict.descr, name);
  l.fortran_order = dict.fortran_order;
  l.data_offset = head.size();
  const std::string shape = shape_text(dict.shape);
  if (dict.shape.empty() || dict.shape.size() > 2)
    fail(name, "the array is " + std::to_string(dict.shape.size()) + "-D (shape " + shape +
                   "); halfmap reads 1-D and 2-D arrays.");
  l.ndim = int(dict.shape.size());
  l.rows = dict.shape[0];
  l.cols = l.ndim == 2 ? dict.shape[1] : 1;
  if (l.rows == 0 || l.cols == 0) fail(name, "the array is empty (shape " + shape + ").");

  // Products checked for overflow: a hostile shape must not wrap around to a small size.
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (l.rows > kMax / l.cols || l.rows * l.cols > kMax / sizeof(double))
    fail(name, "the array is too large: shape " + shape + " has more elements than memory can address.");
  l.count = l.rows * l.cols;
  l.data_bytes = l.count * l.dtype.size;
  if (l.data_bytes > max_data_bytes)
    fail(name, "the array is too large: shape " + shape + " of '" + l.descr + "' is " +
                   std::to_string(l.data_bytes) + " bytes, more than the limit of " + std::to_string(max_data_bytes) +
                   " bytes.");
  const std::uint64_t follow = file_size - l.data_offset;
  if (follow < l.data_bytes)
    fail(name, "truncated: the header declares " + std::to_string(l.data_bytes) + " bytes of data but " +
                   std::to_string(follow) + " follow.");
  if (follow > l.data_bytes)
    fail(name, "extra data: " + std::to_string(follow - l.data_bytes) + " more bytes follow the " +
                   std::to_string(l.data_bytes) +
                   " bytes of data the header declares (several arrays saved into one file?); halfmap reads one "
                   "array per file.");
  const std::uint64_t phys = physical_memory_bytes();
  if (l.count > phys / sizeof(double))
    fail(name, "the array is too large for this machine's memory: shape " + shape + " is " +
                   std::to_string(l.count * sizeof(double)) + " bytes as doubles, and the machine has " +
                   std::to_string(phys) + " bytes.");
  return l;
}

double decode_element(const unsigned char* p, const Dtype& dt) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < dt.size; ++i) u |= std::uint64_t(p[dt.big_endian ? dt.size - 1 - i : i]) << (8 * i);
  switch (dt.kind) {
    case Kind::Float:
      if (dt.size == 2) return to_f64(f16{std::uint16_t(u)});
      if (dt.size == 4) return double(std::bit_cast<float>(std::uint32_t(u)));
      return std::bit_cast<double>(u);
    case Kind::Int: {
      const int unused = 64 - 8 * int(dt.size);  // sign-extend: arithmetic right shift is defined in C++20
      return double(std::int64_t(u << unused) >> unused);  // 64-bit values beyond 2^53 round to nearest
    }
    case Kind::UInt: return double(u);
    case Kind::Bool: return u != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

/// Converts elements [first, first + n) of the file's order (C or Fortran) into `out`, row-major.
void convert(const unsigned char* data, std::size_t first, std::size_t n, const Layout& l, double* out) {
  for (std::size_t k = first; k < first + n; ++k, data += l.dtype.size) {
    const std::size_t dst = l.fortran_order ? (k % l.rows) * l.cols + k / l.rows : k;
    out[dst] = decode_element(data, l.dtype);
  }
}

Array make_array(const Layout& l) {
  Array a;
  a.values.resize(l.count);
  a.rows = l.rows;
  a.cols = l.cols;
  a.ndim = l.ndim;
  a.descr = l.descr;
  a.fortran_order = l.fortran_order;
  return a;
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
    case Kind::Int: {
      const double lim = std::ldexp(1.0, bits - 1);
      if (!(v == std::trunc(v) && v >= -lim && v < lim)) return refuse();
      const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      return std::uint64_t(std::int64_t(v)) & mask;
    }
    case Kind::UInt:
      if (!(v == std::trunc(v) && v >= 0 && v < std::ldexp(1.0, bits))) return refuse();
      return std::uint64_t(v);
    case Kind::Bool:
      if (!(v == 0 || v == 1)) return refuse();
      return v == 1;
  }
  return 0;
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
  const std::size_t data_offset = header_end(bytes.first(std::min(bytes.size(), kMaxPrefix)), bytes.size(), name);
  const Layout l = read_layout(bytes.first(data_offset), bytes.size(), name, max_data_bytes);
  Array a = make_array(l);
  convert(bytes.data() + l.data_offset, 0, l.count, l, a.values.data());
  return a;
}

Array load(const std::string& path, std::size_t max_data_bytes) {
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
  // to lie within the file and to be small; then the data, converted in chunks (no second copy of the array).
  std::vector<unsigned char> head(std::size_t(std::min<std::uint64_t>(size, kMaxPrefix)));
  read_exact(f.get(), head.data(), head.size(), path);
  const std::size_t data_offset = header_end(head, size, path);
  const std::size_t have = head.size();
  head.resize(data_offset);
  read_exact(f.get(), head.data() + have, data_offset - have, path);
  const Layout l = read_layout(head, size, path, max_data_bytes);

  Array a = make_array(l);
  const std::size_t chunk = (std::size_t{1} << 20) / l.dtype.size;
  std::vector<unsigned char> buf(std::min(l.count, chunk) * l.dtype.size);
  for (std::size_t k = 0; k < l.count; k += chunk) {
    const std::size_t n = std::min(chunk, l.count - k);
    read_exact(f.get(), buf.data(), n * l.dtype.size, path);
    convert(buf.data(), k, n, l, a.values.data());
  }
  return a;
}

std::vector<unsigned char> serialize(std::span<const double> values, std::size_t rows, std::size_t cols, int ndim,
                                     const std::string& descr, bool fortran_order) {
  const std::string name = "serialize";
  if (ndim != 1 && ndim != 2) fail(name, "ndim must be 1 or 2, not " + std::to_string(ndim) + ".");
  if (ndim == 1 && cols != 1) fail(name, "a 1-D array has cols == 1.");
  if ((cols != 0 && rows > values.size() / cols) || rows * cols != values.size())
    fail(name, "rows × cols is not the number of values.");
  const Dtype dt = decode_descr(descr, name);

  std::vector<std::size_t> shape{rows};
  if (ndim == 2) shape.push_back(cols);
  std::ostringstream header;
  xt::detail::write_header(header, descr, fortran_order, shape);
  const std::string h = header.str();

  std::vector<unsigned char> out(h.begin(), h.end());
  out.reserve(h.size() + values.size() * dt.size);
  const std::size_t n = values.size();
  for (std::size_t k = 0; k < n; ++k) {
    // The k-th element of the file's order: row-major for C order, column-major for Fortran order.
    const std::size_t src = fortran_order ? (k % rows) * cols + k / rows : k;
    const std::uint64_t u = encode_element(values[src], dt, descr);
    for (std::size_t i = 0; i < dt.size; ++i)
      out.push_back(static_cast<unsigned char>(u >> (8 * (dt.big_endian ? dt.size - 1 - i : i))));
  }
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
