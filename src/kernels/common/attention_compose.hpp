// The composition of AttentionArgs (registry.hpp), written once over "parts" (AttentionKernels) that run a path's
// dense forward and backward, its stable softmax and, in the f16 modes, its fp16 dot. Included only by
// kernels/common/attention.cpp, which is compiled without ISA flags: the elementwise steps are scalar code whose
// IEEE roundings are the same on every machine. The f16 model of attention (src/models/attention.cpp) is written
// apart from it, so that attention_test checks this composition too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/scalar_storage.hpp"
#include "kernels/common/scratch.hpp"  // grown

namespace halfmap::detail {

template <class T>
inline T neg_inf() {
  return narrow<T>(-std::numeric_limits<float>::infinity());
}

/// f16 modes: every NaN of an output becomes the canonical 0x7E00.
inline void canon_f16(void* p, std::size_t n) {
  auto* h = static_cast<f16*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (is_nan(h[i])) h[i] = f16{0x7E00};
  }
}

/// The composition's intermediates, kept per thread between calls and grown, never shrunk (scratch.hpp's grown):
/// at len 512 they are 4.5 MB, and allocating them per call (value-initialised, then page-faulted in, often as huge
/// pages) took 78 % of the f32 avx512 attention's time, the GEMMs 5 %. Every element a call reads it wrote first.
template <class T>
struct AttentionScratch {
  std::vector<T> qs, kt, s, pm, dp, ds, dqs, dkt, row;
  std::vector<float> pf, dpf;  // one row of P and of dP in f32
};

template <class T>
AttentionScratch<T>& attention_scratch() {
  thread_local AttentionScratch<T> scratch;
  return scratch;
}

/// dst[0, n) = src[0, n) widened to f32: with the path's bulk conversion on 16-bit storage where it has one (the
/// same bits as half.hpp's, AttentionKernels), else with the scalar one.
template <class T, class Parts>
void widen_all(const Parts& p, const T* src, float* dst, std::size_t n) {
  if constexpr (sizeof(T) == 2) {
    if (p.widen16 != nullptr) {
      p.widen16(reinterpret_cast<const std::uint16_t*>(src), dst, n);
      return;
    }
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = widen(src[i]);
}

/// dst[0, n) = src[0, n) rounded to T (nearest even), as widen_all.
template <class T, class Parts>
void narrow_all(const Parts& p, const float* src, T* dst, std::size_t n) {
  if constexpr (sizeof(T) == 2) {
    if (p.narrow16 != nullptr) {
      p.narrow16(src, reinterpret_cast<std::uint16_t*>(dst), n);
      return;
    }
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = narrow<T>(src[i]);
}

/// dst[i] = src[i] · c rounded once to T, for i < n (dst may be src): the widened value times c in f32, rounded.
template <class T, class Parts>
void scale_all(const Parts& p, const T* src, T* dst, std::size_t n, float c) {
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] * c;
  } else {
    constexpr std::size_t kChunk = 1024;
    float buf[kChunk];
    for (std::size_t i = 0; i < n; i += kChunk) {
      const std::size_t m = std::min(kChunk, n - i);
      widen_all(p, src + i, buf, m);
      for (std::size_t j = 0; j < m; ++j) buf[j] *= c;
      narrow_all(p, buf, dst + i, m);
    }
  }
}

/// dst (cols × rows) = srcᵀ, src rows × cols, both row-major, in 16 × 16 blocks: a plain loop writes one of dst's
/// rows per element, and at len 512 those rows are 1 KiB (bf16) apart, few enough L1 sets that the lines it
/// fills evict each other (the two transposes took 10 % of bf16 attention on a Zen 5; blocked, under 1 %).
template <class T>
void transpose(const T* src, std::size_t rows, std::size_t cols, T* dst) {
  constexpr std::size_t kB = 16;
  for (std::size_t i0 = 0; i0 < rows; i0 += kB) {
    const std::size_t i1 = std::min(rows, i0 + kB);
    for (std::size_t j0 = 0; j0 < cols; j0 += kB) {
      const std::size_t j1 = std::min(cols, j0 + kB);
      for (std::size_t j = j0; j < j1; ++j) {
        for (std::size_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * cols + j];
      }
    }
  }
}

template <class T, class Parts>
void attention_typed(const AttentionArgs& a, const Parts& p, bool prescale) {
  const std::size_t L = a.len, d = a.dim, LL = L * L, Ld = L * d;
  if (L == 0) return;
  const bool h16 = p.mode == Mode::f16 || p.mode == Mode::f16_model;
  const float c32 = 1.0f / std::sqrt(float(d));
  const float c = h16 ? to_f32(to_f16(c32)) : c32;
  // v·c is rounded once to the storage type (scale_all): in the f16 modes the correctly rounded fp16 product of v
  // and r16(c)

  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  AttentionScratch<T>& sc = attention_scratch<T>();
  T* qs = grown(sc.qs, prescale ? Ld : 0);
  T* kt = grown(sc.kt, Ld);
  T* s = grown(sc.s, LL);
  T* pm = grown(sc.pm, LL);
  const T* qa = q;
  if (prescale) {
    scale_all(p, q, qs, Ld, c);
    qa = qs;
  }
  transpose(k, L, d, kt);
  p.fwd(DenseArgs{L, L, d, qa, kt, nullptr, s, Act::identity, a.threads});
  if (!prescale) scale_all(p, s, s, LL, c);
  if (a.scores != nullptr) {
    std::memcpy(a.scores, s, LL * sizeof(T));
    if (h16) canon_f16(a.scores, LL);
  }
  if (a.causal) {
    for (std::size_t i = 0; i < L; ++i) {
      for (std::size_t j = i + 1; j < L; ++j) s[i * L + j] = neg_inf<T>();
    }
  }
  p.softmax(SoftmaxArgs{L, L, s, pm});
  if (a.o != nullptr) {
    p.fwd(DenseArgs{L, d, L, pm, a.v, nullptr, a.o, Act::identity, a.threads});
    if (h16) canon_f16(a.o, Ld);
  }
  if (a.dout == nullptr) return;

  T* dp = grown(sc.dp, LL);
  T* ds = grown(sc.ds, LL);
  T* row = grown(sc.row, L);
  float* pf = grown(sc.pf, L);
  float* dpf = grown(sc.dpf, L);
  p.bwd(DenseBwdArgs{L, d, L, pm, a.v, a.dout, dp, a.dv, nullptr, a.threads});
  // The softmax backward, row by row: dS = P ∘ (dP − δ), δ = Σ P ∘ dP. In f32 (widen_all, narrow_all) the
  // operations of ds = r(p · (dp − δ)); in the f16 modes each rounded to fp16: r(p · r(dp − δ)), δ the fp16 dot.
  for (std::size_t i = 0; i < L; ++i) {
    const T* pr = pm + i * L;
    const T* dpr = dp + i * L;
    T* dsr = ds + i * L;
    const std::size_t valid = a.causal ? i + 1 : L;
    widen_all(p, pr, pf, L);
    widen_all(p, dpr, dpf, L);
    bool rounded_difference = false;
    float delta = 0;
    if constexpr (std::is_same_v<T, f16>) {
      if (h16) {
        delta = p.f16_dot(pr, dpr, L);
        rounded_difference = true;
      }
    }
    if (!rounded_difference && p.softmax_bwd_f32 != nullptr) {  // the path's vectors (f32-computing modes)
      p.softmax_bwd_f32(pf, dpf, L);
      narrow_all(p, pf, dsr, L);
      for (std::size_t j = valid; j < L; ++j) dsr[j] = T{};
      continue;
    }
    if (!rounded_difference) {
      for (std::size_t j = 0; j < L; ++j) delta += pf[j] * dpf[j];
    }
    for (std::size_t j = 0; j < L; ++j) dpf[j] = dpf[j] - delta;
    if (rounded_difference) {  // f16_model::sub: the difference rounded to fp16 before the product
      narrow_all(p, dpf, row, L);
      widen_all(p, row, dpf, L);
    }
    for (std::size_t j = 0; j < L; ++j) pf[j] = pf[j] * dpf[j];
    narrow_all(p, pf, dsr, L);
    for (std::size_t j = valid; j < L; ++j) dsr[j] = T{};
  }
  if (!prescale) scale_all(p, ds, ds, LL, c);
  T* dqs = grown(sc.dqs, prescale ? Ld : 0);
  T* dkt = grown(sc.dkt, Ld);
  void* dq_out = prescale ? static_cast<void*>(dqs) : a.dq;
  p.bwd(DenseBwdArgs{L, L, d, qa, kt, ds, dq_out, dkt, nullptr, a.threads});
  T* dq = static_cast<T*>(a.dq);
  T* dk = static_cast<T*>(a.dk);
  if (prescale) scale_all(p, dqs, dq, Ld, c);
  transpose(dkt, d, L, dk);
  if (h16) {
    canon_f16(a.dq, Ld);
    canon_f16(a.dk, Ld);
    canon_f16(a.dv, Ld);
  }
}

template <class Parts>
void attention_compose(const AttentionArgs& a, const Parts& p, bool prescale) {
  switch (paths::storage_of(p.mode)) {
    case DType::f32:
      attention_typed<float>(a, p, prescale);
      break;
    case DType::f16:
      attention_typed<f16>(a, p, prescale);
      break;
    case DType::bf16:
      attention_typed<bf16>(a, p, prescale);
      break;
  }
}

}  // namespace halfmap::detail
