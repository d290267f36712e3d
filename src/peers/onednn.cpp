// oneDNN peers, on halfmap's operands in place (same bits: IEEE f32, bf16, fp16), every tensor plain row-major
// (format tag ab, as halfmap stores them, so any packing oneDNN does is inside the timed execute, as halfmap's is).
// "sweep": a path of the sweep; "timed": halfmap_bench times it (<op>/<name>/<arg>: the primitive created once,
// untimed; execute() and stream.wait() per call).
//
//   onednn_f32_dense_fwd__peer   sweep, timed. matmul Y = X·W (+ b), f32 X, W, b, Y (mode f32).
//   onednn_bf16_dense_fwd__peer  sweep, timed. The same on bf16, f32 accumulation inside (mode bf16_f32acc, like
//                                halfmap's bf16_f32acc kernels). Its AVX512-BF16/AMX kernels flush subnormals
//                                whatever MXCSR says (vdpbf16ps reads subnormal inputs as zero; f32-to-bf16
//                                conversion flushes subnormal results), as halfmap_bench's probe shows; MXCSR is left
//                                unchanged.
//   onednn_f16_dense_fwd__peer   timed. The same on fp16. oneDNN 2.6 implements f16 matmul only with AVX512-FP16
//                                (or AMX-FP16): elsewhere creating the primitive descriptor fails with
//                                "unimplemented" and the benchmark skips with that reason. Not mapped: no machine
//                                the sweep ran on had it.
//   onednn_{f32,bf16}_softmax__peer  sweep, timed. softmax_v2 forward (inference), algorithm softmax_accurate (the
//                                max subtracted first, halfmap's stable softmax) over axis 1 of rows × cols, with
//                                oneDNN's own exp; f32 arithmetic inside, each output rounded to the dtype.
//   onednn_f16_softmax__peer     timed. The same on fp16, which oneDNN 2.6 lacks on CPUs (the benchmark skips).
//   onednn_{f32,bf16}_sum__peer     sweep. reduction_sum of the 1×n vector into 1×1 (f32 accumulation inside).
//   onednn_{f32,bf16}_sumsq__peer   sweep. reduction_norm_lp_power_p_sum with p = 2, eps = 0: Σ|x|², halfmap's
//                                sumsq (the L2 norm itself, reduction_norm_lp_sum, is its square root: no halfmap
//                                op).
//   onednn_{f32,bf16}_maxabs__peer  sweep. eltwise_abs into a scratch vector, then reduction_max: max|x|
//                                (reduction_max alone is max x, which no halfmap op computes).
//   onednn_{f32,bf16}_layernorm__peer  sweep, timed. layer_normalization over axis 1 of rows × cols with
//                                use_scale | use_shift (γ, β in f32, widened exactly from the dtype; oneDNN takes
//                                them in f32 only). forward_training where the caller asks for the statistics or a
//                                backward (the sweep: its f32 mean and variance written to NormArgs::mean and var),
//                                forward_inference where it asks for y alone (halfmap_bench: the statistics
//                                computed in f32 and not kept, what halfmap's layernorm benchmark times, γ and β
//                                the first two rows of its input buffer, ε = 1e-5); the backward (prop_kind
//                                backward, hinted by that forward) for dx, dγ, dβ, the last two computed in f32 by
//                                oneDNN and rounded once to the storage type here. oneDNN 2.6 has no RMS variant of
//                                its layer normalisation: rmsnorm is listed as refused.
//   onednn_f16_layernorm__peer   timed. The same on fp16, which oneDNN 2.6 lacks on CPUs (the benchmark skips).
//   onednn_{f32,bf16}_attention_{prescale,postscale}__peer  sweep. One head composed of oneDNN primitives as a
//                                framework composes it, every intermediate a tensor of the storage type:
//                                eltwise_linear for the 1/√d (on Q before the product, or on the scores after it),
//                                matmul for Q·Kᵀ (Kᵀ a transposed view, format ba, of K in place), the causal mask
//                                written as -inf above the diagonal (masked_fill's exact step), softmax_v2
//                                forward_training (softmax_accurate) and matmul for P·V; backward: matmul for
//                                dV = Pᵀ·dO and dP = dO·Vᵀ, softmax_v2 backward for dS, eltwise_linear for the 1/√d,
//                                matmul for dQ and dK. oneDNN has no attention primitive in 2.6.
//
// The sweep's calls create each primitive per call (oneDNN's primitive cache returns the JIT kernel of a seen shape)
// and run it on a stream of that call. Act relu, which the sweep does not use, is applied after, on the stored Y.
//
// ISA: oneDNN picks its kernels at run time, up to the CPU's best ISA or the cap that ONEDNN_MAX_CPU_ISA (or
// DNNL_MAX_CPU_ISA) sets for the whole process before first use. tools/main.sh runs halfmap_bench again with
// ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE_BF16), which renames the timed peers onednn_avx2_f32_dense_fwd__peer and
// so on (Library::cap, capped_name), so that halfmap's avx2 path meets oneDNN's avx2 code. The isa each timed peer is
// labelled with is what dnnl_get_effective_cpu_isa() allows for its dtype (isa_for): avx2 for either avx2 level,
// avx512 for f32 on any AVX-512 level, avx512bf16 for bf16 at avx512_core_bf16, amx for bf16 and f16 at
// avx512_core_amx (tiles, not a halfmap ISA).
//
// Threads: Debian's libdnnl is built with the OpenMP runtime (DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP, libgomp), and
// oneDNN sizes its parallel regions by the calling thread's omp_get_max_threads() (a new thread starts from the
// default). So every call sets omp_set_num_threads(1) on the calling thread before its primitive is created and
// before each execute; a dense call of dense_fwd_threads/<name>/<threads> sets `threads` instead (oneDNN splits the
// work when it creates the primitive).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dim = dnnl::memory::dim;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// A memory object over halfmap's buffer; oneDNN only reads a source, so the const_cast never leads to a write.
dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
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
    throw Unsupported(fmt::format("unsupported: oneDNN {}.{} has no {} {} on this CPU", v->major, v->minor,
                                  dtype_word(type), what));
  }
}

/// Element i of an array of `type`, widened exactly.
float widen(dt type, const void* p, std::size_t i) {
  switch (type) {
    case dt::bf16: return to_f32(static_cast<const bf16*>(p)[i]);
    case dt::f16: return to_f32(static_cast<const f16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

/// Y = X·W (+ b) on oneDNN's matmul, on the caller's arrays (see the top of this file).
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

template <dt type>
std::unique_ptr<Prepared> prepare_matmul(const DenseArgs& a, unsigned threads) {
  return std::make_unique<Matmul<type>>(a, threads);
}

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

template <dt type>
std::unique_ptr<Prepared> prepare_softmax(const SoftmaxArgs& a) {
  return std::make_unique<Softmax<type>>(a);
}

/// layer_normalization over axis 1 of rows × cols (see the top of this file): forward_training, with the f32
/// statistics reported and the backward where asked for, or forward_inference for y alone.
template <dt type>
class LayerNorm final : public Prepared {
 public:
  explicit LayerNorm(const NormArgs& a)
      : a_(a), training_(a.y == nullptr || a.mean != nullptr || a.var != nullptr || a.dy != nullptr),
        stream_(engine()), gamma_(widened(a.gamma, 1.0f)), beta_(widened(a.beta, 0.0f)) {
    omp_set_num_threads(1);
    md_ = dnnl::memory::desc({dim(a.rows), dim(a.cols)}, type, tag::ab);
    const dnnl::memory::desc stat_md({dim(a.rows)}, dt::f32, tag::a), ss_md({dim(a.cols)}, dt::f32, tag::a);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    using Fwd = dnnl::layer_normalization_forward;
    fwd_pd_ = training_ ? primitive_desc<Fwd::primitive_desc>(
                              Fwd::desc(dnnl::prop_kind::forward_training, md_, stat_md, a.eps, flags), type,
                              "layer normalisation")
                        : primitive_desc<Fwd::primitive_desc>(
                              Fwd::desc(dnnl::prop_kind::forward_inference, md_, a.eps, flags), type,
                              "layer normalisation");
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
    bwd_ = Bwd(primitive_desc<Bwd::primitive_desc>(
        Bwd::desc(dnnl::prop_kind::backward, md_, md_, stat_md, a.eps, flags), type, "layer normalisation backward",
        fwd_pd_));
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

template <dt type>
std::unique_ptr<Prepared> prepare_layernorm(const NormArgs& a) {
  return std::make_unique<LayerNorm<type>>(a);
}

enum class Reduce { sum, sumsq, maxabs };

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
  const dnnl::reduction prim(dnnl::reduction::primitive_desc(dnnl::reduction::desc(alg, src, dst, 2.0f, 0.0f),
                                                             engine()));
  std::uint32_t out = 0;
  prim.execute(stream, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, dnnl::memory(dst, engine(), &out)}});
  stream.wait();
  if constexpr (type == dt::f32) return std::bit_cast<float>(out);
  return to_f32(bf16{std::uint16_t(out)});
}

/// C = A·B on oneDNN's matmul, each operand a plain 2-D tensor (a transposed operand: its desc with format ba).
void run_matmul(dnnl::stream& stream, const dnnl::memory::desc& a_md, const void* a, const dnnl::memory::desc& b_md,
                const void* b, const dnnl::memory::desc& c_md, void* c) {
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(a_md, a)}, {DNNL_ARG_WEIGHTS, wrap(b_md, b)},
                        {DNNL_ARG_DST, dnnl::memory(c_md, engine(), c)}});
}

/// dst = alpha·src elementwise (eltwise_linear, beta 0), rounded to dst's type.
void run_scale(dnnl::stream& stream, const dnnl::memory::desc& md, const void* src, void* dst, float alpha) {
  const dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, md, alpha,
                                  0.0f),
      engine()));
  prim.execute(stream, {{DNNL_ARG_SRC, wrap(md, src)}, {DNNL_ARG_DST, dnnl::memory(md, engine(), dst)}});
}

template <dt type, bool kPrescale>
void attention(const AttentionArgs& a) {
  omp_set_num_threads(1);
  if (a.len == 0) return;
  using dim = dnnl::memory::dim;
  using Elem = std::conditional_t<type == dt::f32, float, std::uint16_t>;
  const dim L = dim(a.len), D = dim(a.dim);
  const std::size_t ld = a.len * a.dim, ll = a.len * a.len;
  const dnnl::memory::desc ld_md({L, D}, type, tag::ab), ll_md({L, L}, type, tag::ab),
      ldt_md({D, L}, type, tag::ba),  // the transpose of an L × D tensor, in place
      llt_md({L, L}, type, tag::ba);  // the transpose of an L × L tensor, in place
  const float c = 1.0f / std::sqrt(static_cast<float>(a.dim));
  dnnl::stream stream(engine());
  std::vector<Elem> qs(kPrescale ? ld : 0), s(ll), p(ll);
  // Forward: prescale S = (c·Q)·Kᵀ; postscale S = c·(Q·Kᵀ), T = Q·Kᵀ stored first.
  if constexpr (kPrescale) {
    run_scale(stream, ld_md, a.q, qs.data(), c);
    run_matmul(stream, ld_md, qs.data(), ldt_md, a.k, ll_md, s.data());
  } else {
    std::vector<Elem> t(ll);
    run_matmul(stream, ld_md, a.q, ldt_md, a.k, ll_md, t.data());
    run_scale(stream, ll_md, t.data(), s.data(), c);
  }
  stream.wait();
  if (a.scores != nullptr) std::memcpy(a.scores, s.data(), ll * sizeof(Elem));
  if (a.causal) {
    Elem minus_inf;
    if constexpr (type == dt::f32) {
      minus_inf = -INFINITY;
    } else {
      minus_inf = 0xFF80;  // bf16 -inf
    }
    for (std::size_t i = 0; i < a.len; ++i) {
      std::fill(s.begin() + std::ptrdiff_t(i * a.len + i + 1), s.begin() + std::ptrdiff_t((i + 1) * a.len), minus_inf);
    }
  }
  const dnnl::softmax_v2_forward::primitive_desc sm_pd(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, ll_md,
                                     ll_md, 1),
      engine());
  dnnl::softmax_v2_forward(sm_pd).execute(
      stream, {{DNNL_ARG_SRC, wrap(ll_md, s.data())}, {DNNL_ARG_DST, dnnl::memory(ll_md, engine(), p.data())}});
  std::vector<Elem> o_scratch(a.o == nullptr ? ld : 0);
  run_matmul(stream, ll_md, p.data(), ld_md, a.v, ld_md, a.o != nullptr ? a.o : o_scratch.data());
  stream.wait();
  if (a.dout == nullptr) return;
  // Backward: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = softmax's backward, then the scale and dQ, dK.
  std::vector<Elem> dp(ll), ds(ll), tmp(std::max(ll, ld));
  run_matmul(stream, llt_md, p.data(), ld_md, a.dout, ld_md, a.dv);
  run_matmul(stream, ld_md, a.dout, ldt_md, a.v, ll_md, dp.data());
  stream.wait();
  dnnl::softmax_v2_backward(dnnl::softmax_v2_backward::primitive_desc(
                                dnnl::softmax_v2_backward::desc(dnnl::algorithm::softmax_accurate, ll_md, ll_md, ll_md, 1),
                                engine(), sm_pd))
      .execute(stream, {{DNNL_ARG_DST, wrap(ll_md, p.data())}, {DNNL_ARG_DIFF_DST, wrap(ll_md, dp.data())},
                        {DNNL_ARG_DIFF_SRC, dnnl::memory(ll_md, engine(), ds.data())}});
  stream.wait();
  if constexpr (kPrescale) {  // dQ̃ = dS·K, dK = dSᵀ·Q̃, dQ = c·dQ̃
    run_matmul(stream, ll_md, ds.data(), ld_md, a.k, ld_md, tmp.data());
    run_matmul(stream, llt_md, ds.data(), ld_md, qs.data(), ld_md, a.dk);
    stream.wait();
    run_scale(stream, ld_md, tmp.data(), a.dq, c);
  } else {  // dT = c·dS, dQ = dT·K, dK = dTᵀ·Q
    run_scale(stream, ll_md, ds.data(), tmp.data(), c);
    stream.wait();
    run_matmul(stream, ll_md, tmp.data(), ld_md, a.k, ld_md, a.dq);
    run_matmul(stream, llt_md, tmp.data(), ld_md, a.q, ld_md, a.dk);
  }
  stream.wait();
}

std::string_view runtime_name(unsigned r) {
  switch (r) {
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "other";
  }
}

std::string dnnl_isa_name(dnnl_cpu_isa_t isa) {
  static const std::unordered_map<int, std::string_view> names = {
      {dnnl_cpu_isa_sse41, "sse41"},
      {dnnl_cpu_isa_avx, "avx"},
      {dnnl_cpu_isa_avx2, "avx2"},
      {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
      {dnnl_cpu_isa_avx512_core, "avx512_core"},
      {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
      {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
      {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
  };
  const auto it = names.find(static_cast<int>(isa));
  return it != names.end() ? std::string(it->second) : fmt::format("0x{:x}", static_cast<int>(isa));
}

/// The halfmap ISA name of the code oneDNN may run for `type` at effective ISA `isa` (see the top of this file).
std::string isa_for(dnnl_cpu_isa_t isa, dt type) {
  switch (isa) {
    case dnnl_cpu_isa_avx2:
    case dnnl_cpu_isa_avx2_vnni: return "avx2";
    case dnnl_cpu_isa_avx512_core:
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512";
    case dnnl_cpu_isa_avx512_core_bf16: return type == dt::bf16 ? "avx512bf16" : "avx512";
    case dnnl_cpu_isa_avx512_core_amx: return type == dt::f32 ? "avx512" : "amx";
    default: return dnnl_isa_name(isa);
  }
}

bool capped() {
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

}  // namespace

Library onednn_library() {
  omp_set_num_threads(1);
  const dnnl_version_t* v = dnnl_version();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const bool cap = capped();
  const std::string isa_f32 = isa_for(isa, dt::f32), isa_bf16 = isa_for(isa, dt::bf16);
  const std::string isa_f16 = isa_for(isa, dt::f16);
  constexpr bool kThreaded = true, kTimedOnly = false;
  return {
      "onednn",
      fmt::format("oneDNN {}.{}.{} (git {}); matmul, softmax_v2, reduction, layer_normalization and eltwise "
                  "primitives per call (attention composed of them), plain row-major tensors; 1 thread "
                  "(omp_set_num_threads(1) on the calling thread)",
                  v->major, v->minor, v->patch, v->hash),
      {timed_dense_peer<prepare_matmul<dt::f32>>("onednn_f32_dense_fwd__peer", Mode::f32, DType::f32, 1e-5, isa_f32,
                                                 kThreaded),
       timed_dense_peer<prepare_matmul<dt::bf16>>("onednn_bf16_dense_fwd__peer", Mode::bf16_f32acc, DType::bf16, 2e-2,
                                                  isa_bf16, kThreaded),
       timed_dense_peer<prepare_matmul<dt::f16>>("onednn_f16_dense_fwd__peer", Mode::f16_f32acc, DType::f16, 2e-2,
                                                 isa_f16, kThreaded, kTimedOnly),
       timed_softmax_peer<prepare_softmax<dt::f32>>("onednn_f32_softmax__peer", Mode::f32, DType::f32, 1e-5, isa_f32),
       timed_softmax_peer<prepare_softmax<dt::bf16>>("onednn_bf16_softmax__peer", Mode::bf16_f32acc, DType::bf16, 2e-2,
                                                     isa_bf16),
       timed_softmax_peer<prepare_softmax<dt::f16>>("onednn_f16_softmax__peer", Mode::f16_f32acc, DType::f16, 2e-2,
                                                    isa_f16, kTimedOnly),
       reduce_peer("onednn_f32_sum__peer", Op::sum, Mode::f32, DType::f32, reduce<dt::f32, Reduce::sum>, 1e-5),
       reduce_peer("onednn_bf16_sum__peer", Op::sum, Mode::bf16_f32acc, DType::bf16, reduce<dt::bf16, Reduce::sum>,
                   2e-2),
       reduce_peer("onednn_f32_sumsq__peer", Op::sumsq, Mode::f32, DType::f32, reduce<dt::f32, Reduce::sumsq>, 1e-5),
       reduce_peer("onednn_bf16_sumsq__peer", Op::sumsq, Mode::bf16_f32acc, DType::bf16,
                   reduce<dt::bf16, Reduce::sumsq>, 2e-2),
       reduce_peer("onednn_f32_maxabs__peer", Op::maxabs, Mode::f32, DType::f32, reduce<dt::f32, Reduce::maxabs>, 0),
       reduce_peer("onednn_bf16_maxabs__peer", Op::maxabs, Mode::bf16_f32acc, DType::bf16,
                   reduce<dt::bf16, Reduce::maxabs>, 0),
       timed_norm_peer<prepare_layernorm<dt::f32>>("onednn_f32_layernorm__peer", Mode::f32, DType::f32, 1e-4, isa_f32),
       timed_norm_peer<prepare_layernorm<dt::bf16>>("onednn_bf16_layernorm__peer", Mode::bf16_f32acc, DType::bf16,
                                                    5e-2, isa_bf16),
       timed_norm_peer<prepare_layernorm<dt::f16>>("onednn_f16_layernorm__peer", Mode::f16_f32acc, DType::f16, 5e-2,
                                                   isa_f16, kTimedOnly),
       attention_peer("onednn_f32_attention_prescale__peer", Op::attention_prescale, Mode::f32, DType::f32,
                      attention<dt::f32, true>, 1e-4),
       attention_peer("onednn_f32_attention_postscale__peer", Op::attention_postscale, Mode::f32, DType::f32,
                      attention<dt::f32, false>, 1e-4),
       attention_peer("onednn_bf16_attention_prescale__peer", Op::attention_prescale, Mode::bf16_f32acc, DType::bf16,
                      attention<dt::bf16, true>, 5e-2),
       attention_peer("onednn_bf16_attention_postscale__peer", Op::attention_postscale, Mode::bf16_f32acc,
                      DType::bf16, attention<dt::bf16, false>, 5e-2)},
      {{"onednn_rmsnorm__peer", "oneDNN 2.6's layer normalisation has no RMS variant (no rmsnorm peer)."}},
      fmt::format("oneDNN {}.{}.{} (git {}), CPU runtime {}; 1 thread: omp_set_num_threads(1) before every call "
                  "(omp_get_max_threads() = {}), dense_fwd_threads/: omp_set_num_threads(threads); max ISA {}; "
                  "matmul with bias, plain row-major tensors, bf16 peer writes bf16; softmax_v2 (softmax_accurate) "
                  "over rows; layer_normalization forward inference over rows, eps 1e-5, f32 scale and shift{}",
                  v->major, v->minor, v->patch, v->hash, runtime_name(v->cpu_runtime), omp_get_max_threads(),
                  dnnl_isa_name(isa), cap ? " (capped by the environment: ONEDNN_MAX_CPU_ISA)" : ""),
      cap ? dnnl_isa_name(isa) : std::string(),  // onednn_avx2, onednn_avx512_core_bf16
  };
}

}  // namespace halfmap::peers
