// The rows of the ISA paths' kernel lists, written once over a path's traits and its modes' kernels: every path's
// list is lists_of<Traits, Modes...>(), op family by op family, so that a path's kernels.cpp states only its traits
// (its vector types, register counts and blocking) and its real exceptions.
//
// A path's traits P (a struct in its kernels.cpp's anonymous namespace, derived from PathTypes):
//   kIsa                       the path
//   Tag, F32                   its ops.hpp's tag and f32 math (nn.hpp's M, the f32 tile): F32AccRows
//   F32Block                   the blocking of its f32 tile (microkernel.hpp's Blocking), for the f32 and
//                              f16_f32acc GEMMs: F32AccRows
//   F16, kReduceRegs, kNnRegs  its fp16 arithmetic (nn.hpp's H before Fp16Ops) and the registers per block of the
//   F16Block                   reductions and of mse/softmax/xent/norms; the fp16 tile's blocking: F16Rows
//   Conversions                optional: its fp8 and MX lists (kFp8, kMx: fp8_convert.hpp's IntegerConversions or
//                              HalfConversions, or the path's own); a path with conversions and an f32 mode also
//                              lists the scaled fp8 modes on them (fp8_modes.hpp)
// A mode's rows R (F32AccRows and F16Rows below, or a path's own: ref's scalar kernels, avx512bf16's vdpbf16ps,
// neonfhm's FMLAL, neonbf16's BFDOT and BFMMLA, sve's):
//   kMode, kKernels            the mode and its kernels (ModeKernels: give<Op::sum>(fn), ...), by op of the op
//                              table; an op the mode does not give is not listed (attention is composed of the
//                              mode's dense and softmax kernels where it has a softmax)
//   kExtras                    optional: what attention's composition takes besides them (AttentionExtras)
//   order(op)                  each row's Order (list.hpp): its lanes, FmaKind and fixed order if any
//   Gemm                       optional: the gemm.hpp traits of its dense kernels, whose blocking the path's
//                              blocking table gives the tests (PathLists::blocking)
//
// Why code compiled with one ISA's flags is still never merged into another's object (see the ops.hpp headers):
// these templates are instantiated only in a path's own kernels.cpp, with its traits, which live in its
// namespace, and the kernels they name are the common algorithms instantiated on that path's ops.hpp types. So
// every function compiled here has a mangled name that names the path. Nothing here is a plain inline function
// that runs at run time: the rows are constants.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "halfmap/registry.hpp"
#include "kernels/common/attention.hpp"
#include "kernels/common/fp8_convert.hpp"
#include "kernels/common/fp8_modes.hpp"
#include "kernels/common/gelu.hpp"
#include "kernels/common/gemm.hpp"
#include "kernels/common/list.hpp"
#include "kernels/common/microkernel.hpp"
#include "kernels/common/nn.hpp"
#include "kernels/common/norm.hpp"
#include "kernels/common/reduce.hpp"
#include "kernels/common/storage_traits.hpp"

namespace halfmap::detail {

/// The base of a path's traits: the path, its ops.hpp's tag and, where it has them, its f32 math F32 and its fp16
/// arithmetic F16.
template <Isa kPath, class TagT, class F32T = void, class F16T = void>
struct PathTypes {
  static constexpr Isa kIsa = kPath;
  using Tag = TagT;
  using F32 = F32T;
  using F16 = F16T;
};

/// One op's kernel in a mode and whether the mode gives one. The lists read `given`, never the pointer: GCC does not
/// take a template function's address compared with null for a constant where null checks are kept
/// (-fsanitize=undefined's null, alignment and nonnull checks), and the rows are constants.
template <class Fn>
struct Slot {
  Fn fn = nullptr;
  bool given = false;
};

/// One op's kernel as a mode gives it: give<Op::sum>(f) (f of the op kind's type, KernelFn).
template <Op kOp>
struct Give {
  KernelFn<kOp> fn;
};
template <Op kOp>
constexpr Give<kOp> give(KernelFn<kOp> fn) {
  return {fn};
}

/// The kernels of one mode of one path, op by op of the op table (ops.hpp): ModeKernels{give<Op::sum>(f), ...}. An
/// op the mode does not give is not listed. Attention is composed of the mode's dense and softmax kernels
/// (attention.hpp, kernel_of below) and is not given here. Each op's function is kept in a Kernel, in the field of
/// its kind (registry.hpp's kernel_field), so that one array holds the ops of every kind.
class ModeKernels {
 public:
  constexpr ModeKernels() = default;
  template <Op... kOps>
  constexpr explicit ModeKernels(Give<kOps>... g) {
    (set<kOps>(g.fn), ...);
  }
  template <Op kOp>
  constexpr void set(KernelFn<kOp> fn) {
    fns_[index(kOp)].*kernel_field<op_kind(kOp)>() = fn;
    given_[index(kOp)] = true;
  }
  template <Op kOp>
  constexpr Slot<KernelFn<kOp>> get() const {
    return {fns_[index(kOp)].*kernel_field<op_kind(kOp)>(), given_[index(kOp)]};
  }
  template <Op kOp>
  constexpr KernelFn<kOp> fn() const {
    return get<kOp>().fn;
  }

 private:
  static constexpr std::size_t index(Op op) { return static_cast<std::size_t>(op); }
  std::array<Kernel, kOpTable.size()> fns_{};
  std::array<bool, kOpTable.size()> given_{};
};

/// What attention's composition takes from a mode besides its kernels (AttentionKernels' widen16, narrow16, f16_dot
/// and softmax_bwd_f32; null: the composition's scalar steps). A mode's rows may define kExtras.
struct AttentionExtras {
  decltype(AttentionKernels::widen16) widen16 = nullptr;
  decltype(AttentionKernels::narrow16) narrow16 = nullptr;
  ReduceFn f16_dot = nullptr;
  decltype(AttentionKernels::softmax_bwd_f32) softmax_bwd_f32 = nullptr;
};
template <class R>
constexpr AttentionExtras extras_of() {
  if constexpr (requires { R::kExtras; }) {
    return R::kExtras;
  } else {
    return {};
  }
}

/// The f32 GEMM of P's f32 tile on storage t (gemm.hpp's traits; fp16 widened while packing).
template <class P, DType t>
using F32Gemm = GemmTraits<typename P::F32, typename P::F32, typename StorageTraits<typename P::F32, t>::Elem,
                           StorageTraits<typename P::F32, t>::kMode, typename P::F32Block>;

/// An f32-computing mode (f32, f16_f32acc, bf16_f32acc: storage t) on P's F32: the common f32-accumulating
/// algorithms, f32 arithmetic, one rounding to the storage type at each output; G its dense kernels' GEMM. The
/// rows have no fp16 FMA and the path's own order (Order's defaults).
template <class P, DType t, class G = F32Gemm<P, t>>
struct F32AccRows {
  using S = StorageTraits<typename P::F32, t>;
  using Bits = std::conditional_t<t == DType::f32, std::uint32_t, std::uint16_t>;  // max|x|'s ordering keys
  using Gemm = G;
  static constexpr Mode kMode = S::kMode;
  static constexpr paths::Order order(Op) { return {}; }
  // Family by family: reductions, dense, mse/softmax/xent, norms, GELU.
  // clang-format off
  static constexpr ModeKernels kKernels{
      give<Op::sum>(f32acc_reduce<S, Op::sum>), give<Op::sumsq>(f32acc_reduce<S, Op::sumsq>),
      give<Op::maxabs>(maxabs_reduce<typename P::Tag, Bits, t>), give<Op::dot>(f32acc_reduce<S, Op::dot>),
      give<Op::dense_fwd>(detail::dense_fwd<G>), give<Op::dense_bwd>(detail::dense_bwd<G>),
      give<Op::mse>(mse_f32acc<S>), give<Op::softmax>(softmax_f32acc<S, true>),
      give<Op::softmax_naive>(softmax_f32acc<S, false>), give<Op::xent>(xent_f32acc<S>),
      give<Op::layernorm>(norm_f32acc<S, false>), give<Op::rmsnorm>(norm_f32acc<S, true>),
      give<Op::gelu>(gelu_f32acc<S, false>), give<Op::gelu_tanh>(gelu_f32acc<S, true>)};
  // clang-format on
  static constexpr AttentionExtras kExtras{.widen16 = t == DType::f16 ? P::F32::f16_to_f32 : nullptr,
                                           .narrow16 = t == DType::f16 ? P::F32::f32_to_f16 : nullptr,
                                           .softmax_bwd_f32 = softmax_bwd_row<typename P::F32>};
};
template <class P>
using F32Rows = F32AccRows<P, DType::f32>;
template <class P>
using F16F32AccRows = F32AccRows<P, DType::f16>;

/// The f16 mode on P's fp16 arithmetic F16 (per operation on F16C, native on AVX512-FP16 and ARMv8.2 FP16): the
/// f16 model's order, reductions over kReduceRegs registers of lanes, mse/softmax/xent, the norms and attention's
/// softmax over kNnRegs (Fp16Ops), each dense output in k order on P's fp16 tile; every row with F16's FMA.
template <class P>
struct F16Rows {
  using F16 = typename P::F16;
  using H = Fp16Ops<F16, typename P::F32, P::kNnRegs>;
  using Gemm = GemmTraits<F16, typename P::F32, std::uint16_t, Mode::f16, typename P::F16Block>;
  static constexpr Mode kMode = Mode::f16;
  static constexpr unsigned kReduceLanes = F16::kW * P::kReduceRegs, kNnLanes = F16::kW * P::kNnRegs;
  static constexpr paths::Order order(Op op) {
    if (is_reduction(op)) return {kReduceLanes, F16::kFma};
    if (op == Op::dense_fwd || op == Op::dense_bwd || is_gelu(op)) return {1, F16::kFma};
    return {kNnLanes, F16::kFma};
  }
  template <Op kOp>
  static constexpr ReduceFn kReduce = f16acc_reduce<F16, P::kReduceRegs, kOp>;
  // As F32AccRows': family by family.
  // clang-format off
  static constexpr ModeKernels kKernels{
      give<Op::sum>(kReduce<Op::sum>), give<Op::sumsq>(kReduce<Op::sumsq>),
      give<Op::maxabs>(maxabs_reduce<typename P::Tag, std::uint16_t, DType::f16>), give<Op::dot>(kReduce<Op::dot>),
      give<Op::dense_fwd>(detail::dense_fwd<Gemm>), give<Op::dense_bwd>(detail::dense_bwd<Gemm>),
      give<Op::mse>(mse_f16<H>), give<Op::softmax>(softmax_f16<H, true>),
      give<Op::softmax_naive>(softmax_f16<H, false>), give<Op::xent>(xent_f16<H>),
      give<Op::layernorm>(norm_f16<H, false>), give<Op::rmsnorm>(norm_f16<H, true>),
      give<Op::gelu>(gelu_f16<H, false>), give<Op::gelu_tanh>(gelu_f16<H, true>)};
  // clang-format on
  static constexpr AttentionExtras kExtras{.widen16 = P::F32::f16_to_f32,
                                           .narrow16 = P::F32::f32_to_f16,
                                           .f16_dot = f16acc_reduce<F16, P::kNnRegs, Op::dot>};
};

/// A mode of sums of products in a fixed order only (neonfhm's FMLAL, neonbf16's BFDOT and BFMMLA): sum, sumsq and
/// dot in kFixed's order (its lanes, and which fixed order), the dense kernels in the same order with one lane.
template <Mode kM, paths::Order kFixed, ReduceFn kSum, ReduceFn kSumsq, ReduceFn kDot, DenseFn kFwd, DenseBwdFn kBwd>
struct FixedOrderRows {
  static constexpr Mode kMode = kM;
  static constexpr paths::Order order(Op op) {
    paths::Order o = kFixed;
    if (!is_reduction(op)) o.lanes = 1;
    return o;
  }
  // clang-format off
  static constexpr ModeKernels kKernels{give<Op::sum>(kSum), give<Op::sumsq>(kSumsq), give<Op::dot>(kDot),
                                       give<Op::dense_fwd>(kFwd), give<Op::dense_bwd>(kBwd)};
  // clang-format on
};

/// Attention's parts (attention.hpp) of mode rows R: its dense and softmax kernels, its softmax's lanes and its
/// dense kernels' FMA, and the path's extras.
template <class R>
inline constexpr AttentionKernels kAttentionOf{R::kMode,
                                               R::kKernels.template fn<Op::dense_fwd>(),
                                               R::kKernels.template fn<Op::dense_bwd>(),
                                               R::kKernels.template fn<Op::softmax>(),
                                               R::order(Op::softmax).lanes,
                                               R::order(Op::dense_fwd).fma,
                                               extras_of<R>().widen16,
                                               extras_of<R>().narrow16,
                                               extras_of<R>().f16_dot,
                                               extras_of<R>().softmax_bwd_f32};

/// Mode rows R's kernel of op kOp: the one R gives; for attention, where R gives none, the composition of R's
/// softmax and dense kernels, where R has a softmax and is not a scaled mode (which define no attention).
template <class R, Op kOp>
constexpr Slot<KernelFn<kOp>> kernel_of() {
  constexpr Slot<KernelFn<kOp>> given = R::kKernels.template get<kOp>();
  if constexpr (given.given || !is_attention(kOp)) {
    return given;
  } else if constexpr (!R::kKernels.template get<Op::softmax>().given || is_scaled(R::kMode)) {
    return {};
  } else {
    return {attention<kAttentionOf<R>, kOp == Op::attention_prescale>, true};
  }
}

/// A candidate row: the entry, and whether its mode gives the kernel (Slot::given).
struct Candidate {
  Kernel kernel;
  bool given = false;
};

/// The registry lists a path's kernels in groups of op kinds: reductions; dense; mse, softmax and xent; norms; GELU;
/// attention. Within a group mode by mode in the order the path gives its modes, within a mode the group's ops in
/// Op order. The order of cells.csv and thresholds.json is this order.
constexpr int list_group(OpKind kind) {
  switch (kind) {
    case OpKind::reduce:
      return 0;
    case OpKind::dense:
    case OpKind::dense_bwd:
      return 1;
    case OpKind::loss:
    case OpKind::softmax:
    case OpKind::xent:
      return 2;
    case OpKind::norm:
      return 3;
    case OpKind::gelu:
      return 4;
    case OpKind::attention:
      return 5;
  }
  return 6;
}
inline constexpr int kListGroups = 6;

/// Every op's candidate row of mode rows R on path kIsa, in Op order.
template <Isa kIsa, class R, Op kOp>
constexpr Candidate candidate() {
  constexpr Slot<KernelFn<kOp>> k = kernel_of<R, kOp>();
  return {paths::entry<kOp, R::kMode, kIsa>(k.fn, R::order(kOp)), k.given};
}
template <Isa kIsa, class R, std::size_t... kI>
constexpr std::array<Candidate, sizeof...(kI)> candidates_of(std::index_sequence<kI...>) {
  return {candidate<kIsa, R, static_cast<Op>(kI)>()...};
}
template <Isa kIsa, class R>
inline constexpr auto kModeCandidates = candidates_of<kIsa, R>(std::make_index_sequence<kOpTable.size()>{});

template <class T, std::size_t kN, std::size_t kM>
constexpr void append(std::array<T, kN>& all, std::size_t& at, const std::array<T, kM>& part) {
  for (const T& e : part) all[at++] = e;
}
template <class T, std::size_t... kN>
constexpr std::array<T, (kN + ... + 0)> concat(const std::array<T, kN>&... parts) {
  std::array<T, (kN + ... + 0)> all{};
  std::size_t at = 0;
  (append(all, at, parts), ...);
  return all;
}

/// Every op's candidate for modes R..., in the registry's order (list_group).
template <Isa kIsa, class... R>
constexpr std::array<Candidate, kOpTable.size() * sizeof...(R)> candidates() {
  std::array<Candidate, kOpTable.size() * sizeof...(R)> all{};
  std::size_t at = 0;
  for (int group = 0; group < kListGroups; ++group) {
    auto add = [&](const auto& mode) {
      for (const Candidate& c : mode)
        if (list_group(op_kind(c.kernel.op)) == group) all[at++] = c;
    };
    (add(kModeCandidates<kIsa, R>), ...);
  }
  return all;
}
template <Isa kIsa, class... R>
inline constexpr auto kCandidates = candidates<kIsa, R...>();

template <const auto& kAll>
constexpr auto present() {
  constexpr std::size_t n = [] {
    std::size_t c = 0;
    for (const Candidate& k : kAll) c += k.given ? 1 : 0;
    return c;
  }();
  std::array<Kernel, n> rows{};
  std::size_t at = 0;
  for (const Candidate& k : kAll)
    if (k.given) rows[at++] = k.kernel;
  return rows;
}

/// A path's rows: the candidates its modes have a kernel for, in that order. The registry's order, and with it the
/// order of cells.csv and thresholds.json, is this order.
template <Isa kIsa, class... R>
inline constexpr auto kRows = present<kCandidates<kIsa, R...>>();

/// The blocking of the dense kernels of mode rows R on path kIsa (from R::Gemm; none without).
template <Isa kIsa, class R>
constexpr auto blocking_of() {
  if constexpr (requires { typename R::Gemm; }) {
    using G = typename R::Gemm;
    return std::array<paths::DenseBlocking, 1>{
        paths::DenseBlocking{kIsa, R::kMode, G::kMr, G::kNr, G::kKPack, G::kMc, G::kKc, G::kNc}};
  } else {
    return std::array<paths::DenseBlocking, 0>{};
  }
}
template <Isa kIsa, class... R>
inline constexpr auto kBlocking = concat(blocking_of<kIsa, R>()...);

/// The scaled fp8 modes' parts of a path (fp8_modes.hpp): its conversions C's roundings onto the E4M3 and E5M2
/// grids and into MXFP8 E4M3 blocks, feeding the kernels of its f32 mode R.
template <class C, class R>
inline constexpr ScaledParts kScaledPartsOf{C::kFp8[0].round,
                                            C::kFp8[1].round,
                                            C::kMx[0].round,
                                            R::kKernels.template fn<Op::sum>(),
                                            R::kKernels.template fn<Op::sumsq>(),
                                            R::kKernels.template fn<Op::maxabs>(),
                                            R::kKernels.template fn<Op::dot>(),
                                            R::kKernels.template fn<Op::dense_fwd>(),
                                            R::kKernels.template fn<Op::dense_bwd>(),
                                            R::kKernels.template fn<Op::mse>(),
                                            R::kKernels.template fn<Op::softmax>()};

/// A scaled fp8 mode's rows on a path's parts P (fp8_modes.hpp's Scaled): the reductions, dense, mse and softmax
/// of fp8_f32acc or of mxfp8_f32acc.
template <const ScaledParts& P, Mode kM>
struct ScaledRows {
  using S = Scaled<P>;
  static constexpr Mode kMode = kM;
  static constexpr paths::Order order(Op) { return {}; }
  /// fp8_f32acc's kernel, or mxfp8_f32acc's.
  template <class Fn>
  static constexpr Fn pick(Fn fp8, Fn mx) {
    return kM == Mode::fp8_f32acc ? fp8 : mx;
  }
  // clang-format off
  static constexpr ModeKernels kKernels{
      give<Op::sum>(pick<ReduceFn>(S::template fp8_reduce<Op::sum>, S::template mx_reduce<Op::sum>)),
      give<Op::sumsq>(pick<ReduceFn>(S::template fp8_reduce<Op::sumsq>, S::template mx_reduce<Op::sumsq>)),
      give<Op::maxabs>(pick<ReduceFn>(S::template fp8_reduce<Op::maxabs>, S::template mx_reduce<Op::maxabs>)),
      give<Op::dot>(pick<ReduceFn>(S::template fp8_reduce<Op::dot>, S::template mx_reduce<Op::dot>)),
      give<Op::dense_fwd>(pick<DenseFn>(S::fp8_dense_fwd, S::mx_dense_fwd)),
      give<Op::dense_bwd>(pick<DenseBwdFn>(S::fp8_dense_bwd, S::mx_dense_bwd)),
      give<Op::mse>(pick<LossFn>(S::fp8_mse, S::mx_mse)),
      give<Op::softmax>(pick<SoftmaxFn>(S::fp8_softmax, S::mx_softmax))};
  // clang-format on
};

/// The scaled modes' rows of a path with conversions C and f32 mode R: fp8_f32acc's, then mxfp8_f32acc's.
template <class C, class R, Isa kIsa>
inline constexpr auto kScaled = concat(kRows<kIsa, ScaledRows<kScaledPartsOf<C, R>, Mode::fp8_f32acc>>,
                                       kRows<kIsa, ScaledRows<kScaledPartsOf<C, R>, Mode::mxfp8_f32acc>>);

/// Everything path P of modes R0, R... gives the registry (list.hpp's PathLists): their rows, the blocking of the
/// modes that have a GEMM, and where P has Conversions, those and, if its first mode is f32, the scaled fp8 modes
/// on them. A path's lists() returns kPathLists, a constant.
template <class P, class R0, class... R>
constexpr paths::PathLists lists_of() {
  paths::PathLists l{.kernels = kRows<P::kIsa, R0, R...>, .blocking = kBlocking<P::kIsa, R0, R...>};
  if constexpr (requires { typename P::Conversions; }) {
    using C = typename P::Conversions;
    static_assert(C::kFp8[0].format == Fp8::e4m3 && C::kFp8[1].format == Fp8::e5m2 && C::kMx[0].elem == MxElem::e4m3);
    l.fp8 = C::kFp8;
    l.mx = C::kMx;
    if constexpr (R0::kMode == Mode::f32) l.scaled = kScaled<C, R0, P::kIsa>;
  }
  return l;
}
template <class P, class... R>
inline constexpr paths::PathLists kPathLists = lists_of<P, R...>();

}  // namespace halfmap::detail
