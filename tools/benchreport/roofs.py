"""The roofs of one run and each kernel's fraction of its roof.

The roof fraction is one definition everywhere: a kernel's rate / the roof measured once at the start of the same
run (halfmap_bench puts the roofs in the context, roof_read_<level>_bytes_per_second and
roof_fma_<isa>_flops_per_second, and each kernel's counter roof_fraction). For a JSON without them (older runs) the
report divides by the roof/* benchmarks of the same JSON instead, and says so.

Which FMA roof a dense kernel is compared with is halfmap_bench's rule (bench/bench_roof.cpp, compute_roof_isa),
read from the benchmark label (roof=fma/<isa>, roof=none for ref). A JSON older than the label still says it in
numbers: flops_per_second / roof_fraction is the roof the benchmark divided by, which is one of the startup roofs
of the context (printed there to 6 significant digits). Peers, whose ISA is unknown, are compared with the best
roof of their arithmetic on this machine.
"""

import re

from .results import DENSE_OPS, is_peer, number

# Startup roofs are printed with 6 significant digits ({:.6g}): a kernel's rate / its roof_fraction is within
# 5e-6 of the roof it divided by; 1e-5 accepts that and still tells apart roofs 1.7e-5 apart (Zen 4's avx2 and
# avx512 f32 FMA).
ROOF_MATCH = 1e-5

FMA_WHAT = {
    "avx2": "vfmadd*ps ymm, f32, 12 chains",
    "avx512": "vfmadd*ps zmm, f32, 16 chains",
    "avx512bf16": "vdpbf16ps zmm, bf16 pairs into f32, 16 chains",
    "avx512fp16": "vfmadd*ph zmm, fp16, 16 chains",
    "neon": "fmla .4s, f32, 16 chains",
    "neonfp16": "fmla .8h, fp16, 16 chains",
}


class Roofs:
    """The roofs of this run: read[level] and fma[isa] from the context (measured at startup), else from the roof/*
    benchmarks of the same JSON (source says which)."""

    def __init__(self, context, results):
        self.read, self.fma, self.source = {}, {}, {}
        for key, value in context.items():
            m = re.match(r"^roof_read_(\w+)_bytes_per_second$", key)
            if m and number(value):
                self.read[m.group(1)], self.source[("read", m.group(1))] = number(value), "startup"
            m = re.match(r"^roof_fma_(\w+)_flops_per_second$", key)
            if m and number(value):
                self.fma[m.group(1)], self.source[("fma", m.group(1))] = number(value), "startup"
        for kernel in results.kernels.get("roof", []):
            for arg in results.args.get("roof", []):
                if kernel == "read" and arg not in self.read:
                    v = results.value("roof", "read", arg, "bytes_per_second")
                    if v:
                        self.read[arg], self.source[("read", arg)] = v, "benchmark"
                if kernel == "fma" and arg not in self.fma:
                    v = results.value("roof", "fma", arg, "flops_per_second")
                    if v:
                        self.fma[arg], self.source[("fma", arg)] = v, "benchmark"

    def any_from_benchmarks(self):
        return any(s == "benchmark" for s in self.source.values())

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
                isas = [isa for isa, v in self.fma.items()
                        if self.source[("fma", isa)] == "startup" and abs(roof / v - 1) <= ROOF_MATCH]
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
    if cell.get("roof_fraction") is not None:
        return cell["roof_fraction"], None
    if suite in DENSE_OPS:
        isa, why = compute_roof(results, roofs, suite, kernel)
        if isa is None:
            return None, why
        roof, rate = roofs.fma.get(isa), cell.get("flops_per_second")
    else:
        roof, rate = roofs.read.get(str(arg)), cell.get("bytes_per_second")
    if not roof or rate is None:
        return None, "roof not measured"
    return rate / roof, None


def roof_name(results, roofs, suite, kernel):
    """The roof column of the dense tables: 'fma <isa>', 'none (ref)' or '-'."""
    isa, why = compute_roof(results, roofs, suite, kernel)
    if isa:
        return f"fma {isa}"
    return "none (ref)" if why == "no roof for ref" else "-"
