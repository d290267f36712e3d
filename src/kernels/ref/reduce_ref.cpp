// Portable scalar reductions: the f32 reference, the f16 model (mode f16_model: every operation rounded to
// fp16, strictly sequential, fused multiply-add) and the portable models of f16_f32acc and bf16_f32acc.
#include <cstdint>

#include "halfmap/half.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

struct RefTag {};

/// Sequential f32 accumulation over inputs widened by `widen`; the result is rounded to the mode's output.
template <class Elem, Op kOp, Mode kMode, class Widen>
float f32acc_scalar(const void* xv, const void* yv, std::size_t n, Widen widen) {
  const auto* x = static_cast<const Elem*>(xv);
  const auto* y = static_cast<const Elem*>(yv);
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float xi = widen(x[i]);
    if constexpr (kOp == Op::sum) acc += xi;
    if constexpr (kOp == Op::sumsq) acc += xi * xi;  // products of f16/bf16 values are exact in f32
    if constexpr (kOp == Op::dot) acc += xi * widen(y[i]);
  }
  return detail::f32acc_finish(kMode, acc);
}

template <Op kOp>
float f32_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<float, kOp, Mode::f32>(x, y, n, [](float v) { return v; });
}
template <Op kOp>
float f16_f32acc_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<f16, kOp, Mode::f16_f32acc>(x, y, n, [](f16 v) { return to_f32(v); });
}
template <Op kOp>
float bf16_f32acc_ref(const void* x, const void* y, std::size_t n) {
  return f32acc_scalar<bf16, kOp, Mode::bf16_f32acc>(x, y, n, [](bf16 v) { return to_f32(v); });
}
template <Op kOp>
float f16_model_ref(const void* x, const void* y, std::size_t n) {
  return to_f32(f16_model_reduce(kOp, static_cast<const f16*>(x), static_cast<const f16*>(y), n, 1,
                                 FmaKind::fused));
}

constexpr FmaKind kNoFma = FmaKind::fused;  // f32-accumulating kernels: the field is unused

const Kernel kRef[] = {
    {"f32_sum__ref", Op::sum, Mode::f32, Isa::ref, DType::f32, 1, kNoFma, f32_ref<Op::sum>},
    {"f32_sumsq__ref", Op::sumsq, Mode::f32, Isa::ref, DType::f32, 1, kNoFma, f32_ref<Op::sumsq>},
    {"f32_maxabs__ref", Op::maxabs, Mode::f32, Isa::ref, DType::f32, 1, kNoFma,
     detail::maxabs_reduce<RefTag, std::uint32_t, DType::f32>},
    {"f32_dot__ref", Op::dot, Mode::f32, Isa::ref, DType::f32, 1, kNoFma, f32_ref<Op::dot>},

    {"f16_f32acc_sum__ref", Op::sum, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma, f16_f32acc_ref<Op::sum>},
    {"f16_f32acc_sumsq__ref", Op::sumsq, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma,
     f16_f32acc_ref<Op::sumsq>},
    {"f16_f32acc_maxabs__ref", Op::maxabs, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma,
     detail::maxabs_reduce<RefTag, std::uint16_t, DType::f16>},
    {"f16_f32acc_dot__ref", Op::dot, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma, f16_f32acc_ref<Op::dot>},

    {"f16_sum__ref", Op::sum, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused, f16_model_ref<Op::sum>},
    {"f16_sumsq__ref", Op::sumsq, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused,
     f16_model_ref<Op::sumsq>},
    {"f16_maxabs__ref", Op::maxabs, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused,
     f16_model_ref<Op::maxabs>},
    {"f16_dot__ref", Op::dot, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused, f16_model_ref<Op::dot>},

    {"bf16_f32acc_sum__ref", Op::sum, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma,
     bf16_f32acc_ref<Op::sum>},
    {"bf16_f32acc_sumsq__ref", Op::sumsq, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma,
     bf16_f32acc_ref<Op::sumsq>},
    {"bf16_f32acc_maxabs__ref", Op::maxabs, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma,
     detail::maxabs_reduce<RefTag, std::uint16_t, DType::bf16>},
    {"bf16_f32acc_dot__ref", Op::dot, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma,
     bf16_f32acc_ref<Op::dot>},
};

}  // namespace

std::span<const Kernel> tables::reduce_ref() { return kRef; }

}  // namespace halfmap
