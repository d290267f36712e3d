// The one registry of kernels. Tests, benchmarks, `halfmap info` and the sweep iterate it; nothing else
// lists kernels. A kernel is named <storage>[_<acc>acc]_<op>__<isa>, e.g. f16_f32acc_sum__avx512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "halfmap/cpu.hpp"
#include "halfmap/f16_model.hpp"

namespace halfmap {

enum class Op { sum, sumsq, maxabs, dot };
/// Precision modes of NUMERICS.md.
enum class Mode { f32, f16_f32acc, f16, f16_model, bf16_f32acc };
enum class DType { f32, f16, bf16 };

std::string_view op_name(Op op);
std::string_view mode_name(Mode mode);
std::string_view dtype_name(DType t);
std::size_t dtype_size(DType t);

/// A reduction over n elements of the kernel's storage type. `y` is read only by dot (pass nullptr otherwise).
/// The result is returned widened to f32:
///   f32          the f32 accumulator;
///   f16_f32acc   the f32 accumulator rounded once to fp16 (the result is stored like the inputs);
///   bf16_f32acc  the f32 accumulator rounded once to bf16;
///   f16, f16_model  the fp16 accumulator.
/// max|x| is exact in every mode and returns NaN if any input is NaN. Inputs need no alignment.
using ReduceFn = float (*)(const void* x, const void* y, std::size_t n);

struct Kernel {
  std::string_view name;
  Op op;
  Mode mode;
  Isa isa;
  DType storage;
  /// Order of operations of fp16-accumulating kernels: element i is accumulated into lane i % lanes, then the
  /// lanes are folded by f16_model::fold_lanes. 1 means strictly sequential.
  unsigned lanes;
  /// Which fused multiply-add the kernel computes (fp16-accumulating kernels only).
  FmaKind fma;
  ReduceFn reduce;
};

/// Every kernel compiled into this build, whether or not this CPU can run it.
std::span<const Kernel> kernels();
/// The kernel with this name, or nullptr.
const Kernel* find_kernel(std::string_view name);
/// True if the kernel may be called on this CPU under the current HALFMAP_ISA cap.
inline bool kernel_enabled(const Kernel& k) { return isa_enabled(k.isa); }

/// The f16 model run with a kernel's order of operations: the bit-exact reference for modes f16 and f16_model.
f16 f16_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes, FmaKind fma);

}  // namespace halfmap
