// The f16 model of attention (AttentionArgs in registry.hpp): the composition every attention kernel runs
// (kernels/common/attention_compose.hpp), over the f16 models of the dense layer and the stable softmax.
#include "halfmap/registry.hpp"
#include "kernels/common/attention_compose.hpp"

namespace halfmap {
namespace {

struct ModelParts {
  Mode mode = Mode::f16_model;
  unsigned lanes;
  FmaKind fma;
  // The composition's scalar conversions (half.hpp's): the model names no path's instructions.
  void (*widen16)(const std::uint16_t*, float*, std::size_t) = nullptr;
  void (*narrow16)(const float*, std::uint16_t*, std::size_t) = nullptr;
  ReduceFn f16_dot = nullptr;  // δ by f16_model_reduce
  void (*softmax_bwd_f32)(float*, const float*, std::size_t) = nullptr;  // f16 arithmetic only: never called
  void fwd(const DenseArgs& a) const { f16_model_dense_fwd(a, fma); }
  void bwd(const DenseBwdArgs& a) const { f16_model_dense_bwd(a, fma); }
  void softmax(const SoftmaxArgs& a) const { f16_model_softmax(a, true, lanes); }
};

}  // namespace

void f16_model_attention(const AttentionArgs& args, bool prescale, unsigned lanes, FmaKind fma) {
  detail::attention_compose(args, ModelParts{Mode::f16_model, lanes, fma}, prescale);
}

}  // namespace halfmap
