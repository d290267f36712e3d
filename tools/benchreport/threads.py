"""The dense layers on several threads (halfmap_bench's dense_fwd_threads/<kernel>/<threads> and
dense_bwd_threads/<kernel>/<threads> at 1024³, and the peers' dense_fwd_threads/<lib>_<dtype>_dense_fwd__peer/
<threads>): GFLOP/s at each thread count, the scaling against linear, the cores the process kept busy, the ratio to
the best peer at the same count; and the target of issue 14: 1 -> 2 threads >= 0.9x linear (GFLOP/s on 2 threads /
twice GFLOP/s on 1), judged on the medians."""

from .markdown import fmt_rate, fmt_spread, ratio_spread, size_key, table
from .peers import Peers
from .results import is_peer

SUITES = (("dense_fwd_threads", "dense forward"), ("dense_bwd_threads", "dense backward"))
SCALING_TARGET = 0.9
FLOPS = "flops_per_second"


def thread_counts(results, suite):
    return sorted((a for a in results.args.get(suite, []) if str(a).isdigit()), key=size_key)


def scaling(results, suite, kernel, threads):
    """GFLOP/s on `threads` / (threads x GFLOP/s on 1), or None."""
    one, many = results.value(suite, kernel, "1", FLOPS), results.value(suite, kernel, str(threads), FLOPS)
    return many / (int(threads) * one) if one and many else None


def cores_busy(results, suite, kernel, threads):
    """The process's CPU time / wall time of the cell (halfmap_bench measures process CPU time there): how many
    cores were busy, counting the team's brief spin-waits as busy."""
    cell = results.cells.get((suite, kernel, str(threads)), {})
    cpu, real = cell.get("cpu_time"), cell.get("real_time")
    return cpu / real if cpu and real else None


def cpu_ratio(results, suite, kernel, threads):
    """The process's CPU time per call on 1 thread / on `threads`: 1.00 when the team spent no more CPU than one
    thread did (no extra work, little spinning), whatever else ran on the machine; the scaling a quiet machine
    would show is at most this (less any imbalance between the members)."""
    one = results.cells.get((suite, kernel, "1"), {}).get("cpu_time")
    many = results.cells.get((suite, kernel, str(threads)), {}).get("cpu_time")
    return one / many if one and many else None


def target_rows(results):
    """[target, measured, ratio, needed, result] for every halfmap kernel of the two suites: 1 -> 2 threads."""
    rows = []
    for suite, what in SUITES:
        counts = thread_counts(results, suite)
        for kernel in [k for k in results.kernels.get(suite, []) if not is_peer(k)]:
            label = f"{what} 1 → 2 threads ≥ {SCALING_TARGET:g}× linear, 1024³: `{kernel}`"
            one, two = results.value(suite, kernel, "1", FLOPS), results.value(suite, kernel, "2", FLOPS)
            if "2" not in counts:
                rows.append([label, "-", "-", f"≥ {SCALING_TARGET:g}", "not measured: no 2-thread run (one CPU, or "
                             "--halfmap_threads=1)"])
                continue
            if not one or not two:
                why = results.why_missing(suite, kernel, "1" if not one else "2")
                rows.append([label, "-", "-", f"≥ {SCALING_TARGET:g}", f"not measured: {why}"])
                continue
            ratio = two / (2 * one)
            one_sp, two_sp = results.spread(suite, kernel, "1", FLOPS), results.spread(suite, kernel, "2", FLOPS)
            r_sp = ratio_spread(two, two_sp, 2 * one, (2 * one_sp[0], 2 * one_sp[1], one_sp[2]) if one_sp else None)
            measured = f"{fmt_rate(two)}{fmt_spread(two_sp)} / 2 × {fmt_rate(one)}{fmt_spread(one_sp)} GFLOP/s"
            shown = f"{ratio:.3f}" + (f" [{r_sp[0]:.2f}–{r_sp[1]:.2f}]" if r_sp else "")
            rows.append([label, measured, shown, f"≥ {SCALING_TARGET:g}", judge(ratio)])
    return rows


def judge(ratio):
    if ratio >= SCALING_TARGET:
        return "met"
    short = SCALING_TARGET - ratio
    return f"**missed** by {short:.2f} ({short / SCALING_TARGET:.0%} short)"


def suite_table(results, context, suite):
    counts = thread_counts(results, suite)
    kernels = [k for k in results.kernels.get(suite, []) if any((suite, k, t) in results.cells for t in counts)]
    if not counts or not kernels:
        return []
    top = counts[-1]
    peers = Peers(results, context, suite)
    head = ["kernel"] + [f"{t} thr" for t in counts] + [f"scaling at {top}", f"cores busy at {top}",
                                                        f"CPU 1 thr ÷ CPU at {top}", f"÷ best peer at {top}"]
    rows = []
    for k in kernels:
        s = scaling(results, suite, k, top)
        busy = cores_busy(results, suite, k, top)
        work = cpu_ratio(results, suite, k, top)
        ratio = "peer" if is_peer(k) else peers.ratio(k, top, FLOPS) if peers.present else "no peer"
        rows.append([f"`{k}`"] + [fmt_rate(results.value(suite, k, t, FLOPS)) for t in counts]
                    + ["-" if s is None else f"{s:.2f}", "-" if busy is None else f"{busy:.2f}",
                       "-" if work is None else f"{work:.2f}", ratio])
    return table(head, rows)


def section(results, context):
    """The "Threads" section of bench.md (empty when the run has no dense_*_threads benchmarks)."""
    if not any(results.kernels.get(suite) for suite, _ in SUITES):
        return []
    out = ["", "## Dense layers on several threads", ""]
    out.append("GFLOP/s at M = N = K = 1024 with `DenseArgs::threads` = 1, 2, 4, ... up to `--halfmap_threads` "
               "(default: every CPU the process may run on), timed by wall clock; the peers (oneDNN, OpenBLAS) at "
               "the same thread counts. \"scaling\": GFLOP/s / (threads × GFLOP/s on 1 thread), 1.00 being "
               "linear. \"cores busy\": the process's CPU time / wall time (a team's members spin briefly while "
               "they wait, so it counts waiting as busy; well below the thread count means other work had the "
               "cores). \"CPU 1 thr ÷ CPU\": the process's CPU time per call on 1 thread over that on the most threads, "
               "which other work on the machine does not change: 1.00 means the team did no more work than one "
               "thread, and the scaling a quiet machine shows is at most that (less the members' imbalance). "
               "\"÷ best peer\": GFLOP/s / the fastest peer of the same storage type at the same thread "
               "count. A multi-threaded result is bit-identical to the single-threaded one (the same tiles, each "
               "in its own k order; tests/dense_threads_test.cpp).")
    for suite, what in SUITES:
        lines = suite_table(results, context, suite)
        if lines:
            out += ["", f"### {what} (`{suite}/`)", ""] + lines
    return out
