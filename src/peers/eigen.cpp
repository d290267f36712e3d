// Eigen peers, on halfmap's arrays mapped in place (Eigen::half has the bits of IEEE binary16, as f16):
//
//   eigen_{f32,f16}_dense_fwd__peer  Y.noalias() = X * W, then Y.rowwise() += b (row-major maps). The half
//                                    product uses Eigen's own half arithmetic (each operation computed in float
//                                    and rounded to half), in its GEBP blocking order: compared with mode f16.
//   eigen_{f32,f16}_sum__peer        x.sum()
//   eigen_{f32,f16}_sumsq__peer      x.squaredNorm() (Σ x², halfmap's sumsq; not the norm)
//   eigen_{f32,f16}_maxabs__peer     x.cwiseAbs().maxCoeff() (Eigen's default NaN handling: not propagated)
//
// Built with the library's baseline flags (no ISA flags, unlike halfmap_bench's Eigen peer): the sweep's binary
// runs on any CPU of the architecture, so its Eigen code is the portable SSE2 (x86-64) or NEON (arm64) one.
// Threads: EIGEN_DONT_PARALLELIZE; nothing is shared between calls.
#define EIGEN_DONT_PARALLELIZE
#include <type_traits>

#include <Eigen/Core>
#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

static_assert(sizeof(Eigen::half) == sizeof(f16), "Eigen::half must be 16 bits to map halfmap's fp16 arrays");

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

template <class T>
void product(const DenseArgs& a) {
  const auto m = Eigen::Index(a.m), n = Eigen::Index(a.n), k = Eigen::Index(a.k);
  const Eigen::Map<const RowMatrix<T>> x(static_cast<const T*>(a.x), m, k), w(static_cast<const T*>(a.w), k, n);
  Eigen::Map<RowMatrix<T>> y(static_cast<T*>(a.y), m, n);
  y.noalias() = x * w;
  using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  if (a.b != nullptr) y.rowwise() += Eigen::Map<const Row>(static_cast<const T*>(a.b), n);
  if (a.act == Act::relu) y = y.cwiseMax(T(0));
}

template <class T, int which>
float reduce(const void* xp, const void*, std::size_t n) {
  const Eigen::Map<const Vector<T>> x(static_cast<const T*>(xp), Eigen::Index(n));
  if constexpr (which == 0) return static_cast<float>(x.sum());
  if constexpr (which == 1) return static_cast<float>(x.squaredNorm());
  return static_cast<float>(x.cwiseAbs().maxCoeff());
}

}  // namespace

LibraryList eigen_list() {
  using h = Eigen::half;
  return {"eigen",
          fmt::format("Eigen {}.{}.{}, baseline flags (SIMD: {}); 1 thread: EIGEN_DONT_PARALLELIZE",
                      EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse()),
          {reduce_peer("eigen_f32_sum__peer", Op::sum, Mode::f32, DType::f32, reduce<float, 0>, 1e-5),
           reduce_peer("eigen_f16_sum__peer", Op::sum, Mode::f16, DType::f16, reduce<h, 0>, 5e-2),
           reduce_peer("eigen_f32_sumsq__peer", Op::sumsq, Mode::f32, DType::f32, reduce<float, 1>, 1e-5),
           reduce_peer("eigen_f16_sumsq__peer", Op::sumsq, Mode::f16, DType::f16, reduce<h, 1>, 5e-2),
           reduce_peer("eigen_f32_maxabs__peer", Op::maxabs, Mode::f32, DType::f32, reduce<float, 2>, 0),
           reduce_peer("eigen_f16_maxabs__peer", Op::maxabs, Mode::f16, DType::f16, reduce<h, 2>, 0),
           dense_peer("eigen_f32_dense_fwd__peer", Mode::f32, DType::f32, product<float>, 1e-5),
           dense_peer("eigen_f16_dense_fwd__peer", Mode::f16, DType::f16, product<h>, 2e-2)}};
}

}  // namespace halfmap::peers
