// The roofs' parts shared by bench_roof.cpp (the roofs' measurement and registration, the compute roofs) and
// bench_roof_memory.cpp (the read and copy roofs): each ISA's loops, the rate measure, the roofs measured.
#pragma once

#include <algorithm>
#include <cstddef>
#include <ctime>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

#include "bench_util.hpp"
#include "roof/roof_isa.hpp"

namespace halfmap::bench::roof {

/// The loops of `isa` in this build, or nullopt where it is not compiled, has no roof (ref), or this CPU lacks it:
/// the table is built by code compiled with the ISA's flags, which may already use its registers (GCC stores
/// roof_avx512bf16's table with zmm moves), so it is not even built on a CPU without the ISA.
std::optional<IsaLoops> loops_for(Isa isa);

/// CPU time of this thread, in seconds: the clock Google Benchmark's rates use by default.
inline double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// `per_call` units (bytes, flops) / second of CPU time of `call`: the best batch over at least `seconds`, after
/// one untimed call. A roof is what the core can do, so the fastest batch is the measure, not the mean: on a
/// shared machine the mean of a DRAM read drifts down with every other process's traffic (a mean of 25.8 GB/s
/// against a later 30.6 in one run). Calls are timed in batches of at least a millisecond: reading the thread's
/// CPU clock is a system call, as slow as one call of the l1 read.
template <class Call>
double rate(Call call, double per_call, double seconds) {
  call();
  std::size_t batch = 1;
  double best = 0;
  const double start = thread_seconds();
  double now = start;
  do {
    const double batch_start = now;
    for (std::size_t i = 0; i < batch; ++i) call();
    now = thread_seconds();
    const double elapsed = now - batch_start;
    if (elapsed < 1e-3) {
      batch *= 2;  // too short to time well: not counted
    } else {
      best = std::max(best, per_call * static_cast<double>(batch) / elapsed);
    }
  } while (now - start < seconds || best == 0);
  return best;
}

/// The roofs as measured, written by measure_roofs.
Roofs& mutable_roofs();

// bench_roof_memory.cpp.
/// The read and copy roofs of every level, into r and the context; returns how the loops load.
std::string measure_memory_roofs(Roofs& r, double seconds);
/// roof/read/<level> and roof/copy/<level>: the fastest variant measure_memory_roofs chose.
void run_read(benchmark::State& state, const Level& level);
void run_copy(benchmark::State& state, const Level& level);

}  // namespace halfmap::bench::roof
