// Native fp16 dense layers on AVX512-FP16: vfmadd231ph rounds every accumulator to fp16 in hardware (a fused
// multiply-add, FmaKind::fused). Each output accumulates over k in order from +0, exactly as
// f16_model_dense_fwd/bwd, which is the bit-exact reference for this path.
#include <immintrin.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct F16NativeGemm {
  using Storage = std::uint16_t;
  using Packed = std::uint16_t;
  using Acc = std::uint16_t;
  static constexpr std::size_t kMr = 8, kNr = 64, kKPack = 1, kMc = 128, kKc = 256, kNc = 4096;
  static constexpr Mode kMode = Mode::f16;
  static void convert(const std::uint16_t* s, std::uint16_t* d, std::size_t n) {
    std::memcpy(d, s, n * sizeof(std::uint16_t));
  }
  static void kernel(std::size_t kc, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* c,
                     std::size_t ldc, bool accumulate) {
    __m512h acc[8][2];
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = accumulate ? _mm512_loadu_ph(c + i * ldc) : _mm512_setzero_ph();
      acc[i][1] = accumulate ? _mm512_loadu_ph(c + i * ldc + 32) : _mm512_setzero_ph();
    }
    for (std::size_t p = 0; p < kc; ++p, a += 8, b += 64) {
      const __m512h b0 = _mm512_loadu_ph(b), b1 = _mm512_loadu_ph(b + 32);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m512h ai = _mm512_castsi512_ph(_mm512_set1_epi16(static_cast<short>(a[i])));
        acc[i][0] = _mm512_fmadd_ph(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ph(ai, b1, acc[i][1]);
      }
    }
    for (int i = 0; i < 8; ++i) {
      _mm512_storeu_ph(c + i * ldc, acc[i][0]);
      _mm512_storeu_ph(c + i * ldc + 32, acc[i][1]);
    }
  }
};

const Kernel kDenseAvx512Fp16[] = {
    {"f16_dense_fwd__avx512fp16", Op::dense_fwd, Mode::f16, Isa::avx512fp16, DType::f16, 1, FmaKind::fused,
     nullptr, detail::dense_fwd<F16NativeGemm>},
    {"f16_dense_bwd__avx512fp16", Op::dense_bwd, Mode::f16, Isa::avx512fp16, DType::f16, 1, FmaKind::fused,
     nullptr, nullptr, detail::dense_bwd<F16NativeGemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_avx512fp16() { return kDenseAvx512Fp16; }

}  // namespace halfmap
