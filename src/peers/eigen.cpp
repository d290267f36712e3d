// Eigen peers, on halfmap's arrays mapped in place (Eigen::half has the bits of IEEE binary16, as f16). "sweep": a
// path of the sweep; "timed": halfmap_bench times it (dense_fwd/<name>/<size>: the maps made once, untimed; the
// product and the bias broadcast per call).
//
//   eigen_{f32,f16}_dense_fwd__peer  sweep, timed. Y.noalias() = X * W, then Y.rowwise() += b (row-major maps). The
//                                    half product uses Eigen's own half arithmetic (each operation computed in
//                                    float and rounded to half), in its GEBP blocking order: the sweep compares it
//                                    with mode f16. What a user of Matrix<Eigen::half, ...> gets (on Zen 4, some
//                                    0.35 GFLOP/s: no fast half product in 3.4).
//   eigen_{f32,f16}_sum__peer        sweep. x.sum()
//   eigen_{f32,f16}_sumsq__peer      sweep. x.squaredNorm() (Σ x², halfmap's sumsq; not the norm)
//   eigen_{f32,f16}_maxabs__peer     sweep. x.cwiseAbs().maxCoeff() (Eigen's default NaN handling: not propagated)
//
// Eigen is header-only, so its code is that of the flags this file is compiled with, and each binary compiles it
// with its own (CMakeLists.txt, bench/CMakeLists.txt):
//   * the `halfmap` CLI with the library's baseline flags: the sweep's binary runs on any CPU of the architecture,
//     so its Eigen code is the portable SSE2 (x86-64) or NEON (arm64) one;
//   * halfmap_bench with the flags of halfmap's avx512 folder on x86-64 (-mavx512f -mavx512bw -mavx512vl -mfma
//     -mf16c; HALFMAP_PEER_EIGEN_FLAGS names them): a user who cares compiles for the target CPU. Its list says
//     so (HALFMAP_PEER_FOR(eigen, avx512)), and halfmap_bench calls into this file only on CPUs that run AVX-512. It
//     is the last source of halfmap_bench, so that an inline function it shares with other files (emitted by both)
//     is taken from a baseline file by the linker. On arm64 it gets no extra flags.
// Threads: EIGEN_DONT_PARALLELIZE; nothing is shared between calls.
#define EIGEN_DONT_PARALLELIZE
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <Eigen/Core>

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
using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;

/// Y = X·W (+ b) on maps of the caller's arrays of T (float or Eigen::half).
template <class T>
class Product final : public Prepared {
 public:
  explicit Product(const DenseArgs& a)
      : a_(a),
        x_(static_cast<const T*>(a.x), Eigen::Index(a.m), Eigen::Index(a.k)),
        w_(static_cast<const T*>(a.w), Eigen::Index(a.k), Eigen::Index(a.n)),
        y_(static_cast<T*>(a.y), Eigen::Index(a.m), Eigen::Index(a.n)) {}
  void run() override {
    y_.noalias() = x_ * w_;
    if (a_.b != nullptr) y_.rowwise() += Eigen::Map<const Row<T>>(static_cast<const T*>(a_.b), Eigen::Index(a_.n));
    if (a_.act == Act::relu) y_ = y_.cwiseMax(T(0));
  }

 private:
  DenseArgs a_;
  Eigen::Map<const RowMatrix<T>> x_, w_;
  Eigen::Map<RowMatrix<T>> y_;
};

template <class T>
std::unique_ptr<Prepared> prepare_product(const DenseArgs& a, unsigned) {
  return std::make_unique<Product<T>>(a);
}

template <class T, int which>
float reduce(const void* xp, const void*, std::size_t n) {
  const Eigen::Map<const Vector<T>> x(static_cast<const T*>(xp), Eigen::Index(n));
  if constexpr (which == 0) return static_cast<float>(x.sum());
  if constexpr (which == 1) return static_cast<float>(x.squaredNorm());
  return static_cast<float>(x.cwiseAbs().maxCoeff());
}

// The flags this file is compiled with (see the top) and the halfmap ISA of their vector code, the label of every
// timed peer here.
#ifdef HALFMAP_PEER_EIGEN_FLAGS
constexpr std::string_view kFlags = "compiled with " HALFMAP_PEER_EIGEN_FLAGS;
#else
constexpr std::string_view kFlags = "baseline flags";
#endif
#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
#elif defined(__aarch64__)
constexpr const char* kIsa = "neon";
#else
constexpr const char* kIsa = "";  // x86-64's baseline, SSE2: no halfmap ISA of its own
#endif

}  // namespace

Library eigen_library() {
  using h = Eigen::half;
  const std::string detail =
      fmt::format("Eigen {}.{}.{}, {} (SIMD: {}); 1 thread: EIGEN_DONT_PARALLELIZE", EIGEN_WORLD_VERSION,
                  EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, kFlags, Eigen::SimdInstructionSetsInUse());
  return {"eigen",
          detail,
          {peer<Op::sum>("eigen_f32_sum__peer", Mode::f32, DType::f32, reduce<float, 0>, 1e-5),
           peer<Op::sum>("eigen_f16_sum__peer", Mode::f16, DType::f16, reduce<h, 0>, 5e-2),
           peer<Op::sumsq>("eigen_f32_sumsq__peer", Mode::f32, DType::f32, reduce<float, 1>, 1e-5),
           peer<Op::sumsq>("eigen_f16_sumsq__peer", Mode::f16, DType::f16, reduce<h, 1>, 5e-2),
           peer<Op::maxabs>("eigen_f32_maxabs__peer", Mode::f32, DType::f32, reduce<float, 2>, 0),
           peer<Op::maxabs>("eigen_f16_maxabs__peer", Mode::f16, DType::f16, reduce<h, 2>, 0),
           timed_peer<prepare_product<float>>("eigen_f32_dense_fwd__peer", Mode::f32, DType::f32, 1e-5, {.isa = kIsa}),
           timed_peer<prepare_product<h>>("eigen_f16_dense_fwd__peer", Mode::f16, DType::f16, 2e-2, {.isa = kIsa})},
          {},
          detail + "; timed: Y.noalias() = X * W, then Y.rowwise() += b"};
}

}  // namespace halfmap::peers
