// oneDNN peers, on halfmap's operands in place (same bits: IEEE f32, bf16, fp16), every tensor plain row-major
// (format tag ab, as halfmap stores them, so any packing oneDNN does is inside the timed execute, as halfmap's is).
// "sweep": a path of the sweep; "timed": halfmap_bench times it (<op>/<name>/<arg>: the primitive created once,
// untimed; execute() and stream.wait() per call).
// This file is the library: its peers, its ISA and threads; each primitive's calls are in a file beside it
// (src/peers/onednn.hpp, the glue they share, lists them).
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
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "peers/onednn.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace onednn {
namespace {

std::string_view runtime_name(unsigned r) {
  switch (r) {
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "other";
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
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2";
    case dnnl_cpu_isa_avx512_core:
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512";
    case dnnl_cpu_isa_avx512_core_bf16:
      return type == dt::bf16 ? "avx512bf16" : "avx512";
    case dnnl_cpu_isa_avx512_core_amx:
      return type == dt::f32 ? "avx512" : "amx";
    default:
      return dnnl_isa_name(isa);
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
}  // namespace onednn

Library onednn_library() {
  using namespace onednn;
  omp_set_num_threads(1);
  const dnnl_version_t* v = dnnl_version();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const bool cap = capped();
  const std::string isa_f32 = isa_for(isa, dt::f32), isa_bf16 = isa_for(isa, dt::bf16);
  const std::string isa_f16 = isa_for(isa, dt::f16);
  constexpr bool kTimedOnly = false;
  return {
      "onednn",
      fmt::format("oneDNN {}.{}.{} (git {}); matmul, softmax_v2, reduction, layer_normalization and eltwise "
                  "primitives per call (attention composed of them), plain row-major tensors; 1 thread "
                  "(omp_set_num_threads(1) on the calling thread)",
                  v->major, v->minor, v->patch, v->hash),
      {timed_peer<prepare_matmul<dt::f32>>("onednn_f32_dense_fwd__peer", Mode::f32, DType::f32, 1e-5,
                                           {.isa = isa_f32, .threaded = true}),
       timed_peer<prepare_matmul<dt::bf16>>("onednn_bf16_dense_fwd__peer", Mode::bf16_f32acc, DType::bf16, 2e-2,
                                            {.isa = isa_bf16, .threaded = true}),
       timed_peer<prepare_matmul<dt::f16>>("onednn_f16_dense_fwd__peer", Mode::f16_f32acc, DType::f16, 2e-2,
                                           {.isa = isa_f16, .threaded = true}, kTimedOnly),
       timed_peer<prepare_softmax<dt::f32>>("onednn_f32_softmax__peer", Mode::f32, DType::f32, 1e-5, {.isa = isa_f32}),
       timed_peer<prepare_softmax<dt::bf16>>("onednn_bf16_softmax__peer", Mode::bf16_f32acc, DType::bf16, 2e-2,
                                             {.isa = isa_bf16}),
       timed_peer<prepare_softmax<dt::f16>>("onednn_f16_softmax__peer", Mode::f16_f32acc, DType::f16, 2e-2,
                                            {.isa = isa_f16}, kTimedOnly),
       peer<Op::sum>("onednn_f32_sum__peer", Mode::f32, DType::f32, reduce<dt::f32, Reduce::sum>, 1e-5),
       peer<Op::sum>("onednn_bf16_sum__peer", Mode::bf16_f32acc, DType::bf16, reduce<dt::bf16, Reduce::sum>, 2e-2),
       peer<Op::sumsq>("onednn_f32_sumsq__peer", Mode::f32, DType::f32, reduce<dt::f32, Reduce::sumsq>, 1e-5),
       peer<Op::sumsq>("onednn_bf16_sumsq__peer", Mode::bf16_f32acc, DType::bf16, reduce<dt::bf16, Reduce::sumsq>,
                       2e-2),
       peer<Op::maxabs>("onednn_f32_maxabs__peer", Mode::f32, DType::f32, reduce<dt::f32, Reduce::maxabs>, 0),
       peer<Op::maxabs>("onednn_bf16_maxabs__peer", Mode::bf16_f32acc, DType::bf16, reduce<dt::bf16, Reduce::maxabs>,
                        0),
       timed_peer<prepare_layernorm<dt::f32>>("onednn_f32_layernorm__peer", Mode::f32, DType::f32, 1e-4,
                                              {.isa = isa_f32}),
       timed_peer<prepare_layernorm<dt::bf16>>("onednn_bf16_layernorm__peer", Mode::bf16_f32acc, DType::bf16, 5e-2,
                                               {.isa = isa_bf16}),
       timed_peer<prepare_layernorm<dt::f16>>("onednn_f16_layernorm__peer", Mode::f16_f32acc, DType::f16, 5e-2,
                                              {.isa = isa_f16}, kTimedOnly),
       peer<Op::attention_prescale>("onednn_f32_attention_prescale__peer", Mode::f32, DType::f32,
                                    attention<dt::f32, true>, 1e-4),
       peer<Op::attention_postscale>("onednn_f32_attention_postscale__peer", Mode::f32, DType::f32,
                                     attention<dt::f32, false>, 1e-4),
       peer<Op::attention_prescale>("onednn_bf16_attention_prescale__peer", Mode::bf16_f32acc, DType::bf16,
                                    attention<dt::bf16, true>, 5e-2),
       peer<Op::attention_postscale>("onednn_bf16_attention_postscale__peer", Mode::bf16_f32acc, DType::bf16,
                                     attention<dt::bf16, false>, 5e-2)},
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
