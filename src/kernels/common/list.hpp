// One entry of an ISA's kernel list (src/kernels/<isa>/kernels.cpp): the fields, and the name composed from them
// at compile time, <storage>[_<acc>acc]_<op>__<isa> (docs/contributing.md): f32_sum__avx2, f16_f32acc_dot__avx512,
// f16_softmax__avx512fp16 (modes f16 and f16_model are both named f16_...), bf16_f32acc_xent__avx512bf16.
// The op's kind decides which field of Kernel its function fills (registry.hpp's kernel_field).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "halfmap/conversions.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::paths {

/// The name's parts; tests check them against op_name / isa_name (cpu_test.cpp, "composed names").
constexpr std::string_view name_prefix(Mode mode) {
  switch (mode) {
    case Mode::f32:
      return "f32";
    case Mode::f16_f32acc:
      return "f16_f32acc";
    case Mode::f16:
    case Mode::f16_model:
      return "f16";
    case Mode::bf16_f32acc:
      return "bf16_f32acc";
    case Mode::fp8_f32acc:
      return "fp8_f32acc";
    case Mode::mxfp8_f32acc:
      return "mxfp8_f32acc";
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

/// What an entry says about its order of operations besides its op and mode (Kernel's fields of the same names):
/// for fp16-accumulating kernels the lanes of their order and their fp16 FMA; for f32-accumulating ones whose order
/// is fixed, which order (FixedOrder: f32 for neonfhm's FMLAL and sve, bfdot for neonbf16's BFDotAdd). The defaults,
/// one lane and no fp16 FMA, are an f32-accumulating kernel in its path's own order.
struct Order {
  unsigned lanes = 1;
  FmaKind fma = FmaKind::none;
  FixedOrder fixed = FixedOrder::none;
};

/// One kernel: the (op, mode, isa) it is, its function (of its op kind's type, KernelFn) and its order of
/// operations. The one way a list makes an entry: kernels/common/rows.hpp's regular rows and each path's own kernels.
template <Op kOp, Mode kMode, Isa kIsa>
constexpr Kernel entry(KernelFn<kOp> fn, Order order = {}) {
  Kernel k{KernelName<kOp, kMode, kIsa>::value, kOp, kMode, kIsa, storage_of(kMode), order.lanes, order.fma};
  k.fixed_order = order.fixed;
  k.*kernel_field<op_kind(kOp)>() = fn;
  return k;
}

/// The blocking of one path's dense kernels of one mode that run on gemm.hpp (its traits' kMr × kNr micro-tile, k
/// in groups of kKPack, and cache blocks kMc × kKc × kNc: see microkernel.hpp's Blocking). The dense tests cut
/// their shapes around it (dense_test.cpp).
struct DenseBlocking {
  Isa isa;
  Mode mode;
  std::size_t mr, nr, kpack, mc, kc, nc;
};

/// What one path gives the registry: its kernels; the scaled fp8 modes' kernels and its fp8 and MX conversions,
/// empty where it has none; and the blocking of its dense kernels that run on gemm.hpp.
struct PathLists {
  std::span<const Kernel> kernels = {};
  std::span<const Kernel> scaled = {};
  std::span<const Fp8Conversion> fp8 = {};
  std::span<const MxConversion> mx = {};
  std::span<const DenseBlocking> blocking = {};
};

/// The blocking of every path compiled into this build (src/kernels/registry.cpp), ref first.
std::span<const DenseBlocking> dense_blockings();

}  // namespace halfmap::paths

/// Declares the lists of one ISA folder, defined by its kernels.cpp and joined by src/kernels/registry.cpp for
/// every folder CMake compiles (HALFMAP_ISAS).
#define HALFMAP_DECLARE_KERNEL_LIST(isa) \
  namespace halfmap::paths::isa {        \
  PathLists lists();                     \
  }
