// The ISA-specific loops of the roof benchmarks (bench_roof.cpp), one file per ISA (roof_<isa>.cpp), each compiled
// with exactly that ISA's flags (bench/CMakeLists.txt, the library's HALFMAP_FLAGS_<isa> lists) and called only
// where halfmap::isa_enabled says the CPU can run it. Declarations only: an inline function defined here and
// instantiated in an ISA file could become the copy the linker keeps for every caller.
#pragma once

#include <cstddef>
#include <cstdint>

namespace halfmap::bench::roof {

/// The shapes of the read and copy loops: vector registers moved per step (each its own accumulator in a read).
/// A core's loads, prefetchers and loop buffers favour different shapes, and not predictably: on one Zen 5 the
/// eight-register read reached 15-20 GB/s from DRAM where two and four reached 43, and 350 GB/s in L1 where four
/// reached 437. So every loop comes in each shape, and a roof is the fastest of them (bench_roof.cpp).
inline constexpr int kShapes = 4;
inline constexpr int kShapeRegs[kShapes] = {2, 4, 8, 16};
/// Every level's byte count is a multiple of this: a whole number of steps of the widest shape of the widest loads.
inline constexpr std::size_t kStepBytes = 16 * 64;

using ReadFn = std::uint64_t (*)(const unsigned char* p, std::size_t bytes);
using CopyFn = void (*)(const unsigned char* src, unsigned char* dst, std::size_t bytes);

/// One ISA's loops.
///   fma:   reps x `accumulators` independent fused multiply-adds (enough chains to hide the latency, each kept
///          in a register: the chain loops are unrolled by pragma, since GCC left 24 of them in memory, chained
///          through store-to-load forwarding), with operands that keep every value normal and finite; returns a
///          value derived from every accumulator, so that nothing is optimised away. Performs
///          reps * flops_per_rep floating-point operations.
///   read:  per shape (kShapeRegs[i] registers a step), sums the 64-bit words of p[0, bytes) with the ISA's
///          widest loads into independent integer accumulators; bytes a multiple of kStepBytes. All null where
///          the ISA adds no wider load than the baseline's (16-byte SSE2/NEON), which roof_baseline.cpp provides.
///   copy:  per shape, copies src[0, bytes) to dst with the same loads as read and ordinary stores of the same
///          width. Null exactly where read is. Also timed with src == dst (in place).
///   copy_nt: per shape, the same with non-temporal stores (dst aligned to the store width), which skip the read
///          for ownership that an ordinary store pays at DRAM sizes. Null where the ISA has none wider than the
///          baseline's; the copy roof is the fastest of the stores and shapes (bench_roof_memory.cpp).
///   f16c:  the F16C round trip: reps x `accumulators` independent chains of vfmadd*ps, each result rounded to
///          fp16 (vcvtps2ph, round to nearest even) and widened back (vcvtph2ps) before the next FMA of its chain,
///          as the per-operation f16 kernels do (docs/numerics.md); no loads. Performs reps * f16c_flops_per_rep
///          flops (an FMA's 2 per lane; the conversions count none). Null where the ISA has no such kernels.
///   f16c_memory: the same round trip on kF16cMemoryChains accumulators kept as fp16 in an L1 array, each step
///          loading one (vcvtph2ps from memory), the FMA, and storing it back (vcvtps2ph to memory), as the f16
///          kernels do with fp16 data. So many chains are independent that the loop is bound by throughput,
///          not by the chain's latency, which the registers' few chains cannot hide on every core (avx2 on one
///          Zen 5: 33 GFLOP/s in registers, 42 in memory). Performs reps * f16c_memory_flops_per_rep flops. Null
///          exactly where f16c is; the F16C roof is the faster of the two (bench_roof.cpp).
inline constexpr int kF16cMemoryChains = 64;
struct IsaLoops {
  const char* what;      // the instruction timed, for the benchmark context
  double flops_per_rep;  // lanes x flops per lane x accumulators; an FMA is 2 flops per lane, vdpbf16ps 4
  float (*fma)(std::size_t reps);
  ReadFn read[kShapes];
  unsigned read_load_bytes;  // the width of read's loads; 0 without read
  CopyFn copy[kShapes];
  float (*f16c)(std::size_t reps);
  double f16c_flops_per_rep;  // lanes x 2 x chains; 0 without f16c
  const char* f16c_what;      // the instructions timed; null without f16c
  CopyFn copy_nt[kShapes] = {};
  float (*f16c_memory)(std::size_t reps) = nullptr;
  double f16c_memory_flops_per_rep = 0;  // lanes x 2 x kF16cMemoryChains
};

/// The baseline read and copy loops (roof_baseline.cpp, no ISA flags: 16-byte vectors); no fma, no f16c.
IsaLoops loops_baseline();

// Defined only in builds that compile the ISA (bench/CMakeLists.txt defines HALFMAP_BENCH_ROOF_<ISA>).
IsaLoops loops_avx2();
IsaLoops loops_avx512();
IsaLoops loops_avx512bf16();
IsaLoops loops_avx512fp16();
IsaLoops loops_neon();
IsaLoops loops_neonfp16();
IsaLoops loops_neonfhm();
IsaLoops loops_neonbf16();
IsaLoops loops_sve();

}  // namespace halfmap::bench::roof
