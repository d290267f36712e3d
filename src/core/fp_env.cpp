#include "halfmap/fp_env.hpp"

#include <fmt/format.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace halfmap {

FpEnv read_fp_env() {
  FpEnv env;
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
  env.arch = "x86-64";
  env.raw = csr;
  env.ftz = (csr >> 15) & 1;
  env.daz = (csr >> 6) & 1;
#elif defined(__aarch64__)
  unsigned long fpcr = 0;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  env.arch = "arm64";
  env.raw = fpcr;
  env.ftz = (fpcr >> 24) & 1;
  env.daz = env.ftz;  // FPCR.FZ flushes inputs and outputs alike
  env.fz16 = (fpcr >> 19) & 1;
#endif
  return env;
}

std::string FpEnv::describe() const {
  if (arch == "arm64") {
    return fmt::format("FPCR=0x{:08x} FZ={} FZ16={}{}", raw, int(ftz), int(fz16),
                       ieee() ? " (IEEE: subnormals kept)" : " (FLUSHING: underflow is hidden)");
  }
  return fmt::format("MXCSR=0x{:04x} FTZ={} DAZ={}{}", raw, int(ftz), int(daz),
                     ieee() ? " (IEEE: subnormals kept)" : " (FLUSHING: underflow is hidden)");
}

}  // namespace halfmap
