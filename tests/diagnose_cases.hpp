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

/// The cases, at the default batch of 32 rows:
/// "clean": 2048 rows × 16 standard-normal features, labels a linear function of them times 0.1 (issue 12's
///   false alarm): dynamic loss scaling backs off from its initial scale and then trains (verdict ok, with a note).
/// "small": 64 rows × 4 features U(-0.5, 0.5), labels a linear function of them: nothing is crossed (ok).
/// "nan": small with features[17, 2] = NaN (verdict data, naming row 17 of column x2).
/// "large": small features times 3e5 (up to 1.5e5): values above 65504 overflow fp16 storage (verdict data).
/// "compute": small features, labels around 300 while the predictions start near 0: (p - y)^2 > 65504, so the
///   batch loss overflows fp16 while every input fits (verdict compute, at the loss).
/// "underflow": features and labels of magnitude 1e-4 to 2e-4 (normal in fp16, nothing flushes when stored):
///   the gradients, of order 1e-8, underflow in fp16 at loss scale 1 but not at 2^15 or 2^16, where the scalers
///   train (verdict ok, with the no-loss-scaling warning).
/// "optimization": 256 rows in 8 batches of two scales: the even batches have features U(-10, 10) and a linear
///   label (gradients overflow fp16 from about 2^10), the odd ones features and labels of magnitude 1e-6 to 2e-6
///   (fp16 subnormals, none flushed when stored; gradients of order 1e-12, which need a scale above 2^16). The
///   scalers back off for the large batches and then the small batches' gradients underflow (verdict
///   optimization: no scale works for both).
inline DiagnoseCase diagnose_case(std::string_view name) {
  DiagnoseCase c;
  c.name = name;
  det::Xoshiro256ss rng(7, det::name_key("diagnose-test"), 0, 0);
  if (name == "clean") {
    c.rows = 2048;
    c.cols = 16;
    det::Normal normal;
    std::vector<double> w(c.cols);
    for (double& x : w) x = normal(rng);
    c.features.resize(c.rows * c.cols);
    for (double& x : c.features) x = normal(rng);
    c.labels.resize(c.rows);
    for (std::size_t r = 0; r < c.rows; ++r) {
      double y = 0;
      for (std::size_t j = 0; j < c.cols; ++j) y += w[j] * c.features[r * c.cols + j];
      c.labels[r] = 0.1 * y;
    }
    c.verdict = "ok";
    return c;
  }
  if (name == "optimization") c.rows = 256;
  c.features.resize(c.rows * c.cols);
  c.labels.resize(c.rows);
  for (double& x : c.features) x = 0.5 * rng.symmetric();
  for (std::size_t r = 0; r < c.rows; ++r) {
    const double* x = &c.features[r * c.cols];
    c.labels[r] = 0.5 * x[0] - 0.25 * x[1] + 0.125 * x[2];
  }
  if (name == "small") {
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
  } else if (name == "underflow") {
    c.verdict = "ok";
    for (double& x : c.features) x = (x < 0 ? -1e-4 : 1e-4) * (1.0 + rng.unit());
    for (double& y : c.labels) y = 1e-4 * (1.0 + rng.unit());
  } else if (name == "optimization") {
    c.verdict = "optimization";
    for (std::size_t r = 0; r < c.rows; ++r) {
      double* x = &c.features[r * c.cols];
      if ((r / 32) % 2 == 0) {
        for (std::size_t j = 0; j < c.cols; ++j) x[j] *= 20.0;
        c.labels[r] = 0.5 * x[0] - 0.25 * x[1] + 0.125 * x[2];
      } else {
        for (std::size_t j = 0; j < c.cols; ++j) x[j] = (x[j] < 0 ? -1e-6 : 1e-6) * (1.0 + rng.unit());
        c.labels[r] = 1e-6 * (1.0 + rng.unit());
      }
    }
  }
  return c;
}

inline constexpr std::array<std::string_view, 7> kDiagnoseCases = {"clean",   "small",     "nan",         "large",
                                                                   "compute", "underflow", "optimization"};

}  // namespace halfmap::test
