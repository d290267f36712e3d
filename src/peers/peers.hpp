// The peers' side of the registry (internal to src/peers/): each <lib>.cpp, compiled only when CMake found its
// library, returns its kernels with the registry's function types; registry.cpp checks each one on this CPU
// against a float64 reference and hands the ones that pass to halfmap::kernels() (see
// src/kernels/registry.cpp).
//
// Every peer kernel is single-threaded and may be called from several threads at once (the sweep runs items on
// threads): library objects are created per call (oneDNN's primitive cache and XNNPACK's weight packing make
// that cheap at the sweep's sizes), and the libraries are pinned to one thread.
#pragma once

#include <string>
#include <vector>

#include "halfmap/registry.hpp"

namespace halfmap::peers {

struct PeerKernel {
  Kernel kernel;     // isa peer, lanes 1, fma none: the library's order and rounding are its own
  double tolerance;  // bound on max|y - y_f64| / max(1, max|y_f64|) in the check (registry.cpp)
};

/// One library: its name, version and threading in words (meta.json), and its kernels.
struct LibraryList {
  std::string name;
  std::string detail;
  std::vector<PeerKernel> kernels;
};

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

// Each is defined in src/peers/<lib>.cpp, only when that library was found; called once, from registry.cpp.
LibraryList onednn_list();
LibraryList xnnpack_list();
LibraryList eigen_list();
LibraryList openblas_list();

}  // namespace halfmap::peers
