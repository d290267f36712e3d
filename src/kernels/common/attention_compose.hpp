// The composition of AttentionArgs (registry.hpp), written once over "parts" that run the dense forward and
// backward and the stable softmax: a path's kernels (kernels/common/attention.cpp) or the f16 models
// (src/models/attention.cpp). Included only by those two files, which are compiled without ISA flags: the
// elementwise steps are scalar code whose IEEE roundings are the same on every machine.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"
#include "kernels/ref/ops.hpp"

namespace halfmap::detail {

// storage <-> f32 with halfmap's scalar conversions, as the ref kernels (this file is compiled without ISA flags)
using paths::ref::narrow;
using paths::ref::widen;

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

/// The composition's intermediates, kept per thread between calls and grown, never shrunk (as scratch.hpp's): at
/// len 512 they are 4.5 MB, and allocating them per call (value-initialised, then page-faulted in, often as huge
/// pages) took 78 % of the f32 avx512 attention's time, the GEMMs 5 %. Every element a call reads it wrote first.
template <class T>
struct AttentionScratch {
  std::vector<T> qs, kt, s, pm, dp, ds, dqs, dkt;
};

template <class T>
AttentionScratch<T>& attention_scratch() {
  thread_local AttentionScratch<T> scratch;
  return scratch;
}

/// The first n elements of v, grown to hold them.
template <class T>
T* first(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

template <class T, class Parts>
void attention_typed(const AttentionArgs& a, const Parts& p, bool prescale) {
  const std::size_t L = a.len, d = a.dim, LL = L * L, Ld = L * d;
  if (L == 0) return;
  const bool h16 = p.mode == Mode::f16 || p.mode == Mode::f16_model;
  const float c32 = 1.0f / std::sqrt(float(d));
  const float c = h16 ? to_f32(to_f16(c32)) : c32;
  // v·c rounded once to the storage type: in the f16 modes the correctly rounded fp16 product of v and r16(c)
  const auto scale = [c](T v) { return narrow<T>(widen(v) * c); };

  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  AttentionScratch<T>& sc = attention_scratch<T>();
  T* qs = first(sc.qs, prescale ? Ld : 0);
  T* kt = first(sc.kt, Ld);
  T* s = first(sc.s, LL);
  T* pm = first(sc.pm, LL);
  const T* qa = q;
  if (prescale) {
    for (std::size_t i = 0; i < Ld; ++i) qs[i] = scale(q[i]);
    qa = qs;
  }
  for (std::size_t i = 0; i < L; ++i) {
    for (std::size_t j = 0; j < d; ++j) kt[j * L + i] = k[i * d + j];
  }
  p.fwd(DenseArgs{L, L, d, qa, kt, nullptr, s, Act::identity, a.threads});
  if (!prescale) {
    for (std::size_t i = 0; i < LL; ++i) s[i] = scale(s[i]);
  }
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

  T* dp = first(sc.dp, LL);
  T* ds = first(sc.ds, LL);
  p.bwd(DenseBwdArgs{L, d, L, pm, a.v, a.dout, dp, a.dv, nullptr, a.threads});
  for (std::size_t i = 0; i < L; ++i) {
    const T* pr = pm + i * L;
    const T* dpr = dp + i * L;
    T* dsr = ds + i * L;
    const std::size_t valid = a.causal ? i + 1 : L;
    if constexpr (std::is_same_v<T, f16>) {
      if (h16) {
        const f16 delta = f16_model_reduce(Op::dot, pr, dpr, L, p.lanes, p.fma);
        for (std::size_t j = 0; j < L; ++j) dsr[j] = f16_model::mul(pr[j], f16_model::sub(dpr[j], delta));
        for (std::size_t j = valid; j < L; ++j) dsr[j] = f16{};
        continue;
      }
    }
    float delta = 0;
    for (std::size_t j = 0; j < L; ++j) delta += widen(pr[j]) * widen(dpr[j]);
    for (std::size_t j = 0; j < L; ++j) dsr[j] = narrow<T>(widen(pr[j]) * (widen(dpr[j]) - delta));
    for (std::size_t j = valid; j < L; ++j) dsr[j] = T{};
  }
  if (!prescale) {
    for (std::size_t i = 0; i < LL; ++i) ds[i] = scale(ds[i]);
  }
  T* dqs = first(sc.dqs, prescale ? Ld : 0);
  T* dkt = first(sc.dkt, Ld);
  void* dq_out = prescale ? static_cast<void*>(dqs) : a.dq;
  p.bwd(DenseBwdArgs{L, L, d, qa, kt, ds, dq_out, dkt, nullptr, a.threads});
  T* dq = static_cast<T*>(a.dq);
  T* dk = static_cast<T*>(a.dk);
  if (prescale) {
    for (std::size_t i = 0; i < Ld; ++i) dq[i] = scale(dqs[i]);
  }
  for (std::size_t i = 0; i < L; ++i) {
    for (std::size_t j = 0; j < d; ++j) dk[i * d + j] = dkt[j * L + i];
  }
  if (h16) {
    canon_f16(a.dq, Ld);
    canon_f16(a.dk, Ld);
    canon_f16(a.dv, Ld);
  }
}

template <class Parts>
void attention_compose(const AttentionArgs& a, const Parts& p, bool prescale) {
  switch (paths::storage_of(p.mode)) {
    case DType::f32: attention_typed<float>(a, p, prescale); break;
    case DType::f16: attention_typed<f16>(a, p, prescale); break;
    case DType::bf16: attention_typed<bf16>(a, p, prescale); break;
  }
}

}  // namespace halfmap::detail
