// roof/fma/avx512: vfmadd*ps on zmm (16 f32 lanes, 2 flops each); the read and copy loops with 64-byte
// loads (and stores); roof/f16c/avx512: the same FMA rounded to fp16 and back after every step.
#include <immintrin.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

// 16 chains of 32 registers: enough for 2 FMAs a cycle at up to 8 cycles' latency.
constexpr int kAcc = 16;

// The F16C round trip's chains: some 16 cycles of latency (FMA + vcvtps2ph + vcvtph2ps). Kept in registers (the
// pragma below: left to itself GCC kept these 24 in memory, and the loop reached 58 GFLOP/s on a Zen 5 where the
// f16 GEMM did 74), 16, 20, 24 and 28 chains reached 68, 74, 78 and 78 there.
constexpr int kF16cAcc = 24;

float fma(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 converges to 1 from 0: always normal and finite.
  const __m512 a = _mm512_set1_ps(0.5f), b = _mm512_set1_ps(0.5f);
  __m512 acc[kAcc];
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

template <int kRegs>
std::uint64_t read(const unsigned char* p, std::size_t bytes) {
  __m512i acc[kRegs];
#pragma GCC unroll 16
  for (auto& v : acc) v = _mm512_setzero_si512();
  for (std::size_t i = 0; i < bytes; i += 64 * kRegs) {
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) acc[a] = _mm512_add_epi64(acc[a], _mm512_loadu_si512(p + i + 64 * a));
  }
#pragma GCC unroll 16
  for (int a = 1; a < kRegs; ++a) acc[0] = _mm512_add_epi64(acc[0], acc[a]);
  // Lanes summed as unsigned: _mm512_reduce_add_epi64 adds signed 64-bit integers, whose overflow is undefined
  // behaviour (UBSan stops on it) while these sums wrap by design.
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, acc[0]);
  std::uint64_t total = 0;
  for (std::uint64_t v : lanes) total += v;
  return total;
}

template <int kRegs>
void copy(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 64 * kRegs) {
    __m512i v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) {
      v[a] = _mm512_loadu_si512(src + i + 64 * a);
      // An empty asm on the value: without it the compiler may turn the loop into a call of memcpy, whose
      // non-temporal stores at DRAM sizes no kernel uses.
      asm("" : "+v"(v[a]));
    }
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) _mm512_storeu_si512(dst + i + 64 * a, v[a]);
  }
}

template <int kRegs>
void copy_nt(const unsigned char* src, unsigned char* dst, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 64 * kRegs) {
    __m512i v[kRegs];
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) v[a] = _mm512_loadu_si512(src + i + 64 * a);
#pragma GCC unroll 16
    for (int a = 0; a < kRegs; ++a) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 64 * a), v[a]);
  }
  _mm_sfence();  // the streamed lines are globally visible before the next call reads or times them
}

float f16c(std::size_t reps) {
  // acc = acc * 0.5 + 0.5 converges to 1 from 0, every step exact or rounded to a normal fp16 value.
  const __m512 a = _mm512_set1_ps(0.5f);  // one register for both operands: the chains need the rest
  __m512 acc[kF16cAcc];
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 32
    for (auto& v : acc) v = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_fmadd_ps(v, a, a), _MM_FROUND_TO_NEAREST_INT));
  }
  __m512 s = acc[0];
  for (int i = 1; i < kF16cAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

float f16c_memory(std::size_t reps) {
  // The same recurrence on fp16 accumulators in memory (zero: 0 x 0.5 + 0.5, converging to 1).
  alignas(64) std::uint16_t acc[kF16cMemoryChains * 16] = {};
  const __m512 a = _mm512_set1_ps(0.5f);
  for (std::size_t r = 0; r < reps; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < kF16cMemoryChains; ++c) {
      auto* q = reinterpret_cast<__m256i*>(acc + 16 * c);
      __m256i h =
          _mm512_cvtps_ph(_mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(q)), a, a), _MM_FROUND_TO_NEAREST_INT);
      // Converted into a register and stored, as the kernels' store_f16 compiles: GCC would otherwise fuse the
      // two into vcvtps2ph to memory, which some cores (Zen 5 here: 28 against 48 GFLOP/s on avx2) run slowly.
      asm("" : "+v"(h));
      _mm256_storeu_si256(q, h);
    }
    // The array is local: without this the compiler could keep its values in registers (or fold the steps).
    asm volatile("" : : "r"(acc) : "memory");
  }
  float s = 0;
  for (const std::uint16_t v : acc) s += static_cast<float>(v);
  return s;
}

}  // namespace

IsaLoops loops_avx512() {
  static_assert(kShapeRegs[0] == 2 && kShapeRegs[1] == 4 && kShapeRegs[2] == 8 && kShapeRegs[3] == 16);
  return {"vfmadd*ps zmm (f32)",
          16.0 * 2 * kAcc,
          fma,
          {read<2>, read<4>, read<8>, read<16>},
          64,
          {copy<2>, copy<4>, copy<8>, copy<16>},
          f16c,
          16.0 * 2 * kF16cAcc,
          "vfmadd*ps + vcvtps2ph + vcvtph2ps zmm (f32 rounded to fp16 after every FMA)",
          {copy_nt<2>, copy_nt<4>, copy_nt<8>, copy_nt<16>},
          f16c_memory,
          16.0 * 2 * kF16cMemoryChains};
}

}  // namespace halfmap::bench::roof
