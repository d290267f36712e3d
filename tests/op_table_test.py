#!/usr/bin/env python3
"""The Python tools' lists against `halfmap info --json` (argv[1]: the halfmap binary): the ops of each bench family
come from its "ops" (the table of include/halfmap/ops.hpp), the copy-roof ops, the paths' arithmetic and the scaled
modes from "ops", "isa_arithmetic" and "scaled_modes" (results.Rules), and what the tools still keep for folders
published before those keys (results.PUBLISHED_OPS, PUBLISHED_RULES) or as presentation per ISA path
(charts.ISA_MARKERS, roofs.FMA_WHAT, F16C_WHAT) must agree with it. Standard library only: run by CTest."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from benchreport import charts  # noqa: E402
from benchreport import results  # noqa: E402
from benchreport import roofs  # noqa: E402

HALFMAP = sys.argv.pop(1) if len(sys.argv) > 1 else "halfmap"


def info():
    return json.loads(subprocess.run([HALFMAP, "info", "--json"], check=True, capture_output=True, text=True).stdout)


class OpLists(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.info = info()

    def test_every_kernel_has_its_op_and_mode_listed(self):
        ops = {row["name"] for row in self.info["ops"]}
        for k in self.info["kernels"]:
            self.assertIn(k["op"], ops, k["name"])
            self.assertIn(k["mode"], self.info["modes"], k["name"])

    def test_bench_families_are_the_table_rows(self):
        ops = results.Ops.of(self.info)
        for row in self.info["ops"]:
            self.assertIn(row["name"], getattr(ops, row["bench_family"]), row)
        self.assertEqual(sum(len(family) for family in ops), len(self.info["ops"]))

    def test_published_lists_are_the_tables_start(self):
        # An op keeps its family, so the lists of the folders published before "ops" are each family's first ops.
        ops = results.Ops.of(self.info)
        for family, published in results.PUBLISHED_OPS.items():
            self.assertEqual(getattr(ops, family)[: len(published)], published, family)

    def test_each_isa_path_has_a_marker_and_an_fma_roof(self):
        paths = {p["name"] for p in self.info["isa_paths"]} - {"ref"}
        self.assertEqual(set(charts.ISA_MARKERS), paths)
        self.assertEqual(set(roofs.FMA_WHAT), paths)
        self.assertEqual(set(roofs.F16C_WHAT), set(results.Rules.of(self.info).f16_per_op_isas))

    def test_rules_come_from_info_and_the_published_ones_agree(self):
        # What the report does by op and path comes from "ops", "isa_arithmetic" and "scaled_modes"; the frozen
        # PUBLISHED_RULES, for folders published before those keys, must say the same (an op may only be added).
        paths = [p["name"] for p in self.info["isa_paths"]]
        self.assertEqual([p["name"] for p in self.info["isa_arithmetic"]], paths)
        for p in self.info["isa_arithmetic"]:
            self.assertIn(p["f32_path"], paths, p)
        self.assertLessEqual(set(self.info["scaled_modes"]), set(self.info["modes"]))
        rules = results.Rules.of(self.info)
        published = results.PUBLISHED_RULES
        self.assertEqual(rules.copy_ops[: len(published["copy_ops"])], published["copy_ops"])
        self.assertEqual(rules.copy_ops[-len(results.FP8_OPS):], results.FP8_OPS)
        self.assertNotIn("mse", rules.copy_ops)  # a loss reads only: the read roof (bench/bench_nn.cpp)
        self.assertEqual(rules.f16_per_op_isas, published["f16_per_op_isas"])
        self.assertEqual(rules.f32_paths, published["f32_paths"])
        self.assertEqual(rules.scaled_modes, published["scaled_modes"])
        self.assertEqual(results.Rules.of({}), rules)  # an info.json from before the keys reads the same


if __name__ == "__main__":
    unittest.main()
