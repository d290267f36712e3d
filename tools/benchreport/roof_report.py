"""bench.md's roofs section: the roofs table (startup, benchmark and the roof used, with what each loop times), the
roof-fraction definition, and the roof check (cells above a roof by more than the run's spread)."""

import statistics

from .markdown import LEVELS, fmt_unit, level_key, table
from .results import number
from .roofs import F16C_OPS, F16C_WHAT, FMA_WHAT, f16c_fraction, roof_fraction, roof_name


ROOF_FRACTION_TEXT = (
    "**Roof fraction**, one definition for every table: a kernel's rate / the roof that bounds it (the roof "
    "used above). Kernels that only read (reductions, mse): bytes read per second / the read roof of the same level. "
    "softmax, softmax_naive and xent, which write as many bytes as they read: bytes read + written per second "
    "/ the copy roof of the same level. Dense kernels: GFLOP/s / the FMA roof of the "
    "kernel's ISA and arithmetic: the f32 FMA of the ISA for f32, f16_f32acc and the f16 kernels of avx2 and avx512 "
    "(F16C: they compute in f32 and round to fp16 per operation, so f32 FMA is their honest compute "
    "roof); vdpbf16ps for bf16_f32acc on avx512bf16; the fp16 FMA for f16 on avx512fp16 and neonfp16. "
    "Peers against the roof of the ISA their label names where halfmap measures it (roof=fma/<isa>), else "
    "against the best roof of their arithmetic on this machine. `__ref` "
    "kernels have no FMA roof. The per-operation f16 kernels of avx2 and avx512 are also compared with the "
    "F16C round-trip roof of their ISA (an FMA rounded to fp16 and back after every step, as they compute; "
    "a reduction's rounded add or FMA counts 2 flops) in the targets. FLOPs are counted the same way in roofs "
    "and kernels: an FMA is 2 per lane, "
    "vdpbf16ps 4 per f32 lane (2 per bf16 product), as in 2·M·N·K.")


def copy_what(context, level):
    variants = context.get(f"roof_copy_{level}_variants")
    if variants:
        return f"the same loads stored, the fastest of three stores in four shapes; {variants}; bytes read + written"
    return "the same loads stored to a second buffer (ordinary stores), bytes read + written"


def f16c_what(context, isa):
    variants = context.get(f"roof_f16c_{isa}_variants")
    if variants:
        return f"{F16C_WHAT.get(isa, '')}, the faster of chains in registers and 64 fp16 chains in L1; {variants}"
    return F16C_WHAT.get(isa, "") + (", 14 chains" if isa == "avx2" else ", 24 chains" if isa == "avx512" else "")


def used(found, arg, unit):
    """The roof a fraction divides by (Roofs: the higher of startup and the roof/* benchmark's fastest repetition)."""
    return fmt_unit(found[arg], unit) if found.get(arg) else "-"


def roof_table_rows(context, results, roofs):
    rows = []
    loads = context.get("roof_read_loads")
    read_what = "the level's f32 input summed as 64-bit integers" + (f", {loads}" if loads else "")
    for lv in sorted(set(LEVELS) | set(roofs.read), key=level_key):
        start = context.get(f"roof_read_{lv}_bytes_per_second")
        variants = context.get(f"roof_read_{lv}_variants")
        rows.append([f"read, {lv}", fmt_unit(number(start), "GB/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "read", lv, "bytes_per_second"), "GB/s"), used(roofs.read, lv, "GB/s"),
                     read_what + (f"; {variants}" if variants else "")])
    for lv in sorted(set(LEVELS) | set(roofs.copy), key=level_key):
        start = context.get(f"roof_copy_{lv}_bytes_per_second")
        rows.append([f"copy, {lv}", fmt_unit(number(start), "GB/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "copy", lv, "bytes_per_second"), "GB/s"), used(roofs.copy, lv, "GB/s"),
                     copy_what(context, lv)])
    fma_isas = [a for a in results.args.get("roof", []) if ("roof", "fma", a) in results.cells] + \
        [i for i in roofs.fma if ("roof", "fma", i) not in results.cells]
    for isa in dict.fromkeys(fma_isas):
        start = context.get(f"roof_fma_{isa}_flops_per_second")
        rows.append([f"fma, {isa}", fmt_unit(number(start), "GFLOP/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "fma", isa, "flops_per_second"), "GFLOP/s"), used(roofs.fma, isa, "GFLOP/s"),
                     FMA_WHAT.get(isa, "")])
    f16c_isas = [a for a in results.args.get("roof", []) if ("roof", "f16c", a) in results.cells] + list(roofs.f16c)
    for isa in dict.fromkeys(f16c_isas):
        start = context.get(f"roof_f16c_{isa}_flops_per_second")
        rows.append([f"f16c, {isa}", fmt_unit(number(start), "GFLOP/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "f16c", isa, "flops_per_second"), "GFLOP/s"), used(roofs.f16c, isa, "GFLOP/s"),
                     f16c_what(context, isa)])
    return rows


def roofs_section(context, results, roofs):
    out = ["", "## Roofs", ""]
    out.append("What one core of this machine can read, copy and compute. \"startup\" is measured once before the "
               "benchmarks (`halfmap_bench` puts it in the JSON context); \"benchmark\" is the median of the "
               "`roof/*` benchmarks, which measure the same loops again during the run. \"roof\" is what every "
               "roof fraction below divides by: the best this core did, the higher of startup and the fastest "
               "repetition of the benchmark (on a shared machine a single measurement can land in a slow moment).")
    out.append("")
    out += table(["roof", "startup", "benchmark", "roof used", "what"], roof_table_rows(context, results, roofs),
                 ["---", "---:", "---:", "---:", "---"])
    skipped_roofs = [f"- `roof/{k}/{a}`: {msg}" for (suite, k, a), msg in results.skipped_at.items()
                     if suite == "roof"]
    if skipped_roofs:
        out += ["", "Not measured here:"] + skipped_roofs
    out += ["", ROOF_FRACTION_TEXT]
    out += roof_defect_lines(results, roofs)
    if roofs.any_from_benchmarks():
        out += ["", "This JSON holds no startup roofs for some of the roofs above (an older `halfmap_bench`): "
                "their fractions divide by the `roof/*` benchmark of the same run instead."]
    if not roofs.read and not roofs.fma:
        out += ["", "No roof was measured in this run: roof fractions are \"-\"."]
    elif not roofs.fma:
        out += ["", "No FMA roof was measured in this run: the dense kernels' roof fractions are \"-\"."]
    return out


def relative_spread(results, suite, kernel, arg, counter):
    """(highest - lowest) / median of one cell's counter over its repetitions, or None without them."""
    sp, v = results.spread(suite, kernel, arg, counter), results.value(suite, kernel, arg, counter)
    return (sp[1] - sp[0]) / v if sp and v else None


def run_spread(results):
    """The run's spread: the median over every measured cell of relative_spread of its main rate
    (bytes_per_second or flops_per_second), or None without repetitions."""
    widths = []
    for (suite, kernel, arg) in results.cells:
        w = relative_spread(results, suite, kernel, arg, "bytes_per_second")
        if w is None:
            w = relative_spread(results, suite, kernel, arg, "flops_per_second")
        if w is not None:
            widths.append(w)
    return statistics.median(widths) if widths else None


def roof_defects(results, roofs):
    """[(suite, kernel, arg, fraction, roof name)] of every cell whose median rate is above its roof by more than
    the run's spread (without repetitions: above it at all): a roof that a kernel beats is not the fastest way
    this core does that work, so the roof, not the kernel, is wrong. Checked against every roof a cell has: its
    roof fraction (read, copy or FMA) and, for the per-operation f16 kernels, the F16C round trip."""
    margin = run_spread(results) or 0.0
    found = []
    for (suite, kernel, arg) in sorted(results.cells):
        if suite == "roof" or suite.endswith("_threads"):  # the roofs are one core's; those run on several
            continue
        checks = [(roof_fraction(results, roofs, suite, kernel, arg)[0],
                   f"copy/{arg}" if suite in results.rules.copy_ops else roof_name(results, roofs, suite, kernel)
                   if suite in results.ops.compute else f"read/{arg}")]
        facts = results.facts(kernel)
        per_op_f16 = facts.mode == "f16" and facts.isa in results.rules.f16_per_op_isas
        if per_op_f16 and (suite in results.ops.compute or facts.op in F16C_OPS):
            checks.append((f16c_fraction(results, roofs, suite, kernel, arg)[0], f"f16c/{facts.isa}"))
        for frac, name in checks:
            if frac is not None and frac > 1 + margin:
                found.append((suite, kernel, arg, frac, name))
    return found


def roof_defect_lines(results, roofs):
    defects = roof_defects(results, roofs)
    margin = run_spread(results)
    within = f"by more than the run's spread ({margin:.1%}, the median spread of its cells)" if margin else "at all"
    if not defects:
        return ["", f"**Roof check**: no kernel is above a roof {within}."]
    out = ["", f"**Roof defects**: {len(defects)} cells are above a roof {within}, so that roof is not the "
           "fastest way this core does their work and their fractions of it overstate the kernel:", ""]
    out += table(["cell", "roof", "fraction"],
                 [[f"`{suite}/{kernel}/{arg}`", name, f"{frac:.3f}"] for suite, kernel, arg, frac, name in defects],
                 ["---", "---", "---:"])
    return out
