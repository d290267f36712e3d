// The .npy header (npy_detail.hpp): magic, version, length, and the dict of descr, fortran_order and shape, read
// strictly and checked against the file's size, the caller's limit and the machine's memory before anything is
// allocated. halfmap's own parser: why not xtensor's is at the top of npy.cpp.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include <xtensor/xnpy.hpp>

#include "npy_detail.hpp"

namespace halfmap::npy::detail {
namespace {

constexpr std::string_view kMagic{xt::detail::magic_string, xt::detail::magic_string_length};  // "\x93NUMPY"
// NumPy writes headers of a few hundred bytes for the shapes halfmap reads (and itself refuses more than 10000
// by default); the cap keeps a hostile length from making load() read a huge header.
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 16;

/// "(3,)", "(2, 3)", "()": the shape as Python prints it, for messages; past 4 dimensions "(1, 2, 3, 4, ...)",
/// so that a hostile header cannot make the sentence huge.
std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < std::min<std::size_t>(shape.size(), 4); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() > 4) s += ", ...";
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
        if (word("True"))
          d.fortran_order = true;
        else if (word("False"))
          d.fortran_order = false;
        else
          malformed("'fortran_order' is neither True nor False");
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
      if (dims.size() == 1)
        malformed("'shape' is (" + std::to_string(v) + "), an integer, not the tuple (" + std::to_string(v) + ",)");
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

}  // namespace

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
    fail(name, "the array is too large: shape " + shape + " of '" + l.descr + "' is " + std::to_string(l.data_bytes) +
                   " bytes, more than the limit of " + std::to_string(max_data_bytes) + " bytes.");
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

}  // namespace halfmap::npy::detail
