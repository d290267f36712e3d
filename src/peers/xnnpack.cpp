// XNNPACK peers: its fully-connected operator for dense_fwd and its softmax operator, created, set up and run with a
// NULL pthreadpool (so on the calling thread only). Each is a path of the sweep (the operator created, run and
// deleted per call) and timed by halfmap_bench (<op>/<name>/<arg>: created and set up once, untimed;
// xnn_run_operator per call).
//
//   xnnpack_f32_dense_fwd__peer  xnn_create_fully_connected_nc_f32 with bias (or none) and no clamping (-inf, +inf)
//                                (mode f32).
//   xnnpack_f16_dense_fwd__peer  xnn_create_fully_connected_nc_f16: fp16 X, W, b, Y; its GEMM microkernels keep the
//                                accumulator in fp16 (rounded after every k step), so the sweep compares it with
//                                halfmap's mode f16. Where XNNPACK has no fp16 path for the CPU, creation returns a
//                                status: the sweep drops the kernel and the benchmark skips, with that reason.
//   xnnpack_f32_softmax__peer    xnn_create_softmax_nc_f32 over rows × cols (channels = cols), XNNPACK's own exp;
//                                the Debian build (0.0~git20220216) has no f16 softmax operator.
//
// XNNPACK's fully-connected operator takes W as [output channels × input channels], the transpose of halfmap's K×N
// W: it is transposed when the operator is created, and XNNPACK then packs it into its own layout, also at
// creation. So the timed call includes no weight packing, which halfmap's dense kernels do on every call: that is
// XNNPACK's API (weights are constants of an inference graph), and part of what users get from it. X and b are read
// in place (XNNPACK's fp16 is IEEE binary16, halfmap's bits). Act relu, unused by the sweep, clamps at 0 instead.
//
// Subnormals: xnn_run_operator asks pthreadpool for PTHREADPOOL_FLAG_DISABLE_DENORMALS, which sets MXCSR's FTZ and
// DAZ for the duration of the call (with or without a pool) and restores them after: f32 results are flushed
// (halfmap_bench's probe shows it; fp16 ones are not), and MXCSR is unchanged between calls, so halfmap's own
// kernels and benchmarks are unaffected (halfmap itself never sets them).
// Version: XNNPACK has no runtime version call; HALFMAP_PEER_XNNPACK_VERSION is the Debian package's version, read by
// CMake.
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <xnnpack.h>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

std::string_view status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "xnn_status_success";
    case xnn_status_uninitialized:
      return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter:
      return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state:
      return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter:
      return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware:
      return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory:
      return "xnn_status_out_of_memory";
  }
  return "unknown xnn_status";
}

void check(xnn_status s, std::string_view what) {
  if (s == xnn_status_success) return;
  if (s == xnn_status_unsupported_hardware) {
    throw Unsupported(fmt::format("unsupported: XNNPACK {} returned {} on this CPU", what, status_name(s)));
  }
  throw Unsupported(fmt::format("XNNPACK {} failed: {}", what, status_name(s)));
}

struct OperatorDeleter {
  void operator()(xnn_operator_t op) const { xnn_delete_operator(op); }
};
using Operator = std::unique_ptr<xnn_operator, OperatorDeleter>;

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

/// Y = X·W (+ b) on the fully-connected operator of T (float or f16), on the caller's arrays.
template <class T>
class FullyConnected final : public Prepared {
 public:
  explicit FullyConnected(const DenseArgs& a) {
    const std::vector<T> wt = transpose<T>(a.w, a.k, a.n);
    const float lo = a.act == Act::relu ? 0.0f : -std::numeric_limits<float>::infinity();
    const float hi = std::numeric_limits<float>::infinity();
    xnn_operator_t op = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      check(xnn_create_fully_connected_nc_f32(a.k, a.n, a.k, a.n, wt.data(), static_cast<const float*>(a.b), lo, hi, 0,
                                              &op),
            "xnn_create_fully_connected_nc_f32");
      op_.reset(op);
      check(
          xnn_setup_fully_connected_nc_f32(op, a.m, static_cast<const float*>(a.x), static_cast<float*>(a.y), nullptr),
          "xnn_setup_fully_connected_nc_f32");
    } else {
      check(xnn_create_fully_connected_nc_f16(a.k, a.n, a.k, a.n, wt.data(), a.b, lo, hi, 0, &op),
            "xnn_create_fully_connected_nc_f16");
      op_.reset(op);
      check(xnn_setup_fully_connected_nc_f16(op, a.m, a.x, a.y, nullptr), "xnn_setup_fully_connected_nc_f16");
    }
  }
  void run() override { check(xnn_run_operator(op_.get(), nullptr), "xnn_run_operator"); }

 private:
  Operator op_;
};

template <class T>
std::unique_ptr<Prepared> prepare_fully_connected(const DenseArgs& a, unsigned) {
  return std::make_unique<FullyConnected<T>>(a);
}

/// The softmax operator over the rows of the caller's f32 arrays.
class Softmax final : public Prepared {
 public:
  explicit Softmax(const SoftmaxArgs& a) {
    xnn_operator_t op = nullptr;
    check(xnn_create_softmax_nc_f32(a.cols, a.cols, a.cols, 0, &op), "xnn_create_softmax_nc_f32");
    op_.reset(op);
    check(xnn_setup_softmax_nc_f32(op, a.rows, static_cast<const float*>(a.x), static_cast<float*>(a.y), nullptr),
          "xnn_setup_softmax_nc_f32");
  }
  void run() override { check(xnn_run_operator(op_.get(), nullptr), "xnn_run_operator"); }

 private:
  Operator op_;
};

std::unique_ptr<Prepared> prepare_softmax(const SoftmaxArgs& a) { return std::make_unique<Softmax>(a); }

}  // namespace

Library xnnpack_library() {
  if (const xnn_status init = xnn_initialize(nullptr); init != xnn_status_success) {
    throw Unavailable(fmt::format("xnn_initialize failed: {}.", status_name(init)));
  }
  // isa left empty: XNNPACK picks its micro-kernels at run time and does not say which.
  return {"xnnpack",
          fmt::format("XNNPACK {} (Debian package version); fully-connected and softmax operators per call, NULL "
                      "pthreadpool (1 thread), W transposed to N×K",
                      HALFMAP_PEER_XNNPACK_VERSION),
          {timed_peer<prepare_fully_connected<float>>("xnnpack_f32_dense_fwd__peer", Mode::f32, DType::f32, 1e-5, {}),
           timed_peer<prepare_fully_connected<f16>>("xnnpack_f16_dense_fwd__peer", Mode::f16, DType::f16, 2e-2, {}),
           timed_peer<prepare_softmax>("xnnpack_f32_softmax__peer", Mode::f32, DType::f32, 1e-5, {})},
          {},
          fmt::format("XNNPACK {} (Debian package version); 1 thread: NULL pthreadpool on every operator (runs on the "
                      "calling thread); fully connected: W transposed to N×K and packed by XNNPACK at operator "
                      "creation (untimed), bias, no clamping",
                      HALFMAP_PEER_XNNPACK_VERSION)};
}

}  // namespace halfmap::peers
