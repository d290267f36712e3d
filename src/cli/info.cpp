// `halfmap info`: what this build and this machine can run, and the conditions results are produced under:
// the CPU and its raw feature flags, every ISA path (compiled / supported / enabled under HALFMAP_ISA), every
// registered kernel and fp8 and MX conversion, the floating-point environment (read, never changed) and the build. Text
// for people,
// `--json` for scripts; both come from the same facts, gathered once. `--kernel-spec`: every kernel's recipe
// (include/halfmap/kernel_spec.hpp) as Markdown, docs/kernel-spec.md's tables.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "halfmap/conversions.hpp"
#include "halfmap/cpu.hpp"
#include "halfmap/fp_env.hpp"
#include "halfmap/isa_arith.hpp"
#include "halfmap/kernel_spec.hpp"
#include "halfmap/parallel.hpp"
#include "halfmap/registry.hpp"

namespace halfmap::cli {
namespace {

/// Trims the blanks CMake leaves when CMAKE_CXX_FLAGS is empty (" -O3 -DNDEBUG").
std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string_view yes_no(bool b) { return b ? "yes" : "no"; }

/// Why an ISA's kernels may not be called here, in a few words; empty when they may.
std::string why_disabled(Isa isa) {
  switch (isa_state(isa)) {
    case IsaState::enabled:
      return {};
    case IsaState::not_compiled:
      return "not compiled in";
    case IsaState::unsupported:
      return "CPU lacks it";
    case IsaState::capped:
      break;
  }
  const std::optional<Isa> cap = isa_cap();
  return cap ? fmt::format("above HALFMAP_ISA={}", isa_name(*cap)) : std::string("held back by HALFMAP_ISA");
}

/// Appends one formatted line to the text output.
struct Lines {
  fmt::memory_buffer out;
  template <typename... Args>
  void operator()(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
    out.push_back('\n');
  }
};

/// The CPU: its model, architecture, the flags it has and lacks (and SVE's vector length).
void cpu_text(Lines& line, const CpuFeatures& cpu) {
  std::string present, absent;
  for (const CpuFlag& f : kCpuFlags) {
    if (f.x86 != kHostIsX86) continue;
    std::string& list = cpu.*f.member ? present : absent;
    list += list.empty() ? "" : " ";
    list += f.name;
  }
  line("CPU");
  line("  model     {}", cpu.model.empty() ? "(unknown)" : cpu.model);
  line("  arch      {}", kHostArch);
  line("  has       {}", present.empty() ? "-" : present);
  line("  lacks     {}", absent.empty() ? "-" : absent);
  if (cpu.sve) {
    line("  sve VL    {} bits ({} f32 / {} fp16 lanes per register; the sve kernels' results do not depend on it)",
         cpu.sve_vector_bits, cpu.sve_vector_bits / 32, cpu.sve_vector_bits / 16);
  }
  line("");
}

/// Every ISA path: compiled, supported, enabled under the HALFMAP_ISA cap, and what it requires.
void isa_text(Lines& line, const std::optional<Isa>& cap) {
  line("ISA paths (HALFMAP_ISA cap: {})", cap ? isa_name(*cap) : "none, every supported path is enabled");
  std::size_t isa_w = 3;
  for (Isa isa : kAllIsas) isa_w = std::max(isa_w, isa_name(isa).size());
  // "enabled" says why not only when the other two columns do not: the path is held back by the cap.
  auto enabled = [](Isa isa) -> std::string {
    if (isa_enabled(isa) || !isa_compiled(isa) || !isa_supported(isa)) {
      return std::string(yes_no(isa_enabled(isa)));
    }
    return "no (cap)";
  };
  const std::size_t enabled_w = cap ? 8 : 7;
  line("  {:<{}}  {:<8}  {:<9}  {:<{}}  {}", "isa", isa_w, "compiled", "supported", "enabled", enabled_w,
       "requirements");
  for (Isa isa : kAllIsas) {
    line("  {:<{}}  {:<8}  {:<9}  {:<{}}  {}", isa_name(isa), isa_w, yes_no(isa_compiled(isa)),
         yes_no(isa_supported(isa)), enabled(isa), enabled_w, isa_requirements(isa));
  }
  line("");
}

/// Every registered kernel: op, mode, ISA, storage, lanes, FMA and whether it runs here. Returns the width of its
/// ISA column, which the conversions' tables share.
std::size_t kernels_text(Lines& line) {
  const std::span<const Kernel> all = kernels();
  std::size_t runnable = 0, name_w = 4, mode_w = 4, kisa_w = 3;
  for (const Kernel& k : all) {
    runnable += kernel_enabled(k) ? 1 : 0;
    name_w = std::max(name_w, k.name.size());
    mode_w = std::max(mode_w, mode_name(k.mode).size());
    kisa_w = std::max(kisa_w, isa_name(k.isa).size());
  }
  line("Kernels ({} registered, {} can run here)", all.size(), runnable);
  line("  {:<{}}  {:<13}  {:<{}}  {:<{}}  {:<7}  {:>5}  {:<9}  {}", "name", name_w, "op", "mode", mode_w, "isa", kisa_w,
       "storage", "lanes", "fma", "runs here");
  for (const Kernel& k : all) {
    const std::string why = why_disabled(k.isa);
    line("  {:<{}}  {:<13}  {:<{}}  {:<{}}  {:<7}  {:>5}  {:<9}  {}", k.name, name_w, op_name(k.op), mode_name(k.mode),
         mode_w, isa_name(k.isa), kisa_w, dtype_name(k.storage), k.lanes, kernel_fma_name(k).value_or("-"),
         kernel_enabled(k) ? std::string("yes") : fmt::format("no ({})", why));
  }
  line("");
  return kisa_w;
}

/// The fp8 and MX conversions and whether each runs here; `kisa_w`: the kernels' ISA column width.
void conversions_text(Lines& line, std::size_t kisa_w) {
  // The fp8 conversions (conversions.hpp's Fp8Conversion): float32 -> fp8 in both overflow modes, and back.
  std::size_t conv_w = 4;
  for (const Fp8Conversion& c : fp8_conversions()) conv_w = std::max(conv_w, c.name.size());
  line("fp8 conversions ({} registered; float32 -> fp8 saturating and non-saturating, fp8 -> float32)",
       fp8_conversions().size());
  line("  {:<{}}  {:<6}  {:<{}}  {}", "name", conv_w, "format", "isa", kisa_w, "runs here");
  for (const Fp8Conversion& c : fp8_conversions()) {
    line("  {:<{}}  {:<6}  {:<{}}  {}", c.name, conv_w, fp8_name(c.format), isa_name(c.isa), kisa_w,
         conversion_enabled(c) ? std::string("yes") : fmt::format("no ({})", why_disabled(c.isa)));
  }
  line("");

  // The MX element conversions and block quantisation (conversions.hpp's MxConversion).
  std::size_t mx_w = 4;
  for (const MxConversion& c : mx_conversions()) mx_w = std::max(mx_w, c.name.size());
  line("MX conversions ({} registered; elements float32 -> element and back, blocks of 32 quantised)",
       mx_conversions().size());
  line("  {:<{}}  {:<10}  {:<{}}  {}", "name", mx_w, "element", "isa", kisa_w, "runs here");
  for (const MxConversion& c : mx_conversions()) {
    line("  {:<{}}  {:<10}  {:<{}}  {}", c.name, mx_w, mx_name(c.elem).substr(6), isa_name(c.isa), kisa_w,
         conversion_enabled(c) ? std::string("yes") : fmt::format("no ({})", why_disabled(c.isa)));
  }
  line("");
}

/// The conditions of a run: the floating-point environment, the threads and the build.
void conditions_text(Lines& line, const FpEnv& env) {
  line("Floating-point environment");
  line("  {}", env.describe());
  line("");

  const std::optional<unsigned> env_threads = threads_env();
  line("Threads");
  line("  {} CPUs this process may run on; HALFMAP_THREADS {}; default thread count {}", hardware_threads(),
       env_threads ? std::to_string(*env_threads) : "unset", default_threads());
  line("");

  line("Build");
  line("  version     {}", HALFMAP_VERSION);
  line("  git commit  {}", HALFMAP_GIT_COMMIT);
  line("  compiler    {}", HALFMAP_COMPILER);
  line("  flags       {}", trim(HALFMAP_CXX_FLAGS).empty() ? "(none)" : trim(HALFMAP_CXX_FLAGS));
}

/// The text report: a header, then one section per step above.
std::string format_text(const FpEnv& env) {
  const CpuFeatures& cpu = cpu_features();
  const std::optional<Isa> cap = isa_cap();
  Lines line;

  line("halfmap {} (git {})", HALFMAP_VERSION, HALFMAP_GIT_COMMIT);
  line("");
  cpu_text(line, cpu);
  isa_text(line, cap);
  const std::size_t kisa_w = kernels_text(line);
  conversions_text(line, kisa_w);
  conditions_text(line, env);
  return fmt::to_string(line.out);
}

/// What the Python tools (tools/benchreport/) would otherwise retype: every op's row of ops.hpp, the modes, the
/// ISA paths with their architecture, and (added later, so after them) each path's arithmetic (isa_arith.hpp) and
/// the scaled modes (is_scaled). After every other key, so that those read as they always did.
void vocabulary_json(nlohmann::ordered_json& j) {
  using json = nlohmann::ordered_json;
  j["ops"] = json::array();
  for (const OpInfo& row : kOpTable) {
    j["ops"].push_back({{"name", row.name},
                        {"kind", op_kind_name(row.kind)},
                        {"sweep_family", sweep_family_name(row.sweep)},
                        {"swept", row.swept},
                        {"gradient", gradient_name(row.gradient)},
                        {"bench_family", bench_family_name(row.bench)}});
  }
  j["modes"] = json::array();
  for (Mode m : kAllModes) j["modes"].push_back(mode_name(m));
  j["isa_paths"] = json::array();
  for (Isa isa : kAllIsas) j["isa_paths"].push_back({{"name", isa_name(isa)}, {"arch", isa_arch(isa)}});
  j["isa_arithmetic"] = json::array();
  for (Isa isa : kAllIsas) {
    j["isa_arithmetic"].push_back(
        {{"name", isa_name(isa)}, {"f32_path", isa_name(isa_f32_path(isa))}, {"f16_per_op", isa_f16_per_op(isa)}});
  }
  j["scaled_modes"] = json::array();
  for (Mode m : kAllModes) {
    if (is_scaled(m)) j["scaled_modes"].push_back(mode_name(m));
  }
}

std::string format_json(const FpEnv& env) {
  // ordered_json keeps the keys in the order they are written, which reads like the text output.
  using json = nlohmann::ordered_json;
  const CpuFeatures& cpu = cpu_features();
  const std::optional<Isa> cap = isa_cap();

  json j;
  j["cpu"] = {{"model", cpu.model}, {"arch", kHostArch}};
  for (const CpuFlag& f : kCpuFlags) j["cpu"][std::string(f.name)] = cpu.*f.member;
  if (cpu.sve) j["cpu"]["sve_vector_bits"] = cpu.sve_vector_bits;

  j["isas"] = json::array();
  for (Isa isa : kAllIsas) {
    j["isas"].push_back({{"name", isa_name(isa)},
                         {"requirements", isa_requirements(isa)},
                         {"compiled", isa_compiled(isa)},
                         {"supported", isa_supported(isa)},
                         {"enabled", isa_enabled(isa)}});
  }

  j["kernels"] = json::array();
  for (const Kernel& k : kernels()) {
    const std::optional<std::string_view> fma = kernel_fma_name(k);
    const KernelSpec spec = kernel_spec(k);
    j["kernels"].push_back({{"name", k.name},
                            {"op", op_name(k.op)},
                            {"mode", mode_name(k.mode)},
                            {"isa", isa_name(k.isa)},
                            {"storage", dtype_name(k.storage)},
                            {"lanes", k.lanes},
                            {"fma", fma ? json(*fma) : json(nullptr)},
                            {"accumulator", spec.accumulator},
                            {"order", spec.order},
                            {"recipe", spec.recipe},
                            {"recipe_text", kernel_recipe_text(spec.recipe)},
                            {"supported", kernel_enabled(k)}});
  }

  j["fp8_conversions"] = json::array();
  for (const Fp8Conversion& c : fp8_conversions()) {
    j["fp8_conversions"].push_back({{"name", c.name},
                                    {"format", fp8_name(c.format)},
                                    {"isa", isa_name(c.isa)},
                                    {"supported", conversion_enabled(c)}});
  }

  j["mx_conversions"] = json::array();
  for (const MxConversion& c : mx_conversions()) {
    j["mx_conversions"].push_back({{"name", c.name},
                                   {"format", mx_name(c.elem)},
                                   {"isa", isa_name(c.isa)},
                                   {"supported", conversion_enabled(c)}});
  }

  j["fp_env"] = {{"arch", env.arch}, {"ftz", env.ftz}, {"daz", env.daz},
                 {"fz16", env.fz16}, {"raw", env.raw}, {"ieee", env.ieee()}};
  j["isa_cap"] = cap ? json(isa_name(*cap)) : json(nullptr);
  const std::optional<unsigned> env_threads = threads_env();
  j["threads"] = {{"hardware", hardware_threads()},
                  {"env", env_threads ? json(*env_threads) : json(nullptr)},
                  {"default", default_threads()}};
  j["build"] = {{"version", HALFMAP_VERSION},
                {"git_commit", HALFMAP_GIT_COMMIT},
                {"compiler", HALFMAP_COMPILER},
                {"flags", trim(HALFMAP_CXX_FLAGS)}};
  vocabulary_json(j);
  return j.dump(2) + "\n";
}

/// Every kernel's recipe (the tables of docs/kernel-spec.md, between its markers).
std::string format_kernel_spec() {
  std::vector<const Kernel*> ks;
  for (const Kernel& k : kernels()) ks.push_back(&k);
  return kernel_spec_table(ks) + "\n" + kernel_recipe_table({});
}

}  // namespace

Command add_info_command(CLI::App& parent) {
  CLI::App* sub = parent.add_subcommand(
      "info", "Show the CPU, the ISA paths and kernels this machine can run, the FP environment and the build");
  auto json = std::make_shared<bool>(false);
  auto spec = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print one JSON object instead of text");
  sub->add_flag("--kernel-spec", *spec,
                "Print, as Markdown, what it takes to recompute every kernel's numbers: storage, accumulator, "
                "lanes, their order, FMA, the rounding steps")
      ->excludes("--json");
  return {sub, [json, spec] {
            if (*spec) return write_stdout(format_kernel_spec());
            // Read before formatting anything, so the report is of the state the process started in.
            const FpEnv env = read_fp_env();
            return write_stdout(*json ? format_json(env) : format_text(env));
          }};
}

}  // namespace halfmap::cli
