// One entry of an ISA's kernel list (src/kernels/<isa>/kernels.cpp): the fields, and the name composed from them
// at compile time, <storage>[_<acc>acc]_<op>__<isa> (docs/contributing.md): f32_sum__avx2, f16_f32acc_dot__avx512,
// f16_softmax__avx512fp16 (modes f16 and f16_model are both named f16_...), bf16_f32acc_xent__avx512bf16.
// The function pointer's type decides which field of Kernel it fills.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>

#include "halfmap/registry.hpp"

namespace halfmap::paths {

/// The name's parts; tests check them against op_name / isa_name (cpu_test.cpp, "composed names").
constexpr std::string_view name_prefix(Mode mode) {
  switch (mode) {
    case Mode::f32: return "f32";
    case Mode::f16_f32acc: return "f16_f32acc";
    case Mode::f16: case Mode::f16_model: return "f16";
    case Mode::bf16_f32acc: return "bf16_f32acc";
    case Mode::fp8_f32acc: return "fp8_f32acc";
    case Mode::mxfp8_f32acc: return "mxfp8_f32acc";
  }
  return "?";
}
constexpr std::string_view name_isa(Isa isa) {
  constexpr std::array<std::string_view, 10> kNames = {"ref",  "avx2",     "avx512",  "avx512bf16", "avx512fp16",
                                                       "neon", "neonfp16", "neonfhm", "neonbf16",   "sve"};
  return kNames[static_cast<std::size_t>(isa)];
}
constexpr DType storage_of(Mode mode) {
  return mode == Mode::f32 || is_scaled(mode) ? DType::f32 : mode == Mode::bf16_f32acc ? DType::bf16 : DType::f16;
}

/// The composed name, stored once per (op, mode, isa) as a static array of chars.
template <Op kOp, Mode kMode, Isa kIsa>
struct KernelName {
  static constexpr std::string_view kParts[3] = {name_prefix(kMode), op_name(kOp), name_isa(kIsa)};
  static constexpr std::size_t kSize = kParts[0].size() + 1 + kParts[1].size() + 2 + kParts[2].size();
  static constexpr std::array<char, kSize> kChars = [] {
    std::array<char, kSize> c{};
    std::size_t n = 0;
    auto put = [&](std::string_view s) {
      for (char ch : s) c[n++] = ch;
    };
    put(kParts[0]);
    put("_");
    put(kParts[1]);
    put("__");
    put(kParts[2]);
    return c;
  }();
  static constexpr std::string_view value{kChars.data(), kSize};
};

/// One kernel: the (op, mode, isa) it is, its function, and for fp16-accumulating kernels their order of
/// operations (lanes) and FMA; kernels with no fp16 FMA say FmaKind::none.
template <Op kOp, Mode kMode, Isa kIsa, class Fn>
constexpr Kernel entry(Fn fn, unsigned lanes = 1, FmaKind fma = FmaKind::none) {
  Kernel k{KernelName<kOp, kMode, kIsa>::value, kOp, kMode, kIsa, storage_of(kMode), lanes, fma};
  if constexpr (std::is_same_v<Fn, ReduceFn>) {
    static_assert(is_reduction(kOp));
    k.reduce = fn;
  } else if constexpr (std::is_same_v<Fn, DenseFn>) {
    static_assert(kOp == Op::dense_fwd);
    k.dense = fn;
  } else if constexpr (std::is_same_v<Fn, DenseBwdFn>) {
    static_assert(kOp == Op::dense_bwd);
    k.dense_bwd = fn;
  } else if constexpr (std::is_same_v<Fn, LossFn>) {
    static_assert(kOp == Op::mse);
    k.loss = fn;
  } else if constexpr (std::is_same_v<Fn, SoftmaxFn>) {
    static_assert(kOp == Op::softmax || kOp == Op::softmax_naive);
    k.softmax = fn;
  } else if constexpr (std::is_same_v<Fn, GeluFn>) {
    static_assert(is_gelu(kOp));
    k.gelu = fn;
  } else if constexpr (std::is_same_v<Fn, AttentionFn>) {
    static_assert(is_attention(kOp));
    k.attention = fn;
  } else if constexpr (std::is_same_v<Fn, NormFn>) {
    static_assert(is_norm(kOp));
    k.norm = fn;
  } else {
    static_assert(std::is_same_v<Fn, XentFn> && kOp == Op::xent, "not a kernel function type");
    k.xent = fn;
  }
  return k;
}

/// An f16_f32acc kernel whose f32 order of operations is fixed (Kernel::f32_order_fixed) with `lanes` lanes.
template <Op kOp, Isa kIsa, class Fn>
constexpr Kernel entry_f32_fixed(Fn fn, unsigned lanes) {
  Kernel k = entry<kOp, Mode::f16_f32acc, kIsa>(fn, lanes, FmaKind::none);
  k.f32_order_fixed = true;
  return k;
}

}  // namespace halfmap::paths

/// Declares the list function of one ISA folder, defined by its kernels.cpp and joined by src/kernels/registry.cpp
/// for every folder CMake compiles (HALFMAP_ISAS).
#define HALFMAP_DECLARE_KERNEL_LIST(isa) \
  namespace halfmap::paths::isa {      \
  std::span<const Kernel> list();        \
  }
