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

struct Bf16Gemm {
  using Storage = std::uint16_t;
  using Packed = std::uint16_t;
  using Acc = float;
  static constexpr std::size_t kMr = 8, kNr = 32, kKPack = 2, kMc = 128, kKc = 512, kNc = 4096;
  static constexpr Mode kMode = Mode::bf16_f32acc;
  static void convert(const std::uint16_t* s, std::uint16_t* d, std::size_t n) {
    std::memcpy(d, s, n * sizeof(std::uint16_t));
  }
  static void store_out(const float* s, std::uint16_t* d, std::size_t n) {
    detail::narrow_from_f32(DType::bf16, s, d, n);
  }
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
