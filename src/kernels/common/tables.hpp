// Each ISA folder contributes one table of kernels; src/core/registry.cpp joins the tables compiled into this
// build. Only the registry includes this file.
#pragma once

#include <span>

#include "halfmap/registry.hpp"

namespace halfmap::tables {
std::span<const Kernel> ref();
std::span<const Kernel> avx2();
std::span<const Kernel> avx512();
std::span<const Kernel> avx512bf16();
std::span<const Kernel> avx512fp16();
std::span<const Kernel> neon();
std::span<const Kernel> neonfp16();
}  // namespace halfmap::tables
