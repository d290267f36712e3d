// Deterministic random inputs and elementary functions: the same bits on every machine. The sweep draws its base
// inputs and scale grids with them, `halfmap diagnose` its seed weights, the tests their cases.
//
// Why not <random> and libm: std::normal_distribution's algorithm is unspecified (libstdc++ and libc++ differ),
// and libm's log/exp/exp2/pow may differ in the last bit between architectures and library versions. The sweep's
// base inputs and its scale grid must be identical on x86-64 and arm64, so everything here uses only integer
// operations and +, -, *, / and sqrt, which IEEE 754 rounds correctly everywhere. The build compiles with
// -ffp-contract=off, so the compiler never fuses a*b+c into one rounding on one architecture and not another.
// The functions are accurate to a few ulp, which is plenty: what matters is that they are the same everywhere.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

namespace halfmap::det {

// ---- PRNG: splitmix64 to seed, xoshiro256** to draw (Blackman & Vigna) ---------------------------------------

constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// FNV-1a of a name: a stable stream key that does not depend on the order of any enum.
constexpr std::uint64_t name_key(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

class Xoshiro256ss {
 public:
  /// One independent stream per (seed, keys...): the keys are folded through splitmix64.
  Xoshiro256ss(std::uint64_t seed, std::uint64_t k1, std::uint64_t k2, std::uint64_t k3) {
    std::uint64_t sm = seed;
    std::uint64_t mix = splitmix64(sm);
    sm = mix ^ k1;
    mix = splitmix64(sm);
    sm = mix ^ k2;
    mix = splitmix64(sm);
    sm = mix ^ k3;
    for (auto& w : s_) w = splitmix64(sm);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1), 53 random bits (exact).
  double unit() { return double(next() >> 11) * 0x1p-53; }
  /// Uniform in [-1, 1) (exact: 2u - 1 of a 53-bit u is representable).
  double symmetric() { return 2.0 * unit() - 1.0; }
  /// An integer in [0, n), by multiply-shift (Lemire, without the rejection step: the bias is below 2^-32 for the
  /// small n used here, and the result is deterministic either way).
  std::uint32_t below(std::uint32_t n) { return std::uint32_t(((next() >> 32) * std::uint64_t(n)) >> 32); }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

// ---- elementary functions from +, -, *, /, sqrt ------------------------------------------------------------

inline constexpr double kLn2Hi = 6.93147180369123816490e-01;  // fdlibm's split of ln 2: kLn2Hi has 32 bits,
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;  // so k * kLn2Hi is exact for |k| < 2^20
inline constexpr double kInvLn2 = 1.44269504088896338700e+00;

/// 2^k for an integer k in [-1074, 1023], built from its bit pattern (exact).
inline double pow2i(int k) {
  if (k >= -1022) return std::bit_cast<double>(std::uint64_t(k + 1023) << 52);
  return std::bit_cast<double>(std::uint64_t{1} << (k + 1074));  // subnormal
}

/// Natural logarithm of a positive finite x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(t),
/// t = (m-1)/(m+1), |t| < 0.1716, by its odd series (17 terms: t^35 < 2^-88, far below double precision).
inline double log(double x) {
  if (!(x > 0.0) || x > std::numeric_limits<double>::max()) return std::numeric_limits<double>::quiet_NaN();
  int e = 0;
  if (x < 0x1p-1022) {  // subnormal: normalise exactly
    x *= 0x1p64;
    e = -64;
  }
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  e += int((u >> 52) & 0x7FF) - 1023;
  double m = std::bit_cast<double>((u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = t * t;
  double series = 0.0;
  for (int k = 33; k >= 1; k -= 2) series = series * t2 + 1.0 / double(k);
  const double lnm = 2.0 * t * series;
  return double(e) * kLn2Hi + (double(e) * kLn2Lo + lnm);
}

/// e^x for finite x: x = k ln2 + r, |r| <= ln2/2 (Cody-Waite), e^r by its Taylor series (Horner, 22 terms),
/// then scaled by 2^k in two exact steps. Overflows to inf above ~709.78, underflows to 0 below ~-745.
inline double exp(double x) {
  if (x != x) return x;
  if (x > 709.8) return std::numeric_limits<double>::infinity();
  if (x < -745.2) return 0.0;
  const double kd = std::floor(x * kInvLn2 + 0.5);  // floor is exact
  const int k = int(kd);
  const double r = (x - kd * kLn2Hi) - kd * kLn2Lo;
  double p = 1.0;
  for (int i = 22; i >= 1; --i) p = 1.0 + p * r / double(i);
  // 2^k may not be representable on its own (k up to 1024 or below -1022): apply it in two halves.
  const int k1 = k / 2, k2 = k - k1;
  return p * pow2i(k1) * pow2i(k2);
}

/// 2^t for the scale grids: exact when t is an integer, otherwise 2^floor(t) * e^((t - floor(t)) ln 2).
inline double exp2(double t) {
  const double kf = std::floor(t);
  const double f = t - kf;  // exact
  const int k = int(kf);
  const double frac = f == 0.0 ? 1.0 : exp(f * kLn2Hi + f * kLn2Lo);
  const int k1 = k / 2, k2 = k - k1;
  return frac * pow2i(k1) * pow2i(k2);
}

inline double log2(double x) {
  // Exact for powers of two (the common case of scale options given as values).
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  if (x > 0.0 && x <= std::numeric_limits<double>::max() && (u & 0x000FFFFFFFFFFFFFull) == 0 && (u >> 52) != 0) {
    return double(int(u >> 52) - 1023);
  }
  return log(x) * kInvLn2;
}

// ---- distributions -----------------------------------------------------------------------------------------

/// Standard normal draws by Marsaglia's polar method; each accepted pair gives two values.
class Normal {
 public:
  double operator()(Xoshiro256ss& rng) {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = rng.symmetric();
      v = rng.symmetric();
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }

 private:
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace halfmap::det
