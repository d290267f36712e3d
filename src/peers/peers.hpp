// The peers' side of the registry (internal to src/peers/): each <lib>.cpp, compiled only when CMake found its
// library, returns its kernels with the registry's function types; registry.cpp checks each one on this CPU
// against a float64 reference and hands the ones that pass to halfmap::kernels() (see
// src/kernels/registry.cpp).
//
// Every peer kernel is single-threaded and may be called from several threads at once (the sweep runs items on
// threads): library objects are created per call (oneDNN's primitive cache and XNNPACK's weight packing make
// that cheap at the sweep's sizes), and the libraries are pinned to one thread. PyTorch's kernels run in Python
// server processes, one per concurrent caller (torch.cpp).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "halfmap/registry.hpp"

namespace halfmap::peers {

struct PeerKernel {
  Kernel kernel;     // isa peer, lanes 1, fma none: the library's order and rounding are its own
  double tolerance;  // bound on max|y - y_f64| / max(1, max|y_f64|) in the check (registry.cpp)
};

/// A kernel the library refuses on this machine (an op not implemented for the type), or a part of one (a loss's
/// gradient): its name and the reason, one sentence; meta.json and peers.md list it.
struct Refused {
  std::string name;
  std::string reason;
};

/// One library: its name, version and threading in words (meta.json), its kernels and what it refuses.
struct LibraryList {
  std::string name;
  std::string detail;
  std::vector<PeerKernel> kernels;
  std::vector<Refused> refused = {};
};

/// Thrown by a list function when its library is built but cannot run here (not enabled, interpreter missing):
/// registry.cpp records what() as the reason, verbatim.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The check of registry.cpp: the kernel on small deterministic inputs in [-1, 1] against float64 on the stored
/// values (check.cpp says what each op computes); the error is compared with PeerKernel::tolerance.
double check_error(const Kernel& k);

/// Peer kernel entries: the name is a literal, <lib>_<dtype>_<op>__peer.
inline PeerKernel dense_peer(std::string_view name, Mode mode, DType storage, DenseFn fn, double tol) {
  Kernel k{name, Op::dense_fwd, mode, Isa::peer, storage, 1, FmaKind::none};
  k.dense = fn;
  return {k, tol};
}
inline PeerKernel reduce_peer(std::string_view name, Op op, Mode mode, DType storage, ReduceFn fn, double tol) {
  Kernel k{name, op, mode, Isa::peer, storage, 1, FmaKind::none};
  k.reduce = fn;
  return {k, tol};
}

inline PeerKernel dense_bwd_peer(std::string_view name, Mode mode, DType storage, DenseBwdFn fn, double tol) {
  Kernel k{name, Op::dense_bwd, mode, Isa::peer, storage, 1, FmaKind::none};
  k.dense_bwd = fn;
  return {k, tol};
}
inline PeerKernel loss_peer(std::string_view name, Mode mode, DType storage, LossFn fn, double tol) {
  Kernel k{name, Op::mse, mode, Isa::peer, storage, 1, FmaKind::none};
  k.loss = fn;
  return {k, tol};
}
inline PeerKernel softmax_peer(std::string_view name, Mode mode, DType storage, SoftmaxFn fn, double tol) {
  Kernel k{name, Op::softmax, mode, Isa::peer, storage, 1, FmaKind::none};
  k.softmax = fn;
  return {k, tol};
}
inline PeerKernel xent_peer(std::string_view name, Mode mode, DType storage, XentFn fn, double tol) {
  Kernel k{name, Op::xent, mode, Isa::peer, storage, 1, FmaKind::none};
  k.xent = fn;
  return {k, tol};
}

inline PeerKernel norm_peer(std::string_view name, Op op, Mode mode, DType storage, NormFn fn, double tol) {
  Kernel k{name, op, mode, Isa::peer, storage, 1, FmaKind::none};
  k.norm = fn;
  return {k, tol};
}

inline PeerKernel attention_peer(std::string_view name, Op op, Mode mode, DType storage, AttentionFn fn, double tol) {
  Kernel k{name, op, mode, Isa::peer, storage, 1, FmaKind::none};
  k.attention = fn;
  return {k, tol};
}

// Each is defined in src/peers/<lib>.cpp, only when that library was found; called once, from registry.cpp.
LibraryList onednn_list();
LibraryList xnnpack_list();
LibraryList eigen_list();
LibraryList openblas_list();
LibraryList torch_list();

}  // namespace halfmap::peers
