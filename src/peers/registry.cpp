// The peers' list: the libraries CMake found (peer_lists.inc, generated: one HALFMAP_PEER(<lib>) line per library
// built, one HALFMAP_PEER_MISSING("<lib>", "<reason>") line per library not built), each kernel checked once on
// this CPU before it joins halfmap::kernels() (src/kernels/registry.cpp finds these two functions by weak
// reference). A kernel that throws or fails its check is dropped and named, with the reason, in
// peer_libraries(), which the sweep's meta.json lists.
//
// The check: a small dense layer (8×64 · 64×16 with bias) or a reduction (1000 elements) of deterministic values
// in [-1, 1] stored in the kernel's type, against float64 on the stored values: max|y - y_f64| /
// max(1, max|y_f64|) must be at most the kernel's tolerance (maxabs: exact).
#include <cmath>
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/storage.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

/// Deterministic values in [-1, 1): a 32-bit LCG, the same on every run and CPU.
TypedBuffer values(DType t, std::size_t n, std::uint32_t seed, std::vector<double>& v) {
  TypedBuffer b(t, n);
  v.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = b.set(i, double(seed >> 8) / double(1u << 23) - 1.0);
  }
  return b;
}

double dense_error(const Kernel& k) {
  const std::size_t m = 8, kk = 64, n = 16;
  std::vector<double> x, w, b;
  const TypedBuffer xb = values(k.storage, m * kk, 1, x), wb = values(k.storage, kk * n, 2, w),
                    bb = values(k.storage, n, 3, b);
  TypedBuffer yb(k.storage, m * n);
  k.dense(DenseArgs{m, n, kk, xb.data(), wb.data(), bb.data(), yb.data(), Act::identity});
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double ref = b[j];
      for (std::size_t p = 0; p < kk; ++p) ref += x[i * kk + p] * w[p * n + j];
      err = std::fmax(err, std::fabs(yb.get(i * n + j) - ref));
      scale = std::fmax(scale, std::fabs(ref));
      if (std::isnan(yb.get(i * n + j))) err = INFINITY;
    }
  }
  return err / scale;
}

double reduce_error(const Kernel& k) {
  const std::size_t n = 1000;
  std::vector<double> x, y;
  const TypedBuffer xb = values(k.storage, n, 4, x), yb = values(k.storage, n, 5, y);
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    switch (k.op) {
      case Op::sum: ref += x[i]; break;
      case Op::sumsq: ref += x[i] * x[i]; break;
      case Op::dot: ref += x[i] * y[i]; break;
      default: ref = std::fmax(ref, std::fabs(x[i])); break;
    }
  }
  const double got = k.reduce(xb.data(), k.op == Op::dot ? yb.data() : nullptr, n);
  return std::isnan(got) ? INFINITY : std::fabs(got - ref) / std::fmax(1.0, std::fabs(ref));
}

struct State {
  std::vector<Kernel> kernels;
  std::vector<PeerLibrary> libraries;
  std::deque<std::string> text;  // the storage of the libraries' string_views

  std::string_view keep(std::string s) { return text.emplace_back(std::move(s)); }
  void add(LibraryList (*list)(), std::string_view lib) {
    LibraryList l;
    try {
      l = list();
    } catch (const std::exception& e) {
      libraries.push_back({lib, false, keep(fmt::format("its set-up failed: {}.", e.what()))});
      return;
    }
    libraries.push_back({lib, true, keep(l.detail)});
    for (const PeerKernel& p : l.kernels) {
      try {
        const double err = p.kernel.op == Op::dense_fwd ? dense_error(p.kernel) : reduce_error(p.kernel);
        if (!(err <= p.tolerance)) {
          libraries.push_back({p.kernel.name, false,
                               keep(fmt::format("failed its check against float64: error {:.3g} above {:.3g}.", err,
                                                p.tolerance))});
          continue;
        }
      } catch (const std::exception& e) {
        libraries.push_back({p.kernel.name, false, keep(fmt::format("unsupported on this CPU: {}.", e.what()))});
        continue;
      }
      kernels.push_back(p.kernel);
    }
  }
};

const State& state() {
  static const State s = [] {
    State st;
#define HALFMAP_PEER(lib) st.add(lib##_list, #lib);
#define HALFMAP_PEER_MISSING(lib, reason) st.libraries.push_back({lib, false, reason});
#include "peer_lists.inc"
#undef HALFMAP_PEER
#undef HALFMAP_PEER_MISSING
    return st;
  }();
  return s;
}

}  // namespace

std::span<const Kernel> linked_kernels() { return state().kernels; }
std::span<const PeerLibrary> linked_libraries() { return state().libraries; }

}  // namespace halfmap::peers
