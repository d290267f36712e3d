"""The pieces of tools/bench_report.py, along its data flow:

    results.py   halfmap_bench's Google Benchmark JSON -> Results: every benchmark's counters, skips, and each
                 kernel's facts (op, mode, isa, storage, roof) from `halfmap info --json` and the benchmark labels
    roofs.py     the roofs of the run and each kernel's roof fraction
    peers.py     the peer libraries of a suite: present, skipped or not built, and the best of a storage type
    targets.py   the project's performance targets, each met or missed
    diagnose.py  the `halfmap diagnose` benchmark (tools/diagnose_bench.py's JSON): its table and its targets
    markdown.py  number formats and Markdown tables
    render.py    bench.md
    charts.py    bench_reductions.png, bench_nn.png, bench_dense.png (matplotlib)

Python 3 standard library (and matplotlib for the charts).
"""
