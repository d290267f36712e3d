#!/usr/bin/env python3
"""The headline table of a sweep: per kernel op, every path's overflow and underflow thresholds side by side and
its loss-scale window at input scale 1, for one distribution (normal by default).

    python3 tools/headline.py results/<machine>/thresholds.json [--dist normal] [--out headline.md]

Reads the sweep's thresholds.json (halfmap-sweep-thresholds-3 or -4); standard library only. Writes to a temporary file
and renames it, so an interrupted run leaves no half-written table."""
import argparse
import json
import os
import sys
import tempfile


def text(bound):
    return bound["text"] if bound else ""


def crossed(boundary):
    """What crossed at the onset (format 4; as src/sweep/markdown.cpp's crossing_text): " · input X = storage"."""
    on = boundary["onset"]
    if "crossed" not in on:
        return ""
    tensor = f" {on['tensor']}" if "tensor" in on else ""
    return f" · {on['crossed']}{tensor}" + (" = storage" if boundary.get("equals_storage") else "")


def band(boundary):
    """A boundary as its onset and what crossed there, with its saturation when that differs (formats 3 and 4)."""
    if not boundary:
        return ""
    on, sat = text(boundary["onset"]), text(boundary["saturation"])
    on += crossed(boundary)
    return on if text(boundary["onset"]) == sat else f"{on} (sat. {sat})"


def window_at_one(entry):
    for w in entry.get("loss_scale_windows") or []:
        if w["log2_s"] == 0.0:
            rng = "empty" if w["empty"] else f"[{text(w['S_min'])}, {text(w['S_max'])}]"
            return rng, w["keras_2^15"], w["pytorch_2^16"]
    return "-", "-", "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("thresholds")
    ap.add_argument("--dist", default="normal")
    ap.add_argument("--out")
    a = ap.parse_args()
    try:
        with open(a.thresholds, encoding="utf-8") as f:
            doc = json.load(f)
        results = doc["results"]
    except (OSError, ValueError, KeyError) as e:
        print(f"headline.py: cannot read {a.thresholds} as a sweep's thresholds.json: {e}", file=sys.stderr)
        return 2
    rows = [r for r in results if r["dist"] == a.dist]
    if not rows:
        print(f"headline.py: no results for distribution '{a.dist}' in {a.thresholds}", file=sys.stderr)
        return 2
    out = [f"Distribution `{a.dist}`; `≤`/`<`/`≥`/`>` mark thresholds beyond the sweep's grid; each threshold is its "
           "onset, with what crossed there (`· input X = storage`: an input overflowed or flushed when stored, at its "
           "storage limit; `· arithmetic`, `· intermediate`, `· output`: docs/thresholds.md, \"What crossed\") and its "
           "saturation `(sat. …)` where the boundary comes and goes between them. Window: the loss-scale "
           "window [S_min, S_max] of the op's gradients at input scale s = 1; Keras (2^15) and PyTorch (2^16) "
           "initial loss scales inside or outside it.", ""]
    ops = []
    for r in rows:
        if r["op"] not in ops:
            ops.append(r["op"])
    for op in ops:
        out += [f"### {op}", "",
                "| path (mode, isa) | kernel | s_underflow | s_overflow | window at s = 1 | Keras 2^15 | PyTorch 2^16 |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            if r["op"] != op:
                continue
            win, keras, torch = window_at_one(r)
            out.append(f"| {r['mode']}, {r['isa']} | `{r['kernel']}` | {band(r.get('s_underflow'))} | "
                       f"{band(r.get('s_overflow'))} | {win} | {keras} | {torch} |")
        out.append("")
    body = "\n".join(out)
    if not a.out:
        sys.stdout.write(body)
        return 0
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)), prefix=".headline.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)
    os.chmod(tmp, 0o644)  # readable by all, like the other published files (mkstemp creates 0600)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
