// attention_prescale/<kernel>/<len> and attention_postscale/<kernel>/<len>: every attention kernel of the registry
// on one head of dimension kAttnDim = 64 (BERT's and GPT-2's), queries = keys = <len> at 128 and 512 (isa ref
// kernels at 128 only: the f16 model rounds every operation in software), not causal, forward and backward in one
// call as a training step makes it: O, dQ, dK and dV written, the scores not kept (AttentionArgs::scores null),
// single-threaded. Q, K, V and dO are consecutive slices of the shared inputs (uniform in [-1, 1)), so the
// softmax sees scores of order 1 and every path computes the same values.
//
// Counters (tools/bench_report.py reads them):
//   flops_per_second  the six GEMMs' 2·len²·d each per call, 12·len²·d: forward S = Q·Kᵀ and O = P·V, backward
//                     dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K and dK = dSᵀ·Q; the softmax, its backward, the 1/√d and
//                     the mask are not counted (a few operations per score against 12·d = 768 per score here);
//   len               the sequence length (not a rate);
//   roof_fraction     flops_per_second / the FMA roof of the kernel's ISA and arithmetic, as the dense kernels'
//                     (bench_roof.cpp): attention is made of that ISA's dense kernels; none for isa ref;
//   f16c_roof_fraction  the per-operation f16 kernels of avx2 and avx512: against the F16C round-trip roof.
// Label: as the dense kernels' (label_kernel, compute_roof).
#include <cstddef>
#include <span>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"

namespace halfmap::bench {
namespace {

constexpr std::size_t kAttnDim = 64;
constexpr std::size_t kAttnLens[] = {128, 512};
constexpr std::size_t kAttnRefLens[] = {128};

void run_attention(benchmark::State& state, const Kernel& k, std::size_t len) {
  label_kernel(state, k, compute_roof(k));
  // Decided per run, not at registration, so that the skip shows up in the output with its reason.
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());  // copied by the library
    return;
  }
  const std::size_t esize = dtype_size(k.storage), block = len * kAttnDim * esize;
  const auto* in = static_cast<const unsigned char*>(input_buffer(k.storage, 4 * block));
  auto* out = static_cast<unsigned char*>(output_buffer());
  const AttentionArgs args{len, kAttnDim, false,          in,          in + block,      in + 2 * block,
                           out, nullptr,  in + 3 * block, out + block, out + 2 * block, out + 3 * block};
  k.attention(args);  // untimed: the dense kernels' thread_local buffers and the composition's scratch grow here
  for (auto _ : state) {
    k.attention(args);
    benchmark::ClobberMemory();
  }
  const double flops = 12.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(kAttnDim);
  state.counters["flops_per_second"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["len"] = benchmark::Counter(static_cast<double>(len));
  add_compute_roof_fraction(state, k, flops);
  add_f16c_roof_fraction(state, k, flops);
}

}  // namespace

std::string attention_description() {
  return fmt::format(
      "one head, d = {}, queries = keys = len (128, 512; isa ref kernels at 128 only), not causal, forward and "
      "backward in one call (O, dQ, dK, dV written, scores not kept), 1 thread; flops_per_second counts the six "
      "GEMMs, 12·len²·d per call",
      kAttnDim);
}

void register_attention_benchmarks() {
  for (const Kernel& k : kernels()) {
    if (!times_in(BenchFamily::attention, k)) continue;
    const std::span<const std::size_t> lens =
        k.isa == Isa::ref ? std::span<const std::size_t>(kAttnRefLens) : std::span<const std::size_t>(kAttnLens);
    for (const std::size_t len : lens) {
      // <op>/<kernel>/<len>, split on '/', like dense_fwd/<kernel>/<size>.
      const std::string name = fmt::format("{}/{}/{}", op_name(k.op), k.name, len);
      benchmark::RegisterBenchmark(name.c_str(), [&k, len](benchmark::State& state) { run_attention(state, k, len); });
    }
  }
}

}  // namespace halfmap::bench
