// oneDNN's layernorm peers: layer_normalization forward and backward on the caller's arrays, prepared once
// (onednn_{f32,bf16,f16}_layernorm__peer; what each computes: src/peers/onednn.cpp's top).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <omp.h>

#include "peers/onednn.hpp"

namespace halfmap::peers::onednn {
namespace {

/// layer_normalization over axis 1 of rows × cols (see src/peers/onednn.cpp's top): forward_training, with the f32
/// statistics reported and the backward where asked for, or forward_inference for y alone.
template <dt type>
class LayerNorm final : public Prepared {
 public:
  explicit LayerNorm(const NormArgs& a)
      : a_(a),
        training_(a.y == nullptr || a.mean != nullptr || a.var != nullptr || a.dy != nullptr),
        stream_(engine()),
        gamma_(widened(a.gamma, 1.0f)),
        beta_(widened(a.beta, 0.0f)) {
    omp_set_num_threads(1);
    md_ = dnnl::memory::desc({dim(a.rows), dim(a.cols)}, type, tag::ab);
    const dnnl::memory::desc stat_md({dim(a.rows)}, dt::f32, tag::a), ss_md({dim(a.cols)}, dt::f32, tag::a);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    using Fwd = dnnl::layer_normalization_forward;
    fwd_pd_ =
        training_
            ? primitive_desc<Fwd::primitive_desc>(
                  Fwd::desc(dnnl::prop_kind::forward_training, md_, stat_md, a.eps, flags), type, "layer normalisation")
            : primitive_desc<Fwd::primitive_desc>(Fwd::desc(dnnl::prop_kind::forward_inference, md_, a.eps, flags),
                                                  type, "layer normalisation");
    fwd_ = Fwd(fwd_pd_);
    if (a.y == nullptr) y_scratch_.resize(a.rows * a.cols);  // y when the caller asks for the backward only
    gamma_m_ = dnnl::memory(ss_md, engine(), gamma_.data());
    beta_m_ = dnnl::memory(ss_md, engine(), beta_.data());
    fwd_args_ = {{DNNL_ARG_SRC, wrap(md_, a.x)},
                 {DNNL_ARG_DST, dnnl::memory(md_, engine(), a.y != nullptr ? a.y : y_scratch_.data())},
                 {DNNL_ARG_SCALE, gamma_m_},
                 {DNNL_ARG_SHIFT, beta_m_}};
    if (training_) {
      mean_.resize(a.rows);
      var_.resize(a.rows);
      mean_m_ = dnnl::memory(stat_md, engine(), mean_.data());
      var_m_ = dnnl::memory(stat_md, engine(), var_.data());
      fwd_args_.emplace(DNNL_ARG_MEAN, mean_m_);
      fwd_args_.emplace(DNNL_ARG_VARIANCE, var_m_);
    }
    if (a.dy == nullptr) return;
    using Bwd = dnnl::layer_normalization_backward;
    bwd_ =
        Bwd(primitive_desc<Bwd::primitive_desc>(Bwd::desc(dnnl::prop_kind::backward, md_, md_, stat_md, a.eps, flags),
                                                type, "layer normalisation backward", fwd_pd_));
    dgamma_.resize(a.cols);
    dbeta_.resize(a.cols);
    bwd_args_ = {{DNNL_ARG_SRC, wrap(md_, a.x)},
                 {DNNL_ARG_MEAN, mean_m_},
                 {DNNL_ARG_VARIANCE, var_m_},
                 {DNNL_ARG_DIFF_DST, wrap(md_, a.dy)},
                 {DNNL_ARG_SCALE, gamma_m_},
                 {DNNL_ARG_SHIFT, beta_m_},
                 {DNNL_ARG_DIFF_SRC, dnnl::memory(md_, engine(), a.dx)},
                 {DNNL_ARG_DIFF_SCALE, dnnl::memory(ss_md, engine(), dgamma_.data())},
                 {DNNL_ARG_DIFF_SHIFT, dnnl::memory(ss_md, engine(), dbeta_.data())}};
  }
  void run() override {
    omp_set_num_threads(1);
    fwd_.execute(stream_, fwd_args_);
    stream_.wait();
    for (std::size_t i = 0; training_ && i < a_.rows; ++i) {
      if (a_.mean != nullptr) a_.mean[i] = mean_[i];
      if (a_.var != nullptr) a_.var[i] = var_[i];
    }
    if (a_.dy == nullptr) return;
    bwd_.execute(stream_, bwd_args_);
    stream_.wait();
    store(a_.dgamma, dgamma_);
    store(a_.dbeta, dbeta_);
  }

 private:
  /// γ or β widened to f32 (oneDNN takes them in f32 only), `fill` where the caller passes none.
  std::vector<float> widened(const void* p, float fill) const {
    std::vector<float> v(a_.cols, fill);
    for (std::size_t j = 0; p != nullptr && j < a_.cols; ++j) v[j] = widen(type, p, j);
    return v;
  }
  /// A gradient oneDNN computed in f32, rounded once to the storage type.
  void store(void* out, const std::vector<float>& v) const {
    for (std::size_t j = 0; out != nullptr && j < a_.cols; ++j) {
      if constexpr (type == dt::f32) {
        static_cast<float*>(out)[j] = v[j];
      } else if constexpr (type == dt::bf16) {
        static_cast<bf16*>(out)[j] = to_bf16(v[j]);
      } else {
        static_cast<f16*>(out)[j] = to_f16(v[j]);
      }
    }
  }

  NormArgs a_;
  bool training_;
  dnnl::stream stream_;
  std::vector<float> gamma_, beta_, mean_, var_, dgamma_, dbeta_;
  std::vector<std::uint32_t> y_scratch_;
  dnnl::memory::desc md_;
  dnnl::layer_normalization_forward::primitive_desc fwd_pd_;
  dnnl::layer_normalization_forward fwd_;
  dnnl::layer_normalization_backward bwd_;
  dnnl::memory gamma_m_, beta_m_, mean_m_, var_m_;
  std::unordered_map<int, dnnl::memory> fwd_args_, bwd_args_;
};

}  // namespace

template <dt type>
std::unique_ptr<Prepared> prepare_layernorm(const NormArgs& a) {
  return std::make_unique<LayerNorm<type>>(a);
}

template std::unique_ptr<Prepared> prepare_layernorm<dt::f32>(const NormArgs&);
template std::unique_ptr<Prepared> prepare_layernorm<dt::bf16>(const NormArgs&);
template std::unique_ptr<Prepared> prepare_layernorm<dt::f16>(const NormArgs&);

}  // namespace halfmap::peers::onednn
