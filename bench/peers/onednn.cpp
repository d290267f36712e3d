// oneDNN peers of dense_fwd, softmax and layernorm. dense_fwd: one matmul primitive with bias, Y = X·W + b, every tensor plain row-major
// (format tag ab, as halfmap stores them, so any packing oneDNN does is inside the timed execute, as halfmap's
// is), on halfmap's operands used in place (same bits: IEEE f32, bf16, fp16). Timed per call: execute() and
// stream.wait(); the primitive is created once, untimed.
//
//   onednn_f32__peer   f32 X, W, b, Y.
//   onednn_bf16__peer  bf16 X, W, b and bf16 Y (f32 accumulation inside), like halfmap's bf16_f32acc kernels.
//                      Its AVX512-BF16 kernels flush subnormals whatever MXCSR says (vdpbf16ps treats subnormal
//                      inputs as zero, and f32-to-bf16 conversion flushes subnormal results), as the probe in
//                      bench_peers.cpp shows; MXCSR is left unchanged.
//   onednn_f16__peer   fp16 X, W, b, Y. oneDNN 2.6 implements f16 matmul only with AVX512-FP16 (or AMX-FP16):
//                      without it, creating the primitive descriptor fails with "unimplemented" and the benchmark
//                      skips with that reason.
//
// Softmax peers (softmax/<name>/<level>, named like the matmul peers): softmax_v2 forward inference with
// softmax_accurate (the max subtracted) over each row, src and dst of the dtype:
//
//   onednn_f32__peer, onednn_bf16__peer, onednn_f16__peer  f32 / bf16 / fp16 in and out (f32 arithmetic inside,
//                      each output rounded to the dtype), like halfmap's f32, bf16_f32acc and f16_f32acc softmax.
//
// Layer-normalisation peers (layernorm/<name>/<level>): layer_normalization forward inference over each row,
// ε = 1e-5, use_scale | use_shift with γ and β in f32 (oneDNN takes them in f32 only: widened once, untimed, from
// the first and second rows of the input buffer, as halfmap's benchmark reads them), src and dst of the dtype,
// statistics computed in f32 and not kept: what halfmap's layernorm benchmark times. oneDNN 2.6 has no f16 layer
// normalisation on CPUs: that peer skips with the library's "unimplemented".
//
// ISA: oneDNN picks its kernels at run time, up to the CPU's best ISA or the cap that ONEDNN_MAX_CPU_ISA (or
// DNNL_MAX_CPU_ISA) sets for the whole process before first use. tools/main.sh runs halfmap_bench a second time
// with ONEDNN_MAX_CPU_ISA=AVX2 (and a third with AVX512_CORE_BF16), which renames the peers onednn_avx2_f32__peer
// and so on (peers.hpp, peer_name), so that halfmap's avx2 path meets oneDNN's avx2 code. The isa each peer is
// labelled with is what dnnl_get_effective_cpu_isa() allows for its dtype (isa_for): avx2 for either avx2 level,
// avx512 for f32 on any AVX-512 level, avx512bf16 for bf16 at avx512_core_bf16, amx for bf16 and f16 at
// avx512_core_amx (tiles, not a halfmap ISA).
//
// Threads: Debian's libdnnl is built with the OpenMP runtime (DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP, libgomp).
// omp_set_num_threads(1) is called when the library is set up, before oneDNN's first use, on the thread that
// runs every benchmark: oneDNN sizes its parallel regions by that thread's omp_get_max_threads(). A peer of
// dense_fwd_threads/<lib>_<dtype>__peer/<threads> sets omp_set_num_threads(threads) before its primitive is
// created (oneDNN splits the work when it creates the primitive) and before each call, every other one 1.
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halfmap/half.hpp"
#include "peers.hpp"

namespace halfmap::bench::peers {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

class MatmulRun final : public DenseRun {
 public:
  MatmulRun(const DenseProblem& p, dt type, std::string_view unsupported)
      : s_(p.s), threads_(int(p.threads)), type_(type), stream_(engine()) {
    omp_set_num_threads(threads_);
    const auto s = static_cast<dnnl::memory::dim>(p.s);
    const dnnl::memory::desc x_md({s, s}, type, tag::ab), w_md({s, s}, type, tag::ab),
        b_md({1, s}, type, tag::ab), y_md({s, s}, type, tag::ab);
    try {
      pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(x_md, w_md, b_md, y_md), engine());
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) throw Unsupported(std::string(unsupported));
      throw Unsupported(fmt::format("oneDNN: {}", e.what()));
    }
    prim_ = dnnl::matmul(pd_);
    // oneDNN only reads src, weights and bias: the const_casts never lead to a write.
    x_ = dnnl::memory(x_md, engine(), const_cast<void*>(p.x));
    w_ = dnnl::memory(w_md, engine(), const_cast<void*>(p.w));
    b_ = dnnl::memory(b_md, engine(), const_cast<void*>(p.b));
    y_ = dnnl::memory(y_md, engine());  // owned by oneDNN
  }
  void run() override {
    omp_set_num_threads(threads_);
    prim_.execute(stream_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_BIAS, b_}, {DNNL_ARG_DST, y_}});
    stream_.wait();
  }
  void output_f32(float* y) const override {
    const void* h = y_.get_data_handle();
    for (std::size_t i = 0; i < s_ * s_; ++i) {
      switch (type_) {
        case dt::bf16: y[i] = to_f32(static_cast<const bf16*>(h)[i]); break;
        case dt::f16: y[i] = to_f32(static_cast<const f16*>(h)[i]); break;
        default: y[i] = static_cast<const float*>(h)[i]; break;
      }
    }
  }
  std::string detail() const override { return pd_.impl_info_str(); }

 private:
  std::size_t s_;
  int threads_;
  dt type_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  dnnl::memory x_, w_, b_, y_;
};

std::unique_ptr<DenseRun> make_f32(const DenseProblem& p) {
  return std::make_unique<MatmulRun>(p, dt::f32, "unsupported: oneDNN 2.6 has no f32 matmul on this CPU");
}
std::unique_ptr<DenseRun> make_bf16(const DenseProblem& p) {
  return std::make_unique<MatmulRun>(p, dt::bf16, "unsupported: oneDNN 2.6 has no bf16 matmul on this CPU");
}
std::unique_ptr<DenseRun> make_f16(const DenseProblem& p) {
  return std::make_unique<MatmulRun>(p, dt::f16, "unsupported: oneDNN 2.6 has no f16 matmul on this CPU");
}

/// softmax_v2 forward inference (softmax_accurate: max subtracted) over axis 1 of a rows × cols plain tensor,
/// src and dst of one dtype, on halfmap's buffers in place. Timed per call: execute() and stream.wait().
class SoftmaxPrimRun final : public RowRun {
 public:
  SoftmaxPrimRun(std::size_t rows, std::size_t cols, const void* x, void* y, dt type, std::string_view unsupported)
      : stream_(engine()) {
    const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(rows), static_cast<dnnl::memory::dim>(cols)}, type,
                                tag::ab);
    try {
      pd_ = dnnl::softmax_v2_forward::primitive_desc(
          dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md,
                                         md, 1),
          engine());
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) throw Unsupported(std::string(unsupported));
      throw Unsupported(fmt::format("oneDNN: {}", e.what()));
    }
    prim_ = dnnl::softmax_v2_forward(pd_);
    x_ = dnnl::memory(md, engine(), const_cast<void*>(x));  // only read: the const_cast never leads to a write
    y_ = dnnl::memory(md, engine(), y);
  }
  void run() override {
    prim_.execute(stream_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}});
    stream_.wait();
  }

 private:
  dnnl::stream stream_;
  dnnl::softmax_v2_forward::primitive_desc pd_;
  dnnl::softmax_v2_forward prim_;
  dnnl::memory x_, y_;
};

template <dt kType>
std::unique_ptr<RowRun> make_softmax(std::size_t rows, std::size_t cols, const void* x, void* y) {
  constexpr std::string_view kWhat = kType == dt::f32    ? "unsupported: oneDNN 2.6 has no f32 softmax on this CPU"
                                     : kType == dt::bf16 ? "unsupported: oneDNN 2.6 has no bf16 softmax on this CPU"
                                                         : "unsupported: oneDNN 2.6 has no f16 softmax on this CPU";
  return std::make_unique<SoftmaxPrimRun>(rows, cols, x, y, kType, kWhat);
}

/// layer_normalization forward inference over axis 1 of a rows × cols plain tensor (see the top of this file).
class LayerNormRun final : public RowRun {
 public:
  LayerNormRun(std::size_t rows, std::size_t cols, const void* x, void* y, dt type, std::string_view unsupported)
      : stream_(engine()), gamma_(cols), beta_(cols) {
    using dim = dnnl::memory::dim;
    const dnnl::memory::desc md({dim(rows), dim(cols)}, type, tag::ab), ss_md({dim(cols)}, dt::f32, tag::a);
    for (std::size_t j = 0; j < cols; ++j) {
      gamma_[j] = widen(x, type, j);
      beta_[j] = widen(x, type, cols + j);
    }
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    try {
      pd_ = dnnl::layer_normalization_forward::primitive_desc(
          dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, kLayerNormEpsTorch, flags),
          engine());
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) throw Unsupported(std::string(unsupported));
      throw Unsupported(fmt::format("oneDNN: {}", e.what()));
    }
    prim_ = dnnl::layer_normalization_forward(pd_);
    x_ = dnnl::memory(md, engine(), const_cast<void*>(x));  // only read
    y_ = dnnl::memory(md, engine(), y);
    gamma_m_ = dnnl::memory(ss_md, engine(), gamma_.data());
    beta_m_ = dnnl::memory(ss_md, engine(), beta_.data());
  }
  void run() override {
    prim_.execute(stream_,
                  {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}, {DNNL_ARG_SCALE, gamma_m_}, {DNNL_ARG_SHIFT, beta_m_}});
    stream_.wait();
  }

 private:
  static float widen(const void* p, dt type, std::size_t i) {
    switch (type) {
      case dt::bf16: return to_f32(static_cast<const bf16*>(p)[i]);
      case dt::f16: return to_f32(static_cast<const f16*>(p)[i]);
      default: return static_cast<const float*>(p)[i];
    }
  }
  dnnl::stream stream_;
  std::vector<float> gamma_, beta_;
  dnnl::layer_normalization_forward::primitive_desc pd_;
  dnnl::layer_normalization_forward prim_;
  dnnl::memory x_, y_, gamma_m_, beta_m_;
};

template <dt kType>
std::unique_ptr<RowRun> make_layernorm(std::size_t rows, std::size_t cols, const void* x, void* y) {
  constexpr std::string_view kWhat =
      kType == dt::f32    ? "unsupported: oneDNN 2.6 has no f32 layer normalisation on this CPU"
      : kType == dt::bf16 ? "unsupported: oneDNN 2.6 has no bf16 layer normalisation on this CPU"
                          : "unsupported: oneDNN 2.6 has no f16 layer normalisation on this CPU";
  return std::make_unique<LayerNormRun>(rows, cols, x, y, kType, kWhat);
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
  const auto peer = [&](dt type, std::string_view dtype, double tolerance, auto make) {
    return DensePeer{peer_name("onednn", cap, isa_for(isa, type), dtype), type == dt::f32 ? DType::f32
                     : type == dt::bf16 ? DType::bf16 : DType::f16, tolerance, make, isa_for(isa, type), true};
  };
  return {
      cap ? fmt::format("onednn_{}", dnnl_isa_name(isa)) : "onednn",  // onednn_avx2, onednn_avx512_core_bf16
      fmt::format("oneDNN {}.{}.{} (git {}), CPU runtime {}; 1 thread: omp_set_num_threads(1) before first use "
                  "(omp_get_max_threads() = {}), dense_fwd_threads/: omp_set_num_threads(threads); max ISA {}; "
                  "matmul with bias, plain row-major tensors, "
                  "bf16 peer writes bf16; softmax_v2 (softmax_accurate) over rows; layer_normalization forward "
                  "inference over rows, eps 1e-5, f32 scale and shift{}",
                  v->major, v->minor, v->patch, v->hash, runtime_name(v->cpu_runtime), omp_get_max_threads(),
                  dnnl_isa_name(isa), cap ? " (capped by the environment: ONEDNN_MAX_CPU_ISA)" : ""),
      {peer(dt::f32, "f32", 1e-3, make_f32), peer(dt::bf16, "bf16", 1e-1, make_bf16),
       peer(dt::f16, "f16", 1e-1, make_f16)},
      {{peer_name("onednn", cap, isa_for(isa, dt::f32), "f32"), Op::softmax, DType::f32, make_softmax<dt::f32>},
       {peer_name("onednn", cap, isa_for(isa, dt::bf16), "bf16"), Op::softmax, DType::bf16, make_softmax<dt::bf16>},
       {peer_name("onednn", cap, isa_for(isa, dt::f16), "f16"), Op::softmax, DType::f16, make_softmax<dt::f16>},
       {peer_name("onednn", cap, isa_for(isa, dt::f32), "f32"), Op::layernorm, DType::f32, make_layernorm<dt::f32>},
       {peer_name("onednn", cap, isa_for(isa, dt::bf16), "bf16"), Op::layernorm, DType::bf16,
        make_layernorm<dt::bf16>},
       {peer_name("onednn", cap, isa_for(isa, dt::f16), "f16"), Op::layernorm, DType::f16,
        make_layernorm<dt::f16>}},
  };
}

}  // namespace halfmap::bench::peers
