#!/usr/bin/env python3
"""tools/bench_report.py (and its modules, tools/benchreport/) on a small synthetic benchmark JSON
(tests/data/bench_report_fixture.json, labelled as halfmap_bench labels its kernel benchmarks): peers present,
skipped ("unsupported: ...") and, with them removed, not built; plus the peers of a second run with their ISA
capped (tests/data/bench_report_peers_capped.json, median and mean aggregates, as tools/main.sh's
bench_peers_<isa>.json), merged by --peers-json. The fixtures name their peers as halfmap_bench does,
<lib>[_<isa>]_<dtype>_<op>__peer; OldPeerNames renders them under the names of older JSON too. Checks that bench.md
lists every target of the issue with a result, that the kernels' facts read from `halfmap info --json` give the
same report as the labels, and that the command writes the file. Standard library only, no charts: run by
CTest."""

import copy
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import bench_report  # noqa: E402
from benchreport import results as bench_results  # noqa: E402
from benchreport import roofs as bench_roofs  # noqa: E402

FIXTURE = os.path.join(HERE, "data", "bench_report_fixture.json")
DIAGNOSE_FIXTURE = os.path.join(HERE, "data", "diagnose_bench_fixture.json")
CAPPED = os.path.join(HERE, "data", "bench_report_peers_capped.json")
TARGETS = ("f32 dense ≥ 0.85× the best f32 peer", "f16_f32acc dense ≥ 0.9× halfmap's f32 dense",
           "bf16_f32acc dense ≥ 0.9× oneDNN bf16 matmul", "f16 per-op dense ≥ 1.5× XNNPACK f16 fully-connected",
           "sum ≥ 0.85× the read roof at dram", "mse ≥ 0.85× the read roof at dram",
           "f32 softmax ≥ 1.5× XNNPACK f32 softmax", "f32 softmax ≥ 0.85× the copy roof at dram",
           "f32 xent ≥ 0.85× the copy roof at dram", "f16 softmax ≥ 1.8× f32's elements/s at dram",
           "bf16 softmax ≥ 1.8× f32's elements/s at dram", "f16 per-op dense ≥ 0.9× the F16C round-trip roof",
           "f16 per-op sum ≥ 0.9× the F16C round-trip roof", "f32 softmax ≥ 1× oneDNN f32 softmax at dram",
           "bf16 softmax ≥ 1× oneDNN bf16 softmax at dram", "f16 softmax ≥ 1× oneDNN f16 softmax at dram")


def load(path=FIXTURE):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def with_capped():
    return bench_report.merge(load(), load(CAPPED))


def without_labels(data):
    for b in data["benchmarks"]:
        b.pop("label", None)
    return data


def info_from_labels(data):
    """The "kernels" list `halfmap info --json` would print for the fixture's kernels, from their labels."""
    kernels = {}
    for b in data["benchmarks"]:
        facts = bench_results.parse_label(b.get("label"))
        if facts:
            name = b["name"].split("/")[1]
            kernels[name] = {"name": name, **{f: facts[f] for f in ("op", "mode", "isa", "storage")}}
    return {"kernels": list(kernels.values())}


def target_lines(text):
    section = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "≥" in line]


class WithPeers(unittest.TestCase):
    def setUp(self):
        self.text = bench_report.render(load(), {}, "fixture", "bench.json")

    def test_every_target_has_a_result(self):
        lines = target_lines(self.text)
        for target in TARGETS:
            rows = [line for line in lines if target in line]
            self.assertTrue(rows, f"target missing: {target}")
            for row in rows:
                self.assertRegex(row, r"\| (met|\*\*missed\*\* by [0-9.]+ \(\d+% short\)|not measured: .+) \|$")

    def test_ratios_against_peers(self):
        lines = target_lines(self.text)
        # f32: 91 / 105 GFLOP/s (onednn_f32, the faster f32 peer) = 0.867: met.
        f32 = next(line for line in lines if "best f32 peer" in line)
        self.assertIn("0.867", f32)
        self.assertIn("| met |", f32)
        # bf16: 159 / 190 = 0.837 < 0.9: missed by 0.06.
        bf16 = next(line for line in lines if "oneDNN bf16" in line)
        self.assertIn("**missed** by 0.06", bf16)
        # The fp16 kernel of a CPU without AVX512-FP16: its own skip reason.
        fp16 = next(line for line in lines if "f16_dense_fwd__avx512fp16" in line)
        self.assertIn("not measured: ISA avx512fp16 not supported", fp16)

    def test_skipped_peers_show_their_message(self):
        self.assertIn("skipped: unsupported: oneDNN has no f16 matmul on this CPU", self.text)
        self.assertIn("skipped: unsupported: this OpenBLAS has no sbgemm", self.text)
        self.assertIn("`eigen_f16`: not in this run", self.text)

    def test_roofs_and_fractions(self):
        self.assertIn("| fma, avx512bf16 | 234.0 GFLOP/s |", self.text)
        self.assertIn("`roof/fma/avx512fp16`: ISA avx512fp16 not supported", self.text)
        self.assertIn("| `f32_dense_fwd__avx512` | fma avx512 | 0.81 | 0.78 |", self.text)
        self.assertIn("mystery", self.text)  # an unreadable name is reported, not fatal

    def test_attention_against_the_roof_of_its_arithmetic(self):
        # Target 17 at len 512: f32 0.6 of fma/avx512 (met); the per-operation f16 kernel against the F16C roof,
        # 0.4 of it (missed by 0.10), not against the f32 FMA roof its label names; bf16 0.43 of vdpbf16ps.
        lines = [line for line in target_lines(self.text) if line.startswith("| attention_")]
        self.assertEqual(len(lines), 3)  # no target for isa ref
        f32 = next(line for line in lines if "`f32_attention_prescale__avx512`" in line)
        self.assertIn("the FMA roof (fma/avx512), len 512", f32)
        self.assertIn("| 0.600 | ≥ 0.5 | met |", f32)
        f16 = next(line for line in lines if "`f16_attention_prescale__avx512`" in line)
        self.assertIn("the F16C round-trip roof (f16c avx512)", f16)
        self.assertIn("| 0.400 | ≥ 0.5 | **missed** by 0.10 (20% short) |", f16)
        bf16 = next(line for line in lines if "`bf16_f32acc_attention_postscale__avx512bf16`" in line)
        self.assertIn("| 0.430 | ≥ 0.5 | **missed** by 0.07", bf16)
        # Its own section, tables by len with the roof of each kernel, and the shape from the context.
        section = self.text.split("## Attention", 1)[1].split("\n## ", 1)[0]
        self.assertIn("Shape and work: one head, d = 64", section)
        self.assertIn("| `f32_attention_prescale__avx512` | 64.4 | 70.2 |", section)
        self.assertIn("| `f32_attention_prescale__avx512` | fma avx512 | 0.55 | 0.60 |", section)
        self.assertIn("| `f32_attention_postscale__ref` | none (ref) | - |", section)

    def test_layernorm_against_onednn(self):
        # Target 18: f32 2.1 / 2.0 Gelem/s = 1.05, met; bf16 3.2 / 4.0 = 0.8, missed by 0.20; no f16 row (oneDNN
        # 2.6 has no f16 layer normalisation).
        lines = [line for line in target_lines(self.text) if "oneDNN" in line and "layer normalisation" in line]
        self.assertEqual(len(lines), 2)
        self.assertIn("| 1.050 | ≥ 1 | met |", lines[0])
        self.assertIn("`f32_layernorm__avx512`", lines[0])
        self.assertIn("| 0.800 | ≥ 1 | **missed** by 0.20 (20% short) |", lines[1])

    def test_targets_name_the_machine(self):
        self.assertIn("The speeds the project tracks (measured on fixture, single core;", self.text)
        text = bench_report.render(load(), {}, "", "bench.json")
        self.assertIn("(measured on AMD EPYC (fixture), single core;", text)  # the CPU model without --machine


class SameIsaPeers(unittest.TestCase):
    """Target 7: each halfmap dense path against the best peer of its own ISA and arithmetic, the capped peers
    coming from a second run's JSON."""

    def setUp(self):
        self.text = bench_report.render(with_capped(), {}, "fixture", "bench.json")
        self.lines = target_lines(self.text)

    def row(self, isa, arith, size, kernel):
        return next(line for line in self.lines if f"best {isa} {arith} peer, {size}³: `{kernel}`" in line)

    def test_avx2_against_the_median_of_the_capped_peers(self):
        # 82 / 84 (onednn_avx2's median; its mean, 70, would make it 1.17) = 0.976: missed by 0.02.
        f32 = self.row("avx2", "f32", 1024, "f32_dense_fwd__avx2")
        self.assertIn("82.0 / 84.0 GFLOP/s (onednn_avx2_f32) | 0.976 |", f32)
        self.assertIn("**missed** by 0.02 (2% short)", f32)
        # f16_f32acc computes in f32: the f32 peers are its peers. 84 / 84: met.
        self.assertIn("| 1.000 | ≥ 1 | met |", self.row("avx2", "f32", 1024, "f16_f32acc_dense_fwd__avx2"))
        # At 512 OpenBLAS's mean (90) beats oneDNN's median (80), its median (79) does not.
        self.assertIn("(onednn_avx2_f32) | 1.000 |", self.row("avx2", "f32", 512, "f32_dense_fwd__avx2"))

    def test_bf16_against_the_capped_bf16_peer_not_the_amx_one(self):
        # 159 / 150 (onednn_avx512bf16_bf16), not the unlabelled onednn_bf16 (190).
        bf16 = self.row("avx512bf16", "bf16", 1024, "bf16_f32acc_dense_fwd__avx512bf16")
        self.assertIn("(onednn_avx512bf16_bf16) | 1.060 | ≥ 1 | met |", bf16)

    def test_missing_sizes_and_unlabelled_peers_are_not_measured(self):
        self.assertIn("not measured: not run at 256", self.row("avx2", "f32", 256, "f32_dense_fwd__avx2"))
        # The main fixture's peers carry no isa label (an older JSON): no avx512 f32 peer.
        self.assertIn("not measured: no avx512 f32 peer in this run",
                      self.row("avx512", "f32", 1024, "f32_dense_fwd__avx512"))
        # The f16 modes share no arithmetic with a peer: no row.
        self.assertFalse([line for line in self.lines if "peer, 1024³: `f16_dense_fwd__avx512`" in line])

    def test_without_the_capped_run(self):
        lines = target_lines(bench_report.render(load(), {}, "fixture", "bench.json"))
        f32 = next(line for line in lines if "best avx2 f32 peer, 1024³: `f32_dense_fwd__avx2`" in line)
        self.assertIn("not measured: no avx2 f32 peer in this run", f32)

    def test_tables_roofs_and_context(self):
        self.assertIn("| `f32_dense_fwd__avx2` | 1.00 (onednn_avx2_f32) | 0.98 (onednn_avx2_f32) |", self.text)
        # A capped peer's roof is its label's (fma/avx2, 117 GFLOP/s from the main run, not the 90 of the capped
        # run's context, which never overrides the main run's): 84 / 117.
        self.assertIn("| `onednn_avx2_f32_dense_fwd__peer` | fma avx2 | 0.68 | 0.72 |", self.text)
        self.assertIn("OPENBLAS_CORETYPE=Haswell", self.text)
        self.assertIn("`openblas_avx2_f32`: measured", self.text)


class KernelFacts(unittest.TestCase):
    """What a kernel is comes from info.json or the labels, never from its name."""

    def test_info_json_gives_the_labels_report(self):
        # info.json has no roofs: apart avx2's from avx512's, so that the counters tell which one a kernel used.
        data = load()
        data["context"]["roof_fma_avx2_flops_per_second"] = "1.1e11"
        labelled = bench_report.render(copy.deepcopy(data), {}, "fixture", "bench.json")
        info = info_from_labels(data)
        self.assertEqual(bench_report.render(without_labels(data), info, "fixture", "bench.json"), labelled)

    def test_label_parsing(self):
        label = "op=dense_fwd mode=f16 isa=avx512fp16 storage=f16 roof=fma/avx512fp16"
        self.assertEqual(bench_results.parse_label(label),
                         {"op": "dense_fwd", "mode": "f16", "isa": "avx512fp16", "storage": "f16",
                          "roof": "fma/avx512fp16"})
        self.assertEqual(bench_results.parse_label("a free text label"), {})

    def test_roof_from_the_label_not_the_isa(self):
        # The label's roof is the one shown, whatever the kernel's ISA: the rule is halfmap_bench's.
        data = load()
        for b in data["benchmarks"]:
            if b["name"].startswith("dense_fwd/bf16_f32acc_dense_fwd__avx512bf16/"):
                b["label"] = b["label"].replace("roof=fma/avx512bf16", "roof=fma/avx2")
        text = bench_report.render(data, {}, "fixture", "bench.json")
        self.assertIn("| `bf16_f32acc_dense_fwd__avx512bf16` | fma avx2 |", text)

    def test_unlabelled_roof_from_the_counters(self):
        # A JSON older than the labels: the roof is the startup roof that flops_per_second / roof_fraction equals,
        # when exactly one does (the fixture's avx2 and avx512 roofs are equal until avx2's is moved away).
        data = without_labels(load())
        info = info_from_labels(load())
        text = bench_report.render(copy.deepcopy(data), info, "fixture", "bench.json")
        self.assertIn("| `f32_dense_fwd__avx512` | - | 0.81 | 0.78 |", text)
        self.assertIn("| `bf16_f32acc_dense_fwd__avx512bf16` | fma avx512bf16 |", text)
        data["context"]["roof_fma_avx2_flops_per_second"] = "1.1e11"
        text = bench_report.render(data, info, "fixture", "bench.json")
        self.assertIn("| `f32_dense_fwd__avx512` | fma avx512 | 0.81 | 0.78 |", text)

    def test_undescribed_kernels_are_reported(self):
        text = bench_report.render(without_labels(load()), {}, "fixture", "bench.json")
        self.assertIn("Kernels that neither `halfmap info --json` nor a benchmark label describes", text)
        self.assertIn("f32_sum__avx512", text.rsplit("\n\n", 1)[1])

class CopyAndF16cRoofs(unittest.TestCase):
    """Issue 14: softmax and xent against the copy roof (bytes read + written), their fp16/bf16 storage against
    f32's elements/s, and the per-operation f16 kernels against the F16C round-trip roof."""

    def setUp(self):
        self.text = bench_report.render(load(), {}, "fixture", "bench.json")
        self.lines = target_lines(self.text)

    def row(self, what):
        rows = [line for line in self.lines if what in line]
        self.assertEqual(len(rows), 1, what)
        return rows[0]

    def test_softmax_and_xent_against_the_copy_roof(self):
        # softmax: 9.5 GB/s read + 9.5 written = 19.0 / 24.0 GB/s = 0.792: missed (the read roof would say 0.317).
        f32 = self.row("f32 softmax ≥ 0.85× the copy roof at dram: `f32_softmax__avx512`")
        self.assertIn("| 19.0 / 24.0 GB/s read + written | 0.792 | ≥ 0.85 | **missed** by 0.06", f32)
        # xent: 2.6 Gelem/s of f32 logits (+ a label per 1024) read, dlogits written: 20.8 / 24.0 = 0.867, met.
        self.assertIn("| 0.867 | ≥ 0.85 | met |", self.row("f32 xent ≥ 0.85× the copy roof at dram"))
        # The memory tables divide softmax by the copy roof of each level too: 19 / 150, 19 / 80, 19 / 24.
        self.assertIn("| `f32_softmax__avx512` | 9.50 | 0.13 | 1.20 (xnnpack_f32) | 9.50 | 0.24 | 1.20 (xnnpack_f32) | "
                      "9.50 | 0.79 |", self.text)
        self.assertFalse([line for line in self.lines if "softmax ≥ 0.85× the read roof" in line])

    def test_half_storage_against_f32_elements(self):
        # f16_f32acc softmax on avx512: 4.4 / 2.4 Gelem/s (the f32 kernel of the same ISA) = 1.833: met.
        f16 = self.row("f16 softmax ≥ 1.8× f32's elements/s at dram: `f16_f32acc_softmax__avx512`")
        self.assertIn("(`f32_softmax__avx512`) | 1.833 | ≥ 1.8 | met |", f16)
        # bf16 on avx512bf16 has no f32 kernel of its ISA: avx512's, the ISA it extends, 3.6 / 2.4 = 1.5: missed.
        bf16 = self.row("bf16 softmax ≥ 1.8× f32's elements/s at dram: `bf16_f32acc_softmax__avx512bf16`")
        self.assertIn("(`f32_softmax__avx512`) | 1.500 | ≥ 1.8 | **missed** by 0.30", bf16)

    def test_half_storage_against_the_f32_kernel_of_its_isa(self):
        # An avx2 f32 softmax faster than avx512's must not be the base of the avx512bf16 kernel.
        data = load()
        avx2 = copy.deepcopy(next(b for b in data["benchmarks"]
                                  if b["name"] == "softmax/f32_softmax__avx512/dram"))
        avx2["name"] = avx2["run_name"] = "softmax/f32_softmax__avx2/dram"
        avx2["label"] = avx2["label"].replace("isa=avx512", "isa=avx2")
        avx2["elements_per_second"] = 3.0e9
        data["benchmarks"].append(avx2)
        lines = target_lines(bench_report.render(data, {}, "fixture", "bench.json"))
        bf16 = next(line for line in lines if "`bf16_f32acc_softmax__avx512bf16`" in line)
        self.assertIn("(`f32_softmax__avx512`) | 1.500 |", bf16)

    def test_xnnpack_softmax_target_is_1_5(self):
        # 2.4 / 2.0 Gelem/s = 1.2: under 1.5.
        row = self.row("f32 softmax ≥ 1.5× XNNPACK f32 softmax, dram")
        self.assertIn("| 1.200 | ≥ 1.5 | **missed** by 0.30", row)

    def test_fastest_of_each_storage_against_onednn_softmax(self):
        # f32: 2.4 / 2.0 Gelem/s = 1.2, met; bf16: 3.6 / 4.0 = 0.9, missed; f16: oneDNN's skipped, with its reason.
        self.assertIn("(onednn_f32) | 1.200 | ≥ 1 | met |",
                      self.row("f32 softmax ≥ 1× oneDNN f32 softmax at dram: `f32_softmax__avx512`"))
        self.assertIn("(onednn_bf16) | 0.900 | ≥ 1 | **missed** by 0.10",
                      self.row("bf16 softmax ≥ 1× oneDNN bf16 softmax at dram: `bf16_f32acc_softmax__avx512bf16`"))
        self.assertIn("not measured: peer unsupported: oneDNN 2.6 has no f16 softmax on this CPU",
                      self.row("f16 softmax ≥ 1× oneDNN f16 softmax at dram: `f16_f32acc_softmax__avx512`"))

    def test_per_op_f16_against_xnnpack_at_every_size_from_256(self):
        # 26 / 23 GFLOP/s at 512³ and 1024³; the fixture has no 256³ run: the row says so.
        self.assertIn("| 1.130 | ≥ 1.5 |",
                      self.row("f16 per-op dense ≥ 1.5× XNNPACK f16 fully-connected, 512³: `f16_dense_fwd__avx512`"))
        self.assertIn("not measured: not run at 256",
                      self.row("f16 per-op dense ≥ 1.5× XNNPACK f16 fully-connected, 256³: `f16_dense_fwd__avx512`"))

    def test_per_op_f16_against_the_f16c_roof(self):
        # Dense: the counter f16c_roof_fraction (26 / 40 GFLOP/s).
        dense = self.row("f16 per-op dense ≥ 0.9× the F16C round-trip roof, 1024³: `f16_dense_fwd__avx512`")
        self.assertIn("| 0.650 of 40.0 GFLOP/s (f16c avx512) | 0.650 | ≥ 0.9 | **missed**", dense)
        # sum, at l2 (at dram memory binds it), has no counter in the fixture: 2 flops per element,
        # 2 x 14 Gelem/s / 40 GFLOP/s = 0.7.
        self.assertIn("| 0.700 | ≥ 0.9 |", self.row("f16 per-op sum ≥ 0.9× the F16C round-trip roof, l2"))
        self.assertFalse([line for line in self.lines if "F16C round-trip roof, dram" in line])
        # The native fp16 kernels are not F16C ones: no row.
        self.assertFalse([line for line in self.lines if "F16C" in line and "avx512fp16" in line])

    def test_roof_table_has_copy_and_f16c(self):
        self.assertIn("| copy, l1 | 150.0 GB/s | 148.0 GB/s |", self.text)
        self.assertIn("| copy, dram | 24.0 GB/s | 23.0 GB/s | 24.0 GB/s |", self.text)
        self.assertIn("| f16c, avx512 | 40.0 GFLOP/s | 39.0 GFLOP/s |", self.text)
        self.assertIn("| f16c, avx2 | 32.0 GFLOP/s | - |", self.text)

    def test_json_from_before_the_copy_roof(self):
        # Labels roof=read/<level>, no bytes_moved_per_second, roof_fraction against the read roof: the report
        # converts (bytes written = elements/s x 4 for f32: 9.5 + 9.6 GB/s) and divides by the copy roof all the
        # same, ignoring the read-roof counter.
        data = load()
        for b in data["benchmarks"]:
            if b["name"].startswith("softmax/f32_softmax__avx512/"):
                b["label"] = b["label"].replace("roof=copy/", "roof=read/")
                b.pop("bytes_moved_per_second")
                b["roof_fraction"] = 0.3
        lines = target_lines(bench_report.render(data, {}, "fixture", "bench.json"))
        row = next(line for line in lines if "f32 softmax ≥ 0.85× the copy roof" in line)
        self.assertIn("| 19.1 / 24.0 GB/s read + written | 0.796 |", row)


class RoofIsTheBestOfTheRun(unittest.TestCase):
    """The roof a fraction divides by is the best this core did in the run: the higher of the startup measurement
    and the fastest repetition of the roof/* benchmark; the kernels' counters (divided by startup) are rescaled."""

    @staticmethod
    def with_copy_dram_repetitions(values):
        data = load()
        i = next(i for i, b in enumerate(data["benchmarks"]) if b["name"] == "roof/copy/dram")
        base = data["benchmarks"].pop(i)
        for k, v in enumerate(values):
            data["benchmarks"].insert(i + k, dict(base, bytes_per_second=v, repetitions=len(values),
                                                  repetition_index=k))
        return data

    def test_a_faster_repetition_becomes_the_roof(self):
        # Startup 24 GB/s; repetitions 20, 22, 30: median 22, fastest 30, so the roof is 30 and softmax's
        # 19.0 GB/s read + written is 0.633 of it (0.792 of startup's); xent 20.8 / 30 = 0.694.
        text = bench_report.render(self.with_copy_dram_repetitions([20e9, 22e9, 30e9]), {}, "fixture", "x.json")
        self.assertIn("| copy, dram | 24.0 GB/s | 22.0 GB/s | 30.0 GB/s |", text)
        lines = target_lines(text)
        f32 = next(line for line in lines if "f32 softmax ≥ 0.85× the copy roof at dram" in line)
        self.assertIn("| 19.0 / 30.0 GB/s read + written | 0.633 |", f32)
        xent = next(line for line in lines if "f32 xent ≥ 0.85× the copy roof at dram" in line)
        self.assertIn("| 20.8 / 30.0 GB/s read + written | 0.694 |", xent)
        self.assertNotIn("older `halfmap_bench`", text)  # every roof still has its startup measurement

    def test_a_slower_benchmark_leaves_the_startup_roof(self):
        text = bench_report.render(self.with_copy_dram_repetitions([20e9, 21e9, 22e9]), {}, "fixture", "x.json")
        self.assertIn("| copy, dram | 24.0 GB/s | 21.0 GB/s | 24.0 GB/s |", text)
        self.assertIn("| 19.0 / 24.0 GB/s read + written | 0.792 |", text)

    def test_a_counter_is_rescaled_to_the_roof(self):
        # f32_sum at dram carries roof_fraction against startup's 30 GB/s read roof; a roof/read/dram repetition
        # at 40 GB/s makes the roof 40: the fraction is the counter × 30 / 40.
        data = load()
        cell = next(b for b in data["benchmarks"] if b["name"] == "reduce/f32_sum__avx512/dram")
        counter = cell["roof_fraction"]
        roof = next(b for b in data["benchmarks"] if b["name"] == "roof/read/dram")
        roof["bytes_per_second"] = 40e9
        results = bench_results.Results(data["benchmarks"])
        roofs = bench_roofs.Roofs(data["context"], results)
        self.assertEqual(roofs.read["dram"], 40e9)
        frac, why = bench_roofs.roof_fraction(results, roofs, "reduce", "f32_sum__avx512", "dram")
        self.assertIsNone(why)
        self.assertAlmostEqual(frac, counter * 30 / 40)


class RoofDefects(unittest.TestCase):
    """Issue 21: a kernel above its roof by more than the run's spread is flagged as a roof defect."""

    def test_a_kernel_above_its_roof_is_a_defect(self):
        data = load()
        text = bench_report.render(copy.deepcopy(data), {}, "fixture", "bench.json")
        self.assertIn("**Roof check**: no kernel is above a roof", text)
        read_dram = float(data["context"]["roof_read_dram_bytes_per_second"])
        for b in data["benchmarks"]:
            if b["name"].startswith("reduce/f32_sum__avx512/dram"):
                b["bytes_per_second"] = 1.5 * read_dram
                b.pop("roof_fraction", None)
        text = bench_report.render(data, {}, "fixture", "bench.json")
        self.assertIn("**Roof defects**: 1 cells are above a roof", text)
        self.assertIn("| `reduce/f32_sum__avx512/dram` | read/dram | 1.500 |", text)


class BenchCompare(unittest.TestCase):
    """Issue 21: results/bench_compare.md sets every machine's bench.json side by side; a folder with only a sweep
    (arm64 under qemu) is listed as numerics only."""

    def test_two_machines_and_one_numerics_only(self):
        import bench_compare
        with tempfile.TemporaryDirectory() as d:
            for name in ("machine-a", "machine-b"):
                os.makedirs(os.path.join(d, name))
                with open(os.path.join(d, name, "bench.json"), "w", encoding="utf-8") as f:
                    json.dump(load(), f)
            os.makedirs(os.path.join(d, "aarch64-qemu"))
            with open(os.path.join(d, "aarch64-qemu", "thresholds.json"), "w", encoding="utf-8") as f:
                f.write("{}")
            out = os.path.join(d, "bench_compare.md")
            self.assertEqual(bench_compare.main([d, "--first", "machine-b", "--out", out]), 0)
            with open(out, encoding="utf-8") as f:
                text = f.read()
        self.assertIn("| kernel | size | `machine-b` | `machine-a` |", text)
        self.assertIn("Numerics only", text)
        self.assertIn("`aarch64-qemu`", text)
        rows = [line for line in text.splitlines() if line.startswith("| `f32_sum` | dram |")]
        self.assertEqual(len(rows), 1)
        self.assertIn("avx512 ", rows[0])

    def test_no_bench_json_is_an_error(self):
        import bench_compare
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(bench_compare.main([d, "--out", os.path.join(d, "x.md")]), 2)
            self.assertFalse(os.path.exists(os.path.join(d, "x.md")))


class WithoutPeers(unittest.TestCase):
    def test_peers_not_built(self):
        data = load()
        data["benchmarks"] = [b for b in data["benchmarks"] if "__peer/" not in b["name"]]
        del data["context"]["peers_built"]
        text = bench_report.render(data, {}, "fixture", "bench.json")
        for target in TARGETS:
            self.assertIn(target, text)
        self.assertIn("not measured: peer not built: install with tools/setup.sh --peers", text)

    def test_old_json_without_startup_roofs(self):
        data = load()
        for key in [k for k in data["context"] if k.startswith("roof_")]:
            del data["context"][key]
        for b in data["benchmarks"]:
            b.pop("roof_fraction", None)
        text = bench_report.render(copy.deepcopy(data), {}, "fixture", "bench.json")
        self.assertIn("divide by the `roof/*` benchmark of the same run instead", text)
        # f32_sum at dram: 29 / 30 GB/s from the roof/read/dram benchmark.
        self.assertIn("sum ≥ 0.85× the read roof at dram: `f32_sum__avx512` | 29.0 / 30.0 GB/s | 0.967", text)


def diagnose_target_lines(text):
    return [line for line in target_lines_all(text) if "halfmap diagnose" in line]


def target_lines_all(text):
    section = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and ("≥" in line or "≤" in line)]


def diagnose_section(text):
    return text.split("## halfmap diagnose", 1)[1].split("\n## ", 1)[0]


class DiagnoseBench(unittest.TestCase):
    def render(self, diagnose):
        return bench_report.render(load(), {}, "fixture", "bench.json", diagnose=diagnose)

    def test_table_of_the_cases(self):
        section = diagnose_section(self.render(load(DIAGNOSE_FIXTURE)))
        # 1048576 rows / 6.25 s; peak 450 MB / 423.6 MB of files = 1.06; CPU: the median of the three runs.
        self.assertIn("| 2^20 (1,048,576) | 100 | 423.6 | 6.25 [6.00-7.50] | 167,772 | 11.50 | 450 | 1.06 | ok |",
                      section)
        # One run: no spread.
        self.assertIn("| 2^18 (262,144) | 16 | 17.8 | 1.00 | 262,144 | 1.75 | 30 | 1.68 | optimization |", section)
        self.assertIn("load average 1.25 / 1.50 / 1.75", section)
        self.assertIn("the whole step took 31.5 s", section)

    def test_targets_met(self):
        lines = diagnose_target_lines(self.render(load(DIAGNOSE_FIXTURE)))
        self.assertEqual(len(lines), 3)
        self.assertIn("under 10 s wall | 6.25 s / 10 s | 0.625 | ≤ 1 | met |", lines[0])
        self.assertIn("under 1.5× the input files | 450 MB / 424 MB | 1.062 | ≤ 1.5 | met |", lines[1])
        self.assertIn("on 2^16 × 256 float32 rows, all modes, under 15 s wall | 10.00 s / 15 s | 0.667 | ≤ 1 | met |",
                      lines[2])

    def test_targets_missed(self):
        doc = load(DIAGNOSE_FIXTURE)
        big = doc["cases"][1]
        big["wall_s_median"], big["peak_rss_bytes_max"] = 12.5, 700000000
        lines = diagnose_target_lines(self.render(doc))
        self.assertIn("| 1.250 | ≤ 1 | **missed** by 0.25 (25% over) |", lines[0])
        self.assertIn("| 1.652 | ≤ 1.5 | **missed** by 0.15 (10% over) |", lines[1])

    def test_counted_with_the_other_targets(self):
        def counts(text):
            line = next(l for l in text.splitlines() if l.endswith("not measured."))
            return [int(w) for w in line.replace(",", "").split() if w.isdigit()]
        met, missed, unmeasured = counts(self.render(None))
        self.assertEqual(counts(self.render(load(DIAGNOSE_FIXTURE))), [met + 3, missed, unmeasured - 3])

    def test_absent(self):
        text = self.render(None)
        lines = diagnose_target_lines(text)
        self.assertEqual(len(lines), 3)
        for line in lines:
            self.assertIn("| not measured: no diagnose benchmark in this run", line)
        self.assertIn("Not measured: no diagnose benchmark in this run", diagnose_section(text))

    def test_without_the_target_case(self):
        doc = load(DIAGNOSE_FIXTURE)
        doc["cases"] = [c for c in doc["cases"] if c["rows"] != 1 << 20]
        text = self.render(doc)
        for line in diagnose_target_lines(text)[:2]:
            self.assertIn("not measured: no 2^20 x 100 float32 case in the diagnose benchmark", line)
        self.assertIn("| 2^16 (65,536) | 100 |", diagnose_section(text))

    def test_the_model_case(self):
        section = diagnose_section(self.render(load(DIAGNOSE_FIXTURE)))
        # 65536 rows / 10.0 s; CPU the median of the runs; the paths as they ran.
        self.assertIn("| 4 × (Dense(512), LayerNorm, GELU) | 920,576 | 2^16 × 256 | 10.00 [9.50-12.00] | 6,554 | 19.00 "
                      "| 391 | f32/avx512, f16_f32acc/avx512, f16/avx512, bf16_f32acc/avx512bf16 | ok |", section)
        doc = load(DIAGNOSE_FIXTURE)
        doc["models"][0]["wall_s_median"] = 18.0
        self.assertIn("| 1.200 | ≤ 1 | **missed** by 0.20 (20% over) |", diagnose_target_lines(self.render(doc))[2])
        doc["models"] = []
        text = self.render(doc)
        self.assertIn("not measured: no --model case 2^16 × 256, 4 × width 512", diagnose_target_lines(text)[2])
        self.assertIn("Not measured: no `--model` case in this run", diagnose_section(text))


def run(name, flops, label, rep=None, reps=1, real=1.0, cpu=1.0, aggregate=None):
    """One benchmark entry as halfmap_bench writes it: an iteration run (repetition `rep` of `reps`) or an
    aggregate."""
    b = {"name": name, "run_name": name, "run_type": "aggregate" if aggregate else "iteration", "repetitions": reps,
         "iterations": 10, "real_time": real, "cpu_time": cpu, "time_unit": "ns", "flops_per_second": flops,
         "size": 1024, "label": label}
    if aggregate:
        b["aggregate_name"] = aggregate
    elif rep is not None:
        b["repetition_index"] = rep
    return b


F32_AVX512 = "op=dense_fwd mode=f32 isa=avx512 storage=f32 roof=fma/avx512"
ONEDNN = "op=dense_fwd mode=f32 isa=avx512 storage=f32 roof=fma/avx512"


class Repetitions(unittest.TestCase):
    """Medians and spreads of repeated benchmarks: a target is met only when the median ratio meets it, whatever
    the fastest repetition did; the spread is shown from the repetitions themselves or from min/max aggregates."""

    def data(self):
        benchmarks = [run("dense_fwd/f32_dense_fwd__avx512/1024", v * 1e9, F32_AVX512, i, 3)
                      for i, v in enumerate((90.0, 80.0, 110.0))]
        # The peer as a capped run keeps it: median and min/max aggregates only.
        for agg, v in (("median", 100.0), ("min", 95.0), ("max", 104.0), ("mean", 99.0)):
            benchmarks.append(run("dense_fwd/onednn_f32_dense_fwd__peer/1024", v * 1e9, ONEDNN, reps=5,
                                  aggregate=agg))
        return {"context": {}, "benchmarks": benchmarks}

    def test_met_only_by_the_median(self):
        text = bench_report.render(self.data(), {}, "fixture", "bench.json")
        row = next(line for line in target_lines(text) if "best avx512 f32 peer, 1024³" in line)
        # 90 (median of 90, 80, 110) / 100 = 0.9 < 1.0: missed, though the fastest repetition (110) beat the peer.
        self.assertIn("90.0 [80.0–110.0] / 100.0 [95.0–104.0] GFLOP/s (onednn_f32) | 0.900 [0.77–1.16] |", row)
        self.assertIn("**missed** by 0.10", row)
        self.assertIn("Each benchmark ran 5 times", text)
        self.assertIn("Spread over the repetitions", text)

    def test_one_run_says_so(self):
        text = bench_report.render(load(), {}, "fixture", "bench.json")
        self.assertIn("Each benchmark ran once (no repetitions)", text)


class InterleavedOrder(unittest.TestCase):
    """A run with --benchmark_enable_random_interleaving: Google Benchmark writes the benchmarks in a shuffled
    order, the report puts them back in registration order (family_index, per_family_instance_index) and says
    how the repetitions ran."""

    def data(self, interleaved):
        names = [f"dense_fwd/{k}/{n}" for k in ("f32_dense_fwd__avx512", "onednn_f32_dense_fwd__peer")
                 for n in (512, 1024)]
        benchmarks = []
        for family, name in enumerate(names):
            for i, v in enumerate((90.0, 80.0, 110.0)):
                b = run(name, (v + family) * 1e9, F32_AVX512 if "avx512" in name else ONEDNN, i, 3)
                benchmarks.append({**b, "family_index": family, "per_family_instance_index": 0})
        order = "random interleaving: the repetitions of all benchmarks in one shuffled order" if interleaved else \
            "each benchmark's repetitions back to back, in registration order"
        return {"context": {"bench_order": order}, "benchmarks": benchmarks}

    def test_shuffled_file_gives_the_registered_order(self):
        ordered = self.data(True)
        shuffled = copy.deepcopy(ordered)
        shuffled["benchmarks"] = shuffled["benchmarks"][6:] + shuffled["benchmarks"][3:6] + shuffled["benchmarks"][:3]
        self.assertNotEqual(shuffled["benchmarks"], ordered["benchmarks"])
        bench_report.in_registration_order(shuffled)
        self.assertEqual(shuffled["benchmarks"], ordered["benchmarks"])
        text = bench_report.render(shuffled, {}, "fixture", "bench.json")
        self.assertIn("one shuffled order (`--benchmark_enable_random_interleaving`)", text)
        self.assertIn("order: random interleaving", text)
        self.assertNotIn("shuffled order", bench_report.render(self.data(False), {}, "fixture", "bench.json")
                         .split("## Targets", 1)[1])

    def test_file_without_the_indices_is_left_as_it_is(self):
        data = self.data(True)
        for b in data["benchmarks"][:3]:
            del b["family_index"]
        data["benchmarks"].reverse()
        before = copy.deepcopy(data["benchmarks"])
        self.assertEqual(bench_report.in_registration_order(data)["benchmarks"], before)


class Threads(unittest.TestCase):
    """dense_fwd_threads/ and dense_bwd_threads/: the table and the 1 -> 2 threads target (>= 0.9x linear)."""

    def data(self, counts=(1, 2)):
        speeds = {1: 100.0, 2: 185.0}
        benchmarks = []
        for t in counts:
            name = f"dense_fwd_threads/f32_dense_fwd__avx512/{t}/process_time/real_time"
            benchmarks.append(run(name, speeds[t] * 1e9, F32_AVX512, real=1.0, cpu=1.0 * t))
            bwd = f"dense_bwd_threads/f32_dense_bwd__avx512/{t}/process_time/real_time"
            benchmarks.append(run(bwd, speeds[t] * 0.8e9, F32_AVX512.replace("dense_fwd", "dense_bwd")))
            peer = f"dense_fwd_threads/onednn_f32_dense_fwd__peer/{t}/process_time/real_time"
            benchmarks.append(run(peer, 200.0e9 * t / 2, ONEDNN))
        return {"context": {}, "benchmarks": benchmarks}

    def test_scaling_target_and_table(self):
        text = bench_report.render(self.data(), {}, "fixture", "bench.json")
        rows = [line for line in target_lines(text) if "1 → 2 threads" in line]
        fwd = next(line for line in rows if "`f32_dense_fwd__avx512`" in line)
        self.assertIn("185.0 / 2 × 100.0 GFLOP/s | 0.925 |", fwd)  # 185 / 200
        self.assertIn("| met |", fwd)
        bwd = next(line for line in rows if "`f32_dense_bwd__avx512`" in line)
        self.assertIn("| 0.925 |", bwd)
        self.assertIn("## Dense layers on several threads", text)
        # 185 on 2 threads / the peer's 200 there; 2 cores busy (CPU time twice the wall time).
        self.assertIn("| `f32_dense_fwd__avx512` | 100.0 | 185.0 | 0.93 | 2.00 | 0.50 | 0.93 (onednn_f32) |", text)

    def test_one_thread_only_is_not_measured(self):
        text = bench_report.render(self.data(counts=(1,)), {}, "fixture", "bench.json")
        row = next(line for line in target_lines(text) if "1 → 2 threads" in line)
        self.assertIn("not measured: no 2-thread run", row)


class SameRunPairs(unittest.TestCase):
    """A capped run that times halfmap's kernels of its ISA beside its peers (tools/main.sh): a ratio to a peer
    takes both medians from that run; the tables keep the main run's cells."""

    def setUp(self):
        capped = load(CAPPED)
        label = "op=dense_fwd mode=f32 isa=avx2 storage=f32 roof=fma/avx2"
        for size, median, low, high in (("1024", 90e9, 88e9, 93e9), ("512", 75e9, 70e9, 76e9)):
            name = f"dense_fwd/f32_dense_fwd__avx2/{size}"
            for aggregate, value in (("median", median), ("min", low), ("max", high)):
                capped["benchmarks"].append({"name": f"{name}_{aggregate}", "run_name": name, "run_type": "aggregate",
                                             "aggregate_name": aggregate, "repetitions": 5,
                                             "flops_per_second": value, "label": label})
        self.data = bench_report.merge(load(), capped, "bench_peers_avx2.json")
        self.text = bench_report.render(copy.deepcopy(self.data), {}, "fixture", "bench.json")
        self.lines = target_lines(self.text)

    def row(self, size, kernel):
        return next(line for line in self.lines if f"best avx2 f32 peer, {size}³: `{kernel}`" in line)

    def test_the_ratio_takes_both_medians_from_the_capped_run(self):
        # 90 (the kernel in the capped run, not the main run's 82) / 84 (onednn_avx2's median there): met.
        row = self.row(1024, "f32_dense_fwd__avx2")
        self.assertIn("90.0 [88.0–93.0] / 84.0 GFLOP/s (onednn_avx2_f32; both from bench_peers_avx2.json) | 1.071",
                      row)
        self.assertIn("| met |", row)

    def test_the_lowest_ratio_of_the_peers_in_that_run(self):
        # 75 / 80 (oneDNN) = 0.9375 is lower than 75 / 79 (OpenBLAS).
        self.assertIn("(onednn_avx2_f32; both from bench_peers_avx2.json) | 0.938",
                      self.row(512, "f32_dense_fwd__avx2"))

    def test_a_kernel_the_capped_run_did_not_time_keeps_the_main_cell(self):
        # f16_f32acc_dense_fwd__avx2 was not timed again: 84 (main) / 84 (capped), no run named.
        row = self.row(1024, "f16_f32acc_dense_fwd__avx2")
        self.assertIn("(onednn_avx2_f32) | 1.000 |", row)
        self.assertNotIn("both from", row)

    def test_the_tables_show_the_main_run(self):
        results = bench_results.Results(self.data["benchmarks"], {})
        self.assertEqual(results.value("dense_fwd", "f32_dense_fwd__avx2", "1024", "flops_per_second"), 82e9)
        self.assertEqual(results.kernels["dense_fwd"].count("f32_dense_fwd__avx2"), 1)
        self.assertEqual(results.same_run("dense_fwd", "f32_dense_fwd__avx2", "onednn_avx2_f32_dense_fwd__peer",
                                          "1024", "flops_per_second"), [("bench_peers_avx2.json", 90e9, 84e9)])
        self.assertIn("| `f32_dense_fwd__avx2` | 0.94 (onednn_avx2_f32) | 1.07 (onednn_avx2_f32) |", self.text)


def with_old_peer_names(data):
    """data with its peers named as halfmap_bench named them before they were the sweep's peers,
    <lib>[_<isa>]_<dtype>__peer (the published bench.json files): the op dropped from every peer's name, in the
    benchmarks and in the context's peer_check/ keys and lists (in place)."""
    def old(name):
        suite, _, rest = name.partition("/")
        kernel, _, arg = rest.partition("/")
        if not bench_results.is_peer(kernel):
            return name
        return "/".join(p for p in (suite, bench_results.peer_label(kernel) + bench_results.PEER_SUFFIX, arg) if p)

    for b in data["benchmarks"]:
        for key in ("name", "run_name"):
            if key in b:
                b[key] = old(b[key])
    context = data.setdefault("context", {})
    for key in [k for k in context if k.startswith("peer_check/")]:
        context["peer_check/" + old(key[len("peer_check/"):])] = context.pop(key)
    for key in bench_results.PEER_NAME_LISTS:
        if key in context:
            context[key] = ", ".join(old(item) for item in context[key].split(", "))
    return data


class OldPeerNames(unittest.TestCase):
    """The JSON halfmap_bench wrote before its peers were named like the sweep's, <lib>[_<isa>]_<dtype>__peer,
    reads as today's <lib>[_<isa>]_<dtype>_<op>__peer: the same report, word for word."""

    CONTEXT = {"peer_check/dense_fwd/onednn_bf16_dense_fwd__peer": "ok",
               "peer_check/softmax/xnnpack_f32_softmax__peer": "ok",
               "peers_subnormals_flushed":
                   "dense_fwd/onednn_bf16_dense_fwd__peer, dense_fwd/xnnpack_f32_dense_fwd__peer",
               "peers_fp_env_changed": "none (same modes before and after every peer call checked)"}

    def data(self):
        data = with_capped()
        data["context"].update(self.CONTEXT)
        return data

    def test_the_fixture_under_old_names(self):
        old = with_old_peer_names(self.data())
        self.assertIn("dense_fwd/onednn_avx2_f32__peer/1024", [b["run_name"] for b in old["benchmarks"]])
        self.assertIn("peer_check/softmax/xnnpack_f32__peer", old["context"])
        new = bench_report.render(self.data(), {}, "fixture", "bench.json")
        self.assertEqual(bench_report.render(old, {}, "fixture", "bench.json"), new)
        self.assertIn("| peers_subnormals_flushed | dense_fwd/onednn_bf16_dense_fwd__peer, "
                      "dense_fwd/xnnpack_f32_dense_fwd__peer |", new)

    def test_names(self):
        canonical = bench_results.canonical_kernel
        self.assertEqual(canonical("dense_fwd", "onednn_f32__peer"), "onednn_f32_dense_fwd__peer")
        self.assertEqual(canonical("dense_fwd_threads", "openblas_f32__peer"), "openblas_f32_dense_fwd__peer")
        self.assertEqual(canonical("dense_fwd", "onednn_avx512bf16_bf16__peer"),
                         "onednn_avx512bf16_bf16_dense_fwd__peer")
        self.assertEqual(canonical("layernorm", "onednn_bf16__peer"), "onednn_bf16_layernorm__peer")
        for today in ("onednn_avx2_f32_dense_fwd__peer", "xnnpack_f32_softmax__peer", "f32_dense_fwd__avx2"):
            self.assertEqual(canonical("dense_fwd", today), today)
        self.assertEqual(bench_results.peer_label("onednn_avx512bf16_bf16_dense_fwd__peer"), "onednn_avx512bf16_bf16")
        self.assertEqual(bench_results.peer_label("onednn_avx2_f32__peer"), "onednn_avx2_f32")
        self.assertEqual(bench_results.parse_name("softmax/xnnpack_f32__peer/l1"),
                         ("softmax", "xnnpack_f32_softmax__peer", "l1"))

    def test_bench_compare_reads_both(self):
        import bench_compare
        texts = []
        for rename in (False, True):
            with tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, "machine"))
                data = load()
                capped = load(CAPPED)
                if rename:
                    with_old_peer_names(data)
                    with_old_peer_names(capped)
                for name, doc in (("bench.json", data), ("bench_peers_avx2.json", capped)):
                    with open(os.path.join(d, "machine", name), "w", encoding="utf-8") as f:
                        json.dump(doc, f)
                out = os.path.join(d, "bench_compare.md")
                self.assertEqual(bench_compare.main([d, "--out", out]), 0)
                with open(out, encoding="utf-8") as f:
                    texts.append(f.read())
        self.assertIn("onednn_avx2_f32", texts[0])
        self.assertEqual(texts[0], texts[1])


class Command(unittest.TestCase):
    def test_writes_the_report(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bench.md")
            self.assertEqual(bench_report.main([FIXTURE, "--out", out, "--machine", "fixture"]), 0)
            with open(out, encoding="utf-8") as f:
                self.assertTrue(f.read().startswith("# Benchmarks on fixture"))
            self.assertEqual(sorted(os.listdir(d)), ["bench.md"])  # no temporary left behind

    def test_writes_the_diagnose_section(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bench.md")
            self.assertEqual(bench_report.main([FIXTURE, "--out", out, "--diagnose", DIAGNOSE_FIXTURE]), 0)
            with open(out, encoding="utf-8") as f:
                self.assertIn("| 2^16 (65,536) | 100 | 26.5 | 0.52 [0.50-0.55] |", diagnose_section(f.read()))
    def test_merges_the_capped_peers(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bench.md")
            self.assertEqual(bench_report.main([FIXTURE, "--peers-json", CAPPED, "--out", out]), 0)
            with open(out, encoding="utf-8") as f:
                self.assertIn("(onednn_avx2_f32) | 0.976 |", f.read())


if __name__ == "__main__":
    unittest.main()
