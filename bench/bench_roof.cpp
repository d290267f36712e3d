// The roofs: how fast one core of this machine can read, copy and compute, measured in the same run as the kernels
// so that "a kernel reaches X % of the roof" compares like with like (same load, same frequency, same pages).
//
//   roof/read/<level>, roof/copy/<level>  the memory roofs, how fast the core reads and copies each level's
//                      bytes: bench_roof_memory.cpp.
//   roof/fma/<isa>     the ISA's peak arithmetic (roof/roof_<isa>.cpp): fused multiply-adds on independent
//                      accumulators, 2 flops per lane (vdpbf16ps: 4 per f32 lane, 2 per bf16 product, the same
//                      counting as the dense benchmarks' 2·M·N·K). Skipped with the reason where the ISA is not
//                      enabled.
//   roof/f16c/<isa>    avx2 and avx512: the same FMA with every result rounded to fp16 and widened back (vcvtps2ph,
//                      vcvtph2ps) before the next FMA of its chain: the limit of the per-operation f16 kernels,
//                      which round so after every operation (docs/numerics.md). Timed with the chains in registers (no
//                      loads) and with 64 fp16 chains in an L1 array (each step a load, the FMA and a store, as the
//                      kernels' fp16 data; many chains, so bound by throughput rather than by the round trip's
//                      latency); the faster is the roof (roof_f16c_<isa>_variants). Flops as for fma (the
//                      conversions count none).
//
// measure_roofs() measures the read and copy roofs of every level (bench_roof_memory.cpp), the FMA roof of every
// enabled ISA and the F16C round-trip roof of avx2 and avx512 once at startup,
// before any benchmark, and publishes them in the context; every kernel benchmark divides its rate by the one
// that applies (add_memory_roof_fraction, add_copy_roof_fraction, add_compute_roof_fraction) into the counter
// roof_fraction, and the per-operation f16 kernels also by the F16C roof (add_f16c_roof_fraction) into
// f16c_roof_fraction. That counter
// is a rate (work per call / roof, per second), so that Google Benchmark divides by the same time as the kernel's
// own rate; the console therefore prints it with a "/s", the JSON as the plain fraction.
//
// Counter (tools/bench_report.py reads it; the memory roofs' bytes_per_second: bench_roof_memory.cpp):
//   flops_per_second  floating-point operations per second (fma, f16c).
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_roof.hpp"
#include "bench_util.hpp"
#include "halfmap/isa_arith.hpp"
#include "roof/roof_isa.hpp"

namespace halfmap::bench {

namespace roof {

std::optional<IsaLoops> loops_for(Isa isa) {
  if (!isa_supported(isa)) return std::nullopt;
  switch (isa) {
#if defined(HALFMAP_BENCH_ROOF_AVX2)
    case Isa::avx2:
      return roof::loops_avx2();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512)
    case Isa::avx512:
      return roof::loops_avx512();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512BF16)
    case Isa::avx512bf16:
      return roof::loops_avx512bf16();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512FP16)
    case Isa::avx512fp16:
      return roof::loops_avx512fp16();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEON)
    case Isa::neon:
      return roof::loops_neon();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONFP16)
    case Isa::neonfp16:
      return roof::loops_neonfp16();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONFHM)
    case Isa::neonfhm:
      return roof::loops_neonfhm();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONBF16)
    case Isa::neonbf16:
      return roof::loops_neonbf16();
#endif
#if defined(HALFMAP_BENCH_ROOF_SVE)
    case Isa::sve:
      return roof::loops_sve();
#endif
    default:
      return std::nullopt;
  }
}

Roofs& mutable_roofs() {
  static Roofs r;
  return r;
}

}  // namespace roof

namespace {

using roof::loops_for;
using roof::rate;

/// Whether `isa` has an F16C round-trip loop in this build and the CPU runs it.
bool has_f16c(Isa isa) {
  const auto loops = loops_for(isa);
  return isa_enabled(isa) && loops && loops->f16c != nullptr;
}

/// FMA repetitions per call: 16 accumulators x 4096 = 65536 instructions, some 50 µs.
constexpr std::size_t kFmaReps = 4096;
/// The F16C loop on fp16 chains in memory: 64 chains a repetition, so a sixteenth of the repetitions.
constexpr std::size_t kF16cMemoryReps = kFmaReps / 16;

/// Per ISA, whether the F16C roof is the loop on fp16 chains in memory (else in registers): measure_compute_roofs
/// chooses, run_fma times the choice.
std::array<bool, kAllIsas.size()>& f16c_memory_wins() {
  static std::array<bool, kAllIsas.size()> v{};
  return v;
}

/// roof/fma/<isa> (f16c false) or roof/f16c/<isa> (true).
void run_fma(benchmark::State& state, Isa isa, bool f16c) {
  const auto loops = loops_for(isa);
  if (!isa_enabled(isa) || !loops) {
    state.SkipWithError(isa_skip_reason(isa).c_str());  // copied by the library
    return;
  }
  const bool memory = f16c && f16c_memory_wins()[static_cast<std::size_t>(isa)];
  const auto loop = memory ? loops->f16c_memory : f16c ? loops->f16c : loops->fma;
  const std::size_t reps = memory ? kF16cMemoryReps : kFmaReps;
  for (auto _ : state) {
    float s = loop(reps);
    benchmark::DoNotOptimize(s);
  }
  const double per_rep = memory ? loops->f16c_memory_flops_per_rep
                         : f16c ? loops->f16c_flops_per_rep
                                : loops->flops_per_rep;
  state.counters["flops_per_second"] =
      benchmark::Counter(per_rep * static_cast<double>(reps), benchmark::Counter::kIsIterationInvariantRate);
}

/// The FMA roof a dense kernel is compared with: its own ISA's peak for the arithmetic it does. f32 arithmetic
/// (f32, f16_f32acc, and the F16C/AVX2/AVX-512 f16 and f16_model kernels, which compute in f32 and round to fp16
/// per operation) against the f32 FMA of its ISA family (isa_f32_path); fp16 arithmetic on avx512fp16 and neonfp16
/// against the fp16 FMA; bf16_f32acc on avx512bf16 against vdpbf16ps; neonfhm (f16_f32acc only) against FMLAL.
/// ref: none.
std::optional<Isa> compute_roof_isa(const Kernel& k) {
  switch (k.isa) {
    case Isa::ref:
      return std::nullopt;
    case Isa::avx512bf16:
      return k.mode == Mode::bf16_f32acc ? Isa::avx512bf16 : isa_f32_path(k.isa);
    case Isa::avx512fp16:
      return k.mode == Mode::f16 ? Isa::avx512fp16 : isa_f32_path(k.isa);
    case Isa::neonfp16:
      return k.mode == Mode::f16 ? Isa::neonfp16 : isa_f32_path(k.isa);
    case Isa::sve:
      return k.mode == Mode::f16 ? std::nullopt : std::optional<Isa>(Isa::sve);  // f32 FMLA only
    default:
      return k.isa;
  }
}

}  // namespace

std::string isa_skip_reason(Isa isa) {
  const IsaState state = isa_state(isa);
  if (state == IsaState::enabled) return {};
  const std::string_view name = isa_name(isa);
  const std::string_view needs = isa_requirements(isa);
  if (state == IsaState::not_compiled)
    return fmt::format("ISA {} not compiled into this build (needs {})", name, needs);
  if (state == IsaState::unsupported) return fmt::format("ISA {} not supported by this CPU (needs {})", name, needs);
  const auto cap = isa_cap();
  return fmt::format("ISA {} disabled by HALFMAP_ISA={} (needs {})", name, cap ? isa_name(*cap) : "?", needs);
}

const Roofs& roofs() { return roof::mutable_roofs(); }

namespace {

/// The FMA roof of every enabled ISA and the F16C round-trip roof where there is one, into r and the context;
/// returns what each times, in words.
std::string measure_compute_roofs(Roofs& r, double seconds) {
  std::string list;
  for (std::size_t i = 0; i < kAllIsas.size(); ++i) {
    const Isa isa = kAllIsas[i];
    const auto loops = loops_for(isa);
    if (!loops || !isa_enabled(isa)) continue;
    r.fma[i] = rate([&] { benchmark::DoNotOptimize(loops->fma(kFmaReps)); },
                    loops->flops_per_rep * static_cast<double>(kFmaReps), seconds);
    benchmark::AddCustomContext(fmt::format("roof_fma_{}_flops_per_second", isa_name(isa)),
                                fmt::format("{:.6g}", r.fma[i]));
    list += fmt::format("{}{}: {}", list.empty() ? "" : "; ", isa_name(isa), loops->what);
    if (!has_f16c(isa)) continue;
    const double in_registers = rate([&] { benchmark::DoNotOptimize(loops->f16c(kFmaReps)); },
                                     loops->f16c_flops_per_rep * static_cast<double>(kFmaReps), seconds);
    const double in_memory =
        loops->f16c_memory == nullptr
            ? 0.0
            : rate([&] { benchmark::DoNotOptimize(loops->f16c_memory(kF16cMemoryReps)); },
                   loops->f16c_memory_flops_per_rep * static_cast<double>(kF16cMemoryReps), seconds);
    f16c_memory_wins()[i] = in_memory > in_registers;
    // Both loops have the same lanes: the register loop's chains from the two flop counts.
    const int register_chains =
        loops->f16c_memory == nullptr
            ? 0
            : static_cast<int>(roof::kF16cMemoryChains * loops->f16c_flops_per_rep / loops->f16c_memory_flops_per_rep);
    r.f16c[i] = std::max(in_registers, in_memory);
    benchmark::AddCustomContext(fmt::format("roof_f16c_{}_flops_per_second", isa_name(isa)),
                                fmt::format("{:.6g}", r.f16c[i]));
    benchmark::AddCustomContext(
        fmt::format("roof_f16c_{}_variants", isa_name(isa)),
        fmt::format("flops/s: {} chains in registers {:.6g}; {} fp16 chains in memory {:.6g} (the roof: {})",
                    register_chains, in_registers, roof::kF16cMemoryChains, in_memory,
                    f16c_memory_wins()[i] ? "memory" : "registers"));
    list += fmt::format("; f16c {}: {}, the faster of {} chains in registers and {} fp16 chains in L1", isa_name(isa),
                        loops->f16c_what, register_chains, roof::kF16cMemoryChains);
  }
  return list;
}

}  // namespace

void measure_roofs(double seconds) {
  Roofs& r = roof::mutable_roofs();
  const std::string how = roof::measure_memory_roofs(r, seconds);
  const std::string fma_list = measure_compute_roofs(r, seconds);
  benchmark::AddCustomContext(
      "roof_method",
      fmt::format("measured once at startup, the fastest batch of calls over {} s of thread CPU time each; read: {} "
                  "summing 64-bit words of the level's f32 input, the fastest of 2, 4, 8 and 16 registers a step, "
                  "each as one stream and as two (roof_read_<level>_variants); copy: the same loads stored, the "
                  "fastest of ordinary stores to a second buffer, non-temporal stores to it and ordinary stores in "
                  "place, each in the four shapes (roof_copy_<level>_variants), bytes read + written; fma and f16c "
                  "({}), FMA = 2 flops per lane, vdpbf16ps 4 "
                  "per f32 lane, conversions none; roof_fraction = a kernel's bytes_per_second / the read roof of "
                  "its level (softmax, softmax_naive, xent: bytes read + written per second / the copy roof), or "
                  "its flops_per_second / the FMA roof of its ISA and arithmetic; f16c_roof_fraction = a "
                  "per-operation f16 kernel's flops per second (reductions: 2 per rounded operation) / the F16C "
                  "roof of its ISA",
                  seconds, how, fma_list.empty() ? "none enabled" : fma_list));
}

void add_f16c_roof_fraction(benchmark::State& state, const Kernel& k, double flops_per_call) {
  if (k.mode != Mode::f16 || !isa_f16_per_op(k.isa)) return;
  const double roof = roofs().f16c[static_cast<std::size_t>(k.isa)];
  if (roof <= 0) return;
  state.counters["f16c_roof_fraction"] =
      benchmark::Counter(flops_per_call / roof, benchmark::Counter::kIsIterationInvariantRate);
}

void add_compute_roof_fraction(benchmark::State& state, const Kernel& k, double flops_per_call) {
  const auto isa = compute_roof_isa(k);
  if (!isa) return;
  const double roof = roofs().fma[static_cast<std::size_t>(*isa)];
  if (roof <= 0) return;
  state.counters["roof_fraction"] =
      benchmark::Counter(flops_per_call / roof, benchmark::Counter::kIsIterationInvariantRate);
}

std::string compute_roof(const Kernel& k) {
  const auto isa = compute_roof_isa(k);
  return isa ? fmt::format("fma/{}", isa_name(*isa)) : std::string("none");
}

void register_roof_benchmarks() {
  for (const Level& level : kLevels) {
    benchmark::RegisterBenchmark(fmt::format("roof/read/{}", level.name).c_str(),
                                 [&level](benchmark::State& state) { roof::run_read(state, level); });
  }
  for (const Level& level : kLevels) {
    benchmark::RegisterBenchmark(fmt::format("roof/copy/{}", level.name).c_str(),
                                 [&level](benchmark::State& state) { roof::run_copy(state, level); });
  }
  for (const bool f16c : {false, true}) {
    for (const Isa isa : kAllIsas) {
      if (isa == Isa::ref) continue;
      // Registered only for the ISAs of this architecture (x86 or arm64), skipped at run time where not enabled;
      // f16c only where the ISA has the loop.
      const auto loops = loops_for(isa);
      if (f16c ? !(loops && loops->f16c) : (!isa_compiled(isa) && !loops)) continue;
      benchmark::RegisterBenchmark(fmt::format("roof/{}/{}", f16c ? "f16c" : "fma", isa_name(isa)).c_str(),
                                   [isa, f16c](benchmark::State& state) { run_fma(state, isa, f16c); });
    }
  }
}

}  // namespace halfmap::bench