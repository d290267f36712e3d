"""The `halfmap diagnose` benchmark (tools/diagnose_bench.py's JSON) in bench.md: one table row per case (rows,
columns, file size, wall time median [min-max], rows/s, peak resident size and its ratio to the files), and the
issue's two targets for 2^20 x 100 float32 (issue 12): under 10 s wall, peak under 1.5x the input files; then one
row per `--model` case (the network, rows, wall time, rows/s, peak, the paths) and issue 24's target: a 4-layer
MLP of width 512 with LayerNorm and GELU on 2^16 x 256 float32 rows, all precision modes, under 15 s wall.

The JSON may be absent (None: not run, e.g. without NumPy), or partial: a missing case or field is "-" and its
target "not measured", never an error."""

import statistics

from .markdown import table
from .results import number

TARGET_ROWS, TARGET_COLS = 1 << 20, 100
WALL_TARGET_S = 10.0
PEAK_TARGET_RATIO = 1.5
MODEL_TARGET = (1 << 16, 256, 4, 512)  # rows, cols, layers, width
MODEL_WALL_TARGET_S = 15.0
NOT_RUN = "no diagnose benchmark in this run (tools/diagnose_bench.py, run by tools/main.sh; needs NumPy)"


def judge_max(ratio, maximum, missing):
    """'met' when ratio <= maximum, else how far above it."""
    if missing:
        return f"not measured: {missing}"
    if ratio <= maximum:
        return "met"
    over = ratio - maximum
    return f"**missed** by {over:.2f} ({over / maximum:.0%} over)"


def cases(doc):
    return [c for c in (doc or {}).get("cases", []) or [] if isinstance(c, dict)]


def rows_of(case):
    return int(number(case.get("rows")) or 0)


def log2_rows(rows):
    return f"2^{rows.bit_length() - 1}" if rows > 0 and rows & (rows - 1) == 0 else f"{rows:,}"


def walls(case):
    return [w for w in (number(x) for x in case.get("wall_s", []) or []) if w is not None]


def wall_median(case):
    w = walls(case)
    return number(case.get("wall_s_median")) or (statistics.median(w) if w else None)


def peak(case):
    return number(case.get("peak_rss_bytes_max"))


def peak_ratio(case):
    files, p = number(case.get("file_bytes")), peak(case)
    return p / files if p and files else None


def fmt(value, spec, suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def case_row(case):
    rows, w, median = rows_of(case), walls(case), wall_median(case)
    spread = f" [{min(w):.2f}-{max(w):.2f}]" if len(w) > 1 else ""
    cpu = [c for c in (number(x) for x in case.get("cpu_s", []) or []) if c is not None]
    files, p = number(case.get("file_bytes")), peak(case)
    return [f"{log2_rows(rows)} ({rows:,})", fmt(number(case.get("cols")), ".0f"), fmt(files and files / 1e6, ".1f"),
            fmt(median, ".2f") + spread, fmt(rows / median if median else None, ",.0f"),
            fmt(statistics.median(cpu) if cpu else None, ".2f"), fmt(p and p / 1e6, ".0f"),
            fmt(peak_ratio(case), ".2f"), str(case.get("verdict") or "-")]


def models(doc):
    return [c for c in (doc or {}).get("models", []) or [] if isinstance(c, dict)]


def model_row(case):
    rows, w, median = rows_of(case), walls(case), wall_median(case)
    spread = f" [{min(w):.2f}-{max(w):.2f}]" if len(w) > 1 else ""
    cpu = [c for c in (number(x) for x in case.get("cpu_s", []) or []) if c is not None]
    p = peak(case)
    net = f"{case.get('layers', '?')} × (Dense({case.get('width', '?')}), LayerNorm, GELU)"
    return [net, fmt(number(case.get("parameters")), ",.0f"), f"{log2_rows(rows)} × {case.get('cols', '?')}",
            fmt(median, ".2f") + spread, fmt(rows / median if median else None, ",.0f"),
            fmt(statistics.median(cpu) if cpu else None, ".2f"), fmt(p and p / 1e6, ".0f"),
            ", ".join(str(x) for x in case.get("paths", []) or []) or "-", str(case.get("verdict") or "-")]


def model_section(doc):
    out = ["", "### halfmap diagnose --model", ""]
    cases_ = models(doc)
    if not cases_:
        return out + ["Not measured: no `--model` case in this run (tools/diagnose_bench.py --models; needs "
                      "python3-onnx)."]
    out.append("`halfmap diagnose --model M --features X --json` with the default options: the network's forward "
               "on the f32 baseline and on each precision mode's best ISA, every layer's statistics against the "
               "baseline's. The network is written with onnx.helper as torch.onnx.export writes it (Gemm, "
               "LayerNormalization, GELU as its Erf pattern; Glorot-uniform weights), the rows standard normal "
               "float32. Wall time median [min-max] of the runs, rows/s, CPU s, peak resident size, the paths run.")
    out.append("")
    head = ["network", "parameters", "rows × cols", "wall s", "rows/s", "CPU s", "peak MB", "paths", "verdict"]
    out += table(head, [model_row(c) for c in cases_], ["---", "---:", "---", "---:", "---:", "---:", "---:", "---",
                                                        "---"])
    return out


def section(doc):
    """The lines of bench.md's "halfmap diagnose" section."""
    out = ["", "## halfmap diagnose", ""]
    if not doc:
        return out + [f"Not measured: {NOT_RUN}."]
    load = doc.get("load_avg_start")
    load_text = " / ".join(f"{float(x):.2f}" for x in load[:3]) if isinstance(load, list) and load else "unknown"
    out.append(f"`{doc.get('command', 'halfmap diagnose')}` with the default options (batches of 32, 200 simulated "
               f"steps, one thread per hardware thread: {doc.get('cpus', '?')} here), on standardised data: "
               f"{doc.get('generator', 'unknown data')}. Wall time from spawn to exit, median of "
               f"{doc.get('repeats', '?')} runs [min-max]; CPU s (user + system, median) over wall s shows how "
               f"many cores it kept busy; peak: the largest resident size of the runs (the kernel's maxrss), and "
               f"its ratio to the two .npy files' size. The files are read from the page cache. "
               f"Run at {doc.get('date', 'unknown')}, load average {load_text} (1, 5, 15 min) at its start; the "
               f"whole step took {fmt(number(doc.get('step_wall_s')), '.1f', ' s')}.")
    out.append("")
    head = ["rows", "cols", "file MB", "wall s", "rows/s", "CPU s", "peak MB", "peak / file", "verdict"]
    body = [case_row(c) for c in cases(doc)]  # in the order they ran
    out += table(head, body, ["---"] + ["---:"] * 7 + ["---"])
    return out + model_section(doc)


def target_rows(doc):
    """The targets' rows [target, measured, ratio, needed, result] for the 2^20 x 100 float32 case."""
    case = next((c for c in cases(doc) if rows_of(c) == TARGET_ROWS and number(c.get("cols")) == TARGET_COLS
                 and c.get("dtype", "float32") == "float32"), None)
    if not doc:
        missing = NOT_RUN
    elif case is None:
        missing = "no 2^20 x 100 float32 case in the diagnose benchmark"
    else:
        missing = None
    what = "halfmap diagnose of 2^20 × 100 float32 rows"
    median = wall_median(case) if case else None
    ratio = median / WALL_TARGET_S if median else None
    rows = [[f"{what} under {WALL_TARGET_S:g} s wall",
             "-" if ratio is None else f"{median:.2f} s / {WALL_TARGET_S:g} s", fmt(ratio, ".3f"), "≤ 1",
             judge_max(ratio, 1.0, missing or (None if ratio else "no wall time in the case"))]]
    ratio = peak_ratio(case) if case else None
    rows.append([f"{what}: peak memory under {PEAK_TARGET_RATIO:g}× the input files",
                 "-" if ratio is None else f"{peak(case) / 1e6:.0f} MB / {number(case['file_bytes']) / 1e6:.0f} MB",
                 fmt(ratio, ".3f"), f"≤ {PEAK_TARGET_RATIO:g}",
                 judge_max(ratio, PEAK_TARGET_RATIO, missing or (None if ratio else "no peak or size in the case"))])
    rows_, cols_, layers_, width_ = MODEL_TARGET
    model = next((c for c in models(doc) if (rows_of(c), number(c.get("cols")), number(c.get("layers")),
                                               number(c.get("width"))) == MODEL_TARGET), None)
    median = wall_median(model) if model else None
    ratio = median / MODEL_WALL_TARGET_S if median else None
    missing = NOT_RUN if not doc else (None if model else f"no --model case {log2_rows(rows_)} × {cols_}, "
                                                          f"{layers_} × width {width_} in the diagnose benchmark")
    rows.append([f"halfmap diagnose --model: {layers_}-layer MLP of width {width_} (LayerNorm, GELU) on "
                 f"{log2_rows(rows_)} × {cols_} float32 rows, all modes, under {MODEL_WALL_TARGET_S:g} s wall",
                 "-" if ratio is None else f"{median:.2f} s / {MODEL_WALL_TARGET_S:g} s", fmt(ratio, ".3f"), "≤ 1",
                 judge_max(ratio, 1.0, missing or (None if ratio else "no wall time in the case"))])
    return rows
