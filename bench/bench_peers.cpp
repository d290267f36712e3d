// The libraries users pick instead of halfmap, timed on halfmap's own shapes and inputs: every timed peer of the
// libraries in this binary's peer list (generated/peer_lists.inc, written by cmake/peers.cmake; the adapters are
// src/peers/<lib>.cpp, one per library, which the sweep maps too), named as the sweep names them,
// <lib>_<dtype>_<op>__peer:
//
//   dense_fwd/<name>/<size>          Y = X·W + b at the sizes of dense_fwd (kDenseFwdSizes), on the same operands as
//                                    halfmap's dense kernels of that storage type (operands());
//   softmax/<name>/<level>           rows × kNnCols values of the dtype (f32, bf16, f16) at each level, from the
//   layernorm/<name>/<level>         same input buffer into output_buffer(), as halfmap's softmax and layernorm
//                                    benchmarks of that storage type (layernorm: γ and β the buffer's first two
//                                    rows, ε = 1e-5, forward only).
//   dense_fwd_threads/<name>/<threads>  the peers that run on several threads (Timing::threaded: oneDNN,
//                                    OpenBLAS) at kThreadsSize on each of halfmap's thread counts, timed by wall
//                                    clock like halfmap's dense_fwd_threads/ (bench_dense.cpp).
//
// The call is prepared once per benchmark, untimed (Timing: library objects created, operands converted, weights
// transposed and packed); what is timed is Prepared::run(). Where the environment capped a library's ISA
// (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE: tools/main.sh's extra runs), its peers are named
// <lib>_<isa>_<dtype>_<op>__peer (peers::capped_name), so that a capped and an uncapped run never share a name.
//
// Counters: those of the halfmap benchmarks they compare with (flops_per_second and size; bytes_per_second,
// elements_per_second and n). A dense peer's label uses the words of halfmap's (label_kernel): op=dense_fwd, mode=
// (f32, bf16_f32acc; none for fp16, whose arithmetic differs by library), isa= when the library says which ISA's
// code it runs (Timing::isa), storage=, and roof=fma/<isa> where halfmap measures that roof for the dtype's
// arithmetic, else roof=none. What each library's call does, what is timed, and how it is held to one thread is at
// the top of src/peers/<lib>.cpp and in the context (peer_<lib>). Each library is optional: the context lists
// peers_built and peers_missing (with the reason).
//
// Before any benchmark, every timed peer is checked once (add_peer_context):
//   * its result: peers::check_error (src/peers/check.cpp, the sweep's check too) runs the prepared call on small
//     deterministic inputs against float64 on the stored values, max|y - y_f64| / max(1, max|y_f64|) within the
//     peer's tolerance. Otherwise every benchmark of that peer skips with the error ("wrong result: ..."), so a
//     misused API never gets a speed published;
//   * the floating-point modes (MXCSR / FPCR, not MXCSR's sticky exception flags) before and after checking it and
//     creating and running it. A peer that left flushing on would silently change every later benchmark: they
//     would be restored, and the context would say so (none of Debian 12's four does);
//   * dense peers: whether they keep subnormals: a 16×16 layer of x = 2^-130 (f32, bf16) or 2^-20 (fp16),
//     w = 1/2, b = 0, whose exact result 8x is subnormal. A library can flush inside its calls and leave MXCSR
//     as it found it (xnn_run_operator passes PTHREADPOOL_FLAG_DISABLE_DENORMALS: pthreadpool sets FTZ and DAZ
//     for the call, even without a pool, and restores them after), and vdpbf16ps (oneDNN's bf16 matmul) flushes
//     whatever MXCSR says; this probe sees both (context peers_subnormals_flushed).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_util.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/half.hpp"
#include "peers/peers.hpp"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace halfmap::bench {
namespace {

/// Puts back a floating-point control register a peer changed.
void restore_fp_env(unsigned long raw) {
#if defined(__x86_64__)
  _mm_setcsr(static_cast<unsigned>(raw));
#elif defined(__aarch64__)
  asm volatile("msr fpcr, %0" : : "r"(raw));
#endif
}

/// The modes of a floating-point control register. x86 MXCSR bits 0-5 are sticky exception flags, not modes:
/// any library's arithmetic may set them (a subnormal operand sets DE), and halfmap never reads them.
unsigned long fp_modes(unsigned long raw) {
#if defined(__x86_64__)
  return raw & ~0x3Ful;
#else
  return raw;
#endif
}

/// Records a change of the floating-point modes since `before` into `note` and undoes it.
void guard_fp_env(const FpEnv& before, std::string_view when, std::string& note) {
  const FpEnv after = read_fp_env();
  if (fp_modes(after.raw) == fp_modes(before.raw)) return;
  note += fmt::format("{}changed {} -> {} {} (restored)", note.empty() ? "" : "; ", before.describe(), after.describe(),
                      when);
  restore_fp_env(before.raw);
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

/// `bytes` bytes, 64-byte aligned and zeroed, as halfmap's dense benchmarks' outputs (bench_dense.cpp).
std::unique_ptr<void, FreeDeleter> output(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::unique_ptr<void, FreeDeleter>(p);
}

/// A timed peer of a library set up in this process, with its benchmarks' kernel name.
struct Timed {
  const peers::Peer* peer;
  std::string name;  // the peer's, or peers::capped_name() of it
  std::size_t lib;   // index of its library in PeerState::libs
  std::string key() const { return fmt::format("{}/{}", op_name(peer->kernel.op), name); }
};

struct PeerState {
  std::vector<peers::Library> libs;
  std::vector<std::string> built;                          // "onednn", "onednn_avx2" (a capped library)
  std::vector<std::string> missing;                        // "xnnpack: not found at build time (install ...)."
  std::vector<std::pair<std::string, std::string>> about;  // context: "peer_<lib>" -> version and threading
  std::vector<Timed> timed;
  std::map<std::string, std::string> skip;                  // "<op>/<name>" -> why every benchmark of it skips
  std::vector<std::pair<std::string, std::string>> checks;  // context: "peer_check/<op>/<name>" -> result
  std::vector<std::string> fp_env_changed, subnormals_flushed;
};

/// Stores v, rounded to storage type t, into the n elements at p.
void fill(DType t, void* p, std::size_t n, float v) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::f32:
        static_cast<float*>(p)[i] = v;
        break;
      case DType::f16:
        static_cast<f16*>(p)[i] = to_f16(v);
        break;
      case DType::bf16:
        static_cast<bf16*>(p)[i] = to_bf16(v);
        break;
    }
  }
}

/// The f32 value of element i of a row-major array of storage type t.
float widen_at(DType t, const void* values, std::size_t i) {
  switch (t) {
    case DType::f16:
      return to_f32(static_cast<const f16*>(values)[i]);
    case DType::bf16:
      return to_f32(static_cast<const bf16*>(values)[i]);
    case DType::f32:
      break;
  }
  return static_cast<const float*>(values)[i];
}

/// The subnormal probe (see the top of this file): "kept", "flushed to zero" or what came out instead.
std::string subnormal_probe(const peers::Peer& p, const FpEnv& env, std::string& fp_note) {
  constexpr std::size_t s = 16;
  const DType t = p.kernel.storage;
  const float x = t == DType::f16 ? 0x1p-20f : 0x1p-130f;
  const float want = 8 * x;                                                           // 16 products of x/2, exact
  std::vector<unsigned char> xs(s * s * 4), ws(s * s * 4), bs(s * 4), ys(s * s * 4);  // room for any storage type
  fill(t, xs.data(), s * s, x);
  fill(t, ws.data(), s * s, 0.5f);
  fill(t, bs.data(), s, 0.0f);
  try {
    p.kernel.dense({s, s, s, xs.data(), ws.data(), bs.data(), ys.data(), Act::identity});
    guard_fp_env(env, "by the subnormal probe", fp_note);
    std::vector<float> y(s * s);
    for (std::size_t i = 0; i < s * s; ++i) y[i] = widen_at(t, ys.data(), i);
    if (std::all_of(y.begin(), y.end(), [&](float v) { return v == want; })) return "kept";
    if (std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; })) return "flushed to zero";
    return fmt::format("y[0] = {:a}, want {:a}", y[0], want);
  } catch (const std::exception& e) {
    guard_fp_env(env, "by the subnormal probe", fp_note);
    return fmt::format("not run ({})", e.what());
  }
}

/// The implementation the library chose for a dense peer at the benchmarks' smallest size, where it says, from a
/// prepared call created and run once as the benchmark's are.
std::string dense_detail(const peers::Peer& p, const FpEnv& env, std::string& fp_note) {
  const std::size_t s = kDenseFwdSizes[0];
  const Operands in = operands(p.kernel.storage, s);
  const auto y = output(s * s * dtype_size(p.kernel.storage));
  auto run = p.timing.dense({s, s, s, in.x, in.w, in.b, y.get(), Act::identity}, 1);
  guard_fp_env(env, "by creating it", fp_note);
  run->run();
  guard_fp_env(env, "by a call", fp_note);
  return run->detail();
}

void check(PeerState& st, const Timed& t) {
  const peers::Peer& p = *t.peer;
  const std::string key = t.key(), inputs = peers::check_inputs(p.kernel.op);
  const FpEnv env = read_fp_env();
  std::string fp_note, result, detail;
  try {
    const double err = peers::check_error(p.kernel);
    guard_fp_env(env, "by its check", fp_note);
    if (!(err <= p.tolerance)) {
      st.skip[key] = fmt::format(
          "wrong result: max|y - y_f64| / max(1, max|y_f64|) = {:.3g} > {:.0e} against "
          "float64 on {} (src/peers/check.cpp)",
          err, p.tolerance, inputs);
      result = st.skip[key];
    } else {
      result = fmt::format(
          "ok: max|y - y_f64| / max(1, max|y_f64|) = {:.2g} against float64 on {} (tolerance "
          "{:.0e})",
          err, inputs, p.tolerance);
    }
    if (p.timing.dense != nullptr) detail = dense_detail(p, env, fp_note);
  } catch (const std::exception& e) {  // peers::Unsupported, or the library's own
    guard_fp_env(env, "by its check", fp_note);
    if (!fp_note.empty()) st.fp_env_changed.push_back(key);
    st.skip[key] = e.what();
    st.checks.emplace_back("peer_check/" + key, fmt::format("skipped: {}", e.what()));
    return;
  }
  std::string probe;
  if (p.timing.dense != nullptr) {
    probe = subnormal_probe(p, env, fp_note);
    if (probe != "kept" && !probe.starts_with("not run")) st.subnormals_flushed.push_back(key);
  }
  if (!fp_note.empty()) st.fp_env_changed.push_back(key);
  st.checks.emplace_back(
      "peer_check/" + key,
      fmt::format("{}{}; fp env: {}{}", result, detail.empty() ? "" : "; implementation " + detail,
                  fp_note.empty() ? "unchanged" : fp_note, probe.empty() ? "" : "; subnormal result: " + probe));
}

PeerState make_state() {
  PeerState st;
  const std::vector<peers::Listed> listed = {
#include "peer_lists.inc"
  };
  for (const peers::Listed& l : listed) {
    peers::Opened o = peers::open_library(l);
    if (o.library) {
      st.libs.push_back(std::move(*o.library));
    } else {
      st.missing.push_back(fmt::format("{}: {}", o.name, o.reason));
    }
  }
  for (std::size_t i = 0; i < st.libs.size(); ++i) {  // st.libs is complete: the pointers below stay valid
    const peers::Library& lib = st.libs[i];
    const std::string name = lib.cap.empty() ? lib.name : fmt::format("{}_{}", lib.name, lib.cap);
    st.built.push_back(name);
    st.about.emplace_back("peer_" + name, lib.timing);
    for (const peers::Peer& p : lib.peers) {
      if (!p.timed()) continue;
      const bool capped = !lib.cap.empty() && !p.timing.isa.empty();
      st.timed.push_back(
          {&p, capped ? peers::capped_name(p.kernel.name, lib.name, p.timing.isa) : std::string(p.kernel.name), i});
    }
  }
  for (const Timed& t : st.timed) check(st, t);
  return st;
}

PeerState& peer_state() {
  static PeerState st = make_state();
  return st;
}

std::string dense_label(const peers::Peer& p) {
  const DType t = p.kernel.storage;
  const std::string& isa = p.timing.isa;
  const bool f32_roof = t == DType::f32 && (isa == "avx2" || isa == "avx512" || isa == "neon");
  const bool bf16_roof = t == DType::bf16 && isa == "avx512bf16";
  std::string label = "op=dense_fwd";
  if (t != DType::f16) label += t == DType::f32 ? " mode=f32" : " mode=bf16_f32acc";
  if (!isa.empty()) label += " isa=" + isa;
  return label + fmt::format(" storage={} roof={}", dtype_name(t), f32_roof || bf16_roof ? "fma/" + isa : "none");
}

void run_dense(benchmark::State& state, const Timed& t, std::size_t s, unsigned threads = 1) {
  const peers::Peer& p = *t.peer;
  state.SetLabel(dense_label(p));
  if (const auto it = peer_state().skip.find(t.key()); it != peer_state().skip.end()) {
    state.SkipWithError(it->second.c_str());  // copied by the library
    return;
  }
  const Operands in = operands(p.kernel.storage, s);
  const auto y = output(s * s * dtype_size(p.kernel.storage));
  std::unique_ptr<peers::Prepared> run;
  try {
    run = p.timing.dense({s, s, s, in.x, in.w, in.b, y.get(), Act::identity}, threads);  // untimed
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const FpEnv env = read_fp_env();
  run->run();  // untimed, as halfmap's first call: buffers grow here
  for (auto _ : state) {
    run->run();
    benchmark::ClobberMemory();
  }
  std::string unused;
  guard_fp_env(env, "", unused);  // the check saw no change; should a larger size differ, later runs stay clean
  const auto n = static_cast<double>(s);
  state.counters["flops_per_second"] = benchmark::Counter(2 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["size"] = benchmark::Counter(n);
  if (p.timing.threaded) state.counters["threads"] = benchmark::Counter(threads);
}

void run_row(benchmark::State& state, const Timed& t, const Level& level) {
  const peers::Peer& p = *t.peer;
  if (const auto it = peer_state().skip.find(t.key()); it != peer_state().skip.end()) {
    state.SkipWithError(it->second.c_str());
    return;
  }
  const DType storage = p.kernel.storage;
  const std::size_t esize = dtype_size(storage), rows = level.bytes / (kNnCols * esize);
  const void* x = input_buffer(storage, level);
  std::unique_ptr<peers::Prepared> run;
  try {
    if (p.timing.softmax != nullptr) {
      run = p.timing.softmax({rows, kNnCols, x, output_buffer()});
    } else {  // γ, β: the buffer's first two rows, as bench_nn.cpp's layernorm reads them
      const auto* in = static_cast<const unsigned char*>(x);
      run = p.timing.norm({rows, kNnCols, x, x, in + kNnCols * esize, kLayerNormEpsTorch, output_buffer(), nullptr,
                           nullptr, nullptr, nullptr, nullptr, nullptr});
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const FpEnv env = read_fp_env();
  for (auto _ : state) {
    run->run();
    benchmark::ClobberMemory();
  }
  std::string unused;
  guard_fp_env(env, "", unused);
  const std::size_t elements = rows * kNnCols;
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(elements * esize), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_moved_per_second"] =
      benchmark::Counter(static_cast<double>(2 * elements * esize), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["elements_per_second"] =
      benchmark::Counter(static_cast<double>(elements), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["n"] = benchmark::Counter(static_cast<double>(elements));
}

std::string join(const std::vector<std::string>& items, std::string_view none, std::string_view sep = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : std::string(sep)) + s;
  return out.empty() ? std::string(none) : out;
}

}  // namespace

void add_peer_context() {
  using benchmark::AddCustomContext;
  const PeerState& st = peer_state();
  AddCustomContext("peers_built", join(st.built, "none"));
  AddCustomContext("peers_missing", join(st.missing, "none", " "));  // each one a sentence
  for (const auto& [key, value] : st.about) AddCustomContext(key, value);
  for (const auto& [key, value] : st.checks) AddCustomContext(key, value);
  AddCustomContext("peers_fp_env_changed",
                   join(st.fp_env_changed, "none (same modes before and after every peer call checked)"));
  AddCustomContext("peers_subnormals_flushed", join(st.subnormals_flushed, "none"));
}

void register_peer_benchmarks() {
  const std::vector<Timed>& timed = peer_state().timed;
  // Library by library: its dense peers, then its softmax and layernorm peers.
  for (std::size_t lib = 0; lib < peer_state().libs.size(); ++lib) {
    for (const Timed& t : timed) {
      if (t.lib != lib || t.peer->timing.dense == nullptr) continue;
      for (const std::size_t s : kDenseFwdSizes) {
        const std::string name = fmt::format("dense_fwd/{}/{}", t.name, s);
        benchmark::RegisterBenchmark(name.c_str(), [&t, s](benchmark::State& state) { run_dense(state, t, s); });
      }
    }
    for (const Timed& t : timed) {
      if (t.lib != lib || t.peer->timing.dense != nullptr) continue;
      for (const Level& level : kLevels) {
        const std::string name = fmt::format("{}/{}/{}", op_name(t.peer->kernel.op), t.name, level.name);
        benchmark::RegisterBenchmark(name.c_str(), [&t, &level](benchmark::State& state) { run_row(state, t, level); });
      }
    }
  }
  // Last: a library's threads may spin for a while after its calls, which would slow what runs next.
  for (const Timed& t : timed) {
    if (t.peer->timing.dense == nullptr || !t.peer->timing.threaded) continue;
    for (const unsigned n : thread_counts(bench_max_threads())) {
      const std::string name = fmt::format("dense_fwd_threads/{}/{}", t.name, n);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&t, n](benchmark::State& state) { run_dense(state, t, kThreadsSize, n); })
          ->UseRealTime()
          ->MeasureProcessCPUTime();
    }
  }
}

}  // namespace halfmap::bench
