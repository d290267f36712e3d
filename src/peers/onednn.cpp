// oneDNN peers of dense_fwd: one matmul primitive, Y = X·W (+ b), every tensor plain row-major (format tag ab, as
// halfmap stores them), on halfmap's operands in place (same bits: IEEE f32 and bf16).
//
//   onednn_f32_dense_fwd__peer   f32 X, W, b, Y (mode f32).
//   onednn_bf16_dense_fwd__peer  bf16 X, W, b, Y, f32 accumulation inside (mode bf16_f32acc, like halfmap's
//                                bf16_f32acc kernels). Its AVX512-BF16/AMX kernels flush subnormals whatever
//                                MXCSR says (vdpbf16ps reads subnormal inputs as zero; f32-to-bf16 conversion
//                                flushes subnormal results); MXCSR is left unchanged.
//
// Per call: the primitive is created (oneDNN's primitive cache returns the JIT kernel of a seen shape) and run on
// a stream of this call. Threads: Debian's libdnnl uses OpenMP; omp_set_num_threads(1) is called on the calling
// thread before each use, since oneDNN sizes its parallel regions by that thread's omp_get_max_threads() and a
// new thread starts from the default. Act relu, which the sweep does not use, is applied after, on the stored Y.
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

template <dt type>
void matmul(const DenseArgs& a) {
  omp_set_num_threads(1);
  const auto m = static_cast<dnnl::memory::dim>(a.m), n = static_cast<dnnl::memory::dim>(a.n),
             k = static_cast<dnnl::memory::dim>(a.k);
  const dnnl::memory::desc x_md({m, k}, type, tag::ab), w_md({k, n}, type, tag::ab), b_md({1, n}, type, tag::ab),
      y_md({m, n}, type, tag::ab);
  const dnnl::matmul::desc d = a.b != nullptr ? dnnl::matmul::desc(x_md, w_md, b_md, y_md)
                                              : dnnl::matmul::desc(x_md, w_md, y_md);
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(d, engine()));
  dnnl::stream stream(engine());
  // oneDNN only reads src, weights and bias: the const_casts never lead to a write.
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(x_md, engine(), const_cast<void*>(a.x))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(w_md, engine(), const_cast<void*>(a.w))},
      {DNNL_ARG_DST, dnnl::memory(y_md, engine(), a.y)}};
  if (a.b != nullptr) args.emplace(DNNL_ARG_BIAS, dnnl::memory(b_md, engine(), const_cast<void*>(a.b)));
  prim.execute(stream, args);
  stream.wait();
  if (a.act == Act::relu) {
    for (std::size_t i = 0; i < a.m * a.n; ++i) {
      if constexpr (type == dt::f32) {
        float& v = static_cast<float*>(a.y)[i];
        v = v < 0 ? 0.0f : v;
      } else {
        bf16& v = static_cast<bf16*>(a.y)[i];
        v = to_f32(v) < 0 ? bf16{} : v;
      }
    }
  }
}

}  // namespace

LibraryList onednn_list() {
  const dnnl_version_t* v = dnnl_version();
  return {"onednn",
          fmt::format("oneDNN {}.{}.{} (git {}); matmul primitive per call, plain row-major tensors; 1 thread "
                      "(omp_set_num_threads(1) on the calling thread)",
                      v->major, v->minor, v->patch, v->hash),
          {dense_peer("onednn_f32_dense_fwd__peer", Mode::f32, DType::f32, matmul<dt::f32>, 1e-5),
           dense_peer("onednn_bf16_dense_fwd__peer", Mode::bf16_f32acc, DType::bf16, matmul<dt::bf16>, 2e-2)}};
}

}  // namespace halfmap::peers
