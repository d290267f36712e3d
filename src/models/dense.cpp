// The f16 model of the dense layer (registry.hpp's f16_model_dense_fwd/bwd, from DenseArgs and DenseBwdArgs): every
// output accumulates over its inner index in order from +0, one rounded fma per step, then acc + b rounded and
// relu; db sums dY's rows in order from +0, one rounded add per step.
#include <algorithm>
#include <cmath>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace {

const f16* as_f16(const void* p) { return static_cast<const f16*>(p); }
f16* as_f16(void* p) { return static_cast<f16*>(p); }

/// One step acc <- fp16(a·b + acc) of the model's fma on widened operands (each an fp16 value, acc one too). The
/// product of two fp16 values is exact in f32 and in f64 (22 significant bits, exponents from -48 to 32), so a·b + c
/// rounds once, as std::fma does: equal bits whenever the sum is finite. A finite sum also means every operand was
/// finite, so a non-finite one (inf, NaN and its payload) takes f16_model::fma's own path.
inline double model_step(double a, double b, double acc, FmaKind fma) {
  if (fma == FmaKind::f32_round) {
    const float x = float(a) * float(b) + float(acc);
    if (std::isfinite(x)) [[likely]]
      return f16_model::round_finite(x);
    return to_f64(to_f16(std::fma(float(a), float(b), float(acc))));
  }
  const double x = a * b + acc;
  if (std::isfinite(x)) [[likely]]
    return f16_model::round_finite(x);
  return to_f64(to_f16(std::fma(a, b, acc)));
}

/// out (rows × cols) = A · B with A(i,p) = a[i*a_rs + p*a_cs], B(p,j) = b[p*b_rs + j*b_cs]; every output
/// accumulates over p in order from +0, one rounded fma per step (f16_model::fma, on operands widened once and
/// kept as fp16 values in f64). The j loop is innermost, so the outputs of a row advance together: independent
/// chains, the same order per output.
void model_gemm(std::size_t rows, std::size_t cols, std::size_t inner, const f16* a, std::size_t a_rs, std::size_t a_cs,
                const f16* b, std::size_t b_rs, std::size_t b_cs, f16* out, FmaKind fma) {
  std::vector<double> wa(rows * inner), wb(inner * cols), acc(cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t p = 0; p < inner; ++p) wa[i * inner + p] = to_f64(a[i * a_rs + p * a_cs]);
  }
  for (std::size_t p = 0; p < inner; ++p) {
    for (std::size_t j = 0; j < cols; ++j) wb[p * cols + j] = to_f64(b[p * b_rs + j * b_cs]);
  }
  for (std::size_t i = 0; i < rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::size_t p = 0; p < inner; ++p) {
      const double av = wa[i * inner + p];
      const double* brow = &wb[p * cols];
      if (fma == FmaKind::f32_round) {
        for (std::size_t j = 0; j < cols; ++j) acc[j] = model_step(av, brow[j], acc[j], FmaKind::f32_round);
      } else {
        for (std::size_t j = 0; j < cols; ++j) acc[j] = model_step(av, brow[j], acc[j], FmaKind::fused);
      }
    }
    for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = to_f16(acc[j]);
  }
}

}  // namespace

void f16_model_dense_fwd(const DenseArgs& d, FmaKind fma) {
  f16* y = as_f16(d.y);
  model_gemm(d.m, d.n, d.k, as_f16(d.x), d.k, 1, as_f16(d.w), d.n, 1, y, fma);
  const f16* b = as_f16(d.b);
  for (std::size_t i = 0; i < d.m; ++i) {
    for (std::size_t j = 0; j < d.n; ++j) {
      f16& v = y[i * d.n + j];
      if (b != nullptr) v = f16_model::add(v, b[j]);
      if (d.act == Act::relu && to_f32(v) < 0.0f) v = f16{};  // x < 0 ? 0 : x: -0 and NaN pass
    }
  }
}

void f16_model_dense_bwd(const DenseBwdArgs& d, FmaKind fma) {
  if (d.dx != nullptr) model_gemm(d.m, d.k, d.n, as_f16(d.dy), d.n, 1, as_f16(d.w), 1, d.n, as_f16(d.dx), fma);
  if (d.dw != nullptr) model_gemm(d.k, d.n, d.m, as_f16(d.x), 1, d.k, as_f16(d.dy), d.n, 1, as_f16(d.dw), fma);
  if (d.db == nullptr) return;
  const f16* dy = as_f16(d.dy);
  for (std::size_t j = 0; j < d.n; ++j) {
    f16 acc{};
    for (std::size_t i = 0; i < d.m; ++i) acc = f16_model::add(acc, dy[i * d.n + j]);
    as_f16(d.db)[j] = acc;
  }
}

}  // namespace halfmap
