// Every attention kernel of the registry (AttentionArgs in registry.hpp), parameterised over kernels() and named
// by kernel, so such a kernel cannot exist untested; the f16 model against float64; the backward formulas by
// central differences; and the overflow facts the scale placement decides (docs/numerics.md: QKᵀ in fp16 storage).
// A kernel whose ISA may not run here is skipped with the reason, never called.
//
// Sizes: len 1, 2, 3, 9, 17 and 33 (one softmax row shorter, equal to and longer than the dense tiles and the fp16
// softmax lanes), dim 1, 5, 16, 64 and 128, causal or not, forward and backward together and each alone. Inputs
// are fenced with NaN and outputs with guard patterns (test_util.hpp), and the inputs are checked unchanged.
//
// Tolerance policy (docs/contributing.md, tolerances), per precision mode:
//   * f16, f16_model: bit-exact against f16_model_attention(args, prescale, k.lanes, k.fma): o, scores, dq, dk, dv
//     as fp16 bits (every NaN the canonical 0x7E00). A second variant puts ±inf, NaNs and the largest finite
//     values among the inputs.
//   * f32, f16_f32acc, bf16_f32acc: against a float64 oracle E of the stored inputs with the kernel's c; each
//     output must lie in [round(E - A), round(E + A)]. A is a running error bound carried through the recipe,
//     with u_s the storage type's unit roundoff (f32 2^-24, fp16 2^-11, bf16 2^-8) and u = 2^-24:
//       a stored value v (rounded from v̂ with bound e): e + u_s(|v| + e);
//       a sum of n products a·b (bounds ea, eb): Σ(|a|eb + |b|ea + ea·eb) + 1.01·(n + 8)·u·Σ(|a| + ea)(|b| + eb);
//       softmax row (score bounds eS): p_j·(exp(2·max_j eS_j)·(1 + 1.1·(L + 8)·u) - 1);
//       dS = P·(dP - δ) in f32: |dP - δ|·eP + P·(edP + eδ) + eP·(edP + eδ) + 3u·|P·(dP - δ)|;
//     each then stored. The final A is 1.25 times the bound plus 2^-140. The same oracle with u = u_s = 2^-11 (every
//     operation rounded to fp16) bounds the f16 model itself, which checks that the model computes attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "halfmap/f16_model.hpp"
#include "halfmap/half.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "kernel_param.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

using test::Arr;
using test::expect_all;
using test::kF16Specials;
using test::within_rounded;

bool fp16_mode(const Kernel& k) { return k.mode == Mode::f16 || k.mode == Mode::f16_model; }
bool prescale_of(const Kernel& k) { return k.op == Op::attention_prescale; }

double unit_roundoff(DType t) { return t == DType::f32 ? 0x1p-24 : t == DType::f16 ? 0x1p-11 : 0x1p-8; }

/// The scale the kernels use: 1/sqrtf(d) in f32, rounded to fp16 in the f16 modes.
double scale_of(std::size_t d, bool f16_arith) {
  const float c = 1.0f / std::sqrt(float(d));
  return f16_arith ? double(to_f32(to_f16(c))) : double(c);
}

struct AttCase {
  std::size_t len, dim;
  bool causal;
  Arr q, k, v, dout, o, scores, dq, dk, dv;
  AttCase(DType t, std::size_t l, std::size_t d, bool c, unsigned off)
      : len(l),
        dim(d),
        causal(c),
        q(Arr::input(t, l * d, off & 1)),
        k(Arr::input(t, l * d, (off >> 1) & 1)),
        v(Arr::input(t, l * d, (off >> 2) & 1)),
        dout(Arr::input(t, l * d, off & 1)),
        o(Arr::output(t, l * d, (off >> 1) & 1)),
        scores(Arr::output(t, l * l, off & 1)),
        dq(Arr::output(t, l * d, (off >> 2) & 1)),
        dk(Arr::output(t, l * d, off & 1)),
        dv(Arr::output(t, l * d, (off >> 1) & 1)) {}
  AttentionArgs args(bool fwd, bool bwd) {
    return AttentionArgs{len,
                         dim,
                         causal,
                         q.data(),
                         k.data(),
                         v.data(),
                         fwd ? o.data() : nullptr,
                         fwd ? scores.data() : nullptr,
                         bwd ? dout.data() : nullptr,
                         bwd ? dq.data() : nullptr,
                         bwd ? dk.data() : nullptr,
                         bwd ? dv.data() : nullptr,
                         1};
  }
};

/// to's inputs become from's (same sizes).
void copy_inputs(const AttCase& from, AttCase& to) {
  for (std::size_t i = 0; i < from.q.size(); ++i) {
    to.q.set_bits(i, from.q.bits(i)), to.k.set_bits(i, from.k.bits(i)), to.v.set_bits(i, from.v.bits(i));
    to.dout.set_bits(i, from.dout.bits(i));
  }
}

void fill(Arr& a, test::Rng& rng, double lim) {
  for (std::size_t i = 0; i < a.size(); ++i) a.set(i, rng.uniform(-lim, lim));
}

/// Values with their running error bounds.
struct Bounded {
  std::vector<double> v, e;
  explicit Bounded(std::size_t n = 0) : v(n, 0.0), e(n, 0.0) {}
};

/// The float64 oracle with its bounds (see the top): u_s the storage's unit roundoff, u the arithmetic's.
struct Oracle {
  Bounded o, scores, dq, dk, dv;
};

Oracle oracle_of(const AttCase& c, bool prescale, double cs, double us, double u) {
  const std::size_t L = c.len, d = c.dim;
  auto store = [us](double v, double e) { return e + us * (std::fabs(v) + e); };
  // C (m×n) = Σ_k A(m×k)·B(k×n), stored
  auto matmul = [&](std::size_t m, std::size_t kk, std::size_t n, auto a, auto b, Bounded& out) {
    out = Bounded(m * n);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0, err = 0, mag = 0;
        for (std::size_t p = 0; p < kk; ++p) {
          const auto [av, ae] = a(i, p);
          const auto [bv, be] = b(p, j);
          s += av * bv;
          err += std::fabs(av) * be + std::fabs(bv) * ae + ae * be;
          mag += (std::fabs(av) + ae) * (std::fabs(bv) + be);
        }
        out.v[i * n + j] = s;
        out.e[i * n + j] = store(s, err + 1.01 * double(kk + 8) * u * mag);
      }
    }
  };
  using VE = std::pair<double, double>;
  Bounded qs(L * d);
  for (std::size_t i = 0; i < L * d; ++i) {
    qs.v[i] = prescale ? c.q.value(i) * cs : c.q.value(i);
    qs.e[i] = prescale ? store(qs.v[i], 0) : 0.0;
  }
  Oracle r;
  Bounded s;
  matmul(
      L, d, L,
      [&](std::size_t i, std::size_t p) {
        return VE{qs.v[i * d + p], qs.e[i * d + p]};
      },
      [&](std::size_t p, std::size_t j) {
        return VE{c.k.value(j * d + p), 0.0};
      },
      s);
  if (!prescale) {
    for (std::size_t i = 0; i < L * L; ++i) {
      s.v[i] *= cs;
      s.e[i] = store(s.v[i], s.e[i] * cs);
    }
  }
  r.scores = s;
  Bounded p(L * L);
  for (std::size_t i = 0; i < L; ++i) {
    const std::size_t valid = c.causal ? i + 1 : L;
    double m = -INFINITY, emax = 0, sum = 0;
    for (std::size_t j = 0; j < valid; ++j) m = std::max(m, s.v[i * L + j]), emax = std::max(emax, s.e[i * L + j]);
    for (std::size_t j = 0; j < valid; ++j) sum += std::exp(s.v[i * L + j] - m);
    const double rel = std::exp(2 * emax) * (1 + 1.1 * double(L + 8) * u) - 1;
    for (std::size_t j = 0; j < valid; ++j) {
      p.v[i * L + j] = std::exp(s.v[i * L + j] - m) / sum;
      p.e[i * L + j] = store(p.v[i * L + j], p.v[i * L + j] * rel);
    }
  }
  matmul(
      L, L, d,
      [&](std::size_t i, std::size_t k) {
        return VE{p.v[i * L + k], p.e[i * L + k]};
      },
      [&](std::size_t k, std::size_t j) {
        return VE{c.v.value(k * d + j), 0.0};
      },
      r.o);
  // backward
  Bounded dp;
  matmul(
      L, d, L,
      [&](std::size_t i, std::size_t j) {
        return VE{c.dout.value(i * d + j), 0.0};
      },
      [&](std::size_t j, std::size_t k) {
        return VE{c.v.value(k * d + j), 0.0};
      },
      dp);
  matmul(
      L, L, d,
      [&](std::size_t k, std::size_t i) {
        return VE{p.v[i * L + k], p.e[i * L + k]};
      },
      [&](std::size_t i, std::size_t j) {
        return VE{c.dout.value(i * d + j), 0.0};
      },
      r.dv);
  Bounded ds(L * L);
  for (std::size_t i = 0; i < L; ++i) {
    const std::size_t valid = c.causal ? i + 1 : L;
    double delta = 0, ed = 0, mag = 0;
    for (std::size_t j = 0; j < L; ++j) {
      const double pv = p.v[i * L + j], pe = p.e[i * L + j], dv = dp.v[i * L + j], de = dp.e[i * L + j];
      delta += pv * dv;
      ed += std::fabs(pv) * de + std::fabs(dv) * pe + pe * de;
      mag += (std::fabs(pv) + pe) * (std::fabs(dv) + de);
    }
    ed += 1.01 * double(L + 8) * u * mag;
    for (std::size_t j = 0; j < valid; ++j) {
      const double pv = p.v[i * L + j], pe = p.e[i * L + j];
      const double t = dp.v[i * L + j] - delta, et = dp.e[i * L + j] + ed;
      const double val = pv * t;
      ds.v[i * L + j] = val;
      ds.e[i * L + j] =
          store(val, std::fabs(t) * pe + pv * et + pe * et + 3 * u * (std::fabs(pv) + pe) * (std::fabs(t) + et));
    }
  }
  if (!prescale) {
    for (std::size_t i = 0; i < L * L; ++i) {
      ds.v[i] *= cs;
      ds.e[i] = store(ds.v[i], ds.e[i] * cs);
    }
  }
  Bounded dqs;
  matmul(
      L, L, d,
      [&](std::size_t i, std::size_t j) {
        return VE{ds.v[i * L + j], ds.e[i * L + j]};
      },
      [&](std::size_t j, std::size_t p) {
        return VE{c.k.value(j * d + p), 0.0};
      },
      dqs);
  matmul(
      L, L, d,
      [&](std::size_t j, std::size_t i) {
        return VE{ds.v[i * L + j], ds.e[i * L + j]};
      },
      [&](std::size_t i, std::size_t p) {
        return VE{qs.v[i * d + p], qs.e[i * d + p]};
      },
      r.dk);
  r.dq = dqs;
  if (prescale) {
    for (std::size_t i = 0; i < L * d; ++i) {
      r.dq.v[i] = dqs.v[i] * cs;
      r.dq.e[i] = store(r.dq.v[i], dqs.e[i] * cs);
    }
  }
  return r;
}

void expect_within(const char* what, const Arr& got, const Bounded& want, DType t, bool flush) {
  expect_all(what, got.size(), [&](std::size_t i) {
    return within_rounded(t, got.value(i), want.v[i], 1.25 * want.e[i] + 0x1p-140, flush);
  });
}

void expect_bits(const char* what, const Arr& got, const Arr& want) {
  expect_all(what, got.size(), [&](std::size_t i) {
    if (got.bits(i) == want.bits(i)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << test::hex16(std::uint16_t(got.bits(i))) << ", model "
                                         << test::hex16(std::uint16_t(want.bits(i)));
  });
}

class AttentionKernelTest : public ::testing::TestWithParam<test::KernelParam> {
 protected:
  void SetUp() override {
    const Kernel& k = *GetParam().k;
    if (!kernel_enabled(k)) GTEST_SKIP() << k.name << ": " << test::disabled_reason(k.isa);
  }
};

struct Shape {
  std::size_t len, dim;
};
constexpr Shape kShapes[] = {{1, 1}, {2, 5}, {3, 16}, {9, 64}, {17, 128}, {33, 64}, {33, 5}};

/// Runs one case in the kernel and checks it against the model (f16 modes) or the oracle (f32-acc modes).
void check_case(const Kernel& k, AttCase& c, bool fwd, bool bwd, const std::string& label) {
  SCOPED_TRACE(label);
  const DType t = k.storage;
  const auto q0 = c.q.snapshot(), k0 = c.k.snapshot(), v0 = c.v.snapshot(), d0 = c.dout.snapshot();
  k.attention(c.args(fwd, bwd));
  EXPECT_TRUE(c.q.unchanged_since(q0) && c.k.unchanged_since(k0) && c.v.unchanged_since(v0) &&
              c.dout.unchanged_since(d0))
      << "an input changed";
  for (const Arr* a : {&c.o, &c.scores, &c.dq, &c.dk, &c.dv}) EXPECT_EQ(a->guard_damage(), "");
  if (!fwd) {
    EXPECT_EQ(c.o.bits(0), test::unwritten_bits(t)) << "o written without being asked";
  }
  if (!bwd) {
    EXPECT_EQ(c.dq.bits(0), test::unwritten_bits(t)) << "dq written without being asked";
  }
  if (fp16_mode(k)) {
    AttCase m(t, c.len, c.dim, c.causal, 0);
    copy_inputs(c, m);
    f16_model_attention(m.args(fwd, bwd), prescale_of(k), k.lanes, k.fma);
    if (fwd) expect_bits("o", c.o, m.o), expect_bits("scores", c.scores, m.scores);
    if (bwd) expect_bits("dq", c.dq, m.dq), expect_bits("dk", c.dk, m.dk), expect_bits("dv", c.dv, m.dv);
    return;
  }
  const Oracle r = oracle_of(c, prescale_of(k), scale_of(c.dim, false), unit_roundoff(t), 0x1p-24);
  const bool flush = k.isa == Isa::avx512bf16;
  if (fwd) expect_within("o", c.o, r.o, t, flush), expect_within("scores", c.scores, r.scores, t, flush);
  if (bwd) {
    expect_within("dq", c.dq, r.dq, t, flush);
    expect_within("dk", c.dk, r.dk, t, flush);
    expect_within("dv", c.dv, r.dv, t, flush);
  }
}

TEST_P(AttentionKernelTest, MatchesModelOrOracleAtEveryShape) {
  const Kernel& k = *GetParam().k;
  unsigned off = 0;
  for (const Shape& sh : kShapes) {
    for (bool causal : {false, true}) {
      test::Rng rng(test::case_seed(sh.len, sh.dim, causal));
      AttCase c(k.storage, sh.len, sh.dim, causal, off++);
      fill(c.q, rng, 2.0), fill(c.k, rng, 2.0), fill(c.v, rng, 1.0), fill(c.dout, rng, 1.0);
      const std::string label = fmt::format("len {} dim {} causal {}", sh.len, sh.dim, causal);
      check_case(k, c, true, true, label);
      if (sh.len == 9) {
        AttCase f(k.storage, sh.len, sh.dim, causal, off), b(k.storage, sh.len, sh.dim, causal, off + 1);
        copy_inputs(c, f);
        copy_inputs(c, b);
        check_case(k, f, true, false, label + " forward only");
        check_case(k, b, false, true, label + " backward only");
      }
    }
  }
}

/// The fp16-arithmetic kernels only: the f32-accumulating ones are checked within bounds, on finite inputs.
class AttentionF16KernelTest : public AttentionKernelTest {};

std::vector<test::KernelParam> fp16_attention_kernels() {
  std::vector<test::KernelParam> v;
  for (const test::KernelParam& p : test::kernels_of_ops({Op::attention_prescale, Op::attention_postscale})) {
    if (fp16_mode(*p.k)) v.push_back(p);
  }
  return v;
}

TEST_P(AttentionF16KernelTest, SpecialValuesFlowAsTheModelSays) {
  const Kernel& k = *GetParam().k;
  test::Rng rng(test::case_seed(77, prescale_of(k)));
  for (bool causal : {false, true}) {
    AttCase c(k.storage, 17, 16, causal, 1);
    fill(c.q, rng, 2.0), fill(c.k, rng, 2.0), fill(c.v, rng, 1.0), fill(c.dout, rng, 1.0);
    // one special per row of Q, K, V and dO, at different rows
    for (std::size_t r = 0; r < 15; ++r) {
      Arr* a = r % 4 == 0 ? &c.q : r % 4 == 1 ? &c.k : r % 4 == 2 ? &c.v : &c.dout;
      a->set_bits(r * 16 + (r * 7) % 16, kF16Specials[r]);
    }
    check_case(k, c, true, true, fmt::format("specials, causal {}", causal));
  }
}

TEST_P(AttentionKernelTest, CausalFirstRowIsTheFirstValueRow) {
  const Kernel& k = *GetParam().k;
  test::Rng rng(test::case_seed(5, 64));
  AttCase c(k.storage, 9, 64, true, 0);
  fill(c.q, rng, 2.0), fill(c.k, rng, 2.0), fill(c.v, rng, 1.0);
  k.attention(c.args(true, false));
  for (std::size_t j = 0; j < 64; ++j) EXPECT_EQ(c.o.bits(j), c.v.bits(j)) << "column " << j;
}

/// Q = K = x everywhere, dim 64: QKᵀ = 64x². On fp16 storage it overflows from x = 32 (65536) when stored before
/// the scale (postscale) and from x = 90.5 when Q is scaled first (64·(x/8)·x = 8x²): log2 √64 = 3 binades apart.
/// The row of +inf scores makes the stable softmax NaN, so O is NaN. f32 and bf16 storage hold.
TEST_P(AttentionKernelTest, ScalePlacementDecidesWhereFp16ScoresOverflow) {
  const Kernel& k = *GetParam().k;
  auto o_finite = [&](double x) {
    AttCase c(k.storage, 4, 64, false, 0);
    for (std::size_t i = 0; i < 4 * 64; ++i) c.q.set(i, x), c.k.set(i, x), c.v.set(i, 1.0);
    k.attention(c.args(true, false));
    bool finite = true;
    for (std::size_t i = 0; i < c.o.size(); ++i) finite = finite && std::isfinite(c.o.value(i));
    return finite;
  };
  const bool fp16_storage = k.storage == DType::f16;
  if (k.op == Op::attention_postscale) {
    EXPECT_TRUE(o_finite(31.75));
    EXPECT_EQ(o_finite(32), !fp16_storage);
  } else {
    EXPECT_TRUE(o_finite(64));
    EXPECT_EQ(o_finite(96), !fp16_storage);
  }
  EXPECT_TRUE(o_finite(1000) || fp16_storage) << "f32 and bf16 scores of 64·10^6 are finite";
}

TEST_P(AttentionKernelTest, ThreadsDoNotChangeABit) {
  const Kernel& k = *GetParam().k;
  test::Rng rng(test::case_seed(3, 3));
  AttCase a(k.storage, 70, 64, true, 0);
  fill(a.q, rng, 2.0), fill(a.k, rng, 2.0), fill(a.v, rng, 1.0), fill(a.dout, rng, 1.0);
  AttCase b(k.storage, 70, 64, true, 1);
  copy_inputs(a, b);
  k.attention(a.args(true, true));
  AttentionArgs args = b.args(true, true);
  args.threads = 2;
  k.attention(args);
  for (std::size_t i = 0; i < a.o.size(); ++i) {
    ASSERT_EQ(a.o.bits(i), b.o.bits(i));
    ASSERT_EQ(a.dq.bits(i), b.dq.bits(i));
    ASSERT_EQ(a.dk.bits(i), b.dk.bits(i));
    ASSERT_EQ(a.dv.bits(i), b.dv.bits(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, AttentionKernelTest,
                         ::testing::ValuesIn(test::kernels_of_ops({Op::attention_prescale, Op::attention_postscale})),
                         test::kernel_param_name);
INSTANTIATE_TEST_SUITE_P(Registry, AttentionF16KernelTest, ::testing::ValuesIn(fp16_attention_kernels()),
                         test::kernel_param_name);

/// The f16 model computes attention: within the running bound of the oracle with every operation in fp16.
TEST(AttentionModel, IsAttentionWithinTheFp16Bound) {
  for (bool prescale : {true, false}) {
    for (const Shape& sh : kShapes) {
      test::Rng rng(test::case_seed(sh.len, sh.dim, 11));
      AttCase c(DType::f16, sh.len, sh.dim, sh.len % 2 == 1, 0);
      fill(c.q, rng, 2.0), fill(c.k, rng, 2.0), fill(c.v, rng, 1.0), fill(c.dout, rng, 1.0);
      f16_model_attention(c.args(true, true), prescale, 8, FmaKind::fused);
      const Oracle r = oracle_of(c, prescale, scale_of(sh.dim, true), 0x1p-11, 0x1p-11);
      SCOPED_TRACE(fmt::format("prescale {} len {} dim {}", prescale, sh.len, sh.dim));
      expect_within("o", c.o, r.o, DType::f16, false);
      expect_within("dq", c.dq, r.dq, DType::f16, false);
      expect_within("dk", c.dk, r.dk, DType::f16, false);
      expect_within("dv", c.dv, r.dv, DType::f16, false);
    }
  }
}

/// The oracle's backward is the gradient of Σ dO·O: central differences in float64 at a few inputs.
TEST(AttentionOracle, BackwardIsTheGradient) {
  for (bool prescale : {true, false}) {
    for (bool causal : {false, true}) {
      const std::size_t L = 5, d = 3;
      test::Rng rng(test::case_seed(L, d, causal + 2 * prescale));
      AttCase c(DType::f32, L, d, causal, 0);
      fill(c.q, rng, 1.0), fill(c.k, rng, 1.0), fill(c.v, rng, 1.0), fill(c.dout, rng, 1.0);
      const double cs = scale_of(d, false);
      auto loss = [&](const AttCase& x) {
        const Oracle r = oracle_of(x, prescale, cs, 0, 0);
        double s = 0;
        for (std::size_t i = 0; i < L * d; ++i) s += x.dout.value(i) * r.o.v[i];
        return s;
      };
      const Oracle r = oracle_of(c, prescale, cs, 0, 0);
      for (auto [arr, grad, name] : {std::tuple{&AttCase::q, &r.dq, "dq"}, std::tuple{&AttCase::k, &r.dk, "dk"},
                                     std::tuple{&AttCase::v, &r.dv, "dv"}}) {
        for (std::size_t i = 0; i < L * d; ++i) {
          const double h = 0x1p-10, x0 = (c.*arr).value(i);
          AttCase up(DType::f32, L, d, causal, 0), dn(DType::f32, L, d, causal, 0);
          copy_inputs(c, up);
          copy_inputs(c, dn);
          (up.*arr).set(i, x0 + h);
          (dn.*arr).set(i, x0 - h);
          const double fd = (loss(up) - loss(dn)) / ((up.*arr).value(i) - (dn.*arr).value(i));
          EXPECT_NEAR(grad->v[i], fd, 1e-5 * (1 + std::fabs(fd))) << name << "[" << i << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace halfmap
