// Each ISA folder contributes one table of kernels; src/core/registry.cpp joins the tables compiled into this
// build. Only the registry includes this file.
#pragma once

#include <span>

#include "halfmap/registry.hpp"

namespace halfmap::tables {
// One function per source file: kernels/<isa>/<file>.cpp defines tables::<file>().
std::span<const Kernel> reduce_ref();
std::span<const Kernel> dense_ref();
std::span<const Kernel> nn_ref();
std::span<const Kernel> reduce_avx2();
std::span<const Kernel> dense_avx2();
std::span<const Kernel> nn_avx2();
std::span<const Kernel> reduce_avx512();
std::span<const Kernel> dense_avx512();
std::span<const Kernel> nn_avx512();
std::span<const Kernel> reduce_avx512bf16();
std::span<const Kernel> dense_avx512bf16();
std::span<const Kernel> nn_avx512bf16();
std::span<const Kernel> reduce_avx512fp16();
std::span<const Kernel> dense_avx512fp16();
std::span<const Kernel> nn_avx512fp16();
std::span<const Kernel> reduce_neon();
std::span<const Kernel> dense_neon();
std::span<const Kernel> nn_neon();
std::span<const Kernel> reduce_neonfp16();
std::span<const Kernel> dense_neonfp16();
std::span<const Kernel> nn_neonfp16();
}  // namespace halfmap::tables
