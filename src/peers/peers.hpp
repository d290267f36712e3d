// The one interface of the peer libraries (oneDNN, XNNPACK, Eigen, OpenBLAS, PyTorch). Each library has one adapter,
// src/peers/<lib>.cpp (with any files beside it, cmake/peers.cmake's HALFMAP_PEER_SOURCES_<lib>: oneDNN's per
// primitive), compiled only when CMake found the library, whose <lib>_library() lists its peers. Two binaries use
// them:
//   * the `halfmap` CLI maps them as paths of the sweep (registry.cpp: each mapped peer checked on this CPU, then
//     handed to halfmap::kernels() through src/kernels/registry.cpp's weak reference);
//   * halfmap_bench times them (bench/bench_peers.cpp: each timed peer checked on this CPU, then registered as
//     <op>/<name>/<arg>).
// Both checks are check_error() (check.cpp): the peer against float64 on the stored values.
//
// A peer is named <lib>_<dtype>_<op>__peer (the sweep's cells.csv and thresholds.json carry the name), and is a
// registry Kernel (isa peer) whose function runs the library call once. Every such function is single-threaded and
// may be called from several threads at once (the sweep runs items on threads): library objects are created per
// call (oneDNN's primitive cache and XNNPACK's weight packing make that cheap at the sweep's sizes), and the
// libraries are pinned to one thread. PyTorch's kernels run in Python server processes, one per concurrent caller
// (torch.cpp).
//
// A timed peer also has its call split into a preparation (library objects created, operands converted, weights
// transposed and packed: untimed) and a run (what halfmap_bench times): Timing. Its kernel's function is the
// prepared call run once (prepared_call, set by timed_peer), so the check checks the code that is timed.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "halfmap/registry.hpp"

namespace halfmap::peers {

/// Thrown when the library cannot run a call here (a type or ISA it lacks, a failed status): the message, one
/// sentence that starts with "unsupported:" or names the library, is the reason halfmap_bench skips with and the
/// sweep drops the kernel with.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by a <lib>_library() whose library is built but cannot run here (not enabled, interpreter missing): its
/// what() is the reason meta.json and halfmap_bench's context give, verbatim.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A library call prepared once; run() is what halfmap_bench times. The arguments it was prepared with (their
/// pointers too) stay valid until it is destroyed.
class Prepared {
 public:
  virtual ~Prepared() = default;
  virtual void run() = 0;
  /// The implementation the library chose, where it says (oneDNN's impl_info_str), for halfmap_bench's context.
  virtual std::string detail() const { return {}; }
};

/// The preparations of the ops halfmap_bench times (throw Unsupported). A dense call may run on `threads` threads
/// where Timing::threaded; every other call runs on the calling thread.
using PrepareDense = std::unique_ptr<Prepared> (*)(const DenseArgs&, unsigned threads);
using PrepareSoftmax = std::unique_ptr<Prepared> (*)(const SoftmaxArgs&);
using PrepareNorm = std::unique_ptr<Prepared> (*)(const NormArgs&);

/// How halfmap_bench times a peer: the preparation of its op (the others null), and its label's facts.
struct Timing {
  PrepareDense dense = nullptr;      // op dense_fwd: dense_fwd/<name>/<size>, dense_fwd_threads/<name>/<threads>
  PrepareSoftmax softmax = nullptr;  // op softmax: softmax/<name>/<level>
  PrepareNorm norm = nullptr;        // op layernorm: layernorm/<name>/<level>
  /// The halfmap ISA name (avx2, avx512, avx512bf16, neon; or the library's own word, e.g. "amx") of the code the
  /// library runs for this peer in this process, as the library reports it; empty where it does not say. The
  /// label's isa=, by which the report compares each halfmap path with the peers of its own ISA; and, where the
  /// environment capped the library's ISA (Library::cap), part of the peer's name in halfmap_bench.
  std::string isa = {};
  /// Whether the library runs the dense call on several threads (dense_fwd_threads/); false: always one.
  bool threaded = false;
};

struct Peer {
  Kernel kernel;       // <lib>_<dtype>_<op>__peer, isa peer, lanes 1, fma none: the library's order is its own
  double tolerance;    // bound on check_error(kernel)
  bool mapped = true;  // a path of the sweep; false: timed only (a call the sweep does not map: see <lib>.cpp)
  Timing timing = {};  // timed by halfmap_bench where its op's preparation is set
  bool timed() const { return timing.dense != nullptr || timing.softmax != nullptr || timing.norm != nullptr; }
};

/// A kernel the library refuses on this machine (an op not implemented for the type), or a part of one (a loss's
/// gradient): its name and the reason, one sentence; meta.json and peers.md list it.
struct Refused {
  std::string name;
  std::string reason;
};

/// One library: its peers, what it refuses, and what each binary says about it.
struct Library {
  std::string name;    // openblas, onednn, xnnpack, eigen, torch
  std::string detail;  // version and threading of the sweep's calls, in words (meta.json)
  std::vector<Peer> peers;
  std::vector<Refused> refused = {};
  std::string timing = {};  // version, threading and what is timed, in words (halfmap_bench's context peer_<lib>)
  /// The ISA the environment capped the library to for this process (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE: the
  /// extra halfmap_bench runs of tools/main.sh), in the library's word (avx2, avx512_core_bf16); empty when
  /// none. halfmap_bench then names the library <name>_<cap> and each timed peer with its Timing::isa:
  /// capped_name().
  std::string cap = {};
};

/// The name halfmap_bench gives a timed peer of a capped library: <lib>_<isa>_<dtype>_<op>__peer (the kernel's
/// name with the ISA after the library's), so that a capped and an uncapped run never share a name.
inline std::string capped_name(std::string_view kernel, std::string_view lib, std::string_view isa) {
  return std::string(lib).append("_").append(isa).append(kernel.substr(lib.size()));
}

/// The check of both binaries: the kernel on small deterministic inputs in [-1, 1] against float64 on the stored
/// values (check.cpp says what each op computes); the error is compared with Peer::tolerance. Throws what the
/// kernel throws.
double check_error(const Kernel& k);
/// What check_error runs a kernel of op `op` on, in words, for halfmap_bench's context ("8×64 · 64×16 with bias").
std::string check_inputs(Op op);

/// A peer entry of op kOp, mapped by the sweep, not timed: the name a literal, <lib>_<dtype>_<op>__peer; fn of the
/// op kind's function type (registry.hpp's KernelFn), set in the Kernel field of that kind.
template <Op kOp>
Peer peer(std::string_view name, Mode mode, DType storage, KernelFn<kOp> fn, double tol) {
  Kernel k{name, kOp, mode, Isa::peer, storage, 1, FmaKind::none};
  k.*kernel_field<op_kind(kOp)>() = fn;
  return {k, tol};
}

/// Each op halfmap_bench times, by the type of its preparation: the op, the Timing member it sets, and the preparation
/// of a kernel's call (one thread).
template <class Prepare>
struct TimedOp;
template <>
struct TimedOp<PrepareDense> {
  static constexpr Op op = Op::dense_fwd;
  static constexpr PrepareDense Timing::*timing = &Timing::dense;
  static std::unique_ptr<Prepared> once(PrepareDense p, const DenseArgs& a) { return p(a, 1); }
};
template <>
struct TimedOp<PrepareSoftmax> {
  static constexpr Op op = Op::softmax;
  static constexpr PrepareSoftmax Timing::*timing = &Timing::softmax;
  static std::unique_ptr<Prepared> once(PrepareSoftmax p, const SoftmaxArgs& a) { return p(a); }
};
template <>
struct TimedOp<PrepareNorm> {
  static constexpr Op op = Op::layernorm;
  static constexpr PrepareNorm Timing::*timing = &Timing::norm;
  static std::unique_ptr<Prepared> once(PrepareNorm p, const NormArgs& a) { return p(a); }
};

/// The prepared call run once on one thread: the kernel function of a timed peer.
template <auto prepare, class Args>
void prepared_call(const Args& a) {
  TimedOp<decltype(prepare)>::once(prepare, a)->run();
}

/// A timed peer entry, of the op of `prepare` (a PrepareDense, PrepareSoftmax or PrepareNorm): its kernel runs the
/// prepared call once, and `timing` (its isa and threaded; the preparation is set here) says how halfmap_bench
/// times it. `mapped` false for a peer only halfmap_bench times.
template <auto prepare>
Peer timed_peer(std::string_view name, Mode mode, DType storage, double tol, Timing timing, bool mapped = true) {
  using T = TimedOp<decltype(prepare)>;
  Kernel k{name, T::op, mode, Isa::peer, storage, 1, FmaKind::none};
  k.*kernel_field<op_kind(T::op)>() = prepared_call<prepare>;
  timing.*T::timing = prepare;
  return {k, tol, mapped, std::move(timing)};
}

// Each is defined in src/peers/<lib>.cpp, only when that library was found; called once per process, through
// open_library(), by registry.cpp (the CLI) or bench/bench_peers.cpp (halfmap_bench). Each pins its library to one
// thread.
Library openblas_library();
Library onednn_library();
Library xnnpack_library();
Library eigen_library();
Library torch_library();

/// A library of a binary's peer list. CMake writes each binary's list (cmake/peers.cmake, halfmap_peer_list:
/// generated/peer_lists.inc), one line per library, which the binary reads as
///     const std::vector<Listed> listed = {
///     #include "peer_lists.inc"
///     };
struct Listed {
  std::string_view name;
  Library (*make)() = nullptr;    // <lib>_library; null where the library is not built into this binary
  std::string_view missing = {};  // why not, one sentence
  Isa built_for = Isa::ref;       // compiled with the flags of this ISA's folder: called only on CPUs that have it
};
#define HALFMAP_PEER(lib) ::halfmap::peers::Listed{#lib, ::halfmap::peers::lib##_library},
#define HALFMAP_PEER_FOR(lib, isa) \
  ::halfmap::peers::Listed{#lib, ::halfmap::peers::lib##_library, {}, ::halfmap::Isa::isa},
#define HALFMAP_PEER_MISSING(lib, reason) ::halfmap::peers::Listed{lib, nullptr, reason},

/// A listed library set up (its <lib>_library() called), or why it is not here: not built, built for an ISA this
/// CPU lacks, Unavailable's message, or a set-up that threw.
struct Opened {
  std::string_view name;
  std::optional<Library> library;
  std::string reason;  // one sentence, where library is empty
};
Opened open_library(const Listed& l);

}  // namespace halfmap::peers
