// Helpers shared by halfmap's tests: seeded random inputs, aligned buffers with room for misalignment, exact
// decoding of fp16/bf16 bit patterns (written independently of half.hpp, so that tests do not check the library
// against itself) and hex formatting for failure messages.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/cpu.hpp"
#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::test {

// ---- hex -----------------------------------------------------------------------------------------------------

inline std::string hex16(std::uint16_t bits) { return fmt::format("0x{:04X}", bits); }
inline std::string hex32(std::uint32_t bits) { return fmt::format("0x{:08X}", bits); }
inline std::string hex(float v) { return fmt::format("0x{:08X} ({:a} = {})", std::bit_cast<std::uint32_t>(v), v, v); }
inline std::string hex(double v) { return fmt::format("0x{:016X} ({:a} = {})", std::bit_cast<std::uint64_t>(v), v, v); }
inline std::string hex(f16 h) { return fmt::format("0x{:04X}", h.bits); }
inline std::string hex(bf16 b) { return fmt::format("0x{:04X}", b.bits); }

inline std::uint32_t bits_of(float v) { return std::bit_cast<std::uint32_t>(v); }

// ---- exact decoding, independent of half.hpp ------------------------------------------------------------------

/// The value of an fp16 bit pattern, computed from the IEEE definition with ldexp (exact in double):
/// (-1)^s * (e == 0 ? m * 2^-24 : (1024 + m) * 2^(e - 25)); inf and NaN for e == 31.
inline double decode_f16(std::uint16_t bits) {
  const bool neg = (bits & 0x8000u) != 0;
  const int e = (bits >> 10) & 0x1F;
  const int m = bits & 0x3FF;
  double v;
  if (e == 31) {
    v = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    v = std::ldexp(double(m), -24);
  } else {
    v = std::ldexp(double(1024 + m), e - 25);
  }
  return neg ? -v : v;
}

/// The value of a bf16 bit pattern, from the definition (8 exponent bits, bias 127, 7 stored significand bits).
inline double decode_bf16(std::uint16_t bits) {
  const bool neg = (bits & 0x8000u) != 0;
  const int e = (bits >> 7) & 0xFF;
  const int m = bits & 0x7F;
  double v;
  if (e == 255) {
    v = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    v = std::ldexp(double(m), -133);  // subnormal: m * 2^(1-127-7)
  } else {
    v = std::ldexp(double(128 + m), e - 134);
  }
  return neg ? -v : v;
}

/// Correctly rounded double -> fp16 (round to nearest even, overflow to inf), written from the definition and
/// independent of half.hpp: binary search for the largest finite fp16 magnitude lo <= |d| (decode_f16 is exact and
/// monotonic over 0x0000..0x7BFF), then compare |d| with the midpoint (lo + next) / 2, which is exact in double
/// (12 significant bits). Above 0x7BFF the "next" value is 65536 = 2^16, as if the exponent were unbounded, so
/// the overflow threshold is the midpoint 65520, and 65520 itself is a tie that goes to the even 0x7C00 (inf).
inline std::uint16_t reference_to_f16(double d) {
  if (std::isnan(d)) return 0x7E00;  // callers compare NaN-ness separately
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::fabs(d);
  if (a >= 65536.0) return sign | 0x7C00;
  unsigned lo = 0, hi = 0x7BFF;  // invariant: decode(lo) <= a
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (decode_f16(std::uint16_t(mid)) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const double lo_v = decode_f16(std::uint16_t(lo));
  const double next_v = lo == 0x7BFF ? 65536.0 : decode_f16(std::uint16_t(lo + 1));
  const double midpoint = (lo_v + next_v) / 2;
  unsigned q = lo;
  if (a > midpoint || (a == midpoint && (lo & 1))) ++q;  // 0x7BFF + 1 = 0x7C00: inf
  return std::uint16_t(sign | q);
}

// ---- seeded random inputs -------------------------------------------------------------------------------------

/// Every random case derives its seed from a fixed base and the case's own parameters, and prints it, so a
/// failure is replayed by rerunning the same test (the seed does not depend on run order or on the kernel).
inline constexpr std::uint64_t kBaseSeed = 0x4A1F3A9D2C5B7E01ull;

/// The step through the 2^32 float32 patterns of the conversion tests that check a scalar model against an oracle
/// (fp8_test, mx_test): every 97th pattern (a prime, so every low-bit residue is visited), every 4099th under
/// ASan and on arm64 (which runs under qemu).
#if defined(__SANITIZE_ADDRESS__) || defined(__aarch64__)
inline constexpr std::uint64_t kPatternStride = 4099;
#else
inline constexpr std::uint64_t kPatternStride = 97;
#endif

inline std::uint64_t case_seed(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
  // splitmix64 over the parameters: a cheap, well-mixed, reproducible combination
  auto mix = [](std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  return mix(kBaseSeed ^ mix(a ^ mix(b ^ mix(c))));
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  std::uint64_t bits() { return gen_(); }
  bool coin(double p) { return std::bernoulli_distribution(p)(gen_); }

 private:
  std::mt19937_64 gen_;
};

/// Input distributions for the reduction tests; each is a double, later rounded to the storage type.
enum class Dist {
  uniform,    // uniform in [-1, 1]
  scaled,     // uniform in [-1, 1] times 2^k, k uniform in [-10, 3]: a wide spread of exponents
  subnormal,  // uniform in [-1, 1], one element in four replaced by an fp16 subnormal (and f32/bf16 tiny values)
  positive,   // uniform in [0, 1]: sums without cancellation
};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::uniform:
      return "uniform";
    case Dist::scaled:
      return "scaled";
    case Dist::subnormal:
      return "subnormal";
    case Dist::positive:
      return "positive";
  }
  return "?";
}

inline double draw(Rng& rng, Dist d, DType storage) {
  switch (d) {
    case Dist::uniform:
      return rng.uniform(-1.0, 1.0);
    case Dist::scaled:
      return std::ldexp(rng.uniform(-1.0, 1.0), rng.integer(-10, 3));
    case Dist::positive:
      return rng.uniform(0.0, 1.0);
    case Dist::subnormal:
      if (!rng.coin(0.25)) return rng.uniform(-1.0, 1.0);
      if (storage == DType::f16) {  // an fp16 subnormal: k * 2^-24, k in [1, 1023], either sign
        return std::ldexp(double(rng.integer(1, 1023)), -24) * (rng.coin(0.5) ? -1.0 : 1.0);
      }
      // f32 and bf16 share their exponent range: a value in the f32 subnormal range
      return std::ldexp(rng.uniform(-1.0, 1.0), -127);
  }
  return 0.0;
}

// ---- aligned buffers ------------------------------------------------------------------------------------------

/// A 64-byte aligned, zeroed byte buffer.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(std::size_t bytes)
      : bytes_(bytes), p_(static_cast<std::byte*>(::operator new (bytes == 0 ? 64 : bytes, std::align_val_t{64}))) {
    std::memset(p_.get(), 0, bytes == 0 ? 64 : bytes);
  }
  std::byte* data() { return p_.get(); }
  std::size_t size() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{64}); }
  };
  std::size_t bytes_;
  std::unique_ptr<std::byte, Free> p_;
};

/// True for the reductions (ReduceFn); the registry also holds other operations, tested elsewhere.
inline bool is_reduction_kernel(const Kernel& k) { return is_reduction(k.op); }

// ---- skipping -------------------------------------------------------------------------------------------------

/// Why a kernel of this ISA may not be called here, or empty if it may. Tests GTEST_SKIP() with it.
inline std::string disabled_reason(Isa isa) {
  switch (isa_state(isa)) {
    case IsaState::enabled:
      return {};
    case IsaState::not_compiled:
      return fmt::format("{} is not compiled into this build", isa_name(isa));
    case IsaState::unsupported:
      return fmt::format("CPU lacks {} ({})", isa_name(isa), isa_requirements(isa));
    case IsaState::capped:
      break;
  }
  const char* env = std::getenv("HALFMAP_ISA");
  return fmt::format("{} is above the cap HALFMAP_ISA={}", isa_name(isa), env != nullptr ? env : "");
}

/// The bit pattern that stores `v` (rounded to nearest even) in the storage type.
inline std::uint32_t store_bits(DType t, double v) {
  switch (t) {
    case DType::f32:
      return std::bit_cast<std::uint32_t>(float(v));
    case DType::f16:
      return to_f16(v).bits;
    case DType::bf16:
      return to_bf16(float(v)).bits;
  }
  return 0;
}

/// The exact value of a stored bit pattern, decoded independently of half.hpp.
inline double load_exact(DType t, std::uint32_t bits) {
  switch (t) {
    case DType::f32:
      return double(std::bit_cast<float>(bits));
    case DType::f16:
      return decode_f16(std::uint16_t(bits));
    case DType::bf16:
      return decode_bf16(std::uint16_t(bits));
  }
  return 0;
}

/// Rounds to the storage type and widens back (to_f16 from double rounds once; to_bf16 via float rounds twice,
/// which is still monotonic, all that interval checks need).
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::f32:
      return double(float(v));
    case DType::f16:
      return double(to_f32(to_f16(v)));
    case DType::bf16:
      return double(to_f32(to_bf16(float(v))));
  }
  return 0;
}

// ---- guarded arrays: kernel inputs and outputs with fenced surroundings ---------------------------------------

inline std::string hex_bits(DType t, std::uint32_t b) { return t == DType::f32 ? hex32(b) : hex16(std::uint16_t(b)); }
inline std::uint32_t nan_bits(DType t) { return t == DType::f32 ? 0x7FC00000u : t == DType::f16 ? 0x7E00u : 0x7FC0u; }
inline std::uint32_t inf_bits(DType t) { return t == DType::f32 ? 0x7F800000u : t == DType::f16 ? 0x7C00u : 0x7F80u; }
inline std::uint32_t sign_bit(DType t) { return t == DType::f32 ? 0x80000000u : 0x8000u; }
/// Guard pattern around outputs, and the pattern an output starts as: NaNs with payloads no arithmetic makes.
inline std::uint32_t guard_bits(DType t) { return t == DType::f32 ? 0x7FA5A5A5u : t == DType::f16 ? 0x7D5Au : 0x7FA5u; }
inline std::uint32_t unwritten_bits(DType t) {
  return t == DType::f32 ? 0xFFB3B3B3u : t == DType::f16 ? 0xFD33u : 0xFFB3u;
}

/// n storage elements in a 64-byte aligned buffer, starting guard + offset elements in (offset shifts the start off
/// the alignment). Every element outside holds `outside`: NaN for inputs (a kernel that reads one produces NaN), a
/// guard pattern for outputs (a kernel that writes one is reported by guard_damage()).
class GuardedArray {
 public:
  GuardedArray(DType t, std::size_t n, std::size_t guard, std::size_t offset, std::uint32_t outside)
      : t_(t),
        n_(n),
        start_(guard + offset),
        esize_(dtype_size(t)),
        total_(guard + offset + n + guard),
        outside_(outside),
        buf_(total_ * esize_) {
    for (std::size_t i = 0; i < total_; ++i) put_raw(i, outside);
  }

  DType type() const { return t_; }
  std::size_t size() const { return n_; }
  void set(std::size_t i, double v) { set_bits(i, store_bits(t_, v)); }
  void set_bits(std::size_t i, std::uint32_t b) { put_raw(start_ + i, b); }
  /// Every element of the array (not its surroundings) set to the pattern b.
  void fill_bits(std::uint32_t b) {
    if (esize_ == 4) {
      std::fill_n(reinterpret_cast<std::uint32_t*>(buf_.data()) + start_, n_, b);
    } else {
      std::fill_n(reinterpret_cast<std::uint16_t*>(buf_.data()) + start_, n_, std::uint16_t(b));
    }
  }
  std::uint32_t bits(std::size_t i) const { return get_raw(start_ + i); }
  double value(std::size_t i) const { return load_exact(t_, bits(i)); }
  const void* data() const { return bytes() + start_ * esize_; }
  void* data() { return buf_.data() + start_ * esize_; }
  /// The elements as fp16 (storage f16 only), contiguous, for the model.
  std::vector<f16> as_f16() const {
    std::vector<f16> v(n_);
    for (std::size_t i = 0; i < n_; ++i) v[i] = f16{std::uint16_t(bits(i))};
    return v;
  }
  /// The elements as bf16 (storage bf16 only), contiguous, for the BFDOT model.
  std::vector<bf16> as_bf16() const {
    std::vector<bf16> v(n_);
    for (std::size_t i = 0; i < n_; ++i) v[i] = bf16{std::uint16_t(bits(i))};
    return v;
  }
  std::vector<std::byte> snapshot() const { return {bytes(), bytes() + buf_.size()}; }
  bool unchanged_since(const std::vector<std::byte>& s) const { return std::memcmp(s.data(), bytes(), s.size()) == 0; }
  /// "" if every element outside the array still holds its pattern, else where the first change is.
  std::string guard_damage() const {
    for (std::size_t i = 0; i < total_; ++i) {
      if (i >= start_ && i < start_ + n_) continue;
      if (get_raw(i) != outside_) {
        return fmt::format("element {} relative to the start (extent {}) was overwritten with {}",
                           long(i) - long(start_), n_, hex_bits(t_, get_raw(i)));
      }
    }
    return {};
  }

 private:
  const std::byte* bytes() const { return const_cast<AlignedBuffer&>(buf_).data(); }
  void put_raw(std::size_t i, std::uint32_t bits) {
    if (esize_ == 4) {
      std::memcpy(buf_.data() + 4 * i, &bits, 4);
    } else {
      const auto b16 = std::uint16_t(bits);
      std::memcpy(buf_.data() + 2 * i, &b16, 2);
    }
  }
  std::uint32_t get_raw(std::size_t i) const {
    if (esize_ == 4) {
      std::uint32_t v;
      std::memcpy(&v, bytes() + 4 * i, 4);
      return v;
    }
    std::uint16_t v;
    std::memcpy(&v, bytes() + 2 * i, 2);
    return v;
  }

  DType t_;
  std::size_t n_, start_, esize_, total_;
  std::uint32_t outside_;
  AlignedBuffer buf_;
};

}  // namespace halfmap::test
