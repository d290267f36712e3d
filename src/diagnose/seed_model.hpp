// The seed model of `halfmap diagnose` (see include/halfmap/diagnose.hpp): its paths, its f32 master weights and a
// runner that converts one batch of rows at a time into a path's storage type and runs the path's kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "halfmap/diagnose.hpp"
#include "halfmap/registry.hpp"
#include "halfmap/storage.hpp"

namespace halfmap::diagnose {

/// A path's three kernels (all of the same mode and ISA).
struct SeedPath {
  PathInfo info;
  const Kernel* fwd = nullptr;
  const Kernel* bwd = nullptr;
  const Kernel* loss = nullptr;
};

/// The best enabled f32 path (the baseline).
SeedPath baseline_path();
/// The low-precision paths in report order (see the header's "Paths"). Throws std::invalid_argument for a
/// path_first that names no enabled low-precision path.
std::vector<SeedPath> low_precision_paths(bool all_paths, const std::string& path_first);

/// f32 master weights: W1 (d×h), b1 (h), W2 (h×1), b2 (1), row-major.
struct Weights {
  std::size_t d = 0, h = 0;
  std::vector<float> w1, b1, w2, b2;
};
/// Glorot-uniform W1 and W2 from the seed, zero biases.
Weights init_weights(std::size_t d, std::size_t h, std::uint64_t seed);

/// The loss of one batch and its first non-finite value (rows are the table's).
struct BatchForward {
  double loss = 0;
  std::optional<NonFinite> first_nonfinite;
};

/// One batch's rows, row-major, in the table's own type (float or double): transposed from the columns once and
/// then converted into every runner's storage type.
struct Staged {
  std::size_t m = 0, d = 0, row0 = 0;
  const std::size_t* idx = nullptr;  // the rows when not row0 .. row0 + m - 1
  bool f32 = true;
  std::vector<float> xf, yf;
  std::vector<double> xd, yd;
  /// m rows (row0 .. row0 + m - 1, or idx[0 .. m) when idx is not null).
  void fill(const Table& x, const Table& y, std::size_t row0, std::size_t m, const std::size_t* idx = nullptr);
};

/// Runs one path of the model on one batch at a time. Not thread-safe; allocates once, for `max_rows` rows.
class SeedRunner {
 public:
  SeedRunner(const SeedPath& p, std::size_t d, std::size_t h, std::size_t max_rows);
  void set_weights(const Weights& w);
  /// Converts m rows (row0 .. row0 + m - 1, or idx[0 .. m) when idx is not null) into the storage type.
  void load(const Table& x, const Table& y, std::size_t row0, std::size_t m, const std::size_t* idx = nullptr);
  /// The same from a staged batch (kept by reference for the rows' numbers until the next load).
  void load(const Staged& s);
  /// The forward over the loaded rows (the layers are kept for gradients()).
  BatchForward forward();
  /// dW1, db1, dW2, db2 at loss scale S (not unscaled), widened exactly, from the last forward(); `nonfinite`
  /// counts the non-finite ones. The vector is the runner's own, valid until the next call.
  const std::vector<double>& gradients(double S, std::size_t& nonfinite);
  const SeedPath& path() const { return p_; }

 private:
  std::size_t row_of(std::size_t i) const { return idx_ != nullptr ? idx_[i] : row0_ + i; }
  std::optional<NonFinite> loss_culprit(double loss) const;
  SeedPath p_;
  std::size_t d_, h_, max_rows_, m_ = 0, row0_ = 0;
  const std::size_t* idx_ = nullptr;
  TypedBuffer x_, y_, w1_, b1_, w2_, b2_, hid_, pred_, dpred_, dhid_, dw1_, db1_, dw2_, db2_;
  std::vector<double> grads_;
  Staged own_;
};

}  // namespace halfmap::diagnose
