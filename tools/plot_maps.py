#!/usr/bin/env python3
"""Maps of `halfmap sweep` results: for each op and distribution, one PNG with one heatmap panel per path (kernel).

    python3 tools/plot_maps.py results/<machine>/cells.csv            # -> results/<machine>/maps/<op>_<dist>.png
    python3 tools/plot_maps.py cells.csv.gz --out DIR                  # -> DIR/maps/<op>_<dist>.png

x: input scale s (log2; each panel over its own grid: the f32 and bf16 panels of sum, sumsq, maxabs, dot, dense_fwd
and mse span 2^-160 .. 2^140, where those types overflow and flush), y: loss scale S (log2); ops without a gradient (reductions, softmax) are a one-row strip.
Each cell is coloured by its status: the first boundary crossed, in the order data -> compute -> optimization (see
docs/sweep.md). Needs python3-matplotlib (Debian; tools/setup.sh installs it).
Every PNG is written to a temporary file and renamed, so an interrupted run leaves no half-written map.
"""
import argparse
import csv
import gzip
import io
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap, BoundaryNorm  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
import numpy as np  # noqa: E402

# The statuses in the order of include/halfmap/sweep.hpp, with a colour each.
STATUSES = [
    ("ok", "#d9f0d3"),
    ("data_nonfinite", "#000000"),
    ("data_overflow", "#7f0000"),
    ("data_underflow", "#08306b"),
    ("fwd_overflow", "#e31a1c"),
    ("fwd_underflow", "#6baed6"),
    ("grad_overflow", "#fd8d3c"),
    ("grad_underflow", "#9e9ac8"),
]
CODE = {name: i for i, (name, _) in enumerate(STATUSES)}


def open_csv(path):
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_cells(path):
    """{(op, dist): {kernel: {"mode", "isa", "cells": {(log2_s, log2_S or None): code}}}}, in file order."""
    maps = {}
    with open_csv(path) as f:
        for row in csv.DictReader(f):
            key = (row["op"], row["dist"])
            panels = maps.setdefault(key, {})
            p = panels.get(row["kernel"])
            if p is None:
                p = panels[row["kernel"]] = {"mode": row["mode"], "isa": row["isa"], "cells": {}}
            ls = float(row["log2_s"])
            lS = float(row["log2_S"]) if row["log2_S"] != "" else None
            p["cells"][(ls, lS)] = CODE[row["status"]]
    return maps


def write_png(fig, path):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".png")
    os.close(fd)
    try:
        # No date or software version in the PNG: the same cells give the same file.
        fig.savefig(tmp, dpi=110, metadata={"Software": None})
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def plot(op, dist, panels, out_dir):
    names = list(panels)
    n = len(names)
    ncols = min(4, n)
    nrows = (n + ncols - 1) // ncols
    any_S = any(k[1] is not None for p in panels.values() for k in p["cells"])
    h = 2.6 if any_S else 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, h * nrows + 1.3), squeeze=False)
    cmap = ListedColormap([c for _, c in STATUSES])
    norm = BoundaryNorm(np.arange(len(STATUSES) + 1) - 0.5, len(STATUSES))
    for idx, name in enumerate(names):
        ax = axes[idx // ncols][idx % ncols]
        cells = panels[name]["cells"]
        xs = sorted({k[0] for k in cells})
        ys = sorted({k[1] for k in cells if k[1] is not None}) or [None]
        grid = np.full((len(ys), len(xs)), np.nan)
        xi = {v: i for i, v in enumerate(xs)}
        yi = {v: i for i, v in enumerate(ys)}
        for (ls, lS), code in cells.items():
            grid[yi[lS], xi[ls]] = code

        def edges(v):
            if len(v) == 1:
                return [v[0] - 0.5, v[0] + 0.5]
            mids = [(a + b) / 2 for a, b in zip(v, v[1:])]
            return [v[0] - (mids[0] - v[0])] + mids + [v[-1] + (v[-1] - mids[-1])]

        yedges = edges(ys) if ys[0] is not None else [0, 1]
        ax.pcolormesh(edges(xs), yedges, grid, cmap=cmap, norm=norm, shading="flat")
        ax.set_title(f"{panels[name]['mode']} · {panels[name]['isa']}\n{name}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("log2 s (input scale)", fontsize=7)
        if ys[0] is not None:
            ax.set_ylabel("log2 S (loss scale)", fontsize=7)
            for y, style in ((15, ":"), (16, "--")):
                if ys[0] <= y <= ys[-1]:
                    ax.axhline(y, color="k", lw=0.6, ls=style)
        else:
            ax.set_yticks([])
    for idx in range(n, nrows * ncols):
        axes[idx // ncols][idx % ncols].axis("off")
    present = sorted({c for p in panels.values() for c in p["cells"].values()})
    handles = [Patch(facecolor=STATUSES[c][1], edgecolor="#555555", label=STATUSES[c][0]) for c in present]
    if any_S:
        handles.append(plt.Line2D([], [], color="k", lw=0.6, ls=":", label="Keras 2^15"))
        handles.append(plt.Line2D([], [], color="k", lw=0.6, ls="--", label="PyTorch 2^16"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    fig.suptitle(f"halfmap sweep: {op}, {dist} inputs — first boundary crossed", fontsize=10)
    fig.tight_layout(rect=(0, 0.1 if nrows == 1 else 0.06, 1, 0.95))
    path = os.path.join(out_dir, f"{op}_{dist}.png")
    write_png(fig, path)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cells", help="cells.csv (or cells.csv.gz) written by `halfmap sweep`")
    ap.add_argument("--out", help="folder that gets maps/ (default: the folder of CELLS)")
    args = ap.parse_args()
    if not os.path.exists(args.cells):
        print(f"plot_maps.py: {args.cells} does not exist.", file=sys.stderr)
        return 2
    out_dir = os.path.join(args.out or os.path.dirname(os.path.abspath(args.cells)), "maps")
    os.makedirs(out_dir, exist_ok=True)
    maps = read_cells(args.cells)
    for (op, dist), panels in maps.items():
        path = plot(op, dist, panels, out_dir)
        print(f"plot_maps.py: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
