// reduce/<kernel>/<level>: every reduction kernel of the registry at the three named sizes of bench_util.hpp.
//
// Counters (tools/bench_report.py reads them):
//   bytes_per_second     bytes of input read per second (x, plus y for dot);
//   elements_per_second  elements of x per second (a dot element is one x[i]*y[i] pair);
//   n                    elements per input array, per call (not a rate);
//   roof_fraction        bytes_per_second / the read roof of the level measured at startup (bench_roof_memory.cpp);
//   f16c_roof_fraction   per-operation f16 sum, sumsq and dot of avx2 and avx512: 2 flops per element (each one
//                        rounded add or FMA, one F16C round trip) per second / the F16C roof of the ISA.
// Label: the kernel's op, mode, isa, storage and roof=read/<level> (label_kernel, bench_util.hpp).
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"

namespace halfmap::bench {
namespace {

void run_reduce(benchmark::State& state, const Kernel& k, const Level& level) {
  label_kernel(state, k, fmt::format("read/{}", level.name));
  // Decided per run, not at registration, so that the skip shows up in the output with its reason.
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());  // copied by the library
    return;
  }
  const std::size_t n = elements_for(k, level);
  const auto* buf = static_cast<const unsigned char*>(input_buffer(k.storage, level));
  const void* x = buf;
  const void* y = k.op == Op::dot ? buf + n * dtype_size(k.storage) : nullptr;
  for (auto _ : state) {
    float r = k.reduce(x, y, n);
    benchmark::DoNotOptimize(r);
  }
  const auto iterations = static_cast<double>(state.iterations());
  const std::size_t bytes_per_call = n * dtype_size(k.storage) * (k.op == Op::dot ? 2 : 1);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes_per_call));
  state.counters["elements_per_second"] =
      benchmark::Counter(iterations * static_cast<double>(n), benchmark::Counter::kIsRate);
  state.counters["n"] = benchmark::Counter(static_cast<double>(n));
  add_memory_roof_fraction(state, level, static_cast<double>(bytes_per_call));
  if (k.op != Op::maxabs) add_f16c_roof_fraction(state, k, 2.0 * static_cast<double>(n));  // maxabs rounds nothing
}

}  // namespace

void register_reduce_benchmarks() {
  for (const Kernel& k : kernels()) {
    if (!times_in(BenchFamily::reduce, k)) continue;
    for (const Level& level : kLevels) {
      // The name carries no arguments: reduce/<kernel>/<level>, split on '/'. (MinTime or Iterations set here
      // would append "/min_time:..." to it, which is why main() sets the default min time instead.)
      const std::string name = "reduce/" + std::string(k.name) + "/" + std::string(level.name);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&k, &level](benchmark::State& state) { run_reduce(state, k, level); });
    }
  }
}

}  // namespace halfmap::bench
