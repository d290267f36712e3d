// What it takes to recompute a kernel's numbers, derived from its registry entry (op, mode, isa, storage, lanes,
// fma) and the contracts of registry.hpp: the storage and accumulator types, the order of the accumulation (the
// lanes and how they are folded), the kind of fp16 FMA, and a recipe naming every place an intermediate is
// rounded. thresholds.md ends with these tables for the kernels it lists; `halfmap info --kernel-spec` prints them
// for every kernel of the build, and docs/kernel-spec.md holds the same tables between markers (a test compares them).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "halfmap/registry.hpp"

namespace halfmap {

struct KernelSpec {
  std::string_view accumulator;  // "f32" or "f16"
  std::string order;             // the order of accumulation, e.g. "i mod 128 from +0; fold 64, 32, ..., 1"
  std::string_view fma;          // "fused", "f32_round", or "-" where no fp16 FMA decides a rounding
  std::string_view recipe;       // the recipe's key, e.g. "mse/f16" (kernel_recipe_text)
};

KernelSpec kernel_spec(const Kernel& k);

/// The kernel's fp16 FMA where its rounding matters: nullopt for kernels without one (the f32-accumulating ones,
/// FmaKind::none) and for the fp16 ops that only add, compare and divide (sum, maxabs, softmax, xent: their rows'
/// rounds_fma in ops.hpp).
std::optional<std::string_view> kernel_fma_name(const Kernel& k);

/// Whether the kernel's lane count decides its numbers (the fp16 family, the fixed f32 orders of FMLAL, BFDotAdd
/// and sve, any kernel with more than one lane): the lanes column of the spec tables and thresholds.json's spec.
bool kernel_lanes_matter(const Kernel& k);

/// The recipe of a key returned in KernelSpec::recipe: every rounding step, in order.
std::string_view kernel_recipe_text(std::string_view key);

/// Markdown: one row per kernel (name, storage, accumulator, lanes, order, fma, recipe), with its header.
std::string kernel_spec_table(std::span<const Kernel* const> ks);
/// Markdown: the recipes the kernels use (every recipe for an empty span), one row each, with the legend.
std::string kernel_recipe_table(std::span<const Kernel* const> ks);

}  // namespace halfmap
