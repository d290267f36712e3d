// Portable scalar dense layers: the f32 reference, the portable f16_f32acc and bf16_f32acc models (f32
// arithmetic on widened inputs, one rounding at the output) and the f16 model (every operation rounded).
#include <vector>

#include "halfmap/half.hpp"
#include "kernels/common/gemm.hpp"
#include "kernels/common/tables.hpp"

namespace halfmap {
namespace {

template <class Elem>
float widen(Elem v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else {
    return to_f32(v);
  }
}

template <class Elem>
Elem narrow(float v) {
  if constexpr (std::is_same_v<Elem, float>) {
    return v;
  } else if constexpr (std::is_same_v<Elem, f16>) {
    return to_f16(v);
  } else {
    return to_bf16(v);
  }
}

/// out (rows × cols) = A · B in f32, sequential over the inner index.
template <class Elem>
void f32_gemm(std::size_t rows, std::size_t cols, std::size_t inner, const Elem* a, std::size_t a_rs,
              std::size_t a_cs, const Elem* b, std::size_t b_rs, std::size_t b_cs, float* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < inner; ++p) acc += widen(a[i * a_rs + p * a_cs]) * widen(b[p * b_rs + j * b_cs]);
      out[i * cols + j] = acc;
    }
  }
}

template <class Elem>
void f32acc_dense_fwd(const DenseArgs& d) {
  const auto* x = static_cast<const Elem*>(d.x);
  const auto* w = static_cast<const Elem*>(d.w);
  const auto* b = static_cast<const Elem*>(d.b);
  auto* y = static_cast<Elem*>(d.y);
  std::vector<float> acc(d.m * d.n);
  f32_gemm(d.m, d.n, d.k, x, d.k, 1, w, d.n, 1, acc.data());
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; ++j) {
      float v = b != nullptr ? acc[i * d.n + j] + widen(b[j]) : acc[i * d.n + j];
      if (d.act == Act::relu) v = v < 0.0f ? 0.0f : v;
      y[i * d.n + j] = narrow<Elem>(v);
    }
  }
}

template <class Elem>
void f32acc_dense_bwd(const DenseBwdArgs& d) {
  const auto* x = static_cast<const Elem*>(d.x);
  const auto* w = static_cast<const Elem*>(d.w);
  const auto* dy = static_cast<const Elem*>(d.dy);
  std::vector<float> acc;
  auto store = [&](void* out, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) static_cast<Elem*>(out)[i] = narrow<Elem>(acc[i]);
  };
  if (d.dx != nullptr) {
    acc.assign(d.m * d.k, 0.0f);
    f32_gemm(d.m, d.k, d.n, dy, d.n, 1, w, 1, d.n, acc.data());
    store(d.dx, d.m * d.k);
  }
  if (d.dw != nullptr) {
    acc.assign(d.k * d.n, 0.0f);
    f32_gemm(d.k, d.n, d.m, x, 1, d.k, dy, d.n, 1, acc.data());
    store(d.dw, d.k * d.n);
  }
  if (d.db != nullptr) {
    acc.assign(d.n, 0.0f);
    for (std::size_t i = 0; i < d.m; ++i) {
      for (std::size_t j = 0; j < d.n; ++j) acc[j] += widen(dy[i * d.n + j]);
    }
    store(d.db, d.n);
  }
}

void f16_model_fwd(const DenseArgs& d) { f16_model_dense_fwd(d, FmaKind::fused); }
void f16_model_bwd(const DenseBwdArgs& d) { f16_model_dense_bwd(d, FmaKind::fused); }

constexpr FmaKind kNoFma = FmaKind::fused;  // unused by f32-accumulating kernels

const Kernel kDenseRef[] = {
    {"f32_dense_fwd__ref", Op::dense_fwd, Mode::f32, Isa::ref, DType::f32, 1, kNoFma, nullptr,
     f32acc_dense_fwd<float>},
    {"f32_dense_bwd__ref", Op::dense_bwd, Mode::f32, Isa::ref, DType::f32, 1, kNoFma, nullptr, nullptr,
     f32acc_dense_bwd<float>},
    {"f16_f32acc_dense_fwd__ref", Op::dense_fwd, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma, nullptr,
     f32acc_dense_fwd<f16>},
    {"f16_f32acc_dense_bwd__ref", Op::dense_bwd, Mode::f16_f32acc, Isa::ref, DType::f16, 1, kNoFma, nullptr,
     nullptr, f32acc_dense_bwd<f16>},
    {"f16_dense_fwd__ref", Op::dense_fwd, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused, nullptr,
     f16_model_fwd},
    {"f16_dense_bwd__ref", Op::dense_bwd, Mode::f16_model, Isa::ref, DType::f16, 1, FmaKind::fused, nullptr,
     nullptr, f16_model_bwd},
    {"bf16_f32acc_dense_fwd__ref", Op::dense_fwd, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma, nullptr,
     f32acc_dense_fwd<bf16>},
    {"bf16_f32acc_dense_bwd__ref", Op::dense_bwd, Mode::bf16_f32acc, Isa::ref, DType::bf16, 1, kNoFma, nullptr,
     nullptr, f32acc_dense_bwd<bf16>},
};

}  // namespace

std::span<const Kernel> tables::dense_ref() { return kDenseRef; }

}  // namespace halfmap
