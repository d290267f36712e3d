// OpenBLAS peers (f32 only):
//   openblas_f32_dense_fwd__peer  cblas_sgemm (row-major, no transposes, beta = 0), then + b in f32.
//   openblas_f32_dot__peer        cblas_sdot, halfmap's dot.
// Not mapped: snrm2 is sqrt(Σ x²) computed with scaling against overflow, a different op from sumsq (snrm2² is
// not Σ x² rounded as halfmap's sumsq is); sasum is Σ |x|, which no halfmap op computes.
// Threads: openblas_set_num_threads(1) once, when the list is built; with one thread its pthread build runs each
// call on the caller's thread, so calls from several threads at once are safe.
#include <cblas.h>
#include <fmt/format.h>

#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

void sgemm(const DenseArgs& a) {
  auto* y = static_cast<float*>(a.y);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(a.m), int(a.n), int(a.k), 1.0f,
              static_cast<const float*>(a.x), int(a.k), static_cast<const float*>(a.w), int(a.n), 0.0f, y, int(a.n));
  const auto* b = static_cast<const float*>(a.b);
  for (std::size_t i = 0; i < a.m; ++i) {
    for (std::size_t j = 0; j < a.n; ++j) {
      float& v = y[i * a.n + j];
      if (b != nullptr) v += b[j];
      if (a.act == Act::relu) v = v < 0 ? 0.0f : v;
    }
  }
}

float sdot(const void* x, const void* y, std::size_t n) {
  return cblas_sdot(int(n), static_cast<const float*>(x), 1, static_cast<const float*>(y), 1);
}

}  // namespace

LibraryList openblas_list() {
  openblas_set_num_threads(1);
  return {"openblas",
          fmt::format("OpenBLAS {} ({}; core {}); 1 thread: openblas_set_num_threads(1)", HALFMAP_PEER_OPENBLAS_VERSION,
                      openblas_get_config(), openblas_get_corename()),
          {dense_peer("openblas_f32_dense_fwd__peer", Mode::f32, DType::f32, sgemm, 1e-5),
           reduce_peer("openblas_f32_dot__peer", Op::dot, Mode::f32, DType::f32, sdot, 1e-5)}};
}

}  // namespace halfmap::peers
