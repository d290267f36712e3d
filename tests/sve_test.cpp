// The sve path at whatever vector length this process runs with (tests/CMakeLists.txt runs this binary, and the
// sve kernels' tests of reduce_test, dense_test and dense_threads_test, under qemu at 128, 512 and 2048 bits):
//   * the vector length is the one asked for (HALFMAP_TEST_SVE_BYTES, set by those ctest entries; svcntb()
//     executed) and the one `halfmap info` reports (cpu_features().sve_vector_bits, from prctl);
//   * the f32 reductions have their fixed order (element i into f32 lane i % 32 from +0, fadd or one-rounding
//     fma, the lanes folded by f32acc_model_fold), bit for bit: the order is the same at every vector length, so
//     the same bits come out at every length (the registry's tests check the f16_f32acc and f16 kernels against
//     f32acc_model_reduce and f16_model_reduce with the kernels' lane counts, 32 and 64);
//   * f32 dense forward and backward accumulate each output over its inner index in order from +0, bit for bit;
//   * the sve kernels give neonfhm's (f16_f32acc) and neonfp16's (f16) bits on the same inputs, where those run.
// Skipped where the CPU lacks SVE (or HALFMAP_ISA holds the path back): nothing of it is executed then.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/cpu.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {
namespace test::hw {
std::uint64_t sve_vector_bytes();  // tests/hw/sve_vl.cpp (+sve); only where cpu_features().sve
}  // namespace test::hw
namespace {

const Kernel& sve_kernel(const std::string& name) {
  const Kernel* k = find_kernel(name);
  if (k == nullptr) ADD_FAILURE() << name << " is not registered";
  return *k;
}

class Sve : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::sve)) GTEST_SKIP() << "this CPU lacks SVE (HWCAP sve)";
    if (!isa_enabled(Isa::sve)) GTEST_SKIP() << "HALFMAP_ISA holds the sve path back";
  }
};

TEST_F(Sve, VectorLengthIsTheOneAskedForAndTheOneReported) {
  const std::uint64_t bytes = test::hw::sve_vector_bytes();
  std::printf("SVE vector length: %llu bits\n", static_cast<unsigned long long>(bytes * 8));
  RecordProperty("sve_vector_bits", std::to_string(bytes * 8));
  EXPECT_EQ(cpu_features().sve_vector_bits, 8 * bytes) << "prctl(PR_SVE_GET_VL) disagrees with svcntb()";
  EXPECT_TRUE(bytes >= 16 && bytes <= 256 && bytes % 16 == 0) << bytes;
  if (const char* want = std::getenv("HALFMAP_TEST_SVE_BYTES")) {
    EXPECT_EQ(bytes, std::strtoull(want, nullptr, 10)) << "qemu's sve-default-vector-length did not apply";
  }
}

std::vector<float> f32_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng) * std::ldexp(1.0f, int(rng() % 9) - 4);  // mixed magnitudes: rounding differs
  return v;
}

std::vector<f16> f16_values(std::size_t n, unsigned seed) {
  std::vector<f16> v;
  for (float x : f32_values(n, seed)) v.push_back(to_f16(x));
  return v;
}

const std::size_t kSizes[] = {0, 1, 7, 31, 32, 33, 63, 64, 65, 100, 257, 1000, 4099};

float f32_fixed_order(Op op, const float* x, const float* y, std::size_t n) {
  float lanes[32] = {};
  for (std::size_t i = 0; i < n; ++i) {
    float& a = lanes[i % 32];
    a = op == Op::sum ? a + x[i] : std::fma(x[i], op == Op::sumsq ? x[i] : y[i], a);
  }
  return f32acc_model_fold(lanes, 32);
}

TEST_F(Sve, F32ReductionsAddIntoThirtyTwoLanesInAFixedOrder) {
  for (Op op : {Op::sum, Op::sumsq, Op::dot}) {
    const Kernel& k = sve_kernel(fmt::format("f32_{}__sve", op_name(op)));
    EXPECT_EQ(k.lanes, 32u);
    for (std::size_t n : kSizes) {
      const std::vector<float> x = f32_values(n, 1 + n), y = f32_values(n, 7 + n);
      const float got = k.reduce(x.data(), y.data(), n), want = f32_fixed_order(op, x.data(), y.data(), n);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
          << k.name << " n=" << n << ": " << got << " vs the 32-lane order's " << want;
    }
  }
}

/// out[i][j] = Σ_p a[i·sa_i + p·sa_p] · b[p·sb_p + j·sb_j] in order from +0 with one rounding per term.
std::vector<float> seq_gemm(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t sa_i,
                            std::size_t sa_p, const float* b, std::size_t sb_p, std::size_t sb_j) {
  std::vector<float> out(m * n);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < k; ++p) acc = std::fma(a[i * sa_i + p * sa_p], b[p * sb_p + j * sb_j], acc);
      out[i * n + j] = acc;
    }
  }
  return out;
}

void expect_bits(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) && bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", the sequential order gives " << want[i];
    }
  }
}

struct Shape {
  std::size_t m, n, k;
};
// n = 130 needs three vectors of columns even at 2048 bits; m = 5 and 6 leave one and two rows past a block of 4.
const Shape kShapes[] = {{1, 1, 1}, {5, 37, 19}, {6, 130, 3}, {9, 16, 64}, {4, 65, 33}};

TEST_F(Sve, F32DenseAccumulatesEachOutputInOrder) {
  const Kernel& fwd = sve_kernel("f32_dense_fwd__sve");
  const Kernel& bwd = sve_kernel("f32_dense_bwd__sve");
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(fmt::format("m={} n={} k={}", s.m, s.n, s.k));
    const std::vector<float> x = f32_values(s.m * s.k, 11), w = f32_values(s.k * s.n, 12), b = f32_values(s.n, 13);
    const std::vector<float> dy = f32_values(s.m * s.n, 14);
    for (Act act : {Act::identity, Act::relu}) {
      std::vector<float> y(s.m * s.n, -7.0f);
      fwd.dense({s.m, s.n, s.k, x.data(), w.data(), b.data(), y.data(), act});
      std::vector<float> want = seq_gemm(s.m, s.n, s.k, x.data(), s.k, 1, w.data(), s.n, 1);
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float v = want[i] + b[i % s.n];
        want[i] = act == Act::relu && v < 0.0f ? 0.0f : v;
      }
      expect_bits("Y", y, want);
    }
    std::vector<float> dx(s.m * s.k), dw(s.k * s.n), db(s.n);
    bwd.dense_bwd({s.m, s.n, s.k, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data()});
    expect_bits("dX", dx, seq_gemm(s.m, s.k, s.n, dy.data(), s.n, 1, w.data(), 1, s.n));
    expect_bits("dW", dw, seq_gemm(s.k, s.n, s.m, x.data(), 1, s.k, dy.data(), s.n, 1));
    std::vector<float> want_db(s.n, 0.0f);
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < s.n; ++j) want_db[j] += dy[i * s.n + j];
    }
    expect_bits("db", db, want_db);
  }
}

TEST_F(Sve, HalfPrecisionReductionsGiveTheNeonPathsBits) {
  // neonfhm's FMLAL and the sve f16_f32acc kernels share 32 f32 lanes; neonfp16 and the sve f16 kernels 64 fp16
  // lanes. Finite inputs (NaN payloads may differ with signalling NaNs: sve/kernels.cpp).
  int compared = 0;
  for (const auto& [mode, other] : {std::pair{std::string("f16_f32acc"), std::string("neonfhm")},
                                    std::pair{std::string("f16"), std::string("neonfp16")}}) {
    for (Op op : {Op::sum, Op::sumsq, Op::dot}) {
      const Kernel& k = sve_kernel(fmt::format("{}_{}__sve", mode, op_name(op)));
      const Kernel* o = find_kernel(fmt::format("{}_{}__{}", mode, op_name(op), other));
      if (o == nullptr || !kernel_enabled(*o)) continue;
      for (std::size_t n : kSizes) {
        const std::vector<f16> x = f16_values(n, 3 + n), y = f16_values(n, 5 + n);
        const float a = k.reduce(x.data(), y.data(), n), b = o->reduce(x.data(), y.data(), n);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(b))
            << k.name << " vs " << o->name << " n=" << n;
        ++compared;
      }
    }
  }
  RecordProperty("compared", compared);
}

}  // namespace
}  // namespace halfmap
