// dense_fwd/<kernel>/<size> and dense_bwd/<kernel>/<size>: every dense kernel of the registry on square layers,
// M = N = K = <size>, single-threaded (DenseArgs::threads = 1, the default).
//
//   dense_fwd  Y = X·W + b, identity activation, with bias, at 64, 128, 256, 512, 1024;
//   dense_bwd  dX = dY·Wᵀ, dW = Xᵀ·dY and db = Σ_rows dY, all three, at 256, 512, 1024.
//
// dense_fwd_threads/<kernel>/<threads> and dense_bwd_threads/<kernel>/<threads>: the same calls at 1024 (kThreadsSize)
// with DenseArgs::threads = <threads>, for 1, 2, 4, ... up to bench_max_threads() (--halfmap_threads), every
// kernel but isa ref's: the scaling over the cores of the machine. Timed by wall clock (UseRealTime: the rate is
// the call's, whatever thread did the work), with the process's CPU time as cpu_time (MeasureProcessCPUTime), so
// that cpu_time / real_time says how many cores the call kept busy (waiting members spin briefly, so it counts
// them as busy).
//
// Scalar reference kernels (isa ref) are registered only at 64 and 128, forward and backward alike: the f16
// model rounds every operation in software and runs at about 0.1 GFLOP/s, so one forward call at 1024 (2 GFLOP)
// would take some 20 s. Their backward pass is timed at those two sizes, outside the list above, so that every
// kernel of the registry has a benchmark.
//
// Counters (tools/bench_report.py reads them):
//   flops_per_second  floating-point operations per second, counting the GEMMs only: 2·M·N·K per forward call,
//                     4·M·N·K per backward call (two GEMMs); the bias add, the activation and db are not
//                     counted (M·N operations each, under 0.1 % at 1024);
//   size              M = N = K (not a rate);
//   roof_fraction     flops_per_second / the FMA roof of the kernel's ISA and arithmetic measured at startup
//                     (bench_roof.cpp: f32 FMA of the ISA for f32, f16_f32acc and the F16C-based f16 kernels,
//                     vdpbf16ps for bf16_f32acc, the fp16 FMA for f16 on avx512fp16 and neonfp16); none for ref;
//   f16c_roof_fraction  the per-operation f16 kernels of avx2 and avx512 only: flops_per_second / the F16C
//                     round-trip roof of the ISA (an FMA rounded to fp16 and back after every step, as they do).
// Label: the kernel's op, mode, isa, storage and roof=fma/<isa>, the roof roof_fraction divides by, or roof=none
// for ref (label_kernel, compute_roof: bench_util.hpp).
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench_util.hpp"
#include "halfmap/parallel.hpp"

namespace halfmap::bench {
namespace {

constexpr std::size_t kBwdSizes[] = {256, 512, 1024};
/// The only sizes at which isa ref kernels are registered (see the top of this file).
constexpr std::size_t kRefSizes[] = {64, 128};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

/// The outputs of a size-s layer in storage type t: Y or dX = [0, s²), dW = [s², 2s²), db = [2s², 2s² + s).
/// Allocated (64-byte aligned, zeroed so that every page is touched) once per (storage type, size) and kept.
struct Outputs {
  void* y_or_dx;
  void* dw;
  void* db;
};

Outputs outputs(DType t, std::size_t s) {
  static std::map<std::pair<DType, std::size_t>, std::unique_ptr<void, FreeDeleter>> cache;
  const std::size_t e = dtype_size(t);
  const std::size_t bytes = (2 * s * s + s) * e;
  auto& slot = cache[{t, s}];
  if (!slot) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    slot.reset(p);
  }
  auto* base = static_cast<unsigned char*>(slot.get());
  return {base, base + s * s * e, base + 2 * s * s * e};
}

void set_counters(benchmark::State& state, const Kernel& k, std::size_t s, double flops_per_call) {
  state.counters["flops_per_second"] =
      benchmark::Counter(flops_per_call, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["size"] = benchmark::Counter(static_cast<double>(s));
  add_compute_roof_fraction(state, k, flops_per_call);
  add_f16c_roof_fraction(state, k, flops_per_call);
}

void run_dense_fwd(benchmark::State& state, const Kernel& k, std::size_t s) {
  label_kernel(state, k, compute_roof(k));
  // Decided per run, not at registration, so that the skip shows up in the output with its reason.
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());  // copied by the library
    return;
  }
  const Operands in = operands(k.storage, s);
  const Outputs out = outputs(k.storage, s);
  const DenseArgs args{s, s, s, in.x, in.w, in.b, out.y_or_dx, Act::identity};
  // One untimed call: the GEMM driver's thread_local packing and accumulator buffers grow to this size here.
  k.dense(args);
  for (auto _ : state) {
    k.dense(args);
    benchmark::ClobberMemory();
  }
  set_counters(state, k, s, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
}

void run_dense_bwd(benchmark::State& state, const Kernel& k, std::size_t s) {
  label_kernel(state, k, compute_roof(k));
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const Operands in = operands(k.storage, s);
  const Outputs out = outputs(k.storage, s);
  const DenseBwdArgs args{s, s, s, in.x, in.w, in.dy, out.y_or_dx, out.dw, out.db};
  k.dense_bwd(args);  // untimed, as in run_dense_fwd
  for (auto _ : state) {
    k.dense_bwd(args);
    benchmark::ClobberMemory();
  }
  set_counters(state, k, s, 4.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
}

void run_dense_fwd_threads(benchmark::State& state, const Kernel& k, unsigned threads) {
  label_kernel(state, k, compute_roof(k));
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const std::size_t s = kThreadsSize;
  const Operands in = operands(k.storage, s);
  const Outputs out = outputs(k.storage, s);
  DenseArgs args{s, s, s, in.x, in.w, in.b, out.y_or_dx, Act::identity};
  args.threads = threads;
  k.dense(args);  // untimed: every member's buffers grow here
  for (auto _ : state) {
    k.dense(args);
    benchmark::ClobberMemory();
  }
  set_counters(state, k, s, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
  state.counters["threads"] = benchmark::Counter(threads);
}

void run_dense_bwd_threads(benchmark::State& state, const Kernel& k, unsigned threads) {
  label_kernel(state, k, compute_roof(k));
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const std::size_t s = kThreadsSize;
  const Operands in = operands(k.storage, s);
  const Outputs out = outputs(k.storage, s);
  DenseBwdArgs args{s, s, s, in.x, in.w, in.dy, out.y_or_dx, out.dw, out.db};
  args.threads = threads;
  k.dense_bwd(args);
  for (auto _ : state) {
    k.dense_bwd(args);
    benchmark::ClobberMemory();
  }
  set_counters(state, k, s, 4.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
  state.counters["threads"] = benchmark::Counter(threads);
}

template <class Run>
void register_threads(const Kernel& k, std::string_view suite, Run run) {
  for (const unsigned t : thread_counts(bench_max_threads())) {
    const std::string name = fmt::format("{}/{}/{}", suite, k.name, t);
    benchmark::RegisterBenchmark(name.c_str(), [&k, t, run](benchmark::State& state) { run(state, k, t); })
        ->UseRealTime()
        ->MeasureProcessCPUTime();
  }
}

template <class Run, std::size_t N>
void register_op(const Kernel& k, std::string_view op, const std::size_t (&sizes)[N], Run run) {
  // isa ref: only kRefSizes, whatever the op's own list (see the top of this file).
  const std::span<const std::size_t> list =
      k.isa == Isa::ref ? std::span<const std::size_t>(kRefSizes) : std::span<const std::size_t>(sizes);
  for (const std::size_t s : list) {
    // dense_fwd/<kernel>/<size>, split on '/', like reduce/<kernel>/<level> (no Args: see bench_reduce.cpp).
    const std::string name = fmt::format("{}/{}/{}", op, k.name, s);
    benchmark::RegisterBenchmark(name.c_str(), [&k, s, run](benchmark::State& state) { run(state, k, s); });
  }
}

std::string size_list(std::span<const std::size_t> sizes) {
  std::string out;
  for (const std::size_t s : sizes) out += fmt::format("{}{}", out.empty() ? "" : ", ", s);
  return out;
}

}  // namespace

std::string dense_description() {
  return fmt::format(
      "M = N = K; dense_fwd (identity, with bias) at {}; dense_bwd (dx, dw, db) at {}; isa ref kernels at {} "
      "only; flops_per_second counts 2MNK (fwd) or 4MNK (bwd) per call; operands X, W, dY, b are consecutive "
      "slices of the inputs; dense_fwd_threads and dense_bwd_threads at {} on {} threads (all but isa ref; wall "
      "clock, process CPU time)",
      size_list(kDenseFwdSizes), size_list(kBwdSizes), size_list(kRefSizes), kThreadsSize,
      fmt::join(thread_counts(bench_max_threads()), ", "));
}

void register_dense_benchmarks() {
  for (const Kernel& k : kernels()) {
    if (k.op == Op::dense_fwd && k.dense != nullptr) register_op(k, "dense_fwd", kDenseFwdSizes, run_dense_fwd);
  }
  for (const Kernel& k : kernels()) {
    if (k.op == Op::dense_bwd && k.dense_bwd != nullptr) register_op(k, "dense_bwd", kBwdSizes, run_dense_bwd);
  }
  for (const Kernel& k : kernels()) {
    if (k.op == Op::dense_fwd && k.dense != nullptr && k.isa != Isa::ref) {
      register_threads(k, "dense_fwd_threads", run_dense_fwd_threads);
    }
  }
  for (const Kernel& k : kernels()) {
    if (k.op == Op::dense_bwd && k.dense_bwd != nullptr && k.isa != Isa::ref) {
      register_threads(k, "dense_bwd_threads", run_dense_bwd_threads);
    }
  }
}

std::vector<unsigned> thread_counts(unsigned most) {
  std::vector<unsigned> out;
  for (unsigned t = 1; t < most; t *= 2) out.push_back(t);
  out.push_back(std::max(1u, most));
  return out;
}

unsigned& bench_max_threads() {
  static unsigned most = default_threads();
  return most;
}

}  // namespace halfmap::bench
