// The sve kernels (SVE at any vector length, sve/ops.hpp), each in an order of operations fixed independently of
// the vector length (so a result is the same bits at 128, 512 or 2048 bits; tests/CMakeLists.txt reruns these
// kernels' tests under qemu at 128, the default 512 and 2048 bits):
//   * reductions, element i into logical lane i % lanes from +0 (ops.hpp: the block of `lanes` elements spread
//     over as many registers as the vector length needs, the last block predicated, no scalar tail):
//       f32         32 f32 lanes (fadd / fmla .s), folded by f32acc_model_fold;
//       f16_f32acc  32 f32 lanes, each fp16 term widened exactly (fcvt) and added with one f32 rounding (fadd for
//                   sum, fmla for x·x and x·y: the product of two fp16 values is exact in f32), folded by
//                   f32acc_model_fold, rounded once to fp16: neonfhm's order (Kernel::fixed_order f32), bit-exact
//                   to f32acc_model_reduce with 32 lanes;
//       f16         64 fp16 lanes (fadd / fmla .h, each rounding to fp16, FmaKind::fused), folded by
//                   f16_model::fold_lanes: neonfp16's order, bit-exact to f16_model_reduce with 64 lanes;
//     max|x| is exact in any order (maxabs_reduce, vectorised by the compiler);
//   * dense forward: each output accumulates its k terms in order from +0 (fmla by a broadcast x_ip on one
//     vector of columns, four rows at a time sharing the loads of W), then + b and act (f32: in the vector;
//     f16_f32acc: f32acc_f16_row_epilogue; f16: f16_dense_epilogue); the vector length only decides which
//     outputs are computed together, never an output's order. Dense backward: the same on exact transposed
//     copies (dX = dY·Wᵀ over j, dW = Xᵀ·dY over i, db = 1ᵀ·dY), each inner index in order from +0.
// The one difference from FMLAL (neonfhm): fcvt quiets an fp16 signalling NaN before the f32 fmla, so where a
// term's operands hold a quiet NaN before a signalling one in FPProcessNaNs3's order (the accumulator, then x,
// then y), the result is the first quiet NaN where FMLAL's is the signalling one quieted; both are NaN.
//   * mse (below): 32 logical lanes in every mode, the f16 one the f16 model's order with 32 lanes.
// softmax and xent are not here: the common algorithms (kernels/common/nn.hpp) need a compile-time width.
#include <cstddef>
#include <cstdint>

#include <type_traits>

#include "kernels/common/gemm.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/sve/ops.hpp"

namespace halfmap::paths::sve {
namespace {

using namespace detail;
constexpr std::uint16_t kOneF16 = 0x3C00;  // fp16 1.0

/// f32 arithmetic on kF32Lanes logical lanes: what F32K and F16WK share.
struct F32Lanes {
  using V = svfloat32_t;
  using Lane = float;
  static constexpr unsigned kLanes = kF32Lanes;
  static std::uint64_t vl() { return svcntw(); }
  static svbool_t whilelt(std::uint64_t a, std::uint64_t b) { return svwhilelt_b32_u64(a, b); }
  static V zero() { return svdup_n_f32(0.0f); }
  static V add(svbool_t p, V a, V x) { return svadd_f32_m(p, a, x); }
  static V fma(svbool_t p, V a, V x, V y) { return svmla_f32_m(p, a, x, y); }  // a + x·y, one rounding
  static void store_lanes(svbool_t p, Lane* l, V v) { svst1_f32(p, l, v); }
};

/// f32 storage, f32 arithmetic.
struct F32K : F32Lanes {
  using Elem = float;
  static constexpr Elem kOne = 1.0f;
  static V load(svbool_t p, const Elem* e) { return svld1_f32(p, e); }
  static V dup(Elem e) { return svdup_n_f32(e); }
  static float finish(Op, Lane* lanes) { return f32lanes_finish(Mode::f32, lanes, kLanes); }
  /// y = act(acc + b), in f32.
  static void epilogue(svbool_t pg, V acc, std::size_t, const Elem* b, Act act, Elem* y) {
    if (b != nullptr) acc = svadd_f32_m(pg, acc, svld1_f32(pg, b));
    if (act == Act::relu) acc = svsel_f32(svcmplt_n_f32(pg, acc, 0.0f), svdup_n_f32(0.0f), acc);  // -0, NaN pass
    svst1_f32(pg, y, acc);
  }
};

/// fp16 storage widened exactly to f32, f32 arithmetic, one rounding to fp16 at each output.
struct F16WK : F32Lanes {
  using Elem = std::uint16_t;
  static constexpr Elem kOne = kOneF16;
  static V load(svbool_t p, const Elem* e) { return load_f16_as_f32(p, e); }
  static V dup(Elem e) { return dup_f16_as_f32(e); }
  static float finish(Op, Lane* lanes) { return f32lanes_finish(Mode::f16_f32acc, lanes, kLanes); }
  static void epilogue(svbool_t pg, V acc, std::size_t cols, const Elem* b, Act act, Elem* y) {
    float out[64];  // svcntw() <= 64
    svst1_f32(pg, out, acc);
    f32acc_f16_row_epilogue(out, cols, b, act, y);
  }
};

/// fp16 storage, native fp16 arithmetic (every add and fmla rounds to fp16, FmaKind::fused).
struct F16K {
  using Elem = std::uint16_t;
  using V = svfloat16_t;
  using Lane = std::uint16_t;
  static constexpr unsigned kLanes = kF16Lanes;
  static constexpr Elem kOne = kOneF16;
  static std::uint64_t vl() { return svcnth(); }
  static svbool_t whilelt(std::uint64_t a, std::uint64_t b) { return svwhilelt_b16_u64(a, b); }
  static V zero() { return dup_f16(0); }
  static V load(svbool_t p, const Elem* e) { return load_f16(p, e); }
  static V dup(Elem e) { return dup_f16(e); }
  static V add(svbool_t p, V a, V x) { return svadd_f16_m(p, a, x); }
  static V fma(svbool_t p, V a, V x, V y) { return svmla_f16_m(p, a, x, y); }
  static void store_lanes(svbool_t p, Lane* l, V v) { store_f16(p, l, v); }
  static float finish(Op op, Lane* lanes) {
    return f16acc_finish(op, lanes, kLanes, nullptr, nullptr, 0, FmaKind::fused);
  }
  static void epilogue(svbool_t pg, V acc, std::size_t cols, const Elem* b, Act act, Elem* y) {
    std::uint16_t out[128];  // svcnth() <= 128
    store_f16(pg, out, acc);
    f16_dense_epilogue(out, 1, cols, b, act, y);
  }
};

// The eight registers' statements of a block, each under `if constexpr (R > r)`.
#define HALFMAP_SVE_EACH(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

// One register's step of a block: logical lanes [r·vl, (r + 1)·vl) of the block at i, cnt elements in the block.
#define HALFMAP_SVE_STEP(r)                                   \
  if constexpr (R > r) {                                      \
    const svbool_t p = K::whilelt(r * vl, cnt);               \
    const V xv = K::load(p, x + i + r * vl);                  \
    if constexpr (kOp == Op::sum) {                           \
      a##r = K::add(p, a##r, xv);                             \
    } else if constexpr (kOp == Op::sumsq) {                  \
      a##r = K::fma(p, a##r, xv, xv);                         \
    } else {                                                  \
      a##r = K::fma(p, a##r, xv, K::load(p, y + i + r * vl)); \
    }                                                         \
  }
#define HALFMAP_SVE_STORE(r) \
  if constexpr (R > r) K::store_lanes(K::whilelt(r* vl, L), lanes + r * vl, a##r);

/// The reduction with R registers of vl lanes holding the L logical lanes (R·vl >= L).
template <class K, unsigned R, Op kOp>
float reduce_r(const typename K::Elem* x, const typename K::Elem* y, std::size_t n) {
  using V = typename K::V;
  constexpr unsigned L = K::kLanes;
  const std::uint64_t vl = K::vl();
  V a0 = K::zero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (std::size_t i = 0; i < n; i += L) {
    const std::uint64_t cnt = n - i < L ? n - i : L;
    HALFMAP_SVE_EACH(HALFMAP_SVE_STEP)
  }
  typename K::Lane lanes[L];
  HALFMAP_SVE_EACH(HALFMAP_SVE_STORE)
  return K::finish(kOp, lanes);
}
#undef HALFMAP_SVE_STEP
#undef HALFMAP_SVE_STORE

template <class K, Op kOp>
float reduce(const void* xv, const void* yv, std::size_t n) {
  const auto* x = static_cast<const typename K::Elem*>(xv);
  const auto* y = static_cast<const typename K::Elem*>(yv);
  switch (regs_for(K::kLanes, K::vl())) {
    case 1:
      return reduce_r<K, 1, kOp>(x, y, n);
    case 2:
      return reduce_r<K, 2, kOp>(x, y, n);
    case 4:
      return reduce_r<K, 4, kOp>(x, y, n);
    default:
      return reduce_r<K, 8, kOp>(x, y, n);
  }
}

/// Y = act(X·W + b): four rows at a time (a row past m repeats the last one and is not stored), one vector of
/// columns at a time (the last predicated), k in order from +0 for every output.
template <class K>
void dense_fwd(const DenseArgs& d) {
  using Elem = typename K::Elem;
  using V = typename K::V;
  const auto* x = static_cast<const Elem*>(d.x);
  const auto* w = static_cast<const Elem*>(d.w);
  const auto* b = static_cast<const Elem*>(d.b);
  auto* y = static_cast<Elem*>(d.y);
  const std::uint64_t vl = K::vl();
  for (std::size_t i = 0; i < d.m; i += 4) {
    const std::size_t rows = d.m - i < 4 ? d.m - i : 4;
    const Elem* x0 = x + i * d.k;
    const Elem* x1 = x + (i + (rows > 1 ? 1 : 0)) * d.k;
    const Elem* x2 = x + (i + (rows > 2 ? 2 : 0)) * d.k;
    const Elem* x3 = x + (i + (rows > 3 ? 3 : 0)) * d.k;
    for (std::size_t j = 0; j < d.n; j += vl) {
      const svbool_t pg = K::whilelt(j, d.n);
      const std::size_t cols = d.n - j < vl ? d.n - j : vl;
      V a0 = K::zero(), a1 = a0, a2 = a0, a3 = a0;
      for (std::size_t p = 0; p < d.k; ++p) {
        const V wv = K::load(pg, w + p * d.n + j);
        // x first, as the models' fma(x, w, acc): with two NaN operands the first one's propagates.
        a0 = K::fma(pg, a0, K::dup(x0[p]), wv);
        a1 = K::fma(pg, a1, K::dup(x1[p]), wv);
        a2 = K::fma(pg, a2, K::dup(x2[p]), wv);
        a3 = K::fma(pg, a3, K::dup(x3[p]), wv);
      }
      const Elem* bj = b != nullptr ? b + j : nullptr;
      K::epilogue(pg, a0, cols, bj, d.act, y + i * d.n + j);
      if (rows > 1) K::epilogue(pg, a1, cols, bj, d.act, y + (i + 1) * d.n + j);
      if (rows > 2) K::epilogue(pg, a2, cols, bj, d.act, y + (i + 2) * d.n + j);
      if (rows > 3) K::epilogue(pg, a3, cols, bj, d.act, y + (i + 3) * d.n + j);
    }
  }
}

/// A growable per-thread buffer (new[] / delete[]: no std::vector, whose inline code would be compiled here).
template <class Elem>
struct Buf {
  Elem* p = nullptr;
  std::size_t cap = 0;
  ~Buf() { delete[] p; }
  Elem* get(std::size_t n) {
    if (n > cap) {
      delete[] p;
      p = new Elem[n];
      cap = n;
    }
    return p;
  }
};

/// dX = dY·Wᵀ, dW = Xᵀ·dY, db = 1ᵀ·dY, each as dense_fwd on exact transposed copies, so each output adds its
/// inner-index terms in order from +0 (dX over j, dW over i, db over i by fma with 1.0, which is the add).
template <class K>
void dense_bwd(const DenseBwdArgs& d) {
  using Elem = typename K::Elem;
  auto transpose = [](const Elem* src, std::size_t rows, std::size_t cols, Elem* dst) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
    }
  };
  thread_local Buf<Elem> t;
  if (d.dx != nullptr) {
    Elem* wt = t.get(d.k * d.n);  // Wᵀ: n × k
    transpose(static_cast<const Elem*>(d.w), d.k, d.n, wt);
    dense_fwd<K>({d.m, d.k, d.n, d.dy, wt, nullptr, d.dx, Act::identity});
  }
  if (d.dw != nullptr) {
    Elem* xt = t.get(d.m * d.k);  // Xᵀ: k × m
    transpose(static_cast<const Elem*>(d.x), d.m, d.k, xt);
    dense_fwd<K>({d.k, d.n, d.m, xt, d.dy, nullptr, d.dw, Act::identity});
  }
  if (d.db != nullptr) {
    Elem* ones = t.get(d.m);
    for (std::size_t i = 0; i < d.m; ++i) ones[i] = K::kOne;
    dense_fwd<K>({1, d.n, d.m, ones, d.dy, nullptr, d.db, Act::identity});
  }
}

// ---- mse: L = Σ d_i² / n and dp_i = c·d_i, c = (2·loss_scale)/float(n), in 32 logical lanes -----------------
// f32, f16_f32acc: d = p - y in f32 (fp16 widened exactly), acc = fma(d, d, acc), dp = the storage type of c·d;
// f16: every value in the low half of a 32-bit container (ld1h into .s lanes, .h arithmetic under a .s
// predicate, so only those halves are active): d = r(p - y), acc = fma(d, d, acc) rounding to fp16 (fused),
// dp = r(f32(d)·c) with a NaN stored as 0x7E00; the lanes folded by f16_model::fold_lanes and mse_f16_finish:
// the f16 model with 32 lanes (neonfp16's mse order). Each lane's order is fixed at every vector length.

/// f32 / fp16-widened mse terms.
template <class K>
struct MseF32 {
  using Elem = typename K::Elem;
  using V = svfloat32_t;
  using Lane = float;
  static V zero() { return svdup_n_f32(0.0f); }
  static V diff(svbool_t pg, const Elem* p, const Elem* y) { return svsub_f32_m(pg, K::load(pg, p), K::load(pg, y)); }
  static V sq(svbool_t pg, V acc, V d) { return svmla_f32_m(pg, acc, d, d); }
  static void grad(svbool_t pg, Elem* dp, V d, float c) {
    const V g = svmul_n_f32_m(pg, d, c);
    if constexpr (sizeof(Elem) == 4) {
      svst1_f32(pg, dp, g);
    } else {
      svst1h_u32(pg, dp, svreinterpret_u32_f16(svcvt_f16_f32_x(pg, g)));  // fcvt: round to nearest even
    }
  }
  static void store_lanes(svbool_t pg, Lane* l, V v) { svst1_f32(pg, l, v); }
  static float finish(Lane* lanes, std::size_t n, Mode mode) {
    return f32acc_finish(mode, arm_fadd_fold(lanes, kF32Lanes) / float(n));
  }
};

/// f16_model::fold_lanes on fp16 bits with fadd .h (acc[j] = r(acc[j] + acc[j + w]), w = lanes/2, ..., 1), as
/// the neonfp16 kernels fold in registers; returns acc[0].
std::uint16_t f16_fold_bits(std::uint16_t* l, unsigned lanes) {
  for (unsigned w = lanes / 2; w >= 1; w /= 2) {
    for (std::uint64_t j = 0; j < w; j += svcnth()) {
      const svbool_t pg = svwhilelt_b16_u64(j, w);
      store_f16(pg, l + j, svadd_f16_m(pg, load_f16(pg, l + j), load_f16(pg, l + j + w)));
    }
  }
  return l[0];
}

/// fp16 mse terms, one per 32-bit container.
struct MseF16 {
  using Elem = std::uint16_t;
  using V = svfloat16_t;
  using Lane = std::uint16_t;
  static V zero() { return dup_f16(0); }
  static V ld(svbool_t pg, const Elem* p) { return svreinterpret_f16_u32(svld1uh_u32(pg, p)); }
  static V diff(svbool_t pg, const Elem* p, const Elem* y) { return svsub_f16_m(pg, ld(pg, p), ld(pg, y)); }
  static V sq(svbool_t pg, V acc, V d) { return svmla_f16_m(pg, acc, d, d); }
  static void grad(svbool_t pg, Elem* dp, V d, float c) {
    const svfloat16_t g = svcvt_f16_f32_x(pg, svmul_n_f32_x(pg, svcvt_f32_f16_x(pg, d), c));
    const svfloat16_t out = svsel_f16(svcmpuo_f16(pg, g, g), dup_f16(0x7E00), g);
    svst1h_u32(pg, dp, svreinterpret_u32_f16(out));
  }
  static void store_lanes(svbool_t pg, Lane* l, V v) { svst1h_u32(pg, l, svreinterpret_u32_f16(v)); }
  static float finish(Lane* lanes, std::size_t n, Mode) { return mse_f16_finish(f16_fold_bits(lanes, kF32Lanes), n); }
};

#define HALFMAP_SVE_MSE_STEP(r)                                          \
  if constexpr (R > r) {                                                 \
    const svbool_t pg = svwhilelt_b32_u64(r * vl, cnt);                  \
    const typename T::V d = T::diff(pg, p + i + r * vl, y + i + r * vl); \
    a##r = T::sq(pg, a##r, d);                                           \
    if (dp != nullptr) T::grad(pg, dp + i + r * vl, d, c);               \
  }
#define HALFMAP_SVE_MSE_STORE(r) \
  if constexpr (R > r) T::store_lanes(svwhilelt_b32_u64(r* vl, L), lanes + r * vl, a##r);

template <class T, unsigned R, Mode kMode>
float mse_r(const LossArgs& a) {
  using Elem = typename T::Elem;
  constexpr unsigned L = kF32Lanes;
  const std::uint64_t vl = svcntw();
  const auto* p = static_cast<const Elem*>(a.p);
  const auto* y = static_cast<const Elem*>(a.y);
  auto* dp = static_cast<Elem*>(a.dp);
  const float c = (2.0f * a.loss_scale) / float(a.n);
  typename T::V a0 = T::zero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (std::size_t i = 0; i < a.n; i += L) {
    const std::uint64_t cnt = a.n - i < L ? a.n - i : L;
    HALFMAP_SVE_EACH(HALFMAP_SVE_MSE_STEP)
  }
  typename T::Lane lanes[L];
  HALFMAP_SVE_EACH(HALFMAP_SVE_MSE_STORE)
  return T::finish(lanes, a.n, kMode);
}
#undef HALFMAP_SVE_MSE_STEP
#undef HALFMAP_SVE_MSE_STORE
#undef HALFMAP_SVE_EACH

template <class T, Mode kMode>
float mse(const LossArgs& a) {
  switch (regs_for(kF32Lanes, svcntw())) {
    case 1:
      return mse_r<T, 1, kMode>(a);
    case 2:
      return mse_r<T, 2, kMode>(a);
    case 4:
      return mse_r<T, 4, kMode>(a);
    default:
      return mse_r<T, 8, kMode>(a);
  }
}

/// The sve path's traits (kernels/common/rows.hpp).
struct Traits : PathTypes<Isa::sve, Tag> {};

/// One mode's rows: the reductions and dense kernels on K, mse on Mse. The f16 mode's every row with fmla .h's
/// fused FMA and max|x| with the model's lanes; f16_f32acc's reductions and dense kernels in neonfhm's fixed order.
template <class K, class Mse, Mode kM>
struct SveRows {
  using Bits = std::conditional_t<sizeof(typename K::Elem) == 4, std::uint32_t, std::uint16_t>;
  static constexpr Mode kMode = kM;
  static constexpr Order order(Op op) {
    const FmaKind fma = kM == Mode::f16 ? FmaKind::fused : FmaKind::none;
    if (op == Op::maxabs) return {kM == Mode::f16 ? K::kLanes : 1, fma};
    const unsigned lanes = op == Op::mse ? kF32Lanes : is_reduction(op) ? K::kLanes : 1;
    return {.lanes = lanes,
            .fma = fma,
            .fixed = kM == Mode::f16_f32acc && op != Op::mse ? FixedOrder::f32 : FixedOrder::none};
  }
  static constexpr ModeKernels kKernels{give<Op::sum>(reduce<K, Op::sum>),
                                        give<Op::sumsq>(reduce<K, Op::sumsq>),
                                        give<Op::maxabs>(maxabs_reduce<Tag, Bits, storage_of(kM)>),
                                        give<Op::dot>(reduce<K, Op::dot>),
                                        give<Op::dense_fwd>(dense_fwd<K>),
                                        give<Op::dense_bwd>(dense_bwd<K>),
                                        give<Op::mse>(mse<Mse, kM>)};
};

}  // namespace

PathLists lists() {
  return detail::kPathLists<Traits, SveRows<F32K, MseF32<F32K>, Mode::f32>,
                            SveRows<F16WK, MseF32<F16WK>, Mode::f16_f32acc>, SveRows<F16K, MseF16, Mode::f16>>;
}

}  // namespace halfmap::paths::sve
