// The interface between bench_peers.cpp (registration, checks, context) and the per-library files
// bench/peers/<lib>.cpp, each compiled only when CMake found its library (HALFMAP_PEER_<LIB>=1).
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "halfmap/registry.hpp"

namespace halfmap::bench::peers {

/// Thrown by a peer's `make` when its library cannot run the case on this machine; the message, a sentence that
/// starts with "unsupported:" or names the library, becomes the benchmark's SkipWithError text.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// halfmap's operands of one square dense layer (bench_util.hpp's operands(), M = N = K = s, row-major) in the
/// storage type the peer reads (DensePeer::source); the peer converts them to its own types once, in `make`.
struct DenseProblem {
  std::size_t s;
  const void* x;  // s×s
  const void* w;  // s×s, K×N as halfmap stores it
  const void* b;  // s
  /// Threads the library may use (DensePeer::threaded peers only; 1 everywhere but dense_fwd_threads/).
  unsigned threads = 1;
};

/// A prepared Y = X·W + b: library objects created and operands converted; run() is what the benchmark times.
class DenseRun {
 public:
  virtual ~DenseRun() = default;
  virtual void run() = 0;
  /// The last run's Y (s×s, row-major) widened to f32: the correctness check reads it.
  virtual void output_f32(float* y) const = 0;
  /// The implementation the library chose, when it says (oneDNN's impl_info_str), for the context.
  virtual std::string detail() const { return {}; }
};

struct DensePeer {
  std::string name;  // the kernel part of the benchmark name: <lib>_<dtype>__peer
  DType source;      // which of halfmap's operand sets it starts from
  double tolerance;  // bound on max|y - y_ref| / max(1, max|y_ref|) against f32_dense_fwd__ref at size 64
  std::unique_ptr<DenseRun> (*make)(const DenseProblem&);  // throws Unsupported
  /// The halfmap ISA name (avx2, avx512, avx512bf16, neon; or the library's own word, e.g. "amx") of the code the
  /// library may run for this dtype in this process, as the library reports it; empty when it does not say. The
  /// benchmark label's isa= (bench_peers.cpp), by which the report compares each halfmap path with the peers of
  /// its own ISA.
  std::string isa;
  /// Whether the library runs this peer on DenseProblem::threads threads (oneDNN, OpenBLAS: they get a
  /// dense_fwd_threads/ benchmark); false: always one thread.
  bool threaded = false;
};

/// A prepared row-wise operation on rows × cols values of the peer's storage type, from x into y.
class RowRun {
 public:
  virtual ~RowRun() = default;
  virtual void run() = 0;
};

/// A row-wise peer: softmax (forward inference over each row), or layernorm (forward inference over each row,
/// ε = 1e-5 as PyTorch's, γ and β the first and second `cols` values of x's own buffer, as halfmap's layernorm
/// benchmark reads them: bench_nn.cpp).
struct RowPeer {
  std::string name;  // <lib>_<dtype>__peer
  Op op;             // Op::softmax or Op::layernorm
  DType storage;     // of x and y: f32, or fp16 / bf16 bit patterns
  std::unique_ptr<RowRun> (*make)(std::size_t rows, std::size_t cols, const void* x, void* y);  // throws
                                                                                                // Unsupported
};

/// The name of a dense peer: <lib>_<dtype>__peer, or <lib>_<isa>_<dtype>__peer when the environment capped the
/// library's ISA for this process (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE: a second halfmap_bench run of
/// tools/main.sh), so that a capped and an uncapped run of one library never share a name.
inline std::string peer_name(std::string_view lib, bool capped, std::string_view isa, std::string_view dtype) {
  std::string name(lib);
  if (capped) name.append("_").append(isa);
  return name.append("_").append(dtype).append("__peer");
}

/// One library: what the context says about it (version, threading, what is timed) and its benchmarks.
struct Library {
  std::string name;     // openblas, onednn, xnnpack, eigen
  std::string context;  // version and threading, in words
  std::vector<DensePeer> dense;
  std::vector<RowPeer> rows;  // softmax and layernorm
};

// Each is defined in bench/peers/<lib>.cpp, only when that library was found; called once, before any benchmark
// (they pin the library to one thread).
Library openblas_library();
Library onednn_library();
Library xnnpack_library();
Library eigen_library();

}  // namespace halfmap::bench::peers
