"""The roofs of one run and each kernel's fraction of its roof.

The roof fraction is one definition everywhere: a kernel's rate / the roof, the best this core did in the same
run: the higher of the measurement at its start (halfmap_bench puts it in the context,
roof_read_<level>_bytes_per_second, roof_copy_<level>_bytes_per_second, roof_fma_<isa>_flops_per_second and
roof_f16c_<isa>_flops_per_second, and each kernel's counter roof_fraction divides by it) and the fastest repetition
of the roof/* benchmark that measures the same loop again during the run. A counter is rescaled to that roof. For
a JSON without startup roofs (older runs) the roof/* benchmarks alone give the roofs, and the report says so.

softmax, softmax_naive and xent write as many bytes as they read, so their roof is the copy roof of the level
(bytes read + written per second). A JSON from before that rule (label roof=read/<level>) is converted: its
bytes written are elements_per_second x the storage size.

The per-operation f16 kernels of avx2 and avx512 (mode f16, F16C) are also compared with the F16C round-trip roof
of their ISA (an FMA rounded to fp16 and back after every step, the faster of chains in registers and fp16 chains
in L1): f16c_fraction.

Which FMA roof a dense kernel is compared with is halfmap_bench's rule (bench/bench_roof.cpp, compute_roof_isa),
read from the benchmark label (roof=fma/<isa>, roof=none for ref). A JSON older than the label still says it in
numbers: flops_per_second / roof_fraction is the roof the benchmark divided by, which is one of the startup roofs
of the context (printed there to 6 significant digits). Peers, whose ISA is unknown, are compared with the best
roof of their arithmetic on this machine.
"""

import re

from .results import is_peer, number

STORAGE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
F16C_OPS = ("sum", "sumsq", "dot")  # one rounded add or FMA per element; maxabs rounds nothing
F16C_WHAT = {
    "avx2": "vfmadd*ps + vcvtps2ph + vcvtph2ps ymm, each FMA rounded to fp16 and back",
    "avx512": "vfmadd*ps + vcvtps2ph + vcvtph2ps zmm, each FMA rounded to fp16 and back",
}

# Startup roofs are printed with 6 significant digits ({:.6g}): a kernel's rate / its roof_fraction is within
# 5e-6 of the roof it divided by; 1e-5 accepts that and still tells apart roofs 1.7e-5 apart (Zen 4's avx2 and
# avx512 f32 FMA).
ROOF_MATCH = 1e-5

# The instruction of each ISA path's FMA roof (bench/roof/roof_<isa>.cpp), one per path but ref: op_table_test checks
# them against `halfmap info --json`'s "isa_paths".
FMA_WHAT = {
    "avx2": "vfmadd*ps ymm, f32, 12 chains",
    "avx512": "vfmadd*ps zmm, f32, 16 chains",
    "avx512bf16": "vdpbf16ps zmm, bf16 pairs into f32, 16 chains",
    "avx512fp16": "vfmadd*ph zmm, fp16, 16 chains",
    "neon": "fmla .4s, f32, 16 chains",
    "neonfp16": "fmla .8h, fp16, 16 chains",
    "neonfhm": "FMLAL/FMLAL2 .4s, fp16 products into f32, 16 chains",
    "neonbf16": "BFMMLA .4s, 2×4 by 4×2 bf16 blocks into f32, 16 chains",
    "sve": "FMLA z.s, f32 at the running vector length, 8 chains",
}


KINDS = {"read": "bytes_per_second", "copy": "bytes_per_second", "fma": "flops_per_second",
         "f16c": "flops_per_second"}


class Roofs:
    """The roofs of this run: read[level], copy[level], fma[isa] and f16c[isa] from the context (measured at
    startup), else from the roof/* benchmarks of the same JSON (source says which)."""

    def __init__(self, context, results):
        self.read, self.copy, self.fma, self.f16c, self.source = {}, {}, {}, {}, {}
        self.startup = {}  # (kind, arg) -> the startup measurement: what the roof_fraction counters divided by
        for key, value in context.items():
            m = re.match(r"^roof_(read|copy|fma|f16c)_(\w+)_(bytes|flops)_per_second$", key)
            if m and number(value):
                getattr(self, m.group(1))[m.group(2)] = number(value)
                self.source[(m.group(1), m.group(2))] = "startup"
                self.startup[(m.group(1), m.group(2))] = number(value)
        # The roof is the best this core did: the higher of the startup measurement and the fastest repetition of
        # the roof/* benchmark, which runs the same loop again later in the run. On a shared machine one
        # measurement can land in a slow moment (a DRAM roof below the run's own f32 sums); the best of several
        # spread over the run is a property of the machine, not of when it was measured.
        for kernel in results.kernels.get("roof", []):
            if kernel not in KINDS:
                continue
            found = getattr(self, kernel)
            for arg in results.args.get("roof", []):
                v = results.value("roof", kernel, arg, KINDS[kernel])
                if not v:
                    continue
                spread = results.spread("roof", kernel, arg, KINDS[kernel])
                best = max(v, spread[1]) if spread else v
                if arg not in found or best > found[arg]:
                    found[arg], self.source[(kernel, arg)] = best, "benchmark"

    def counter_scale(self, kind, arg):
        """What turns a kernel's roof_fraction counter (its rate / the startup roof) into its fraction of the roof
        used here: startup / roof (1 where the startup measurement is the roof or is unknown)."""
        start, roof = self.startup.get((kind, str(arg))), getattr(self, kind).get(str(arg))
        return start / roof if start and roof else 1.0

    def any_from_benchmarks(self):
        """Whether some roof has no startup measurement (a JSON from before them)."""
        return any(key not in self.startup for key in self.source)

    def best_fma(self, family):
        """The FMA roof a peer of dtype `family` is compared with (its ISA is unknown: the best this machine has for
        that arithmetic): bf16 -> vdpbf16ps, f16 -> an fp16 FMA, else and as fallback the best f32 FMA."""
        wanted = {"bf16": ("avx512bf16",), "f16": ("avx512fp16", "neonfp16")}.get(family, ())
        for isa in wanted:
            if isa in self.fma:
                return self.fma[isa], isa
        f32 = [(self.fma[i], i) for i in ("avx512", "avx2", "neon") if i in self.fma]
        return max(f32) if f32 else (None, None)

    def divided_by(self, results, suite, kernel):
        """The startup FMA roof that the kernel's roof_fraction counters divided by (a JSON without labels), or
        None when no cell has both counters or not exactly one roof matches."""
        for arg in results.args.get(suite, []):
            cell = results.cells.get((suite, kernel, arg), {})
            rate, frac = cell.get("flops_per_second"), cell.get("roof_fraction")
            if rate and frac:
                roof = rate / frac
                isas = [isa for (kind, isa), v in self.startup.items()
                        if kind == "fma" and abs(roof / v - 1) <= ROOF_MATCH]
                return isas[0] if len(isas) == 1 else None
        return None


def compute_roof(results, roofs, suite, kernel):
    """(isa, None) of the FMA roof a dense kernel is compared with, or (None, why): its label's roof=fma/<isa>
    (roof=none: ref), else the roof its counters divided by, else unknown. Peers: their label's roof=fma/<isa> when
    this run measured it, else the best of their arithmetic."""
    if is_peer(kernel):
        roof = results.labels.get(kernel, {}).get("roof", "")
        if roof.startswith("fma/") and roof[len("fma/"):] in roofs.fma:
            return roof[len("fma/"):], None
        isa = roofs.best_fma(results.storage(kernel))[1]
        return (isa, None) if isa else (None, "roof not measured")
    facts = results.facts(kernel)
    if facts.roof == "none" or (facts.roof is None and facts.isa == "ref"):
        return None, "no roof for ref"
    if facts.roof and facts.roof.startswith("fma/"):
        return facts.roof[len("fma/"):], None
    isa = roofs.divided_by(results, suite, kernel)
    return (isa, None) if isa else (None, "roof unknown")


def roof_fraction(results, roofs, suite, kernel, arg):
    """(fraction, None) or (None, why): the counter roof_fraction, else the rate / the matching roof."""
    cell = results.cells.get((suite, kernel, str(arg)))
    if cell is None:
        return None, results.why_missing(suite, kernel, arg)
    if suite in results.rules.copy_ops:
        return copy_fraction(results, roofs, suite, kernel, arg)
    if suite in results.ops.compute:
        isa, why = compute_roof(results, roofs, suite, kernel)
        if cell.get("roof_fraction") is not None:
            return cell["roof_fraction"] * (roofs.counter_scale("fma", isa) if isa else 1.0), None
        if isa is None:
            return None, why
        roof, rate = roofs.fma.get(isa), cell.get("flops_per_second")
    elif cell.get("roof_fraction") is not None:
        return cell["roof_fraction"] * roofs.counter_scale("read", arg), None
    else:
        roof, rate = roofs.read.get(str(arg)), cell.get("bytes_per_second")
    if not roof or rate is None:
        return None, "roof not measured"
    return rate / roof, None


def bytes_moved(results, suite, kernel, arg):
    """Bytes read + written per second by a softmax or xent kernel: its counter bytes_moved_per_second, else (a JSON
    from before it) bytes_per_second + elements_per_second x the storage size; None where neither is there."""
    moved = results.value(suite, kernel, arg, "bytes_moved_per_second")
    if moved:
        return moved
    read = results.value(suite, kernel, arg, "bytes_per_second")
    elements = results.value(suite, kernel, arg, "elements_per_second")
    size = STORAGE_BYTES.get(results.storage(kernel))
    return read + elements * size if read and elements and size else None


def copy_fraction(results, roofs, suite, kernel, arg):
    """(fraction, None) or (None, why) of a softmax or xent kernel against the copy roof of level `arg`: the counter
    roof_fraction where its label says roof=copy/<level>, else bytes read + written / the copy roof."""
    cell = results.cells.get((suite, kernel, str(arg)))
    if cell is None:
        return None, results.why_missing(suite, kernel, arg)
    if cell.get("roof_fraction") is not None and (results.facts(kernel).roof or "").startswith("copy/"):
        return cell["roof_fraction"] * roofs.counter_scale("copy", arg), None
    roof, moved = roofs.copy.get(str(arg)), bytes_moved(results, suite, kernel, arg)
    if not roof or moved is None:
        return None, "copy roof not measured" if not roof else "no bytes_per_second"
    return moved / roof, None


def f16c_fraction(results, roofs, suite, kernel, arg):
    """(fraction, None) or (None, why) of a per-operation f16 kernel of avx2 or avx512 (a dense one, or sum, sumsq
    or dot) against the F16C round-trip roof of its ISA: the counter f16c_roof_fraction, else its flops per second
    (reductions: 2 per element, one rounded operation each) / the roof."""
    cell = results.cells.get((suite, kernel, str(arg)))
    if cell is None:
        return None, results.why_missing(suite, kernel, arg)
    isa = results.facts(kernel).isa
    if cell.get("f16c_roof_fraction") is not None:
        return cell["f16c_roof_fraction"] * roofs.counter_scale("f16c", isa), None
    roof = roofs.f16c.get(isa)
    if not roof:
        return None, f"F16C roof of {isa} not measured"
    if suite in results.ops.compute:
        rate = cell.get("flops_per_second")
    else:
        rate = 2 * cell["elements_per_second"] if cell.get("elements_per_second") else None
    return (rate / roof, None) if rate else (None, "no rate")


def roof_name(results, roofs, suite, kernel):
    """The roof column of the dense tables: 'fma <isa>', 'none (ref)' or '-'."""
    isa, why = compute_roof(results, roofs, suite, kernel)
    if isa:
        return f"fma {isa}"
    return "none (ref)" if why == "no roof for ref" else "-"
