#include "bench_util.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "halfmap/half.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace halfmap::bench {
namespace {

/// splitmix64 (Steele, Lea, Flood 2014): fast, and specified bit for bit, unlike std::uniform_real_distribution.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// A multiple of 2^-23 in [-1, 1): exact in f32 and never an f32 subnormal. Rounded to fp16, values below
  /// 2^-14 in magnitude (about 6 in 100000) become fp16 subnormals, as real data does.
  float uniform() {
    const auto bits = static_cast<std::int32_t>(next() >> 40);  // 24 random bits
    return static_cast<float>(bits - (std::int32_t{1} << 23)) * 0x1p-23f;
  }
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

void* allocate(std::size_t bytes) {
  // 2 MiB alignment lets the kernel back the big buffers with transparent huge pages, so the DRAM runs measure
  // memory bandwidth rather than TLB misses. aligned_alloc needs the size to be a multiple of the alignment.
  constexpr std::size_t kAlign = std::size_t{2} << 20;
  const std::size_t alloc_bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, alloc_bytes);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kAlign) madvise(p, alloc_bytes, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  return p;
}

std::unique_ptr<void, FreeDeleter> make_buffer(DType t, std::size_t bytes) {
  void* p = allocate(bytes);
  SplitMix64 rng{kSeed};
  switch (t) {
    case DType::f32: {
      auto* x = static_cast<float*>(p);
      for (std::size_t i = 0; i < bytes / sizeof(float); ++i) x[i] = rng.uniform();
      break;
    }
    case DType::f16: {
      auto* x = static_cast<f16*>(p);
      for (std::size_t i = 0; i < bytes / sizeof(f16); ++i) x[i] = to_f16(rng.uniform());
      break;
    }
    case DType::bf16: {
      auto* x = static_cast<bf16*>(p);
      for (std::size_t i = 0; i < bytes / sizeof(bf16); ++i) x[i] = to_bf16(rng.uniform());
      break;
    }
  }
  return std::unique_ptr<void, FreeDeleter>(p);
}

}  // namespace

const void* input_buffer(DType t, std::size_t bytes) {
  static std::map<std::pair<DType, std::size_t>, std::unique_ptr<void, FreeDeleter>> cache;
  auto& slot = cache[{t, bytes}];
  if (!slot) slot = make_buffer(t, bytes);
  return slot.get();
}

const void* input_buffer(DType t, const Level& level) { return input_buffer(t, level.bytes); }

Operands operands(DType t, std::size_t s) {
  const std::size_t e = dtype_size(t);
  // X, W and dY (s² each), then b (s).
  const auto* base = static_cast<const unsigned char*>(input_buffer(t, (3 * s * s + s) * e));
  return {base, base + s * s * e, base + 2 * s * s * e, base + 3 * s * s * e};
}

void* output_buffer() {
  static const std::unique_ptr<void, FreeDeleter> buffer = [] {
    const std::size_t bytes = kLevels.back().bytes;
    void* p = allocate(bytes);
    std::memset(p, 0, bytes);
    return std::unique_ptr<void, FreeDeleter>(p);
  }();
  return buffer.get();
}

const std::int32_t* label_buffer(std::size_t count, std::int32_t cols) {
  static std::map<std::pair<std::size_t, std::int32_t>, std::unique_ptr<std::int32_t[]>> cache;
  auto& slot = cache[{count, cols}];
  if (!slot) {
    slot = std::make_unique<std::int32_t[]>(count);
    SplitMix64 rng{kSeed};
    // The high 32 bits times cols, shifted down: uniform in [0, cols) to within cols/2^32.
    for (std::size_t i = 0; i < count; ++i) {
      slot[i] = static_cast<std::int32_t>(((rng.next() >> 32) * static_cast<std::uint64_t>(cols)) >> 32);
    }
  }
  return slot.get();
}

std::string skip_reason(const Kernel& k) { return isa_skip_reason(k.isa); }

void label_kernel(benchmark::State& state, const Kernel& k, std::string_view roof) {
  state.SetLabel(fmt::format("op={} mode={} isa={} storage={} roof={}", op_name(k.op), mode_name(k.mode),
                             isa_name(k.isa), dtype_name(k.storage), roof));
}

}  // namespace halfmap::bench
