// XNNPACK peers of dense_fwd: its fully-connected operator, created, set up, run and deleted per call, with a
// NULL pthreadpool (so it runs on the calling thread only), bias (or none) and no clamping (-inf, +inf).
//
//   xnnpack_f32_dense_fwd__peer  xnn_create_fully_connected_nc_f32 (mode f32).
//   xnnpack_f16_dense_fwd__peer  xnn_create_fully_connected_nc_f16: fp16 X, W, b, Y; its GEMM microkernels keep
//                                the accumulator in fp16 (rounded after every k step), so it is compared with
//                                halfmap's mode f16. Where XNNPACK has no fp16 path for the CPU, creation fails
//                                and registry.cpp drops the kernel with that reason.
//
//   xnnpack_f32_softmax__peer    xnn_create_softmax_nc_f32 over rows × cols (channels = cols), XNNPACK's own exp;
//                                the Debian build (0.0~git20220216) has no f16 softmax operator.
//
// XNNPACK takes W as [output channels × input channels], the transpose of halfmap's K×N W: it is transposed per
// call. Subnormals: xnn_run_operator sets MXCSR's FTZ and DAZ for the call and restores them after, so f32
// results are flushed (halfmap itself never sets them). Act relu, unused by the sweep, clamps at 0 instead.
#include <limits>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <xnnpack.h>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

void check(xnn_status s, const char* what) {
  if (s != xnn_status_success) throw std::runtime_error(fmt::format("XNNPACK {} returned status {}", what, int(s)));
}

/// W (K×N, row-major) transposed to N×K.
template <class T>
std::vector<T> transpose(const void* w, std::size_t k, std::size_t n) {
  const auto* src = static_cast<const T*>(w);
  std::vector<T> out(k * n);
  for (std::size_t p = 0; p < k; ++p) {
    for (std::size_t j = 0; j < n; ++j) out[j * k + p] = src[p * n + j];
  }
  return out;
}

template <class T>
xnn_operator_t create(const DenseArgs& a) {
  const std::vector<T> wt = transpose<T>(a.w, a.k, a.n);
  const float lo = a.act == Act::relu ? 0.0f : -std::numeric_limits<float>::infinity();
  const float hi = std::numeric_limits<float>::infinity();
  xnn_operator_t op = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    check(xnn_create_fully_connected_nc_f32(a.k, a.n, a.k, a.n, wt.data(), static_cast<const float*>(a.b), lo, hi,
                                            0, &op),
          "xnn_create_fully_connected_nc_f32");
  } else {
    check(xnn_create_fully_connected_nc_f16(a.k, a.n, a.k, a.n, wt.data(), a.b, lo, hi, 0, &op),
          "xnn_create_fully_connected_nc_f16");
  }
  return op;
}

template <class T>
void fully_connected(const DenseArgs& a) {
  xnn_operator_t op = create<T>(a);
  xnn_status s;
  if constexpr (std::is_same_v<T, float>) {
    s = xnn_setup_fully_connected_nc_f32(op, a.m, static_cast<const float*>(a.x), static_cast<float*>(a.y), nullptr);
  } else {
    s = xnn_setup_fully_connected_nc_f16(op, a.m, a.x, a.y, nullptr);
  }
  if (s == xnn_status_success) s = xnn_run_operator(op, nullptr);
  xnn_delete_operator(op);
  check(s, "fully connected setup/run");
}

void softmax(const SoftmaxArgs& a) {
  xnn_operator_t op = nullptr;
  check(xnn_create_softmax_nc_f32(a.cols, a.cols, a.cols, 0, &op), "xnn_create_softmax_nc_f32");
  xnn_status s = xnn_setup_softmax_nc_f32(op, a.rows, static_cast<const float*>(a.x), static_cast<float*>(a.y),
                                          nullptr);
  if (s == xnn_status_success) s = xnn_run_operator(op, nullptr);
  xnn_delete_operator(op);
  check(s, "softmax setup/run");
}

}  // namespace

LibraryList xnnpack_list() {
  check(xnn_initialize(nullptr), "xnn_initialize");
  return {"xnnpack",
          fmt::format("XNNPACK {} (Debian package version); fully-connected and softmax operators per call, NULL "
                      "pthreadpool "
                      "(1 thread), W transposed to N×K",
                      HALFMAP_PEER_XNNPACK_VERSION),
          {dense_peer("xnnpack_f32_dense_fwd__peer", Mode::f32, DType::f32, fully_connected<float>, 1e-5),
           dense_peer("xnnpack_f16_dense_fwd__peer", Mode::f16, DType::f16, fully_connected<f16>, 2e-2),
           softmax_peer("xnnpack_f32_softmax__peer", Mode::f32, DType::f32, softmax, 1e-5)}};
}

}  // namespace halfmap::peers
