// CPU detection (once, cached), the ISA paths halfmap knows, and the HALFMAP_ISA cap.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace halfmap {

/// The architecture this build runs on, as every report names it.
#if defined(__x86_64__)
inline constexpr std::string_view kHostArch = "x86-64";
inline constexpr bool kHostIsX86 = true;
#elif defined(__aarch64__)
inline constexpr std::string_view kHostArch = "arm64";
inline constexpr bool kHostIsX86 = false;
#else
#error "halfmap supports x86-64 and arm64"
#endif

/// The instruction-set paths. Each kernel belongs to exactly one. x86 paths form the chain
/// ref < avx2 < avx512 < {avx512bf16, avx512fp16}; arm64 paths the chain ref < neon < neonfp16 < {neonfhm,
/// neonbf16, sve} (FEAT_FHM's FMLAL, which the architecture only has together with FEAT_FP16; FEAT_BF16's BFDOT
/// and BFMMLA; SVE, whose fp16 arithmetic halfmap uses with FEAT_FP16's; siblings: a cap at one excludes the
/// others).
/// `peer` is not one of halfmap's paths: it marks the kernels of peer libraries (oneDNN, XNNPACK, Eigen,
/// OpenBLAS; src/peers/), which pick their own instructions. It is compiled only into binaries that link the
/// peers, is held back by any HALFMAP_ISA cap, cannot be a cap itself, and is not in kAllIsas.
enum class Isa { ref, avx2, avx512, avx512bf16, avx512fp16, neon, neonfp16, neonfhm, neonbf16, sve, peer };

inline constexpr std::array<Isa, 10> kAllIsas = {Isa::ref,        Isa::avx2, Isa::avx512,   Isa::avx512bf16,
                                                 Isa::avx512fp16, Isa::neon, Isa::neonfp16, Isa::neonfhm,
                                                 Isa::neonbf16,   Isa::sve};

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);
/// What an ISA path needs, in words ("AVX2 + FMA + F16C"), for `halfmap info` and skip messages.
std::string_view isa_requirements(Isa isa);
/// The architecture whose CPUs run the path, as kHostArch names it ("x86-64", "arm64"); "any" for ref and peer.
std::string_view isa_arch(Isa isa);

/// Raw CPU features, read once from CPUID + XGETBV (x86) or getauxval HWCAP (arm64).
struct CpuFeatures {
  std::string model;  // brand string (x86) or "arm64 (MIDR ...)"
  // x86; the AVX/AVX-512 bits are true only if the OS also saves the YMM / ZMM state (XGETBV).
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false, avx512_fp16 = false;
  // arm64
  bool asimd = false, fphp = false, asimdhp = false, asimdfhm = false;
  bool bf16 = false;  // HWCAP2_BF16 (FEAT_BF16: BFDOT, BFMMLA, BFCVT)
  bool sve = false;
  unsigned sve_vector_bits = 0;  // SVE's vector length for this thread (prctl PR_SVE_GET_VL), 0 without SVE
};

/// The data caches one core sees, in bytes, read once (then cached) from Linux's sysfs
/// (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size,shared_cpu_list}); on x86-64, where sysfs has no
/// answer, from CPUID leaf 4 (deterministic cache parameters). A level neither gives is 0. `l3_share` is the last
/// level cache's size divided by the logical CPUs that share it. The dense kernels' cache blocks are chosen from
/// these (src/kernels/common/dense.cpp, gemm_blocks_for).
struct CacheSizes {
  std::size_t l1d = 0, l2 = 0, l3 = 0, l3_share = 0;
  std::string source;  // "sysfs", "cpuid" or "none"
};
const CacheSizes& cache_sizes();

/// Detected on first call, then cached.
const CpuFeatures& cpu_features();

/// The flags of CpuFeatures, named as in the struct, in the one order every report lists them (`halfmap info`,
/// the sweep's meta.json, the benchmarks' context). `x86`: which architecture sets the flag.
struct CpuFlag {
  std::string_view name;
  bool CpuFeatures::*member;
  bool x86;
};
inline constexpr CpuFlag kCpuFlags[] = {
    {"avx2", &CpuFeatures::avx2, true},
    {"fma", &CpuFeatures::fma, true},
    {"f16c", &CpuFeatures::f16c, true},
    {"avx512f", &CpuFeatures::avx512f, true},
    {"avx512bw", &CpuFeatures::avx512bw, true},
    {"avx512vl", &CpuFeatures::avx512vl, true},
    {"avx512_bf16", &CpuFeatures::avx512_bf16, true},
    {"avx512_fp16", &CpuFeatures::avx512_fp16, true},
    {"asimd", &CpuFeatures::asimd, false},
    {"fphp", &CpuFeatures::fphp, false},
    {"asimdhp", &CpuFeatures::asimdhp, false},
    {"asimdfhm", &CpuFeatures::asimdfhm, false},
    {"bf16", &CpuFeatures::bf16, false},
    {"sve", &CpuFeatures::sve, false},
};

/// True if this build contains the ISA's kernels (they are compiled only for the matching architecture).
bool isa_compiled(Isa isa);
/// True if this CPU (and OS) can execute the ISA, ignoring the HALFMAP_ISA cap.
bool isa_supported(Isa isa);
/// True if kernels of this ISA may be called: compiled, supported, and not above the HALFMAP_ISA cap.
bool isa_enabled(Isa isa);

/// Whether an ISA's kernels may be called here and, if not, the first reason why (in the order checked).
enum class IsaState {
  enabled,
  not_compiled,  // this build has no kernels of it (another architecture's path)
  unsupported,   // the CPU (or the OS, for the wide registers) lacks it: see isa_requirements()
  capped,        // above the HALFMAP_ISA cap (or held back by an invalid one)
};
IsaState isa_state(Isa isa);

/// The cap read from HALFMAP_ISA, or nullopt when unset. An invalid value is reported by isa_cap_error().
std::optional<Isa> isa_cap();
/// One sentence describing why HALFMAP_ISA is invalid, or empty when it is unset or valid. Programs check it
/// at start and exit 2 with it.
std::string isa_cap_error();

}  // namespace halfmap
