// XNNPACK peers: its fully-connected operator for dense_fwd and its softmax operator for softmax.
//
//   xnnpack_f32__peer (dense_fwd)  xnn_create_fully_connected_nc_f32 with bias and no clamping (-inf, +inf).
//   xnnpack_f16__peer (dense_fwd)  the same in fp16 (xnn_create_fully_connected_nc_f16: fp16 X, W, b, Y); when
//                                  XNNPACK has no fp16 path for this CPU, creation returns a status and the
//                                  benchmark skips with it.
//   xnnpack_f32__peer (softmax)    xnn_create_softmax_nc_f32 over the rows of halfmap's f32 softmax benchmark.
//
// XNNPACK's fully-connected operator takes W as [output channels × input channels], the transpose of halfmap's
// K×N W: it is transposed once when the operator is created, and XNNPACK then packs it into its own layout, also
// at creation. So the timed call (xnn_run_operator) includes no weight packing, which halfmap's dense kernels do
// on every call: that is XNNPACK's API (weights are constants of an inference graph), and part of what users
// get from it. X and b are read in place (XNNPACK's fp16 is IEEE binary16, halfmap's bits).
//
// Threads: every operator is set up and run with a NULL pthreadpool, so it runs on the calling thread only.
// Subnormals: xnn_run_operator asks pthreadpool for PTHREADPOOL_FLAG_DISABLE_DENORMALS, which sets MXCSR's FTZ
// and DAZ for the duration of the call (with or without a pool) and restores them after: f32 results are
// flushed (bench_peers.cpp's probe shows it; fp16 ones are not), and MXCSR is unchanged between calls, so
// halfmap's benchmarks are unaffected. halfmap's inputs hold no f32 subnormals: the timings are not skewed either.
// Version: XNNPACK has no runtime version call; HALFMAP_PEER_XNNPACK_VERSION is the Debian package's version,
// read by CMake.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <xnnpack.h>

#include "halfmap/half.hpp"
#include "peers.hpp"

namespace halfmap::bench::peers {
namespace {

std::string_view status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "xnn_status_success";
    case xnn_status_uninitialized: return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter: return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state: return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter: return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware: return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory: return "xnn_status_out_of_memory";
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

/// W (K×N, row-major, elements of T) transposed to N×K.
template <class T>
std::vector<T> transpose(const void* w, std::size_t s) {
  const auto* src = static_cast<const T*>(w);
  std::vector<T> out(s * s);
  for (std::size_t k = 0; k < s; ++k) {
    for (std::size_t n = 0; n < s; ++n) out[n * s + k] = src[k * s + n];
  }
  return out;
}

template <class T>
class FullyConnectedRun final : public DenseRun {
 public:
  explicit FullyConnectedRun(const DenseProblem& p) : s_(p.s), y_(p.s * p.s) {
    const std::vector<T> wt = transpose<T>(p.w, s_);
    const float inf = std::numeric_limits<float>::infinity();
    xnn_operator_t op = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      check(xnn_create_fully_connected_nc_f32(s_, s_, s_, s_, wt.data(), static_cast<const float*>(p.b), -inf, inf,
                                              0, &op),
            "xnn_create_fully_connected_nc_f32");
      op_.reset(op);
      check(xnn_setup_fully_connected_nc_f32(op, s_, static_cast<const float*>(p.x), y_.data(), nullptr),
            "xnn_setup_fully_connected_nc_f32");
    } else {
      check(xnn_create_fully_connected_nc_f16(s_, s_, s_, s_, wt.data(), p.b, -inf, inf, 0, &op),
            "xnn_create_fully_connected_nc_f16");
      op_.reset(op);
      check(xnn_setup_fully_connected_nc_f16(op, s_, p.x, y_.data(), nullptr), "xnn_setup_fully_connected_nc_f16");
    }
  }
  void run() override { xnn_run_operator(op_.get(), nullptr); }
  void output_f32(float* y) const override {
    for (std::size_t i = 0; i < y_.size(); ++i) {
      if constexpr (std::is_same_v<T, float>) {
        y[i] = y_[i];
      } else {
        y[i] = to_f32(y_[i]);
      }
    }
  }

 private:
  std::size_t s_;
  Operator op_;
  std::vector<T> y_;
};

std::unique_ptr<DenseRun> make_f32(const DenseProblem& p) { return std::make_unique<FullyConnectedRun<float>>(p); }
std::unique_ptr<DenseRun> make_f16(const DenseProblem& p) { return std::make_unique<FullyConnectedRun<f16>>(p); }

class SoftmaxOpRun final : public RowRun {
 public:
  SoftmaxOpRun(std::size_t rows, std::size_t cols, const float* x, float* y) {
    xnn_operator_t op = nullptr;
    check(xnn_create_softmax_nc_f32(cols, cols, cols, 0, &op), "xnn_create_softmax_nc_f32");
    op_.reset(op);
    check(xnn_setup_softmax_nc_f32(op, rows, x, y, nullptr), "xnn_setup_softmax_nc_f32");
  }
  void run() override { xnn_run_operator(op_.get(), nullptr); }

 private:
  Operator op_;
};

std::unique_ptr<RowRun> make_softmax(std::size_t rows, std::size_t cols, const void* x, void* y) {
  return std::make_unique<SoftmaxOpRun>(rows, cols, static_cast<const float*>(x), static_cast<float*>(y));
}

}  // namespace

Library xnnpack_library() {
  const xnn_status init = xnn_initialize(nullptr);
  Library lib{"xnnpack",
              fmt::format("XNNPACK {} (Debian package version); 1 thread: NULL pthreadpool on every operator (runs "
                          "on the calling thread); fully connected: W transposed to N×K and packed by XNNPACK at "
                          "operator creation (untimed), bias, no clamping",
                          HALFMAP_PEER_XNNPACK_VERSION),
              {},
              {}};
  if (init != xnn_status_success) {
    // Every peer is still registered, and skips with the reason.
    lib.context += fmt::format("; xnn_initialize failed: {}", status_name(init));
  }
  // isa left empty: XNNPACK picks its micro-kernels at run time and does not say which.
  lib.dense = {{"xnnpack_f32__peer", DType::f32, 1e-3, make_f32, ""},
               {"xnnpack_f16__peer", DType::f16, 1e-1, make_f16, ""}};
  lib.rows = {{"xnnpack_f32__peer", Op::softmax, DType::f32, make_softmax}};
  return lib;
}

}  // namespace halfmap::bench::peers
