// What the registry-parameterised kernel tests share (norm_test, gelu_test): the parameter, the kernels of some ops,
// their test names, and the check of one value against an interval of float64 rounded to the storage type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "halfmap/registry.hpp"
#include "test_util.hpp"

namespace halfmap::test {

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

/// Every registered kernel (peers aside: the tests' binaries link none) of one of `ops`.
inline std::vector<KernelParam> kernels_of_ops(std::initializer_list<Op> ops) {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (std::find(ops.begin(), ops.end(), k.op) != ops.end()) v.push_back({&k});
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
