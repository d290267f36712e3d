// bf16_f32acc losses and softmax on AVX512-BF16: bf16 is widened exactly (a 16-bit shift), everything is
// computed in f32 on AVX-512F, and each output is rounded once to bf16 with vcvtneps2bf16 (round to nearest even,
// NaN kept quiet). Per Intel's SDM vcvtneps2bf16 ignores MXCSR and flushes f32-subnormal results (below 2^-126)
// to zero, unlike the portable to_bf16 of the ref path: that is this path's semantics, as for vdpbf16ps in
// reduce_avx512bf16.cpp.
#include <immintrin.h>

#include "kernels/common/nn.hpp"
#include "kernels/common/nn_math.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct Avx512Bf16Tag {};
using Math = detail::Avx512Math<Avx512Bf16Tag>;

struct Bf16 {
  using M = Math;
  using Elem = std::uint16_t;  // bf16 bit patterns
  static constexpr Mode kMode = Mode::bf16_f32acc;
  static constexpr DType kStorage = DType::bf16;
  static constexpr Elem kNegInf = 0xFF80;
  static M::V load(const std::uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static void store(std::uint16_t* p, M::V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v));
  }
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

using detail::mse_f32acc;
using detail::softmax_f32acc;
using detail::xent_f32acc;

const Kernel kNnAvx512Bf16[] = {
    {.name = "bf16_f32acc_mse__avx512bf16", .op = Op::mse, .mode = Mode::bf16_f32acc,
     .isa = Isa::avx512bf16, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .loss = mse_f32acc<Bf16>},
    {.name = "bf16_f32acc_softmax__avx512bf16", .op = Op::softmax, .mode = Mode::bf16_f32acc,
     .isa = Isa::avx512bf16, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<Bf16, true>},
    {.name = "bf16_f32acc_softmax_naive__avx512bf16", .op = Op::softmax_naive, .mode = Mode::bf16_f32acc,
     .isa = Isa::avx512bf16, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .softmax = softmax_f32acc<Bf16, false>},
    {.name = "bf16_f32acc_xent__avx512bf16", .op = Op::xent, .mode = Mode::bf16_f32acc,
     .isa = Isa::avx512bf16, .storage = DType::bf16, .lanes = 1, .fma = kNoFma, .xent = xent_f32acc<Bf16>},
};

}  // namespace

std::span<const Kernel> tables::nn_avx512bf16() { return kNnAvx512Bf16; }

}  // namespace halfmap
