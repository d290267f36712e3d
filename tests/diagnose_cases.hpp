// The five data sets of `halfmap diagnose`'s tests (issue 6), one per verdict, built with halfmap's deterministic
// PRNG (the same values on x86-64 and arm64). The library tests use them directly; tests/diagnose_gen.cpp writes
// them as .npy files for the CLI tests.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "halfmap/detmath.hpp"

namespace halfmap::test {

struct DiagnoseCase {
  std::string name;
  std::string verdict;  // the boundary the diagnosis must name
  std::size_t rows = 64, cols = 4;
  std::vector<double> features;  // rows × cols, row-major
  std::vector<double> labels;    // rows
};

/// Rows and column of the NaN planted in case "nan".
inline constexpr std::size_t kNanRow = 17, kNanColumn = 2;

/// "clean": features U(-0.5, 0.5), labels a linear function of them: nothing is crossed (verdict ok). The
///   gradients at PyTorch's 2^16 are at most half of fp16's largest value (S_max is 2^17 on the development
///   machine), so every path's rounding keeps them finite.
/// "nan": clean with features[17, 2] = NaN (verdict data, naming row 17 of column x2).
/// "large": clean features times 3e5 (up to 1.5e5): values above 65504 overflow fp16 storage (verdict data).
/// "compute": clean features, labels around 300 while the predictions start near 0: (p - y)^2 > 65504, so the
///   loss overflows fp16 while every input fits (verdict compute, at the loss).
/// "optimization": features and labels of magnitude 1e-4 to 2e-4 (normal in fp16, nothing flushes when stored):
///   the gradients, of order 1e-8, underflow in fp16 at loss scale 1 but not at 2^15 (verdict optimization).
inline DiagnoseCase diagnose_case(std::string_view name) {
  DiagnoseCase c;
  c.name = name;
  det::Xoshiro256ss rng(7, det::name_key("diagnose-test"), 0, 0);
  c.features.resize(c.rows * c.cols);
  c.labels.resize(c.rows);
  for (double& x : c.features) x = 0.5 * rng.symmetric();
  for (std::size_t r = 0; r < c.rows; ++r) {
    const double* x = &c.features[r * c.cols];
    c.labels[r] = 0.5 * x[0] - 0.25 * x[1] + 0.125 * x[2];
  }
  if (name == "clean") {
    c.verdict = "ok";
  } else if (name == "nan") {
    c.verdict = "data";
    c.features[kNanRow * c.cols + kNanColumn] = std::numeric_limits<double>::quiet_NaN();
  } else if (name == "large") {
    c.verdict = "data";
    for (double& x : c.features) x *= 3e5;
  } else if (name == "compute") {
    c.verdict = "compute";
    for (std::size_t r = 0; r < c.rows; ++r) c.labels[r] = 300.0 + 10.0 * c.features[r * c.cols];
  } else if (name == "optimization") {
    c.verdict = "optimization";
    for (double& x : c.features) x = (x < 0 ? -1e-4 : 1e-4) * (1.0 + rng.unit());
    for (double& y : c.labels) y = 1e-4 * (1.0 + rng.unit());
  }
  return c;
}

inline constexpr std::array<std::string_view, 5> kDiagnoseCases = {"clean", "nan", "large", "compute",
                                                                   "optimization"};

}  // namespace halfmap::test
