// Writes the .npy files of `halfmap diagnose`'s CLI tests into a folder (argv[1]): the cases of
// tests/diagnose_cases.hpp as <case>_x.npy and <case>_y.npy (written with npy::save, never with Python), and
// files the CLI must refuse with exit code 2. Run through the emulator in the arm64 preset like the CLI itself.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "diagnose_cases.hpp"
#include "halfmap/npy.hpp"

namespace {

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

/// A version 1.0 header by hand, for the dtypes and shapes npy::serialize will not write.
std::string header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += char(dict.size() & 0xFF);
  out += char(dict.size() >> 8);
  return out + dict;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: diagnose_gen FOLDER\n", stderr);
    return 2;
  }
  const std::string dir = argv[1];
  using halfmap::npy::save;
  try {
    for (std::string_view name : halfmap::test::kDiagnoseCases) {
      const halfmap::test::DiagnoseCase c = halfmap::test::diagnose_case(name);
      save(dir + "/" + c.name + "_x.npy", c.features, c.rows, c.cols, 2, "<f4");
      save(dir + "/" + c.name + "_y.npy", c.labels, c.rows, 1, 1, "<f8");
    }
    // The clean case as float64 in Fortran order: the same values, so the same verdict.
    const halfmap::test::DiagnoseCase clean = halfmap::test::diagnose_case("clean");
    save(dir + "/clean_f8F_x.npy", clean.features, clean.rows, clean.cols, 2, "<f8", true);
    const halfmap::test::DiagnoseCase c = halfmap::test::diagnose_case("small");
    // One feature column as a 1-D array: accepted, as one column.
    std::vector<double> x0;
    for (std::size_t r = 0; r < c.rows; ++r) x0.push_back(c.features[r * c.cols]);
    save(dir + "/onecol_x.npy", x0, c.rows, 1, 1, "<f8");
    // Arrays that do not fit together.
    save(dir + "/short_y.npy", std::vector<double>(c.labels.begin(), c.labels.end() - 1), c.rows - 1, 1, 1, "<f8");
    save(dir + "/wide_y.npy", std::vector<double>(c.features.begin(), c.features.begin() + 2 * c.rows), c.rows, 2, 2,
         "<f8");
    // Files the reader refuses.
    write_raw(dir + "/text.npy", "x,y\n1,2\n");
    const std::vector<unsigned char> full = halfmap::npy::serialize(c.features, c.rows, c.cols, 2, "<f8");
    write_raw(dir + "/truncated.npy", std::string(full.begin(), full.begin() + long(full.size() / 2)));
    write_raw(dir + "/header_cut.npy", std::string(full.begin(), full.begin() + 20));
    write_raw(dir + "/complex.npy", header("<c16", "(2,)") + std::string(32, '\0'));
    write_raw(dir + "/object.npy", header("|O", "(2,)") + std::string(16, '\0'));
    write_raw(dir + "/empty.npy", header("<f8", "(0,)"));
    write_raw(dir + "/huge.npy", header("<f8", "(1099511627776, 1024)") + std::string(64, '\0'));
    write_raw(dir + "/three_d.npy", header("<f8", "(2, 2, 2)") + std::string(64, '\0'));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "diagnose_gen: %s\n", e.what());
    return 1;
  }
  return 0;
}
