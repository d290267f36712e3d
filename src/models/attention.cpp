// The f16 model of attention (AttentionArgs in registry.hpp), composed from the f16 models of the dense layer and
// the stable softmax and AttentionArgs' elementwise steps, each rounded to fp16: written from the contract, apart
// from the kernels' own composition, which it checks (the ref path's f16_model attention is that composition
// over these models).
#include <cmath>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace {

f16* as_f16(void* p) { return static_cast<f16*>(p); }

void canon(void* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (is_nan(as_f16(p)[i])) as_f16(p)[i] = f16{0x7E00};
  }
}

/// The first n values of v, each times c rounded to fp16.
std::vector<f16> scaled(const f16* v, std::size_t n, f16 c) {
  std::vector<f16> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = f16_model::mul(v[i], c);
  return out;
}

/// srcᵀ of a rows × cols row-major matrix.
std::vector<f16> transposed(const f16* src, std::size_t rows, std::size_t cols) {
  std::vector<f16> out(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) out[j * rows + i] = src[i * cols + j];
  }
  return out;
}

}  // namespace

void f16_model_attention(const AttentionArgs& a, bool prescale, unsigned lanes, FmaKind fma) {
  const std::size_t L = a.len, d = a.dim;
  if (L == 0) return;
  const f16 c = to_f16(1.0f / std::sqrt(float(d)));
  const auto* q = static_cast<const f16*>(a.q);
  const std::vector<f16> qs = prescale ? scaled(q, L * d, c) : std::vector<f16>{};
  const f16* qa = prescale ? qs.data() : q;  // Q̃ = R(Q·c), or Q itself
  const std::vector<f16> kt = transposed(static_cast<const f16*>(a.k), L, d);
  std::vector<f16> s(L * L);
  f16_model_dense_fwd(DenseArgs{L, L, d, qa, kt.data(), nullptr, s.data(), Act::identity}, fma);
  if (!prescale) s = scaled(s.data(), L * L, c);  // S = R(T·c)
  if (a.scores != nullptr) {
    for (std::size_t i = 0; i < L * L; ++i) as_f16(a.scores)[i] = s[i];
    canon(a.scores, L * L);
  }
  if (a.causal) {
    for (std::size_t i = 0; i < L; ++i) {
      for (std::size_t j = i + 1; j < L; ++j) s[i * L + j] = f16{0xFC00};  // -inf
    }
  }
  std::vector<f16> p(L * L);
  f16_model_softmax(SoftmaxArgs{L, L, s.data(), p.data()}, true, lanes);
  if (a.o != nullptr) {
    f16_model_dense_fwd(DenseArgs{L, d, L, p.data(), a.v, nullptr, a.o, Act::identity}, fma);
    canon(a.o, L * d);
  }
  if (a.dout == nullptr) return;

  // dP = dO·Vᵀ, dV = Pᵀ·dO
  std::vector<f16> dp(L * L), ds(L * L);
  f16_model_dense_bwd(DenseBwdArgs{L, d, L, p.data(), a.v, a.dout, dp.data(), a.dv, nullptr}, fma);
  // dS_j = r16(P_j·r16(dP_j - δ)) with δ the fp16 dot of the row's P and dP; +0 where masked
  for (std::size_t i = 0; i < L; ++i) {
    const f16* pr = &p[i * L];
    const f16* dpr = &dp[i * L];
    const f16 delta = f16_model_reduce(Op::dot, pr, dpr, L, lanes, fma);
    for (std::size_t j = 0; j < L; ++j) {
      ds[i * L + j] = a.causal && j > i ? f16{} : f16_model::mul(pr[j], f16_model::sub(dpr[j], delta));
    }
  }
  if (!prescale) ds = scaled(ds.data(), L * L, c);  // dT = R(dS·c)
  // dQ̃ = dS·K (postscale: dQ = dT·K) and dKᵀ = Q̃ᵀ·dS (Qᵀ·dT)
  std::vector<f16> dq(L * d), dkt(d * L);
  f16_model_dense_bwd(DenseBwdArgs{L, L, d, qa, kt.data(), ds.data(), dq.data(), dkt.data(), nullptr}, fma);
  if (prescale) dq = scaled(dq.data(), L * d, c);  // dQ = R(dQ̃·c)
  const std::vector<f16> dk = transposed(dkt.data(), d, L);
  for (std::size_t i = 0; i < L * d; ++i) {
    as_f16(a.dq)[i] = dq[i];
    as_f16(a.dk)[i] = dk[i];
  }
  canon(a.dq, L * d);
  canon(a.dk, L * d);
  canon(a.dv, L * d);
}

}  // namespace halfmap
