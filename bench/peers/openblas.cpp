// OpenBLAS peers of dense_fwd: what a user who calls BLAS for Y = X·W + b gets.
//
//   openblas_f32__peer   timed per call: b broadcast into every row of Y (memcpy, M·N floats), then
//                        cblas_sgemm(RowMajor, NoTrans, NoTrans, alpha = 1, beta = 1) on halfmap's f32 X and W in
//                        place. The bias costs one pass over Y, as in halfmap's kernels.
//   openblas_bf16__peer  cblas_sbgemm (bf16 X and W, f32 Y), timed like the f32 one, when this OpenBLAS exports it
//                        (CMake's check_symbol_exists: HALFMAP_PEER_OPENBLAS_SBGEMM). Debian 12's 0.3.21 declares
//                        it in cblas.h but is built without BUILD_BFLOAT16, so the symbol is absent and the
//                        benchmark is registered with SkipWithError, not omitted.
//
// ISA: this DYNAMIC_ARCH build picks one core's kernels when it is loaded, from the CPU or from OPENBLAS_CORETYPE.
// tools/main.sh runs halfmap_bench a second time with OPENBLAS_CORETYPE=Haswell (the AVX2 + FMA kernels), which
// renames the peers openblas_avx2_f32__peer and so on (peers.hpp, peer_name); each peer's isa label is the core's
// (isa_for: Haswell and Zen avx2; SkylakeX, Cooperlake and SapphireRapids avx512, with avx512bf16 for sbgemm on the
// last two; arm64 cores neon; else the core's name in lower case).
//
// Threads: openblas_set_num_threads(1) when the library is set up (before any benchmark), and before every
// call of a peer; a peer of dense_fwd_threads/<lib>_<dtype>__peer/<threads> sets openblas_set_num_threads(threads)
// before each of its calls instead. The pthread build starts its pool when the library is loaded
// (OPENBLAS_NUM_THREADS, else one thread per core), so a dense_fwd_threads/ peer can use at most that many;
// those threads stay idle while the count is 1.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include "halfmap/half.hpp"
#include "peers.hpp"

namespace halfmap::bench::peers {
namespace {

class SgemmRun final : public DenseRun {
 public:
  explicit SgemmRun(const DenseProblem& p)
      : s_(p.s), x_(static_cast<const float*>(p.x)), w_(static_cast<const float*>(p.w)),
        b_(static_cast<const float*>(p.b)), y_(p.s * p.s), threads_(int(p.threads)) {}
  void run() override {
    openblas_set_num_threads(threads_);
    for (std::size_t i = 0; i < s_; ++i) std::memcpy(&y_[i * s_], b_, s_ * sizeof(float));
    const auto n = static_cast<blasint>(s_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x_, n, w_, n, 1.0f, y_.data(), n);
  }
  void output_f32(float* y) const override { std::memcpy(y, y_.data(), y_.size() * sizeof(float)); }

 private:
  std::size_t s_;
  const float* x_;
  const float* w_;
  const float* b_;
  std::vector<float> y_;
  int threads_;
};

std::unique_ptr<DenseRun> make_f32(const DenseProblem& p) { return std::make_unique<SgemmRun>(p); }

#if HALFMAP_PEER_OPENBLAS_SBGEMM
class SbgemmRun final : public DenseRun {
 public:
  explicit SbgemmRun(const DenseProblem& p)
      : s_(p.s), x_(static_cast<const bfloat16*>(p.x)), w_(static_cast<const bfloat16*>(p.w)), b_(p.s),
        y_(p.s * p.s), threads_(int(p.threads)) {
    // OpenBLAS's bfloat16 is the bf16 bit pattern, like halfmap's: X and W are used in place; b is widened once.
    const auto* b = static_cast<const halfmap::bf16*>(p.b);
    for (std::size_t j = 0; j < s_; ++j) b_[j] = to_f32(b[j]);
  }
  void run() override {
    openblas_set_num_threads(threads_);
    for (std::size_t i = 0; i < s_; ++i) std::memcpy(&y_[i * s_], b_.data(), s_ * sizeof(float));
    const auto n = static_cast<blasint>(s_);
    cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x_, n, w_, n, 1.0f, y_.data(), n);
  }
  void output_f32(float* y) const override { std::memcpy(y, y_.data(), y_.size() * sizeof(float)); }

 private:
  std::size_t s_;
  const bfloat16* x_;
  const bfloat16* w_;
  std::vector<float> b_;
  std::vector<float> y_;
  int threads_;
};

std::unique_ptr<DenseRun> make_bf16(const DenseProblem& p) { return std::make_unique<SbgemmRun>(p); }
#else
std::unique_ptr<DenseRun> make_bf16(const DenseProblem&) { throw Unsupported("cblas_sbgemm not in this OpenBLAS"); }
#endif

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
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
  const std::string core = openblas_get_corename();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const bool cap = coretype != nullptr && *coretype != '\0';
  return {
      cap ? fmt::format("openblas_{}", isa_for(core, false)) : "openblas",
      fmt::format("OpenBLAS {} ({}; core {}); 1 thread: openblas_set_num_threads(1) at startup and per call "
                  "(dense_fwd_threads/: the benchmark's count), openblas_get_num_threads() = {} "
                  "(OPENBLAS_NUM_THREADS={}); cblas_sbgemm {}; timed: b copied into each row of Y, then ?gemm with "
                  "beta = 1{}",
                  HALFMAP_PEER_OPENBLAS_VERSION, config, openblas_get_corename(), openblas_get_num_threads(),
                  std::getenv("OPENBLAS_NUM_THREADS") != nullptr ? std::getenv("OPENBLAS_NUM_THREADS") : "unset",
                  HALFMAP_PEER_OPENBLAS_SBGEMM ? "exported" : "absent",
                  cap ? fmt::format("; core chosen by the environment: OPENBLAS_CORETYPE={}", coretype) : ""),
      {{peer_name("openblas", cap, isa_for(core, false), "f32"), DType::f32, 1e-3, make_f32, isa_for(core, false),
        true},
       {peer_name("openblas", cap, isa_for(core, true), "bf16"), DType::bf16, 1e-1, make_bf16, isa_for(core, true),
        true}},
      {},
  };
}

}  // namespace halfmap::bench::peers
