// The ARMv8.2-A FP16 primitives: native fp16 arithmetic on 8 lanes (fadd, fsub, fmla, fdiv round every result to
// fp16; FmaKind::fused), and baseline NEON f32 (neon::F32T) where the contracts compute in f32 (exp, c·d for
// the gradients). fp16 subnormals are kept as long as FPCR.FZ16 is off, the Linux default; halfmap never sets it.
//
// Why no code compiled with these flags can be merged into a lower ISA's object: everything here is inside
// namespace halfmap::paths::neonfp16, the neon templates are instantiated with this namespace's Tag, and the
// common templates only with these types (see neon/ops.hpp).
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "halfmap/f16_model.hpp"
#include "kernels/common/vec_ops.hpp"
#include "kernels/neon/ops.hpp"

namespace halfmap::paths::neonfp16 {

struct Tag {};
using F32 = neon::F32T<Tag>;

/// Native fp16 on one q register (8 lanes; detail::NativeF16Ops for the steps through f32 and the stores).
struct F16 : detail::NativeF16Ops<F32, F16> {
  using V = float16x8_t;
  using HV = V;
  static constexpr std::size_t kW = 8;
  static V set1(std::uint16_t bits) { return vreinterpretq_f16_u16(vdupq_n_u16(bits)); }
  static V zero() { return set1(0); }
  static V load(const std::uint16_t* p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
  static void store(std::uint16_t* p, V v) { vst1q_u16(p, vreinterpretq_u16_f16(v)); }
  static V add(V a, V b) { return vaddq_f16(a, b); }
  static V sub(V a, V b) { return vsubq_f16(a, b); }
  static V fma(V a, V b, V c) { return vfmaq_f16(c, a, b); }
  static V div(V a, V b) { return vdivq_f16(a, b); }
  /// f(to_f32(v)) rounded once to fp16, on the two halves of v.
  template <class F>
  static V through_f32(V v, F f) {
    const float32x4_t lo = f(vcvt_f32_f16(vget_low_f16(v)));
    const float32x4_t hi = f(vcvt_high_f32_f16(v));
    return vcvt_high_f16_f32(vcvt_f16_f32(lo), hi);
  }
  static V canon(V v) { return vbslq_f16(vceqq_f16(v, v), v, set1(0x7E00)); }
  static V rot(V v, unsigned w) {
    switch (w) {
      case 4:
        return vextq_f16(v, v, 4);
      case 2:
        return vextq_f16(v, v, 2);
      default:
        return vextq_f16(v, v, 1);
    }
  }
  static std::uint16_t lane0(V v) { return vgetq_lane_u16(vreinterpretq_u16_f16(v), 0); }
};

/// The fp8 conversions through fp16 (kernels/common/fp8_codec.hpp's half_encode, half_decode): 8 values at once,
/// as 16-bit lanes on one q register (U) and as float32 on two (F). fcvtn rounds to fp16 to nearest even (FPCR's
/// default mode, which halfmap never changes), fcvtl widens exactly.
struct H16 : detail::IntOperators<Tag, uint16x8_t, uint16x8_t> {
  using U = uint16x8_t;
  using F = float32x4x2_t;
  static constexpr std::size_t kW = 8;
  static F load(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4)}}; }
  static void store(float* p, F v) { vst1q_f32(p, v.val[0]), vst1q_f32(p + 4, v.val[1]); }
  static F scale(F v, float c) { return {{vmulq_n_f32(v.val[0], c), vmulq_n_f32(v.val[1], c)}}; }
  static U to_f16(F v) { return vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(v.val[0]), v.val[1])); }
  static F to_f32(U h) {
    const float16x8_t f = vreinterpretq_f16_u16(h);
    return {{vcvt_f32_f16(vget_low_f16(f)), vcvt_high_f32_f16(f)}};
  }
  static U above(F a, F b) {
    return vcombine_u16(vmovn_u32(vcagtq_f32(a.val[0], b.val[0])), vmovn_u32(vcagtq_f32(a.val[1], b.val[1])));
  }
  static U differ(F a, F b) {
    return vmvnq_u16(vcombine_u16(vmovn_u32(vceqq_f32(a.val[0], b.val[0])), vmovn_u32(vceqq_f32(a.val[1], b.val[1]))));
  }
  static U load_bytes(const std::uint8_t* p) { return vmovl_u8(vld1_u8(p)); }
  static void store_bytes(std::uint8_t* p, U v) { vst1_u8(p, vmovn_u16(v)); }
  static U set1(std::uint16_t v) { return vdupq_n_u16(v); }
  // clang-format off
  template <int s>
  static U srl(U v) { return vshrq_n_u16(v, s); }
  template <int s>
  static U sll(U v) { return vshlq_n_u16(v, s); }
  // clang-format on
  static U select(U m, U a, U b) { return vbslq_u16(m, a, b); }
};

}  // namespace halfmap::paths::neonfp16
