"""Reads halfmap_bench's Google Benchmark JSON into Results: the counters of every benchmark, the skipped ones with
their messages, and what each kernel is.

Benchmark names are <suite>/<kernel>/<arg>: reduce/<kernel>/<level>, dense_fwd/<kernel>/<size>,
<op>/<kernel>/<level> for mse, softmax, softmax_naive and xent, roof/<what>/<arg>, and the peer libraries'
<suite>/<lib>[_<isa>]_<dtype>_<op>__peer/<arg>, named like the sweep's peer paths (src/peers/peers.hpp; <isa> where
the environment capped the library's ISA). The names halfmap_bench gave its peers before, <lib>[_<isa>]_<dtype>__peer
(the published bench.json files), are read as today's (canonical_kernel). A kernel's facts (op, precision mode,
ISA, storage type) come from `halfmap info --json` (its "kernels" list, the registry) and from the benchmark's
label, which halfmap_bench writes as key=value words (bench_util.hpp, label_kernel): op=sum mode=f32 isa=avx512
storage=f32 roof=read/l1. Only the label says which roof a kernel is compared with (roof=fma/avx512, roof=none):
that rule lives in bench/bench_roof.cpp alone. Nothing is read from a kernel's name.

The parsing is tolerant: an unreadable name, a missing counter or an unknown kernel is reported, never an error.
"""

import collections
import re
import statistics

FP8_OPS = ("fp8_encode", "fp8_encode_nonsat", "fp8_decode", "mx_quantize", "fp8_round", "mx_round")  # bench/bench_convert.cpp
PEER_SUFFIX = "__peer"
# The storage types in a peer's name, <lib>[_<isa>]_<dtype>_<op>__peer.
PEER_DTYPES = ("f32", "f16", "bf16")
# The key bench_report.merge adds to the benchmarks of an extra run (a capped peers' run): the run's name.
RUN_KEY = "halfmap_run"
SKIP_NAME_PARTS = re.compile(r"^(min_time|min_warmup_time|repeats|iterations|threads|real_time|manual_time|"
                             r"process_time):")

# The arithmetic a mode computes in, for "the same ISA and arithmetic": f16_f32acc computes in f32 like f32; the
# f16 modes (per-op or native fp16 arithmetic) have none in common with a peer's.
ARITHMETIC = {"f32": "f32", "f16_f32acc": "f32", "bf16_f32acc": "bf16"}

# What a kernel is; None where neither info.json nor a label says. roof: the label's, e.g. "fma/avx512".
Facts = collections.namedtuple("Facts", "op mode isa storage roof")
UNKNOWN = Facts(None, None, None, None, None)


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
    return parts[0], canonical_kernel(parts[0], parts[1]), arg


def parse_label(label):
    """'op=sum mode=f32 roof=read/l1' -> {'op': 'sum', 'mode': 'f32', 'roof': 'read/l1'}; words without '=' are
    ignored (a label halfmap_bench did not write)."""
    pairs = (word.split("=", 1) for word in str(label or "").split() if "=" in word)
    return {key: value for key, value in pairs if key and value}


def is_peer(kernel):
    return kernel.endswith(PEER_SUFFIX)


def peer_label(kernel):
    """A peer as the tables name it, its name without its op: the library (with the ISA a capped run set) and the
    storage type, 'onednn_avx2_f32_dense_fwd__peer' -> 'onednn_avx2_f32'. Any other kernel unchanged."""
    if not is_peer(kernel):
        return kernel
    words = kernel[: -len(PEER_SUFFIX)].split("_")
    at = max((i for i, w in enumerate(words) if w in PEER_DTYPES), default=len(words) - 1)
    return "_".join(words[: at + 1])


def suite_peer_op(suite):
    """The op a suite's peers run: dense_fwd_threads times dense_fwd, every other suite its own op."""
    return suite[: -len("_threads")] if suite.endswith("_threads") else suite


def peer_kernel(label, suite):
    """The name of a peer of a suite from its peer_label: ('onednn_bf16', 'softmax') -> 'onednn_bf16_softmax__peer'."""
    return f"{label}_{suite_peer_op(suite)}{PEER_SUFFIX}"


def canonical_kernel(suite, kernel):
    """A benchmark's kernel name as halfmap_bench writes it today. Its peers were named <lib>[_<isa>]_<dtype>__peer
    before the benchmarks and the sweep shared one peer stack (every bench.json and bench_peers_<isa>.json published
    until then): such a name (a storage type where today's ends with its op) becomes <lib>[_<isa>]_<dtype>_<op>__peer.
    The one place the old names are read: every benchmark name passes here (parse_name), and so do the context's
    peer names (canonical_context)."""
    if is_peer(kernel) and kernel[: -len(PEER_SUFFIX)].rsplit("_", 1)[-1] in PEER_DTYPES:
        return peer_kernel(kernel[: -len(PEER_SUFFIX)], suite)
    return kernel


def canonical_benchmark(name):
    """'<suite>/<kernel>[/...]' with its kernel through canonical_kernel; a text without '/' unchanged."""
    parts = str(name).split("/")
    if len(parts) < 2:
        return name
    parts[1] = canonical_kernel(parts[0], parts[1])
    return "/".join(parts)


# The context entries halfmap_bench fills with peers' benchmark names: "<suite>/<kernel>, ...".
PEER_NAME_LISTS = ("peers_fp_env_changed", "peers_subnormals_flushed")


def canonical_context(context):
    """A copy of a benchmark JSON's context with the peers' names in it read by canonical_kernel: the keys
    peer_check/<suite>/<kernel> and the lists of PEER_NAME_LISTS."""
    out = {}
    for key, value in (context or {}).items():
        if key.startswith("peer_check/"):
            key = "peer_check/" + canonical_benchmark(key[len("peer_check/"):])
        elif key in PEER_NAME_LISTS and isinstance(value, str):
            value = ", ".join(canonical_benchmark(item) for item in value.split(", "))
        out[key] = value
    return out


# The ops of each of halfmap_bench's families (bench/bench_<family>.cpp) come from `halfmap info --json`'s "ops":
# the table of include/halfmap/ops.hpp, each row with its bench_family. The info.json of the results/<machine>/
# folders published before that key has none; for those, PUBLISHED_OPS: the table as it was then (the ops keep
# their families, so a newer table only adds to it: bench_report_test checks both against `halfmap info --json`).
PUBLISHED_OPS = {
    "reduce": ("sum", "sumsq", "maxabs", "dot"),
    "dense": ("dense_fwd", "dense_bwd"),
    "nn": ("mse", "softmax", "softmax_naive", "xent", "layernorm", "rmsnorm", "gelu", "gelu_tanh"),
    "attention": ("attention_prescale", "attention_postscale"),
}


class Ops(collections.namedtuple("Ops", "reduce dense nn attention")):
    """The ops of each bench family, in the table's order."""

    @classmethod
    def of(cls, info):
        rows = info.get("ops") if isinstance(info, dict) else None
        if not rows:
            return cls(**PUBLISHED_OPS)
        families = {family: [] for family in cls._fields}
        for row in rows:
            families.setdefault(row.get("bench_family"), []).append(row.get("name"))
        return cls(**{family: tuple(families[family]) for family in cls._fields})

    @property
    def compute(self):
        """The suites compared with an FMA roof (GFLOP/s), by size: the dense layers, and attention, made of its
        ISA's dense kernels."""
        return self.dense + self.attention

    def suite_of(self, op):
        """The benchmark suite an op's kernels are in: 'reduce' for the reductions, else the op itself."""
        return "reduce" if op in self.reduce else op


# What halfmap_bench does by op and ISA path, from `halfmap info --json` too: the ops its nn family compares with the
# copy roof (bench/bench_nn.cpp: all but the losses, which write nothing back; "ops", each row's kind), each path's
# arithmetic ("isa_arithmetic": include/halfmap/isa_arith.hpp) and the scaled modes ("scaled_modes"). An info.json
# published before those keys gets PUBLISHED_RULES, the facts as they were then (op_table_test checks them against
# `halfmap info --json`).
PUBLISHED_RULES = {
    "copy_ops": ("softmax", "softmax_naive", "xent", "layernorm", "rmsnorm", "gelu", "gelu_tanh"),
    "f16_per_op_isas": ("avx2", "avx512"),
    "f32_paths": {"avx512bf16": "avx512", "avx512fp16": "avx512", "neonfp16": "neon"},
    "scaled_modes": ("fp8_f32acc", "mxfp8_f32acc"),
}


class Rules(collections.namedtuple("Rules", "copy_ops f16_per_op_isas f32_paths scaled_modes")):
    """copy_ops: the suites compared with the copy roof (bytes read + written), the fp8 and MX conversions
    (FP8_OPS) among them; f16_per_op_isas: the paths whose f16 kernels round every f32 operation to fp16 (F16C),
    which the F16C round-trip roof bounds; f32_paths: {path: the path whose f32 kernels and f32 FMA it uses}, for
    the paths that have none of their own; scaled_modes: the modes that scale to fp8 before they compute."""

    @classmethod
    def of(cls, info):
        info = info if isinstance(info, dict) else {}
        rules = dict(PUBLISHED_RULES)
        if info.get("ops"):
            rules["copy_ops"] = tuple(row.get("name") for row in info["ops"]
                                      if row.get("bench_family") == "nn" and row.get("kind") != "loss")
        if info.get("isa_arithmetic"):
            rows = info["isa_arithmetic"]
            rules["f16_per_op_isas"] = tuple(row.get("name") for row in rows if row.get("f16_per_op"))
            rules["f32_paths"] = {row.get("name"): row.get("f32_path") for row in rows
                                  if row.get("f32_path") != row.get("name")}
        if info.get("scaled_modes"):
            rules["scaled_modes"] = tuple(info["scaled_modes"])
        rules["copy_ops"] += FP8_OPS
        return cls(**rules)

    def f32_path(self, isa):
        """The path whose f32 kernels a kernel of path `isa` is compared with: its own, or the one it extends."""
        return self.f32_paths.get(isa, isa)


def info_facts(info):
    """{kernel name: {op, mode, isa, storage}} from `halfmap info --json`."""
    kernels = info.get("kernels", []) if isinstance(info, dict) else []
    return {k["name"]: {f: k.get(f) for f in ("op", "mode", "isa", "storage") if k.get(f)}
            for k in kernels if isinstance(k, dict) and k.get("name")}


def cells_and_spreads(runs, medians, extremes):
    """({key: {counter: value}}, {key: {counter: (lowest, highest, repetitions)}}) from the repetitions (runs), the
    median aggregates and the min/max aggregates collected per key: a cell is its median aggregate if the run had
    repetitions, else the median of its iterations; a spread comes from the repetitions themselves when the JSON
    keeps more than one, else from the min and max aggregates."""
    cells, spreads = {}, {}
    for key in set(runs) | set(medians):
        spread = spread_of(runs.get(key, []), extremes.get(key, {}))
        if spread is not None:
            spreads[key] = spread
        if key in medians:
            cells[key] = medians[key]
            continue
        names = set().union(*(r.keys() for r in runs[key]))
        cells[key] = {c: statistics.median([r[c] for r in runs[key] if r.get(c) is not None])
                      for c in names if any(r.get(c) is not None for r in runs[key])}
    return cells, spreads


def spread_of(runs, extremes):
    """{counter: (lowest, highest, repetitions)} of one cell, or None with one repetition and no min/max."""
    if len(runs) > 1:
        names = set().union(*(r.keys() for r in runs))
        spread = {}
        for c in names:
            values = [r[c] for r in runs if r.get(c) is not None]
            if values:
                spread[c] = (min(values), max(values), len(values))
        return spread
    if "min" in extremes and "max" in extremes:
        lo, hi = extremes["min"], extremes["max"]
        n = int(lo.get("repetitions") or 0)
        return {c: (min(lo[c], hi[c]), max(lo[c], hi[c]), n) for c in lo
                if lo.get(c) is not None and hi.get(c) is not None}
    return None


class Results:
    """Every benchmark of the JSON: cells[(suite, kernel, arg)] = {counter: value} (the median aggregate if the run
    had repetitions, else the median of the iterations), skipped[(suite, kernel)] = message, kernels[suite] =
    [kernel, ...] in first-seen order (the registry's), args[suite] likewise, unreadable = [name, ...]; facts(kernel)
    says what a kernel is (info.json first, then the label). spreads[(suite, kernel, arg)] = {counter: (lowest,
    highest, repetitions)} where the cell has more than one repetition: from the repetitions themselves when the
    JSON keeps them, else from "min" and "max" aggregates."""

    def __init__(self, benchmarks, info=None):
        self.cells, self.skipped, self.kernels, self.args, self.unreadable = {}, {}, {}, {}, []
        self.skipped_at = {}  # (suite, kernel, arg) -> message
        self.labels = {}  # kernel -> parse_label of its first labelled benchmark
        self.spreads = {}
        # Every run's own cells and spreads, keyed (run, suite, kernel, arg): run is "" for the main JSON, else
        # the name bench_report.merge gave an extra run (its file name). A halfmap kernel timed again in an extra
        # run (tools/main.sh's capped peers' runs time the kernels of the ISA they are capped to beside them) is
        # only here: the tables show the main run's cell, and a ratio to a peer of that run takes both from it.
        self.run_cells, self.run_spreads = {}, {}
        self.info = info_facts(info)
        self.ops = Ops.of(info)
        self.rules = Rules.of(info)
        main, by_run = ({}, {}, {}), ({}, {}, {})
        for b in benchmarks or []:
            if isinstance(b, dict):
                self._add(b, main, by_run)
        self.cells, self.spreads = cells_and_spreads(*main)
        self.run_cells, self.run_spreads = cells_and_spreads(*by_run)
        self.runs = sorted({run for (run, _, _, _) in self.run_cells})  # "" (the main JSON) and the extra runs

    def _add(self, b, main, by_run):
        name = b.get("run_name") or b.get("name", "")
        parsed = parse_name(name)
        if parsed is None:
            self.unreadable.append(str(name))
            return
        suite, kernel, arg = parsed
        run = str(b.get(RUN_KEY) or "")
        if b.get("error_occurred") or b.get("skipped"):
            if not run or is_peer(kernel):
                self._register(b, suite, kernel, arg)
                message = str(b.get("error_message") or b.get("skip_message") or "skipped")
                self.skipped[(suite, kernel)] = self.skipped_at[(suite, kernel, arg)] = message
            return
        counters = {k: number(v) for k, v in b.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        targets = [(by_run, (run, suite, kernel, arg))]
        if not run or is_peer(kernel) or suite == "roof":  # an extra run's halfmap kernel stays in by_run only
            self._register(b, suite, kernel, arg)
            targets.append((main, (suite, kernel, arg)))
        for (runs, medians, extremes), key in targets:
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[key] = counters
                elif b.get("aggregate_name") in ("min", "max"):
                    extremes.setdefault(key, {})[b["aggregate_name"]] = counters
            else:
                runs.setdefault(key, []).append(counters)

    def _register(self, b, suite, kernel, arg):
        """Lists the kernel and arg of a benchmark of the tables (first seen, the registry's order) and its label."""
        self.kernels.setdefault(suite, [])
        if kernel not in self.kernels[suite]:
            self.kernels[suite].append(kernel)
        self.args.setdefault(suite, [])
        if arg not in self.args[suite]:
            self.args[suite].append(arg)
        if b.get("label") and kernel not in self.labels:
            self.labels[kernel] = parse_label(b["label"])

    def value(self, suite, kernel, arg, counter):
        return self.cells.get((suite, kernel, str(arg)), {}).get(counter)

    def spread(self, suite, kernel, arg, counter):
        """(lowest, highest, repetitions) of a counter over the cell's repetitions, or None with one (or none)."""
        return self.spreads.get((suite, kernel, str(arg)), {}).get(counter)

    def same_run(self, suite, kernel, other, arg, counter):
        """[(run, kernel's value, other's value)] for every run (main "" or an extra run's name) that timed both
        kernel and other at arg."""
        out = []
        for run in self.runs:
            a = self.run_cells.get((run, suite, kernel, str(arg)), {}).get(counter)
            b = self.run_cells.get((run, suite, other, str(arg)), {}).get(counter)
            if a and b:
                out.append((run, a, b))
        return out

    def run_spread(self, run, suite, kernel, arg, counter):
        """spread() of one run's own repetitions of a cell."""
        return self.run_spreads.get((run, suite, kernel, str(arg)), {}).get(counter)

    def repetitions(self):
        """The repetitions of the run: the count most cells have (1 when the run had none). A cell measured by
        both the main run and a capped peers' run (an OpenBLAS whose own choice here is its avx2 kernels) pools
        both runs' repetitions, so it is not the largest count."""
        counts = [max(n for (_, _, n) in cell.values()) for cell in self.spreads.values() if cell]
        if not counts:
            return 1
        tally = collections.Counter(counts)
        return max(tally, key=lambda n: (tally[n], n))  # the most common count, the larger one on a tie

    def why_missing(self, suite, kernel, arg=None):
        """Why suite/kernel/arg has no value: its skip message, 'not run at <arg>' or 'not in this run'."""
        if (suite, kernel) in self.skipped:
            return self.skipped[(suite, kernel)]
        if kernel in self.kernels.get(suite, []):
            return f"not run at {arg}" if arg is not None else "no result"
        return "not in this run"

    def facts(self, kernel):
        """Facts of a halfmap kernel: info.json's registry entry, completed by the benchmark label; UNKNOWN for a
        peer or a kernel neither describes."""
        if is_peer(kernel):
            return UNKNOWN
        label = self.labels.get(kernel, {})
        merged = {**label, **self.info.get(kernel, {})}
        return Facts(*(merged.get(f) for f in Facts._fields))

    def storage(self, kernel):
        """The storage type that decides 'the same work': 'f32', 'f16' or 'bf16', of halfmap kernels (their facts)
        and peers (their names' <dtype>)."""
        if is_peer(kernel):
            return peer_label(kernel).rsplit("_", 1)[-1]
        return self.facts(kernel).storage

    def isa_and_arithmetic(self, kernel):
        """(isa, arithmetic) of a halfmap kernel (its facts) or a peer (its label's isa= and mode=, which
        halfmap_bench writes where the library says; bench/bench_peers.cpp); None where unknown."""
        facts = self.labels.get(kernel, {}) if is_peer(kernel) else self.facts(kernel)._asdict()
        return facts.get("isa"), ARITHMETIC.get(facts.get("mode"))

    def of_op(self, op, isa_ref=False):
        """The halfmap kernels of `op` in its suite, in the run's order; without isa ref unless isa_ref."""
        return [k for k in self.kernels.get(self.ops.suite_of(op), []) if not is_peer(k) and self.facts(k).op == op
                and (isa_ref or self.facts(k).isa != "ref")]

    def undescribed(self):
        """Kernels (not peers, not roofs) that neither info.json nor a label describes: left out of the tables."""
        return [k for suite, ks in self.kernels.items() if suite != "roof" for k in ks
                if not is_peer(k) and self.facts(k).op is None]
