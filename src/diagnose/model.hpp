// The seed model of `halfmap diagnose` (see include/halfmap/diagnose.hpp): its paths, its f32 master weights and a
// runner that stores the data and weights in a path's storage type and runs the path's kernels.
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
struct Path {
  PathInfo info;
  const Kernel* fwd = nullptr;
  const Kernel* bwd = nullptr;
  const Kernel* loss = nullptr;
};

/// The best enabled f32 path (the baseline), and every enabled low-precision path in report order.
Path baseline_path();
std::vector<Path> low_precision_paths();

/// f32 master weights: W1 (d×h), b1 (h), W2 (h×1), b2 (1), row-major.
struct Weights {
  std::size_t d = 0, h = 0;
  std::vector<float> w1, b1, w2, b2;
};
/// Glorot-uniform W1 and W2 from the seed, zero biases.
Weights init_weights(std::size_t d, std::size_t h, std::uint64_t seed);

/// Gradients in the order dW1, db1, dW2, db2, widened exactly from the storage type.
struct Gradients {
  std::vector<double> values;
  std::size_t nonfinite = 0;
};

/// Runs one path of the model on the data stored in its type. Not thread-safe; allocates once.
class Runner {
 public:
  /// x: rows × d row-major, y: rows, both exact doubles (stored once, rounded to the path's type).
  Runner(const Path& p, const std::vector<double>& x, const std::vector<double>& y, std::size_t rows, std::size_t d,
         std::size_t h);
  void set_weights(const Weights& w);
  /// The forward over rows [row0, row0 + m): the loss as the kernel returns it and the first non-finite value.
  ForwardReport forward(std::size_t row0, std::size_t m);
  /// Forward and backward over the rows at loss scale S (not unscaled).
  Gradients gradients(std::size_t row0, std::size_t m, double S);
  std::size_t rows() const { return rows_; }
  const Path& path() const { return p_; }

 private:
  float run_forward(std::size_t row0, std::size_t m, std::optional<double> S);
  Path p_;
  std::size_t rows_, d_, h_;
  TypedBuffer x_, y_, w1_, b1_, w2_, b2_, hid_, pred_, dpred_, dhid_, dw1_, db1_, dw2_, db2_;
};

}  // namespace halfmap::diagnose
