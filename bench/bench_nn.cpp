// <op>/<kernel>/<level> for ops mse, softmax, softmax_naive, xent, layernorm and rmsnorm: every such kernel of the
// registry at the reductions' three size levels (bench_util.hpp), so that a level reads the same bytes of inputs per
// call here as there, whatever the storage type:
//
//   mse            L = mean((p - y)²) over n = bytes / (2 · element size): p and y are the two halves of the
//                  level's input buffer, like dot's x and y. The loss only: dp is null, so nothing is written
//                  (the gradient's write would halve a read-bound loop's speed and hide what is measured).
//   softmax,       rows × 1024 columns, rows = bytes / (1024 · element size), from the level's input buffer into
//   softmax_naive  output_buffer() (not in place, so every call sees the same inputs).
//   xent           the same rows × 1024 logits, one label per row (uniform in [0, 1024), fixed seed); writes
//                  dlogits into output_buffer(), probs null (the kernel keeps each row's probabilities in its
//                  own scratch): what a training step needs.
//   layernorm,     the same rows × 1024 x, forward only: y written to output_buffer(), γ (and β) the first (and
//   rmsnorm        second) 1024 elements of the input buffer, read from L1 on every row; ε as PyTorch's.
//   gelu,          the same elements, forward only, y written to output_buffer().
//   gelu_tanh
//
// Scalar reference kernels (isa ref) of softmax, softmax_naive, xent, layernorm, rmsnorm and GELU are registered at l1
// and l2 only: a DRAM call (64 Mi f32 or 128 Mi fp16 elements) would take 1.8 to 10 s of CPU time (the l2 times x 512
// on the Zen 4 development machine: f32_softmax__ref 1.8 s, f16_f32acc_softmax__ref 4.8 s, f16_xent__ref 10 s), too
// long for kernels that exist to be right, not fast. The ref mse kernels, at most 1 s (f16_mse__ref), run at all three.
//
// Counters (tools/bench_report.py reads them):
//   bytes_per_second     bytes of input read per second: p and y (mse), x (softmax), logits and labels (xent);
//                        not the bytes written;
//   elements_per_second  elements of p (mse) or of x / logits (softmax, xent) per second;
//   bytes_moved_per_second  softmax, softmax_naive, xent, layernorm, rmsnorm, gelu, gelu_tanh: bytes read + written
//                        (y; dlogits) per second;
//   n                    elements of p or x per call (not a rate);
//   roof_fraction        mse: bytes_per_second / the read roof of the level measured at startup; softmax,
//                        softmax_naive, xent, the norms and GELU: bytes_moved_per_second / the copy roof of the level
//                        (bench_roof_memory.cpp), since they write as many bytes as they read.
// Label: the kernel's op, mode, isa, storage and roof=read/<level> (mse) or roof=copy/<level> (label_kernel,
// bench_util.hpp).
#include <cstdint>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"

namespace halfmap::bench {
namespace {

void run_nn(benchmark::State& state, const Kernel& k, const Level& level) {
  label_kernel(state, k, fmt::format("{}/{}", k.op == Op::mse ? "read" : "copy", level.name));
  // Decided per run, not at registration, so that the skip shows up in the output with its reason.
  if (const std::string reason = skip_reason(k); !reason.empty()) {
    state.SkipWithError(reason.c_str());  // copied by the library
    return;
  }
  const std::size_t esize = dtype_size(k.storage);
  const auto* in = static_cast<const unsigned char*>(input_buffer(k.storage, level));
  std::size_t elements = 0;  // of p, x or logits, per call
  std::size_t bytes = 0;     // read per call
  if (k.op == Op::mse) {
    const std::size_t n = level.bytes / (2 * esize);
    const LossArgs args{n, in, in + n * esize, 1.0f, nullptr};
    for (auto _ : state) {
      float loss = k.loss(args);
      benchmark::DoNotOptimize(loss);
    }
    elements = n;
    bytes = 2 * n * esize;
  } else {
    const std::size_t rows = level.bytes / (kNnCols * esize);
    elements = rows * kNnCols;
    bytes = elements * esize;
    if (k.op == Op::xent) {
      const std::int32_t* labels = label_buffer(rows, static_cast<std::int32_t>(kNnCols));
      const XentArgs args{rows, kNnCols, in, labels, 1.0f, nullptr, output_buffer()};
      for (auto _ : state) {
        float loss = k.xent(args);
        benchmark::DoNotOptimize(loss);
      }
      bytes += rows * sizeof(std::int32_t);
    } else if (is_gelu(k.op)) {
      const GeluArgs args{elements, in, output_buffer(), nullptr, nullptr};
      for (auto _ : state) {
        k.gelu(args);
        benchmark::ClobberMemory();
      }
    } else if (is_norm(k.op)) {
      const float eps = k.op == Op::rmsnorm ? kRmsNormEps : kLayerNormEpsTorch;
      const NormArgs args{rows,    kNnCols,         in,      in,      in + kNnCols * esize,
                          eps,     output_buffer(), nullptr, nullptr, nullptr,
                          nullptr, nullptr,         nullptr};
      for (auto _ : state) {
        k.norm(args);
        benchmark::ClobberMemory();
      }
    } else {
      const SoftmaxArgs args{rows, kNnCols, in, output_buffer()};
      for (auto _ : state) {
        k.softmax(args);
        benchmark::ClobberMemory();
      }
    }
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["elements_per_second"] =
      benchmark::Counter(static_cast<double>(elements), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["n"] = benchmark::Counter(static_cast<double>(elements));
  if (k.op == Op::mse) {
    add_memory_roof_fraction(state, level, static_cast<double>(bytes));
  } else {
    // y (softmax) or dlogits (xent): one element of the storage type per element read.
    const auto moved = static_cast<double>(bytes + elements * esize);
    state.counters["bytes_moved_per_second"] = benchmark::Counter(moved, benchmark::Counter::kIsIterationInvariantRate);
    add_copy_roof_fraction(state, level, moved);
  }
}

}  // namespace

std::string nn_description() {
  return fmt::format(
      "mse: p and y, halves of the level's bytes, loss only (dp null); softmax, softmax_naive: rows x {0} columns "
      "of the level's bytes, written to a separate buffer; xent: the same logits, labels uniform in [0, {0}), "
      "dlogits written, probs null; bytes_per_second counts bytes read (xent: logits and labels), "
      "bytes_moved_per_second bytes read + written (softmax, softmax_naive, xent: their roof is the copy's); isa ref "
      "softmax, softmax_naive and xent kernels at l1 and l2 only (seconds per DRAM call); layernorm, rmsnorm: the "
      "same rows, forward only, y written, gamma and beta the input's first rows; gelu, gelu_tanh: the same "
      "elements, forward, y written",
      kNnCols);
}

void register_nn_benchmarks() {
  for (const Kernel& k : kernels()) {
    if (!times_in(BenchFamily::nn, k)) continue;
    for (const Level& level : kLevels) {
      // isa ref: no DRAM level except for mse (see the top of this file).
      if (k.isa == Isa::ref && k.op != Op::mse && &level == &kLevels.back()) continue;
      // <op>/<kernel>/<level>, split on '/', like reduce/<kernel>/<level> (no Args: see bench_reduce.cpp).
      const std::string name = fmt::format("{}/{}/{}", op_name(k.op), k.name, level.name);
      benchmark::RegisterBenchmark(name.c_str(), [&k, &level](benchmark::State& state) { run_nn(state, k, level); });
    }
  }
}

}  // namespace halfmap::bench
