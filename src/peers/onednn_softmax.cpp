// oneDNN's softmax peers: softmax_v2 on the caller's arrays, prepared once (onednn_{f32,bf16,f16}_softmax__peer;
// what each computes: src/peers/onednn.cpp's top). Attention's softmax is onednn_attention.cpp's.
#include <memory>

#include <omp.h>

#include "peers/onednn.hpp"

namespace halfmap::peers::onednn {
namespace {

/// softmax_v2 forward inference (softmax_accurate) over axis 1 of rows × cols, on the caller's arrays.
template <dt type>
class Softmax final : public Prepared {
 public:
  explicit Softmax(const SoftmaxArgs& a) : stream_(engine()) {
    omp_set_num_threads(1);
    const dnnl::memory::desc md({dim(a.rows), dim(a.cols)}, type, tag::ab);
    prim_ = dnnl::softmax_v2_forward(primitive_desc<dnnl::softmax_v2_forward::primitive_desc>(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md, md,
                                       1),
        type, "softmax"));
    x_ = wrap(md, a.x);
    y_ = dnnl::memory(md, engine(), a.y);
  }
  void run() override {
    omp_set_num_threads(1);
    prim_.execute(stream_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}});
    stream_.wait();
  }

 private:
  dnnl::stream stream_;
  dnnl::softmax_v2_forward prim_;
  dnnl::memory x_, y_;
};

}  // namespace

template <dt type>
std::unique_ptr<Prepared> prepare_softmax(const SoftmaxArgs& a) {
  return std::make_unique<Softmax<type>>(a);
}

template std::unique_ptr<Prepared> prepare_softmax<dt::f32>(const SoftmaxArgs&);
template std::unique_ptr<Prepared> prepare_softmax<dt::bf16>(const SoftmaxArgs&);
template std::unique_ptr<Prepared> prepare_softmax<dt::f16>(const SoftmaxArgs&);

}  // namespace halfmap::peers::onednn
