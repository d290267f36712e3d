// halfmap_bench: Google Benchmark over the kernel registry, with the machine facts a result needs in its context.
//
//   halfmap_bench [--benchmark_filter=REGEX] [--benchmark_out=FILE --benchmark_out_format=json]
//                 [--halfmap_roof_time=SECONDS] [--halfmap_threads=N] [...]
//
// Benchmarks: reduce/<kernel>/<level> (bench_reduce.cpp), dense_fwd/<kernel>/<size> and
// dense_bwd/<kernel>/<size> (bench_dense.cpp), mse/, softmax/, softmax_naive/, xent/, layernorm/, rmsnorm/, gelu/
// and gelu_tanh/<kernel>/<level> (bench_nn.cpp), attention_prescale/ and attention_postscale/<kernel>/<len>
// (bench_attention.cpp), the peer libraries on the same shapes and inputs, <op>/<lib>_<dtype>_<op>__peer/<arg> of
// dense_fwd, softmax and layernorm (bench_peers.cpp), and the roofs roof/read/<level>, roof/copy/<level>,
// roof/fma/<isa> and roof/f16c/<isa> (bench_roof.cpp). Before any of them, the roofs the kernels are compared with
// (read and copy at each level, the FMA peak of each enabled ISA, the F16C round trip) are measured once,
// --halfmap_roof_time seconds each (default 0.25; 0: not measured, no roof_fraction counters), and written to the
// context; each kernel benchmark reports its rate / its roof as the counter roof_fraction. --halfmap_threads
// (1 to 1024; default HALFMAP_THREADS, else every CPU this process may run on) is the most threads of the
// dense_fwd_threads/ and dense_bwd_threads/ benchmarks, which run at 1, 2, 4, ... and that many. Unless
// --benchmark_min_time is given, each benchmark runs for at least 0.1 s (not the library's 0.5 s), so that the
// suites (every reduction kernel at 3 sizes, every dense kernel at 2 to 5) stay within minutes. The
// floating-point environment is only read, never changed: flush-to-zero and denormals-are-zero stay off (a peer
// library that changed it would be put back, and the context would say so: bench_peers.cpp).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"
#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/parallel.hpp"

namespace {

constexpr const char* kDefaultMinTime = "--benchmark_min_time=0.1";
constexpr std::string_view kRoofTimeFlag = "--halfmap_roof_time=";
constexpr std::string_view kThreadsFlag = "--halfmap_threads=";
constexpr std::string_view kInterleaveFlag = "--benchmark_enable_random_interleaving";
constexpr double kDefaultRoofTime = 0.25;

std::string cpu_feature_list(const halfmap::CpuFeatures& f) {
  std::string out;
  for (const halfmap::CpuFlag& flag : halfmap::kCpuFlags) {
    if (!(f.*flag.member)) continue;
    out += out.empty() ? "" : " ";
    out += flag.name;
  }
  return out.empty() ? "none" : out;
}

/// The ISAs for which `pred` holds, comma-separated.
template <class Pred>
std::string isa_list(Pred pred) {
  std::string out;
  for (halfmap::Isa isa : halfmap::kAllIsas) {
    if (!pred(isa)) continue;
    out += out.empty() ? "" : ",";
    out += halfmap::isa_name(isa);
  }
  return out;
}

void add_context(std::string_view min_time, bool interleaved) {
  using benchmark::AddCustomContext;
  AddCustomContext("halfmap_version", HALFMAP_VERSION);
  AddCustomContext("halfmap_git_commit", HALFMAP_GIT_COMMIT);
  AddCustomContext("halfmap_compiler", HALFMAP_COMPILER);
  std::string_view flags = HALFMAP_CXX_FLAGS;  // CMAKE_CXX_FLAGS + the build type's; often starts with a space
  while (flags.starts_with(' ')) flags.remove_prefix(1);
  AddCustomContext("halfmap_cxx_flags", std::string(flags));
  const halfmap::CpuFeatures& f = halfmap::cpu_features();
  AddCustomContext("cpu_model", f.model.empty() ? "unknown" : f.model);
  AddCustomContext("cpu_features", cpu_feature_list(f));
  AddCustomContext("isa_compiled", isa_list(halfmap::isa_compiled));
  AddCustomContext("isa_supported",
                   isa_list([](halfmap::Isa i) { return halfmap::isa_compiled(i) && halfmap::isa_supported(i); }));
  AddCustomContext("isa_enabled", isa_list(halfmap::isa_enabled));
  const char* cap = std::getenv("HALFMAP_ISA");
  AddCustomContext("halfmap_isa_cap", cap != nullptr && *cap != '\0' ? cap : "unset");
  const std::optional<unsigned> env_threads = halfmap::threads_env();
  AddCustomContext("threads", fmt::format("dense_*_threads/ up to {} threads; {} CPUs this process may run on; "
                                          "HALFMAP_THREADS {}",
                                          halfmap::bench::bench_max_threads(), halfmap::hardware_threads(),
                                          env_threads ? std::to_string(*env_threads) : "unset"));
  const halfmap::FpEnv env = halfmap::read_fp_env();
  AddCustomContext("fp_env", env.describe());
  std::string levels;
  for (const auto& level : halfmap::bench::kLevels) {
    levels += fmt::format("{}{}={} bytes", levels.empty() ? "" : ", ", level.name, level.bytes);
  }
  AddCustomContext("bench_levels", levels + " read per call (dot: half from x, half from y)");
  AddCustomContext("bench_inputs", std::string(halfmap::bench::kInputDescription));
  AddCustomContext("bench_dense", halfmap::bench::dense_description());
  const halfmap::CacheSizes& caches = halfmap::cache_sizes();
  AddCustomContext(
      "gemm_caches",
      fmt::format("L1d {} KiB, L2 {} KiB, L3 {} KiB ({} KiB per logical CPU sharing it), from {}: the "
                  "dense kernels' cache blocks are chosen from these (gemm_blocks_for)",
                  caches.l1d >> 10, caches.l2 >> 10, caches.l3 >> 10, caches.l3_share >> 10, caches.source));
  AddCustomContext("bench_nn", halfmap::bench::nn_description());
  AddCustomContext("bench_attention", halfmap::bench::attention_description());
  halfmap::bench::add_peer_context();  // also checks every peer once, before any benchmark
  // "--benchmark_min_time=0.1" -> "0.1" (seconds per benchmark, at least)
  AddCustomContext("bench_min_time", std::string(min_time.substr(min_time.find('=') + 1)));
  AddCustomContext("bench_order", interleaved
                                      ? "random interleaving: the repetitions of all benchmarks in one shuffled "
                                        "order (--benchmark_enable_random_interleaving)"
                                      : "each benchmark's repetitions back to back, in registration order");
}

/// The library's reading of a boolean flag's value: true when absent or empty, false for 0, f, n, false, no and
/// off in any case.
bool truthy(std::string_view v) {
  std::string low(v);
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(low == "0" || low == "f" || low == "n" || low == "false" || low == "no" || low == "off");
}

}  // namespace

int main(int argc, char** argv) {
  for (const std::string& err : {halfmap::isa_cap_error(), halfmap::threads_env_error()}) {
    if (!err.empty()) {
      std::fprintf(stderr, "halfmap_bench: %s\n", err.c_str());
      return 2;
    }
  }
  const halfmap::FpEnv env = halfmap::read_fp_env();
  if (!env.ieee()) {
    // Inherited from whoever started us; halfmap never sets it. Timings of subnormal-heavy inputs would lie.
    std::fprintf(stderr, "halfmap_bench: warning: running with flushing on: %s\n", env.describe().c_str());
  }

  std::vector<char*> args;
  std::string default_min_time = kDefaultMinTime;
  std::string_view min_time;  // the last --benchmark_min_time wins, as in the library's own parsing
  double roof_time = kDefaultRoofTime;
  bool interleaved = false;  // the last --benchmark_enable_random_interleaving wins, as for min_time
  bool listing = false;      // --benchmark_list_tests runs no benchmark, so it needs no roof
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i > 0 && arg.starts_with(kRoofTimeFlag)) {  // ours: taken out before the library parses the rest
      char* end = nullptr;
      roof_time = std::strtod(argv[i] + kRoofTimeFlag.size(), &end);
      if (end == argv[i] + kRoofTimeFlag.size() || *end != '\0' || !(roof_time >= 0 && roof_time <= 60)) {
        std::fprintf(stderr, "halfmap_bench: %s: expected seconds between 0 and 60\n", argv[i]);
        return 2;
      }
      continue;
    }
    if (i > 0 && arg.starts_with(kThreadsFlag)) {
      const std::optional<unsigned> t = halfmap::parse_threads(arg.substr(kThreadsFlag.size()));
      if (!t) {
        std::fprintf(stderr, "halfmap_bench: %s: expected a thread count from 1 to %u\n", argv[i],
                     halfmap::kMaxThreads);
        return 2;
      }
      halfmap::bench::bench_max_threads() = *t;
      continue;
    }
    if (i > 0 && arg.starts_with("--benchmark_min_time")) min_time = argv[i];
    if (i > 0 && arg.starts_with(kInterleaveFlag)) {
      const std::string_view rest = arg.substr(kInterleaveFlag.size());
      if (rest.empty() || rest.starts_with('=')) interleaved = truthy(rest.empty() ? rest : rest.substr(1));
    }
    if (i > 0 && (arg == "--benchmark_list_tests" || arg == "--benchmark_list_tests=true")) listing = true;
    args.push_back(argv[i]);
  }
  const int argc_left = static_cast<int>(args.size());
  if (min_time.empty()) {
    args.insert(args.begin() + (argc_left > 0 ? 1 : 0), default_min_time.data());
    min_time = default_min_time;
  }
  int args_count = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&args_count, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 2;
  add_context(min_time, interleaved);
  if (roof_time > 0 && !listing) halfmap::bench::measure_roofs(roof_time);
  halfmap::bench::register_reduce_benchmarks();
  halfmap::bench::register_dense_benchmarks();
  halfmap::bench::register_nn_benchmarks();
  halfmap::bench::register_attention_benchmarks();
  halfmap::bench::register_convert_benchmarks();
  halfmap::bench::register_roof_benchmarks();
  halfmap::bench::register_peer_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
