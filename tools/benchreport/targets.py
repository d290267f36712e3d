"""The project's performance targets (issue list), each with its ratio in this run, met or missed and by how much:

    1. f32 dense >= 0.85x the best f32 peer, at 1024³;
    2. f16_f32acc dense >= 0.9x halfmap's f32 dense, ISA by ISA;
    3. bf16_f32acc dense >= 0.9x oneDNN's bf16 matmul;
    4. the per-operation f16 dense kernels >= 1.5x XNNPACK's f16 fully-connected, at 256³, 512³ and 1024³;
    5. the memory-bound kernels that only read (reductions, mse) >= 0.85x the read roof at dram (not the scaled
       fp8 modes, whose kernels quantise their float32 input before they reduce: issue 25);
    6. f32 softmax >= 1.5x XNNPACK's f32 softmax at each level;
    7. every f32, f16_f32acc and bf16_f32acc dense path >= 1.0x the best peer of the same ISA and arithmetic, at
       256³, 512³ and 1024³ (issue 14: peers capped to each ISA; the median of the repetitions where the run has
       them). A peer capped in a run of its own is compared with the kernel timed in that run too (tools/main.sh
       times the kernels of the capped ISA beside the peers), so that both medians come from the same moments;
       the best peer is the one the kernel compares worst with.
    8. `halfmap diagnose` of 2^20 x 100 float32 rows in under 10 s wall, with a peak resident size under 1.5x the
       input files (diagnose.py, from tools/diagnose_bench.py's JSON); and `halfmap diagnose --model` of a 4-layer
       MLP of width 512 (LayerNorm, GELU) on 2^16 x 256 float32 rows, all modes, in under 15 s wall (issue 24);
    9. f32 softmax and xent >= 0.85x the copy roof at dram (they write as many bytes as they read: issue 14), and
       their fp16 and bf16 storage kernels >= 1.8x the elements/s of the f32 kernel of the same op and ISA (the
       ISA it extends for avx512bf16, avx512fp16 and neonfp16; else the fastest f32 one);
   10. the per-operation f16 kernels of avx2 and avx512 (F16C) >= 0.9x the F16C round-trip roof of their ISA:
       dense at 1024³, sum, sumsq and dot at l2 (at dram memory binds them first);
   11. the fastest halfmap softmax of each storage type (f32, bf16, f16) >= 1.0x oneDNN's softmax of that type at
       dram (issue 14);
   12. every halfmap dense kernel, forward and backward, on 2 threads >= 0.9x twice its speed on 1 (threads.py);
   13. the native fp16 dense kernels (avx512fp16, neonfp16), forward and backward, >= 0.8x their fp16 FMA roof at
       512³ and 1024³ and >= 0.5x at 64³ to 256³ (issue 21);
   14. every fp16-accumulating reduction (sum, sumsq, dot of mode f16: per-operation on F16C, native on
       avx512fp16 and neonfp16) as fast at l1 as at l2 (l1 / l2 >= 1.0), and >= 0.8x the roof that bounds it at
       l1 and at l2: the F16C round-trip roof for the per-operation kernels, the read roof for the native ones
       (issue 21);
   15. target 7 on all cores too: every f32, f16_f32acc and bf16_f32acc dense forward path on the most threads
       the run timed >= 1.0x the best peer of its ISA and arithmetic at the same count (dense_fwd_threads, 1024³;
       issue 21).
   16. layernorm, rmsnorm (forward, rows of 1024) and GELU (both forms) as target 9: f32 >= 0.85x the copy roof
       at dram, fp16 and
       bf16 storage >= 1.5x the elements/s of the f32 kernel of the same op and ISA (issue 23).
   17. attention (one head, d = 64, forward and backward, both placements of 1/√d) at len 512 >= 0.5x the roof of
       its arithmetic: the FMA roof of its ISA for the f32, f16_f32acc, bf16_f32acc and native f16 kernels, the
       F16C round-trip roof for the per-operation f16 kernels of avx2 and avx512 (issue 23).
   18. the fastest halfmap layernorm of each storage type oneDNN has (f32, bf16) >= 1.0x oneDNN's layer
       normalisation of that type at dram, elements/s, forward, rows of 1024 (issue 23).

Every ratio is of the medians of the run's repetitions; met or missed judges that median ratio alone.
"""

from . import diagnose as diagnose_bench
from . import threads as dense_threads
from .markdown import LEVELS, fmt_rate, fmt_spread, ratio_spread
from .peers import Peers
from .results import is_peer, peer_kernel
from .roofs import F16C_OPS, bytes_moved, compute_roof, copy_fraction, f16c_fraction, roof_fraction

TARGET_SIZE = "1024"
SAME_ISA_SIZES = ("256", "512", "1024")
SAME_ISA_MODES = ("f32", "f16_f32acc", "bf16_f32acc")
ROOF_TARGET = 0.85
ROOF_TARGET_MORE_OPS = ("mse",)  # target 5: the reductions and these
COPY_TARGET_OPS = ("softmax", "xent")
HALF_SPEEDUP = 1.8  # fp16/bf16 storage moves half the bytes of f32 per element
NORM_TARGET_OPS = ("layernorm", "rmsnorm", "gelu", "gelu_tanh")
NORM_HALF_SPEEDUP = 1.5
F16C_TARGET = 0.9
REDUCE_F16C_LEVEL = "l2"
XNNPACK_SOFTMAX = 1.5
ONEDNN_SOFTMAX = 1.0
ONEDNN_SOFTMAX_STORAGE = ("f32", "bf16", "f16")
ONEDNN_LAYERNORM_STORAGE = ("f32", "bf16")  # oneDNN 2.6 has no f16 layer normalisation on CPUs
GFLOPS = "GFLOP/s"


def judge(ratio, minimum, missing):
    if missing:
        return f"not measured: {missing}"
    if ratio >= minimum:
        return "met"
    short = minimum - ratio
    return f"**missed** by {short:.2f} ({short / minimum:.0%} short)"


def best_halfmap(results, suite, mode, arg, counter, isa=None):
    """(value, kernel) of the fastest non-ref halfmap kernel of `mode` (e.g. 'f32', 'f16_f32acc') in suite at arg,
    optionally of one ISA; (None, why) if none has a value."""
    found, why = [], "no such kernel in this run"
    for k in results.kernels.get(suite, []):
        facts = results.facts(k)
        if is_peer(k) or facts.mode != mode or facts.isa == "ref" or (isa and facts.isa != isa):
            continue
        v = results.value(suite, k, arg, counter)
        if v:
            found.append((v, k))
        else:
            why = f"`{k}`: {results.why_missing(suite, k, arg)}"
    return max(found) if found else (None, why)


def of_mode(results, suite, mode):
    """The non-ref halfmap kernels of `mode` in suite, in the run's order."""
    return [k for k in results.kernels.get(suite, []) if not is_peer(k) and results.facts(k).mode == mode
            and results.facts(k).isa != "ref"]


class Rows(list):
    """The rows [target, measured, ratio, needed, result] of the table. A value and its base are medians over the
    run's repetitions; with their spreads ((lowest, highest, repetitions), Results.spread) the measured column shows
    each one's [lowest–highest] and the ratio its range over those extremes. The result judges the median ratio."""

    def add(self, what, value, base, base_what, minimum, missing, unit=GFLOPS, spread=None, base_spread=None):
        ratio = None if missing else value / base
        measured = "-" if missing else (f"{fmt_rate(value)}{fmt_spread(spread)} / {fmt_rate(base)}"
                                        f"{fmt_spread(base_spread)} {unit} ({base_what})")
        shown = "-" if missing else f"{ratio:.3f}{fmt_spread(ratio_spread(value, spread, base, base_spread), fmt2)}"
        self.append([what, measured, shown, f"≥ {minimum:g}", judge(ratio, minimum, missing)])


def fmt2(x):
    return f"{x:.2f}"


def dense_targets(rows, results, peers):
    """Targets 1 to 4: the dense forward kernels at TARGET_SIZE against peers and against halfmap's f32 (target 4 at
    SAME_ISA_SIZES)."""
    fwd, s, flops = "dense_fwd", TARGET_SIZE, "flops_per_second"
    value, kernel = best_halfmap(results, fwd, "f32", s, flops)
    base, peer, _ = peers.best("f32", s, flops)
    why = None if base else peers.why_none("f32")
    rows.add(f"f32 dense ≥ 0.85× the best f32 peer, {s}³: " + (f"`{kernel}`" if value else "best f32 kernel"),
             value, base, peer, 0.85, (None if value else kernel) or why,
             spread=results.spread(fwd, kernel, s, flops),
             base_spread=results.spread(fwd, peer_kernel(peer, fwd), s, flops))
    for isa in [results.facts(k).isa for k in of_mode(results, fwd, "f16_f32acc")] or [None]:
        value, kernel = best_halfmap(results, fwd, "f16_f32acc", s, flops, isa)
        base, base_kernel = best_halfmap(results, fwd, "f32", s, flops, isa)
        missing = (None if value else kernel) or (None if base else base_kernel)
        rows.add(f"f16_f32acc dense ≥ 0.9× halfmap's f32 dense, {s}³" + (f", {isa}" if isa else ""), value, base,
                 f"`{base_kernel}`" if base else "", 0.9, missing, spread=results.spread(fwd, kernel, s, flops),
                 base_spread=results.spread(fwd, base_kernel, s, flops))
    value, kernel = best_halfmap(results, fwd, "bf16_f32acc", s, flops)
    onednn = peer_kernel("onednn_bf16", fwd)
    base = results.value(fwd, onednn, s, flops)
    why = None if base else peers.why_missing(onednn, s)
    rows.add(f"bf16_f32acc dense ≥ 0.9× oneDNN bf16 matmul, {s}³: "
             + (f"`{kernel}`" if value else "bf16_f32acc kernel"),
             value, base, "onednn_bf16", 0.9, (None if value else kernel) or why,
             spread=results.spread(fwd, kernel, s, flops), base_spread=results.spread(fwd, onednn, s, flops))
    xnn = peer_kernel("xnnpack_f16", fwd)
    for s in SAME_ISA_SIZES:  # issue 14: at every size from 256³
        base = results.value(fwd, xnn, s, flops)
        why = None if base else peers.why_missing(xnn, s)
        for kernel in of_mode(results, fwd, "f16") or ["f16 dense kernel"]:
            value = results.value(fwd, kernel, s, flops)
            rows.add(f"f16 per-op dense ≥ 1.5× XNNPACK f16 fully-connected, {s}³: `{kernel}`", value, base,
                     "xnnpack_f16", 1.5, (None if value else results.why_missing(fwd, kernel, s)) or why,
                     spread=results.spread(fwd, kernel, s, flops), base_spread=results.spread(fwd, xnn, s, flops))


def same_isa_targets(rows, results, peers):
    """Target 7: each halfmap dense path against the best peer of its own ISA and arithmetic."""
    fwd = "dense_fwd"
    kernels = [k for mode in SAME_ISA_MODES for k in of_mode(results, fwd, mode)]
    for kernel in kernels or ["f32 dense kernel"]:
        isa, arith = results.isa_and_arithmetic(kernel)
        for s in SAME_ISA_SIZES:
            add_same_isa(rows, results, peers, f"dense ≥ 1.0× the best {isa} {arith} peer, {s}³: `{kernel}`",
                         fwd, kernel, s)


def add_same_isa(rows, results, peers, what, suite, kernel, arg):
    """A row of targets 7 and 15: the kernel against the peer of its ISA and arithmetic it compares worst with,
    both rates from one run wherever a run timed both (Peers.same_isa_pair): a capped peers' run names its file."""
    flops = "flops_per_second"
    pair = peers.same_isa_pair(kernel, arg, flops)
    missing = (None if pair.value else results.why_missing(suite, kernel, arg)) or pair.why
    where = f"; both from {pair.run}" if pair.run else ""
    rows.add(what, pair.value, pair.base, f"{pair.peer}{where}", 1.0, missing, spread=pair.spread,
             base_spread=pair.base_spread)


def memory_targets(rows, results, roofs):
    """Target 5: the memory-bound kernels at dram against the read roof."""
    roof = roofs.read.get("dram")
    for op in results.ops.reduce + ROOF_TARGET_MORE_OPS:
        suite = results.ops.suite_of(op)
        for kernel in results.of_op(op):
            if results.facts(kernel).mode in results.rules.scaled_modes:
                continue
            value = results.value(suite, kernel, "dram", "bytes_per_second")
            frac, missing = roof_fraction(results, roofs, suite, kernel, "dram")
            spread = results.spread(suite, kernel, "dram", "bytes_per_second")
            frac_spread = (spread[0] * frac / value, spread[1] * frac / value) if spread and value and frac else None
            rows.append([f"{op} ≥ 0.85× the read roof at dram: `{kernel}`",
                         "-" if missing else f"{fmt_rate(value)}{fmt_spread(spread)} / {fmt_rate(roof)} GB/s",
                         "-" if missing else f"{frac:.3f}{fmt_spread(frac_spread, fmt2)}", f"≥ {ROOF_TARGET:g}",
                         judge(frac, ROOF_TARGET, missing)])


def copy_targets(rows, results, roofs, ops=COPY_TARGET_OPS, speedup=HALF_SPEEDUP):
    """Targets 9 and 16: `ops` at dram against the copy roof (f32) and against f32's elements/s (fp16, bf16)."""
    roof = roofs.copy.get("dram")
    for op in ops:
        for kernel in of_mode(results, op, "f32"):
            value = bytes_moved(results, op, kernel, "dram")
            frac, missing = copy_fraction(results, roofs, op, kernel, "dram")
            rows.append([f"f32 {op} ≥ 0.85× the copy roof at dram: `{kernel}`",
                         "-" if missing else f"{fmt_rate(value)} / {fmt_rate(roof)} GB/s read + written",
                         "-" if missing else f"{frac:.3f}", f"≥ {ROOF_TARGET:g}", judge(frac, ROOF_TARGET, missing)])
        for mode in ("f16_f32acc", "f16", "bf16_f32acc"):
            for kernel in of_mode(results, op, mode):
                isa = results.rules.f32_path(results.facts(kernel).isa)
                base, base_kernel = best_halfmap(results, op, "f32", "dram", "elements_per_second", isa)
                if not base:
                    base, base_kernel = best_halfmap(results, op, "f32", "dram", "elements_per_second")
                value = results.value(op, kernel, "dram", "elements_per_second")
                missing = (None if value else results.why_missing(op, kernel, "dram")) or \
                    (None if base else base_kernel)
                rows.add(f"{results.storage(kernel)} {op} ≥ {speedup:g}× f32's elements/s at dram: `{kernel}`",
                         value, base, f"`{base_kernel}`" if base else "", speedup, missing, "Gelem/s")


def f16c_targets(rows, results, roofs):
    """Target 10: the per-operation f16 kernels of avx2 and avx512 against the F16C round-trip roof of their ISA."""
    # Reductions at l2: at dram their bytes bind them first (an fp16 sum at the read roof does 1 rounded add per
    # 2 bytes, about a third of the F16C roof on the development machine), so only l2 tests the arithmetic.
    cases = [("dense_fwd", TARGET_SIZE, "dense", f"{TARGET_SIZE}³")] + [
        ("reduce", REDUCE_F16C_LEVEL, op, REDUCE_F16C_LEVEL) for op in F16C_OPS]
    for suite, arg, what, where in cases:
        for kernel in of_mode(results, suite, "f16"):
            facts = results.facts(kernel)
            if facts.isa not in results.rules.f16_per_op_isas or (suite == "reduce" and facts.op != what):
                continue
            frac, missing = f16c_fraction(results, roofs, suite, kernel, arg)
            roof = roofs.f16c.get(facts.isa)
            rows.append([f"f16 per-op {what} ≥ 0.9× the F16C round-trip roof, {where}: `{kernel}`",
                         "-" if missing else f"{frac:.3f} of {fmt_rate(roof)} {GFLOPS} (f16c {facts.isa})",
                         "-" if missing else f"{frac:.3f}", f"≥ {F16C_TARGET:g}", judge(frac, F16C_TARGET, missing)])


def softmax_targets(rows, results, peers):
    """Target 6: f32 softmax against XNNPACK's f32 softmax, at each level."""
    xnn = peer_kernel("xnnpack_f32", "softmax")
    kernels = of_mode(results, "softmax", "f32")
    for level in LEVELS:
        base = results.value("softmax", xnn, level, "elements_per_second")
        why = None if base else peers.why_missing(xnn, level)
        for kernel in kernels or ["f32 softmax kernel"]:
            value = results.value("softmax", kernel, level, "elements_per_second")
            rows.add(f"f32 softmax ≥ {XNNPACK_SOFTMAX:g}× XNNPACK f32 softmax, {level}: `{kernel}`", value, base,
                     "xnnpack_f32", XNNPACK_SOFTMAX,
                     (None if value else results.why_missing("softmax", kernel, level)) or why, "Gelem/s")


def onednn_softmax_targets(rows, results, peers, op="softmax", what="softmax", storages=ONEDNN_SOFTMAX_STORAGE):
    """Targets 11 and 18: the fastest halfmap kernel of `op` of each storage type against oneDNN's of that type, at
    dram."""
    eps = "elements_per_second"
    for storage in storages:
        peer = peer_kernel(f"onednn_{storage}", op)
        base = results.value(op, peer, "dram", eps)
        kernels = [k for k in results.kernels.get(op, []) if not is_peer(k)
                   and results.storage(k) == storage and results.facts(k).isa != "ref"]
        found = [(v, k) for v, k in ((results.value(op, k, "dram", eps), k) for k in kernels) if v]
        value, kernel = max(found) if found else (None, None)
        missing = (None if value else (f"`{kernels[0]}`: {results.why_missing(op, kernels[0], 'dram')}"
                                       if kernels else f"no {storage} {op} kernel in this run")) or \
            (None if base else peers.why_missing(peer, "dram"))
        rows.add(f"{storage} {op} ≥ {ONEDNN_SOFTMAX:g}× oneDNN {storage} {what} at dram: "
                 + (f"`{kernel}`" if kernel else f"fastest {storage} {op} kernel"),
                 value, base, f"onednn_{storage}", ONEDNN_SOFTMAX, missing, "Gelem/s",
                 spread=results.spread(op, kernel, "dram", eps) if kernel else None,
                 base_spread=results.spread(op, peer, "dram", eps))


NATIVE_F16_ISAS = ("avx512fp16", "neonfp16")
NATIVE_DENSE_TARGETS = (("64", 0.5), ("128", 0.5), ("256", 0.5), ("512", 0.8), ("1024", 0.8))
REDUCE_ROOF_TARGET = 0.8


def native_dense_targets(rows, results, roofs):
    """Target 13: the native fp16 dense kernels against their fp16 FMA roof."""
    for suite in ("dense_fwd", "dense_bwd"):
        for kernel in of_mode(results, suite, "f16"):
            if results.facts(kernel).isa not in NATIVE_F16_ISAS:
                continue
            for size, minimum in NATIVE_DENSE_TARGETS:
                frac, missing = roof_fraction(results, roofs, suite, kernel, size)
                rows.append([f"native fp16 {suite} ≥ {minimum:g}× the fp16 FMA roof, {size}³: `{kernel}`",
                             "-" if missing else f"{fmt_rate(results.value(suite, kernel, size, 'flops_per_second'))}"
                             f" {GFLOPS}, {frac:.3f} of the roof", "-" if missing else f"{frac:.3f}",
                             f"≥ {minimum:g}", judge(frac, minimum, missing)])


def short_reduction_targets(rows, results, roofs):
    """Target 14: the fp16-accumulating reductions at l1 as fast as at l2, and near their bounding roof at both."""
    for kernel in of_mode(results, "reduce", "f16"):
        facts = results.facts(kernel)
        if facts.op not in F16C_OPS:
            continue
        per_op = facts.isa in results.rules.f16_per_op_isas
        l1 = results.value("reduce", kernel, "l1", "elements_per_second")
        l2 = results.value("reduce", kernel, "l2", "elements_per_second")
        missing = None if l1 and l2 else results.why_missing("reduce", kernel, "l1" if not l1 else "l2")
        rows.add(f"fp16-accumulating {facts.op} as fast at l1 as at l2: `{kernel}`", l1, l2, "l2", 1.0, missing,
                 "Gelem/s", spread=results.spread("reduce", kernel, "l1", "elements_per_second"),
                 base_spread=results.spread("reduce", kernel, "l2", "elements_per_second"))
        for level in ("l1", "l2"):
            if per_op:
                frac, missing = f16c_fraction(results, roofs, "reduce", kernel, level)
                roof_what = f"the F16C round-trip roof (f16c {facts.isa})"
            else:
                frac, missing = roof_fraction(results, roofs, "reduce", kernel, level)
                roof_what = "the read roof"
            rows.append([f"fp16-accumulating {facts.op} ≥ {REDUCE_ROOF_TARGET:g}× {roof_what}, {level}: `{kernel}`",
                         "-" if missing else f"{frac:.3f} of the roof", "-" if missing else f"{frac:.3f}",
                         f"≥ {REDUCE_ROOF_TARGET:g}", judge(frac, REDUCE_ROOF_TARGET, missing)])


def all_cores_targets(rows, results, context):
    """Target 15: target 7 on the most threads the run timed (dense_fwd_threads at 1024³)."""
    suite = "dense_fwd_threads"
    counts = sorted((a for a in results.args.get(suite, []) if str(a).isdigit()), key=int)
    if not counts:
        return
    most = counts[-1]
    peers = Peers(results, context, suite)
    for mode in SAME_ISA_MODES:
        for kernel in of_mode(results, suite, mode):
            isa, arith = results.isa_and_arithmetic(kernel)
            add_same_isa(rows, results, peers, f"dense ≥ 1.0× the best {isa} {arith} peer on {most} threads, "
                         f"1024³: `{kernel}`", suite, kernel, most)


ATTENTION_LEN = "512"
ATTENTION_TARGET = 0.5


def attention_targets(rows, results, roofs):
    """Target 17: every attention kernel at ATTENTION_LEN against the roof of its arithmetic."""
    for op in results.ops.attention:
        for kernel in [k for k in results.kernels.get(op, []) if not is_peer(k) and results.facts(k).isa != "ref"]:
            facts = results.facts(kernel)
            per_op = facts.mode == "f16" and facts.isa in results.rules.f16_per_op_isas
            if per_op:
                frac, missing = f16c_fraction(results, roofs, op, kernel, ATTENTION_LEN)
                roof_what = f"the F16C round-trip roof (f16c {facts.isa})"
            else:
                frac, missing = roof_fraction(results, roofs, op, kernel, ATTENTION_LEN)
                isa = compute_roof(results, roofs, op, kernel)[0]
                roof_what = f"the FMA roof (fma/{isa})" if isa else "the FMA roof"
            rate = results.value(op, kernel, ATTENTION_LEN, "flops_per_second")
            rows.append([f"{op} ≥ {ATTENTION_TARGET:g}× {roof_what}, len {ATTENTION_LEN}, d 64: `{kernel}`",
                         "-" if missing else f"{fmt_rate(rate)} {GFLOPS}, {frac:.3f} of the roof",
                         "-" if missing else f"{frac:.3f}", f"≥ {ATTENTION_TARGET:g}",
                         judge(frac, ATTENTION_TARGET, missing)])


def target_rows(results, roofs, context, diagnose=None):
    """Rows [target, measured, ratio, needed, result] for every target the issues list, from this run (`diagnose`:
    the diagnose benchmark's JSON, or None when it did not run)."""
    rows = Rows()
    dense_targets(rows, results, Peers(results, context, "dense_fwd"))
    same_isa_targets(rows, results, Peers(results, context, "dense_fwd"))
    memory_targets(rows, results, roofs)
    copy_targets(rows, results, roofs)
    copy_targets(rows, results, roofs, NORM_TARGET_OPS, NORM_HALF_SPEEDUP)
    softmax_targets(rows, results, Peers(results, context, "softmax"))
    onednn_softmax_targets(rows, results, Peers(results, context, "softmax"))
    onednn_softmax_targets(rows, results, Peers(results, context, "layernorm"), "layernorm",
                           "layer normalisation", ONEDNN_LAYERNORM_STORAGE)
    f16c_targets(rows, results, roofs)
    native_dense_targets(rows, results, roofs)
    short_reduction_targets(rows, results, roofs)
    all_cores_targets(rows, results, context)
    attention_targets(rows, results, roofs)
    rows += dense_threads.target_rows(results)
    rows += diagnose_bench.target_rows(diagnose)
    return rows
