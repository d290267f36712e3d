// The f16 model of the dense layer (registry.hpp's f16_model_dense_fwd/bwd): every output accumulates over its
// inner index in order from +0, one rounded fma per step; bias, relu and db are the kernels' own scalar steps
// (kernels/common/dense.cpp), so model and kernels cannot differ there.
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/gemm.hpp"

namespace halfmap {
namespace {

const f16* as_f16(const void* p) { return static_cast<const f16*>(p); }
f16* as_f16(void* p) { return static_cast<f16*>(p); }

/// out (rows × cols) = A · B with A(i,p) = a[i*a_rs + p*a_cs], B(p,j) = b[p*b_rs + j*b_cs]; every output
/// accumulates over p in order from +0, one rounded fma per step.
void model_gemm(std::size_t rows, std::size_t cols, std::size_t inner, const f16* a, std::size_t a_rs,
                std::size_t a_cs, const f16* b, std::size_t b_rs, std::size_t b_cs, f16* out, FmaKind fma) {
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      f16 acc{};
      for (std::size_t p = 0; p < inner; ++p) acc = f16_model::fma(a[i * a_rs + p * a_cs], b[p * b_rs + j * b_cs], acc, fma);
      out[i * cols + j] = acc;
    }
  }
}

}  // namespace

void f16_model_dense_fwd(const DenseArgs& d, FmaKind fma) {
  std::vector<f16> acc(d.m * d.n);
  model_gemm(d.m, d.n, d.k, as_f16(d.x), d.k, 1, as_f16(d.w), d.n, 1, acc.data(), fma);
  detail::f16_dense_epilogue(reinterpret_cast<const std::uint16_t*>(acc.data()), d.m, d.n,
                             static_cast<const std::uint16_t*>(d.b), d.act, static_cast<std::uint16_t*>(d.y));
}

void f16_model_dense_bwd(const DenseBwdArgs& d, FmaKind fma) {
  if (d.dx != nullptr) model_gemm(d.m, d.k, d.n, as_f16(d.dy), d.n, 1, as_f16(d.w), 1, d.n, as_f16(d.dx), fma);
  if (d.dw != nullptr) model_gemm(d.k, d.n, d.m, as_f16(d.x), 1, d.k, as_f16(d.dy), d.n, 1, as_f16(d.dw), fma);
  if (d.db != nullptr) detail::dense_bias_grad(Mode::f16_model, DType::f16, d.dy, d.m, d.n, d.db);
}

}  // namespace halfmap
