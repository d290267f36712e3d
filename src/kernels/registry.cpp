// The one registry: the lists of the ISA folders compiled into this build, in the order of HALFMAP_ISAS (ref
// first). CMake writes kernel_lists.inc with one HALFMAP_KERNEL_LIST(<isa>) line per folder, so adding an ISA
// folder needs no edit here.
#include <vector>

#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"

#define HALFMAP_KERNEL_LIST(isa) HALFMAP_DECLARE_KERNEL_LIST(isa)
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST

namespace halfmap {

std::span<const Kernel> kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> v;
    auto add = [&v](std::span<const Kernel> t) { v.insert(v.end(), t.begin(), t.end()); };
#define HALFMAP_KERNEL_LIST(isa) add(paths::isa::list());
#include "kernel_lists.inc"
#undef HALFMAP_KERNEL_LIST
    return v;
  }();
  return all;
}

}  // namespace halfmap
