#!/usr/bin/env python3
"""Turns halfmap_bench's results (Google Benchmark JSON) into Markdown reports.

    python3 tools/bench_table.py BENCH_JSON [--out REDUCTIONS_MD] [--dense-out DENSE_MD]
                                 [--info INFO_JSON] [--machine SLUG]

--out: the reductions, one table per operation (sum, sumsq, maxabs, dot); a row per kernel, two columns per size
level (GB/s and Gelem/s). Benchmarks reduce/<kernel>/<level> (bench/bench_reduce.cpp), rate counters
bytes_per_second and elements_per_second.

--dense-out: the dense layers, one table per operation (dense_fwd, dense_bwd); a row per kernel, a column per
size (M = N = K), GFLOP/s. Benchmarks dense_fwd/<kernel>/<size> and dense_bwd/<kernel>/<size>
(bench/bench_dense.cpp), rate counter flops_per_second. Under the tables, the performance targets the project
tracks (TARGETS), computed from the same run and marked met or not met.

At least one of the two is needed; one JSON holding both suites can feed both. Each report has a header with the
machine, CPU, compiler, flags, date and git commit, taken from the benchmark's context (bench/main.cpp adds
halfmap's facts to it) and, where missing there, from `halfmap info --json`.

The parsing is tolerant: a name it cannot read, a missing counter or a size it has not seen before is reported or
shown as "-", never an error. Kernels that could not run here (SkipWithError: ISA not supported) are listed under
their table with the reason.

Python 3 standard library only. The report is written to a temporary file and renamed into place.
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

OPS = ("sum", "sumsq", "maxabs", "dot")
DENSE_OPS = ("dense_fwd", "dense_bwd")
REDUCE_COUNTERS = ("bytes_per_second", "elements_per_second")
DENSE_COUNTERS = ("flops_per_second",)

# XNNPACK's f16 fully-connected operator at M = N = K = 1024 on the Zen 4 development machine (x86-64 AMD EPYC,
# AVX-512F/BW/VL and AVX512-BF16, no AVX512-FP16), in GFLOP/s. A reference figure, not measured by halfmap_bench:
# it stands in until a later issue benchmarks the peer libraries in the same run. It means nothing on another
# machine.
XNNPACK_F16_FC_GFLOPS = 23.0
XNNPACK_F16_FC_SIZE = 1024

# The dense targets the project tracks, each checked at these sizes (M = N = K) of dense_fwd:
#   ratio:      GFLOP/s of `kernel` / GFLOP/s of `base`, both from this run, at least `min`;
#   reference:  GFLOP/s of `kernel` / XNNPACK_F16_FC_GFLOPS, at least `min`.
TARGET_SIZES = (1024, 512)
TARGETS = (
    {"kind": "ratio", "kernel": "f16_f32acc_dense_fwd__avx512", "base": "f32_dense_fwd__avx512", "min": 0.9,
     "why": "fp16 storage should cost no compute speed: it is widened while packing, the f32 tile does the work"},
    {"kind": "ratio", "kernel": "bf16_f32acc_dense_fwd__avx512bf16", "base": "f32_dense_fwd__avx512", "min": 1.8,
     "why": "vdpbf16ps does two products per f32 lane"},
    {"kind": "reference", "kernel": "f16_dense_fwd__avx512", "min": 1.5,
     "why": "fp16 accumulation emulated per operation, against XNNPACK's f16 GEMM"},
    {"kind": "reference", "kernel": "f16_dense_fwd__avx2", "min": 1.5,
     "why": "fp16 accumulation emulated per operation, against XNNPACK's f16 GEMM"},
)
# Kernel names: <storage>[_<acc>acc]_<op>__<isa> (include/halfmap/registry.hpp).
KERNEL_RE = re.compile(r"^(?P<front>[a-z0-9_]+?)_(?P<op>[a-z0-9]+)__(?P<isa>[a-z0-9]+)$")


def parse_name(name, suite="reduce"):
    """'reduce/f16_sum__avx512/l1' -> ('f16_sum__avx512', 'l1'), 'dense_fwd/f32_dense_fwd__avx512/1024' with
    suite 'dense_fwd' -> ('f32_dense_fwd__avx512', '1024'); None if it is not a benchmark of that suite.

    Tolerates suffixes Google Benchmark may append (/min_time:..., /repeats:..., /threads:...) and 'n:4096'
    style argument names."""
    parts = [p for p in name.split("/") if p and not re.match(r"^(min_time|min_warmup_time|repeats|iterations|"
                                                               r"threads|real_time|manual_time):", p)]
    if len(parts) < 3 or parts[0] != suite:
        return None
    level = parts[2]
    if ":" in level:
        level = level.split(":", 1)[1]
    return parts[1], level


def kernel_op(kernel):
    m = KERNEL_RE.match(kernel)
    return (m.group("op"), m.group("isa")) if m else (None, None)


def number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def collect(benchmarks, suite="reduce", counters=REDUCE_COUNTERS):
    """Returns (kernels, cells, skipped, levels, unreadable) for the benchmarks <suite>/<kernel>/<level>:
    kernels and levels in first-seen order (the registry's order); cells[kernel][level] = {counter: value} (the
    median aggregate if the run had repetitions, else the median of the iterations); skipped[kernel] = reason."""
    kernels, runs, medians, skipped, levels, unreadable = [], {}, {}, {}, [], []
    for b in benchmarks:
        name = b.get("run_name") or b.get("name", "")
        parsed = parse_name(name, suite)
        if parsed is None:
            if not str(name).startswith(suite + "/"):
                continue
            unreadable.append(name)
            continue
        kernel, level = parsed
        if kernel not in kernels:
            kernels.append(kernel)
        if level not in levels:
            levels.append(level)
        if b.get("error_occurred") or b.get("skipped"):
            skipped[kernel] = b.get("error_message") or b.get("skip_message") or "skipped"
            continue
        rates = {k: number(b.get(k)) for k in counters}
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[(kernel, level)] = rates
            continue
        runs.setdefault((kernel, level), []).append(rates)

    cells = {}
    for key in set(runs) | set(medians):
        if key in medians:
            rates = medians[key]
        else:
            rates = {}
            for counter in counters:
                values = [r[counter] for r in runs[key] if r[counter] is not None]
                rates[counter] = statistics.median(values) if values else None
        kernel, level = key
        cells.setdefault(kernel, {})[level] = rates
    return kernels, cells, skipped, levels, unreadable


def fmt_rate(value):
    if value is None:
        return "-"
    g = value / 1e9
    return f"{g:.1f}" if g >= 10 else f"{g:.2f}" if g >= 1 else f"{g:.3f}"


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def level_bytes(context):
    """{'l1': 16384, ...} from the context's bench_levels ('l1=16384 bytes, l2=524288 bytes, ...')."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"(\w+)=(\d+) bytes", str(context.get("bench_levels", "")))}


def host(context):
    """'2 CPUs, 2596 MHz; L1d 32 KiB, L2 1 MiB, L3 32 MiB; load average 0.12 at start' from the context."""
    parts = []
    if context.get("num_cpus"):
        mhz = context.get("mhz_per_cpu")
        parts.append(f"{context['num_cpus']} CPUs" + (f", {mhz} MHz" if mhz else ""))
    caches = []
    for c in context.get("caches", []) or []:
        if not isinstance(c, dict) or c.get("type") == "Instruction" or not c.get("size"):
            continue
        name = f"L{c.get('level', '?')}" + ("d" if c.get("type") == "Data" else "")
        caches.append(f"{name} {fmt_bytes(int(c['size']))}")
    if caches:
        parts.append(", ".join(caches))
    load = context.get("load_avg")
    if isinstance(load, list) and load:
        # A busy machine slows the benchmarks: worth knowing when reading them.
        parts.append(f"load average {float(load[0]):.2f} at start")
    return "; ".join(parts) or "unknown"


def header(context, info, machine, source, extra=()):
    """The report's header table; `extra` rows (name, value) go before the source."""
    build = info.get("build", {}) if isinstance(info, dict) else {}
    cpu = info.get("cpu", {}) if isinstance(info, dict) else {}
    fp_env = info.get("fp_env", {}) if isinstance(info, dict) else {}

    def pick(*values):
        for v in values:
            if v not in (None, ""):
                return str(v)
        return "unknown"

    flags = pick(context.get("halfmap_cxx_flags"), build.get("flags"))
    rows = [
        ("machine", pick(machine)),
        ("CPU", pick(context.get("cpu_model"), cpu.get("model"))
         + (f" ({cpu['arch']})" if cpu.get("arch") else "")),
        ("CPU features", pick(context.get("cpu_features"))),
        ("ISA paths enabled", pick(context.get("isa_enabled"))),
        ("HALFMAP_ISA", pick(context.get("halfmap_isa_cap"), info.get("isa_cap") if isinstance(info, dict) else None,
                             "unset")),
        ("compiler", pick(context.get("halfmap_compiler"), build.get("compiler"))),
        ("flags", f"`{flags}` (the library's ISA folders add their own -m flags; never -march=native)"),
        ("git commit", pick(context.get("halfmap_git_commit"), build.get("git_commit"))),
        ("date", pick(context.get("date"))),
        ("FP environment", pick(context.get("fp_env"),
                                "ieee" if fp_env.get("ieee") else None)),
        ("host", host(context)),
        ("benchmark", f"Google Benchmark, at least {pick(context.get('bench_min_time'))} s per benchmark"),
        ("inputs", pick(context.get("bench_inputs"))),
        *[(k, pick(v)) for k, v in extra],
        ("source", f"`{source}`"),
    ]
    lines = ["| | |", "| --- | --- |"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in rows]
    return lines


def render(data, info, machine, source):
    context = data.get("context", {}) or {}
    kernels, cells, skipped, levels, unreadable = collect(data.get("benchmarks", []) or [])
    sizes = level_bytes(context)

    out = [f"# Reductions on {machine or context.get('cpu_model', 'this machine')}", ""]
    out.append("Throughput of every reduction kernel in halfmap's registry, generated by `bash tools/main.sh` "
               "(`halfmap_bench`'s `reduce/` benchmarks). Higher is better. GB/s counts the bytes of input "
               "read (x, and y for dot) and compares across kernels at one size level, since every kernel reads "
               "the same bytes there; Gelem/s counts elements of x (a dot element is one x[i]*y[i] pair).")
    out.append("")
    out += header(context, info, machine, source)
    out.append("")

    level_notes = []
    for level in levels:
        note = fmt_bytes(sizes[level]) if level in sizes else None
        level_notes.append(f"{level}" + (f" = {note} read per call" if note else ""))
    if level_notes:
        out.append("Size levels: " + "; ".join(level_notes) + ".")
        out.append("")

    kernels_by_op = {op: [] for op in OPS}
    others = []
    for kernel in kernels:
        op, _ = kernel_op(kernel)
        (kernels_by_op[op] if op in kernels_by_op else others).append(kernel)

    for op in OPS + (("other",) if others else ()):
        names = others if op == "other" else kernels_by_op[op]
        if not names:
            continue
        out.append(f"## {op}")
        out.append("")
        head = ["kernel"] + [f"{lv} {unit}" for lv in levels for unit in ("GB/s", "Gelem/s")]
        out.append("| " + " | ".join(head) + " |")
        out.append("| --- |" + " ---: |" * (len(head) - 1))
        for kernel in (k for k in names if k in cells):
            row = [f"`{kernel}`"]
            for lv in levels:
                rates = cells[kernel].get(lv, {})
                row += [fmt_rate(rates.get("bytes_per_second")), fmt_rate(rates.get("elements_per_second"))]
            out.append("| " + " | ".join(row) + " |")
        not_run = [k for k in names if k not in cells]
        if not_run:
            out.append("")
            out.append("Not run on this machine:")
            for kernel in not_run:
                out.append(f"- `{kernel}`: {skipped.get(kernel, 'no result')}")
        out.append("")

    if unreadable:
        out.append(f"Benchmarks whose names could not be read (not in the tables): {', '.join(unreadable)}.")
        out.append("")
    if not cells and not skipped:
        out.append("No reduce/ benchmarks were found in the input.")
        out.append("")
    return "\n".join(out)


def size_key(size):
    """Sorts sizes numerically ('64' before '1024'), anything else after them in first-seen order."""
    return (0, int(size)) if str(size).isdigit() else (1, 0)


def cpu_share(benchmarks, suites):
    """Median of cpu_time / real_time over the timed runs of these suites: near 1 on an idle machine, lower when
    other processes took the benchmark's CPU. None without data."""
    shares = []
    for b in benchmarks:
        name = str(b.get("run_name") or b.get("name", ""))
        if name.split("/", 1)[0] not in suites or b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        cpu, real = number(b.get("cpu_time")), number(b.get("real_time"))
        if cpu and real:
            shares.append(cpu / real)
    return statistics.median(shares) if shares else None


def gflops(cells, skipped, kernel, size):
    """(GFLOP/s, None) of kernel at size in one op's cells, or (None, why it is missing)."""
    value = cells.get(kernel, {}).get(str(size), {}).get("flops_per_second")
    if value is not None:
        return value / 1e9, None
    if kernel in skipped:
        return None, skipped[kernel]
    if kernel in cells:
        return None, f"not run at {size}"
    return None, "not in this run"


def target_rows(cells, skipped):
    """The rows of the targets table, one per target and size, from dense_fwd's cells."""
    rows = []
    for t in TARGETS:
        for size in TARGET_SIZES:
            value, missing = gflops(cells, skipped, t["kernel"], size)
            needed = f"≥ {t['min']:g}"
            if t["kind"] == "ratio":
                what = f"`{t['kernel']}` / `{t['base']}`"
                base, base_missing = gflops(cells, skipped, t["base"], size)
                missing = missing or (base_missing and f"`{t['base']}`: {base_missing}")
                if not missing and base <= 0:
                    missing = f"`{t['base']}` measured 0 GFLOP/s"
                ratio = None if missing else value / base
                measured = None if missing else f"{ratio:.2f} ({value:.1f} / {base:.1f} GFLOP/s)"
            else:
                what = f"`{t['kernel']}` / XNNPACK f16 FC ({XNNPACK_F16_FC_GFLOPS:g} GFLOP/s, reference figure)"
                needed += f" (≥ {t['min'] * XNNPACK_F16_FC_GFLOPS:g} GFLOP/s)"
                ratio = None if missing else value / XNNPACK_F16_FC_GFLOPS
                measured = None if missing else f"{ratio:.2f} ({value:.1f} GFLOP/s)"
            where = str(size)
            if t["kind"] == "reference" and size != XNNPACK_F16_FC_SIZE:
                where += f" (reference at {XNNPACK_F16_FC_SIZE})"
            if missing:
                result = f"not measured: {missing}"
            else:
                result = "met" if ratio >= t["min"] else "**not met**"
            rows.append([what, where, measured or "-", needed, result])
    return rows


def render_dense(data, info, machine, source):
    context = data.get("context", {}) or {}
    benchmarks = data.get("benchmarks", []) or []

    out = [f"# Dense layers on {machine or context.get('cpu_model', 'this machine')}", ""]
    out.append("Speed of every dense kernel in halfmap's registry on square layers, M = N = K = the column's size, "
               "single-threaded, generated by `bash tools/main.sh` (`halfmap_bench`'s `dense_fwd/` and "
               "`dense_bwd/` benchmarks). GFLOP/s, higher is better. A forward call (Y = X·W + b, identity "
               "activation, with bias) counts 2·M·N·K operations, a backward call (dX, dW and db) 4·M·N·K: the two "
               "GEMMs, not the bias or db. Rates are per second of the benchmark thread's CPU time (Google "
               "Benchmark's default), which other processes disturb less than wall time, though not entirely "
               "(they share the caches). \"-\": not run at that size; the scalar `__ref` kernels run only at the "
               "smallest sizes.")
    out.append("")
    share = cpu_share(benchmarks, DENSE_OPS)
    extra = [("dense layers", context.get("bench_dense"))]
    if share is not None:
        extra.append(("CPU share", f"the benchmark thread ran {share:.0%} of the wall time (median over the dense "
                                   f"benchmarks; about 100% on an idle machine)"))
    out += header(context, info, machine, source, extra)
    out.append("")

    found = False
    fwd_cells, fwd_skipped = {}, {}
    for op in DENSE_OPS:
        kernels, cells, skipped, sizes, unreadable = collect(benchmarks, op, DENSE_COUNTERS)
        if op == "dense_fwd":
            fwd_cells, fwd_skipped = cells, skipped
        if not kernels and not unreadable:
            continue
        found = True
        sizes = sorted(sizes, key=size_key)
        out.append(f"## {op}" + (": Y = X·W + b" if op == "dense_fwd" else ": dX = dY·Wᵀ, dW = Xᵀ·dY, db"))
        out.append("")
        out.append("GFLOP/s at M = N = K =")
        out.append("")
        out.append("| kernel | " + " | ".join(sizes) + " |")
        out.append("| --- |" + " ---: |" * len(sizes))
        for kernel in (k for k in kernels if k in cells):
            row = [f"`{kernel}`"] + [fmt_rate(cells[kernel].get(size, {}).get("flops_per_second")) for size in sizes]
            out.append("| " + " | ".join(row) + " |")
        not_run = [k for k in kernels if k not in cells]
        if not_run:
            out.append("")
            out.append("Not run on this machine:")
            for kernel in not_run:
                out.append(f"- `{kernel}`: {skipped.get(kernel, 'no result')}")
        if unreadable:
            out.append("")
            out.append(f"Benchmarks whose names could not be read (not in the table): {', '.join(unreadable)}.")
        out.append("")

    if not found:
        out.append("No dense_fwd/ or dense_bwd/ benchmarks were found in the input.")
        out.append("")
        return "\n".join(out)

    out.append("## Targets")
    out.append("")
    out.append("The dense_fwd speeds the project tracks, from this run. A busy machine (see the load average and CPU "
               "share above) moves the absolute figures more than the ratios of two kernels of one run.")
    out.append("")
    out.append("| target | size | measured | needed | result |")
    out.append("| --- | --- | ---: | --- | --- |")
    for row in target_rows(fwd_cells, fwd_skipped):
        out.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    out.append("")
    for t in TARGETS:
        if t["kind"] == "ratio":
            out.append(f"- `{t['kernel']}` / `{t['base']}` ≥ {t['min']:g}: {t['why']}.")
        else:
            out.append(f"- `{t['kernel']}` ≥ {t['min']:g}× XNNPACK: {t['why']}.")
    out.append(f"- XNNPACK f16 fully-connected, {XNNPACK_F16_FC_GFLOPS:g} GFLOP/s at M = N = K = "
               f"{XNNPACK_F16_FC_SIZE} on the Zen 4 development machine: a reference figure, not measured in this "
               f"run (a later issue benchmarks the peer libraries alongside), and not valid for other machines; "
               f"at other sizes it is compared as it stands.")
    out.append("")
    return "\n".join(out)


def write_atomic(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json", help="Google Benchmark JSON (--benchmark_out_format=json)")
    parser.add_argument("--out", help="Markdown file to write the reductions to")
    parser.add_argument("--dense-out", help="Markdown file to write the dense layers to")
    parser.add_argument("--info", help="output of `halfmap info --json`, for what the context lacks")
    parser.add_argument("--machine", default="", help="the results/ folder name of this machine")
    args = parser.parse_args(argv)
    if not args.out and not args.dense_out:
        parser.error("give --out (reductions), --dense-out (dense layers) or both")

    def load(path, what):
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"bench_table.py: cannot read the {what} {path}: {e}")

    data = load(args.bench_json, "benchmark JSON")
    info = load(args.info, "info JSON") if args.info else {}

    def source(out):
        return os.path.relpath(args.bench_json, os.path.dirname(os.path.abspath(out)))

    if args.out:
        write_atomic(args.out, render(data, info, args.machine, source(args.out)) + "\n")
    if args.dense_out:
        write_atomic(args.dense_out, render_dense(data, info, args.machine, source(args.dense_out)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
