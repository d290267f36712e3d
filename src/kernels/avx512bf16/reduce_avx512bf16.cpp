// bf16_f32acc reductions on AVX512-BF16: vdpbf16ps multiplies pairs of bf16 values and accumulates both
// products into one f32 lane (lane i gets x[2i]*y[2i] + x[2i+1]*y[2i+1]). sum multiplies by bf16 1.0, sumsq by
// the input itself, so all three use the one instruction. Per Intel's SDM vdpbf16ps ignores MXCSR: it treats
// subnormal inputs as zero, flushes subnormal results and rounds to nearest even (seen on Zen 4 too: a bf16
// subnormal times 1.0 gives 0, and 2^-68 * 2^-68 gives 0). That is this path's
// semantics (the portable bf16 model in kernels/ref keeps subnormals); the tests and the sweep see it as is.
#include <immintrin.h>

#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct Avx512Bf16Tag {};

template <Op kOp>
float bf16_dp_reduce(const void* xv, const void* yv, std::size_t n) {
  constexpr std::size_t W = 32, R = 4;  // 32 bf16 values per register, 4 independent accumulators
  const auto* x = static_cast<const std::uint16_t*>(xv);
  const auto* y = static_cast<const std::uint16_t*>(yv);
  const __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0
  __m512 acc[R] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](__m512& a, __m512i xr, __m512i yr) {
    const __m512i other = kOp == Op::sum ? ones : kOp == Op::sumsq ? xr : yr;
    a = _mm512_dpbf16_ps(a, reinterpret_cast<__m512bh&>(xr), reinterpret_cast<const __m512bh&>(other));
  };
  auto load = [](const std::uint16_t* p) { return _mm512_loadu_si512(p); };
  std::size_t i = 0;
  for (; i + R * W <= n; i += R * W) {
    for (std::size_t r = 0; r < R; ++r) {
      step(acc[r], load(x + i + r * W), kOp == Op::dot ? load(y + i + r * W) : _mm512_setzero_si512());
    }
  }
  for (; i + W <= n; i += W) step(acc[0], load(x + i), kOp == Op::dot ? load(y + i) : _mm512_setzero_si512());
  if (i < n) {  // masked loads read nothing past n; the masked-off lanes are zero and add nothing
    const __mmask32 m = static_cast<__mmask32>((std::uint64_t{1} << (n - i)) - 1);
    step(acc[1], _mm512_maskz_loadu_epi16(m, x + i),
         kOp == Op::dot ? _mm512_maskz_loadu_epi16(m, y + i) : _mm512_setzero_si512());
  }
  const __m512 total = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  return detail::f32acc_finish(Mode::bf16_f32acc, _mm512_reduce_add_ps(total));
}

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

const Kernel kAvx512Bf16[] = {
    {"bf16_f32acc_sum__avx512bf16", Op::sum, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1, kNoFma,
     bf16_dp_reduce<Op::sum>},
    {"bf16_f32acc_sumsq__avx512bf16", Op::sumsq, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1, kNoFma,
     bf16_dp_reduce<Op::sumsq>},
    {"bf16_f32acc_maxabs__avx512bf16", Op::maxabs, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1, kNoFma,
     detail::maxabs_reduce<Avx512Bf16Tag, std::uint16_t, DType::bf16>},
    {"bf16_f32acc_dot__avx512bf16", Op::dot, Mode::bf16_f32acc, Isa::avx512bf16, DType::bf16, 1, kNoFma,
     bf16_dp_reduce<Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_avx512bf16() { return kAvx512Bf16; }

}  // namespace halfmap
