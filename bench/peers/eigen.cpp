// Eigen peers of dense_fwd: Y.noalias() = X * W; Y.rowwise() += b, on row-major dynamic matrices.
//
//   eigen_f16__peer  Eigen::half matrices and Eigen's own half arithmetic: what a user of
//                    Matrix<Eigen::half, ...> gets (on Zen 4, some 0.35 GFLOP/s: no fast half product in 3.4).
//   eigen_f32__peer  float matrices.
//
// Timed per call: the product and the bias broadcast. halfmap's operands are copied into Eigen matrices once
// (fp16 bits unchanged), untimed.
//
// Eigen is header-only, so its speed depends on the flags of the file that includes it. A user who cares compiles
// for the target CPU, so on x86-64 this file gets the flags of halfmap's avx512 folder (-mavx512f -mavx512bw
// -mavx512vl -mfma -mf16c, set in bench/CMakeLists.txt), not the harness's baseline; bench_peers.cpp calls into it
// only when the CPU runs AVX-512. It is the last source of halfmap_bench so that an inline function it shares with
// other files (emitted by both) is taken from a baseline file by the linker. On arm64 it gets no extra flags.
//
// Threads: EIGEN_DONT_PARALLELIZE (and the harness is not built with OpenMP anyway).
#define EIGEN_DONT_PARALLELIZE
#include <cstring>
#include <memory>
#include <string>

#include <Eigen/Core>
#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "peers.hpp"

namespace halfmap::bench::peers {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;

/// Element i of halfmap's storage as T: f32 as is, fp16 by its bits.
template <class T>
T element(const void* p, std::size_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<const float*>(p)[i];
  } else {
    return Eigen::numext::bit_cast<Eigen::half>(static_cast<const f16*>(p)[i].bits);
  }
}

template <class T>
class ProductRun final : public DenseRun {
 public:
  explicit ProductRun(const DenseProblem& p) : x_(p.s, p.s), w_(p.s, p.s), b_(p.s), y_(p.s, p.s) {
    const auto s = static_cast<Eigen::Index>(p.s);
    for (Eigen::Index i = 0; i < s; ++i) {
      for (Eigen::Index j = 0; j < s; ++j) {
        x_(i, j) = element<T>(p.x, static_cast<std::size_t>(i * s + j));
        w_(i, j) = element<T>(p.w, static_cast<std::size_t>(i * s + j));
      }
      b_(i) = element<T>(p.b, static_cast<std::size_t>(i));
    }
    y_.setZero();
  }
  void run() override {
    y_.noalias() = x_ * w_;
    y_.rowwise() += b_;
  }
  void output_f32(float* y) const override {
    for (Eigen::Index i = 0; i < y_.size(); ++i) y[i] = static_cast<float>(y_.data()[i]);
  }

 private:
  RowMatrix<T> x_, w_;
  RowVector<T> b_;
  RowMatrix<T> y_;
};

std::unique_ptr<DenseRun> make_f32(const DenseProblem& p) { return std::make_unique<ProductRun<float>>(p); }
std::unique_ptr<DenseRun> make_f16(const DenseProblem& p) { return std::make_unique<ProductRun<Eigen::half>>(p); }

// The flags this file is compiled with (see the top): the vector ISA of every peer here.
#if defined(__x86_64__)
constexpr const char* kIsa = "avx512";
#else
constexpr const char* kIsa = "neon";
#endif

}  // namespace

Library eigen_library() {
  return {
      "eigen",
      fmt::format("Eigen {}.{}.{}, compiled with {} (SIMD: {}); 1 thread: EIGEN_DONT_PARALLELIZE; timed: "
                  "Y.noalias() = X * W, then Y.rowwise() += b",
                  EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, HALFMAP_PEER_EIGEN_FLAGS,
                  Eigen::SimdInstructionSetsInUse()),
      {{"eigen_f16__peer", DType::f16, 1e-1, make_f16, kIsa}, {"eigen_f32__peer", DType::f32, 1e-3, make_f32, kIsa}},
      {},
  };
}

}  // namespace halfmap::bench::peers
