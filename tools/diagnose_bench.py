#!/usr/bin/env python3
"""Times `halfmap diagnose` on standardised data of growing size, and `halfmap diagnose --model` on a network,
and writes the figures as JSON, which tools/bench_report.py publishes in bench.md next to the kernel benchmarks
(issue 12: the scaling of diagnose; issue 24: a user's network).

    python3 tools/diagnose_bench.py --halfmap build/release/halfmap --out results/<machine>/diagnose_bench.json
        [--cases 65536x100,262144x100,1048576x100,262144x16] [--models 65536x256:4x512] [--repeats 3] [--tmp DIR]

Per case ROWSxCOLS: features ROWS x COLS float32 standard normal and labels 0.1 * features @ w (w standard
normal), float32, as in the `clean` case of the tests (tests/diagnose_cases.hpp) but drawn by NumPy (its PCG64,
seed 12): what a user saves with numpy.save. Each case runs `halfmap diagnose --features X --labels Y --json`
--repeats times, one after the other, with the default options (threads: one per hardware thread); per run the
wall time (spawn to exit) and, from GNU time (/usr/bin/time: the kernel's rusage of the child), its peak
resident size and CPU time (user + system). The files are written into a temporary folder (under --tmp, else
the system's), read from the page cache by every run (the first run too: they were just written), and removed:
each case's before the next case is written, the folder at the end, also on failure.

Per model case ROWSxCOLS:LAYERSxWIDTH: features ROWS x COLS float32 standard normal (NumPy's PCG64, seed 12) and a
network of LAYERS blocks Dense(WIDTH) -> LayerNorm -> GELU, written with onnx.helper as torch.onnx.export (opset
17) writes them: Gemm with transB, LayerNormalization, and GELU as its Div-Erf-Add-Mul-Mul pattern; the weights
Glorot-uniform float32. Each runs `halfmap diagnose --model M --features X --json` --repeats times, measured as
above. Without onnx (python3-onnx) the model cases are skipped with a line saying so, and "models" is empty.

The JSON (keys stable): {"diagnose_bench": 1, "command", "date", "cpus", "load_avg_start", "load_avg_end",
"repeats", "generator", "step_wall_s" (this whole script), "generate_wall_s", "cases": [{"rows", "cols",
"dtype", "features_bytes", "labels_bytes", "file_bytes", "wall_s": [per run], "wall_s_median", "cpu_s": [per run],
"peak_rss_bytes": [per run], "peak_rss_bytes_max", "verdict"}], "models": [{"rows", "cols", "layers", "width",
"parameters", "model_bytes", "features_bytes", "wall_s", "wall_s_median", "cpu_s", "peak_rss_bytes",
"peak_rss_bytes_max", "paths": [the paths that ran], "verdict"}]}. A run that fails (exit code not 0) stops the
script with its stderr, exit 1; without NumPy or GNU time it says so, exit 3 (tools/main.sh then skips the
step).

Python 3, NumPy and GNU time (python3-numpy and time, tools/setup.sh). The JSON is written to a temporary name
and renamed.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_report import write_atomic  # noqa: E402  (the same temporary-name-and-rename as bench.md's)

GNU_TIME = "/usr/bin/time"
DEFAULT_CASES = "65536x100,262144x100,1048576x100,262144x16"
DEFAULT_MODELS = "65536x256:4x512"
SEED = 12


def parse_cases(text):
    cases = []
    for item in text.split(","):
        rows, sep, cols = item.strip().partition("x")
        if not sep or not rows.isdigit() or not cols.isdigit() or int(rows) < 1 or int(cols) < 1:
            sys.exit(f"diagnose_bench.py: --cases {text}: each case is ROWSxCOLS, e.g. 65536x100.")
        cases.append((int(rows), int(cols)))
    return cases


def parse_models(text):
    models = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        data, sep, net = item.partition(":")
        shape, layers = parse_cases(data) if sep else [], net.partition("x")
        if not sep or len(shape) != 1 or not layers[0].isdigit() or not layers[2].isdigit() \
                or int(layers[0]) < 1 or int(layers[2]) < 1:
            sys.exit(f"diagnose_bench.py: --models {text}: each model case is ROWSxCOLS:LAYERSxWIDTH, e.g. "
                     f"65536x256:4x512.")
        models.append((*shape[0], int(layers[0]), int(layers[2])))
    return models


def generate_model(np, onnx, directory, cols, layers, width):
    """<directory>/mlp_<cols>_<layers>x<width>.onnx: LAYERS blocks Gemm -> LayerNormalization -> GELU (torch's
    Erf pattern); returns (path, parameter count)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng([SEED, cols, layers, width])
    nodes, inits, cur, fan_in = [], [], "x", cols

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    const("sqrt2", np.sqrt(2.0))
    const("one", 1.0)
    const("half", 0.5)
    for i in range(layers):
        a = np.sqrt(6.0 / (fan_in + width))
        w = const(f"fc{i}.weight", rng.uniform(-a, a, size=(width, fan_in)))  # torch's layout: out x in
        b = const(f"fc{i}.bias", np.zeros(width))
        g, beta = const(f"ln{i}.weight", np.ones(width)), const(f"ln{i}.bias", np.zeros(width))
        p = f"/{i}"
        nodes += [helper.make_node("Gemm", [cur, w, b], [f"{p}/h"], name=f"{p}/fc/Gemm", transB=1),
                  helper.make_node("LayerNormalization", [f"{p}/h", g, beta], [f"{p}/n"], name=f"{p}/ln/LayerNorm",
                                   epsilon=1e-5),
                  helper.make_node("Div", [f"{p}/n", "sqrt2"], [f"{p}/d"], name=f"{p}/act/Div"),
                  helper.make_node("Erf", [f"{p}/d"], [f"{p}/e"], name=f"{p}/act/Erf"),
                  helper.make_node("Add", [f"{p}/e", "one"], [f"{p}/a"], name=f"{p}/act/Add"),
                  helper.make_node("Mul", [f"{p}/n", f"{p}/a"], [f"{p}/m"], name=f"{p}/act/Mul"),
                  helper.make_node("Mul", [f"{p}/m", "half"], [f"{p}/y" if i < layers - 1 else "y"],
                                   name=f"{p}/act/Mul_1")]
        cur, fan_in = f"{p}/y", width
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", cols])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="diagnose_bench")
    path = os.path.join(directory, f"mlp_{cols}_{layers}x{width}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    params = sum(int(np.prod(t.dims)) for t in inits) - 3
    return path, params


def generate(np, directory, rows, cols):
    """Writes <directory>/x_<rows>x<cols>.npy and y_...npy; returns their paths."""
    rng = np.random.default_rng([SEED, rows, cols])
    w = rng.standard_normal(cols, dtype=np.float32)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    y = (x @ w) * np.float32(0.1)
    xp = os.path.join(directory, f"x_{rows}x{cols}.npy")
    yp = os.path.join(directory, f"y_{rows}x{cols}.npy")
    np.save(xp, x)
    np.save(yp, y.astype(np.float32))
    return xp, yp


def run_once(command, directory):
    """(wall s, CPU s, peak RSS bytes, stdout text) of one run; exits with its stderr if it fails.

    The peak comes from GNU time (its %M, the child's maxrss), not from os.wait4 on a child of this script: Linux
    carries a process's peak over exec, so a child forked from this Python (NumPy and the data in memory) would
    report Python's peak; GNU time's own fork adds about 1 MB."""
    out_path, time_path = os.path.join(directory, "report.json"), os.path.join(directory, "time.txt")
    with open(out_path, "w+b") as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        code = subprocess.call([GNU_TIME, "-f", "%M %U %S", "-o", time_path] + command, stdout=out, stderr=err,
                               stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        if code != 0:
            err.seek(0)
            sys.exit(f"diagnose_bench.py: {' '.join(command)} exited with {code}: "
                     f"{err.read().decode(errors='replace').strip()}")
        out.seek(0)
        text = out.read().decode()
    with open(time_path, encoding="utf-8") as f:
        kib, user, system = f.read().split()[-3:]  # GNU time writes only this line when the command succeeds
    return wall, float(user) + float(system), int(kib) * 1024, text


def measure(halfmap, directory, np, rows, cols, repeats):
    start = time.perf_counter()
    xp, yp = generate(np, directory, rows, cols)
    generated = time.perf_counter() - start
    command = [halfmap, "diagnose", "--features", xp, "--labels", yp, "--json"]
    runs = [run_once(command, directory) for _ in range(repeats)]
    walls = [r[0] for r in runs]
    peaks = [r[2] for r in runs]
    fb, lb = os.path.getsize(xp), os.path.getsize(yp)
    verdict = json.loads(runs[-1][3]).get("verdict", {}).get("boundary")
    for p in (xp, yp):
        os.remove(p)  # before the next case: only one case's files on disk at a time
    case = {"rows": rows, "cols": cols, "dtype": "float32", "features_bytes": fb, "labels_bytes": lb,
            "file_bytes": fb + lb, "wall_s": [round(w, 4) for w in walls],
            "wall_s_median": round(statistics.median(walls), 4), "cpu_s": [round(r[1], 4) for r in runs],
            "peak_rss_bytes": peaks, "peak_rss_bytes_max": max(peaks), "verdict": verdict}
    print(f"diagnose_bench.py: {rows} x {cols}: {fb / 1e6:.1f} MB, wall {case['wall_s_median']:.2f} s "
          f"(median of {repeats}; {min(walls):.2f}-{max(walls):.2f}), peak {max(peaks) / 1e6:.0f} MB "
          f"({max(peaks) / (fb + lb):.2f}x the files), verdict {verdict}", flush=True)
    return case, generated


def measure_model(halfmap, directory, np, onnx, rows, cols, layers, width, repeats):
    start = time.perf_counter()
    rng = np.random.default_rng([SEED, rows, cols])
    xp = os.path.join(directory, f"x_{rows}x{cols}.npy")
    np.save(xp, rng.standard_normal((rows, cols), dtype=np.float32))
    mp, params = generate_model(np, onnx, directory, cols, layers, width)
    generated = time.perf_counter() - start
    command = [halfmap, "diagnose", "--model", mp, "--features", xp, "--json"]
    runs = [run_once(command, directory) for _ in range(repeats)]
    walls, peaks = [r[0] for r in runs], [r[2] for r in runs]
    report = json.loads(runs[-1][3])
    case = {"rows": rows, "cols": cols, "layers": layers, "width": width, "parameters": params,
            "model_bytes": os.path.getsize(mp), "features_bytes": os.path.getsize(xp),
            "wall_s": [round(w, 4) for w in walls], "wall_s_median": round(statistics.median(walls), 4),
            "cpu_s": [round(r[1], 4) for r in runs], "peak_rss_bytes": peaks, "peak_rss_bytes_max": max(peaks),
            "paths": [p.get("path") for p in report.get("paths", [])],
            "verdict": report.get("verdict", {}).get("boundary")}
    for p in (xp, mp):
        os.remove(p)
    print(f"diagnose_bench.py: --model {layers} x (Dense({width}), LayerNorm, GELU) on {rows} x {cols}: wall "
          f"{case['wall_s_median']:.2f} s (median of {repeats}; {min(walls):.2f}-{max(walls):.2f}), peak "
          f"{max(peaks) / 1e6:.0f} MB, {len(case['paths'])} paths, verdict {case['verdict']}", flush=True)
    return case, generated


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--halfmap", required=True, help="the halfmap binary (build/release/halfmap)")
    parser.add_argument("--out", required=True, help="the JSON to write (diagnose_bench.json)")
    parser.add_argument("--cases", default=DEFAULT_CASES, help=f"ROWSxCOLS,... (default {DEFAULT_CASES})")
    parser.add_argument("--models", default=DEFAULT_MODELS,
                        help=f"ROWSxCOLS:LAYERSxWIDTH,... for --model (default {DEFAULT_MODELS}; '' for none)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (default 3)")
    parser.add_argument("--tmp", help="folder for the temporary data (default: the system's temporary folder)")
    args = parser.parse_args(argv)
    cases = parse_cases(args.cases) if args.cases else []
    models = parse_models(args.models)
    if args.repeats < 1:
        sys.exit("diagnose_bench.py: --repeats must be at least 1.")
    try:
        import numpy as np
    except ImportError as e:
        print(f"diagnose_bench.py: NumPy is missing ({e}): install python3-numpy (tools/setup.sh)", file=sys.stderr)
        return 3
    if not os.access(GNU_TIME, os.X_OK):
        print(f"diagnose_bench.py: {GNU_TIME} is missing: install GNU time, package time (tools/setup.sh)",
              file=sys.stderr)
        return 3
    start = time.perf_counter()
    load_start = os.getloadavg()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # when it started
    directory = tempfile.mkdtemp(prefix="halfmap-diagnose-bench-", dir=args.tmp)
    try:
        import onnx
    except ImportError as e:
        if models:
            print(f"diagnose_bench.py: onnx is missing ({e}): the --model cases are skipped (python3-onnx, "
                  f"tools/setup.sh)", file=sys.stderr)
        onnx, models = None, []
    try:
        measured = [measure(os.path.abspath(args.halfmap), directory, np, r, c, args.repeats) for r, c in cases]
        measured_models = [measure_model(os.path.abspath(args.halfmap), directory, np, onnx, r, c, n, w, args.repeats)
                           for r, c, n, w in models]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    doc = {"diagnose_bench": 1, "command": "halfmap diagnose --features X.npy --labels Y.npy --json",
           "date": date,
           "cpus": os.cpu_count(), "load_avg_start": [round(x, 2) for x in load_start],
           "load_avg_end": [round(x, 2) for x in os.getloadavg()], "repeats": args.repeats,
           "generator": f"NumPy {np.__version__} default_rng([{SEED}, rows, cols]): features standard normal "
                        f"float32, labels 0.1 * features @ w (w standard normal), float32, C order",
           "step_wall_s": round(time.perf_counter() - start, 4),
           "generate_wall_s": round(sum(g for _, g in measured + measured_models), 2),
           "cases": [c for c, _ in measured], "models": [c for c, _ in measured_models]}
    write_atomic(args.out, json.dumps(doc, indent=1) + "\n")
    print(f"diagnose_bench.py: wrote {args.out} ({doc['step_wall_s']:.1f} s in all, "
          f"{doc['generate_wall_s']:.1f} s of it generating the data)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
