// The peers' list: the libraries CMake found (peer_lists.inc, generated: one HALFMAP_PEER(<lib>) line per library
// built, one HALFMAP_PEER_MISSING("<lib>", "<reason>") line per library not built), each kernel checked once on
// this CPU before it joins halfmap::kernels() (src/kernels/registry.cpp finds these two functions by weak
// reference). A kernel that throws or fails its check is dropped and named, with the reason, in
// peer_libraries(), which the sweep's meta.json lists.
//
// The check (check.cpp): the kernel on small deterministic inputs in [-1, 1] stored in its type, against float64
// on the stored values: max|y - y_f64| / max(1, max|y_f64|) must be at most the kernel's tolerance (maxabs:
// exact). A library that is built but cannot run here (Unavailable) is named with its reason; the kernels a
// library refuses (LibraryList::refused) are named with theirs.
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

struct State {
  std::vector<Kernel> kernels;
  std::vector<PeerLibrary> libraries;
  std::deque<std::string> text;  // the storage of the libraries' string_views

  std::string_view keep(std::string s) { return text.emplace_back(std::move(s)); }
  void add(LibraryList (*list)(), std::string_view lib) {
    LibraryList l;
    try {
      l = list();
    } catch (const Unavailable& e) {
      libraries.push_back({lib, false, keep(e.what())});
      return;
    } catch (const std::exception& e) {
      libraries.push_back({lib, false, keep(fmt::format("its set-up failed: {}.", e.what()))});
      return;
    }
    libraries.push_back({lib, true, keep(l.detail)});
    for (const Refused& r : l.refused) libraries.push_back({keep(r.name), false, keep(r.reason)});
    for (const PeerKernel& p : l.kernels) {
      try {
        const double err = check_error(p.kernel);
        if (!(err <= p.tolerance)) {
          libraries.push_back({p.kernel.name, false,
                               keep(fmt::format("failed its check against float64: error {:.3g} above {:.3g}.", err,
                                                p.tolerance))});
          continue;
        }
      } catch (const std::exception& e) {
        libraries.push_back({p.kernel.name, false, keep(fmt::format("unsupported on this CPU: {}.", e.what()))});
        continue;
      }
      kernels.push_back(p.kernel);
    }
  }
};

const State& state() {
  static const State s = [] {
    State st;
#define HALFMAP_PEER(lib) st.add(lib##_list, #lib);
#define HALFMAP_PEER_MISSING(lib, reason) st.libraries.push_back({lib, false, reason});
#include "peer_lists.inc"
#undef HALFMAP_PEER
#undef HALFMAP_PEER_MISSING
    return st;
  }();
  return s;
}

}  // namespace

std::span<const Kernel> linked_kernels() { return state().kernels; }
std::span<const PeerLibrary> linked_libraries() { return state().libraries; }

}  // namespace halfmap::peers
