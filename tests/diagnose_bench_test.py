#!/usr/bin/env python3
"""tools/diagnose_bench.py against a stand-in for halfmap (a shell script that checks it was given two non-empty
.npy files and prints a verdict), on two tiny cases: the JSON holds each case's shape, file sizes, one wall time,
CPU time and peak per run and the verdict, and the temporary data is gone afterwards; a failing run stops the
script with the command's message. Needs NumPy and GNU time (tools/setup.sh), as the script does: run with
Debian's /usr/bin/python3 where the interpreter running this test lacks NumPy; skipped where neither has it."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "tools", "diagnose_bench.py")

FAKE = """#!/bin/sh
# halfmap diagnose --features X --labels Y --json, or halfmap diagnose --model M --features X --json
[ -n "$FAIL" ] && { echo "halfmap: planted failure" >&2; exit 2; }
if [ "$1" = diagnose ] && [ "$2" = --model ] && [ -s "$3" ] && [ "$4" = --features ] && [ -s "$5" ]; then
  echo '{"paths": [{"path": "f32/ref"}, {"path": "f16/ref"}], "verdict": {"boundary": "compute"}}'
  exit 0
fi
[ "$1" = diagnose ] && [ "$2" = --features ] && [ -s "$3" ] && [ "$4" = --labels ] && [ -s "$5" ] || exit 9
echo '{"verdict": {"boundary": "ok"}}'
"""


def python_with_numpy():
    for python in ("/usr/bin/python3", sys.executable):
        if os.access(python, os.X_OK) and subprocess.call([python, "-c", "import numpy"],
                                                          stderr=subprocess.DEVNULL) == 0:
            return python
    return None


PYTHON = python_with_numpy()


@unittest.skipUnless(PYTHON and os.access("/usr/bin/time", os.X_OK), "needs NumPy and GNU time (tools/setup.sh)")
class DiagnoseBench(unittest.TestCase):
    def run_script(self, d, env=None):
        fake = os.path.join(d, "halfmap")
        with open(fake, "w", encoding="utf-8") as f:
            f.write(FAKE)
        os.chmod(fake, 0o755)
        tmp = os.path.join(d, "tmp")
        os.mkdir(tmp)
        out = os.path.join(d, "diagnose_bench.json")
        proc = subprocess.run([PYTHON, SCRIPT, "--halfmap", fake, "--out", out, "--cases", "64x3,32x2",
                               "--models", "64x3:2x4", "--repeats", "2", "--tmp", tmp], capture_output=True, text=True,
                              env=dict(os.environ, **(env or {})))
        return proc, out, tmp

    def test_writes_the_figures(self):
        with tempfile.TemporaryDirectory() as d:
            proc, out, tmp = self.run_script(d)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            self.assertEqual(os.listdir(tmp), [])  # the data and the reports are removed
            self.assertEqual(doc["diagnose_bench"], 1)
            self.assertEqual(doc["repeats"], 2)
            self.assertEqual([(c["rows"], c["cols"]) for c in doc["cases"]], [(64, 3), (32, 2)])
            first = doc["cases"][0]
            # A version 1.0 .npy header of 128 bytes, then 64 x 3 float32; the labels 64 float32.
            self.assertEqual(first["features_bytes"], 128 + 64 * 3 * 4)
            self.assertEqual(first["labels_bytes"], 128 + 64 * 4)
            self.assertEqual(first["file_bytes"], first["features_bytes"] + first["labels_bytes"])
            for case in doc["cases"]:
                self.assertEqual(len(case["wall_s"]), 2)
                self.assertEqual(len(case["cpu_s"]), 2)
                self.assertTrue(all(w > 0 for w in case["wall_s"]))
                self.assertEqual(case["peak_rss_bytes_max"], max(case["peak_rss_bytes"]))
                self.assertGreater(case["peak_rss_bytes_max"], 0)
                # The stand-in is a small shell: its peak is its own, not this Python's (see run_once).
                self.assertLess(case["peak_rss_bytes_max"], 32 << 20)
                self.assertEqual(case["verdict"], "ok")
            # The --model case, when onnx is there (python3-onnx): the network file and the paths as reported.
            if doc["models"]:
                (m,) = doc["models"]
                self.assertEqual((m["rows"], m["cols"], m["layers"], m["width"]), (64, 3, 2, 4))
                self.assertEqual(m["parameters"], 3 * 4 + 4 + 4 + 4 + 4 * 4 + 4 + 4 + 4)
                self.assertEqual(m["features_bytes"], 128 + 64 * 3 * 4)
                self.assertEqual(m["paths"], ["f32/ref", "f16/ref"])
                self.assertEqual(m["verdict"], "compute")
                self.assertEqual(len(m["wall_s"]), 2)
            # The step holds every run; the step's and each run's wall time are rounded to 0.0001 s.
            walls = [w for c in doc["cases"] + doc["models"] for w in c["wall_s"]]
            self.assertGreaterEqual(doc["step_wall_s"] + 0.00005 * (len(walls) + 1), sum(walls))

    def test_a_failing_run_stops_it(self):
        with tempfile.TemporaryDirectory() as d:
            proc, out, tmp = self.run_script(d, {"FAIL": "1"})
            self.assertEqual(proc.returncode, 1)
            self.assertIn("exited with 2: halfmap: planted failure", proc.stderr)
            self.assertFalse(os.path.exists(out))
            self.assertEqual(os.listdir(tmp), [])

    def test_bad_cases(self):
        proc = subprocess.run([PYTHON, SCRIPT, "--halfmap", "halfmap", "--out", "x.json", "--cases", "64by3"],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("each case is ROWSxCOLS", proc.stderr)


if __name__ == "__main__":
    unittest.main()
