// What each ISA path's arithmetic is, beyond what CPU detection needs (src/core/cpu.cpp's table of the paths): which
// path's f32 arithmetic it extends, and whether its f16 kernels round every f32 operation to fp16. halfmap_bench
// picks roofs by them (bench/bench_roof.cpp) and `halfmap info --json` publishes them ("isa_arithmetic") for the
// report tools (tools/benchreport/), which would otherwise retype them.
#pragma once

#include "halfmap/cpu.hpp"

namespace halfmap {

/// The path whose f32 arithmetic (f32 kernels, f32 FMA roof) the kernels of `isa` that compute in f32 use: the path
/// itself, or, for a path that only adds a half-precision arithmetic to the one it extends and has no f32 kernels of
/// its own, that one (avx512bf16 and avx512fp16: avx512; neonfp16: neon). ref and peer: themselves.
Isa isa_f32_path(Isa isa);

/// Whether the f16 kernels of `isa` compute each operation in f32 and round its result to fp16 (F16C's conversions
/// around f32 FMAs, FmaKind::f32_round: avx2 and avx512), so that the F16C round trip bounds them; false where its
/// f16 arithmetic is native fp16, or it has none.
bool isa_f16_per_op(Isa isa);

}  // namespace halfmap
