// Shared pieces of halfmap_bench: the named sizes, the deterministic inputs and the buffers that hold them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halfmap/cpu.hpp"
#include "halfmap/registry.hpp"

namespace benchmark {
class State;
}

namespace halfmap::bench {

/// A memory level a benchmark is sized for. Every kernel at a level reads the same number of bytes per call,
/// whatever its storage type and operation (dot reads two arrays of bytes/2 each), so bytes/s compare directly
/// across kernels; elements/s then differ by the element size (fp16 and bf16 runs process twice the elements of
/// f32 runs). The sizes are fixed, not derived from the host's caches, so names mean the same on every machine;
/// they are chosen for Zen 4 (L1d 32 KiB, L2 1 MiB per core, L3 32 MiB shared): half of L1d, half of L2, and
/// eight times L3.
struct Level {
  std::string_view name;
  std::size_t bytes;  // bytes read per kernel call
};

inline constexpr std::array<Level, 3> kLevels = {{
    {"l1", std::size_t{16} << 10},
    {"l2", std::size_t{512} << 10},
    {"dram", std::size_t{256} << 20},
}};

/// Elements per input array for kernel `k` at `level`.
inline std::size_t elements_for(const Kernel& k, const Level& level) {
  const std::size_t streams = k.op == Op::dot ? 2 : 1;
  return level.bytes / (dtype_size(k.storage) * streams);
}

/// The seed of every input. Fixed, so that every run (and every machine) times the same values.
inline constexpr std::uint64_t kSeed = 0x5EED'4A1F'2024'0001ull;

/// A description of the inputs, for the benchmark context.
inline constexpr std::string_view kInputDescription =
    "uniform in [-1, 1) (multiples of 2^-23, splitmix64 seed 0x5EED4A1F20240001), rounded to the kernel's "
    "storage type; dot reads x and y as the two halves of one buffer";

/// A buffer of `level.bytes` bytes of inputs of storage type `t`, generated on first request and kept until the
/// program exits (at most 3 storage types x (16 KiB + 512 KiB + 256 MiB), about 770 MiB). Every level holds the
/// same leading values: a smaller level's buffer is a prefix of a larger one's. A dot kernel reads x from the
/// first half and y from the second half. Not thread-safe: benchmarks run one at a time.
const void* input_buffer(DType t, const Level& level);

/// The same inputs, `bytes` bytes of them (the dense benchmarks' operands): the same seed, so a buffer of any
/// size holds the same leading values as every other buffer of its storage type; cached per (t, bytes) like the
/// level buffers (the dense sizes add under 30 MiB per storage type).
const void* input_buffer(DType t, std::size_t bytes);

/// The sizes (M = N = K) of dense_fwd/<kernel>/<size>, halfmap's kernels and the peer libraries' alike.
inline constexpr std::size_t kDenseFwdSizes[] = {64, 128, 256, 512, 1024};

/// The size (M = N = K) of dense_fwd_threads/<kernel>/<threads> and dense_bwd_threads/<kernel>/<threads>.
inline constexpr std::size_t kThreadsSize = 1024;
/// The thread counts those run at: 1, 2, 4, 8, ... below `most`, then `most` itself.
std::vector<unsigned> thread_counts(unsigned most);
/// The most threads of those benchmarks: --halfmap_threads, else HALFMAP_THREADS, else every CPU this process
/// may run on (set once by main before registration).
unsigned& bench_max_threads();

/// Columns of every softmax and xent row (bench_nn.cpp, and the peers' softmax): a classifier's or a vocabulary
/// shard's width, a multiple of every ISA's vector width, and small enough that a row stays in L1 between the
/// kernel's passes over it.
inline constexpr std::size_t kNnCols = 1024;

/// The operands of a size-s dense layer (M = N = K = s) in storage type t, as slices of one buffer of the shared
/// inputs: X = [0, s²), W = [s², 2s²), dY = [2s², 3s²), b = [3s², 3s² + s), all row-major. Generated once per
/// (storage type, size) and kept. The dense benchmarks and the peer libraries' (bench_peers.cpp) read these, so
/// both time the same values.
struct Operands {
  const void* x;
  const void* w;
  const void* dy;
  const void* b;
};
Operands operands(DType t, std::size_t s);

/// A writable buffer of the largest level's bytes (256 MiB), zeroed so that every page is touched, 2 MiB aligned
/// like the inputs, allocated on first request and kept: the outputs of the softmax and xent benchmarks. A
/// benchmark at a smaller level writes a prefix of it. Its contents are garbage to every reader.
void* output_buffer();

/// `count` class labels, uniform in [0, cols) (splitmix64, kSeed), generated on first request and kept per
/// (count, cols); a shorter list is a prefix of a longer one of the same cols.
const std::int32_t* label_buffer(std::size_t count, std::int32_t cols);

/// Why kernel `k` cannot run here ("ISA avx512fp16 not supported by this CPU (needs ...)"), or empty when it can.
std::string skip_reason(const Kernel& k);
/// The same for anything of ISA `isa` (the roof benchmarks).
std::string isa_skip_reason(Isa isa);

/// The roofs measured once at startup by measure_roofs() (bench_roof.cpp); 0 where not measured.
struct Roofs {
  std::array<double, kLevels.size()> read{};   // bytes/s read, per level (kLevels' order)
  std::array<double, kLevels.size()> copy{};   // bytes/s read + written by a copy, per level
  std::array<double, kAllIsas.size()> fma{};   // flops/s at the peak of each ISA (kAllIsas' order)
  std::array<double, kAllIsas.size()> f16c{};  // flops/s of the F16C round-trip FMA (avx2, avx512)
};
const Roofs& roofs();
/// Measures the read and copy roofs of every level, the FMA roof of every enabled ISA and the F16C round-trip
/// roof of avx2 and avx512, each for `seconds` of CPU time, and adds them to the benchmark context
/// (roof_read_<level>_bytes_per_second, roof_copy_<level>_bytes_per_second, roof_fma_<isa>_flops_per_second,
/// roof_f16c_<isa>_flops_per_second, roof_method). Call once, before RunSpecifiedBenchmarks.
void measure_roofs(double seconds);
/// Adds the counter roof_fraction = (bytes read per second) / the read roof of `level`, if measured.
void add_memory_roof_fraction(benchmark::State& state, const Level& level, double bytes_per_call);
/// Adds the counter roof_fraction = (bytes read + written per second) / the copy roof of `level`, if measured:
/// the roof of softmax, softmax_naive and xent, which write as many bytes as they read.
void add_copy_roof_fraction(benchmark::State& state, const Level& level, double bytes_moved_per_call);
/// Adds the counter roof_fraction = (flops per second) / the FMA roof of the ISA and arithmetic of dense kernel
/// `k` (bench_roof.cpp, compute_roof_isa), if measured; none for isa ref.
void add_compute_roof_fraction(benchmark::State& state, const Kernel& k, double flops_per_call);
/// For a per-operation f16 kernel of isa avx2 or avx512 (mode f16: f32 arithmetic rounded to fp16 with F16C
/// after every operation), adds the counter f16c_roof_fraction = (flops per second) / the F16C round-trip roof of
/// its ISA, if measured; nothing for any other kernel. A reduction passes 2 flops per rounded operation (one per
/// element for sum, sumsq and dot): each costs one round trip, like one FMA of the roof.
void add_f16c_roof_fraction(benchmark::State& state, const Kernel& k, double flops_per_call);
/// The roof dense kernel `k` is compared with, named like its benchmark without the "roof/": "fma/<isa>" (the FMA
/// of its ISA and arithmetic, bench_roof.cpp), or "none" for isa ref.
std::string compute_roof(const Kernel& k);

/// Labels a kernel benchmark with the kernel's registry facts and its roof, as key=value words:
/// "op=<op> mode=<mode> isa=<isa> storage=<storage> roof=<roof>", roof as in compute_roof() or "read/<level>"
/// for the memory-bound kernels. tools/bench_report.py reads them from here (or from `halfmap info --json`)
/// rather than from the kernel's name, and the roof rule stays in this program only. Call it before any
/// SkipWithError, so that a skipped benchmark is labelled too.
void label_kernel(benchmark::State& state, const Kernel& k, std::string_view roof);

/// Whether the suites of `family` (bench_<family>.cpp) time the kernel: its op's row says so (ops.hpp) and its
/// function is set.
inline bool times_in(BenchFamily family, const Kernel& k) { return op_info(k.op).bench == family && kernel_has_fn(k); }

/// Registers reduce/<kernel>/<level> for every reduction kernel in the registry (bench_reduce.cpp).
void register_reduce_benchmarks();

/// The dense benchmarks' sizes (M = N = K), operations and FLOP count in words, for the benchmark context
/// (bench_dense.cpp).
std::string dense_description();
/// Registers dense_fwd/<kernel>/<size> and dense_bwd/<kernel>/<size> for every dense kernel in the registry, and
/// dense_fwd_threads/<kernel>/<threads> and dense_bwd_threads/<kernel>/<threads> for every one but isa ref's
/// (bench_dense.cpp).
void register_dense_benchmarks();

/// The loss and softmax benchmarks' shapes and what they count, in words, for the benchmark context
/// (bench_nn.cpp).
std::string nn_description();
/// Registers <op>/<kernel>/<level> for every kernel of ops mse, softmax, softmax_naive and xent in the registry
/// (bench_nn.cpp).
void register_nn_benchmarks();

/// The attention benchmarks' shape and what they count, in words, for the benchmark context (bench_attention.cpp).
std::string attention_description();
/// Registers attention_prescale/<kernel>/<len> and attention_postscale/<kernel>/<len> for every attention kernel
/// in the registry (bench_attention.cpp).
void register_attention_benchmarks();

/// Registers fp8_encode/<conversion>/<level>, fp8_encode_nonsat/<conversion>/<level> and
/// fp8_decode/<conversion>/<level> for every fp8 conversion in the registry (bench_convert.cpp).
void register_convert_benchmarks();

/// The peer libraries built into this binary and missing from it, their versions and threading, and the result
/// of each peer's correctness and floating-point-environment checks, for the benchmark context
/// (bench_peers.cpp). The checks run here, once, before any benchmark.
void add_peer_context();
/// Registers dense_fwd/<name>/<size>, softmax/<name>/<level> and layernorm/<name>/<level> for every timed peer of
/// the libraries built in (<name>: <lib>_<dtype>_<op>__peer), and dense_fwd_threads/<name>/<threads> for the peers
/// that run on several threads (bench_peers.cpp).
void register_peer_benchmarks();

/// Registers roof/read/<level>, roof/copy/<level>, roof/fma/<isa> and roof/f16c/<isa> (bench_roof.cpp).
void register_roof_benchmarks();

}  // namespace halfmap::bench
