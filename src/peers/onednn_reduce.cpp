// oneDNN's reduction peers: sum, sumsq and maxabs, each primitive created per call (onednn_{f32,bf16}_{sum,sumsq,
// maxabs}__peer; what each computes: src/peers/onednn.cpp's top).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "peers/onednn.hpp"

namespace halfmap::peers::onednn {

template <dt type, Reduce which>
float reduce(const void* x, const void*, std::size_t n) {
  omp_set_num_threads(1);
  const dnnl::memory::desc src({1, dnnl::memory::dim(n)}, type, tag::ab), dst({1, 1}, type, tag::ab);
  dnnl::stream stream(engine());
  dnnl::memory in = wrap(src, x);
  std::vector<std::uint16_t> scratch;  // |x|, for maxabs: 2 or 4 bytes per element
  if constexpr (which == Reduce::maxabs) {
    scratch.resize(n * (type == dt::f32 ? 2 : 1));
    const dnnl::memory abs(src, engine(), scratch.data());
    const dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_abs, src), engine()));
    prim.execute(stream, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, abs}});
    in = abs;
  }
  const dnnl::algorithm alg = which == Reduce::sum     ? dnnl::algorithm::reduction_sum
                              : which == Reduce::sumsq ? dnnl::algorithm::reduction_norm_lp_power_p_sum
                                                       : dnnl::algorithm::reduction_max;
  const dnnl::reduction prim(
      dnnl::reduction::primitive_desc(dnnl::reduction::desc(alg, src, dst, 2.0f, 0.0f), engine()));
  std::uint32_t out = 0;
  prim.execute(stream, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, dnnl::memory(dst, engine(), &out)}});
  stream.wait();
  if constexpr (type == dt::f32) return std::bit_cast<float>(out);
  return to_f32(bf16{std::uint16_t(out)});
}

template float reduce<dt::f32, Reduce::sum>(const void*, const void*, std::size_t);
template float reduce<dt::f32, Reduce::sumsq>(const void*, const void*, std::size_t);
template float reduce<dt::f32, Reduce::maxabs>(const void*, const void*, std::size_t);
template float reduce<dt::bf16, Reduce::sum>(const void*, const void*, std::size_t);
template float reduce<dt::bf16, Reduce::sumsq>(const void*, const void*, std::size_t);
template float reduce<dt::bf16, Reduce::maxabs>(const void*, const void*, std::size_t);

}  // namespace halfmap::peers::onednn
