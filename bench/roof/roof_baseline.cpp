// The baseline read and copy loops of the roofs (bench_roof_memory.cpp): 16-byte vectors written with GCC/Clang vector
// extensions (SSE2 or NEON, no ISA flags), and SSE2's streaming stores on x86-64, in every shape (roof_isa.hpp's
// kShapeRegs). bench_roof_memory.cpp uses them where no enabled ISA has wider loops.
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2, part of the x86-64 baseline: _mm_stream_si128
#endif

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

/// 16 bytes: one SSE2 or NEON register, the baseline vector of both architectures. (A wider vector type without
/// the ISA flags for it is lowered through the stack by GCC, which would make this loop slower than memory.)
using U64x2 = std::uint64_t __attribute__((vector_size(16)));

/// The sum of the 64-bit words of p[0, bytes), bytes a multiple of 16 * kRegs, kRegs vectors of 16 bytes per step
/// into kRegs independent accumulators; p needs no alignment.
template <int kRegs>
std::uint64_t read_baseline(const unsigned char* p, std::size_t bytes) {
  U64x2 acc[kRegs] = {};
  for (std::size_t i = 0; i < bytes; i += 16 * kRegs) {
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) {
      U64x2 v;  // memcpy: the buffer holds floats; this reads their bytes without aliasing them
      std::memcpy(&v, p + i + 16 * a, 16);
      acc[a] += v;
    }
  }
  U64x2 total = acc[0];
  for (int a = 1; a < kRegs; ++a) total += acc[a];
  return total[0] + total[1];
}

/// dst[0, bytes) = src[0, bytes), bytes a multiple of 16 * kRegs, kRegs 16-byte vectors per step; neither needs
/// alignment.
template <int kRegs>
void copy_baseline(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 16 * kRegs) {
    U64x2 v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) {
      std::memcpy(&v[a], src + i + 16 * a, 16);
      // An empty asm on the value: without it the compiler may turn the loop into a call of memcpy, whose
      // non-temporal stores at DRAM sizes no kernel uses.
#if defined(__aarch64__)
      asm("" : "+w"(v[a]));
#else
      asm("" : "+x"(v[a]));
#endif
    }
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) std::memcpy(dst + i + 16 * a, &v[a], 16);
  }
}

#if defined(__x86_64__)
/// copy_baseline with non-temporal 16-byte stores (dst 16-byte aligned).
template <int kRegs>
void copy_nt_baseline(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 16 * kRegs) {
    __m128i v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) v[a] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16 * a));
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16 * a), v[a]);
  }
  _mm_sfence();
}
#endif

}  // namespace

IsaLoops loops_baseline() {
  static_assert(kShapeRegs[0] == 2 && kShapeRegs[1] == 4 && kShapeRegs[2] == 8 && kShapeRegs[3] == 16);
  IsaLoops loops{"",      0,
                 nullptr, {read_baseline<2>, read_baseline<4>, read_baseline<8>, read_baseline<16>},
                 16,      {copy_baseline<2>, copy_baseline<4>, copy_baseline<8>, copy_baseline<16>},
                 nullptr, 0,
                 nullptr};
#if defined(__x86_64__)
  loops.copy_nt[0] = copy_nt_baseline<2>;
  loops.copy_nt[1] = copy_nt_baseline<4>;
  loops.copy_nt[2] = copy_nt_baseline<8>;
  loops.copy_nt[3] = copy_nt_baseline<16>;
#endif
  return loops;
}

}  // namespace halfmap::bench::roof
