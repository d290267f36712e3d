// Dense layers on AVX-512F/BW/VL: f32, f16_f32acc (fp16 widened to f32 while packing, so the f32 micro-kernel
// does the work and fp16 storage costs no compute speed) and f16 with fp16 accumulators emulated per operation
// (every f32 FMA result rounded back to fp16 with vcvtps2ph).
#include <immintrin.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

/// MR × (16·NV) f32 micro-kernel: MR·NV zmm accumulators, B's NV vectors loaded once per k, A broadcast per row.
template <int MR, int NV>
void f32_kernel(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, bool accumulate) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
  }
  for (std::size_t p = 0; p < kc; ++p, a += MR, b += 16 * NV) {
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
  }
}

/// 6 × 64 tiles: 24 accumulators, and per k 4 loads of B and 6 broadcasts of A for 24 FMAs (12 × 32 needs 12
/// broadcasts). k blocks of 1024 keep a layer's whole k in one block up to k = 1024, so the micro-tiles' partial
/// sums never make a round trip through memory (the epilogue finishes each tile from L1, see gemm.hpp). The
/// 256 KiB B micro-panel and the 72-row A block (288 KiB) share L2, from where the kernel streams 256 + 24 bytes
/// per 24 FMAs.
/// Measured on Zen 4 against 12 × 32 with k blocks of 256/512/1024, 6 × 64 with 256/384/512/1024 and
/// 8 × 48, 4 × 96: at 1024³, 12 × 32 / 256 ran at 0.89 of this, 12 × 32 / 1024 at 0.97.
struct F32Blocking {
  static constexpr std::size_t kMr = 6, kNr = 64, kKPack = 1, kMc = 72, kKc = 1024, kNc = 2048;
};

struct F32Gemm : F32Blocking {
  using Storage = float;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f32;
  static void convert(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static void store_out(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static constexpr auto kernel = f32_kernel<6, 4>;
};

struct F16F32AccGemm : F32Blocking {
  using Storage = std::uint16_t;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr auto convert = f16_to_f32;
  static constexpr auto store_out = f32_to_f16;
  static constexpr auto kernel = f32_kernel<6, 4>;
};

/// fp16 accumulation through conversions: every accumulator is rounded to fp16 after every FMA (f32_round).
struct F16PerOpGemm {
  using Storage = std::uint16_t;
  using Packed = float;  // fp16 values widened exactly
  using Acc = std::uint16_t;
  static constexpr std::size_t kMr = 8, kNr = 32, kKPack = 1, kMc = 128, kKc = 256, kNc = 4096;
  static constexpr Mode kMode = Mode::f16;
  static constexpr auto convert = f16_to_f32;
  static __m512 load_f16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 round(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static void kernel(std::size_t kc, const float* a, const float* b, std::uint16_t* c, std::size_t ldc,
                     bool accumulate) {
    __m512 acc[8][2];
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = accumulate ? load_f16(c + i * ldc) : _mm512_setzero_ps();
      acc[i][1] = accumulate ? load_f16(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (std::size_t p = 0; p < kc; ++p, a += 8, b += 32) {
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i]);
        acc[i][0] = round(_mm512_fmadd_ps(ai, b0, acc[i][0]));
        acc[i][1] = round(_mm512_fmadd_ps(ai, b1, acc[i][1]));
      }
    }
    for (int i = 0; i < 8; ++i) {
      for (int h = 0; h < 2; ++h) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + i * ldc + 16 * h),
                            _mm512_cvtps_ph(acc[i][h], _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels
using detail::dense_bwd;
using detail::dense_fwd;

const Kernel kDenseAvx512[] = {
    {"f32_dense_fwd__avx512", Op::dense_fwd, Mode::f32, Isa::avx512, DType::f32, 1, kNoFma, nullptr,
     dense_fwd<F32Gemm>},
    {"f32_dense_bwd__avx512", Op::dense_bwd, Mode::f32, Isa::avx512, DType::f32, 1, kNoFma, nullptr, nullptr,
     dense_bwd<F32Gemm>},
    {"f16_f32acc_dense_fwd__avx512", Op::dense_fwd, Mode::f16_f32acc, Isa::avx512, DType::f16, 1, kNoFma,
     nullptr, dense_fwd<F16F32AccGemm>},
    {"f16_f32acc_dense_bwd__avx512", Op::dense_bwd, Mode::f16_f32acc, Isa::avx512, DType::f16, 1, kNoFma,
     nullptr, nullptr, dense_bwd<F16F32AccGemm>},
    {"f16_dense_fwd__avx512", Op::dense_fwd, Mode::f16, Isa::avx512, DType::f16, 1, FmaKind::f32_round, nullptr,
     dense_fwd<F16PerOpGemm>},
    {"f16_dense_bwd__avx512", Op::dense_bwd, Mode::f16, Isa::avx512, DType::f16, 1, FmaKind::f32_round, nullptr,
     nullptr, dense_bwd<F16PerOpGemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_avx512() { return kDenseAvx512; }

}  // namespace halfmap
