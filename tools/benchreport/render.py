"""bench.md, in order: the run (machine, CPU, compiler, flags, load average, date, from the benchmark's context and,
where missing there, `halfmap info --json`); the roofs; the project's performance targets, each with its measured
ratio, met or missed and by how much; then per family (reductions; dense forward and backward; losses, softmax and
cross-entropy) the tables kernel x size: throughput, fraction of the roof, and for the work that has peers (dense
forward, f32 softmax) the ratio to the best peer doing the same work."""

import statistics

from . import diagnose as diagnose_bench
from . import threads as dense_threads
from .markdown import fmt_bytes, fmt_frac, fmt_rate, level_key, size_key, table
from .peers import EXPECTED_PEERS, PEERS_HINT, Peers
from .roof_report import relative_spread, roofs_section
from .results import FP8_OPS, Results, canonical_context, is_peer, number
from .roofs import Roofs, roof_fraction, roof_name
from .targets import target_rows


def machine_name(machine, context, info):
    """What the report calls the machine: the results/ folder name (--machine), else the CPU model."""
    cpu = info.get("cpu", {}) if isinstance(info, dict) else {}
    return machine or context.get("cpu_model") or cpu.get("model") or "this machine"


def host(context):
    parts = []
    if context.get("num_cpus"):
        mhz = context.get("mhz_per_cpu")
        parts.append(f"{context['num_cpus']} CPUs" + (f", {mhz} MHz" if mhz else ""))
    caches = []
    for c in context.get("caches", []) or []:
        if not isinstance(c, dict) or c.get("type") == "Instruction" or not c.get("size"):
            continue
        caches.append(f"L{c.get('level', '?')}{'d' if c.get('type') == 'Data' else ''} {fmt_bytes(int(c['size']))}")
    if caches:
        parts.append(", ".join(caches))
    return "; ".join(parts) or "unknown"


def load_average(context):
    load = context.get("load_avg")
    if isinstance(load, list) and load:
        # A busy machine slows the benchmarks (the roofs too): worth knowing when reading them.
        return " / ".join(f"{float(x):.2f}" for x in load[:3]) + " (1, 5, 15 min, at start)"
    return "unknown"


def cpu_share(benchmarks):
    """Median of cpu_time / real_time over the timed runs: near 1 on an idle machine, lower when other processes
    took the benchmark's CPU."""
    shares = []
    for b in benchmarks or []:
        if not isinstance(b, dict) or b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        if "_threads/" in str(b.get("name", "")):  # several threads, process CPU time: not one thread's share
            continue
        cpu, real = number(b.get("cpu_time")), number(b.get("real_time"))
        if cpu and real:
            shares.append(cpu / real)
    return statistics.median(shares) if shares else None


def pick(*values):
    for v in values:
        if v not in (None, ""):
            return str(v)
    return "unknown"


def header_rows(context, info, machine, source, benchmarks):
    build = info.get("build", {}) if isinstance(info, dict) else {}
    cpu = info.get("cpu", {}) if isinstance(info, dict) else {}
    flags = pick(context.get("halfmap_cxx_flags"), build.get("flags"))
    rows = [
        ("machine", pick(machine)),
        ("CPU", pick(context.get("cpu_model"), cpu.get("model")) + (f" ({cpu['arch']})" if cpu.get("arch") else "")),
        ("CPU features", pick(context.get("cpu_features"))),
        ("ISA paths enabled", pick(context.get("isa_enabled"))),
        ("HALFMAP_ISA", pick(context.get("halfmap_isa_cap"), "unset")),
        ("compiler", pick(context.get("halfmap_compiler"), build.get("compiler"))),
        ("flags", f"`{flags}` (the ISA files add their own -m flags; never -march=native)"),
        ("git commit", pick(context.get("halfmap_git_commit"), build.get("git_commit"))),
        ("date", pick(context.get("date"))),
        ("load average", load_average(context)),
        ("host", host(context)),
        ("FP environment", pick(context.get("fp_env"))),
        ("benchmark", f"Google Benchmark, at least {pick(context.get('bench_min_time'))} s per benchmark; rates per "
                      f"second of the benchmark thread's CPU time" +
                      (f"; order: {context['bench_order']}" if context.get("bench_order") else "")),
    ]
    share = cpu_share(benchmarks)
    if share is not None:
        rows.append(("CPU share", f"the benchmark thread ran {share:.0%} of the wall time (median over the "
                                  f"benchmarks; about 100% on an idle machine)"))
    peers = [(k, v) for k, v in sorted(context.items())
             if k == "peers_built" or k.startswith("peer") or (k.endswith("_version") and k != "halfmap_version")]
    rows += [(k, pick(v)) for k, v in peers]
    rows += [("dense layers", pick(context.get("bench_dense"))), ("losses and softmax", pick(context.get("bench_nn"))),
             ("inputs", pick(context.get("bench_inputs"))), ("source", f"`{source}`")]
    return table(["", ""], rows, ["---", "---"])


def targets_section(context, results, roofs, where, diagnose):
    out = ["", "## Targets", ""]
    out.append(f"The speeds the project tracks (measured on {where}, single core; ratios from this run). \"missed "
               "by\": how far the ratio falls short of the target (for a \"≤\" target: exceeds it), absolute and "
               "as a share of it. `halfmap diagnose` is the exception to the single core: it runs on every hardware "
               "thread, as a user runs it; and the thread-scaling targets, on 1 and 2 threads.")
    out.append("")
    out.append(repetitions_text(results, context))
    out.append("")
    trows = target_rows(results, roofs, context, diagnose)
    met = sum(r[-1] == "met" for r in trows)
    missed = sum(r[-1].startswith("**missed**") for r in trows)
    out += [f"{met} met, {missed} missed, {len(trows) - met - missed} not measured.", ""]
    out += table(["target", "measured", "ratio", "needed", "result"], trows, ["---", "---", "---:", "---", "---"])
    return out


def repetitions_text(results, context=None):
    n = results.repetitions()
    if n <= 1:
        return ("Each benchmark ran once (no repetitions): every number is that run's, with no spread to show, and "
                "\"met\" rests on one measurement.")
    order = ""
    if str((context or {}).get("bench_order", "")).startswith("random interleaving"):
        order = (" The repetitions of all benchmarks ran in one shuffled order (`--benchmark_enable_random_"
                 "interleaving`), so each median samples the whole run and a slow spell of the host falls on single "
                 "repetitions of many benchmarks, not on every repetition of a few: the ratios compare like with like.")
    return (f"Each benchmark ran {n} times (`--benchmark_repetitions={n}`; the capped peers' runs likewise): every "
            "number is the median of its repetitions, in brackets the lowest and highest; a ratio's brackets are "
            "its range over those extremes (slowest over fastest, fastest over slowest). \"met\" or \"missed\" "
            "judges the median ratio only." + order)


def spread_line(results, suite, kernels, args, counter):
    """One sentence on how much the repetitions of a table's cells varied: the median and the largest
    (highest - lowest) / median over the cells, or [] without repetitions."""
    widths = [(w, k, a) for k in kernels for a in args
              if (w := relative_spread(results, suite, k, a, counter)) is not None]
    if not widths:
        return []
    widths.sort()
    worst = widths[-1]
    return ["", f"Spread over the repetitions ((highest - lowest) / median of each cell): median "
                f"{statistics.median(w for w, _, _ in widths):.1%}, largest {worst[0]:.1%} (`{worst[1]}` at "
                f"{worst[2]})."]


# ---- the family tables ------------------------------------------------------------------------------------------

def not_run_lines(results, suite, kernels):
    lines = [f"- `{k}`: {results.skipped[(suite, k)]}" for k in kernels if (suite, k) in results.skipped
             and not is_peer(k) and not any(key[0] == suite and key[1] == k for key in results.cells)]
    return (["", "Not run on this machine:"] + lines) if lines else []


def memory_table(results, roofs, suite, kernels, peers=None, rate=("bytes_per_second", "GB/s"), first="kernel"):
    """kernel x level: the rate (GB/s by default; `rate` = (counter, unit)) and roof fraction at each level; with
    `peers`, also the ratio of elements/s to the best peer of the same dtype (the same work: peers count the same
    elements, not necessarily the same bytes)."""
    counter, unit = rate
    if peers is not None and peers.not_built:
        peers = None  # one sentence under the table says so, rather than a column of it
    levels = sorted(results.args.get(suite, []), key=level_key)
    head = [first]
    for lv in levels:
        head += [f"{lv} {unit}", f"{lv} roof"] + ([f"{lv} ÷ peer"] if peers else [])
    rows = []
    for k in kernels:
        if not any((suite, k, lv) in results.cells for lv in levels):
            continue
        row = [f"`{k}`"]
        for lv in levels:
            frac, _ = roof_fraction(results, roofs, suite, k, lv)
            row += [fmt_rate(results.value(suite, k, lv, counter)), fmt_frac(frac)]
            if peers:
                row.append("peer" if is_peer(k) else peers.ratio(k, lv, "elements_per_second"))
        rows.append(row)
    return table(head, rows) + spread_line(results, suite, kernels, levels, counter)


def dense_peer_lines(results, suite, ran, sizes, peers):
    if peers is None:
        return ["", "No peer library is benchmarked for this operation: no peer."]
    if peers.not_built:
        return ["", f"Ratio to the best peer: {PEERS_HINT}."]
    out = ["", "GFLOP/s / the fastest peer of the same storage type at that size (f32 kernels vs f32 peers, "
           "f16_f32acc and f16 vs f16 peers, bf16 vs bf16 peers); the peer in brackets:", ""]
    rows = [[f"`{k}`"] + [peers.ratio(k, s, "flops_per_second") for s in sizes] for k in ran if not is_peer(k)]
    out += table(["kernel"] + sizes, rows)
    out += ["", "GFLOP/s / the fastest peer of the same ISA and arithmetic (the peers' isa= labels: oneDNN's and "
            "OpenBLAS's ISA as they report it, capped to AVX2 or AVX512-BF16 in extra runs; f32 and f16_f32acc vs "
            "f32 peers, bf16_f32acc vs bf16 peers; the f16 modes share no arithmetic with a peer). Both rates of a "
            "ratio come from one run wherever one run timed both: a capped run times halfmap's kernels of its ISA "
            "again beside its peers, so that a ratio never compares two moments of the machine; where several "
            "peers or runs qualify, the lowest ratio:", ""]
    rows = [[f"`{k}`"] + [peers.ratio_same_isa(k, s, "flops_per_second") for s in sizes] for k in ran
            if not is_peer(k) and all(results.isa_and_arithmetic(k))]
    out += table(["kernel"] + sizes, rows)
    return out + ["", "Peers:", ""] + peers.status_lines()


def dense_tables(results, roofs, suite, context, at="M = N = K"):
    sizes = sorted(results.args.get(suite, []), key=size_key)
    kernels = results.kernels.get(suite, [])
    ran = [k for k in kernels if any((suite, k, s) in results.cells for s in sizes)]
    out = [f"GFLOP/s at {at} =", ""]
    out += table(["kernel"] + sizes, [[f"`{k}`"] + [fmt_rate(results.value(suite, k, s, "flops_per_second"))
                                                     for s in sizes] for k in ran])
    out += spread_line(results, suite, ran, sizes, "flops_per_second")
    out += ["", "Fraction of the FMA roof of the kernel's ISA and arithmetic (peers: their ISA's, else the best "
            "roof of their arithmetic here):", ""]
    out += table(["kernel", "roof"] + sizes,
                 [[f"`{k}`", roof_name(results, roofs, suite, k)]
                  + [fmt_frac(roof_fraction(results, roofs, suite, k, s)[0]) for s in sizes] for k in ran],
                 ["---", "---"] + ["---:"] * len(sizes))
    peers = Peers(results, context, suite) if suite in EXPECTED_PEERS else None
    out += dense_peer_lines(results, suite, ran, sizes, peers)
    return out + not_run_lines(results, suite, kernels)


def reductions_section(results, roofs):
    out = ["", "## Reductions", ""]
    out.append("GB/s of input read, and its fraction of the read roof of the level. No peer library is benchmarked "
               "for the reductions: no peer.")
    found = False
    for op in results.ops.reduce:
        kernels = results.of_op(op, isa_ref=True)
        if not kernels:
            continue
        found = True
        out += ["", f"### {op}", ""] + memory_table(results, roofs, "reduce", kernels)
        out += not_run_lines(results, "reduce", kernels)
    if not found:
        out += ["", "No reduce/ benchmarks in this run."]
    return out


def dense_section(results, roofs, context):
    out = ["", "## Dense layers", ""]
    found = False
    for op, what in (("dense_fwd", "Y = X·W + b"), ("dense_bwd", "dX = dY·Wᵀ, dW = Xᵀ·dY, db")):
        if not results.kernels.get(op):
            continue
        found = True
        out += [f"### {op}: {what}", ""] + dense_tables(results, roofs, op, context) + [""]
    if not found:
        out += ["No dense_fwd/ or dense_bwd/ benchmarks in this run.", ""]
    return out


def attention_section(results, roofs, context):
    out = ["## Attention", ""]
    described = context.get("bench_attention")
    out.append("GFLOP/s of one head's forward and backward, counting the six GEMMs (12·len²·d per call), and their "
               "fraction of the FMA roof of the kernel's ISA and arithmetic, as the dense layers'. "
               + (f"Shape and work: {described}." if described else ""))
    found = False
    for op, what in (("attention_prescale", "1/√d on Q before Q·Kᵀ"), ("attention_postscale", "1/√d on Q·Kᵀ")):
        if not results.kernels.get(op):
            continue
        found = True
        out += ["", f"### {op}: {what}", ""] + dense_tables(results, roofs, op, context, "len")
    if not found:
        out += ["", "No attention_prescale/ or attention_postscale/ benchmarks in this run."]
    return out + [""]


def nn_section(results, roofs, context):
    out = ["## Losses, softmax and cross-entropy", ""]
    out.append("GB/s of input read (mse: p and y; softmax: x; xent: logits and labels), and the roof fraction: "
               "mse's of the read roof of the level; softmax's, softmax_naive's and xent's, whose bytes read + "
               "written (y, dlogits) are counted, of the copy roof of the level. softmax and layernorm also compare "
               "elements per second with the fastest peer of the same storage type (XNNPACK's f32 softmax, oneDNN's "
               "f32, bf16 and fp16 softmax and layer normalisation); the other operations have no peer.")
    found = False
    for op in results.ops.nn:
        kernels = results.kernels.get(op, [])
        if not kernels:
            continue
        found = True
        peers = Peers(results, context, op) if op in EXPECTED_PEERS else None
        out += ["", f"### {op}", ""] + memory_table(results, roofs, op, kernels, peers)
        if peers and peers.not_built:
            out += ["", f"Ratio to the best peer: {PEERS_HINT}."]
        elif peers:
            out += ["", "Peers:", ""] + peers.status_lines()
        out += not_run_lines(results, op, kernels)
    if not found:
        out += ["", "No mse/, softmax/, softmax_naive/ or xent/ benchmarks in this run."]
    return out


FP8_WHAT = {
    "fp8_encode": "float32 -> fp8, saturating",
    "fp8_encode_nonsat": "float32 -> fp8, non-saturating",
    "fp8_decode": "fp8 -> float32",
    "mx_quantize": "float32 -> MX blocks of 32 (scale and elements)",
    "fp8_round": "float32 onto the fp8 grid in float32 (the scaled modes' per-tensor cast, current scaling's scale)",
    "mx_round": "float32 onto MX blocks of 32, read back in float32 (the MXFP8 mode's cast)",
}


def fp8_section(results, roofs):
    out = ["## fp8 and MX conversions", ""]
    out.append("Values converted per second (G/s), and the fraction of the copy roof of the level that the bytes "
               "read + written (5 per value: 4 of float32, 1 of fp8; MX: and a scale per 32; the roundings: 8, float32 in "
               "and out) make: a conversion "
               "streams its input to its output like a copy. n = level bytes / 4 values per call. The vector paths run one integer "
               "algorithm (src/kernels/common/fp8_convert.hpp); ref runs it one value at a time. No peer: none of "
               "Debian's libraries converts to fp8 (peers.md).")
    found = False
    for op in FP8_OPS:
        kernels = results.kernels.get(op, [])
        if not kernels:
            continue
        found = True
        out += ["", f"### {op}: {FP8_WHAT[op]}", ""]
        out += memory_table(results, roofs, op, kernels, rate=("elements_per_second", "G/s"), first="conversion")
        out += not_run_lines(results, op, kernels)
    if not found:
        out += ["", "No fp8_encode/, fp8_encode_nonsat/, fp8_decode/, mx_quantize/, fp8_round/ or mx_round/ "
                "benchmarks in this run."]
    return out


INTRO = ("Generated by `bash tools/main.sh` (`halfmap_bench`, then `tools/bench_report.py`): every kernel of "
         "halfmap's registry, the peer libraries where built, and the roofs of this core, from one run. "
         "Higher is better. Memory-bound kernels run at three sizes (l1, l2, dram: the same bytes of input "
         "per call for every kernel, GB/s counts bytes read); dense layers are square, M = N = K, "
         "single-threaded (but for the section on several threads), GFLOP/s counting 2·M·N·K per forward call "
         "and 4·M·N·K per backward call. "
         "\"-\": not run there.")


def render(data, info, machine, source, charts=(), diagnose=None):
    """bench.md as a string, from the benchmark JSON `data`, `halfmap info --json` (or {}), the results/ folder name
    of the machine, the JSON's path as shown, the [(chart file, title)] written next to it and the diagnose
    benchmark's JSON (tools/diagnose_bench.py; None: not run)."""
    context = canonical_context(data.get("context", {}) or {})
    benchmarks = data.get("benchmarks", []) or []
    results = Results(benchmarks, info)
    roofs = Roofs(context, results)
    where = machine_name(machine, context, info)
    out = [f"# Benchmarks on {where}", "", INTRO, "", "## Run", ""]
    out += header_rows(context, info, machine, source, benchmarks)
    out += roofs_section(context, results, roofs)
    out += targets_section(context, results, roofs, where, diagnose)
    out += reductions_section(results, roofs)
    out += dense_section(results, roofs, context)
    out += dense_threads.section(results, context) + [""]
    out += nn_section(results, roofs, context) + [""]
    out += attention_section(results, roofs, context) + [""]
    out += fp8_section(results, roofs)
    out += diagnose_bench.section(diagnose)
    if charts:
        out += ["", "## Charts", ""]
        for path, what in charts:
            out += [f"![{what}]({path})", ""]
    if results.unreadable:
        out += ["", f"Benchmarks whose names could not be read (not in the tables): {', '.join(results.unreadable)}."]
    if results.undescribed():
        out += ["", "Kernels that neither `halfmap info --json` nor a benchmark label describes (not in the "
                f"reduction tables, the targets or the charts): {', '.join(results.undescribed())}."]
    return "\n".join(out).rstrip() + "\n"
