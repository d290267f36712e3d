// Hardware conversions that the exhaustive tests compare half.hpp with. Each lives in a source file compiled with
// exactly the ISA flags it needs (tests/CMakeLists.txt) and containing nothing but intrinsics: no halfmap or
// GoogleTest inline function is instantiated there, so the linker cannot pick an ISA-flagged copy of a shared
// inline function for the rest of the test binary (the same reason src/kernels/common/reduce.hpp keeps its
// scalar steps out of line). Callers check cpu_features() before calling.
#pragma once

#include <cstddef>
#include <cstdint>

namespace halfmap::test::hw {

#if defined(__x86_64__)
/// F16C vcvtps2ph (round to nearest even, immediate rounding) of the f32 bit patterns first .. first+count-1;
/// count is a multiple of 8 and first + count - 1 must not wrap.
void f16c_narrow_range(std::uint32_t first, std::size_t count, std::uint16_t* out);
/// F16C vcvtph2ps of every fp16 pattern 0 .. 65535 into out[65536] (as f32 bit patterns).
void f16c_widen_all(std::uint32_t* out);
/// AVX512-BF16 vcvtneps2bf16 of the f32 bit patterns first .. first+count-1; count is a multiple of 16.
void avx512bf16_narrow_range(std::uint32_t first, std::size_t count, std::uint16_t* out);
/// AVX512-BF16 vdpbf16ps (tests/hw/avx512bf16_dpbf16.cpp) lane by lane: out[i] = acc[i] + a[2i]·b[2i] +
/// a[2i+1]·b[2i+1] as the instruction computes it (count % 16 == 0). Only where isa_supported(avx512bf16).
void avx512bf16_dpbf16ps(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                         std::uint32_t* out);
#elif defined(__aarch64__)
/// arm64 fcvtn (vcvt_f16_f32; FPCR rounding, nearest even by default) of count f32 bit patterns (count % 4 == 0).
void neon_narrow(const std::uint32_t* patterns, std::size_t count, std::uint16_t* out);
/// arm64 fcvtl (vcvt_f32_f16) of every fp16 pattern 0 .. 65535 into out[65536] (as f32 bit patterns).
void neon_widen_all(std::uint32_t* out);
/// FEAT_FHM FMLAL/FMLAL2 (vfmlalq_low_f16 / vfmlalq_high_f16; tests/hw/neonfhm_fmlal.cpp, +fp16fml) lane by lane:
/// out[i] = acc[i] + a[i]·b[i] with a, b fp16 bit patterns, acc and out f32 bit patterns; lanes 8j..8j+3 go
/// through FMLAL, 8j+4..8j+7 through FMLAL2 (count % 8 == 0). Only where cpu_features().asimdfhm.
void neonfhm_fmlal(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                   std::uint32_t* out);
/// FEAT_BF16 BFDOT (vbfdotq_f32; tests/hw/neonbf16_bfdot.cpp, +bf16) lane by lane: out[i] = BFDotAdd(acc[i],
/// a[2i], a[2i+1], b[2i], b[2i+1]), a and b bf16 bit patterns, acc and out f32 bit patterns (count % 4 == 0).
/// Only where cpu_features().bf16.
void neonbf16_bfdot(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t count,
                    std::uint32_t* out);
/// BFMMLA (vbfmmlaq_f32) on `blocks` blocks: block i is a[8i..8i+7] (2 rows of 4), b[8i..8i+7] (2 columns of 4),
/// acc[4i..4i+3] and out[4i..4i+3] (the 2 × 2 result, row-major).
void neonbf16_bfmmla(const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* acc, std::size_t blocks,
                     std::uint32_t* out);
#endif

}  // namespace halfmap::test::hw
