// oneDNN's dense_fwd peers: matmul on the caller's arrays, prepared once (onednn_{f32,bf16,f16}_dense_fwd__peer;
// what each computes, its ISA and threads: src/peers/onednn.cpp's top).
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include <omp.h>

#include "peers/onednn.hpp"

namespace halfmap::peers::onednn {
namespace {

/// Y = X·W (+ b) on oneDNN's matmul, on the caller's arrays (see src/peers/onednn.cpp's top).
template <dt type>
class Matmul final : public Prepared {
 public:
  Matmul(const DenseArgs& a, unsigned threads) : a_(a), threads_(int(threads)), stream_(engine()) {
    omp_set_num_threads(threads_);
    const dim m = dim(a.m), n = dim(a.n), k = dim(a.k);
    const dnnl::memory::desc x_md({m, k}, type, tag::ab), w_md({k, n}, type, tag::ab), b_md({1, n}, type, tag::ab),
        y_md({m, n}, type, tag::ab);
    pd_ = primitive_desc<dnnl::matmul::primitive_desc>(
        a.b != nullptr ? dnnl::matmul::desc(x_md, w_md, b_md, y_md) : dnnl::matmul::desc(x_md, w_md, y_md), type,
        "matmul");
    prim_ = dnnl::matmul(pd_);
    args_ = {{DNNL_ARG_SRC, wrap(x_md, a.x)},
             {DNNL_ARG_WEIGHTS, wrap(w_md, a.w)},
             {DNNL_ARG_DST, dnnl::memory(y_md, engine(), a.y)}};
    if (a.b != nullptr) args_.emplace(DNNL_ARG_BIAS, wrap(b_md, a.b));
  }
  void run() override {
    omp_set_num_threads(threads_);
    prim_.execute(stream_, args_);
    stream_.wait();
    if (a_.act != Act::relu) return;
    for (std::size_t i = 0; i < a_.m * a_.n; ++i) {
      if constexpr (type == dt::f32) {
        float& v = static_cast<float*>(a_.y)[i];
        v = v < 0 ? 0.0f : v;
      } else if constexpr (type == dt::bf16) {
        bf16& v = static_cast<bf16*>(a_.y)[i];
        v = to_f32(v) < 0 ? bf16{} : v;
      } else {
        f16& v = static_cast<f16*>(a_.y)[i];
        v = to_f32(v) < 0 ? f16{} : v;
      }
    }
  }
  std::string detail() const override { return pd_.impl_info_str(); }

 private:
  DenseArgs a_;
  int threads_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  std::unordered_map<int, dnnl::memory> args_;
};

}  // namespace

template <dt type>
std::unique_ptr<Prepared> prepare_matmul(const DenseArgs& a, unsigned threads) {
  return std::make_unique<Matmul<type>>(a, threads);
}

template std::unique_ptr<Prepared> prepare_matmul<dt::f32>(const DenseArgs&, unsigned);
template std::unique_ptr<Prepared> prepare_matmul<dt::bf16>(const DenseArgs&, unsigned);
template std::unique_ptr<Prepared> prepare_matmul<dt::f16>(const DenseArgs&, unsigned);

}  // namespace halfmap::peers::onednn
