// The one registry: the lists of the ISA folders compiled into this build, in the order of HALFMAP_ISAS (ref
// first). CMake writes kernel_lists.inc with one HALFMAP_KERNEL_LIST(<isa>) line per folder, so adding an ISA
// folder needs no edit here.
#include <initializer_list>
#include <vector>

#include "halfmap/conversions.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"

#define HALFMAP_KERNEL_LIST(isa) HALFMAP_DECLARE_KERNEL_LIST(isa)
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST

// The fp8 and MX lists and the scaled fp8 modes' kernels: weak, so a folder that defines none (avx512bf16, the
// arm64 folders past neon) leaves its null.
#define HALFMAP_KERNEL_LIST(isa)                         \
  namespace halfmap::paths::isa {                        \
  [[gnu::weak]] std::span<const Fp8Conversion> fp8_list(); \
  [[gnu::weak]] std::span<const MxConversion> mx_list();   \
  [[gnu::weak]] std::span<const Kernel> scaled_list();     \
  }
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

std::span<const Kernel> kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> v;
    auto add = [&v](std::span<const Kernel> t) { v.insert(v.end(), t.begin(), t.end()); };
#define HALFMAP_KERNEL_LIST(isa)                                         \
  add(paths::isa::list());                                               \
  if (paths::isa::scaled_list != nullptr) add(paths::isa::scaled_list());
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST
    if (peers_linked()) add(peers::linked_kernels());
    return v;
  }();
  return all;
}

namespace {

/// The lists of the folders that define one (a weak function left null where a folder defines none), joined.
template <class T>
std::vector<T> join(std::initializer_list<std::span<const T> (*)()> lists) {
  std::vector<T> v;
  for (auto list : lists)
    if (list != nullptr) v.insert(v.end(), list().begin(), list().end());
  return v;
}

}  // namespace

std::span<const Fp8Conversion> fp8_conversions() {
#define HALFMAP_KERNEL_LIST(isa) paths::isa::fp8_list,
  static const std::vector<Fp8Conversion> all = join<Fp8Conversion>({
#include "kernel_lists.inc"
  });
#undef HALFMAP_KERNEL_LIST
  return all;
}

std::span<const MxConversion> mx_conversions() {
#define HALFMAP_KERNEL_LIST(isa) paths::isa::mx_list,
  static const std::vector<MxConversion> all = join<MxConversion>({
#include "kernel_lists.inc"
  });
#undef HALFMAP_KERNEL_LIST
  return all;
}

}  // namespace halfmap
