#!/usr/bin/env python3
"""results/bench_compare.md: every machine's benchmarks side by side, so that "how do the fp16 paths compare across
ISAs" is answered by one page.

For every results/<machine>/ folder with a bench.json (tools/main.sh's, joined with its bench_peers_<isa>.json as
bench.md is), per family (reductions, dense forward and backward, the losses and softmax), kernel (named without
its ISA: op and mode) and size, one column per machine: the rate of each of that machine's halfmap paths for it,
its fraction of the roof that bounds it on that machine, and for the dense layers its ratio to the best peer of the
same ISA and arithmetic on that machine. Rates are medians of the run's repetitions; only the ratios carry across
machines (results/README.md), the rates say what each core did. Folders without a
bench.json (arm64 under qemu, whose timings mean nothing) are listed as "numerics only".

    python3 tools/bench_compare.py results --out results/bench_compare.md [--first <machine>]
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_report  # noqa: E402
from benchreport.markdown import fmt_frac, fmt_rate, level_key, size_key, table  # noqa: E402
from benchreport.peers import Peers  # noqa: E402
from benchreport.results import Results, is_peer  # noqa: E402
from benchreport.roofs import Roofs, roof_fraction  # noqa: E402

FAMILIES = [
    ("Reductions (GB/s read)", ("reduce",), "bytes_per_second"),
    ("Dense layers, forward (GFLOP/s, single thread)", ("dense_fwd",), "flops_per_second"),
    ("Dense layers, backward (GFLOP/s, single thread)", ("dense_bwd",), "flops_per_second"),
    ("Losses and softmax (GB/s read)", ("mse", "softmax", "xent"), "bytes_per_second"),
]
# The sizes shown: every level of the memory-bound kernels; the dense sizes from 256³, where the targets start.
DENSE_SIZES = ("256", "512", "1024")


class Machine:
    """One results/<machine>/ folder's benchmark run."""

    def __init__(self, folder):
        self.name = os.path.basename(os.path.normpath(folder))
        data = bench_report.load_run(os.path.join(folder, "bench.json"), "benchmark JSON")
        for extra in sorted(os.listdir(folder)):
            if re.match(r"^bench_peers_\w+\.json$", extra):
                bench_report.merge(data, bench_report.load_run(os.path.join(folder, extra), "peers' benchmark JSON"),
                                   extra)
        info_path = os.path.join(folder, "info.json")
        info = bench_report.load(info_path, "halfmap info --json") if os.path.exists(info_path) else {}
        self.context = data.get("context", {}) or {}
        self.results = Results(data.get("benchmarks", []) or [], info)
        self.roofs = Roofs(self.context, self.results)
        self.peers = {suite: Peers(self.results, self.context, suite) for suite in self.results.ops.dense}

    def kernels(self, suite):
        return [k for k in self.results.kernels.get(suite, []) if not is_peer(k)]

    def cell(self, suite, kernel, arg, counter):
        """'rate · fraction [· ratio to the same-ISA peer]' of one kernel at arg, or None where not measured."""
        value = self.results.value(suite, kernel, arg, counter)
        if value is None:
            return None
        frac, _ = roof_fraction(self.results, self.roofs, suite, kernel, arg)
        text = f"{fmt_rate(value)} · {fmt_frac(frac)}"
        if suite in self.peers:
            pair = self.peers[suite].same_isa_pair(kernel, arg, counter)  # both rates from one run where one has both
            if pair.base:
                text += f" · {pair.value / pair.base:.2f}× {pair.peer}"
        return text


def op_and_mode(kernel):
    """'f16_f32acc_sum__avx512' -> ('f16_f32acc_sum', 'avx512')."""
    name, _, isa = kernel.partition("__")
    return name, isa


def family_section(title, suites, counter, machines):
    out = ["", f"## {title}", ""]
    dense = {op for m in machines for op in m.results.ops.dense}
    for suite in suites:
        args = set()
        for m in machines:
            args.update(m.results.args.get(suite, []))
        args = [a for a in args if suite not in dense or a in DENSE_SIZES]
        args.sort(key=size_key if suite in dense else level_key)
        names = []
        for m in machines:
            for k in m.kernels(suite):
                if op_and_mode(k)[0] not in names:
                    names.append(op_and_mode(k)[0])
        rows = []
        for name in names:
            for arg in args:
                row = [f"`{name}`", arg]
                for m in machines:
                    cells = []
                    for k in m.kernels(suite):
                        if op_and_mode(k)[0] == name and op_and_mode(k)[1] != "ref":
                            text = m.cell(suite, k, arg, counter)
                            if text:
                                cells.append(f"{op_and_mode(k)[1]} {text}")
                    row.append("<br>".join(cells) if cells else "-")
                if any(c != "-" for c in row[2:]):
                    rows.append(row)
        if len(suites) > 1:
            out += [f"### {suite}", ""]
        out += table(["kernel", "size"] + [f"`{m.name}`" for m in machines], rows,
                     ["---", "---"] + ["---"] * len(machines))
        out.append("")
    return out


def render(machines, numerics_only):
    out = ["# Benchmarks across machines", "",
           "Written by `tools/main.sh` (`tools/bench_compare.py`) from every `results/<machine>/bench.json`: per "
           "kernel (its op and mode) and size, one column per machine, each halfmap path of that machine as "
           "`isa rate · roof fraction`, and for the dense layers `· ratio×` the best peer of the same ISA and "
           "arithmetic on that machine (its name after the ratio). Rates are the medians of each run's "
           "repetitions, roofs that machine's own (its `bench.md` says how each was measured and lists any roof "
           "defect); only ratios measured within one run compare across machines. `__ref` paths are left out.", ""]
    out += table(["machine", "CPU", "run"], [[f"`{m.name}`", str(m.context.get("cpu_model") or m.context.get(
        "host_name") or "-"), str(m.context.get("date", "-"))] for m in machines], ["---", "---", "---"])
    if numerics_only:
        out += ["", "Numerics only (no timings: emulated, e.g. arm64 under qemu, whose speeds mean nothing): " +
                ", ".join(f"`{n}`" for n in numerics_only) + "."]
    for title, suites, counter in FAMILIES:
        out += family_section(title, suites, counter, machines)
    return "\n".join(out).rstrip() + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="the results/ folder")
    parser.add_argument("--out", required=True, help="the Markdown file to write (results/bench_compare.md)")
    parser.add_argument("--first", help="the machine to show first (the one that just ran)")
    args = parser.parse_args(argv)
    folders = sorted(d for d in os.listdir(args.results) if os.path.isdir(os.path.join(args.results, d)))
    with_bench = [d for d in folders if os.path.exists(os.path.join(args.results, d, "bench.json"))]
    numerics_only = [d for d in folders if d not in with_bench
                     and os.path.exists(os.path.join(args.results, d, "thresholds.json"))]
    if args.first in with_bench:
        with_bench.remove(args.first)
        with_bench.insert(0, args.first)
    if not with_bench:
        print(f"bench_compare.py: no results/<machine>/bench.json under {args.results}", file=sys.stderr)
        return 2
    machines = [Machine(os.path.join(args.results, d)) for d in with_bench]
    bench_report.write_atomic(args.out, render(machines, numerics_only))
    print(f"bench_compare.py: wrote {args.out} ({len(machines)} machines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
