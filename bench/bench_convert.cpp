// fp8_encode/<conversion>/<level>, fp8_encode_nonsat/<conversion>/<level>, fp8_decode/<conversion>/<level>,
// mx_quantize/<conversion>/<level>, fp8_round/<conversion>/<level> and mx_round/<conversion>/<level>:
// every fp8 conversion of the registry (conversions.hpp's Fp8Conversion) at the reductions' three size levels
// (bench_util.hpp), n = level bytes / 4 elements per call, so that the float32 side of each conversion is the
// level's size:
//   fp8_encode         float32 -> fp8, saturating (what the fp8 GEMMs' outputs and Transformer Engine's casts do),
//                      from the level's f32 input buffer (uniform in [-1, 1): normals and subnormals of both
//                      formats) into output_buffer();
//   fp8_encode_nonsat  the same, non-saturating;
//   fp8_decode         fp8 -> float32, from the first n bytes of the same buffer read as fp8 patterns (every
//                      pattern, NaNs included) into output_buffer();
//   mx_quantize        the same float32 values as OCP MX blocks of 32 of each element type (registry.hpp's
//                      MxConversion::quantize): scales and elements into output_buffer();
//   fp8_round          float32 onto the fp8 grid in float32, as the scaled modes cast (Fp8Conversion::round),
//                      with current scaling's scale of the input (fp8_scale of its amax, 1) and its reciprocal;
//   mx_round           the MX blocks read back in float32 (MxConversion::round), as MXFP8 casts.
// The conversions have no data-dependent branch, so the inputs' values do not change their speed.
//
// Counters (tools/bench_report.py reads them):
//   elements_per_second     values converted per second;
//   bytes_per_second        bytes read per second (4 per element encoding, 1 decoding);
//   bytes_moved_per_second  bytes read + written per second (5 per element either way; mx_quantize 5 + 1/32;
//                           the roundings 8, float32 in and out);
//   n                       elements per call (not a rate);
//   roof_fraction           bytes_moved_per_second / the copy roof of the level (bench_roof_memory.cpp): a conversion
//                           streams its input to its output like a copy, whose bytes moved it is compared with.
// Label: op=<suite> mode=fp8 (mx) isa=<isa> storage=<format> roof=copy/<level>.
#include <cstdint>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"
#include "halfmap/conversions.hpp"
#include "halfmap/fp8_scaling.hpp"

namespace halfmap::bench {
namespace {

enum class Direction { encode, encode_nonsat, decode };

constexpr std::string_view suite_name(Direction d) {
  return d == Direction::encode ? "fp8_encode" : d == Direction::encode_nonsat ? "fp8_encode_nonsat" : "fp8_decode";
}

/// The counters of one benchmark converting n values per call, reading `read` and moving (reading + writing)
/// `moved` bytes per value.
void add_counters(benchmark::State& state, const Level& level, std::size_t n, double read, double moved) {
  const double elements = static_cast<double>(state.iterations()) * static_cast<double>(n);
  state.counters["elements_per_second"] = benchmark::Counter(elements, benchmark::Counter::kIsRate);
  state.counters["bytes_per_second"] = benchmark::Counter(elements * read, benchmark::Counter::kIsRate);
  state.counters["bytes_moved_per_second"] = benchmark::Counter(elements * moved, benchmark::Counter::kIsRate);
  state.counters["n"] = benchmark::Counter(static_cast<double>(n));
  add_copy_roof_fraction(state, level, moved * static_cast<double>(n));
}

void run_convert(benchmark::State& state, const Fp8Conversion& c, Direction d, const Level& level) {
  state.SetLabel(fmt::format("op={} mode=fp8 isa={} storage={} roof=copy/{}", suite_name(d), isa_name(c.isa),
                             fp8_name(c.format), level.name));
  if (const std::string reason = isa_skip_reason(c.isa); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const std::size_t n = level.bytes / sizeof(float);
  const void* in = input_buffer(DType::f32, level);
  void* out = output_buffer();
  if (d == Direction::decode) {
    for (auto _ : state) {
      c.decode(static_cast<const std::uint8_t*>(in), static_cast<float*>(out), n);
      benchmark::ClobberMemory();
    }
  } else {
    const Fp8EncodeFn encode = c.encode(d == Direction::encode ? Fp8Overflow::saturate : Fp8Overflow::nonsaturating);
    for (auto _ : state) {
      encode(static_cast<const float*>(in), static_cast<std::uint8_t*>(out), n);
      benchmark::ClobberMemory();
    }
  }
  add_counters(state, level, n, d == Direction::decode ? 1.0 : 4.0, 5.0);
}

/// mx_quantize/<conversion>/<level>: n = level bytes / 4 float32 values in blocks of 32, quantised (scales and
/// elements written).
void run_mx(benchmark::State& state, const MxConversion& c, const Level& level) {
  state.SetLabel(fmt::format("op=mx_quantize mode=mx isa={} storage={} roof=copy/{}", isa_name(c.isa), mx_name(c.elem),
                             level.name));
  if (const std::string reason = isa_skip_reason(c.isa); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const std::size_t blocks = level.bytes / sizeof(float) / kMxBlock, n = blocks * kMxBlock;
  const auto* in = static_cast<const float*>(input_buffer(DType::f32, level));
  auto* out = static_cast<std::uint8_t*>(output_buffer());
  for (auto _ : state) {
    c.quantize(in, blocks, out, out + blocks);
    benchmark::ClobberMemory();
  }
  add_counters(state, level, n, 4.0, 5.0 + 1.0 / double(kMxBlock));  // 1 element and 1/32 of a scale written
}

/// fp8_round/<conversion>/<level> and mx_round/<conversion>/<level>: n float32 values onto the grid by
/// round(in, out, n), into output_buffer(); `op_mode` starts the label.
template <class Round>
void run_round(benchmark::State& state, std::string_view op_mode, Isa isa, std::string_view storage, const Level& level,
               Round round) {
  state.SetLabel(fmt::format("{} isa={} storage={} roof=copy/{}", op_mode, isa_name(isa), storage, level.name));
  if (const std::string reason = isa_skip_reason(isa); !reason.empty()) {
    state.SkipWithError(reason.c_str());
    return;
  }
  const std::size_t n = level.bytes / sizeof(float);
  const auto* in = static_cast<const float*>(input_buffer(DType::f32, level));
  auto* out = static_cast<float*>(output_buffer());
  for (auto _ : state) {
    round(in, out, n);
    benchmark::ClobberMemory();
  }
  add_counters(state, level, n, 4.0, 8.0);
}
void run_fp8_round(benchmark::State& state, const Fp8Conversion& c, const Level& level) {
  const float scale = fp8_scale(1.0f, c.format), unscale = 1.0f / scale;
  run_round(state, "op=fp8_round mode=fp8", c.isa, fp8_name(c.format), level,
            [&](const float* in, float* out, std::size_t n) { c.round(in, n, scale, unscale, out); });
}
void run_mx_round(benchmark::State& state, const MxConversion& c, const Level& level) {
  run_round(state, "op=mx_round mode=mx", c.isa, mx_name(c.elem), level,
            [&](const float* in, float* out, std::size_t n) { c.round(in, n, out); });
}

}  // namespace

void register_convert_benchmarks() {
  for (const MxConversion& c : mx_conversions()) {
    for (const Level& level : kLevels) {
      const std::string name = fmt::format("mx_quantize/{}/{}", c.name, level.name);
      benchmark::RegisterBenchmark(name.c_str(), [&c, &level](benchmark::State& state) { run_mx(state, c, level); });
    }
  }
  for (Direction d : {Direction::encode, Direction::encode_nonsat, Direction::decode}) {
    for (const Fp8Conversion& c : fp8_conversions()) {
      for (const Level& level : kLevels) {
        const std::string name = fmt::format("{}/{}/{}", suite_name(d), c.name, level.name);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [&c, d, &level](benchmark::State& state) { run_convert(state, c, d, level); });
      }
    }
  }
  for (const Fp8Conversion& c : fp8_conversions()) {
    for (const Level& level : kLevels) {
      const std::string name = fmt::format("fp8_round/{}/{}", c.name, level.name);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&c, &level](benchmark::State& state) { run_fp8_round(state, c, level); });
    }
  }
  for (const MxConversion& c : mx_conversions()) {
    for (const Level& level : kLevels) {
      const std::string name = fmt::format("mx_round/{}/{}", c.name, level.name);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&c, &level](benchmark::State& state) { run_mx_round(state, c, level); });
    }
  }
}

}  // namespace halfmap::bench
