// The kernels' recipes (include/halfmap/kernel_spec.hpp): every kernel has one, it says what its registry entry
// says, and docs/kernel-spec.md's copy between the kernel-spec markers is what this build generates: its legend and
// recipe table exactly, and one row for every kernel of this build, exactly as generated (rows of ISAs this build
// does not compile, the other architecture's, are checked by that architecture's build).
#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "halfmap/kernel_spec.hpp"

namespace halfmap {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The kernel a table row is about ("| f16_sum__avx2 | ..."), or nullopt for any other line.
std::optional<std::string> row_kernel(const std::string& line) {
  if (line.rfind("| ", 0) != 0) return std::nullopt;
  const std::size_t end = line.find(" |", 2);
  if (end == std::string::npos) return std::nullopt;
  std::string name = line.substr(2, end - 2);
  if (name.find("__") == std::string::npos) return std::nullopt;
  return name;
}

std::optional<Isa> isa_of_kernel(const std::string& name) {
  const std::string isa = name.substr(name.rfind("__") + 2);
  for (Isa i : kAllIsas) {
    if (isa_name(i) == isa) return i;
  }
  return std::nullopt;
}

std::string generated() {
  std::vector<const Kernel*> ks;
  for (const Kernel& k : kernels()) ks.push_back(&k);
  return kernel_spec_table(ks) + "\n" + kernel_recipe_table({});
}

TEST(KernelSpec, EveryKernelHasARecipeThatFitsItsEntry) {
  for (const Kernel& k : kernels()) {
    SCOPED_TRACE(std::string(k.name));
    const KernelSpec s = kernel_spec(k);
    EXPECT_NE(kernel_recipe_text(s.recipe), "?") << "recipe key " << s.recipe;
    const bool f16 = k.mode == Mode::f16 || k.mode == Mode::f16_model;
    EXPECT_EQ(s.accumulator, f16 ? "f16" : "f32");
    if (is_scaled(k.mode)) {
      EXPECT_EQ(std::string(s.recipe), std::string(op_name(k.op)) + (k.mode == Mode::fp8_f32acc ? "/fp8" : "/mxfp8"));
    } else if (k.op == Op::maxabs) {
      EXPECT_EQ(s.recipe, "maxabs");
    } else {
      EXPECT_EQ(std::string(s.recipe), std::string(op_name(k.op)) + (f16 ? "/f16" : "/f32acc"));
    }
    // An fp16 accumulation in lanes names them and the fold; one that fuses says which FMA.
    if (f16 && k.lanes > 1 && k.op != Op::maxabs && k.op != Op::dense_fwd && k.op != Op::dense_bwd) {
      const std::string lanes = "i mod " + std::to_string(k.lanes) + ", fold ";
      if (is_attention(k.op)) {  // its GEMMs' order, then the rows' lanes
        EXPECT_EQ(s.order.rfind("GEMMs: inner index in order; rows: " + lanes, 0), 0u) << s.order;
      } else {
        EXPECT_EQ(s.order.rfind(lanes, 0), 0u) << s.order;
      }
    }
    // A fixed f32 order (neonfhm's FMLAL, sve's fcvt + fmla) says so, with the lane order of its entry for the
    // reductions; the sve f32 kernels' orders are fixed too, at every vector length.
    const char* fixed = k.isa == Isa::sve ? "in f32; SVE fcvt + fmla" : "in f32; FMLAL";
    EXPECT_EQ(s.order.find(fixed) != std::string::npos, k.fixed_order == FixedOrder::f32) << s.order;
    if (k.isa == Isa::sve && k.mode == Mode::f32 && k.op != Op::maxabs) {
      EXPECT_NE(s.order.find("in f32, any vector length"), std::string::npos) << s.order;
    }
    if (k.fixed_order == FixedOrder::f32 && is_reduction(k.op)) {
      const std::string lanes = "i mod " + std::to_string(k.lanes) + ", fold ";
      if (is_attention(k.op)) {  // its GEMMs' order, then the rows' lanes
        EXPECT_EQ(s.order.rfind("GEMMs: inner index in order; rows: " + lanes, 0), 0u) << s.order;
      } else {
        EXPECT_EQ(s.order.rfind(lanes, 0), 0u) << s.order;
      }
    }
    // neonbf16's BFDotAdd order says so, with the pair-lane order of its entry for the reductions.
    EXPECT_EQ(s.order.find("in f32; BFDotAdd") != std::string::npos, k.fixed_order == FixedOrder::bfdot) << s.order;
    if (k.fixed_order == FixedOrder::bfdot && is_reduction(k.op)) {
      EXPECT_EQ(s.order.rfind("pair i mod " + std::to_string(k.lanes) + ", fold ", 0), 0u) << s.order;
    }
    const bool fma_rounds = f16 && (k.op == Op::sumsq || k.op == Op::dot || k.op == Op::mse || k.op == Op::dense_fwd ||
                                    k.op == Op::dense_bwd || is_norm(k.op) || is_gelu(k.op) || is_attention(k.op));
    EXPECT_EQ(s.fma != "-", fma_rounds) << s.fma;
  }
}

TEST(KernelSpec, DocHoldsThisBuildsTables) {
  std::ifstream f(HALFMAP_KERNEL_SPEC_DOC);
  ASSERT_TRUE(f) << "cannot read " << HALFMAP_KERNEL_SPEC_DOC;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- kernel-spec begin", end = "<!-- kernel-spec end -->";
  const std::size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << "docs/kernel-spec.md lacks the kernel-spec markers";
  const std::size_t body = doc.find('\n', b) + 1;
  const std::vector<std::string> have = lines_of(doc.substr(body, e - body));
  const std::vector<std::string> want = lines_of(generated());

  // Everything but the kernels' rows (the legends, the headers, the recipes) is the same on every build.
  auto others = [](const std::vector<std::string>& v) {
    std::vector<std::string> out;
    for (const std::string& l : v) {
      if (!row_kernel(l)) out.push_back(l);
    }
    while (!out.empty() && out.back().empty()) out.pop_back();
    return out;
  };
  EXPECT_EQ(others(have), others(want)) << "docs/kernel-spec.md's kernel-spec legend or recipes differ from "
                                           "`halfmap info --kernel-spec`; paste its output between the markers";

  const std::set<std::string> rows(have.begin(), have.end());
  std::set<std::string> generated_names;
  for (const std::string& l : want) {
    const auto name = row_kernel(l);
    if (!name) continue;
    generated_names.insert(*name);
    EXPECT_TRUE(rows.count(l)) << "docs/kernel-spec.md lacks this row of `halfmap info --kernel-spec` (or has it "
                                  "changed):\n"
                               << l;
  }
  for (const std::string& l : have) {
    const auto name = row_kernel(l);
    if (!name) continue;
    const auto isa = isa_of_kernel(*name);
    ASSERT_TRUE(isa) << "docs/kernel-spec.md's kernel-spec row names an unknown ISA: " << l;
    if (isa_compiled(*isa)) {
      EXPECT_TRUE(generated_names.count(*name))
          << "docs/kernel-spec.md lists a kernel this build's registry lacks: " << l;
    }
  }
  EXPECT_EQ(std::count_if(have.begin(), have.end(), [](const std::string& l) { return l.rfind("| kernel |", 0) == 0; }),
            1);
}

}  // namespace
}  // namespace halfmap
