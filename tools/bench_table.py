#!/usr/bin/env python3
"""Turns halfmap_bench's reduction results (Google Benchmark JSON) into a Markdown report.

    python3 tools/bench_table.py BENCH_JSON --out REPORT_MD [--info INFO_JSON] [--machine SLUG]

One table per operation (sum, sumsq, maxabs, dot); a row per kernel, two columns per size level (GB/s and
Gelem/s). A header gives the machine, CPU, compiler, flags, date and git commit, taken from the benchmark's
context (bench/main.cpp adds halfmap's facts to it) and, where missing there, from `halfmap info --json`.

Benchmarks are named reduce/<kernel>/<level> (bench/bench_reduce.cpp) and carry the rate counters
bytes_per_second and elements_per_second. The parsing is tolerant: a name it cannot read, a missing counter or a
level it has not seen before is reported or shown as "-", never an error. Kernels that could not run here
(SkipWithError: ISA not supported) are listed under their table with the reason.

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
# Kernel names: <storage>[_<acc>acc]_<op>__<isa> (include/halfmap/registry.hpp).
KERNEL_RE = re.compile(r"^(?P<front>[a-z0-9_]+?)_(?P<op>[a-z0-9]+)__(?P<isa>[a-z0-9]+)$")


def parse_name(name):
    """'reduce/f16_sum__avx512/l1' -> ('f16_sum__avx512', 'l1'); None if it is not a reduction benchmark.

    Tolerates suffixes Google Benchmark may append (/min_time:..., /repeats:..., /threads:...) and 'n:4096'
    style argument names."""
    parts = [p for p in name.split("/") if p and not re.match(r"^(min_time|min_warmup_time|repeats|iterations|"
                                                               r"threads|real_time|manual_time):", p)]
    if len(parts) < 3 or parts[0] != "reduce":
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


def collect(benchmarks):
    """Returns (kernels, cells, skipped, levels, unreadable): kernels and levels in first-seen order (the
    registry's order); cells[kernel][level] = {'bytes_per_second': x, 'elements_per_second': y} (the median
    aggregate if the run had repetitions, else the median of the iterations); skipped[kernel] = reason."""
    kernels, runs, medians, skipped, levels, unreadable = [], {}, {}, {}, [], []
    for b in benchmarks:
        name = b.get("run_name") or b.get("name", "")
        parsed = parse_name(name)
        if parsed is None:
            if not str(name).startswith("reduce/"):
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
        rates = {k: number(b.get(k)) for k in ("bytes_per_second", "elements_per_second")}
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
            for counter in ("bytes_per_second", "elements_per_second"):
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


def header(context, info, machine, source):
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
               "(`halfmap_bench --benchmark_filter=^reduce/`). Higher is better. GB/s counts the bytes of input "
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
    parser.add_argument("--out", required=True, help="Markdown file to write")
    parser.add_argument("--info", help="output of `halfmap info --json`, for what the context lacks")
    parser.add_argument("--machine", default="", help="the results/ folder name of this machine")
    args = parser.parse_args(argv)

    def load(path, what):
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"bench_table.py: cannot read the {what} {path}: {e}")

    data = load(args.bench_json, "benchmark JSON")
    info = load(args.info, "info JSON") if args.info else {}
    write_atomic(args.out, render(data, info, args.machine, os.path.relpath(args.bench_json, os.path.dirname(
        os.path.abspath(args.out)))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
