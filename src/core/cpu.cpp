#include "halfmap/cpu.hpp"
#include "halfmap/isa_arith.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace halfmap {

bool peers_linked();  // src/kernels/registry.cpp: true when this binary links the peers' kernel list

namespace {

struct IsaInfo {
  Isa isa;
  std::string_view name;
  std::string_view requirements;
  bool x86;
  int rank;         // position in its architecture's chain; the HALFMAP_ISA cap admits ranks at or below its own
  Isa f32;          // isa_f32_path (halfmap/isa_arith.hpp)
  bool f16_per_op;  // isa_f16_per_op
};

constexpr IsaInfo kIsaInfo[] = {
    {Isa::ref, "ref", "portable scalar C++", true, 0, Isa::ref, false},
    {Isa::avx2, "avx2", "AVX2 + FMA + F16C", true, 1, Isa::avx2, true},
    {Isa::avx512, "avx512", "AVX-512F/BW/VL (+ AVX2, FMA, F16C)", true, 2, Isa::avx512, true},
    {Isa::avx512bf16, "avx512bf16", "AVX-512F/BW/VL + AVX512-BF16", true, 3, Isa::avx512, false},
    {Isa::avx512fp16, "avx512fp16", "AVX-512F/BW/VL + AVX512-FP16", true, 4, Isa::avx512, false},
    {Isa::neon, "neon", "arm64 Advanced SIMD", false, 1, Isa::neon, false},
    {Isa::neonfp16, "neonfp16", "ARMv8.2-A FP16 (fphp + asimdhp)", false, 2, Isa::neon, false},
    // Rank 3 is the first sibling rank (isa_enabled): x86 has two siblings there, arm64 for now one path.
    {Isa::neonfhm, "neonfhm", "FEAT_FHM FMLAL (asimdfhm + neonfp16)", false, 3, Isa::neonfhm, false},
    // A sibling of neonfhm (as avx512fp16 of avx512bf16): a cap at either excludes the other.
    {Isa::neonbf16, "neonbf16", "FEAT_BF16 BFDOT/BFMMLA (bf16 + neon)", false, 4, Isa::neonbf16, false},
    {Isa::sve, "sve", "SVE, any vector length (sve + neonfp16)", false, 5, Isa::sve, false},
    // Above every cap: a peer library's kernels run only when no HALFMAP_ISA cap is set.
    {Isa::peer, "peer", "a peer library linked into this binary (src/peers/)", kHostIsX86, 100, Isa::peer, false},
};

const IsaInfo& info(Isa isa) { return kIsaInfo[static_cast<int>(isa)]; }

#if defined(__x86_64__)
std::uint64_t xgetbv0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (std::uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  char brand[49] = {};
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
      std::memcpy(brand + 16 * leaf + 0, &a, 4);
      std::memcpy(brand + 16 * leaf + 4, &b, 4);
      std::memcpy(brand + 16 * leaf + 8, &c, 4);
      std::memcpy(brand + 16 * leaf + 12, &d, 4);
    }
  }
  f.model = brand;
  while (!f.model.empty() && f.model.back() == ' ') f.model.pop_back();
  while (!f.model.empty() && f.model.front() == ' ') f.model.erase(f.model.begin());

  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
  // The OS must save the registers: XCR0 bits 1-2 (SSE, YMM) for AVX, and 5-7 (opmask, ZMM) for AVX-512.
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0;
  __cpuid_count(7, 0, a, b, c, d);
  const std::uint32_t b7 = b, d7 = d;
  __cpuid_count(7, 1, a, b, c, d);
  const std::uint32_t a71 = a;
  f.avx2 = avx && os_ymm && ((b7 >> 5) & 1);
  f.fma = fma && os_ymm;
  f.f16c = f16c && os_ymm;
  f.avx512f = os_zmm && ((b7 >> 16) & 1);
  f.avx512bw = os_zmm && ((b7 >> 30) & 1);
  f.avx512vl = os_zmm && ((b7 >> 31) & 1);
  f.avx512_fp16 = os_zmm && ((d7 >> 23) & 1);
  f.avx512_bf16 = os_zmm && ((a71 >> 5) & 1);
  return f;
}

#elif defined(__aarch64__)
CpuFeatures detect() {
  CpuFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP);
  f.asimd = hw & HWCAP_ASIMD;
  f.fphp = hw & HWCAP_FPHP;
  f.asimdhp = hw & HWCAP_ASIMDHP;
  f.asimdfhm = hw & HWCAP_ASIMDFHM;
  f.bf16 = getauxval(AT_HWCAP2) & HWCAP2_BF16;
  f.sve = hw & HWCAP_SVE;
  if (f.sve) {  // the kernel's view of the vector length (no SVE instruction is executed to learn it)
    const int vl = prctl(PR_SVE_GET_VL);
    if (vl > 0) f.sve_vector_bits = 8u * static_cast<unsigned>(vl & PR_SVE_VL_LEN_MASK);
  }
  std::string implementer, part;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    auto value = [&] { return line.substr(line.find(':') + 1); };
    if (implementer.empty() && line.rfind("CPU implementer", 0) == 0) implementer = value();
    if (part.empty() && line.rfind("CPU part", 0) == 0) part = value();
  }
  f.model = fmt::format("arm64 (implementer{}, part{})", implementer.empty() ? " ?" : implementer,
                        part.empty() ? " ?" : part);
  return f;
}
#else
#error "halfmap supports x86-64 and arm64"
#endif

bool hardware_has(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  switch (isa) {
    case Isa::ref:
      return true;
    case Isa::avx2:
      return avx2;
    case Isa::avx512:
      return avx512;
    case Isa::avx512bf16:
      return avx512 && f.avx512_bf16;
    case Isa::avx512fp16:
      return avx512 && f.avx512_fp16;
    case Isa::neon:
      return f.asimd;
    case Isa::neonfp16:
      return f.asimd && f.fphp && f.asimdhp;
    case Isa::neonfhm:
      return f.asimd && f.fphp && f.asimdhp && f.asimdfhm;
    case Isa::neonbf16:
      return f.asimd && f.bf16;
    case Isa::sve:
      return f.asimd && f.fphp && f.asimdhp && f.sve;
    case Isa::peer:
      return true;  // each peer kernel is checked on this CPU when the peers' list is built
  }
  return false;
}

std::string valid_names() {
  std::string out;
  for (const IsaInfo& i : kIsaInfo) {
    if ((i.isa != Isa::ref && i.x86 != kHostIsX86) || i.isa == Isa::peer) continue;
    out += out.empty() ? "" : ", ";
    out += i.name;
  }
  return out;
}

}  // namespace

std::string_view isa_name(Isa isa) { return info(isa).name; }
std::string_view isa_requirements(Isa isa) { return info(isa).requirements; }
Isa isa_f32_path(Isa isa) { return info(isa).f32; }
bool isa_f16_per_op(Isa isa) { return info(isa).f16_per_op; }
std::string_view isa_arch(Isa isa) {
  if (isa == Isa::ref || isa == Isa::peer) return "any";
  return info(isa).x86 ? "x86-64" : "arm64";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (const IsaInfo& i : kIsaInfo) {
    if (i.name == name) return i.isa;
  }
  return std::nullopt;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_compiled(Isa isa) {
  switch (isa) {
    case Isa::ref:
      return true;
#if defined(HALFMAP_WITH_AVX2)
    case Isa::avx2:
      return true;
#endif
#if defined(HALFMAP_WITH_AVX512)
    case Isa::avx512:
      return true;
#endif
#if defined(HALFMAP_WITH_AVX512BF16)
    case Isa::avx512bf16:
      return true;
#endif
#if defined(HALFMAP_WITH_AVX512FP16)
    case Isa::avx512fp16:
      return true;
#endif
#if defined(HALFMAP_WITH_NEON)
    case Isa::neon:
      return true;
#endif
#if defined(HALFMAP_WITH_NEONFP16)
    case Isa::neonfp16:
      return true;
#endif
#if defined(HALFMAP_WITH_NEONFHM)
    case Isa::neonfhm:
      return true;
#endif
#if defined(HALFMAP_WITH_NEONBF16)
    case Isa::neonbf16:
      return true;
#endif
#if defined(HALFMAP_WITH_SVE)
    case Isa::sve:
      return true;
#endif
    case Isa::peer:
      return peers_linked();
    default:
      return false;
  }
}

bool isa_supported(Isa isa) {
  if (isa != Isa::ref && info(isa).x86 != kHostIsX86) return false;
  return hardware_has(isa);
}

namespace {
struct CapState {
  std::optional<Isa> cap;
  std::string error;
};

const CapState& cap_state() {
  static const CapState state = [] {
    CapState s;
    const char* env = std::getenv("HALFMAP_ISA");
    if (env == nullptr || *env == '\0') return s;
    const std::optional<Isa> isa = parse_isa(env);
    if (!isa || *isa == Isa::peer) {
      s.error = fmt::format("HALFMAP_ISA={} names no ISA; use one of: {}.", env, valid_names());
    } else if (*isa != Isa::ref && info(*isa).x86 != kHostIsX86) {
      s.error = fmt::format("HALFMAP_ISA={} is an {} ISA, but this build is for {}; use one of: {}.", env,
                            info(*isa).x86 ? "x86-64" : "arm64", kHostArch, valid_names());
    } else {
      s.cap = isa;
    }
    return s;
  }();
  return state;
}
}  // namespace

std::optional<Isa> isa_cap() { return cap_state().cap; }
std::string isa_cap_error() { return cap_state().error; }

bool isa_enabled(Isa isa) {
  if (!isa_compiled(isa) || !isa_supported(isa)) return false;
  const CapState& s = cap_state();
  if (!s.error.empty()) return isa == Isa::ref;  // an invalid cap never widens anything
  if (!s.cap) return true;
  const IsaInfo& cap = info(*s.cap);
  const IsaInfo& me = info(isa);
  if (me.rank > cap.rank) return false;
  // Ranks from 3 up are siblings (x86: avx512bf16 and avx512fp16 above avx512): capping at one excludes the
  // others (arm64: neonfhm, neonbf16 and sve above neonfp16).
  return me.rank < 3 || isa == *s.cap;
}

IsaState isa_state(Isa isa) {
  if (!isa_compiled(isa)) return IsaState::not_compiled;
  if (!isa_supported(isa)) return IsaState::unsupported;
  return isa_enabled(isa) ? IsaState::enabled : IsaState::capped;
}

}  // namespace halfmap
