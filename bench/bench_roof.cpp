// roof/read/dram: how fast one thread can read memory on this machine, measured in the same run as the kernels so
// that "a kernel reaches X % of the read roof" compares like with like (same load, same frequency, same pages).
//
// It streams the DRAM level's f32 input buffer (256 MiB, bench_util.hpp: the very bytes the f32 kernels read at
// that level) as 64-bit integers, summed into eight independent accumulators of two lanes each. The additions
// are integer, so they never limit the loop, and written with GCC/Clang vector extensions, so the code is
// portable and needs no ISA flags: built for baseline x86-64 (the harness is, see CMakeLists.txt) each step is
// one 16-byte SSE2 load and add, 32 bytes a cycle at two loads per cycle, several times what one core draws from
// DRAM; wider loads would not move data from DRAM any faster.
//
// Counters (tools/bench_table.py reads them):
//   bytes_per_second  bytes read per second.
#include <cstdint>
#include <cstring>

#include <benchmark/benchmark.h>

#include "bench_util.hpp"

namespace halfmap::bench {
namespace {

/// 16 bytes: one SSE2 or NEON register, the baseline vector of both architectures. (A wider vector type without
/// the ISA flags for it is lowered through the stack by GCC, which would make this loop slower than memory.)
using U64x2 = std::uint64_t __attribute__((vector_size(16)));

/// The sum of the first n / 16 · 16 64-bit words of p (n: words), 128 bytes per step into eight independent
/// accumulators; p needs no alignment.
std::uint64_t sum_words(const unsigned char* p, std::size_t n) {
  constexpr int kAcc = 8;
  U64x2 acc[kAcc] = {};
  for (std::size_t i = 0; i + 2 * kAcc <= n; i += 2 * kAcc) {
    for (int a = 0; a < kAcc; ++a) {
      U64x2 v;  // memcpy: the buffer holds floats; this reads their bytes without aliasing them
      std::memcpy(&v, p + 8 * i + 16 * a, 16);
      acc[a] += v;
    }
  }
  U64x2 total = acc[0];
  for (int a = 1; a < kAcc; ++a) total += acc[a];
  return total[0] + total[1];
}

void run_roof_read(benchmark::State& state, const Level& level) {
  const auto* buf = static_cast<const unsigned char*>(input_buffer(DType::f32, level));
  const std::size_t words = level.bytes / 8;  // a multiple of 16 at every level
  for (auto _ : state) {
    std::uint64_t s = sum_words(buf, words);
    benchmark::DoNotOptimize(s);
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(words * 8), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_roof_benchmarks() {
  const Level& dram = kLevels.back();
  benchmark::RegisterBenchmark("roof/read/dram", [&dram](benchmark::State& state) { run_roof_read(state, dram); });
}

}  // namespace halfmap::bench
