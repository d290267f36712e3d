// The memory roofs of halfmap_bench (bench_roof.cpp says what a roof is for and how it is measured):
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
//
// Counter (tools/bench_report.py reads it): bytes_per_second, bytes read (read) or read + written (copy) per
// second.
#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_roof.hpp"
#include "bench_util.hpp"
#include "roof/roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

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

/// The ways a copy roof moves a level's bytes (this file's header): ordinary stores into the output buffer,
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

}  // namespace

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
            [&] { benchmark::DoNotOptimize(two ? read_two_streams(read, buf, level.bytes) : read(buf, level.bytes)); },
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
        const double got = rate(
            [&] {
              copy(buf, out, level.bytes);
              benchmark::ClobberMemory();
            },
            2 * bytes, seconds);
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

}  // namespace halfmap::bench::roof

namespace halfmap::bench {

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

}  // namespace halfmap::bench
