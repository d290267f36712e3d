// Setting up the libraries of a binary's peer list, for both binaries that have one (registry.cpp,
// bench/bench_peers.cpp).
#include <exception>
#include <string>

#include <fmt/format.h>

#include "halfmap/cpu.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {

Opened open_library(const Listed& l) {
  if (l.make == nullptr) return {l.name, std::nullopt, std::string(l.missing)};
  // Not a single instruction of a library compiled for an ISA may run without it: not even its set-up.
  if (l.built_for != Isa::ref && !isa_supported(l.built_for)) {
    return {l.name, std::nullopt, fmt::format("built for {}, which this CPU lacks.", isa_name(l.built_for))};
  }
  try {
    return {l.name, l.make(), {}};
  } catch (const Unavailable& e) {
    return {l.name, std::nullopt, e.what()};
  } catch (const std::exception& e) {
    return {l.name, std::nullopt, fmt::format("its set-up failed: {}.", e.what())};
  }
}

}  // namespace halfmap::peers
