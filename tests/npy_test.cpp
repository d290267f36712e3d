// The .npy reader (include/halfmap/npy.hpp): serialize -> parse round trips for every dtype, byte order, memory
// order and rank, bit-exact; hand-made headers that are not serialize's; the files of the fuzz corpus that NumPy
// itself wrote (tests/fuzz/make_corpus.py), so that the reader is not only checked against its own writer; and
// every kind of bad input, each an Error whose sentence names the file and the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "halfmap/npy.hpp"
#include "test_util.hpp"

namespace halfmap::npy {
namespace {

using Bytes = std::vector<unsigned char>;
using test::hex;

/// A .npy file made by hand: magic, version `major`.0, the header `dict` padded with spaces and a newline to a
/// multiple of 64 bytes as NumPy does, then `data`.
Bytes npy_file(const std::string& dict, const Bytes& data = {}, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  for (std::size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<unsigned char>(h.size() >> (8 * i)));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string dict_of(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

/// The Error's sentence, or "no error" if parse accepted the bytes.
std::string error_of(const Bytes& bytes, std::size_t max_data_bytes = kDefaultMaxDataBytes) {
  try {
    parse(bytes, "x.npy", max_data_bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

#define EXPECT_STARTS_WITH(text, prefix)                                                  \
  do {                                                                                    \
    const std::string text_ = (text);                                                     \
    EXPECT_EQ(text_.substr(0, std::string(prefix).size()), prefix) << "whole: " << text_; \
  } while (0)

/// Same value: bit for bit, except that any NaN matches any NaN (payloads are not the reader's business).
void expect_same(double got, double want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << hex(got);
  } else {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
        << what << ": got " << hex(got) << ", want " << hex(want);
  }
}

// ---- round trips -----------------------------------------------------------------------------------------------

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Values each dtype holds exactly, chosen at its edges: fp16 subnormals and the largest finite value, integer
/// extremes (2^63 - 1024 is the largest double below 2^63), signed zeros, infinities and NaN.
std::vector<double> exact_values(char kind, int size) {
  switch (kind) {
    case 'f':
      if (size == 2) return {0.0, -0.0, 1.0, -2.5, 65504.0, 0x1p-24, 0x3FFp-24, 0x1p-14, kInf, -kInf, kNaN, 0.5};
      if (size == 4) return {0.0, -0.0, 0x1p-149, 0x1.fffffep127, 0.1f, kInf, -kInf, kNaN, 1.0, -3.0, 1e-40f, 7.0};
      return {0.0, -0.0, 0x1p-1074, 1.7976931348623157e308, 0.1, kInf, -kInf, kNaN, 1.0, -3.0, 1e-310, 7.0};
    case 'i': {
      const double lo = -std::ldexp(1.0, 8 * size - 1);
      const double hi = size == 8 ? 0x1p63 - 1024 : -lo - 1;
      return {0, 1, -1, lo, hi, lo + 1, hi - 1, 2, -2, 100, -100, 42};
    }
    case 'u': {
      const double hi = size == 8 ? 0x1p64 - 2048 : std::ldexp(1.0, 8 * size) - 1;
      return {0, 1, hi, hi - 1, 2, 3, 100, 127, 128, 5, 6, 42};
    }
    default:
      return {0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1};
  }
}

struct Case {
  std::string descr;
  bool fortran;
  int ndim;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.descr << (c.fortran ? " Fortran " : " C ") << c.ndim << "-D"; }

class NpyRoundTrip : public testing::TestWithParam<Case> {};

TEST_P(NpyRoundTrip, SerializeThenParseGivesTheValuesBitForBit) {
  const Case& c = GetParam();
  const std::vector<double> v = exact_values(c.descr[1], c.descr[2] - '0');
  const std::size_t rows = c.ndim == 1 ? 12 : 3, cols = c.ndim == 1 ? 1 : 4;
  const Bytes bytes = serialize(v, rows, cols, c.ndim, c.descr, c.fortran);
  const Array a = parse(bytes, "x.npy");
  EXPECT_EQ(a.rows, rows);
  EXPECT_EQ(a.cols, cols);
  EXPECT_EQ(a.ndim, c.ndim);
  EXPECT_EQ(a.descr, c.descr);
  EXPECT_EQ(a.fortran_order, c.fortran);
  ASSERT_EQ(a.values.size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) expect_same(a.values[i], v[i], "element " + std::to_string(i));
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* t : {"f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1"})
    for (const char* order : {"<", ">", "|"})
      for (bool fortran : {false, true})
        for (int ndim : {1, 2}) cases.push_back({std::string(order) + t, fortran, ndim});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NpyRoundTrip, testing::ValuesIn(all_cases()), [](const auto& info) {
  const Case& c = info.param;
  const char* order = c.descr[0] == '<' ? "le" : c.descr[0] == '>' ? "be" : "na";
  return c.descr.substr(1) + "_" + order + (c.fortran ? "_F_" : "_C_") + std::to_string(c.ndim) + "d";
});

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The bytes themselves, independently of parse: serialize writes byte for byte what NumPy wrote for the same
// array (tests/fuzz/make_corpus.py), in both byte orders and memory orders.
TEST(NpySerialize, WritesWhatNumPyWrites) {
  const std::filesystem::path dir = HALFMAP_NPY_CORPUS;
  const std::vector<double> v = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(serialize(v, 2, 3, 2, ">i2"), read_file(dir / "good_i2_be_C_2d.npy"));
  EXPECT_EQ(serialize(v, 2, 3, 2, "<i4", true), read_file(dir / "good_i4_le_F_2d.npy"));
  EXPECT_EQ(serialize(v, 2, 3, 2, ">u4", true), read_file(dir / "good_u4_be_F_2d.npy"));
  EXPECT_EQ(serialize(v, 6, 1, 1, "<f8"), read_file(dir / "good_f8_le_C_1d.npy"));
  EXPECT_EQ(serialize(v, 2, 3, 2, ">f2", true), read_file(dir / "good_f2_be_F_2d.npy"));
  EXPECT_EQ(serialize(std::vector<double>{0, 1, 0, 1, 0, 1}, 6, 1, 1, "|b1"), read_file(dir / "good_b1_na_C_1d.npy"));
}

// And by hand: the header layout (the data starts at a multiple of 64) and the data's byte and memory order.
TEST(NpySerialize, WritesTheDataInTheOrderAsked) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 258};  // 2 x 3
  const Bytes c = serialize(v, 2, 3, 2, ">i2", false);
  const std::string dict = "{'descr': '>i2', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(c.size(), 128u + 12u);
  EXPECT_EQ(std::string(c.begin() + 10, c.begin() + 10 + dict.size()), dict);
  EXPECT_EQ(c[8] + 256 * c[9], 118);  // header length, little-endian
  EXPECT_EQ(c[127], '\n');
  EXPECT_EQ(Bytes(c.begin() + 128, c.end()), (Bytes{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 2}));
  const Bytes f = serialize(v, 2, 3, 2, "<i2", true);  // column by column: 1 4 2 5 3 258
  EXPECT_EQ(Bytes(f.begin() + 128, f.end()), (Bytes{1, 0, 4, 0, 2, 0, 5, 0, 3, 0, 2, 1}));
  const Bytes one = serialize(std::vector<double>{1.0}, 1, 1, 1, "<f2");
  EXPECT_NE(std::string(one.begin(), one.end()).find("'shape': (1,), }"), std::string::npos);
  EXPECT_EQ(Bytes(one.end() - 2, one.end()), (Bytes{0x00, 0x3C}));
}

TEST(NpySerialize, RoundsToTheDtypeAndRefusesWhatAnIntegerCannotHold) {
  const Array a = parse(serialize(std::vector<double>{0.1, 65520.0, 0x1p-25, 0x1.8p-25}, 4, 1, 1, "<f2"));
  expect_same(a.values[0], 0.0999755859375, "0.1 -> fp16 0x2E66");
  expect_same(a.values[1], kInf, "65520 -> inf");
  expect_same(a.values[2], 0.0, "2^-25 ties to even zero");
  expect_same(a.values[3], 0x1p-24, "1.5 * 2^-25 -> the smallest subnormal");
  for (auto [value, descr] : {std::pair{128.0, "|i1"},
                              {-129.0, "|i1"},
                              {0.5, "<i4"},
                              {-1.0, "<u8"},
                              {0x1p65, "<u8"},
                              {0x1p64, "<i8"},
                              {-0x1p64, "<i8"},
                              {kNaN, "<i2"},
                              {2.0, "|b1"}}) {
    EXPECT_THROW(serialize(std::vector<double>{value}, 1, 1, 1, descr), Error) << value << " as " << descr;
  }
  EXPECT_THROW(serialize(std::vector<double>{1.0}, 1, 1, 1, "<c8"), Error);
  EXPECT_THROW(serialize(std::vector<double>{1.0, 2.0}, 1, 1, 1, "<f8"), Error);  // rows x cols != size
  EXPECT_THROW(serialize(std::vector<double>{1.0, 2.0}, 2, 1, 3, "<f8"), Error);  // ndim 3
}

// ---- exact conversions from raw bytes --------------------------------------------------------------------------

TEST(NpyParse, Fp16PatternsConvertExactlyInBothByteOrders) {
  const std::vector<std::uint16_t> bits = {0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3C00};
  const std::vector<double> want = {0x1p-24, 0x3FFp-24, 0x1p-14, 65504.0, kInf, -kInf, kNaN, -0.0, 1.0};
  for (bool big : {false, true}) {
    Bytes data;
    for (std::uint16_t b : bits) {
      data.push_back(static_cast<unsigned char>(big ? b >> 8 : b));
      data.push_back(static_cast<unsigned char>(big ? b : b >> 8));
    }
    const Array a = parse(npy_file(dict_of(big ? ">f2" : "<f2", "(9,)"), data));
    for (std::size_t i = 0; i < bits.size(); ++i) expect_same(a.values[i], want[i], test::hex16(bits[i]));
  }
}

TEST(NpyParse, WideIntegersRoundToNearestEven) {
  // INT64_MAX and UINT64_MAX round up to 2^63 and 2^64; 2^53 + 1 is a tie and goes to the even 2^53.
  auto le64 = [](std::uint64_t u) {
    Bytes b;
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(u >> (8 * i)));
    return b;
  };
  Bytes data = le64(0x7FFFFFFFFFFFFFFFull);
  for (std::uint64_t u : {0x8000000000000000ull, (1ull << 53) + 1}) {
    const Bytes b = le64(u);
    data.insert(data.end(), b.begin(), b.end());
  }
  const Array i = parse(npy_file(dict_of("<i8", "(3,)"), data));
  expect_same(i.values[0], 0x1p63, "INT64_MAX");
  expect_same(i.values[1], -0x1p63, "INT64_MIN");
  expect_same(i.values[2], 0x1p53, "2^53 + 1");
  const Array u = parse(npy_file(dict_of("<u8", "(1,)"), le64(~0ull)));
  expect_same(u.values[0], 0x1p64, "UINT64_MAX");
  // serialize takes those two doubles back as the extremes, so that it accepts whatever parse returns (found by
  // the fuzzer: tests/fuzz/corpus/npy/regression_u8_near_max.npy).
  EXPECT_EQ(Bytes(serialize(u.values, 1, 1, 1, "<u8")).back(), 0xFF);
  const Bytes imax = serialize(i.values, 3, 1, 1, "<i8");
  EXPECT_EQ(Bytes(imax.end() - 24, imax.end() - 16), le64(0x7FFFFFFFFFFFFFFFull));
  // Any non-zero byte of a bool is true, as NumPy reads it.
  const Array b = parse(npy_file(dict_of("|b1", "(3,)"), Bytes{0, 1, 0xFF}));
  EXPECT_EQ(b.values, (std::vector<double>{0, 1, 1}));
}

// ---- headers that are not serialize's ---------------------------------------------------------------------------

TEST(NpyParse, AcceptsAnyVersionKeyOrderAndSpacingNumPyCouldWrite) {
  const Bytes data = {1, 2, 3, 4, 5, 6};
  const std::vector<double> rows3 = {1, 2, 3, 4, 5, 6};
  const std::vector<double> cols = {1, 4, 2, 5, 3, 6};  // Fortran order, shape (3, 2): columns 1 2 3 and 4 5 6
  struct Variant {
    std::string dict;
    int major;
    std::vector<double> want;
  };
  const std::vector<Variant> variants = {
      {dict_of("|u1", "(6,)"), 1, rows3},
      {dict_of("|u1", "(6,)"), 2, rows3},
      {dict_of("|u1", "(6,)"), 3, rows3},
      {"{'descr':'|u1','fortran_order':False,'shape':(6,)}", 1, rows3},
      {"{'shape': (6,), 'descr': '|u1', 'fortran_order': False}", 1, rows3},
      {"{ \"fortran_order\" : False , \"shape\" : ( 6 , ) , \"descr\" : \"u1\" , }", 1, rows3},
      {"{'descr': '|u1',\t'fortran_order': False, 'shape': (6, )}", 2, rows3},
      {"{'descr': '|u1', 'fortran_order': True, 'shape': (3, 2,), }", 1, cols},
      {"{'descr': '|?', 'fortran_order': False, 'shape': (2, 3)}", 1, {1, 1, 1, 1, 1, 1}},
  };
  for (const Variant& v : variants) {
    const Array a = parse(npy_file(v.dict, data, v.major), "x.npy");
    EXPECT_EQ(a.values, v.want) << v.dict << " version " << v.major;
  }
}

// ---- the files NumPy wrote (tests/fuzz/make_corpus.py) ----------------------------------------------------------

TEST(NpyLoad, ReadsTheFilesNumPyWrote) {
  const std::filesystem::path dir = HALFMAP_NPY_CORPUS;
  int good = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("good_", 0) != 0) continue;
    ++good;
    SCOPED_TRACE(file);
    const Array a = load(entry.path().string());
    // make_corpus.py writes arange(6) (bool: arange(6) % 2), as 2 x 3 or as 6.
    const bool is_bool = a.descr == "|b1";
    ASSERT_EQ(a.values.size(), 6u);
    EXPECT_EQ(a.rows, a.ndim == 2 ? 2u : 6u);
    EXPECT_EQ(a.cols, a.ndim == 2 ? 3u : 1u);
    for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(a.values[i], is_bool ? double(i % 2) : double(i)) << i;
  }
  EXPECT_GE(good, 12);  // one file per dtype at least
  const Array s = load((dir / "special_f2.npy").string());
  const std::vector<double> want = {0x1p-24, 0x3FFp-24, 65504.0, kInf, -kInf, kNaN, -0.0, 0.0999755859375};
  ASSERT_EQ(s.values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) expect_same(s.values[i], want[i], "special_f2 " + std::to_string(i));
}

// ---- bad input: one sentence each --------------------------------------------------------------------------------

TEST(NpyErrors, NotANpyFile) {
  EXPECT_EQ(error_of({}), "x.npy: not a .npy file (the first bytes are not \\x93NUMPY).");
  EXPECT_EQ(error_of({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}),
            "x.npy: not a .npy file (the first bytes are not \\x93NUMPY).");
  EXPECT_STARTS_WITH(error_of({'P', 'K', 3, 4, 0, 0, 0, 0}), "x.npy: not a .npy file (it is a zip archive");
  EXPECT_STARTS_WITH(error_of({0x80, 4, 0x95, 0, 0}), "x.npy: not a .npy file (it is a Python pickle)");
}

TEST(NpyErrors, TruncatedHeader) {
  const Bytes whole = npy_file(dict_of("<f8", "(1,)"), Bytes(8, 0));
  for (std::size_t n : {6u, 8u, 9u})
    EXPECT_STARTS_WITH(error_of(Bytes(whole.begin(), whole.begin() + n)), "x.npy: truncated: the file ends inside");
  EXPECT_EQ(error_of(Bytes(whole.begin(), whole.begin() + 40)),
            "x.npy: truncated: the header is declared 118 bytes long but only 30 bytes follow.");
}

TEST(NpyErrors, TruncatedOrExtraData) {
  Bytes f = npy_file(dict_of("<f8", "(3,)"), Bytes(24, 0));
  f.pop_back();
  EXPECT_EQ(error_of(f), "x.npy: truncated: the header declares 24 bytes of data but 23 follow.");
  f.push_back(0);
  f.push_back(0);
  EXPECT_STARTS_WITH(error_of(f), "x.npy: extra data: 1 more bytes follow the 24 bytes of data");
}

TEST(NpyErrors, UnsupportedVersion) {
  Bytes f = npy_file(dict_of("<f8", "(1,)"), Bytes(8, 0));
  f[6] = 4;
  EXPECT_STARTS_WITH(error_of(f), "x.npy: unsupported .npy format version 4.0;");
  f[6] = 1;
  f[7] = 1;
  EXPECT_STARTS_WITH(error_of(f), "x.npy: unsupported .npy format version 1.1;");
}

TEST(NpyErrors, HugeOrOverflowingShapes) {
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(4294967296, 4294967296)"))),
            "x.npy: the array is too large: shape (4294967296, 4294967296) has more elements than memory can "
            "address.");
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(99999999999999999999999,)"))),
            "x.npy: the array is too large: a dimension of its shape does not fit in 64 bits.");
  // Below the overflow but above the limit: refused before anything is compared with the file or allocated.
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(1000,)")), 4000),
            "x.npy: the array is too large: shape (1000,) of '<f8' is 8000 bytes, more than the limit of 4000 "
            "bytes.");
  EXPECT_STARTS_WITH(error_of(npy_file(dict_of("<f8", "(2147483648,)"))),
                     "x.npy: the array is too large: shape (2147483648,) of '<f8' is 17179869184 bytes");
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(-1,)"))), "x.npy: the shape has a negative dimension.");
}

TEST(NpyErrors, UnsupportedDtypes) {
  EXPECT_EQ(error_of(npy_file(dict_of("<c8", "(1,)"), Bytes(8, 0))),
            "x.npy: unsupported dtype '<c8' (complex); halfmap reads f2, f4, f8, integer and bool arrays.");
  EXPECT_STARTS_WITH(error_of(npy_file(dict_of("|O", "(1,)"), Bytes(8, 0))),
                     "x.npy: unsupported dtype '|O' (Python objects, stored as a pickle)");
  for (const char* d : {"<U5", "|S3", "|V8", "<M8[ns]", "<f16", "<f3", "<i16", "|b2", "<x4", "<", "", "<f"})
    EXPECT_STARTS_WITH(error_of(npy_file(dict_of(d, "(1,)"), Bytes(8, 0))),
                       "x.npy: unsupported dtype '" + std::string(d) + "'");
  EXPECT_STARTS_WITH(error_of(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}")),
                     "x.npy: unsupported dtype (a structured dtype");
}

TEST(NpyErrors, EmptyZeroDAndThreeDArrays) {
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(0, 3)"))), "x.npy: the array is empty (shape (0, 3)).");
  EXPECT_EQ(error_of(npy_file(dict_of("<f4", "(0,)"))), "x.npy: the array is empty (shape (0,)).");
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "()"), Bytes(8, 0))),
            "x.npy: the array is 0-D (shape ()); halfmap reads 1-D and 2-D arrays.");
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", "(2, 3, 4)"), Bytes(192, 0))),
            "x.npy: the array is 3-D (shape (2, 3, 4)); halfmap reads 1-D and 2-D arrays.");
  std::string many = "(";
  for (int i = 0; i < 5000; ++i) many += "1, ";
  EXPECT_EQ(error_of(npy_file(dict_of("<f8", many + ")"), Bytes(8, 0), 2)),
            "x.npy: the array is 5000-D (shape (1, 1, 1, 1, ...)); halfmap reads 1-D and 2-D arrays.");
}

TEST(NpyErrors, MalformedHeaders) {
  const std::string m = "x.npy: malformed .npy header: ";
  const std::pair<std::string, std::string> cases[] = {
      {"[1, 2]", "it is not a Python dict literal"},
      {"", "it is not a Python dict literal"},
      {"{'descr': '<f8', 'fortran_order': False}", "it has no 'shape' key"},
      {"{'descr': '<f8', 'shape': (1,)}", "it has no 'fortran_order' key"},
      {"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", "the key 'descr' appears twice"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", "unexpected key 'x'"},
      {"{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}", "'fortran_order' is neither True nor False"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1)}", "'shape' is (1), an integer, not the tuple (1,)"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': [1]}", "'shape' is not a tuple"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,,)}", "expected a dimension in 'shape'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1 2)}", "expected ',' or ')' in 'shape'"},
      {"{'descr': '<f8 , 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}' after the value of 'descr'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,)} x", "there is text after the dict's closing '}'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,)", "expected ',' or '}' after the value of 'shape'"},
      {"{'descr': '<\\x66', 'fortran_order': False, 'shape': (1,)}", "a string holds a character other than"},
      {"{'descr: '<f8'}", "expected ':' after the key 'descr: '"},
      {"{descr: '<f8'}", "expected a quoted key"},
      {"{'descr", "a string is not closed"},
  };
  for (const auto& [dict, why] : cases) EXPECT_STARTS_WITH(error_of(npy_file(dict, Bytes(8, 0))), m + why);

  // The header must end with its newline; and a header of just "\n" is an error, not undefined behaviour (the
  // header xnpy's parse_header calls back() on an empty string for).
  Bytes f = npy_file(dict_of("<f8", "(1,)"), Bytes(8, 0));
  ASSERT_EQ(f.size(), 128u + 8u);
  f[127] = ' ';
  EXPECT_EQ(error_of(f), m + "it does not end with a newline.");
  EXPECT_EQ(error_of({0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 1, 0, '\n'}),
            m + "it is not a Python dict literal (it does not start with '{').");
}

// The inputs that crash xnpy's reader, refused in one sentence: a 200 kB descr (its std::regex overflows the
// stack), and a long one under the header cap, which must not come back whole in the message.
TEST(NpyErrors, HostileHeaderLengthsAreRefusedCheaply) {
  const std::string digits(200000, '1');
  EXPECT_STARTS_WITH(error_of(npy_file(dict_of("<f" + digits, "(1,)"), {}, 2)),
                     "x.npy: malformed .npy header: it is declared 200");
  const std::string e = error_of(npy_file(dict_of("<f" + std::string(60000, '1'), "(1,)"), {}, 2));
  EXPECT_STARTS_WITH(e, "x.npy: unsupported dtype '<f1111111111111111111111...' (");
  EXPECT_LT(e.size(), 200u);
}

// ---- files -------------------------------------------------------------------------------------------------------

class NpyFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("halfmap-npy-test-" + std::to_string(::getpid()) + "-" +
                                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  static std::string load_error(const std::string& p, std::size_t max = kDefaultMaxDataBytes) {
    try {
      load(p, max);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  std::filesystem::path dir_;
};

TEST_F(NpyFiles, SaveThenLoad) {
  const std::vector<double> v = {1.5, -2, 0x1p-24, 65504, 3, 4};
  save(path("a.npy"), v, 2, 3, 2, ">f2", true);
  EXPECT_FALSE(std::filesystem::exists(path("a.npy.tmp")));
  const Array a = load(path("a.npy"));
  EXPECT_EQ(a.values, v);
  EXPECT_EQ(a.rows, 2u);
  EXPECT_EQ(a.cols, 3u);
  EXPECT_EQ(a.descr, ">f2");
  EXPECT_TRUE(a.fortran_order);
  // Larger than load's 1 MiB chunk, in Fortran order, so that chunks end mid-column.
  std::vector<double> big(3 * 200003);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = double(i % 65536) - 32768;
  save(path("big.npy"), big, 200003, 3, 2, "<i4", true);
  EXPECT_EQ(load(path("big.npy")).values, big);
}

TEST_F(NpyFiles, MissingDirectoryAndUnwritable) {
  EXPECT_EQ(load_error(path("nope.npy")), path("nope.npy") + ": no such file.");
  EXPECT_EQ(load_error(dir_.string()), dir_.string() + ": is a directory, not a .npy file.");
  EXPECT_THROW(save(path("no/such/dir/a.npy"), std::vector<double>{1.0}, 1, 1, 1, "<f8"), Error);
  EXPECT_FALSE(std::filesystem::exists(path("no")));
}

TEST_F(NpyFiles, Unreadable) {
  save(path("locked.npy"), std::vector<double>{1.0}, 1, 1, 1, "<f8");
  std::filesystem::permissions(path("locked.npy"), std::filesystem::perms::none);
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions say";
  EXPECT_EQ(load_error(path("locked.npy")), path("locked.npy") + ": cannot be read (Permission denied).");
}

TEST_F(NpyFiles, BadFilesGiveTheSameSentencesAsParse) {
  std::ofstream(path("text.npy")) << "just text";
  EXPECT_EQ(load_error(path("text.npy")), path("text.npy") + ": not a .npy file (the first bytes are not \\x93NUMPY).");
  std::ofstream(path("empty.npy")).close();
  EXPECT_STARTS_WITH(load_error(path("empty.npy")), path("empty.npy") + ": not a .npy file");
  auto write = [&](const char* name, const Bytes& b) {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  };
  Bytes f = npy_file(dict_of("<f8", "(3,)"), Bytes(20, 0));
  write("short.npy", f);
  EXPECT_EQ(load_error(path("short.npy")),
            path("short.npy") + ": truncated: the header declares 24 bytes of data but 20 follow.");
  write("cut.npy", Bytes(f.begin(), f.begin() + 30));
  EXPECT_STARTS_WITH(load_error(path("cut.npy")), path("cut.npy") + ": truncated: the header is declared 118 bytes");
  write("limit.npy", npy_file(dict_of("<f8", "(3,)"), Bytes(24, 0)));
  EXPECT_STARTS_WITH(load_error(path("limit.npy"), 16), path("limit.npy") + ": the array is too large: shape (3,)");
  write("empty_array.npy", npy_file(dict_of("<f8", "(0, 3)")));
  EXPECT_EQ(load_error(path("empty_array.npy")), path("empty_array.npy") + ": the array is empty (shape (0, 3)).");
}

}  // namespace
}  // namespace halfmap::npy
