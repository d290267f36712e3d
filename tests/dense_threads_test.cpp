// Multi-threaded dense layers (DenseArgs::threads, kernels/common/gemm_team.hpp) and the pool under them
// (include/halfmap/parallel.hpp).
//
// The claim tested: a dense kernel's result on any number of threads is bit-identical to its single-threaded
// result, for every dense kernel of the registry, on shapes that split into several row and column bands, k
// blocks and jc blocks, with inf, NaN and subnormal inputs among the values. Tiles are independent and each
// keeps its k order, so nothing but identity is allowed. For the kernels whose driver honours `threads` (every
// ISA but ref and neonfhm, registry.hpp), the test also checks that a team of several threads really ran.
#include <cmath>
#include <cstring>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "halfmap/cpu.hpp"
#include "halfmap/half.hpp"
#include "halfmap/parallel.hpp"
#include "halfmap/registry.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

#if defined(HALFMAP_TEST_NO_THREADS)
constexpr bool kThreadsWork = false;  // under qemu-aarch64 a first pthread_create hangs (tests/CMakeLists.txt)
#else
constexpr bool kThreadsWork = true;
#endif

/// A storage-typed matrix of `count` values: uniform in [-2, 2), a few of them inf, -inf, NaN, an fp16 or bf16
/// subnormal and an f32 subnormal (seeded, so a failure can be replayed with the seed in its message).
std::vector<unsigned char> operand(DType t, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<unsigned char> out(count * dtype_size(t));
  const float specials[] = {INFINITY, -INFINITY, NAN, 0x1p-20f, 0x1p-130f, -0.0f};
  for (std::size_t i = 0; i < count; ++i) {
    float v = u(rng);
    if (rng() % 97 == 0) v = specials[rng() % std::size(specials)];
    switch (t) {
      case DType::f32:
        std::memcpy(&out[i * 4], &v, 4);
        break;
      case DType::f16: {
        const std::uint16_t b = to_f16(v).bits;
        std::memcpy(&out[i * 2], &b, 2);
        break;
      }
      case DType::bf16: {
        const std::uint16_t b = to_bf16(v).bits;
        std::memcpy(&out[i * 2], &b, 2);
        break;
      }
    }
  }
  return out;
}

bool honours_threads(const Kernel& k) { return k.isa != Isa::ref && k.isa != Isa::neonfhm && k.isa != Isa::sve; }

struct Shape {
  std::size_t m, n, k;
};
// Each with at least 2^18 · 8 multiply-adds for the team to use 8 threads where its tiles allow:
//   several row bands; k past every kKc (k blocks through the accumulator); n past every kNc (several jc blocks);
//   fewer rows than any micro-tile (a column split); more threads than tiles (2 × 3 of 8 × 64 tiles; every
//   shape has at least 2 micro-tiles of every ISA, so that a team can run).
constexpr Shape kShapes[] = {{150, 200, 90}, {40, 72, 1100}, {9, 4200, 60}, {3, 1000, 700}, {13, 130, 5000}};
constexpr unsigned kThreadCounts[] = {2, 3, 8};

struct KernelParam {
  const Kernel* k;
  friend void PrintTo(const KernelParam& p, std::ostream* os) { *os << p.k->name; }
};

std::vector<KernelParam> kernels_of(Op op) {
  std::vector<KernelParam> v;
  for (const Kernel& k : kernels()) {
    if (k.op == op) v.push_back({&k});
  }
  return v;
}

std::string kernel_test_name(const ::testing::TestParamInfo<KernelParam>& info) {
  return std::string(info.param.k->name);
}

class DenseThreads : public ::testing::TestWithParam<KernelParam> {
 protected:
  void SetUp() override {
    if (!kThreadsWork) GTEST_SKIP() << "threads are not created under this emulator (see tests/CMakeLists.txt)";
    const Kernel& k = *GetParam().k;
    if (!isa_enabled(k.isa)) GTEST_SKIP() << "ISA " << isa_name(k.isa) << " not enabled here";
  }
};

using DenseFwdThreads = DenseThreads;
using DenseBwdThreads = DenseThreads;

/// The thread counts tried on kernel k: all of kThreadCounts where its driver splits the work, one (to check that
/// `threads` changes nothing) where it ignores it, as the f16 model's software rounding is slow.
std::vector<unsigned> thread_counts(const Kernel& k) {
  if (!honours_threads(k)) return {kThreadCounts[0]};
  return {std::begin(kThreadCounts), std::end(kThreadCounts)};
}

TEST_P(DenseFwdThreads, BitIdenticalToOneThread) {
  const Kernel& k = *GetParam().k;
  const std::size_t e = dtype_size(k.storage);
  std::uint64_t seed = 0x7EA3'0001;
  for (std::size_t si = 0; si < std::size(kShapes); ++si) {
    const Shape& s = kShapes[si];
    const Act act = si % 2 == 1 ? Act::relu : Act::identity;
    const auto x = operand(k.storage, s.m * s.k, ++seed), w = operand(k.storage, s.k * s.n, ++seed),
               b = operand(k.storage, s.n, ++seed);
    std::vector<unsigned char> one(s.m * s.n * e), many(s.m * s.n * e);
    k.dense({s.m, s.n, s.k, x.data(), w.data(), b.data(), one.data(), act});
    for (const unsigned t : thread_counts(k)) {
      const std::size_t teams = teams_started();
      std::fill(many.begin(), many.end(), 0xA5);
      DenseArgs args{s.m, s.n, s.k, x.data(), w.data(), b.data(), many.data(), act};
      args.threads = t;
      k.dense(args);
      EXPECT_TRUE(one == many) << k.name << " " << s.m << "x" << s.n << "x" << s.k << " act " << int(act) << " on " << t
                               << " threads differs from 1 thread (seed " << seed << ")";
      if (honours_threads(k)) {
        EXPECT_GT(teams_started(), teams) << "no team ran at " << t << " threads";
      }
    }
  }
}

TEST_P(DenseBwdThreads, BitIdenticalToOneThread) {
  const Kernel& k = *GetParam().k;
  const std::size_t e = dtype_size(k.storage);
  std::uint64_t seed = 0x7EA3'1001;
  for (const Shape& s : kShapes) {
    const auto x = operand(k.storage, s.m * s.k, ++seed), w = operand(k.storage, s.k * s.n, ++seed),
               dy = operand(k.storage, s.m * s.n, ++seed);
    const auto run = [&](unsigned t, std::vector<unsigned char>& dx, std::vector<unsigned char>& dw,
                         std::vector<unsigned char>& db) {
      dx.assign(s.m * s.k * e, 0xA5);
      dw.assign(s.k * s.n * e, 0xA5);
      db.assign(s.n * e, 0xA5);
      DenseBwdArgs args{s.m, s.n, s.k, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data()};
      args.threads = t;
      k.dense_bwd(args);
    };
    std::vector<unsigned char> dx1, dw1, db1, dx, dw, db;
    run(1, dx1, dw1, db1);
    for (const unsigned t : thread_counts(k)) {
      const std::size_t teams = teams_started();
      run(t, dx, dw, db);
      const std::string where = fmt::format("{} {}x{}x{} on {} threads (seed {})", k.name, s.m, s.n, s.k, t, seed);
      EXPECT_TRUE(dx == dx1) << "dX differs from 1 thread's: " << where;
      EXPECT_TRUE(dw == dw1) << "dW differs from 1 thread's: " << where;
      EXPECT_TRUE(db == db1) << "db differs from 1 thread's: " << where;
      if (honours_threads(k)) {
        EXPECT_GT(teams_started(), teams) << "no team ran: " << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, DenseFwdThreads, ::testing::ValuesIn(kernels_of(Op::dense_fwd)), kernel_test_name);
INSTANTIATE_TEST_SUITE_P(Registry, DenseBwdThreads, ::testing::ValuesIn(kernels_of(Op::dense_bwd)), kernel_test_name);

// ---- the pool ---------------------------------------------------------------------------------------------------

TEST(ParseThreads, AcceptsOneToTheMaximumOnly) {
  EXPECT_EQ(parse_threads("1"), 1u);
  EXPECT_EQ(parse_threads("64"), 64u);
  EXPECT_EQ(parse_threads("1024"), kMaxThreads);
  for (const char* bad : {"", "0", "1025", "-1", "+2", "2 ", " 2", "2x", "99999", "0x10"}) {
    EXPECT_FALSE(parse_threads(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(RunTeam, OneThreadRunsOnTheCaller) {
  const std::size_t teams = teams_started();
  std::thread::id ran;
  unsigned size = 0, rank = 99;
  run_team(1, [&](Team& t) {
    ran = std::this_thread::get_id();
    size = t.size();
    rank = t.rank();
    t.barrier();  // a team of one passes its barrier alone
  });
  EXPECT_EQ(ran, std::this_thread::get_id());
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(rank, 0u);
  EXPECT_EQ(teams_started(), teams);
}

/// Every member writes its slot, waits, then reads every other member's slot of the same round: the barrier
/// must make all writes of a round visible, and no member may enter round r + 1 before all have left round r's
/// reads (else a slot would already hold r + 1).
void barrier_rounds(unsigned threads, int rounds, bool& ok) {
  std::vector<int> slots(threads * 16, -1);  // 16 ints apart: each slot on a cache line of its own
  std::vector<int> bad(threads, 0);
  run_team(threads, [&](Team& t) {
    for (int r = 0; r < rounds; ++r) {
      slots[t.rank() * 16] = r;
      t.barrier();
      for (unsigned o = 0; o < t.size(); ++o) bad[t.rank()] += slots[o * 16] != r;
      t.barrier();
    }
  });
  ok = true;
  for (const int b : bad) ok = ok && b == 0;
}

TEST(RunTeam, EveryRankRunsOnceAndTheBarrierOrdersRounds) {
  if (!kThreadsWork) GTEST_SKIP() << "threads are not created under this emulator";
  for (const unsigned threads : {2u, 3u, 5u, 16u}) {
    std::vector<int> ran(threads, 0);
    std::set<std::thread::id> ids;
    std::mutex m;
    run_team(threads, [&](Team& t) {
      ASSERT_EQ(t.size(), threads);
      ++ran[t.rank()];
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    });
    for (unsigned r = 0; r < threads; ++r) EXPECT_EQ(ran[r], 1) << "rank " << r << " of " << threads;
    EXPECT_EQ(ids.size(), threads) << "each member on a thread of its own";
    bool ok = false;
    barrier_rounds(threads, 500, ok);
    EXPECT_TRUE(ok) << threads << " threads";
  }
}

TEST(RunTeam, ConcurrentAndNestedCallersGetWorkersOfTheirOwn) {
  if (!kThreadsWork) GTEST_SKIP() << "threads are not created under this emulator";
  std::vector<int> ok(4, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&ok, c] {
      bool good = true;
      for (int i = 0; i < 20 && good; ++i) barrier_rounds(3, 50, good);
      // A member of a team starting a team of its own.
      std::vector<int> inner(2, 0);
      run_team(2, [&](Team& t) {
        bool nested_ok = false;
        barrier_rounds(2, 20, nested_ok);
        inner[t.rank()] = nested_ok ? 1 : 0;
      });
      ok[c] = good && inner[0] == 1 && inner[1] == 1;
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(ok[c], 1) << "caller " << c;
}

TEST(HardwareThreads, AtLeastOne) { EXPECT_GE(hardware_threads(), 1u); }

}  // namespace
}  // namespace halfmap
