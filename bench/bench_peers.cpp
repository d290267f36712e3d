// The libraries users pick instead of halfmap, timed on halfmap's own shapes and inputs:
//
//   dense_fwd/<lib>_<dtype>__peer/<size>  Y = X·W + b at the sizes of dense_fwd (kDenseFwdSizes), on the same
//                                         operands as halfmap's dense kernels of that storage type (operands());
//   softmax/<lib>_<dtype>__peer/<level>   rows × kNnCols values of the dtype (f32, bf16, f16) at each level, from
//   layernorm/<lib>_<dtype>__peer/<level> the same input buffer into output_buffer(), as halfmap's softmax and
//                                         layernorm benchmarks of that storage type (layernorm: γ and β the
//                                         buffer's first two rows, ε = 1e-5, forward only).
//   dense_fwd_threads/<lib>_<dtype>__peer/<threads>  the peers that run on several threads (DensePeer::threaded:
//                                         oneDNN, OpenBLAS) at kThreadsSize on each of halfmap's thread counts,
//                                         timed by wall clock like halfmap's dense_fwd_threads/ (bench_dense.cpp).
//
// with the counters of the halfmap benchmarks they compare with (flops_per_second and size; bytes_per_second,
// elements_per_second and n). A dense peer's label uses the words of halfmap's (label_kernel): op=dense_fwd, mode=
// (f32, bf16_f32acc; none for fp16, whose arithmetic differs by library), isa= when the library says which ISA's
// code it runs (DensePeer::isa), storage=, and roof=fma/<isa> where halfmap measures that roof for the dtype's
// arithmetic, else roof=none. What each library's call does, what is timed, and how it is held to one thread is
// at the top of bench/peers/<lib>.cpp and in the context (peer_<lib>). Each library is optional: CMake compiles
// its file only when it finds it (HALFMAP_PEER_<LIB>=1), and the context lists peers_built and peers_missing.
//
// Before any benchmark, every peer is checked once (add_peer_context):
//   * its result: a dense peer's at size 64 against halfmap's f32_dense_fwd__ref on the f32 operands, max|y -
//     y_ref| / max(1, max|y_ref|) within the peer's tolerance (1e-3 for f32, 1e-1 for fp16 and bf16, whose inputs
//     are rounded); a softmax or layernorm peer's at l1 against the ref kernel of its op and storage type
//     (f32_softmax__ref, f16_f32acc_softmax__ref, bf16_f32acc_layernorm__ref, ...), max|y - y_ref| / y_ref
//     (layernorm: / max(1, |y_ref|)) within 1e-3 for f32 and 1e-2 for fp16 and bf16 (one rounding step of the
//     output either way). Otherwise every benchmark of that peer skips
//     with the error, so a misused API never gets a speed published;
//   * the floating-point modes (MXCSR / FPCR, not MXCSR's sticky exception flags) before and after creating and
//     running it. A peer that left flushing on would silently change every later benchmark: they would be
//     restored, and the context would say so (none of Debian 12's four does);
//   * dense peers: whether they keep subnormals: a 16×16 layer of x = 2^-130 (f32, bf16) or 2^-20 (fp16),
//     w = 1/2, b = 0, whose exact result 8x is subnormal. A library can flush inside its calls and leave MXCSR
//     as it found it (xnn_run_operator passes PTHREADPOOL_FLAG_DISABLE_DENORMALS: pthreadpool sets FTZ and DAZ
//     for the call, even without a pool, and restores them after), and vdpbf16ps (oneDNN's bf16 matmul) flushes
//     whatever MXCSR says; this probe sees both (context peers_subnormals_flushed).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
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
  note += fmt::format("{}changed {} -> {} {} (restored)", note.empty() ? "" : "; ", before.describe(),
                      after.describe(), when);
  restore_fp_env(before.raw);
}

struct PeerState {
  std::vector<peers::Library> libs;
  std::vector<std::string> missing;                    // "onednn (install libdnnl-dev)"
  std::map<std::string, std::string> skip;             // "<op>/<name>" -> why every benchmark of it skips
  std::vector<std::pair<std::string, std::string>> checks;  // context: "peer_check/<op>/<name>" -> result
  std::vector<std::string> fp_env_changed, subnormals_flushed;
};

/// Stores v, rounded to storage type t, into the n elements at p.
void fill(DType t, void* p, std::size_t n, float v) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::f32: static_cast<float*>(p)[i] = v; break;
      case DType::f16: static_cast<f16*>(p)[i] = to_f16(v); break;
      case DType::bf16: static_cast<bf16*>(p)[i] = to_bf16(v); break;
    }
  }
}

/// The subnormal probe (see the top of this file): "kept", "flushed to zero" or what came out instead.
std::string subnormal_probe(const peers::DensePeer& p, const FpEnv& env, std::string& fp_note) {
  constexpr std::size_t s = 16;
  const float x = p.source == DType::f16 ? 0x1p-20f : 0x1p-130f;
  const float want = 8 * x;  // 16 products of x/2, exact
  std::vector<unsigned char> xs(s * s * 4), ws(s * s * 4), bs(s * 4);  // room for any storage type
  fill(p.source, xs.data(), s * s, x);
  fill(p.source, ws.data(), s * s, 0.5f);
  fill(p.source, bs.data(), s, 0.0f);
  try {
    auto run = p.make({s, xs.data(), ws.data(), bs.data()});
    run->run();
    guard_fp_env(env, "by the subnormal probe", fp_note);
    std::vector<float> y(s * s);
    run->output_f32(y.data());
    if (std::all_of(y.begin(), y.end(), [&](float v) { return v == want; })) return "kept";
    if (std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; })) return "flushed to zero";
    return fmt::format("y[0] = {:a}, want {:a}", y[0], want);
  } catch (const peers::Unsupported& e) {
    return fmt::format("not run ({})", e.what());
  }
}

void check_dense(PeerState& st, const peers::DensePeer& p) {
  constexpr std::size_t s = 64;
  const std::string key = "dense_fwd/" + p.name;
  const FpEnv env = read_fp_env();
  std::string fp_note;
  std::string result;
  std::string detail;
  try {
    const Operands in = operands(p.source, s);
    auto run = p.make({s, in.x, in.w, in.b});
    guard_fp_env(env, "by creating it", fp_note);
    run->run();
    guard_fp_env(env, "by a call", fp_note);
    detail = run->detail();

    const Operands ref_in = operands(DType::f32, s);
    std::vector<float> ref(s * s), y(s * s);
    find_kernel("f32_dense_fwd__ref")->dense({s, s, s, ref_in.x, ref_in.w, ref_in.b, ref.data(), Act::identity});
    run->output_f32(y.data());
    double err = 0, scale = 1;
    for (std::size_t i = 0; i < s * s; ++i) {
      // NaN-safe: a NaN makes err NaN, which fails the check below.
      err = std::max(err, std::fabs(double{y[i]} - double{ref[i]}));
      if (std::isnan(y[i])) err = std::nan("");
      scale = std::max(scale, std::fabs(double{ref[i]}));
    }
    const double rel = err / scale;
    if (!(rel <= p.tolerance)) {
      st.skip[key] = fmt::format("wrong result: max|y - y_ref| / max(1, max|y_ref|) = {:.3g} > {:.0e} against "
                                 "f32_dense_fwd__ref at size {}",
                                 rel, p.tolerance, s);
      result = st.skip[key];
    } else {
      result = fmt::format("ok: max|y - y_ref| / max(1, max|y_ref|) = {:.2g} at size {} (tolerance {:.0e})", rel,
                           s, p.tolerance);
    }
  } catch (const peers::Unsupported& e) {
    st.skip[key] = e.what();
    st.checks.emplace_back("peer_check/" + key, fmt::format("skipped: {}", e.what()));
    return;
  }
  const std::string probe = subnormal_probe(p, env, fp_note);
  if (probe != "kept" && !probe.starts_with("not run")) st.subnormals_flushed.push_back(key);
  if (!fp_note.empty()) st.fp_env_changed.push_back(key);
  st.checks.emplace_back(
      "peer_check/" + key,
      fmt::format("{}{}; fp env: {}; subnormal result: {}", result, detail.empty() ? "" : "; implementation " + detail,
                  fp_note.empty() ? "unchanged" : fp_note, probe));
}

/// The f32 value of element i of a row-major array of storage type t.
float widen_at(DType t, const void* values, std::size_t i) {
  switch (t) {
    case DType::f16: return to_f32(static_cast<const f16*>(values)[i]);
    case DType::bf16: return to_f32(static_cast<const bf16*>(values)[i]);
    case DType::f32: break;
  }
  return static_cast<const float*>(values)[i];
}

/// The reference a row peer is checked against: halfmap's ref kernel of its op and storage type (f32 arithmetic,
/// each output rounded once to the storage type).
std::string row_ref_name(const peers::RowPeer& p) {
  const std::string_view mode = p.storage == DType::f32 ? "f32" : p.storage == DType::f16 ? "f16_f32acc" : "bf16_f32acc";
  return fmt::format("{}_{}__ref", mode, op_name(p.op));
}

void check_row(PeerState& st, const peers::RowPeer& p) {
  const std::string key = fmt::format("{}/{}", op_name(p.op), p.name);
  const Level& level = kLevels.front();
  const std::size_t esize = dtype_size(p.storage), rows = level.bytes / (kNnCols * esize);
  const void* x = input_buffer(p.storage, level);
  std::vector<unsigned char> y(rows * kNnCols * esize), ref(rows * kNnCols * esize);
  const FpEnv env = read_fp_env();
  std::string fp_note;
  try {
    auto run = p.make(rows, kNnCols, x, y.data());
    guard_fp_env(env, "by creating it", fp_note);
    run->run();
    guard_fp_env(env, "by a call", fp_note);
  } catch (const peers::Unsupported& e) {
    st.skip[key] = e.what();
    st.checks.emplace_back("peer_check/" + key, fmt::format("skipped: {}", e.what()));
    return;
  }
  const std::string ref_name = row_ref_name(p);
  const Kernel* ref_kernel = find_kernel(ref_name);
  const auto* in = static_cast<const unsigned char*>(x);
  if (p.op == Op::layernorm) {  // γ, β: the buffer's first two rows, as the peer and bench_nn.cpp read them
    ref_kernel->norm({rows, kNnCols, x, x, in + kNnCols * esize, kLayerNormEpsTorch, ref.data(), nullptr, nullptr,
                      nullptr, nullptr, nullptr, nullptr});
  } else {
    ref_kernel->softmax({rows, kNnCols, x, ref.data()});
  }
  // softmax: every ref value is positive (inputs in [-1, 1) give probabilities near 1/kNnCols), the error
  // relative to each; layernorm: y is of order 1 and crosses 0, the error relative to max(1, |y_ref|).
  const std::string_view relative_to = p.op == Op::softmax ? "y_ref" : "max(1, |y_ref|)";
  double rel = 0;
  for (std::size_t i = 0; i < rows * kNnCols; ++i) {
    const double r = widen_at(p.storage, ref.data(), i);
    const double scale = p.op == Op::softmax ? r : std::max(1.0, std::fabs(r));
    const double e = std::fabs(double{widen_at(p.storage, y.data(), i)} - r) / scale;
    rel = std::isnan(e) ? e : std::max(rel, e);
  }
  // f32: 1e-3; fp16, bf16: 1e-2, above the 2^-7 of one bf16 rounding step either way.
  const double tolerance = p.storage == DType::f32 ? 1e-3 : 1e-2;
  std::string result;
  if (!(rel <= tolerance)) {
    st.skip[key] = fmt::format("wrong result: max|y - y_ref| / {} = {:.3g} > {:.0e} against {} at {}", relative_to,
                               rel, tolerance, ref_name, level.name);
    result = st.skip[key];
  } else {
    result = fmt::format("ok: max|y - y_ref| / {} = {:.2g} against {} at {} (tolerance {:.0e})", relative_to, rel,
                         ref_name, level.name, tolerance);
  }
  if (!fp_note.empty()) st.fp_env_changed.push_back(key);
  st.checks.emplace_back("peer_check/" + key,
                         fmt::format("{}; fp env: {}", result, fp_note.empty() ? "unchanged" : fp_note));
}

PeerState make_state() {
  PeerState st;
#if HALFMAP_PEER_OPENBLAS
  st.libs.push_back(peers::openblas_library());
#else
  st.missing.emplace_back("openblas (install libopenblas-dev)");
#endif
#if HALFMAP_PEER_ONEDNN
  st.libs.push_back(peers::onednn_library());
#else
  st.missing.emplace_back("onednn (install libdnnl-dev)");
#endif
#if HALFMAP_PEER_XNNPACK
  st.libs.push_back(peers::xnnpack_library());
#else
  st.missing.emplace_back("xnnpack (install libxnnpack-dev libpthreadpool-dev)");
#endif
#if HALFMAP_PEER_EIGEN
#if defined(__x86_64__)
  // peers/eigen.cpp is compiled for AVX-512 (see there): not a single instruction of it may run without it.
  const bool eigen_runs = isa_supported(Isa::avx512);
#else
  const bool eigen_runs = true;
#endif
  if (eigen_runs) {
    st.libs.push_back(peers::eigen_library());
  } else {
    st.missing.emplace_back("eigen (built for AVX-512, which this CPU lacks)");
  }
#else
  st.missing.emplace_back("eigen (install libeigen3-dev)");
#endif
  for (const peers::Library& lib : st.libs) {
    for (const peers::DensePeer& p : lib.dense) check_dense(st, p);
    for (const peers::RowPeer& p : lib.rows) check_row(st, p);
  }
  return st;
}

PeerState& peer_state() {
  static PeerState st = make_state();
  return st;
}

std::string dense_label(const peers::DensePeer& p) {
  const std::string_view dtype = dtype_name(p.source);
  const bool f32_roof = p.source == DType::f32 && (p.isa == "avx2" || p.isa == "avx512" || p.isa == "neon");
  const bool bf16_roof = p.source == DType::bf16 && p.isa == "avx512bf16";
  std::string label = "op=dense_fwd";
  if (p.source != DType::f16) label += p.source == DType::f32 ? " mode=f32" : " mode=bf16_f32acc";
  if (!p.isa.empty()) label += " isa=" + p.isa;
  return label + fmt::format(" storage={} roof={}", dtype, f32_roof || bf16_roof ? "fma/" + p.isa : "none");
}

void run_dense(benchmark::State& state, const peers::DensePeer& p, std::size_t s, unsigned threads = 1) {
  state.SetLabel(dense_label(p));
  if (const auto it = peer_state().skip.find("dense_fwd/" + p.name); it != peer_state().skip.end()) {
    state.SkipWithError(it->second.c_str());  // copied by the library
    return;
  }
  const Operands in = operands(p.source, s);
  std::unique_ptr<peers::DenseRun> run;
  try {
    run = p.make({s, in.x, in.w, in.b, threads});  // conversions and library objects: untimed
  } catch (const peers::Unsupported& e) {
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
  if (p.threaded) state.counters["threads"] = benchmark::Counter(threads);
}

void run_row(benchmark::State& state, const peers::RowPeer& p, const Level& level) {
  const std::string key = fmt::format("{}/{}", op_name(p.op), p.name);
  if (const auto it = peer_state().skip.find(key); it != peer_state().skip.end()) {
    state.SkipWithError(it->second.c_str());
    return;
  }
  const std::size_t esize = dtype_size(p.storage), rows = level.bytes / (kNnCols * esize);
  std::unique_ptr<peers::RowRun> run;
  try {
    run = p.make(rows, kNnCols, input_buffer(p.storage, level), output_buffer());
  } catch (const peers::Unsupported& e) {
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
  state.counters["bytes_per_second"] = benchmark::Counter(static_cast<double>(elements * esize),
                                                          benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_moved_per_second"] = benchmark::Counter(static_cast<double>(2 * elements * esize),
                                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["elements_per_second"] =
      benchmark::Counter(static_cast<double>(elements), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["n"] = benchmark::Counter(static_cast<double>(elements));
}

std::string join(const std::vector<std::string>& items, std::string_view none) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? std::string(none) : out;
}

}  // namespace

void add_peer_context() {
  using benchmark::AddCustomContext;
  const PeerState& st = peer_state();
  std::vector<std::string> built;
  for (const peers::Library& lib : st.libs) built.push_back(lib.name);
  AddCustomContext("peers_built", join(built, "none"));
  AddCustomContext("peers_missing", join(st.missing, "none"));
  for (const peers::Library& lib : st.libs) AddCustomContext("peer_" + lib.name, lib.context);
  for (const auto& [key, value] : st.checks) AddCustomContext(key, value);
  AddCustomContext("peers_fp_env_changed",
                   join(st.fp_env_changed, "none (same modes before and after every peer call checked)"));
  AddCustomContext("peers_subnormals_flushed", join(st.subnormals_flushed, "none"));
}

void register_peer_benchmarks() {
  for (const peers::Library& lib : peer_state().libs) {
    for (const peers::DensePeer& p : lib.dense) {
      for (const std::size_t s : kDenseFwdSizes) {
        const std::string name = fmt::format("dense_fwd/{}/{}", p.name, s);
        benchmark::RegisterBenchmark(name.c_str(), [&p, s](benchmark::State& state) { run_dense(state, p, s); });
      }
    }
    for (const peers::RowPeer& p : lib.rows) {
      for (const Level& level : kLevels) {
        const std::string name = fmt::format("{}/{}/{}", op_name(p.op), p.name, level.name);
        benchmark::RegisterBenchmark(name.c_str(), [&p, &level](benchmark::State& state) { run_row(state, p, level); });
      }
    }
  }
  // Last: a library's threads may spin for a while after its calls, which would slow what runs next.
  for (const peers::Library& lib : peer_state().libs) {
    for (const peers::DensePeer& p : lib.dense) {
      if (!p.threaded) continue;
      for (const unsigned t : thread_counts(bench_max_threads())) {
        const std::string name = fmt::format("dense_fwd_threads/{}/{}", p.name, t);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [&p, t](benchmark::State& state) { run_dense(state, p, kThreadsSize, t); })
            ->UseRealTime()
            ->MeasureProcessCPUTime();
      }
    }
  }
}

}  // namespace halfmap::bench
