// The one registry: the lists of the ISA folders compiled into this build (each folder's PathLists, list.hpp), in
// the order of HALFMAP_ISAS (ref first). CMake writes kernel_lists.inc with one HALFMAP_KERNEL_LIST(<isa>) line per
// folder, so adding an ISA folder needs no edit here.
#include <vector>

#include "halfmap/conversions.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"

#define HALFMAP_KERNEL_LIST(isa) HALFMAP_DECLARE_KERNEL_LIST(isa)
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST

namespace halfmap {

// The peers' lists (src/peers/registry.cpp), linked only into binaries that opt in (the CLI's object library
// halfmap_cli_peers). Weak: in every other binary (the library's tests, halfmap_bench) they are null, so the core
// library never depends on a peer library.
namespace peers {
[[gnu::weak]] std::span<const Kernel> linked_kernels();
[[gnu::weak]] std::span<const PeerLibrary> linked_libraries();
}  // namespace peers

bool peers_linked() { return peers::linked_kernels != nullptr; }

std::span<const PeerLibrary> peer_libraries() {
  return peers::linked_libraries != nullptr ? peers::linked_libraries() : std::span<const PeerLibrary>{};
}

namespace {

/// Every compiled folder's lists, in the order of HALFMAP_ISAS.
const std::vector<paths::PathLists>& path_lists() {
  static const std::vector<paths::PathLists> all = {
#define HALFMAP_KERNEL_LIST(isa) paths::isa::lists(),
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST
  };
  return all;
}

/// One list of every path's, joined in path order (`part` picks it).
template <class T, class Part>
std::vector<T> join(Part part) {
  std::vector<T> v;
  for (const paths::PathLists& l : path_lists()) v.insert(v.end(), (l.*part).begin(), (l.*part).end());
  return v;
}

}  // namespace

std::span<const Kernel> kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> v;
    for (const paths::PathLists& l : path_lists()) {
      v.insert(v.end(), l.kernels.begin(), l.kernels.end());
      v.insert(v.end(), l.scaled.begin(), l.scaled.end());
    }
    if (peers_linked()) {
      const std::span<const Kernel> p = peers::linked_kernels();
      v.insert(v.end(), p.begin(), p.end());
    }
    return v;
  }();
  return all;
}

std::span<const Fp8Conversion> fp8_conversions() {
  static const std::vector<Fp8Conversion> all = join<Fp8Conversion>(&paths::PathLists::fp8);
  return all;
}

std::span<const MxConversion> mx_conversions() {
  static const std::vector<MxConversion> all = join<MxConversion>(&paths::PathLists::mx);
  return all;
}

std::span<const paths::DenseBlocking> paths::dense_blockings() {
  static const std::vector<DenseBlocking> all = join<DenseBlocking>(&PathLists::blocking);
  return all;
}

}  // namespace halfmap
