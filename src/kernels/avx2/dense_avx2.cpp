// Dense layers on AVX2 + FMA + F16C: f32, f16_f32acc (fp16 widened with vcvtph2ps while packing; the f32
// micro-kernel does the work) and f16 with fp16 accumulators emulated per operation (every f32 FMA result
// rounded back to fp16 with vcvtps2ph, as XNNPACK's f16 GEMM does on AVX2).
#include <immintrin.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  if (i < n) {
    alignas(16) std::uint16_t in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(std::uint16_t));
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, (n - i) * sizeof(float));
  }
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    alignas(32) float in[8] = {};
    alignas(16) std::uint16_t out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(dst + i, out, (n - i) * sizeof(std::uint16_t));
  }
}

/// 6 × 16 f32 micro-kernel: 12 ymm accumulators, 2 for B, 1 broadcast of A.
void f32_kernel_6x16(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, bool accumulate) {
  __m256 acc[6][2];
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = accumulate ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
  for (std::size_t p = 0; p < kc; ++p, a += 6, b += 16) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

struct F32Blocking {
  static constexpr std::size_t kMr = 6, kNr = 16, kKPack = 1, kMc = 120, kKc = 256, kNc = 4096;
};

struct F32Gemm : F32Blocking {
  using Storage = float;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f32;
  static void convert(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static void store_out(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static constexpr auto kernel = f32_kernel_6x16;
};

struct F16F32AccGemm : F32Blocking {
  using Storage = std::uint16_t;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr auto convert = f16_to_f32;
  static constexpr auto store_out = f32_to_f16;
  static constexpr auto kernel = f32_kernel_6x16;
};

/// fp16 accumulation through F16C: every accumulator is rounded to fp16 after every FMA (f32_round).
/// 4 × 16 tile: 8 accumulators leave registers for the conversions.
struct F16PerOpGemm {
  using Storage = std::uint16_t;
  using Packed = float;  // fp16 values widened exactly
  using Acc = std::uint16_t;
  static constexpr std::size_t kMr = 4, kNr = 16, kKPack = 1, kMc = 128, kKc = 256, kNc = 4096;
  static constexpr Mode kMode = Mode::f16;
  static constexpr auto convert = f16_to_f32;
  static __m256 load_f16(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 round(__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static void kernel(std::size_t kc, const float* a, const float* b, std::uint16_t* c, std::size_t ldc,
                     bool accumulate) {
    __m256 acc[4][2];
    for (int i = 0; i < 4; ++i) {
      acc[i][0] = accumulate ? load_f16(c + i * ldc) : _mm256_setzero_ps();
      acc[i][1] = accumulate ? load_f16(c + i * ldc + 8) : _mm256_setzero_ps();
    }
    for (std::size_t p = 0; p < kc; ++p, a += 4, b += 16) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + i);
        acc[i][0] = round(_mm256_fmadd_ps(ai, b0, acc[i][0]));
        acc[i][1] = round(_mm256_fmadd_ps(ai, b1, acc[i][1]));
      }
    }
    for (int i = 0; i < 4; ++i) {
      for (int h = 0; h < 2; ++h) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i * ldc + 8 * h),
                         _mm256_cvtps_ph(acc[i][h], _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels
using detail::dense_bwd;
using detail::dense_fwd;

const Kernel kDenseAvx2[] = {
    {"f32_dense_fwd__avx2", Op::dense_fwd, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma, nullptr,
     dense_fwd<F32Gemm>},
    {"f32_dense_bwd__avx2", Op::dense_bwd, Mode::f32, Isa::avx2, DType::f32, 1, kNoFma, nullptr, nullptr,
     dense_bwd<F32Gemm>},
    {"f16_f32acc_dense_fwd__avx2", Op::dense_fwd, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma, nullptr,
     dense_fwd<F16F32AccGemm>},
    {"f16_f32acc_dense_bwd__avx2", Op::dense_bwd, Mode::f16_f32acc, Isa::avx2, DType::f16, 1, kNoFma, nullptr,
     nullptr, dense_bwd<F16F32AccGemm>},
    {"f16_dense_fwd__avx2", Op::dense_fwd, Mode::f16, Isa::avx2, DType::f16, 1, FmaKind::f32_round, nullptr,
     dense_fwd<F16PerOpGemm>},
    {"f16_dense_bwd__avx2", Op::dense_bwd, Mode::f16, Isa::avx2, DType::f16, 1, FmaKind::f32_round, nullptr,
     nullptr, dense_bwd<F16PerOpGemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_avx2() { return kDenseAvx2; }

}  // namespace halfmap
