#!/usr/bin/env python3
"""Turns halfmap_bench's results (Google Benchmark JSON) into one report, bench.md, and one chart per kernel family.

    python3 tools/bench_report.py BENCH_JSON --out BENCH_MD [--charts DIR] [--info INFO_JSON] [--machine SLUG]

bench.md, in order: the run (machine, CPU, compiler, flags, load average, date, from the benchmark's context and,
where missing there, `halfmap info --json`); the roofs; the project's performance targets, each with its measured
ratio, met or missed and by how much; then per family (reductions; dense forward and backward; losses, softmax and
cross-entropy) the tables kernel x size: throughput, fraction of the roof, and for the work that has peers (dense
forward, f32 softmax) the ratio to the best peer doing the same work.

--charts DIR writes DIR/bench_reductions.png, DIR/bench_dense.png and DIR/bench_nn.png (matplotlib, imported only
then): the memory-bound kernels' GB/s at l1, l2 and dram with the read roof of each level, and the dense kernels'
GFLOP/s from 64 to 1024 with the FMA roofs and the peers.

The roof fraction is one definition everywhere: a kernel's rate / the roof measured once at the start of the same
run (halfmap_bench puts the roofs in the context, roof_read_<level>_bytes_per_second and
roof_fma_<isa>_flops_per_second, and each kernel's counter roof_fraction). For a JSON without them (older runs) the
report divides by the roof/* benchmarks of the same JSON instead, and says so.

Peers (other libraries, benchmarks dense_fwd/<lib>_<dtype>__peer/<size> and softmax/<lib>_<dtype>__peer/<level>)
may be present, skipped (shown with their message) or absent (not built). The parsing is tolerant: an unreadable
name, a missing counter or an unknown size is reported or shown as "-", never an error.

Python 3 standard library (and matplotlib for --charts). Every file is written to a temporary name and renamed.
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

LEVELS = ("l1", "l2", "dram")
REDUCE_OPS = ("sum", "sumsq", "maxabs", "dot")
NN_OPS = ("mse", "softmax", "softmax_naive", "xent")
DENSE_OPS = ("dense_fwd", "dense_bwd")
ALL_OPS = REDUCE_OPS + NN_OPS + DENSE_OPS
PEER_SUFFIX = "__peer"
PEERS_HINT = "peer not built: install with tools/setup.sh --peers"
# The peers the benchmarks may hold (the naming contract: <lib>_<dtype>__peer), per suite.
EXPECTED_PEERS = {
    "dense_fwd": ("openblas_f32", "onednn_f32", "xnnpack_f32", "eigen_f32", "openblas_bf16", "onednn_bf16",
                  "xnnpack_f16", "eigen_f16", "onednn_f16"),
    "softmax": ("xnnpack_f32",),
}
TARGET_SIZE = "1024"
ROOF_TARGET = 0.85
ROOF_TARGET_OPS = REDUCE_OPS + ("mse", "softmax")
SKIP_NAME_PARTS = re.compile(r"^(min_time|min_warmup_time|repeats|iterations|threads|real_time|manual_time|"
                             r"process_time):")


# ---- reading the JSON -------------------------------------------------------------------------------------------

def number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse_name(name):
    """'dense_fwd/f32_dense_fwd__avx512/1024' -> ('dense_fwd', 'f32_dense_fwd__avx512', '1024'); None if it does not
    have three parts. Drops the suffixes Google Benchmark may append (/min_time:..., /repeats:...)."""
    parts = [p for p in str(name).split("/") if p and not SKIP_NAME_PARTS.match(p)]
    if len(parts) < 3:
        return None
    arg = parts[2].split(":", 1)[1] if ":" in parts[2] else parts[2]
    return parts[0], parts[1], arg


class Results:
    """Every benchmark of the JSON: cells[(suite, kernel, arg)] = {counter: value} (the median aggregate if the run
    had repetitions, else the median of the iterations), skipped[(suite, kernel)] = message, kernels[suite] =
    [kernel, ...] in first-seen order (the registry's), args[suite] likewise, unreadable = [name, ...]."""

    def __init__(self, benchmarks):
        runs, medians = {}, {}
        self.cells, self.skipped, self.kernels, self.args, self.unreadable = {}, {}, {}, {}, []
        self.skipped_at = {}  # (suite, kernel, arg) -> message
        for b in benchmarks or []:
            if not isinstance(b, dict):
                continue
            name = b.get("run_name") or b.get("name", "")
            parsed = parse_name(name)
            if parsed is None:
                self.unreadable.append(str(name))
                continue
            suite, kernel, arg = parsed
            self.kernels.setdefault(suite, [])
            if kernel not in self.kernels[suite]:
                self.kernels[suite].append(kernel)
            self.args.setdefault(suite, [])
            if arg not in self.args[suite]:
                self.args[suite].append(arg)
            if b.get("error_occurred") or b.get("skipped"):
                message = str(b.get("error_message") or b.get("skip_message") or "skipped")
                self.skipped[(suite, kernel)] = self.skipped_at[(suite, kernel, arg)] = message
                continue
            counters = {k: number(v) for k, v in b.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[(suite, kernel, arg)] = counters
                continue
            runs.setdefault((suite, kernel, arg), []).append(counters)
        for key in set(runs) | set(medians):
            if key in medians:
                self.cells[key] = medians[key]
                continue
            names = set().union(*(r.keys() for r in runs[key]))
            self.cells[key] = {c: statistics.median([r[c] for r in runs[key] if r.get(c) is not None])
                               for c in names if any(r.get(c) is not None for r in runs[key])}

    def value(self, suite, kernel, arg, counter):
        return self.cells.get((suite, kernel, str(arg)), {}).get(counter)

    def why_missing(self, suite, kernel, arg=None):
        """Why suite/kernel/arg has no value: its skip message, 'not run at <arg>' or 'not in this run'."""
        if (suite, kernel) in self.skipped:
            return self.skipped[(suite, kernel)]
        if kernel in self.kernels.get(suite, []):
            return f"not run at {arg}" if arg is not None else "no result"
        return "not in this run"


def kernel_parts(kernel):
    """'f16_f32acc_sum__avx512' -> ('f16_f32acc', 'sum', 'avx512'); (None, None, isa) when the op is unknown."""
    front, sep, isa = kernel.rpartition("__")
    if not sep:
        return None, None, None
    for op in sorted(ALL_OPS, key=len, reverse=True):
        if front.endswith("_" + op):
            return front[: -len(op) - 1], op, isa
    return None, None, isa


def is_peer(kernel):
    return kernel.endswith(PEER_SUFFIX)


def dtype_family(kernel):
    """The storage type that decides 'the same work': 'f32', 'f16' or 'bf16', for halfmap kernels (the name's first
    word) and peers (<lib>_<dtype>__peer)."""
    if is_peer(kernel):
        return kernel[: -len(PEER_SUFFIX)].rsplit("_", 1)[-1]
    return kernel.split("_", 1)[0]


def peer_label(kernel):
    return kernel[: -len(PEER_SUFFIX)] if is_peer(kernel) else kernel


# ---- roofs ------------------------------------------------------------------------------------------------------

def compute_roof_isa(kernel):
    """The ISA whose FMA roof a dense kernel is compared with (bench/bench_roof.cpp, compute_roof_isa): f32
    arithmetic (f32, f16_f32acc, and the f16 kernels of avx2/avx512, which compute in f32 and round per operation)
    against the f32 FMA of its ISA family; fp16 arithmetic on avx512fp16/neonfp16 against the fp16 FMA;
    bf16_f32acc on avx512bf16 against vdpbf16ps. None for ref."""
    mode, _, isa = kernel_parts(kernel)
    if isa in (None, "ref"):
        return None
    if isa == "avx512bf16":
        return "avx512bf16" if mode == "bf16_f32acc" else "avx512"
    if isa == "avx512fp16":
        return "avx512fp16" if mode == "f16" else "avx512"
    if isa == "neonfp16":
        return "neonfp16" if mode == "f16" else "neon"
    return isa


class Roofs:
    """The roofs of this run: read[level] and fma[isa] from the context (measured at startup), else from the roof/*
    benchmarks of the same JSON (source says which)."""

    def __init__(self, context, results):
        self.read, self.fma, self.source = {}, {}, {}
        for key, value in context.items():
            m = re.match(r"^roof_read_(\w+)_bytes_per_second$", key)
            if m and number(value):
                self.read[m.group(1)], self.source[("read", m.group(1))] = number(value), "startup"
            m = re.match(r"^roof_fma_(\w+)_flops_per_second$", key)
            if m and number(value):
                self.fma[m.group(1)], self.source[("fma", m.group(1))] = number(value), "startup"
        for kernel in results.kernels.get("roof", []):
            for arg in results.args.get("roof", []):
                if kernel == "read" and arg not in self.read:
                    v = results.value("roof", "read", arg, "bytes_per_second")
                    if v:
                        self.read[arg], self.source[("read", arg)] = v, "benchmark"
                if kernel == "fma" and arg not in self.fma:
                    v = results.value("roof", "fma", arg, "flops_per_second")
                    if v:
                        self.fma[arg], self.source[("fma", arg)] = v, "benchmark"

    def any_from_benchmarks(self):
        return any(s == "benchmark" for s in self.source.values())

    def best_fma(self, family):
        """The FMA roof a peer of dtype `family` is compared with (its ISA is unknown: the best this machine has for
        that arithmetic): bf16 -> vdpbf16ps, f16 -> an fp16 FMA, else and as fallback the best f32 FMA."""
        wanted = {"bf16": ("avx512bf16",), "f16": ("avx512fp16", "neonfp16")}.get(family, ())
        for isa in wanted:
            if isa in self.fma:
                return self.fma[isa], isa
        f32 = [(self.fma[i], i) for i in ("avx512", "avx2", "neon") if i in self.fma]
        return max(f32) if f32 else (None, None)


def roof_fraction(results, roofs, suite, kernel, arg):
    """(fraction, None) or (None, why): the counter roof_fraction, else the rate / the matching roof."""
    cell = results.cells.get((suite, kernel, str(arg)))
    if cell is None:
        return None, results.why_missing(suite, kernel, arg)
    if cell.get("roof_fraction") is not None:
        return cell["roof_fraction"], None
    if suite in DENSE_OPS:
        isa = roofs.best_fma(dtype_family(kernel))[1] if is_peer(kernel) else compute_roof_isa(kernel)
        if isa is None:
            return None, "no roof for ref"
        roof, rate = roofs.fma.get(isa), cell.get("flops_per_second")
    else:
        roof, rate = roofs.read.get(str(arg)), cell.get("bytes_per_second")
    if not roof or rate is None:
        return None, "roof not measured"
    return rate / roof, None


# ---- formatting -------------------------------------------------------------------------------------------------

def fmt_rate(value):
    if value is None:
        return "-"
    g = value / 1e9
    return f"{g:.1f}" if g >= 10 else f"{g:.2f}" if g >= 1 else f"{g:.3f}"


def fmt_unit(value, unit):
    return "-" if value is None else f"{fmt_rate(value)} {unit}"


def fmt_frac(value):
    return "-" if value is None else f"{value:.2f}"


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def cell(text):
    return str(text).replace("|", "/").replace("\n", " ")


def table(head, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(head) - 1)
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def size_key(arg):
    return (0, int(arg), "") if str(arg).isdigit() else (1, 0, str(arg))


def level_key(arg):
    return (LEVELS.index(arg), "") if arg in LEVELS else (len(LEVELS), str(arg))


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
        cpu, real = number(b.get("cpu_time")), number(b.get("real_time"))
        if cpu and real:
            shares.append(cpu / real)
    return statistics.median(shares) if shares else None


def header_rows(context, info, machine, source, benchmarks):
    build = info.get("build", {}) if isinstance(info, dict) else {}
    cpu = info.get("cpu", {}) if isinstance(info, dict) else {}

    def pick(*values):
        for v in values:
            if v not in (None, ""):
                return str(v)
        return "unknown"

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
                      f"second of the benchmark thread's CPU time"),
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


# ---- peers ------------------------------------------------------------------------------------------------------

class Peers:
    """The peers of one suite: status per expected or present peer, and the best peer of a dtype family."""

    def __init__(self, results, context, suite):
        self.results, self.suite = results, suite
        self.present = [k for k in results.kernels.get(suite, []) if is_peer(k)]
        any_peer = any(is_peer(k) for ks in results.kernels.values() for k in ks)
        built = str(context.get("peers_built", "")).strip().lower()
        # Not built: no __peer benchmark anywhere in the run and nothing in the context saying otherwise.
        self.not_built = not any_peer and built in ("", "0", "false", "no", "none", "off")

    def status(self):
        """[(peer, text)] for every expected or present peer."""
        names = list(EXPECTED_PEERS.get(self.suite, ()))
        names += [peer_label(k) for k in self.present if peer_label(k) not in names]
        rows = []
        for name in names:
            kernel = name + PEER_SUFFIX
            if self.not_built:
                rows.append((name, PEERS_HINT))
            elif (self.suite, kernel) in self.results.skipped:
                rows.append((name, "skipped: " + self.results.skipped[(self.suite, kernel)]))
            elif kernel in self.present:
                rows.append((name, "measured"))
            else:
                rows.append((name, "not in this run"))
        return rows

    def why_none(self, family):
        """The long form of best()'s reason, for the targets table."""
        if self.not_built:
            return PEERS_HINT
        skipped = [f"{peer_label(k)}: {self.results.skipped[(self.suite, k)]}" for k in self.present
                   if dtype_family(k) == family and (self.suite, k) in self.results.skipped]
        return ("peer skipped: " + "; ".join(skipped)) if skipped else f"no {family} peer in this run"

    def best(self, family, arg, counter):
        """(value, peer name, None) of the fastest peer of dtype `family` at arg, or (None, None, why)."""
        values = [(self.results.value(self.suite, k, arg, counter), k) for k in self.present
                  if dtype_family(k) == family]
        values = [(v, k) for v, k in values if v]
        if values:
            v, k = max(values)
            return v, peer_label(k), None
        if self.not_built:
            return None, None, "peer not built"
        if any(dtype_family(k) == family and (self.suite, k) in self.results.skipped for k in self.present):
            return None, None, "peer skipped"  # the message is in the list of peers under the table
        return None, None, "no peer"


# ---- targets ----------------------------------------------------------------------------------------------------

def judge(ratio, minimum, missing):
    if missing:
        return f"not measured: {missing}"
    if ratio >= minimum:
        return "met"
    short = minimum - ratio
    return f"**missed** by {short:.2f} ({short / minimum:.0%} short)"


def best_halfmap(results, suite, mode, arg, counter, isa=None):
    """(value, kernel) of the fastest non-ref halfmap kernel of `mode` (e.g. 'f32', 'f16_f32acc') in suite at arg,
    optionally of one ISA; (None, why) if none has a value."""
    found, why = [], "no such kernel in this run"
    for k in results.kernels.get(suite, []):
        m, _, kisa = kernel_parts(k)
        if is_peer(k) or m != mode or kisa == "ref" or (isa and kisa != isa):
            continue
        v = results.value(suite, k, arg, counter)
        if v:
            found.append((v, k))
        else:
            why = f"`{k}`: {results.why_missing(suite, k, arg)}"
    return max(found) if found else (None, why)


def target_rows(results, roofs, context):
    """Rows [target, measured, ratio, needed, result] for every target the issue lists, from this run."""
    rows = []
    dense_peers = Peers(results, context, "dense_fwd")
    softmax_peers = Peers(results, context, "softmax")
    fwd = "dense_fwd"
    s = TARGET_SIZE
    gf = "GFLOP/s"

    def add(what, value, base, base_what, minimum, missing, unit=gf):
        ratio = None if missing else value / base
        measured = "-" if missing else f"{fmt_rate(value)} / {fmt_rate(base)} {unit} ({base_what})"
        rows.append([what, measured, "-" if missing else f"{ratio:.3f}", f"≥ {minimum:g}",
                     judge(ratio, minimum, missing)])

    # 1. f32 dense vs the best f32 peer.
    value, kernel = best_halfmap(results, fwd, "f32", s, "flops_per_second")
    base, peer, why = dense_peers.best("f32", s, "flops_per_second")
    why = None if base else dense_peers.why_none("f32")
    add(f"f32 dense ≥ 0.85× the best f32 peer, {s}³: " + (f"`{kernel}`" if value else "best f32 kernel"),
        value, base, peer, 0.85, (None if value else kernel) or why)
    # 2. f16_f32acc dense vs halfmap's f32 dense, ISA by ISA.
    isas = [kernel_parts(k)[2] for k in results.kernels.get(fwd, []) if kernel_parts(k)[0] == "f16_f32acc"
            and kernel_parts(k)[2] not in (None, "ref")]
    for isa in isas or [None]:
        value, kernel = best_halfmap(results, fwd, "f16_f32acc", s, "flops_per_second", isa)
        base, base_kernel = best_halfmap(results, fwd, "f32", s, "flops_per_second", isa)
        add(f"f16_f32acc dense ≥ 0.9× halfmap's f32 dense, {s}³" + (f", {isa}" if isa else ""), value, base,
            f"`{base_kernel}`" if base else "", 0.9, (None if value else kernel) or (None if base else base_kernel))
    # 3. bf16_f32acc dense vs oneDNN's bf16 matmul.
    value, kernel = best_halfmap(results, fwd, "bf16_f32acc", s, "flops_per_second")
    onednn = "onednn_bf16" + PEER_SUFFIX
    base = results.value(fwd, onednn, s, "flops_per_second")
    why = None if base else (PEERS_HINT if dense_peers.not_built else "peer " + results.why_missing(fwd, onednn, s))
    add(f"bf16_f32acc dense ≥ 0.9× oneDNN bf16 matmul, {s}³: " + (f"`{kernel}`" if value else "bf16_f32acc kernel"),
        value, base, "onednn_bf16", 0.9, (None if value else kernel) or why)
    # 4. f16 per-operation dense vs XNNPACK's f16 fully-connected, ISA by ISA.
    xnn = "xnnpack_f16" + PEER_SUFFIX
    base = results.value(fwd, xnn, s, "flops_per_second")
    why = None if base else (PEERS_HINT if dense_peers.not_built else "peer " + results.why_missing(fwd, xnn, s))
    f16 = [k for k in results.kernels.get(fwd, []) if kernel_parts(k)[0] == "f16" and kernel_parts(k)[2] != "ref"]
    for kernel in f16 or ["f16 dense kernel"]:
        value = results.value(fwd, kernel, s, "flops_per_second")
        add(f"f16 per-op dense ≥ 1.5× XNNPACK f16 fully-connected, {s}³: `{kernel}`", value, base, "xnnpack_f16",
            1.5, (None if value else results.why_missing(fwd, kernel, s)) or why)
    # 5. Memory-bound kernels at DRAM vs the read roof.
    roof = roofs.read.get("dram")
    for op in ROOF_TARGET_OPS:
        suite = "reduce" if op in REDUCE_OPS else op
        for kernel in results.kernels.get(suite, []):
            if is_peer(kernel) or kernel_parts(kernel)[1] != op or kernel_parts(kernel)[2] == "ref":
                continue
            value = results.value(suite, kernel, "dram", "bytes_per_second")
            frac, missing = roof_fraction(results, roofs, suite, kernel, "dram")
            rows.append([f"{op} ≥ 0.85× the read roof at dram: `{kernel}`",
                         "-" if missing else f"{fmt_rate(value)} / {fmt_rate(roof)} GB/s",
                         "-" if missing else f"{frac:.3f}", f"≥ {ROOF_TARGET:g}", judge(frac, ROOF_TARGET, missing)])
    # 6. f32 softmax vs XNNPACK's f32 softmax, at each level.
    xnn = "xnnpack_f32" + PEER_SUFFIX
    kernels = [k for k in results.kernels.get("softmax", []) if kernel_parts(k)[0] == "f32"
               and kernel_parts(k)[2] != "ref"]
    for level in LEVELS:
        base = results.value("softmax", xnn, level, "elements_per_second")
        why = None if base else (PEERS_HINT if softmax_peers.not_built
                                 else "peer " + results.why_missing("softmax", xnn, level))
        for kernel in kernels or ["f32 softmax kernel"]:
            value = results.value("softmax", kernel, level, "elements_per_second")
            add(f"f32 softmax ≥ 1.0× XNNPACK f32 softmax, {level}: `{kernel}`", value, base, "xnnpack_f32", 1.0,
                (None if value else results.why_missing("softmax", kernel, level)) or why, "Gelem/s")
    return rows


# ---- the family tables ------------------------------------------------------------------------------------------

def not_run_lines(results, suite, kernels):
    lines = [f"- `{k}`: {results.skipped[(suite, k)]}" for k in kernels if (suite, k) in results.skipped
             and not is_peer(k) and not any(key[0] == suite and key[1] == k for key in results.cells)]
    return (["", "Not run on this machine:"] + lines) if lines else []


def memory_table(results, roofs, suite, kernels, peers=None):
    if peers is not None and peers.not_built:
        peers = None  # one sentence under the table says so, rather than a column of it
    """kernel x level: GB/s and roof fraction at each level; with `peers`, also the ratio of elements/s to the best
    peer of the same dtype (the same work: peers count the same elements, not necessarily the same bytes)."""
    levels = sorted(results.args.get(suite, []), key=level_key)
    head = ["kernel"]
    for lv in levels:
        head += [f"{lv} GB/s", f"{lv} roof"] + ([f"{lv} ÷ peer"] if peers else [])
    rows = []
    for k in kernels:
        if not any((suite, k, lv) in results.cells for lv in levels):
            continue
        row = [f"`{k}`"]
        for lv in levels:
            frac, _ = roof_fraction(results, roofs, suite, k, lv)
            row += [fmt_rate(results.value(suite, k, lv, "bytes_per_second")), fmt_frac(frac)]
            if peers:
                if is_peer(k):
                    row.append("peer")
                    continue
                value = results.value(suite, k, lv, "elements_per_second")
                base, name, why = peers.best(dtype_family(k), lv, "elements_per_second")
                row.append("-" if value is None else f"{value / base:.2f} ({name})" if base else why)
        rows.append(row)
    return table(head, rows)


def dense_tables(results, roofs, suite, context):
    sizes = sorted(results.args.get(suite, []), key=size_key)
    kernels = results.kernels.get(suite, [])
    ran = [k for k in kernels if any((suite, k, s) in results.cells for s in sizes)]
    out = ["GFLOP/s at M = N = K =", ""]
    out += table(["kernel"] + sizes, [[f"`{k}`"] + [fmt_rate(results.value(suite, k, s, "flops_per_second"))
                                                     for s in sizes] for k in ran])
    out += ["", "Fraction of the FMA roof of the kernel's ISA and arithmetic (peers: the best roof of their "
            "arithmetic here):", ""]
    out += table(["kernel", "roof"] + sizes,
                 [[f"`{k}`", roof_name(roofs, k)] + [fmt_frac(roof_fraction(results, roofs, suite, k, s)[0])
                                                     for s in sizes] for k in ran],
                 ["---", "---"] + ["---:"] * len(sizes))
    peers = Peers(results, context, suite) if suite in EXPECTED_PEERS else None
    if peers is not None and peers.not_built:
        out += ["", f"Ratio to the best peer: {PEERS_HINT}."]
    elif peers is not None:
        out += ["", "GFLOP/s / the fastest peer of the same storage type at that size (f32 kernels vs f32 peers, "
                "f16_f32acc and f16 vs f16 peers, bf16 vs bf16 peers); the peer in brackets:", ""]
        rows = []
        for k in ran:
            if is_peer(k):
                continue
            row = [f"`{k}`"]
            for s in sizes:
                value = results.value(suite, k, s, "flops_per_second")
                base, name, why = peers.best(dtype_family(k), s, "flops_per_second")
                row.append("-" if value is None else f"{value / base:.2f} ({name})" if base else why)
            rows.append(row)
        out += table(["kernel"] + sizes, rows)
        out += ["", "Peers:", ""] + [f"- `{name}`: {text}" for name, text in peers.status()]
    else:
        out += ["", "No peer library is benchmarked for this operation: no peer."]
    out += not_run_lines(results, suite, kernels)
    return out


def roof_name(roofs, kernel):
    if is_peer(kernel):
        isa = roofs.best_fma(dtype_family(kernel))[1]
        return f"fma {isa}" if isa else "-"
    isa = compute_roof_isa(kernel)
    return f"fma {isa}" if isa else "none (ref)"


# ---- the report -------------------------------------------------------------------------------------------------

def render(data, info, machine, source, charts=()):
    context = data.get("context", {}) or {}
    benchmarks = data.get("benchmarks", []) or []
    results = Results(benchmarks)
    roofs = Roofs(context, results)
    title = machine or context.get("cpu_model", "this machine")

    out = [f"# Benchmarks on {title}", ""]
    out.append("Generated by `bash tools/main.sh` (`halfmap_bench`, then `tools/bench_report.py`): every kernel of "
               "halfmap's registry, the peer libraries where built, and the roofs of this core, from one run. "
               "Higher is better. Memory-bound kernels run at three sizes (l1, l2, dram: the same bytes of input "
               "per call for every kernel, GB/s counts bytes read); dense layers are square, M = N = K, "
               "single-threaded, GFLOP/s counting 2·M·N·K per forward call and 4·M·N·K per backward call. "
               "\"-\": not run there.")
    out += ["", "## Run", ""]
    out += header_rows(context, info, machine, source, benchmarks)

    # Roofs.
    out += ["", "## Roofs", ""]
    out.append("What one core of this machine can read, copy and compute. \"startup\" is measured once before the "
               "benchmarks (`halfmap_bench` puts it in the JSON context) and is what every roof fraction below "
               "divides by; the `roof/*` benchmarks measure the same loops again during the run, as a check on how "
               "steady the machine was.")
    out.append("")
    rows = []
    loads = context.get("roof_read_loads")
    read_what = "the level's f32 input summed as 64-bit integers" + (f", {loads}" if loads else "")
    for lv in sorted(set(LEVELS) | set(roofs.read), key=level_key):
        start = context.get(f"roof_read_{lv}_bytes_per_second")
        rows.append([f"read, {lv}", fmt_unit(number(start), "GB/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "read", lv, "bytes_per_second"), "GB/s"),
                     read_what])
    rows.append(["copy, dram", "-", fmt_unit(results.value("roof", "copy", "dram", "bytes_per_second"), "GB/s"),
                 "memcpy of 256 MiB, bytes read + written (glibc may stream the stores)"])
    fma_isas = [a for a in results.args.get("roof", []) if ("roof", "fma", a) in results.cells] + \
        [i for i in roofs.fma if ("roof", "fma", i) not in results.cells]
    for isa in dict.fromkeys(fma_isas):
        start = context.get(f"roof_fma_{isa}_flops_per_second")
        rows.append([f"fma, {isa}", fmt_unit(number(start), "GFLOP/s") if number(start) else "not measured",
                     fmt_unit(results.value("roof", "fma", isa, "flops_per_second"), "GFLOP/s"),
                     FMA_WHAT.get(isa, "")])
    out += table(["roof", "startup", "benchmark", "what"], rows, ["---", "---:", "---:", "---"])
    skipped_roofs = [f"- `roof/{k}/{a}`: {msg}" for (suite, k, a), msg in results.skipped_at.items()
                     if suite == "roof"]
    if skipped_roofs:
        out += ["", "Not measured here:"] + skipped_roofs
    out += ["", "**Roof fraction**, one definition for every table: a kernel's rate / the startup roof that bounds "
            "it. Memory-bound kernels (reductions, losses, softmax, xent): bytes read per second / the read roof "
            "of the same level (bytes written are not counted: softmax and xent write as many bytes as they read, "
            "so memory alone keeps them well below 1 at dram). Dense kernels: GFLOP/s / the FMA roof of the "
            "kernel's ISA and arithmetic: the f32 FMA of the ISA for f32, f16_f32acc and the f16 kernels of avx2 and avx512 "
            "(F16C: they compute in f32 and round to fp16 per operation, so f32 FMA is their honest compute "
            "roof); vdpbf16ps for bf16_f32acc on avx512bf16; the fp16 FMA for f16 on avx512fp16 and neonfp16. "
            "Peers, whose ISA is unknown, against the best roof of their arithmetic on this machine. `__ref` "
            "kernels have no FMA roof. FLOPs are counted the same way in roofs and kernels: an FMA is 2 per lane, "
            "vdpbf16ps 4 per f32 lane (2 per bf16 product), as in 2·M·N·K."]
    if roofs.any_from_benchmarks():
        out += ["", "This JSON holds no startup roofs for some of the roofs above (an older `halfmap_bench`): "
                "their fractions divide by the `roof/*` benchmark of the same run instead."]
    if not roofs.read and not roofs.fma:
        out += ["", "No roof was measured in this run: roof fractions are \"-\"."]
    elif not roofs.fma:
        out += ["", "No FMA roof was measured in this run: the dense kernels' roof fractions are \"-\"."]

    # Targets.
    out += ["", "## Targets", ""]
    out.append("The speeds the project tracks (Zen 4, single core; ratios from this run). \"missed by\": how far "
               "the ratio falls short of the target, absolute and as a share of it.")
    out.append("")
    trows = target_rows(results, roofs, context)
    met = sum(r[-1] == "met" for r in trows)
    missed = sum(r[-1].startswith("**missed**") for r in trows)
    out += [f"{met} met, {missed} missed, {len(trows) - met - missed} not measured.", ""]
    out += table(["target", "measured", "ratio", "needed", "result"], trows, ["---", "---", "---:", "---", "---"])

    # Families.
    out += ["", "## Reductions", ""]
    out.append("GB/s of input read, and its fraction of the read roof of the level. No peer library is benchmarked "
               "for the reductions: no peer.")
    found = False
    for op in REDUCE_OPS:
        kernels = [k for k in results.kernels.get("reduce", []) if kernel_parts(k)[1] == op]
        if not kernels:
            continue
        found = True
        out += ["", f"### {op}", ""] + memory_table(results, roofs, "reduce", kernels)
        out += not_run_lines(results, "reduce", kernels)
    if not found:
        out += ["", "No reduce/ benchmarks in this run."]

    out += ["", "## Dense layers", ""]
    found = False
    for op, what in (("dense_fwd", "Y = X·W + b"), ("dense_bwd", "dX = dY·Wᵀ, dW = Xᵀ·dY, db")):
        if not results.kernels.get(op):
            continue
        found = True
        out += [f"### {op}: {what}", ""] + dense_tables(results, roofs, op, context) + [""]
    if not found:
        out += ["No dense_fwd/ or dense_bwd/ benchmarks in this run.", ""]

    out += ["## Losses, softmax and cross-entropy", ""]
    out.append("GB/s of input read (mse: p and y; softmax: x; xent: logits and labels), and its fraction of the "
               "read roof of the level. softmax also compares elements per second with the fastest peer of the "
               "same storage type (f32 with XNNPACK's f32 softmax); the other operations have no peer.")
    found = False
    for op in NN_OPS:
        kernels = results.kernels.get(op, [])
        if not kernels:
            continue
        found = True
        peers = Peers(results, context, op) if op in EXPECTED_PEERS else None
        out += ["", f"### {op}", ""] + memory_table(results, roofs, op, kernels, peers)
        if peers and peers.not_built:
            out += ["", f"Ratio to the best peer: {PEERS_HINT}."]
        elif peers:
            out += ["", "Peers:", ""] + [f"- `{name}`: {text}" for name, text in peers.status()]
        out += not_run_lines(results, op, kernels)
    if not found:
        out += ["", "No mse/, softmax/, softmax_naive/ or xent/ benchmarks in this run."]

    if charts:
        out += ["", "## Charts", ""]
        for path, what in charts:
            out += [f"![{what}]({path})", ""]
    if results.unreadable:
        out += ["", f"Benchmarks whose names could not be read (not in the tables): {', '.join(results.unreadable)}."]
    return "\n".join(out).rstrip() + "\n"


FMA_WHAT = {
    "avx2": "vfmadd*ps ymm, f32, 12 chains",
    "avx512": "vfmadd*ps zmm, f32, 16 chains",
    "avx512bf16": "vdpbf16ps zmm, bf16 pairs into f32, 16 chains",
    "avx512fp16": "vfmadd*ph zmm, fp16, 16 chains",
    "neon": "fmla .4s, f32, 16 chains",
    "neonfp16": "fmla .8h, fp16, 16 chains",
}


# ---- charts -----------------------------------------------------------------------------------------------------

MODE_COLOURS = {"f32": "tab:blue", "f16_f32acc": "tab:green", "f16": "tab:orange", "bf16_f32acc": "tab:purple"}
ISA_MARKERS = {"avx2": "s", "avx512": "o", "avx512bf16": "D", "avx512fp16": "^", "neon": "s", "neonfp16": "^"}
PEER_COLOURS = {"openblas": "tab:brown", "onednn": "tab:red", "xnnpack": "tab:pink", "eigen": "tab:olive"}
DTYPE_MARKERS = {"f32": "x", "f16": "+", "bf16": "*"}


def style(kernel, op):
    """Line style of a kernel in the charts: colour by arithmetic (mode), marker by ISA, avx2 and neon dashed;
    peers dotted, coloured by library, marker by storage type."""
    if is_peer(kernel):
        lib = peer_label(kernel).rsplit("_", 1)[0]
        return {"color": PEER_COLOURS.get(lib, "tab:gray"), "marker": DTYPE_MARKERS.get(dtype_family(kernel), "x"),
                "ls": ":", "label": peer_label(kernel) + " (peer)", "markersize": 9}
    mode, _, isa = kernel_parts(kernel)
    return {"color": MODE_COLOURS.get(mode, "tab:gray"), "marker": ISA_MARKERS.get(isa, "o"),
            "ls": "--" if isa in ("avx2", "neon") else "-", "label": f"{mode} {isa}"}


def write_charts(data, directory):
    """Writes the three PNGs into directory; returns [(file name, title)]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    context = data.get("context", {}) or {}
    results = Results(data.get("benchmarks", []) or [])
    roofs = Roofs(context, results)
    written = []
    plain = FuncFormatter(lambda v, _: f"{v:g}")

    def save(fig, name, title):
        path = os.path.join(directory, name)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=directory)
        os.close(fd)
        try:
            fig.savefig(tmp, dpi=110, bbox_inches="tight")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            plt.close(fig)
        written.append((name, title))

    def legend(fig, axes, **where):
        handles = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        if handles:
            fig.legend(handles.values(), handles.keys(), fontsize=8, **where)

    def shown(kernel, op):
        """Kernels drawn in op's panel: its own non-ref kernels and the peers of its suite."""
        return is_peer(kernel) or (kernel_parts(kernel)[1] == op and kernel_parts(kernel)[2] != "ref")

    def memory_chart(ops, name, title):
        panels = [(op, "reduce" if op in REDUCE_OPS else op) for op in ops]
        panels = [(op, suite) for op, suite in panels if any(shown(k, op) for k in results.kernels.get(suite, []))]
        if not panels:
            return
        cols = 2
        rows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(13, 4.2 * rows), squeeze=False)
        xs = list(range(len(LEVELS)))
        for ax, (op, suite) in zip(axes.flat, panels):
            roof = [(x, roofs.read.get(lv)) for x, lv in zip(xs, LEVELS) if roofs.read.get(lv)]
            if roof:
                ax.plot(*zip(*[(x, r / 1e9) for x, r in roof]), color="k", ls="--", lw=2.2, marker="_",
                        markersize=18, label="read roof")
            for k in results.kernels.get(suite, []):
                if not shown(k, op):
                    continue
                pts = [(x, results.value(suite, k, lv, "bytes_per_second")) for x, lv in zip(xs, LEVELS)]
                pts = [(x, v / 1e9) for x, v in pts if v]
                if pts:
                    ax.plot(*zip(*pts), **style(k, op))
            ax.set_title(op)
            ax.set_xticks(xs, list(LEVELS))
            ax.set_xlim(-0.2, len(LEVELS) - 0.8)
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.tick_params(axis="y", which="both", labelsize=8)
            ax.set_ylabel("GB/s read (log)")
            ax.grid(True, which="both", alpha=0.3)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        legend(fig, axes, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(f"{title}: GB/s read at each size level, single core, with the read roof; colour: arithmetic, "
                     f"marker: ISA; `__ref` left out")
        fig.tight_layout()
        save(fig, name, title)

    memory_chart(REDUCE_OPS, "bench_reductions.png", "Reductions")
    memory_chart(NN_OPS, "bench_nn.png", "Losses, softmax and cross-entropy")

    panels = [op for op in DENSE_OPS if any(shown(k, op) for k in results.kernels.get(op, []))]
    if panels:
        # Roofs within 3 % of each other share one line and label (avx2 and avx512 on Zen 4).
        lines = []
        for isa, roof in sorted(roofs.fma.items(), key=lambda x: -x[1]):
            if lines and abs(lines[-1][1] - roof) < 0.03 * roof:
                lines[-1][0].append(isa)
            else:
                lines.append(([isa], roof))
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels) + 1, 5.5), squeeze=False)
        for ax, op in zip(axes.flat, panels):
            sizes = [s for s in sorted(results.args.get(op, []), key=size_key) if str(s).isdigit()]
            for isas, roof in lines:
                ax.axhline(roof / 1e9, color="k", lw=1.2, ls="--", alpha=0.6)
                ax.text(1.0, roof / 1e9, " fma " + ", ".join(isas), transform=ax.get_yaxis_transform(),
                        va="center", fontsize=8)
            for k in results.kernels.get(op, []):
                if not shown(k, op):
                    continue
                pts = [(int(s), results.value(op, k, s, "flops_per_second")) for s in sizes]
                pts = [(s, v / 1e9) for s, v in pts if v]
                if pts:
                    ax.plot(*zip(*pts), **style(k, op))
            ax.set_xscale("log", base=2)
            if sizes:
                ax.set_xticks([int(s) for s in sizes], sizes)
                ax.minorticks_off()
            ax.set_xlabel("M = N = K")
            ax.set_ylabel("GFLOP/s")
            ax.set_ylim(bottom=0)
            ax.set_title(op)
            ax.grid(True, alpha=0.3)
        legend(fig, axes, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4)
        fig.suptitle("Dense layers: GFLOP/s by size, single core, with the FMA roofs (dashed black) and peers "
                     "(dotted); colour: arithmetic, marker: ISA; `__ref` left out")
        fig.tight_layout()
        save(fig, "bench_dense.png", "Dense layers")
    return written


# ---- main -------------------------------------------------------------------------------------------------------

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
    parser.add_argument("--out", required=True, help="the Markdown report to write (bench.md)")
    parser.add_argument("--charts", help="folder to write bench_<family>.png into (needs matplotlib)")
    parser.add_argument("--info", help="output of `halfmap info --json`, for what the context lacks")
    parser.add_argument("--machine", default="", help="the results/ folder name of this machine")
    args = parser.parse_args(argv)

    def load(path, what):
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"bench_report.py: cannot read the {what} {path}: {e}")

    data = load(args.bench_json, "benchmark JSON")
    info = load(args.info, "info JSON") if args.info else {}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    charts, status = [], 0
    if args.charts:
        os.makedirs(args.charts, exist_ok=True)
        try:
            charts = [(os.path.relpath(os.path.join(args.charts, name), out_dir), title)
                      for name, title in write_charts(data, args.charts)]
        except ImportError as e:
            # The report is still worth writing; the caller learns from the exit code.
            print(f"bench_report.py: charts not written ({e}): run Debian's /usr/bin/python3 with "
                  f"python3-matplotlib (tools/setup.sh installs it)", file=sys.stderr)
            status = 1
    source = os.path.relpath(os.path.abspath(args.bench_json), out_dir)
    write_atomic(args.out, render(data, info, args.machine, source, charts))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
