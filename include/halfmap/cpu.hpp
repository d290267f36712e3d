// CPU detection (once, cached), the ISA paths halfmap knows, and the HALFMAP_ISA cap.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace halfmap {

/// The instruction-set paths. Each kernel belongs to exactly one. x86 paths form the chain
/// ref < avx2 < avx512 < {avx512bf16, avx512fp16}; arm64 paths the chain ref < neon < neonfp16.
enum class Isa { ref, avx2, avx512, avx512bf16, avx512fp16, neon, neonfp16 };

inline constexpr std::array<Isa, 7> kAllIsas = {Isa::ref,        Isa::avx2, Isa::avx512,  Isa::avx512bf16,
                                                Isa::avx512fp16, Isa::neon, Isa::neonfp16};

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);
/// What an ISA path needs, in words ("AVX2 + FMA + F16C"), for `halfmap info` and skip messages.
std::string_view isa_requirements(Isa isa);

/// Raw CPU features, read once from CPUID + XGETBV (x86) or getauxval HWCAP (arm64).
struct CpuFeatures {
  std::string model;  // brand string (x86) or "arm64 (MIDR ...)"
  // x86; the AVX/AVX-512 bits are true only if the OS also saves the YMM / ZMM state (XGETBV).
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false, avx512_fp16 = false;
  // arm64
  bool asimd = false, fphp = false, asimdhp = false, asimdfhm = false;
};

/// Detected on first call, then cached.
const CpuFeatures& cpu_features();

/// True if this build contains the ISA's kernels (they are compiled only for the matching architecture).
bool isa_compiled(Isa isa);
/// True if this CPU (and OS) can execute the ISA, ignoring the HALFMAP_ISA cap.
bool isa_supported(Isa isa);
/// True if kernels of this ISA may be called: compiled, supported, and not above the HALFMAP_ISA cap.
bool isa_enabled(Isa isa);

/// The cap read from HALFMAP_ISA, or nullopt when unset. An invalid value is reported by isa_cap_error().
std::optional<Isa> isa_cap();
/// One sentence describing why HALFMAP_ISA is invalid, or empty when it is unset or valid. Programs check it
/// at start and exit 2 with it.
std::string isa_cap_error();

}  // namespace halfmap
