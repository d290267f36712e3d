// The avx512bf16 kernels (bf16_f32acc). vdpbf16ps multiplies pairs of bf16 values and accumulates both products
// into one f32 lane (lane i gets x[2i]*y[2i] + x[2i+1]*y[2i+1]); it has no common shape, so its reduction and its
// GEMM tile are written here. sum multiplies by bf16 1.0, sumsq by the input itself, so all three reductions use
// the one instruction. Per Intel's SDM vdpbf16ps ignores MXCSR: it treats subnormal inputs as zero, flushes
// subnormal results and rounds to nearest even (seen on Zen 4 too: a bf16 subnormal times 1.0 gives 0, and
// 2^-68 * 2^-68 gives 0). That is this path's semantics (the portable bf16 model in kernels/ref keeps
// subnormals); the tests and the sweep see it as is. mse/softmax/xent are the common f32 algorithms on bf16
// storage (Bf16Storage on ops.hpp's F32: outputs rounded with vcvtneps2bf16, which flushes f32-subnormal results
// too).
#include <algorithm>
#include <cstring>

#include "kernels/avx512bf16/ops.hpp"
#include "kernels/avx512bf16/pack.hpp"
#include "kernels/common/lanes.hpp"  // HALFMAP_VEC_INLINE
#include "kernels/common/rows.hpp"

namespace halfmap::paths::avx512bf16 {
namespace {

using namespace detail;

template <Op kOp>
float bf16_dp_reduce(const void* xv, const void* yv, std::size_t n) {
  constexpr std::size_t W = 32, R = 4;  // 32 bf16 values per register, 4 independent accumulators
  const auto* x = static_cast<const std::uint16_t*>(xv);
  const auto* y = static_cast<const std::uint16_t*>(yv);
  const __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0
  __m512 acc[R] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](__m512& a, __m512i xr, __m512i yr) {
    const __m512i other = kOp == Op::sum ? ones : kOp == Op::sumsq ? xr : yr;
    a = _mm512_dpbf16_ps(a, reinterpret_cast<__m512bh&>(xr), reinterpret_cast<const __m512bh&>(other));
  };
  auto load = [](const std::uint16_t* p) { return _mm512_loadu_si512(p); };
  std::size_t i = 0;
  for (; i + R * W <= n; i += R * W) {
    for (std::size_t r = 0; r < R; ++r) {
      step(acc[r], load(x + i + r * W), kOp == Op::dot ? load(y + i + r * W) : _mm512_setzero_si512());
    }
  }
  for (; i + W <= n; i += W) step(acc[0], load(x + i), kOp == Op::dot ? load(y + i) : _mm512_setzero_si512());
  if (i < n) {  // masked loads read nothing past n; the masked-off lanes are zero and add nothing
    const __mmask32 m = static_cast<__mmask32>((std::uint64_t{1} << (n - i)) - 1);
    step(acc[1], _mm512_maskz_loadu_epi16(m, x + i),
         kOp == Op::dot ? _mm512_maskz_loadu_epi16(m, y + i) : _mm512_setzero_si512());
  }
  const __m512 total = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  return f32acc_finish(Mode::bf16_f32acc, _mm512_reduce_add_ps(total));
}

/// The dense GEMM on vdpbf16ps: k is taken in pairs (kKPack = 2), so A is packed as (a[i][2q], a[i][2q+1])
/// pairs broadcast as one 32-bit value, and B's columns as interleaved pairs; each instruction does two products
/// per f32 lane. Outputs are rounded once to bf16 by to_bf16_exact (round to nearest even, subnormals kept).
struct Bf16Gemm : Bf16PanelTraits<Bf16Gemm> {
  // k blocks of 1024 (512 pairs): up to k = 1024 the partial sums never leave the micro-tile (see gemm.hpp);
  // the 64 KiB B micro-panel and the 128-row A block (256 KiB) share L2. Measured on Zen 4: at 1024³ k blocks
  // of 512 ran at 0.95 of this, 768 at 0.95, 2048 at 0.99; 12- and 14-row tiles were slower than 8.
  static constexpr std::size_t kMr = 8, kNr = 32, kKPack = 2, kMc = 128, kKc = 1024, kNc = 2048;
  static void store_out(const float* s, std::uint16_t* d, std::size_t n) { f32_to_bf16(s, d, n); }
  template <std::size_t MR>
  static void pack(View<std::uint16_t> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
                   std::uint16_t* dst) {
    pack_pairs<MR>(src, r0, rows, p0, kc, dst);
  }
  static void kernel(std::size_t groups, const std::uint16_t* a, const std::uint16_t* b, float* c, std::size_t ldc,
                     bool accumulate) {
    __m512 acc[8][2];
    load_tile(acc, c, ldc, accumulate);
    for (std::size_t q = 0; q < groups; ++q, a += 16, b += 64) {
      step(acc, b, [a](int i) { return word_at(a + 2 * i); });
    }
    store_tile(acc, c, ldc);
  }
  /// gemm.hpp's kernel_rows: A row-major (a(i, k) at a[i·lda + k]) read where it lies. Packing A only regrouped
  /// each row's consecutive pairs (pack_pairs: 7 % of bf16 attention at len 512, whose P and dS are 512 × 512 A
  /// operands of GEMMs only 64 columns wide, on a Zen 5); here the tile reads row i's pair q as the word at
  /// 2q, the same words in the same order as kernel on packed A, so the same bits. An odd kc's last pair is
  /// (a(i, kc − 1), 0), as pack_pairs pads it. Rows past `rows` read the last valid row again: the caller discards
  /// their results (pack_pairs pads them with zeros instead).
  static void kernel_rows(std::size_t kc, const std::uint16_t* a, std::size_t lda, std::size_t rows,
                          const std::uint16_t* b, float* c, std::size_t ldc, bool accumulate) {
    const std::uint16_t* r[8];
    for (std::size_t i = 0; i < 8; ++i) r[i] = a + std::min(i, rows - 1) * lda;
    __m512 acc[8][2];
    load_tile(acc, c, ldc, accumulate);
    const std::size_t pairs = kc / 2;
    for (std::size_t q = 0; q < pairs; ++q, b += 64) {
      step(acc, b, [&r, q](int i) { return word_at(r[i] + 2 * q); });
    }
    if (kc % 2 != 0) step(acc, b, [&r, kc](int i) { return std::uint32_t{r[i][kc - 1]}; });
    store_tile(acc, c, ldc);
  }

 private:
  static std::uint32_t word_at(const std::uint16_t* p) {
    std::uint32_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
  HALFMAP_VEC_INLINE static void load_tile(__m512 (&acc)[8][2], const float* c, std::size_t ldc, bool accumulate) {
    for (int i = 0; i < 8; ++i) {
      acc[i][0] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
      acc[i][1] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
  }
  HALFMAP_VEC_INLINE static void store_tile(__m512 (&acc)[8][2], float* c, std::size_t ldc) {
    for (int i = 0; i < 8; ++i) {
      _mm512_storeu_ps(c + i * ldc, acc[i][0]);
      _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
  }
  /// One k pair: row i's pair pair_of(i) (a 32-bit word, low half first) times the panel's 32 columns at b.
  template <class PairOf>
  HALFMAP_VEC_INLINE static void step(__m512 (&acc)[8][2], const std::uint16_t* b, PairOf pair_of) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_of(i)));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
};

/// The avx512bf16 path's traits (kernels/common/rows.hpp).
struct Traits : detail::PathTypes<Isa::avx512bf16, Tag, F32> {};

/// bf16_f32acc: the common rows on bf16 storage (see the top), with the reductions and the GEMM above, and for
/// attention this path's conversions of many values (to_bf16_exact: vcvtneps2bf16 would flush).
struct Bf16Rows : F32AccRows<Traits, DType::bf16, Bf16Gemm> {
  static constexpr ModeKernels kKernels = [] {
    ModeKernels k = F32AccRows::kKernels;
    k.set<Op::sum>(bf16_dp_reduce<Op::sum>);
    k.set<Op::sumsq>(bf16_dp_reduce<Op::sumsq>);
    k.set<Op::dot>(bf16_dp_reduce<Op::dot>);
    return k;
  }();
  static constexpr AttentionExtras kExtras = [] {
    AttentionExtras e = F32AccRows::kExtras;
    e.widen16 = bf16_to_f32;
    e.narrow16 = f32_to_bf16;
    return e;
  }();
};

}  // namespace

PathLists lists() { return detail::kPathLists<Traits, Bf16Rows>; }

}  // namespace halfmap::paths::avx512bf16
