// The roofs: how fast one core of this machine can read, copy and compute, measured in the same run as the kernels
// so that "a kernel reaches X % of the roof" compares like with like (same load, same frequency, same pages).
//
//   roof/read/<level>  reads the level's f32 input buffer (bench_util.hpp: the very bytes the f32 kernels read
//                      there) as 64-bit integers summed into independent accumulators; the additions are
//                      integer, so they never limit the loop. Timed in four shapes (2, 4, 8 and 16 registers a
//                      step, each its own accumulator: roof/roof_isa.hpp, kShapeRegs; a core favours some shapes
//                      over others, not predictably) and each as one stream and as two (the buffer's halves in
//                      alternating 4 KiB chunks, as dot and mse read x and y); the fastest of the eight is the
//                      roof (roof_read_<level>_variants in the context). It uses the widest loads of the best
//                      enabled ISA that has a read loop (roof/roof_avx512.cpp: 64 bytes, roof_avx2.cpp: 32 bytes),
//                      else 16-byte vectors written with GCC/Clang vector extensions (SSE2 or NEON, no ISA flags:
//                      roof/roof_baseline.cpp):
//                      at l1 the load width decides the speed, at dram it does not.
//   roof/copy/<level>  the fastest way this core moves the level's bytes: the f32 input buffer copied into the
//                      output buffer with the read loop's loads and (a) ordinary stores of the same width, (b)
//                      non-temporal stores, which skip the read for ownership an ordinary store pays at DRAM
//                      sizes, and (c) ordinary stores in place (the output buffer read and written back); each in
//                      the four shapes, timed at startup, the fastest is the roof (the context lists every one,
//                      roof_copy_<level>_variants) and this benchmark times it again. Counts bytes read plus
//                      bytes written: the roof of softmax and xent, which read and write the same bytes. A kernel
//                      cannot move its bytes faster than the fastest of these, whatever stores it uses.
//                      Baseline: 16-byte vectors, like the read loop (SSE2 streaming stores on x86-64).
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
// measure_roofs() measures the read and copy roofs of every level, the FMA roof of every enabled ISA and the F16C
// round-trip roof of avx2 and avx512 once at startup,
// before any benchmark, and publishes them in the context; every kernel benchmark divides its rate by the one
// that applies (add_memory_roof_fraction, add_copy_roof_fraction, add_compute_roof_fraction) into the counter
// roof_fraction, and the per-operation f16 kernels also by the F16C roof (add_f16c_roof_fraction) into
// f16c_roof_fraction. That counter
// is a rate (work per call / roof, per second), so that Google Benchmark divides by the same time as the kernel's
// own rate; the console therefore prints it with a "/s", the JSON as the plain fraction.
//
// Counters (tools/bench_report.py reads them):
//   bytes_per_second  bytes read (read) or read + written (copy) per second;
//   flops_per_second  floating-point operations per second (fma, f16c).
#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"
#include "roof/roof_isa.hpp"

namespace halfmap::bench {
namespace {

/// The loops of `isa` in this build, or nullopt where it is not compiled, has no roof (ref), or this CPU lacks it:
/// the table is built by code compiled with the ISA's flags, which may already use its registers (GCC stores
/// roof_avx512bf16's table with zmm moves), so it is not even built on a CPU without the ISA.
std::optional<roof::IsaLoops> loops_for(Isa isa) {
  if (!isa_supported(isa)) return std::nullopt;
  switch (isa) {
#if defined(HALFMAP_BENCH_ROOF_AVX2)
    case Isa::avx2: return roof::loops_avx2();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512)
    case Isa::avx512: return roof::loops_avx512();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512BF16)
    case Isa::avx512bf16: return roof::loops_avx512bf16();
#endif
#if defined(HALFMAP_BENCH_ROOF_AVX512FP16)
    case Isa::avx512fp16: return roof::loops_avx512fp16();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEON)
    case Isa::neon: return roof::loops_neon();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONFP16)
    case Isa::neonfp16: return roof::loops_neonfp16();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONFHM)
    case Isa::neonfhm: return roof::loops_neonfhm();
#endif
#if defined(HALFMAP_BENCH_ROOF_NEONBF16)
    case Isa::neonbf16: return roof::loops_neonbf16();
#endif
#if defined(HALFMAP_BENCH_ROOF_SVE)
    case Isa::sve: return roof::loops_sve();
#endif
    default: return std::nullopt;
  }
}

using roof::CopyFn;
using roof::kShapeRegs;
using roof::kShapes;
using roof::ReadFn;

using ReadLoops = std::array<ReadFn, kShapes>;
using CopyLoops = std::array<CopyFn, kShapes>;

/// The read and copy loops of the best enabled ISA that has them (roof/roof_baseline.cpp's 16-byte ones where
/// none has), and how they load, in words.
std::pair<roof::IsaLoops, std::string> memory_loops() {
  for (auto it = kAllIsas.rbegin(); it != kAllIsas.rend(); ++it) {
    if (!isa_enabled(*it)) continue;
    const auto loops = loops_for(*it);
    if (loops && loops->read[0] != nullptr) {
      return {*loops, fmt::format("{}-byte loads ({})", loops->read_load_bytes, isa_name(*it))};
    }
  }
  return {roof::loops_baseline(), "16-byte loads (baseline SSE2/NEON)"};
}

/// The read loops, one per shape, and how they load.
std::pair<ReadLoops, std::string> read_loops() {
  const auto [loops, how] = memory_loops();
  return {std::to_array(loops.read), how};
}

/// The copy loops per shape (ordinary stores; non-temporal stores, or nulls) of the same ISA as read_loops()'s.
std::pair<CopyLoops, CopyLoops> copy_loops() {
  const roof::IsaLoops loops = memory_loops().first;
  return {std::to_array(loops.copy), std::to_array(loops.copy_nt)};
}

/// The ways a copy roof moves a level's bytes (bench_roof.cpp's header): ordinary stores into the output buffer,
/// non-temporal stores into it, ordinary stores in place on the output buffer.
enum class CopyVariant : unsigned char { ordinary, non_temporal, in_place };
constexpr const char* kCopyVariantNames[] = {"ordinary", "non-temporal", "in place"};

/// One variant's loop in one shape, looked up once outside the timed calls: fn(in_place ? out : in, out, bytes).
struct CopyCall {
  CopyFn fn = nullptr;  // null: no loop for the variant here
  bool in_place = false;
  void operator()(const unsigned char* in, unsigned char* out, std::size_t bytes) const {
    fn(in_place ? out : in, out, bytes);
  }
};

CopyCall copy_call(CopyVariant v, int shape) {
  const auto [copy, copy_nt] = copy_loops();
  return {(v == CopyVariant::non_temporal ? copy_nt : copy)[static_cast<std::size_t>(shape)],
          v == CopyVariant::in_place};
}

/// Reads p[0, bytes) as two streams, its halves in alternating chunks of 4 KiB, as dot and mse read x and y: a
/// core's prefetchers may fetch two streams faster than one.
std::uint64_t read_two_streams(ReadFn read, const unsigned char* p, std::size_t bytes) {
  const std::size_t half = bytes / 2, chunk = std::min<std::size_t>(half, 4096);
  std::uint64_t s = 0;
  for (std::size_t off = 0; off < half; off += chunk) s += read(p + off, chunk) + read(p + half + off, chunk);
  return s;
}

/// The read roof's fastest variant of a level: its shape (index into kShapeRegs) and whether two streams.
struct ReadVariant {
  int shape = 0;
  bool two_streams = false;
};

/// The copy roof's fastest variant of a level: its stores and shape.
struct CopyRoofVariant {
  CopyVariant stores = CopyVariant::ordinary;
  int shape = 0;
};

/// The fastest read variant of each level, chosen by measure_memory_roofs (the first until then).
std::array<ReadVariant, kLevels.size()>& read_roof_variant() {
  static std::array<ReadVariant, kLevels.size()> v{};
  return v;
}

/// The fastest copy variant of each level, chosen by measure_memory_roofs (the first until then).
std::array<CopyRoofVariant, kLevels.size()>& copy_roof_variant() {
  static std::array<CopyRoofVariant, kLevels.size()> v{};
  return v;
}

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

void run_read(benchmark::State& state, const Level& level) {
  const auto* buf = static_cast<const unsigned char*>(input_buffer(DType::f32, level));
  const ReadVariant best = read_roof_variant()[static_cast<std::size_t>(&level - kLevels.data())];
  const ReadFn read = read_loops().first[static_cast<std::size_t>(best.shape)];
  const bool two = best.two_streams;
  for (auto _ : state) {
    std::uint64_t s = two ? read_two_streams(read, buf, level.bytes) : read(buf, level.bytes);
    benchmark::DoNotOptimize(s);
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(level.bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void run_copy(benchmark::State& state, const Level& level) {
  const auto* in = static_cast<const unsigned char*>(input_buffer(DType::f32, level));
  auto* out = static_cast<unsigned char*>(output_buffer());
  const CopyRoofVariant best = copy_roof_variant()[static_cast<std::size_t>(&level - kLevels.data())];
  const CopyCall copy = copy_call(best.stores, best.shape);
  for (auto _ : state) {
    copy(in, out, level.bytes);
    benchmark::ClobberMemory();
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(2.0 * static_cast<double>(level.bytes), benchmark::Counter::kIsIterationInvariantRate);
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
  const double per_rep = memory ? loops->f16c_memory_flops_per_rep : f16c ? loops->f16c_flops_per_rep : loops->flops_per_rep;
  state.counters["flops_per_second"] =
      benchmark::Counter(per_rep * static_cast<double>(reps), benchmark::Counter::kIsIterationInvariantRate);
}

/// CPU time of this thread, in seconds: the clock Google Benchmark's rates use by default.
double thread_seconds() {
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

Roofs& mutable_roofs() {
  static Roofs r;
  return r;
}

/// The FMA roof a dense kernel is compared with: its own ISA's peak for the arithmetic it does. f32 arithmetic
/// (f32, f16_f32acc, and the F16C/AVX2/AVX-512 f16 and f16_model kernels, which compute in f32 and round to fp16
/// per operation) against the f32 FMA of its ISA family; fp16 arithmetic on avx512fp16 and neonfp16 against the
/// fp16 FMA; bf16_f32acc on avx512bf16 against vdpbf16ps; neonfhm (f16_f32acc only) against FMLAL. ref: none.
std::optional<Isa> compute_roof_isa(const Kernel& k) {
  switch (k.isa) {
    case Isa::ref: return std::nullopt;
    case Isa::avx512bf16: return k.mode == Mode::bf16_f32acc ? Isa::avx512bf16 : Isa::avx512;
    case Isa::avx512fp16: return k.mode == Mode::f16 ? Isa::avx512fp16 : Isa::avx512;
    case Isa::neonfp16: return k.mode == Mode::f16 ? Isa::neonfp16 : Isa::neon;
    case Isa::sve: return k.mode == Mode::f16 ? std::nullopt : std::optional<Isa>(Isa::sve);  // f32 FMLA only
    default: return k.isa;
  }
}

}  // namespace

std::string isa_skip_reason(Isa isa) {
  const IsaState state = isa_state(isa);
  if (state == IsaState::enabled) return {};
  const std::string_view name = isa_name(isa);
  const std::string_view needs = isa_requirements(isa);
  if (state == IsaState::not_compiled) return fmt::format("ISA {} not compiled into this build (needs {})", name, needs);
  if (state == IsaState::unsupported) return fmt::format("ISA {} not supported by this CPU (needs {})", name, needs);
  const auto cap = isa_cap();
  return fmt::format("ISA {} disabled by HALFMAP_ISA={} (needs {})", name, cap ? isa_name(*cap) : "?", needs);
}

const Roofs& roofs() { return mutable_roofs(); }

namespace {

/// The read and copy roofs of every level, into r and the context; returns how the loops load.
std::string measure_memory_roofs(Roofs& r, double seconds) {
  const auto [reads, how] = read_loops();
  benchmark::AddCustomContext("roof_read_loads", how);
  auto* out = static_cast<unsigned char*>(output_buffer());
  for (std::size_t i = 0; i < kLevels.size(); ++i) {
    const Level& level = kLevels[i];
    static_assert(roof::kStepBytes <= 4096, "read_two_streams' chunks are whole steps");
    if (level.bytes % (2 * 4096) != 0) throw std::logic_error("a level's bytes are whole pairs of 4 KiB chunks");
    const auto* buf = static_cast<const unsigned char*>(input_buffer(DType::f32, level));
    const auto bytes = static_cast<double>(level.bytes);
    std::string variants;
    for (int shape = 0; shape < kShapes; ++shape) {
      const ReadFn read = reads[static_cast<std::size_t>(shape)];
      for (const bool two : {false, true}) {
        const double got = rate(
            [&] {
              benchmark::DoNotOptimize(two ? read_two_streams(read, buf, level.bytes) : read(buf, level.bytes));
            },
            bytes, seconds);
        variants += fmt::format("{}{} registers, {} {:.6g}", variants.empty() ? "" : "; ", kShapeRegs[shape],
                                two ? "two streams" : "one stream", got);
        if (got > r.read[i]) {
          r.read[i] = got;
          read_roof_variant()[i] = {shape, two};
        }
      }
    }
    const ReadVariant best_read = read_roof_variant()[i];
    benchmark::AddCustomContext(
        fmt::format("roof_read_{}_variants", level.name),
        fmt::format("bytes/s by shape: {} (the roof: {} registers, {})", variants, kShapeRegs[best_read.shape],
                    best_read.two_streams ? "two streams" : "one stream"));
    benchmark::AddCustomContext(fmt::format("roof_read_{}_bytes_per_second", level.name),
                                fmt::format("{:.6g}", r.read[i]));
    variants.clear();
    for (const CopyVariant v : {CopyVariant::ordinary, CopyVariant::non_temporal, CopyVariant::in_place}) {
      for (int shape = 0; shape < kShapes; ++shape) {
        const CopyCall copy = copy_call(v, shape);
        if (copy.fn == nullptr) continue;  // no loop for it here
        const double got =
            rate([&] { copy(buf, out, level.bytes); benchmark::ClobberMemory(); }, 2 * bytes, seconds);
        variants += fmt::format("{}{}, {} registers {:.6g}", variants.empty() ? "" : "; ", kCopyVariantNames[int(v)],
                                kShapeRegs[shape], got);
        if (got > r.copy[i]) {
          r.copy[i] = got;
          copy_roof_variant()[i] = {v, shape};
        }
      }
    }
    const CopyRoofVariant best_copy = copy_roof_variant()[i];
    benchmark::AddCustomContext(fmt::format("roof_copy_{}_bytes_per_second", level.name),
                                fmt::format("{:.6g}", r.copy[i]));
    benchmark::AddCustomContext(fmt::format("roof_copy_{}_variants", level.name),
                                fmt::format("bytes/s by stores and shape: {} (the roof: {}, {} registers)", variants,
                                            kCopyVariantNames[int(best_copy.stores)], kShapeRegs[best_copy.shape]));
  }
  return how;
}

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
                    register_chains, in_registers,
                    roof::kF16cMemoryChains, in_memory, f16c_memory_wins()[i] ? "memory" : "registers"));
    list += fmt::format("; f16c {}: {}, the faster of {} chains in registers and {} fp16 chains in L1",
                        isa_name(isa), loops->f16c_what,
                        register_chains, roof::kF16cMemoryChains);
  }
  return list;
}

}  // namespace

void measure_roofs(double seconds) {
  Roofs& r = mutable_roofs();
  const std::string how = measure_memory_roofs(r, seconds);
  const std::string fma_list = measure_compute_roofs(r, seconds);
  benchmark::AddCustomContext(
      "roof_method",
      fmt::format("measured once at startup, the fastest batch of calls over {} s of thread CPU time each; read: {} "
                  "summing 64-bit words of the level's f32 input, the fastest of 2, 4, 8 and 16 registers a step, "
                  "each as one stream and as two (roof_read_<level>_variants); copy: the same loads stored, the "
                  "fastest of ordinary stores to a second buffer, non-temporal stores to it and ordinary stores in "
                  "place, each in the four shapes (roof_copy_<level>_variants), bytes read + written; fma and f16c ({}), FMA = 2 flops per lane, vdpbf16ps 4 "
                  "per f32 lane, conversions none; roof_fraction = a kernel's bytes_per_second / the read roof of "
                  "its level (softmax, softmax_naive, xent: bytes read + written per second / the copy roof), or "
                  "its flops_per_second / the FMA roof of its ISA and arithmetic; f16c_roof_fraction = a "
                  "per-operation f16 kernel's flops per second (reductions: 2 per rounded operation) / the F16C "
                  "roof of its ISA",
                  seconds, how, fma_list.empty() ? "none enabled" : fma_list));
}

void add_memory_roof_fraction(benchmark::State& state, const Level& level, double bytes_per_call) {
  const double roof = roofs().read[static_cast<std::size_t>(&level - kLevels.data())];
  if (roof <= 0) return;  // not measured (the caller ran no measure_roofs): no fraction rather than a wrong one
  state.counters["roof_fraction"] =
      benchmark::Counter(bytes_per_call / roof, benchmark::Counter::kIsIterationInvariantRate);
}

void add_copy_roof_fraction(benchmark::State& state, const Level& level, double bytes_moved_per_call) {
  const double roof = roofs().copy[static_cast<std::size_t>(&level - kLevels.data())];
  if (roof <= 0) return;
  state.counters["roof_fraction"] =
      benchmark::Counter(bytes_moved_per_call / roof, benchmark::Counter::kIsIterationInvariantRate);
}

void add_f16c_roof_fraction(benchmark::State& state, const Kernel& k, double flops_per_call) {
  if (k.mode != Mode::f16 || (k.isa != Isa::avx2 && k.isa != Isa::avx512)) return;
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
                                 [&level](benchmark::State& state) { run_read(state, level); });
  }
  for (const Level& level : kLevels) {
    benchmark::RegisterBenchmark(fmt::format("roof/copy/{}", level.name).c_str(),
                                 [&level](benchmark::State& state) { run_copy(state, level); });
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
