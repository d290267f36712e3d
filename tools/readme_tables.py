#!/usr/bin/env python3
"""README's headline tables, generated from results/: where the core ops' fp16 and bf16 paths break (every current
machine folder's thresholds.json, normal inputs), and how fast the dense layer and attention run on each machine
(its bench.json: the median of the repetitions and their spread).

    python3 tools/readme_tables.py [--results results] [--readme README.md]            rewrite README's tables
    python3 tools/readme_tables.py --check [--results results] [--readme README.md]    exit 1 if they are stale

The tables sit in README.md between the lines `<!-- readme-tables:NAME begin -->` and `<!-- readme-tables:NAME end
-->` (NAME: thresholds, speed); everything else is left as it is. A folder with a SUPERSEDED file (a newer run of
the same machine class replaced it) is left out. Standard library only; the README is written to a temporary file
and renamed."""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchreport.results import is_peer, peer_label  # noqa: E402  (a peer's library and storage type)

OPS = [  # (op in thresholds.json, label)
    ("dense_fwd", "dense forward"),
    ("dense_fwd_amplifying", "dense forward, amplifying (K 4096, ReLU inputs, unit weights)"),
    ("sum", "sum"),
    ("softmax", "softmax"),
    ("layernorm", "layernorm"),
    ("attention_postscale_d128", "attention, 1/√d after q·kᵀ (d 128)"),
    ("attention_prescale_d128", "attention, 1/√d on q (d 128)"),
]
MODES = ["f16_f32acc", "f16", "bf16_f32acc"]
# The speed table: (benchmark prefix, size, counter, unit label).
SPEED = [("dense_fwd", "512", "flops_per_second", "dense forward 512³, GFLOP/s"),
         ("attention_prescale", "512", "flops_per_second", "attention fwd+bwd, len 512, d 64, GFLOP/s")]
SPEED_MODES = ["f32", "f16_f32acc", "f16", "bf16_f32acc"]


def folders(results):
    out = []
    for name in sorted(os.listdir(results)):
        d = os.path.join(results, name)
        if os.path.isdir(d) and not os.path.exists(os.path.join(d, "SUPERSEDED")):
            out.append(name)
    return out


def log2_text(bound):
    """'2^13.86' from a bound ('2^13.8643 (14913)'), '< 2^-40' beyond the grid: two decimals of log2, so that
    thresholds that differ by less than a hundredth of a binade share a row."""
    if not bound:
        return "-"
    if "log2" in bound:
        return f"2^{bound['log2']:.2f}"
    return bound["text"].split(" (")[0]


def onset(entry, key):
    b = entry.get(key)
    return log2_text(b["onset"]) if b else "-"


def window_at_one(entry):
    for w in entry.get("loss_scale_windows") or []:
        if w["log2_s"] == 0.0:
            if w["empty"]:
                return "empty"
            return f"{log2_text(w['S_min'])} … {log2_text(w['S_max'])}"
    return "-"


def crossed(entry, key):
    """What crossed at the onset (thresholds format 4: docs/thresholds.md, "What crossed"), e.g. "intermediate var";
    empty in a format 3 folder."""
    on = (entry.get(key) or {}).get("onset", {})
    return " ".join(x for x in (on.get("crossed"), on.get("tensor")) if x)


def thresholds_table(results):
    rows = {}  # (op, mode, overflow, storage, underflow, window) -> set of ISA paths
    what = {}  # the same key -> what crossed at the overflow onset, from the folders that name it
    for name in folders(results):
        path = os.path.join(results, name, "thresholds.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for e in doc["results"]:
            if e["dist"] != "normal" or e["mode"] not in MODES or e["isa"] == "peer":
                continue
            if e["op"] not in dict(OPS):
                continue
            over, storage = onset(e, "s_overflow"), onset(e, "storage_overflow")
            key = (e["op"], e["mode"], over, storage, onset(e, "s_underflow"), window_at_one(e))
            rows.setdefault(key, set()).add(e["isa"])
            if crossed(e, "s_overflow"):
                what.setdefault(key, set()).add(crossed(e, "s_overflow"))
    order = {op: i for i, (op, _) in enumerate(OPS)}
    lines = ["| op | mode | ISA paths | overflows from s = | its inputs' storage overflows from | lost to underflow "
             "below s = | loss-scale window at s = 1 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key in sorted(rows, key=lambda k: (order[k[0]], MODES.index(k[1]), k[2], sorted(rows[k]))):
        op, mode, over, storage, under, window = key
        named = what.get(key, set())
        stage = f" · {next(iter(named))}" if len(named) == 1 else ""
        same = stage + (" (= storage)" if over == storage and over != "-" else "")
        lines.append(f"| {dict(OPS)[op]} | `{mode}` | {', '.join(sorted(rows[key]))} | {over}{same} | {storage} | "
                     f"{under} | {window} |")
    return "\n".join(lines)


def medians(bench):
    """run name -> (median, min, max, label) of a counter, from the iterations of every repetition."""
    runs = {}
    for b in bench["benchmarks"]:
        if b.get("run_type") != "iteration" or "error_occurred" in b:
            continue
        runs.setdefault(b["run_name"], []).append(b)
    return runs


def label_of(b):
    return dict(w.split("=", 1) for w in b.get("label", "").split() if "=" in w)


def speed_cell(values):
    med = statistics.median(values)
    spread = (max(values) - min(values)) / med if med else 0.0
    return med, f"{med / 1e9:.0f} ±{100 * spread / 2:.0f} %"


def speed_table(results):
    header = "| machine | what | " + " | ".join(f"`{m}`" for m in SPEED_MODES) + " | best `f32` peer |"
    lines = [header, "|" + " --- |" * (3 + len(SPEED_MODES))]
    for name in folders(results):
        path = os.path.join(results, name, "bench.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            runs = medians(json.load(f))
        for prefix, size, counter, what in SPEED:
            best = {}  # mode -> (median, cell, isa)
            peer = None
            for run, reps in runs.items():
                parts = run.split("/")
                if len(parts) < 3 or parts[0] != prefix or parts[2] != size:
                    continue
                vals = [r[counter] for r in reps if counter in r]
                if not vals:
                    continue
                lab = label_of(reps[0])
                med, cell = speed_cell(vals)
                if is_peer(parts[1]) and label_of(reps[0]).get("mode") == "f32":
                    if peer is None or med > peer[0]:
                        peer = (med, f"{cell} {peer_label(parts[1])}")
                    continue
                if is_peer(parts[1]):
                    continue
                mode, isa = lab.get("mode"), lab.get("isa")
                if mode in SPEED_MODES and (mode not in best or med > best[mode][0]):
                    best[mode] = (med, cell, isa)
            if not best:
                continue
            cells = [f"{best[m][1]} {best[m][2]}" if m in best else "-" for m in SPEED_MODES]
            lines.append(f"| `{name}` | {what} | " + " | ".join(cells) + f" | {peer[1] if peer else '-'} |")
    return "\n".join(lines)


TABLES = {"thresholds": thresholds_table, "speed": speed_table}


def render(readme_text, results):
    out = readme_text
    for name, make in TABLES.items():
        begin, end = f"<!-- readme-tables:{name} begin -->", f"<!-- readme-tables:{name} end -->"
        pat = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pat.search(out):
            raise ValueError(f"README lacks the lines {begin} ... {end}")
        out = pat.sub(lambda _: f"{begin}\n{make(results)}\n{end}", out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--check", action="store_true", help="exit 1 if README's tables differ from results/")
    a = ap.parse_args()
    try:
        with open(a.readme, encoding="utf-8") as f:
            text = f.read()
        new = render(text, a.results)
    except (OSError, ValueError, KeyError) as e:
        print(f"readme_tables.py: {e}", file=sys.stderr)
        return 2
    if a.check:
        if new != text:
            print(f"readme_tables.py: {a.readme}'s headline tables differ from what {a.results}/ gives; run "
                  "python3 tools/readme_tables.py to regenerate them", file=sys.stderr)
            return 1
        return 0
    if new != text:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.readme)), prefix=".readme-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, a.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
