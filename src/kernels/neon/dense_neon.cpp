// Dense layers on arm64 Advanced SIMD: f32 and f16_f32acc (fp16 widened with fcvtl while packing; the f32
// micro-kernel does the work).
#include <arm_neon.h>

#include <cstring>

#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  for (; i < n; ++i) {
    const float16x4_t v = vreinterpret_f16_u16(vdup_n_u16(src[i]));
    dst[i] = vgetq_lane_f32(vcvt_f32_f16(v), 0);
  }
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
  for (; i < n; ++i) dst[i] = vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(src[i]))), 0);
}

/// 8 × 8 f32 micro-kernel: 16 q-register accumulators.
void f32_kernel_8x8(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, bool accumulate) {
  float32x4_t acc[8][2];
  for (int i = 0; i < 8; ++i) {
    acc[i][0] = accumulate ? vld1q_f32(c + i * ldc) : vdupq_n_f32(0.0f);
    acc[i][1] = accumulate ? vld1q_f32(c + i * ldc + 4) : vdupq_n_f32(0.0f);
  }
  for (std::size_t p = 0; p < kc; ++p, a += 8, b += 8) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = vfmaq_n_f32(acc[i][0], b0, a[i]);
      acc[i][1] = vfmaq_n_f32(acc[i][1], b1, a[i]);
    }
  }
  for (int i = 0; i < 8; ++i) {
    vst1q_f32(c + i * ldc, acc[i][0]);
    vst1q_f32(c + i * ldc + 4, acc[i][1]);
  }
}

struct F32Blocking {
  static constexpr std::size_t kMr = 8, kNr = 8, kKPack = 1, kMc = 128, kKc = 256, kNc = 4096;
};

struct F32Gemm : F32Blocking {
  using Storage = float;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f32;
  static void convert(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static void store_out(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }
  static constexpr auto kernel = f32_kernel_8x8;
};

struct F16F32AccGemm : F32Blocking {
  using Storage = std::uint16_t;
  using Packed = float;
  using Acc = float;
  static constexpr Mode kMode = Mode::f16_f32acc;
  static constexpr auto convert = f16_to_f32;
  static constexpr auto store_out = f32_to_f16;
  static constexpr auto kernel = f32_kernel_8x8;
};

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels
using detail::dense_bwd;
using detail::dense_fwd;

const Kernel kDenseNeon[] = {
    {"f32_dense_fwd__neon", Op::dense_fwd, Mode::f32, Isa::neon, DType::f32, 1, kNoFma, nullptr,
     dense_fwd<F32Gemm>},
    {"f32_dense_bwd__neon", Op::dense_bwd, Mode::f32, Isa::neon, DType::f32, 1, kNoFma, nullptr, nullptr,
     dense_bwd<F32Gemm>},
    {"f16_f32acc_dense_fwd__neon", Op::dense_fwd, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma, nullptr,
     dense_fwd<F16F32AccGemm>},
    {"f16_f32acc_dense_bwd__neon", Op::dense_bwd, Mode::f16_f32acc, Isa::neon, DType::f16, 1, kNoFma, nullptr,
     nullptr, dense_bwd<F16F32AccGemm>},
};

}  // namespace

std::span<const Kernel> tables::dense_neon() { return kDenseNeon; }

}  // namespace halfmap
