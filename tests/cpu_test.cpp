// CPU detection, the ISA chain and the HALFMAP_ISA cap, the floating-point environment, and the registry's own
// invariants. Nothing here hard-codes this machine: the tests assert consistency between what is detected, what
// is compiled and what may run.
//
// The cap is read once per process, so its behaviour is tested by running this binary again under different
// HALFMAP_ISA values (tests/CMakeLists.txt adds those CTest entries); HalfmapIsaCap below checks whatever value
// the current process was started with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/list.hpp"
#include "test_util.hpp"

namespace halfmap {
namespace {

bool is_x86_isa(Isa isa) {
  return isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512bf16 || isa == Isa::avx512fp16;
}
bool is_arm_isa(Isa isa) {
  return isa == Isa::neon || isa == Isa::neonfp16 || isa == Isa::neonfhm || isa == Isa::neonbf16 || isa == Isa::sve;
}

#if defined(__x86_64__)
constexpr bool kX86 = true;
#elif defined(__aarch64__)
constexpr bool kX86 = false;
#endif

/// The ISAs a cap admits, written out from the chains in cpu.hpp (independently of cpu.cpp's ranks):
/// x86 ref < avx2 < avx512 < {avx512bf16, avx512fp16} (siblings: a cap at one excludes the other);
/// arm64 ref < neon < neonfp16 < {neonfhm, neonbf16, sve} (siblings).
std::set<Isa> admitted_by(Isa cap) {
  switch (cap) {
    case Isa::ref:
      return {Isa::ref};
    case Isa::avx2:
      return {Isa::ref, Isa::avx2};
    case Isa::avx512:
      return {Isa::ref, Isa::avx2, Isa::avx512};
    case Isa::avx512bf16:
      return {Isa::ref, Isa::avx2, Isa::avx512, Isa::avx512bf16};
    case Isa::avx512fp16:
      return {Isa::ref, Isa::avx2, Isa::avx512, Isa::avx512fp16};
    case Isa::neon:
      return {Isa::ref, Isa::neon};
    case Isa::neonfp16:
      return {Isa::ref, Isa::neon, Isa::neonfp16};
    case Isa::neonfhm:
      return {Isa::ref, Isa::neon, Isa::neonfp16, Isa::neonfhm};
    case Isa::neonbf16:
      return {Isa::ref, Isa::neon, Isa::neonfp16, Isa::neonbf16};
    case Isa::sve:
      return {Isa::ref, Isa::neon, Isa::neonfp16, Isa::sve};
    case Isa::peer:
      return {};  // not a cap (HALFMAP_ISA=peer is an error)
  }
  return {};
}

// The peer libraries' kernels (src/peers/) are linked into the CLI only: this test binary has none, so the peer
// "ISA" is not compiled, has no kernel, and is not one of halfmap's paths.
TEST(Isa, PeerIsNotAPathOfTheLibrary) {
  EXPECT_EQ(parse_isa("peer"), Isa::peer);
  EXPECT_FALSE(isa_compiled(Isa::peer));
  EXPECT_FALSE(isa_enabled(Isa::peer));
  EXPECT_TRUE(peer_libraries().empty());
  for (Isa isa : kAllIsas) EXPECT_NE(isa, Isa::peer);
  for (const Kernel& k : kernels()) EXPECT_NE(k.isa, Isa::peer) << k.name;
}

TEST(Isa, NamesRoundTripAndAreDistinct) {
  std::set<std::string_view> names;
  for (Isa isa : kAllIsas) {
    const std::string_view name = isa_name(isa);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "duplicate ISA name " << name;
    const auto parsed = parse_isa(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, isa) << name;
    EXPECT_FALSE(isa_requirements(isa).empty()) << name;
  }
  EXPECT_EQ(names.size(), kAllIsas.size());
  EXPECT_FALSE(parse_isa("").has_value());
  EXPECT_FALSE(parse_isa("bogus").has_value());
  EXPECT_FALSE(parse_isa("AVX2").has_value());  // names are exact, lower case
  EXPECT_FALSE(parse_isa("avx2 ").has_value());
}

/// isa_state names the first missing condition of isa_enabled, in the order compiled -> supported -> cap.
TEST(Isa, StateAgreesWithCompiledSupportedEnabled) {
  for (Isa isa : kAllIsas) {
    const IsaState want = !isa_compiled(isa)    ? IsaState::not_compiled
                          : !isa_supported(isa) ? IsaState::unsupported
                          : !isa_enabled(isa)   ? IsaState::capped
                                                : IsaState::enabled;
    EXPECT_EQ(isa_state(isa), want) << isa_name(isa);
  }
  EXPECT_EQ(isa_state(Isa::ref), IsaState::enabled);
}

/// Every CpuFeatures flag is listed once in kCpuFlags, under its own name, and only the host's can be set.
TEST(CpuFlags, ListEveryFlagOnceAndOnlyTheHostsAreSet) {
  std::set<std::string_view> names;
  CpuFeatures probe;
  for (const CpuFlag& f : kCpuFlags) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate flag " << f.name;
    EXPECT_FALSE(probe.*f.member) << f.name << " listed twice or not default-false";
    probe.*f.member = true;  // a member listed twice would trip the check above
    if (f.x86 != kHostIsX86) {
      EXPECT_FALSE(cpu_features().*f.member) << f.name << " is another architecture's";
    }
  }
  EXPECT_EQ(names.size(), 14u) << "CpuFeatures has 14 flags: list a new one in kCpuFlags";
  EXPECT_EQ(kHostIsX86, kX86);
  EXPECT_EQ(kHostArch, kX86 ? "x86-64" : "arm64");
}

TEST(Isa, RefIsAlwaysCompiledSupportedAndEnabled) {
  EXPECT_TRUE(isa_compiled(Isa::ref));
  EXPECT_TRUE(isa_supported(Isa::ref));
  EXPECT_TRUE(isa_enabled(Isa::ref));  // whatever HALFMAP_ISA says, even if it is invalid
}

TEST(Isa, OtherArchitectureIsNeitherCompiledNorSupported) {
  for (Isa isa : kAllIsas) {
    if (kX86 ? is_arm_isa(isa) : is_x86_isa(isa)) {
      EXPECT_FALSE(isa_compiled(isa)) << isa_name(isa);
      EXPECT_FALSE(isa_supported(isa)) << isa_name(isa);
      EXPECT_FALSE(isa_enabled(isa)) << isa_name(isa);
    }
  }
}

TEST(Isa, EnabledImpliesCompiledAndSupported) {
  for (Isa isa : kAllIsas) {
    if (isa_enabled(isa)) {
      EXPECT_TRUE(isa_compiled(isa)) << isa_name(isa);
      EXPECT_TRUE(isa_supported(isa)) << isa_name(isa);
    }
  }
}

TEST(Isa, SupportFollowsTheChain) {
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
  }
  if (isa_supported(Isa::avx512bf16)) {
    EXPECT_TRUE(isa_supported(Isa::avx512));
  }
  if (isa_supported(Isa::avx512fp16)) {
    EXPECT_TRUE(isa_supported(Isa::avx512));
  }
  if (isa_supported(Isa::neonfp16)) {
    EXPECT_TRUE(isa_supported(Isa::neon));
  }
  if (isa_supported(Isa::neonfhm)) {
    EXPECT_TRUE(isa_supported(Isa::neonfp16)) << "FEAT_FHM implies FEAT_FP16";
  }
  if (isa_supported(Isa::neonbf16)) {
    EXPECT_TRUE(isa_supported(Isa::neon)) << "FEAT_BF16's vector forms need Advanced SIMD";
  }
  if (isa_supported(Isa::sve)) {
    EXPECT_TRUE(isa_supported(Isa::neonfp16)) << "the sve path needs FEAT_FP16 too";
  }
}

TEST(Isa, SupportAgreesWithCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(&f, &cpu_features()) << "detected once and cached";
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  if (kX86) {
    EXPECT_EQ(isa_supported(Isa::avx2), avx2);
    EXPECT_EQ(isa_supported(Isa::avx512), avx512);
    EXPECT_EQ(isa_supported(Isa::avx512bf16), avx512 && f.avx512_bf16);
    EXPECT_EQ(isa_supported(Isa::avx512fp16), avx512 && f.avx512_fp16);
    EXPECT_FALSE(f.asimd || f.fphp || f.asimdhp || f.asimdfhm || f.bf16 || f.sve) << "arm64 features on x86";
  } else {
    EXPECT_TRUE(f.asimd) << "every arm64 CPU Linux runs on has Advanced SIMD";
    EXPECT_TRUE(isa_supported(Isa::neon));
    EXPECT_EQ(isa_supported(Isa::neonfp16), f.asimd && f.fphp && f.asimdhp);
    EXPECT_EQ(isa_supported(Isa::neonfhm), f.asimd && f.fphp && f.asimdhp && f.asimdfhm);
    EXPECT_EQ(isa_supported(Isa::neonbf16), f.asimd && f.bf16);
    EXPECT_EQ(isa_supported(Isa::sve), f.asimd && f.fphp && f.asimdhp && f.sve);
    // SVE's vector length (prctl): 128 to 2048 bits in steps of 128 with SVE, 0 without (sve_test compares it
    // with svcntb()).
    if (f.sve) {
      EXPECT_TRUE(f.sve_vector_bits >= 128 && f.sve_vector_bits <= 2048 && f.sve_vector_bits % 128 == 0)
          << f.sve_vector_bits;
    } else {
      EXPECT_EQ(f.sve_vector_bits, 0u);
    }
    EXPECT_FALSE(f.avx2 || f.fma || f.f16c || f.avx512f || f.avx512_bf16 || f.avx512_fp16) << "x86 features on arm64";
  }
  EXPECT_FALSE(f.model.empty());
  RecordProperty("cpu_model", f.model);
}

// Every ISA folder that exists in the source tree and belongs to this architecture is compiled (CMake globs the
// folders), and every kernel's ISA is compiled.
TEST(Isa, EveryKernelIsaIsCompiledForThisArchitecture) {
  for (const Kernel& k : kernels()) {
    EXPECT_TRUE(isa_compiled(k.isa)) << k.name;
    EXPECT_TRUE(k.isa == Isa::ref || (kX86 ? is_x86_isa(k.isa) : is_arm_isa(k.isa))) << k.name;
  }
}

TEST(HalfmapIsaCap, EnabledIsExactlyCompiledSupportedAndAdmitted) {
  const char* env = std::getenv("HALFMAP_ISA");
  const std::string value = env != nullptr ? env : "";
  RecordProperty("HALFMAP_ISA", value);
  const std::optional<Isa> parsed = parse_isa(value);
  const bool valid =
      value.empty() || (parsed && (*parsed == Isa::ref || (kX86 ? is_x86_isa(*parsed) : is_arm_isa(*parsed))));
  SCOPED_TRACE("HALFMAP_ISA=" + value);
  if (value.empty()) {
    EXPECT_FALSE(isa_cap().has_value());
    EXPECT_TRUE(isa_cap_error().empty());
  } else if (valid) {
    ASSERT_TRUE(isa_cap().has_value());
    EXPECT_EQ(*isa_cap(), *parsed);
    EXPECT_TRUE(isa_cap_error().empty()) << isa_cap_error();
  } else {
    EXPECT_FALSE(isa_cap().has_value());
    const std::string err = isa_cap_error();
    EXPECT_NE(err.find(value), std::string::npos) << "the error should name the bad value: " << err;
    EXPECT_NE(err.find("ref"), std::string::npos) << "the error should list the valid names: " << err;
    EXPECT_EQ(err.back(), '.') << "one sentence: " << err;
  }
  for (Isa isa : kAllIsas) {
    bool admitted = true;
    if (!value.empty()) admitted = valid ? admitted_by(*parsed).count(isa) > 0 : isa == Isa::ref;
    EXPECT_EQ(isa_enabled(isa), isa_compiled(isa) && isa_supported(isa) && admitted) << isa_name(isa);
  }
  for (const Kernel& k : kernels()) {
    EXPECT_EQ(kernel_enabled(k), isa_enabled(k.isa)) << k.name;
  }
}

TEST(FpEnv, HalfmapNeverFlushes) {
  const FpEnv env = read_fp_env();
  EXPECT_TRUE(env.ieee()) << env.describe();
  EXPECT_FALSE(env.ftz);
  EXPECT_FALSE(env.daz);
  EXPECT_FALSE(env.fz16);
  EXPECT_EQ(env.arch, kX86 ? "x86-64" : "arm64");
  EXPECT_NE(env.describe().find("IEEE"), std::string::npos) << env.describe();
  // Running every enabled kernel must not change the environment either (halfmap only reads it).
  std::vector<unsigned char> zeros(4 * 256, 0);
  for (const Kernel& k : kernels()) {
    if (kernel_enabled(k) && test::is_reduction_kernel(k)) (void)k.reduce(zeros.data(), zeros.data(), 256);
  }
  EXPECT_EQ(read_fp_env().raw, env.raw);
}

// ---- the registry's own invariants ---------------------------------------------------------------------------

TEST(Registry, NamesAreUniqueAndFollowTheConvention) {
  std::set<std::string_view> names;
  for (const Kernel& k : kernels()) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate kernel " << k.name;
    EXPECT_EQ(find_kernel(k.name), &k) << k.name;
    // <storage>[_<acc>acc]_<op>__<isa>
    const std::string_view n = k.name;
    const auto sep = n.find("__");
    ASSERT_NE(sep, std::string_view::npos) << k.name;
    EXPECT_EQ(n.substr(sep + 2), isa_name(k.isa)) << k.name;
    EXPECT_EQ(n.rfind("__"), sep) << "one ISA separator: " << k.name;
    const std::string head(n.substr(0, sep));
    // the scaled fp8 modes are named by the format their operands are cast to (their arrays are float32)
    const std::string_view lead = k.mode == Mode::fp8_f32acc     ? "fp8"
                                  : k.mode == Mode::mxfp8_f32acc ? "mxfp8"
                                                                 : dtype_name(k.storage);
    EXPECT_EQ(head.substr(0, lead.size()), lead) << k.name;
    std::string op_suffix = "_";
    op_suffix += op_name(k.op);
    ASSERT_GE(head.size(), op_suffix.size()) << k.name;
    EXPECT_EQ(head.substr(head.size() - op_suffix.size()), op_suffix) << k.name;
    const bool f32acc_name = head.find("_f32acc_") != std::string::npos;
    EXPECT_EQ(f32acc_name, k.mode == Mode::f16_f32acc || k.mode == Mode::bf16_f32acc || is_scaled(k.mode)) << k.name;
  }
  EXPECT_EQ(find_kernel("no_such_kernel__ref"), nullptr);
}

TEST(Registry, ModesMatchStorageAndLanes) {
  for (const Kernel& k : kernels()) {
    SCOPED_TRACE(std::string(k.name));
    if (test::is_reduction_kernel(k)) {
      EXPECT_NE(k.reduce, nullptr);
    }
    switch (k.mode) {
      case Mode::f32:
        EXPECT_EQ(k.storage, DType::f32);
        break;
      case Mode::f16_f32acc:
      case Mode::f16:
      case Mode::f16_model:
        EXPECT_EQ(k.storage, DType::f16);
        break;
      case Mode::bf16_f32acc:
        EXPECT_EQ(k.storage, DType::bf16);
        break;
      case Mode::fp8_f32acc:
      case Mode::mxfp8_f32acc:
        EXPECT_EQ(k.storage, DType::f32) << "float32 in and out, fp8 inside";
        break;
    }
    EXPECT_GE(k.lanes, 1u);
    EXPECT_EQ(k.lanes & (k.lanes - 1), 0u) << "lanes must be a power of two to fold: " << k.lanes;
    EXPECT_EQ(dtype_size(k.storage), k.storage == DType::f32 ? 4u : 2u);
    if (k.mode == Mode::f32 || k.mode == Mode::f16_f32acc || k.mode == Mode::bf16_f32acc || is_scaled(k.mode) ||
        k.op == Op::maxabs) {
      continue;  // lanes and fma describe the order of fp16 accumulation only
    }
    if (k.isa == Isa::ref) {
      EXPECT_EQ(k.lanes, 1u) << "the scalar model is strictly sequential";
    }
  }
}

// The reference path covers every operation in every mode except native f16, which is SIMD only; so every SIMD
// kernel has a scalar counterpart of the same operation and storage.
TEST(Registry, RefCoversEveryOpAndStorage) {
  for (Op op : {Op::sum, Op::sumsq, Op::maxabs, Op::dot, Op::dense_fwd, Op::dense_bwd, Op::mse, Op::softmax,
                Op::softmax_naive, Op::xent}) {
    for (Mode mode : {Mode::f32, Mode::f16_f32acc, Mode::f16_model, Mode::bf16_f32acc}) {
      const bool found = std::any_of(kernels().begin(), kernels().end(), [&](const Kernel& k) {
        return k.isa == Isa::ref && k.op == op && k.mode == mode;
      });
      EXPECT_TRUE(found) << op_name(op) << " in mode " << mode_name(mode);
    }
  }
}

// ---- the op table (ops.hpp) against the registry -------------------------------------------------------------

// Every kernel fills exactly one function pointer, the field of its op's kind in the table: a row that names the
// wrong kind, or a list that fills another field, fails here.
TEST(Registry, EachKernelFillsTheFieldOfItsOpsKind) {
  for (const Kernel& k : kernels()) {
    const int filled = int(k.reduce != nullptr) + int(k.dense != nullptr) + int(k.dense_bwd != nullptr) +
                       int(k.loss != nullptr) + int(k.softmax != nullptr) + int(k.xent != nullptr) +
                       int(k.norm != nullptr) + int(k.gelu != nullptr) + int(k.attention != nullptr);
    EXPECT_EQ(filled, 1) << k.name;
    EXPECT_TRUE(kernel_has_fn(k)) << k.name << ": op " << op_name(k.op)
                                  << " should fill Kernel::" << op_kind_name(op_kind(k.op));
  }
}

TEST(Registry, EveryRowOfTheOpTableHasKernels) {
  std::set<std::string_view> names;
  for (const OpInfo& row : kOpTable) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name << " twice";
    EXPECT_EQ(op_name(row.op), row.name);
    EXPECT_TRUE(std::any_of(kernels().begin(), kernels().end(), [&](const Kernel& k) { return k.op == row.op; }))
        << row.name << " has no kernel";
    // dense_bwd is swept as dense_fwd's gradient (Gradient::dense_bwd), every other op as an experiment of its own.
    EXPECT_EQ(row.swept, row.kind != OpKind::dense_bwd) << row.name;
    EXPECT_EQ(row.gradient == Gradient::dense_bwd, row.kind == OpKind::dense) << row.name;
  }
}

// ---- which ops and modes each path lists --------------------------------------------------------------------

// Written from docs/kernels.md's table of ISA paths, independently of src/kernels/ (rows.hpp builds the lists from
// each path's traits and modes): a row dropped, added twice or filed under another mode fails here. What
// `halfmap info` lists is kernels(), this registry (plus, in the CLI, the peers').
constexpr Op kEveryOp[] = {Op::sum,
                           Op::sumsq,
                           Op::maxabs,
                           Op::dot,
                           Op::dense_fwd,
                           Op::dense_bwd,
                           Op::mse,
                           Op::softmax,
                           Op::softmax_naive,
                           Op::xent,
                           Op::layernorm,
                           Op::rmsnorm,
                           Op::gelu,
                           Op::gelu_tanh,
                           Op::attention_prescale,
                           Op::attention_postscale};
// The scaled fp8 modes: the reductions, dense, mse and softmax.
constexpr Op kScaledOps[] = {Op::sum,       Op::sumsq,     Op::maxabs, Op::dot,
                             Op::dense_fwd, Op::dense_bwd, Op::mse,    Op::softmax};
// neonfhm's FMLAL and neonbf16's BFDOT/BFMMLA: the sums of products and dense.
constexpr Op kPairOps[] = {Op::sum, Op::sumsq, Op::dot, Op::dense_fwd, Op::dense_bwd};
// sve: the reductions, dense and mse.
constexpr Op kSveOps[] = {Op::sum, Op::sumsq, Op::maxabs, Op::dot, Op::dense_fwd, Op::dense_bwd, Op::mse};

struct Claim {
  Isa isa;
  Mode mode;
  std::span<const Op> ops;
};
const Claim kClaims[] = {
    {Isa::ref, Mode::f32, kEveryOp},
    {Isa::ref, Mode::f16_f32acc, kEveryOp},
    {Isa::ref, Mode::f16_model, kEveryOp},
    {Isa::ref, Mode::bf16_f32acc, kEveryOp},
    {Isa::ref, Mode::fp8_f32acc, kScaledOps},
    {Isa::ref, Mode::mxfp8_f32acc, kScaledOps},
    {Isa::avx2, Mode::f32, kEveryOp},
    {Isa::avx2, Mode::f16_f32acc, kEveryOp},
    {Isa::avx2, Mode::f16, kEveryOp},
    {Isa::avx2, Mode::fp8_f32acc, kScaledOps},
    {Isa::avx2, Mode::mxfp8_f32acc, kScaledOps},
    {Isa::avx512, Mode::f32, kEveryOp},
    {Isa::avx512, Mode::f16_f32acc, kEveryOp},
    {Isa::avx512, Mode::f16, kEveryOp},
    {Isa::avx512, Mode::fp8_f32acc, kScaledOps},
    {Isa::avx512, Mode::mxfp8_f32acc, kScaledOps},
    {Isa::avx512bf16, Mode::bf16_f32acc, kEveryOp},
    {Isa::avx512fp16, Mode::f16, kEveryOp},
    {Isa::neon, Mode::f32, kEveryOp},
    {Isa::neon, Mode::f16_f32acc, kEveryOp},
    {Isa::neon, Mode::fp8_f32acc, kScaledOps},
    {Isa::neon, Mode::mxfp8_f32acc, kScaledOps},
    {Isa::neonfp16, Mode::f16, kEveryOp},
    {Isa::neonfhm, Mode::f16_f32acc, kPairOps},
    {Isa::neonbf16, Mode::bf16_f32acc, kPairOps},
    {Isa::sve, Mode::f32, kSveOps},
    {Isa::sve, Mode::f16_f32acc, kSveOps},
    {Isa::sve, Mode::f16, kSveOps},
};

TEST(Registry, EachPathListsTheOpsAndModesItClaims) {
  using Row = std::pair<Op, Mode>;
  auto text = [](const std::multiset<Row>& rows) {
    std::string t;
    for (const auto& [op, mode] : rows) t += std::string(op_name(op)) + "/" + std::string(mode_name(mode)) + " ";
    return t;
  };
  int compiled = 0;
  for (Isa isa : kAllIsas) {
    std::multiset<Row> listed, claimed;
    for (const Kernel& k : kernels()) {
      if (k.isa == isa) listed.insert({k.op, k.mode});
    }
    for (const Claim& c : kClaims) {
      if (c.isa != isa) continue;
      for (Op op : c.ops) claimed.insert({op, c.mode});
    }
    if (!isa_compiled(isa)) {
      EXPECT_TRUE(listed.empty()) << isa_name(isa) << " is not compiled but lists " << text(listed);
      continue;
    }
    ++compiled;
    EXPECT_EQ(listed, claimed) << isa_name(isa) << " lists\n  " << text(listed) << "\nand claims\n  " << text(claimed);
  }
  EXPECT_GE(compiled, 2);  // ref and at least one SIMD path on either architecture
}

// Every path's dense blocking (which dense_test cuts its shapes around) is one of its dense modes', once.
TEST(Registry, DenseBlockingsNameListedDenseKernels) {
  std::set<std::pair<Isa, Mode>> seen;
  for (const paths::DenseBlocking& b : paths::dense_blockings()) {
    EXPECT_TRUE(seen.insert({b.isa, b.mode}).second) << isa_name(b.isa) << " " << mode_name(b.mode) << " twice";
    const bool listed = std::any_of(kernels().begin(), kernels().end(), [&](const Kernel& k) {
      return k.isa == b.isa && k.mode == b.mode && k.op == Op::dense_fwd;
    });
    EXPECT_TRUE(listed) << isa_name(b.isa) << " " << mode_name(b.mode) << " has a blocking but no dense kernel";
    EXPECT_GT(b.mr * b.nr * b.kpack * b.mc * b.kc * b.nc, 0u);
    EXPECT_EQ(b.kc % b.kpack, 0u) << isa_name(b.isa) << ": a k block of whole k groups (only K's last is padded)";
  }
}

// ---- names composed from the fields (src/kernels/common/list.hpp) ------------------------------------------------

// "Adding a kernel" (docs/contributing.md), followed once without adding it to the registry: one entry of a list, and
// the name and fields it gets.
float test_only_dot(const void*, const void*, std::size_t) { return 0.0f; }
void test_only_softmax(const SoftmaxArgs&) {}

TEST(RegistryNames, ComposedAtCompileTime) {
  constexpr Kernel dot = paths::entry<Op::dot, Mode::f16, Isa::avx512fp16>(test_only_dot, {256, FmaKind::fused});
  static_assert(dot.name == "f16_dot__avx512fp16");
  EXPECT_EQ(dot.op, Op::dot);
  EXPECT_EQ(dot.mode, Mode::f16);
  EXPECT_EQ(dot.isa, Isa::avx512fp16);
  EXPECT_EQ(dot.storage, DType::f16);
  EXPECT_EQ(dot.lanes, 256u);
  EXPECT_EQ(dot.fma, FmaKind::fused);
  EXPECT_EQ(dot.reduce, &test_only_dot);
  EXPECT_EQ(dot.softmax, nullptr);

  constexpr Kernel sm = paths::entry<Op::softmax_naive, Mode::f16_model, Isa::ref>(test_only_softmax);
  static_assert(sm.name == "f16_softmax_naive__ref");  // f16_model kernels are named f16_...
  EXPECT_EQ(sm.storage, DType::f16);
  EXPECT_EQ(sm.fma, FmaKind::none);
  EXPECT_EQ(sm.softmax, &test_only_softmax);
  EXPECT_EQ(sm.reduce, nullptr);

  static_assert(paths::KernelName<Op::sum, Mode::f16_f32acc, Isa::avx512>::value == "f16_f32acc_sum__avx512");
  static_assert(paths::KernelName<Op::xent, Mode::bf16_f32acc, Isa::avx512bf16>::value ==
                "bf16_f32acc_xent__avx512bf16");
  static_assert(paths::KernelName<Op::dense_bwd, Mode::f32, Isa::neonfp16>::value == "f32_dense_bwd__neonfp16");
  for (Isa isa : kAllIsas) EXPECT_EQ(paths::name_isa(isa), isa_name(isa));
}

// Every registry name is <storage>[_<acc>acc]_<op>__<isa> of its own fields, unique, and found by find_kernel.
TEST(RegistryNames, EveryNameRoundTrips) {
  std::set<std::string_view> seen;
  for (const Kernel& k : kernels()) {
    const std::string want = std::string(paths::name_prefix(k.mode)) + "_" + std::string(op_name(k.op)) + "__" +
                             std::string(isa_name(k.isa));
    EXPECT_EQ(k.name, want);
    EXPECT_EQ(k.storage, paths::storage_of(k.mode)) << k.name;
    EXPECT_TRUE(seen.insert(k.name).second) << "duplicate name " << k.name;
    EXPECT_EQ(find_kernel(k.name), &k) << k.name;
    const bool f16_acc = k.mode == Mode::f16 || k.mode == Mode::f16_model;
    EXPECT_EQ(k.fma == FmaKind::none, !f16_acc) << k.name << ": only fp16-accumulating kernels have an fp16 FMA";
  }
}

}  // namespace
}  // namespace halfmap
