// roof/fma/avx2: vfmadd*ps on ymm (8 f32 lanes, 2 flops each); the read and copy loops with 32-byte
// loads (and stores); roof/f16c/avx2: the same FMA rounded to fp16 and back after every step.
#include <immintrin.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

// 12 chains: Zen 4 and recent Intel cores issue 2 FMAs a cycle at 4 cycles' latency, so 8 are needed; 12 plus the
// two operands fit AVX2's 16 registers without spilling.
constexpr int kAcc = 12;

// The F16C round trip's chains: FMA + vcvtps2ph + vcvtph2ps is some 16 cycles of latency (measured here: 4 and 8
// chains give 10 and 20 GFLOP/s, linear in the chains), so the loop needs as many chains as the registers allow to
// approach the conversions' throughput: 14, plus the one operand (a = b = 0.5) and a temporary, fill the 16.
constexpr int kF16cAcc = 14;

float fma(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 converges to 1 from 0: always normal and finite.
  const __m256 a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(0.5f);
  __m256 acc[kAcc];
  for (auto& v : acc) v = _mm256_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm_cvtss_f32(_mm256_castps256_ps128(s));
}

template <int kRegs>
std::uint64_t read(const unsigned char* p, std::size_t bytes) {
  __m256i acc[kRegs];
#pragma GCC unroll 16
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (std::size_t i = 0; i < bytes; i += 32 * kRegs) {
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) {
      acc[a] = _mm256_add_epi64(acc[a], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * a)));
    }
  }
#pragma GCC unroll 16
  for (int a = 1; a < kRegs; ++a) acc[0] = _mm256_add_epi64(acc[0], acc[a]);
  // Lanes summed as unsigned (a signed 64-bit sum may overflow: undefined behaviour; these sums wrap by design).
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

template <int kRegs>
void copy(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 32 * kRegs) {
    __m256i v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) {
      v[a] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32 * a));
      // An empty asm on the value: without it the compiler may turn the loop into a call of memcpy, whose
      // non-temporal stores at DRAM sizes no kernel uses.
      asm("" : "+x"(v[a]));
    }
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32 * a), v[a]);
  }
}

template <int kRegs>
void copy_nt(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 32 * kRegs) {
    __m256i v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) v[a] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32 * a));
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32 * a), v[a]);
  }
  _mm_sfence();  // the streamed lines are globally visible before the next call reads or times them
}

float f16c(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 converges to 1 from 0, every step exact or rounded to a normal fp16 value.
  const __m256 a = _mm256_set1_ps(0.5f);  // one register for both operands: the chains need the rest
  __m256 acc[kF16cAcc];
  for (auto& v : acc) v = _mm256_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_fmadd_ps(v, a, a), _MM_FROUND_TO_NEAREST_INT));
  }
  __m256 s = acc[0];
  for (int i = 1; i < kF16cAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm_cvtss_f32(_mm256_castps256_ps128(s));
}

float f16c_memory(std::size_t reps) {
  // The same recurrence on fp16 accumulators in memory (zero: 0 x 0.5 + 0.5, converging to 1).
  alignas(64) std::uint16_t acc[kF16cMemoryChains * 8] = {};
  const __m256 a = _mm256_set1_ps(0.5f);
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < kF16cMemoryChains; ++c) {
      auto* q = reinterpret_cast<__m128i*>(acc + 8 * c);
      __m128i h =
          _mm256_cvtps_ph(_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(q)), a, a), _MM_FROUND_TO_NEAREST_INT);
      // Converted into a register and stored, as the kernels' store_f16 compiles: GCC would otherwise fuse the
      // two into vcvtps2ph to memory, which some cores (Zen 5 here: 28 against 48 GFLOP/s on avx2) run slowly.
      asm("" : "+x"(h));
      _mm_storeu_si128(q, h);
    }
    // The array is local: without this the compiler could keep its values in registers (or fold the steps).
    asm volatile("" : : "r"(acc) : "memory");
  }
  float s = 0;
  for (const std::uint16_t v : acc) s += static_cast<float>(v);
  return s;
}

}  // namespace

IsaLoops loops_avx2() {
  static_assert(kShapeRegs[0] == 2 && kShapeRegs[1] == 4 && kShapeRegs[2] == 8 && kShapeRegs[3] == 16);
  return {"vfmadd*ps ymm (f32)",
          8.0 * 2 * kAcc,
          fma,
          {read<2>, read<4>, read<8>, read<16>},
          32,
          {copy<2>, copy<4>, copy<8>, copy<16>},
          f16c,
          8.0 * 2 * kF16cAcc,
          "vfmadd*ps + vcvtps2ph + vcvtph2ps ymm (f32 rounded to fp16 after every FMA)",
          {copy_nt<2>, copy_nt<4>, copy_nt<8>, copy_nt<16>},
          f16c_memory,
          8.0 * 2 * kF16cMemoryChains};
}

}  // namespace halfmap::bench::roof
