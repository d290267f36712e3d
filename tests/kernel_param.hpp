// What the registry-parameterised kernel tests share (nn_test, norm_test, gelu_test): fenced arrays, the fp16
// special values, the parameter, the kernels of some ops, their test names, and the check of one value against an
// interval of float64 rounded to the storage type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "halfmap/registry.hpp"
#include "test_util.hpp"

namespace halfmap::test {

/// An array of n storage elements with fenced surroundings (GuardedArray): inputs are fenced with NaN (a kernel that
/// reads past them produces NaN), outputs with a guard pattern and start as unwritten_bits.
class Arr : public GuardedArray {
 public:
  static constexpr std::size_t kGuard = 48;

  Arr(DType t, std::size_t n, std::size_t offset, std::uint32_t outside)
      : GuardedArray(t, n, kGuard, offset, outside) {}
  static Arr input(DType t, std::size_t n, std::size_t offset) { return Arr(t, n, offset, nan_bits(t)); }
  static Arr output(DType t, std::size_t n, std::size_t offset) {
    Arr a(t, n, offset, guard_bits(t));
    a.fill_bits(unwritten_bits(t));
    return a;
  }
};

/// fp16 patterns that must flow through the fp16 paths exactly: infinities, NaNs with and without payloads (and a
/// signalling one), the largest finite values, subnormals and signed zeros.
constexpr std::uint16_t kF16Specials[] = {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7D01, 0x7F3A, 0xFD55, 0x7BFF,
                                          0xFBFF, 0x0001, 0x8001, 0x03FF, 0x8200, 0x0000, 0x8000};

/// Runs `check(i)` over n elements and reports the first few failures and the count.
template <class F>
void expect_all(const char* what, std::size_t n, F check) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ::testing::AssertionResult r = check(i);
    if (r) continue;
    if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: " << r.message();
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " elements outside the bound";
}

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

/// Every registered kernel (peers aside: the tests' binaries link none) of one of `ops`, in the precision modes of
/// docs/numerics.md (the scaled fp8 modes have their own test, fp8_modes_test).
inline std::vector<KernelParam> kernels_of_ops(std::initializer_list<Op> ops) {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (std::find(ops.begin(), ops.end(), k.op) != ops.end() && !is_scaled(k.mode)) v.push_back({&k});
  }
  return v;
}

inline std::string kernel_param_name(const ::testing::TestParamInfo<KernelParam>& info) {
  return std::string(info.param.k->name);
}

/// `got` (exact, as a double) in [round(e - a), round(e + a)], rounding to storage type t; a NaN or infinite oracle
/// must be met exactly. `flush`: a result whose interval reaches below 2^-126 may also be ±0 (avx512bf16's
/// vcvtneps2bf16 flushes f32-subnormal results).
inline ::testing::AssertionResult within_rounded(DType t, double got, double e, double a, bool flush) {
  if (std::isnan(e) || std::isinf(e)) {
    if (std::isnan(e) ? std::isnan(got) : got == e) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << ", oracle " << e;
  }
  const double lo = round_to(t, e - a), hi = round_to(t, e + a);
  if (got >= lo && got <= hi) return ::testing::AssertionSuccess();
  if (flush && got == 0 && std::min(std::fabs(e - a), std::fabs(e + a)) < 0x1p-126) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << hex(got) << ", oracle " << hex(e) << ", bound " << a;
}

}  // namespace halfmap::test
