// The common glue of the oneDNN adapter (src/peers/onednn.cpp: the library, what each peer computes, its ISA and
// threads), shared by its primitives, each in a file beside it:
//   onednn_matmul.cpp     dense_fwd: matmul (timed);
//   onednn_softmax.cpp    softmax: softmax_v2 (timed);
//   onednn_norm.cpp       layernorm: layer_normalization, forward and backward (timed);
//   onednn_reduce.cpp     sum, sumsq, maxabs: reduction (and eltwise_abs);
//   onednn_attention.cpp  attention_{prescale,postscale}: matmul, eltwise_linear and softmax_v2 composed.
// Each file instantiates its templates for the dtypes onednn_library() lists.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers::onednn {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dim = dnnl::memory::dim;

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// A memory object over halfmap's buffer; oneDNN only reads a source, so the const_cast never leads to a write.
inline dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, engine(), const_cast<void*>(p));
}

constexpr std::string_view dtype_word(dt type) { return type == dt::f32 ? "f32" : type == dt::bf16 ? "bf16" : "f16"; }

/// The primitive descriptor of `d` (a hint: the forward's, for a backward), or Unsupported: "unsupported: oneDNN 2.6
/// has no bf16 matmul on this CPU" where oneDNN has no implementation, else oneDNN's own message.
template <class PrimitiveDesc, class Desc, class... Hint>
PrimitiveDesc primitive_desc(const Desc& d, dt type, std::string_view what, const Hint&... hint) {
  try {
    return PrimitiveDesc(d, engine(), hint...);
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) throw Unsupported(fmt::format("oneDNN: {}", e.what()));
    const dnnl_version_t* v = dnnl_version();
    throw Unsupported(
        fmt::format("unsupported: oneDNN {}.{} has no {} {} on this CPU", v->major, v->minor, dtype_word(type), what));
  }
}

/// Element i of an array of `type`, widened exactly.
inline float widen(dt type, const void* p, std::size_t i) {
  switch (type) {
    case dt::bf16:
      return to_f32(static_cast<const bf16*>(p)[i]);
    case dt::f16:
      return to_f32(static_cast<const f16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// The peers' functions, each defined (and instantiated for f32, bf16 and, where timed, f16) in its primitive's file.
template <dt type>
std::unique_ptr<Prepared> prepare_matmul(const DenseArgs& a, unsigned threads);  // onednn_matmul.cpp
template <dt type>
std::unique_ptr<Prepared> prepare_softmax(const SoftmaxArgs& a);  // onednn_softmax.cpp
template <dt type>
std::unique_ptr<Prepared> prepare_layernorm(const NormArgs& a);  // onednn_norm.cpp

enum class Reduce { sum, sumsq, maxabs };
template <dt type, Reduce which>
float reduce(const void* x, const void*, std::size_t n);  // onednn_reduce.cpp (f32, bf16)

template <dt type, bool kPrescale>
void attention(const AttentionArgs& a);  // onednn_attention.cpp (f32, bf16)

}  // namespace halfmap::peers::onednn
