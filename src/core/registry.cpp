// The registry's lookups. The list itself is the kernels layer's: src/kernels/registry.cpp joins the lists of the
// ISA folders compiled into this build.
#include "halfmap/registry.hpp"

namespace halfmap {

const Kernel* find_kernel(std::string_view name) {
  for (const Kernel& k : kernels()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace halfmap
