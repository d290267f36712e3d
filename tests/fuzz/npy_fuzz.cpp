// libFuzzer harness of the .npy reader: any bytes must either parse or throw npy::Error. Anything else escaping
// (another exception type, a crash, a sanitizer report) is a bug, and so is a parsed array that breaks its own
// contract or does not survive serialize -> parse with the same values.
//
// Built with clang -fsanitize=fuzzer by tools/fuzz.sh; built without libFuzzer as npy_fuzz_replay (with
// replay_main.cpp), a ctest test that feeds it every file of tests/fuzz/corpus/npy/ in every preset.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfmap/npy.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "npy_fuzz: %s\n", what);
  std::abort();
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace npy = halfmap::npy;
  npy::Array a;
  try {
    a = npy::parse(std::span<const unsigned char>(data, size), "fuzz.npy");
  } catch (const npy::Error&) {
    return 0;
  }
  if (a.ndim != 1 && a.ndim != 2) bug("ndim is neither 1 nor 2");
  if (a.rows == 0 || a.cols == 0 || (a.ndim == 1 && a.cols != 1)) bug("bad rows/cols");
  if (a.values.size() != a.rows * a.cols) bug("values.size() != rows * cols");
  // Every value parse returns is representable in its own dtype, so serialize must accept it and give it back.
  const std::vector<unsigned char> again = npy::serialize(a.values, a.rows, a.cols, a.ndim, a.descr, a.fortran_order);
  const npy::Array b = npy::parse(again, "fuzz-again.npy");
  if (b.rows != a.rows || b.cols != a.cols || b.values.size() != a.values.size()) bug("round trip changed the shape");
  for (std::size_t i = 0; i < a.values.size(); ++i)
    if (!same(a.values[i], b.values[i])) bug("round trip changed a value");
  return 0;
}
