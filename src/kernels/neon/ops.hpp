// The arm64 Advanced SIMD primitives (baseline ARMv8-A): f32 on 4 lanes, and the fp16 <-> f32 conversions
// (fcvtl widens exactly, fcvtn rounds with FPCR's round to nearest even), which are baseline; fp16 arithmetic is
// the neonfp16 path, which builds on F32T too. F32 is nn.hpp's M, the f32 tile of microkernel.hpp and
// reduce.hpp's vector.
//
// Why no code compiled with higher-ISA flags can be merged into this folder's object, nor this folder's into a
// lower one: everything here is a template over a tag type, and each folder that includes this header (neon,
// neonfp16) instantiates it with a tag of its own namespace (halfmap::paths::<isa>::Tag) and the common templates
// (vec_ops.hpp's bases too) only with its tag or those instantiations. So every inline function compiled with a
// folder's flags has a mangled name that names that folder's ISA. Nothing in this header may be a plain
// (non-template) inline function.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/vec_ops.hpp"

namespace halfmap::paths::neon {

template <class Tag>
struct F32T : detail::F32Operators<Tag> {
  using V = float32x4_t;
  using Packed = float;  // GEMM panels
  using Acc = float;     // GEMM accumulator
  static constexpr std::size_t kW = 4;
  static V set1(float v) { return vdupq_n_f32(v); }
  static V zero() { return vdupq_n_f32(0.0f); }
  static V load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, V v) { vst1q_f32(p, v); }
  static V load_packed(const float* p) { return vld1q_f32(p); }
  static V broadcast(const float* p) { return vdupq_n_f32(*p); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static V min(V a, V b) { return vminq_f32(a, b); }
  static V max(V a, V b) { return vmaxq_f32(a, b); }
  static V scale2n(V p, V n) {
    const int32x4_t ni = vcvtq_s32_f32(n);  // exact: n is an integer
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const V s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const V s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
  }
  static V nan_pass(V x, V y) { return vbslq_f32(vceqq_f32(x, x), y, vaddq_f32(x, x)); }
  /// |mag| with the sign bit of sgn.
  static V copysign(V mag, V sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
  /// 4 fp16 values widened exactly / rounded to fp16.
  static V load_f16(const std::uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static void store_f16(std::uint16_t* p, V v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
  /// n fp16 values widened / n f32 values rounded, any n (scalar-lane tails).
  static void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, load_f16(src + i));
    for (; i < n; ++i) {
      const float16x4_t v = vreinterpret_f16_u16(vdup_n_u16(src[i]));
      dst[i] = vgetq_lane_f32(vcvt_f32_f16(v), 0);
    }
  }
  static void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) store_f16(dst + i, vld1q_f32(src + i));
    for (; i < n; ++i) dst[i] = vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(src[i]))), 0);
  }
};

/// 32-bit integer lanes on one q register (4 lanes): the fp8 conversions (kernels/common/fp8_codec.hpp).
template <class Tag>
struct I32T : detail::IntOperators<Tag, uint32x4_t, int32x4_t, uint32x4_t, float32x4_t> {
  using I = uint32x4_t;
  using M = uint32x4_t;
  static constexpr std::size_t kW = 4;
  static I load(const float* p) { return vreinterpretq_u32_f32(vld1q_f32(p)); }
  static void store(float* p, I v) { vst1q_f32(p, vreinterpretq_f32_u32(v)); }
  static I load_bytes(const std::uint8_t* p) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    return vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)))));
  }
  static void store_bytes(std::uint8_t* p, I v) {
    const uint16x4_t h = vmovn_u32(v);
    const std::uint32_t w = vget_lane_u32(vreinterpret_u32_u8(vmovn_u16(vcombine_u16(h, h))), 0);
    std::memcpy(p, &w, 4);
  }
  static I set1(std::uint32_t v) { return vdupq_n_u32(v); }
  // clang-format off
  template <int s>
  static I srl(I v) { return vshrq_n_u32(v, s); }
  template <int s>
  static I sll(I v) { return vshlq_n_u32(v, s); }
  // clang-format on
  static I select(M m, I a, I b) { return vbslq_u32(m, a, b); }
  static I i2f_scaled(I v, float c) {
    return vreinterpretq_u32_f32(vmulq_n_f32(vcvtq_f32_s32(vreinterpretq_s32_u32(v)), c));
  }
};

/// This folder's own instantiation.
struct Tag {};
using F32 = F32T<Tag>;
using I32 = I32T<Tag>;

}  // namespace halfmap::paths::neon
