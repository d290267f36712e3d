// The data section's fp8 and MX columns (diagnose.hpp's Fp8Effect): what storing a column in E4M3 or E5M2 with
// Transformer Engine's current scaling, and in each MX format, does to its values.
//
// Nothing is stored: rounding to nearest even is monotone, so each format is summed up by three thresholds on the
// scaled magnitude y (fp8.hpp's RoundingThresholds, found from the rounding itself by bisection over the float32
// patterns): y at or below flush_max rounds to zero, y below normal_min to a subnormal, y at or above
// clip_min past the largest finite (saturated). y is exact where it matters: per-tensor, y = |x|·s is the float32
// product the cast itself rounds; MX, y = |x|·2^-e with e the block's shared exponent, exact unless below 2^-126,
// far under every flush threshold. tests/diagnose_fp8_test.cpp checks the counts against the models value by value.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "diagnose/internal.hpp"
#include "halfmap/fp8.hpp"
#include "halfmap/fp8_scaling.hpp"
#include "halfmap/mx.hpp"

namespace halfmap::diagnose {
namespace {

using Thresholds = RoundingThresholds;

struct Storage {
  bool mx;
  Fp8 fp8;      // per-tensor formats
  MxElem elem;  // MX formats
  Thresholds t;
};

/// kFp8Storages' order: the per-tensor formats first, then the MX ones.
constexpr std::size_t kPerTensor = 2;

const std::array<Storage, std::size(kFp8Storages)>& storages() {
  static const std::array<Storage, std::size(kFp8Storages)> s = [] {
    auto fp8 = [](Fp8 f) {
      return Storage{false, f, MxElem::e4m3, fp8_thresholds(f)};
    };
    auto mx = [](MxElem e) {
      return Storage{true, Fp8::e4m3, e, mx_thresholds(e)};
    };
    return std::array<Storage, std::size(kFp8Storages)>{fp8(Fp8::e4m3),     fp8(Fp8::e5m2),     mx(MxElem::e4m3),
                                                        mx(MxElem::e5m2),   mx(MxElem::e3m2),   mx(MxElem::e2m3),
                                                        mx(MxElem::e2m1)};
  }();
  return s;
}

/// Counts n values scaled by s into e: branch-free, so that the compiler vectorises it. A zero is never counted
/// (y = 0 is neither clipped nor subnormal, and is masked out of the flushed), a NaN neither (every comparison
/// is false), an infinity is clipped.
void count_scaled(const float* x, std::size_t n, float s, const Thresholds& t, Fp8Effect& e) {
  constexpr std::size_t kChunk = std::size_t{1} << 24;  // 32-bit lane counters (vectorisable) never overflow
  for (std::size_t c = 0; c < n; c += kChunk) {
    std::uint32_t clipped = 0, flushed = 0, subnormal = 0;
    for (std::size_t i = c; i < std::min(n, c + kChunk); ++i) {
      const float y = std::fabs(x[i]) * s;
      clipped += y >= t.clip_min;
      flushed += (x[i] != 0.0f) & (y <= t.flush_max);
      subnormal += (y > t.flush_max) & (y < t.normal_min);
    }
    e.clipped += clipped;
    e.flushed += flushed;
    e.subnormal += subnormal;
  }
}

/// The per-tensor formats: one cast of the whole column with s from its amax, as torch.max(torch.abs(x)) gives
/// it (a NaN anywhere makes it NaN, and then s stays 1).
void per_tensor(const std::vector<float>& x, float amax, const Storage& st, Fp8Effect& e) {
  const float s = fp8_scale(amax, st.fp8);
  e.scale = s;
  count_scaled(x.data(), x.size(), s, st.t, e);
}

/// The MX formats, each block's amax found once for all of them.
void mx_blocks(const std::vector<float>& x, std::span<const Storage> mx, std::span<Fp8Effect> out) {
  for (std::size_t b = 0; b < x.size(); b += kMxBlock) {
    const std::size_t len = std::min(kMxBlock, x.size() - b);
    float amax = 0.0f;
    bool finite = true;
    for (std::size_t i = b; i < b + len; ++i) {
      finite = finite && std::isfinite(x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    for (std::size_t k = 0; k < mx.size(); ++k) {
      if (!finite) {
        out[k].lost += len;
      } else if (amax > 0.0f) {
        const int shared = std::clamp(std::ilogb(amax) - mx_format(mx[k].elem).emax, -127, 127);  // mx_shared_exp
        count_scaled(x.data() + b, len, std::ldexp(1.0f, -shared), mx[k].t, out[k]);  // 2^-e: exact
      }
    }
  }
}

}  // namespace

template <class T>
std::vector<Fp8Effect> fp8_effects(const T* values, std::size_t n) {
  const std::vector<float> x(values, values + n);  // float64 columns rounded once to float32
  std::vector<Fp8Effect> out(std::size(kFp8Storages));
  for (std::size_t k = 0; k < out.size(); ++k) out[k].format = std::string(kFp8Storages[k]);
  float amax = 0.0f;
  for (float v : x) amax = std::isnan(v) ? v : std::isnan(amax) ? amax : std::max(amax, std::fabs(v));
  const auto& st = storages();
  for (std::size_t k = 0; k < kPerTensor; ++k) per_tensor(x, amax, st[k], out[k]);
  mx_blocks(x, std::span(st).subspan(kPerTensor), std::span(out).subspan(kPerTensor));
  return out;
}

template std::vector<Fp8Effect> fp8_effects<float>(const float*, std::size_t);
template std::vector<Fp8Effect> fp8_effects<double>(const double*, std::size_t);

}  // namespace halfmap::diagnose
