// Native fp16 dense layers on ARMv8.2-A FP16: fmla on 8 fp16 lanes rounds every accumulator to fp16 (fused,
// FmaKind::fused). Each output accumulates over k in order from +0, exactly as f16_model_dense_fwd/bwd.
#include <arm_neon.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct F16NativeGemm {
  using Storage = std::uint16_t;
  using Packed = std::uint16_t;
  using Acc = std::uint16_t;
  static constexpr std::size_t kMr = 8, kNr = 16, kKPack = 1, kMc = 128, kKc = 256, kNc = 4096;
  static constexpr Mode kMode = Mode::f16;
  static void convert(const std::uint16_t* s, std::uint16_t* d, std::size_t n) {
    std::memcpy(d, s, n * sizeof(std::uint16_t));
  }
  static float16x8_t load(const std::uint16_t* p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
  static void kernel(std::size_t kc, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* c,
                     std::size_t ldc, bool accumulate) {
    float16x8_t acc[8][2];
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = accumulate ? load(c + i * ldc) : vdupq_n_f16(0);
      acc[i][1] = accumulate ? load(c + i * ldc + 8) : vdupq_n_f16(0);
    }
    for (std::size_t p = 0; p < kc; ++p, a += 8, b += 16) {
      const float16x8_t b0 = load(b), b1 = load(b + 8);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const float16x8_t ai = vreinterpretq_f16_u16(vdupq_n_u16(a[i]));
        acc[i][0] = vfmaq_f16(acc[i][0], ai, b0);
        acc[i][1] = vfmaq_f16(acc[i][1], ai, b1);
      }
    }
    for (int i = 0; i < 8; ++i) {
      vst1q_u16(c + i * ldc, vreinterpretq_u16_f16(acc[i][0]));
      vst1q_u16(c + i * ldc + 8, vreinterpretq_u16_f16(acc[i][1]));
    }
  }
};

const Kernel kDenseNeonFp16[] = {
    {"f16_dense_fwd__neonfp16", Op::dense_fwd, Mode::f16, Isa::neonfp16, DType::f16, 1, FmaKind::fused, nullptr,
     detail::dense_fwd<F16NativeGemm>},
    {"f16_dense_bwd__neonfp16", Op::dense_bwd, Mode::f16, Isa::neonfp16, DType::f16, 1, FmaKind::fused, nullptr,
     nullptr, detail::dense_bwd<F16NativeGemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_neonfp16() { return kDenseNeonFp16; }

}  // namespace halfmap
