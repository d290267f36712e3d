// bf16_f32acc dense layers on AVX512-BF16: vdpbf16ps takes k in pairs (kKPack = 2), so A is packed as
// (a[i][2q], a[i][2q+1]) pairs broadcast as one 32-bit value, and B's columns as interleaved pairs; each
// instruction does two products per f32 lane. vdpbf16ps treats subnormal inputs and results as zero (see
// reduce_avx512bf16.cpp); outputs are rounded once to bf16 (round to nearest even).
#include <immintrin.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

/// f32 -> bf16, round to nearest even, exactly as the portable to_bf16 (half.hpp): subnormal results are kept
/// (vcvtneps2bf16 would flush them) and a NaN keeps its sign and top payload bits, made quiet.
__m256i f32_to_bf16_16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

void f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f32_to_bf16_16(_mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(dst + i, m, f32_to_bf16_16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

struct Bf16Gemm {
  using Storage = std::uint16_t;
  using Packed = std::uint16_t;
  using Acc = float;
  // k blocks of 1024 (512 pairs): up to k = 1024 the partial sums never leave the micro-tile (see gemm.hpp);
  // the 64 KiB B micro-panel and the 128-row A block (256 KiB) share L2. Measured on Zen 4: at 1024³ k blocks
  // of 512 ran at 0.95 of this, 768 at 0.95, 2048 at 0.99; 12- and 14-row tiles were slower than 8.
  static constexpr std::size_t kMr = 8, kNr = 32, kKPack = 2, kMc = 128, kKc = 1024, kNc = 2048;
  static constexpr Mode kMode = Mode::bf16_f32acc;
  static void convert(const std::uint16_t* s, std::uint16_t* d, std::size_t n) {
    std::memcpy(d, s, n * sizeof(std::uint16_t));
  }
  static void store_out(const float* s, std::uint16_t* d, std::size_t n) { f32_to_bf16(s, d, n); }
  static void kernel(std::size_t groups, const std::uint16_t* a, const std::uint16_t* b, float* c,
                     std::size_t ldc, bool accumulate) {
    __m512 acc[8][2];
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
      acc[i][1] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (std::size_t q = 0; q < groups; ++q, a += 16, b += 64) {
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        std::uint32_t pair;
        std::memcpy(&pair, a + 2 * i, sizeof pair);
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
      }
    }
    for (int i = 0; i < 8; ++i) {
      _mm512_storeu_ps(c + i * ldc, acc[i][0]);
      _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
  }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

const Kernel kDenseAvx512Bf16[] = {
    {"bf16_f32acc_dense_fwd__avx512bf16", Op::dense_fwd, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1,
     kNoFma, nullptr, detail::dense_fwd<Bf16Gemm>},
    {"bf16_f32acc_dense_bwd__avx512bf16", Op::dense_bwd, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1,
     kNoFma, nullptr, nullptr, detail::dense_bwd<Bf16Gemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_avx512bf16() { return kDenseAvx512Bf16; }

}  // namespace halfmap
