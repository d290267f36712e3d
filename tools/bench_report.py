#!/usr/bin/env python3
"""Turns halfmap_bench's results (Google Benchmark JSON) into one report, bench.md, and one chart per kernel family.

    python3 tools/bench_report.py BENCH_JSON [--peers-json JSON]... --out BENCH_MD [--charts DIR] [--info INFO_JSON]
        [--machine SLUG] [--diagnose DIAGNOSE_BENCH_JSON]

bench.md: the run, the roofs, the project's performance targets (met or missed by how much), and per family
(reductions; dense forward and backward; losses, softmax and cross-entropy) each kernel's throughput, fraction of
the roof and ratio to the best peer doing the same work (tools/benchreport/render.py says what is where); with
--diagnose, the wall time and peak memory of `halfmap diagnose` at growing sizes (tools/diagnose_bench.py's JSON)
and its targets (without it they are "not measured").

--charts DIR writes DIR/bench_reductions.png, DIR/bench_dense.png and DIR/bench_nn.png (matplotlib, imported only
then): the memory-bound kernels' GB/s at l1, l2 and dram with the read roof of each level, and the dense kernels'
GFLOP/s from 64 to 1024 with the FMA roofs and the peers.

What each kernel is (op, mode, ISA, storage) comes from --info (`halfmap info --json`) and from the benchmark
labels halfmap_bench writes, and which roof a kernel is compared with from the labels (tools/benchreport/
results.py, roofs.py); nothing is parsed out of a kernel's name. Peers (other libraries, benchmarks
<op>/<lib>_<dtype>_<op>__peer/<arg> of dense_fwd, softmax and layernorm, named like the sweep's peer paths; the
names of older JSON, <lib>_<dtype>__peer, are read as these: benchreport/results.py, canonical_kernel) may be
present, skipped (shown with their message) or absent (not built). An unreadable name, a missing counter or an
unknown size is reported or shown as "-", never an error.

--peers-json adds the benchmarks of another halfmap_bench run (tools/main.sh's bench_peers_<isa>.json: oneDNN and
OpenBLAS with their ISA capped, which only a process of their own can do) to BENCH_JSON's, and the context entries
BENCH_JSON lacks (that run's peer_<lib>_<isa> and peer_check/... lines); its peers' names never collide with the
main run's (<lib>_<isa>_<dtype>_<op>__peer). The halfmap kernels such a run times beside its peers (main.sh's
capped runs time the dense kernels of their ISA again) do not replace the main run's cells: a ratio of a kernel to
a peer takes both numbers from one run wherever a run timed both, so that it compares the same moment of a shared
machine.

"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchreport.render import render  # noqa: E402  (re-exported: tests call bench_report.render)
from benchreport.results import RUN_KEY  # noqa: E402


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


def load(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench_report.py: cannot read the {what} {path}: {e}")


def in_registration_order(data):
    """data (a halfmap_bench JSON) with its benchmarks in the order they were registered (in place). Under
    --benchmark_enable_random_interleaving Google Benchmark writes each benchmark when its last repetition ends,
    so the file's order is shuffled; every entry's family_index and per_family_instance_index give the registry's
    order back (a stable sort: a benchmark's repetitions and aggregates keep theirs). A file whose entries lack
    them is left as it is."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    keys = ("family_index", "per_family_instance_index")
    if isinstance(benchmarks, list) and all(isinstance(b, dict) and all(isinstance(b.get(k), int) for k in keys)
                                            for b in benchmarks):
        benchmarks.sort(key=lambda b: (b["family_index"], b["per_family_instance_index"]))
    return data


def load_run(path, what):
    """A halfmap_bench JSON file, its benchmarks in registration order."""
    return in_registration_order(load(path, what))


def merge(data, extra, run="extra"):
    """data with extra's benchmarks appended, each marked as run `run` (a name: tools/main.sh's runs pass the file
    name), and extra's context entries that data lacks (in place). extra's peers and roofs join the main run's
    cells; a halfmap kernel extra timed again stays apart, for ratios to the peers of its own run
    (benchreport/results.py, RUN_KEY)."""
    if not isinstance(data, dict) or not isinstance(extra, dict):
        return data
    added = [b for b in extra.get("benchmarks", []) if isinstance(b, dict)]
    for b in added:
        b[RUN_KEY] = run
    data.setdefault("benchmarks", []).extend(added)
    context = data.setdefault("context", {})
    for key, value in (extra.get("context") or {}).items():
        context.setdefault(key, value)
    return data


def charts(data, info, directory, out_dir):
    """([(path relative to out_dir, title)], exit status): the charts written, or none and 1 without matplotlib."""
    os.makedirs(directory, exist_ok=True)
    try:
        from benchreport.charts import write_charts
        return [(os.path.relpath(os.path.join(directory, name), out_dir), title)
                for name, title in write_charts(data, info, directory)], 0
    except ImportError as e:
        # The report is still worth writing; the caller learns from the exit code.
        print(f"bench_report.py: charts not written ({e}): run Debian's /usr/bin/python3 with "
              f"python3-matplotlib (tools/setup.sh installs it)", file=sys.stderr)
        return [], 1


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json", help="Google Benchmark JSON (--benchmark_out_format=json)")
    parser.add_argument("--peers-json", action="append", default=[],
                        help="another run's Google Benchmark JSON whose benchmarks join BENCH_JSON's (repeatable)")
    parser.add_argument("--out", required=True, help="the Markdown report to write (bench.md)")
    parser.add_argument("--charts", help="folder to write bench_<family>.png into (needs matplotlib)")
    parser.add_argument("--info", help="output of `halfmap info --json`, for what the context lacks")
    parser.add_argument("--machine", default="", help="the results/ folder name of this machine")
    parser.add_argument("--diagnose", help="tools/diagnose_bench.py's JSON (diagnose_bench.json), if it ran")
    args = parser.parse_args(argv)

    data = load_run(args.bench_json, "benchmark JSON")
    for path in args.peers_json:
        merge(data, load_run(path, "peers' benchmark JSON"), os.path.basename(path))
    info = load(args.info, "info JSON") if args.info else {}
    diagnose = load(args.diagnose, "diagnose benchmark JSON") if args.diagnose else None
    out_dir = os.path.dirname(os.path.abspath(args.out))
    written, status = charts(data, info, args.charts, out_dir) if args.charts else ([], 0)
    source = os.path.relpath(os.path.abspath(args.bench_json), out_dir)
    write_atomic(args.out, render(data, info, args.machine, source, written, diagnose))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
