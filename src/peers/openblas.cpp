// OpenBLAS peers: what a user who calls BLAS for Y = X·W + b or a dot product gets. "sweep": a path of the sweep;
// "timed": halfmap_bench times it (dense_fwd/<name>/<size>, dense_fwd_threads/<name>/<threads>).
//
//   openblas_f32_dense_fwd__peer   cblas_sgemm (row-major, no transposes) on halfmap's f32 X and W in place, in
//                                  two calls of one class (Sgemm) that differ in where b goes:
//                                  sweep: beta = 0, then + b in f32, the recipe's R(acc + b_n) whose rounding the
//                                    sweep maps;
//                                  timed: b copied into every row of Y, then beta = 1, the fastest bias a BLAS user
//                                    has (one pass over Y, as in halfmap's kernels).
//   openblas_f32_dot__peer         sweep. cblas_sdot, halfmap's dot.
//   openblas_bf16_dense_fwd__peer  timed. cblas_sbgemm (bf16 X and W, f32 Y, timed like the f32 one, then Y rounded
//                                  once to bf16 into the caller's array), when this OpenBLAS exports it (CMake's
//                                  check_symbol_exists: HALFMAP_PEER_OPENBLAS_SBGEMM). Debian 12's 0.3.21 declares
//                                  it in cblas.h but is built without BUILD_BFLOAT16, so the symbol is absent and
//                                  the benchmark skips with the reason, not omitted.
// Not mapped: snrm2 is sqrt(Σ x²) computed with scaling against overflow, a different op from sumsq (snrm2² is not
// Σ x² rounded as halfmap's sumsq is); sasum is Σ |x|, which no halfmap op computes.
//
// ISA: this DYNAMIC_ARCH build picks one core's kernels when it is loaded, from the CPU or from OPENBLAS_CORETYPE.
// tools/main.sh runs halfmap_bench again with OPENBLAS_CORETYPE=Haswell (the AVX2 + FMA kernels), which renames the
// timed peers openblas_avx2_f32_dense_fwd__peer and so on (Library::cap, capped_name); each timed peer's isa label
// is the core's (isa_for: Haswell and Zen avx2; SkylakeX, Cooperlake and SapphireRapids avx512, with avx512bf16 for
// sbgemm on the last two; arm64 cores neon; else the core's name in lower case).
//
// Threads: openblas_set_num_threads(1) once, when the library is set up (openblas_library()); with one thread its
// pthread build runs each call on the caller's thread, so the sweep's calls from several threads at once are safe,
// and they never set the count again (openblas_set_num_threads is not safe to call from those threads at once).
// halfmap_bench's calls, on its one thread, set openblas_set_num_threads(threads) before every call: 1, or the
// count of dense_fwd_threads/<name>/<threads>. The pthread build starts its pool when the library is loaded
// (OPENBLAS_NUM_THREADS, else one thread per core), so a dense_fwd_threads/ peer can use at most that many; those
// threads stay idle while the count is 1.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

/// Y = X·W + b on cblas_sgemm (see the top of this file). kTimed: halfmap_bench's call (b in Y, beta 1, the
/// thread count set per call); else the sweep's (beta 0, then + b, the thread count left alone).
template <bool kTimed>
class Sgemm final : public Prepared {
 public:
  Sgemm(const DenseArgs& a, unsigned threads) : a_(a), threads_(int(threads)) {}
  void run() override {
    auto* y = static_cast<float*>(a_.y);
    const auto* b = static_cast<const float*>(a_.b);
    float beta = 0.0f;
    if constexpr (kTimed) {
      openblas_set_num_threads(threads_);
      for (std::size_t i = 0; b != nullptr && i < a_.m; ++i) std::memcpy(&y[i * a_.n], b, a_.n * sizeof(float));
      beta = b != nullptr ? 1.0f : 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(a_.m), int(a_.n), int(a_.k), 1.0f,
                static_cast<const float*>(a_.x), int(a_.k), static_cast<const float*>(a_.w), int(a_.n), beta, y,
                int(a_.n));
    if (!kTimed || a_.act == Act::relu) {
      for (std::size_t i = 0; i < a_.m; ++i) {
        for (std::size_t j = 0; j < a_.n; ++j) {
          float& v = y[i * a_.n + j];
          if (!kTimed && b != nullptr) v += b[j];
          if (a_.act == Act::relu) v = v < 0 ? 0.0f : v;
        }
      }
    }
  }

 private:
  DenseArgs a_;
  int threads_;
};

template <bool kTimed>
std::unique_ptr<Prepared> prepare_sgemm(const DenseArgs& a, unsigned threads) {
  return std::make_unique<Sgemm<kTimed>>(a, threads);
}

#if HALFMAP_PEER_OPENBLAS_SBGEMM
/// Y = X·W + b on cblas_sbgemm into an f32 Y, rounded once to bf16 (see the top of this file).
class Sbgemm final : public Prepared {
 public:
  Sbgemm(const DenseArgs& a, unsigned threads) : a_(a), threads_(int(threads)), b_(a.n, 0.0f), y_(a.m * a.n) {
    // OpenBLAS's bfloat16 is the bf16 bit pattern, like halfmap's: X and W are used in place; b is widened once.
    for (std::size_t j = 0; a.b != nullptr && j < a.n; ++j) b_[j] = to_f32(static_cast<const bf16*>(a.b)[j]);
  }
  void run() override {
    openblas_set_num_threads(threads_);
    for (std::size_t i = 0; i < a_.m; ++i) std::memcpy(&y_[i * a_.n], b_.data(), a_.n * sizeof(float));
    cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(a_.m), int(a_.n), int(a_.k), 1.0f,
                 static_cast<const bfloat16*>(a_.x), int(a_.k), static_cast<const bfloat16*>(a_.w), int(a_.n), 1.0f,
                 y_.data(), int(a_.n));
    auto* y = static_cast<bf16*>(a_.y);
    for (std::size_t i = 0; i < y_.size(); ++i) y[i] = to_bf16(a_.act == Act::relu && y_[i] < 0 ? 0.0f : y_[i]);
  }

 private:
  DenseArgs a_;
  int threads_;
  std::vector<float> b_, y_;
};

std::unique_ptr<Prepared> prepare_sbgemm(const DenseArgs& a, unsigned threads) {
  return std::make_unique<Sbgemm>(a, threads);
}
#else
std::unique_ptr<Prepared> prepare_sbgemm(const DenseArgs&, unsigned) {
  throw Unsupported("cblas_sbgemm not in this OpenBLAS");
}
#endif

float sdot(const void* x, const void* y, std::size_t n) {
  return cblas_sdot(int(n), static_cast<const float*>(x), 1, static_cast<const float*>(y), 1);
}

std::string isa_for(std::string core, bool bf16) {
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
#if defined(__aarch64__)
  return "neon";
#else
  if (core == "haswell" || core == "zen") return "avx2";
  if (core == "cooperlake" || core == "sapphirerapids") return bf16 ? "avx512bf16" : "avx512";
  if (core == "skylakex") return "avx512";
  return core;
#endif
}

}  // namespace

Library openblas_library() {
  openblas_set_num_threads(1);
  const std::string core = openblas_get_corename();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const bool cap = coretype != nullptr && *coretype != '\0';
  const std::string config = openblas_get_config();
  std::string trimmed = config;  // halfmap_bench's context: without the trailing blanks some builds return
  while (!trimmed.empty() && trimmed.back() == ' ') trimmed.pop_back();
  constexpr bool kTimedOnly = false;
  // One name, two entries: the sweep's call and the timed one (see the top of this file).
  Peer sweep = peer<Op::dense_fwd>("openblas_f32_dense_fwd__peer", Mode::f32, DType::f32,
                                   prepared_call<prepare_sgemm<false>>, 1e-5);
  Peer timed = timed_peer<prepare_sgemm<true>>("openblas_f32_dense_fwd__peer", Mode::f32, DType::f32, 1e-5,
                                               {.isa = isa_for(core, false), .threaded = true}, kTimedOnly);
  return {
      "openblas",
      fmt::format("OpenBLAS {} ({}; core {}); 1 thread: openblas_set_num_threads(1)", HALFMAP_PEER_OPENBLAS_VERSION,
                  config, core),
      {sweep, peer<Op::dot>("openblas_f32_dot__peer", Mode::f32, DType::f32, sdot, 1e-5), timed,
       timed_peer<prepare_sbgemm>("openblas_bf16_dense_fwd__peer", Mode::bf16_f32acc, DType::bf16, 2e-2,
                                  {.isa = isa_for(core, true), .threaded = true}, kTimedOnly)},
      {},
      fmt::format("OpenBLAS {} ({}; core {}); 1 thread: openblas_set_num_threads(1) at startup and per call "
                  "(dense_fwd_threads/: the benchmark's count), openblas_get_num_threads() = {} "
                  "(OPENBLAS_NUM_THREADS={}); cblas_sbgemm {}; timed: b copied into each row of Y, then ?gemm with "
                  "beta = 1{}",
                  HALFMAP_PEER_OPENBLAS_VERSION, trimmed, core, openblas_get_num_threads(),
                  std::getenv("OPENBLAS_NUM_THREADS") != nullptr ? std::getenv("OPENBLAS_NUM_THREADS") : "unset",
                  HALFMAP_PEER_OPENBLAS_SBGEMM ? "exported" : "absent",
                  cap ? fmt::format("; core chosen by the environment: OPENBLAS_CORETYPE={}", coretype) : ""),
      cap ? isa_for(core, false) : std::string(),  // openblas_avx2
  };
}

}  // namespace halfmap::peers
