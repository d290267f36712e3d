// The data section's fp8 and MX columns (diagnose.hpp's Fp8Effect): what storing a column in E4M3 or E5M2 with
// Transformer Engine's current scaling, and in each MX format, does to its values.
//
// Nothing is stored: rounding to nearest even is monotone, so each format is summed up by three thresholds on the
// scaled magnitude y (fp8.hpp's RoundingThresholds, found from the rounding itself by bisection over the float32
// patterns, and counted by its count_rounding): y at or below flush_max rounds to zero, y below normal_min to a
// subnormal, y at or above clip_min past the largest finite (saturated). y is exact where it matters: per-tensor, y =
// |x|·s is the float32 product the cast itself rounds; MX, y = |x|·2^-e with e the block's shared exponent, exact
// unless below 2^-126, far under every flush threshold. tests/diagnose_fp8_test.cpp checks the counts against the
// models value by value.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

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
    auto fp8 = [](Fp8 f) { return Storage{false, f, MxElem::e4m3, fp8_thresholds(f)}; };
    auto mx = [](MxElem e) { return Storage{true, Fp8::e4m3, e, mx_thresholds(e)}; };
    return std::array<Storage, std::size(kFp8Storages)>{fp8(Fp8::e4m3),   fp8(Fp8::e5m2),   mx(MxElem::e4m3),
                                                        mx(MxElem::e5m2), mx(MxElem::e3m2), mx(MxElem::e2m3),
                                                        mx(MxElem::e2m1)};
  }();
  return s;
}

void add(const RoundingCounts& c, Fp8Effect& e) {
  e.clipped += c.clipped;
  e.flushed += c.flushed;
  e.subnormal += c.subnormal;
}

/// The MX formats, each block's amax found once for all of them.
void mx_blocks(std::span<const float> x, std::span<const Storage> mx, std::span<Fp8Effect> out) {
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
        add(count_rounding(x.data() + b, len, mx_unscale(mx_shared_exp_of(amax, mx[k].elem)), mx[k].t), out[k]);
      }
    }
  }
}

/// The column as float32: a float column as it is, a float64 one rounded once into `copy`.
template <class T>
std::span<const float> as_f32(const T* values, std::size_t n, std::vector<float>& copy) {
  if constexpr (std::is_same_v<T, float>) {
    return {values, n};
  } else {
    copy.assign(values, values + n);
    return copy;
  }
}

/// The per-tensor formats: one cast of all of x with s from its amax, as torch.max(torch.abs(x)) gives it (a NaN
/// anywhere makes it NaN, and then s stays 1).
void per_tensor(std::span<const float> x, std::span<Fp8Effect> out) {
  float amax = 0.0f;
  for (float v : x) amax = std::isnan(v) ? v : std::isnan(amax) ? amax : std::max(amax, std::fabs(v));
  const auto& st = storages();
  for (std::size_t k = 0; k < kPerTensor; ++k) {
    out[k].scale = fp8_scale(amax, st[k].fp8);
    add(count_rounding(x.data(), x.size(), float(out[k].scale), st[k].t), out[k]);
  }
}

std::vector<Fp8Effect> named_effects() {
  std::vector<Fp8Effect> out(std::size(kFp8Storages));
  for (std::size_t k = 0; k < out.size(); ++k) out[k].format = std::string(kFp8Storages[k]);
  return out;
}

}  // namespace

template <class T>
std::vector<Fp8Effect> fp8_effects(const T* values, std::size_t n) {
  std::vector<float> copy;
  const std::span<const float> x = as_f32(values, n, copy);
  std::vector<Fp8Effect> out = named_effects();
  per_tensor(x, out);
  mx_blocks(x, std::span(storages()).subspan(kPerTensor), std::span(out).subspan(kPerTensor));
  return out;
}

void add_fp8_effects(const float* values, std::size_t rows, std::size_t cols, std::vector<Fp8Effect>& into) {
  if (into.empty()) into = named_effects();
  per_tensor({values, rows * cols}, into);
  for (std::size_t k = 0; k < kPerTensor; ++k) into[k].scale = 0;  // one scale per batch: none to report
  for (std::size_t r = 0; r < rows; ++r)
    mx_blocks({values + r * cols, cols}, std::span(storages()).subspan(kPerTensor),
              std::span(into).subspan(kPerTensor));
}

template std::vector<Fp8Effect> fp8_effects<float>(const float*, std::size_t);
template std::vector<Fp8Effect> fp8_effects<double>(const double*, std::size_t);

}  // namespace halfmap::diagnose
