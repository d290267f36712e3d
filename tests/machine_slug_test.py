#!/usr/bin/env python3
"""tools/machine_slug.py: the results/ folder names of the machines halfmap has run on and of the CPU families it
names, from a model string and a /proc/cpuinfo text. Standard library only: run by CTest."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import machine_slug  # noqa: E402

SPR_FLAGS = "fpu sse2 avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_vbmi2 avx512_bf16 avx512_fp16 amx_tile"


def cpuinfo(vendor, family, model, flags=""):
    return f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n" \
           f"model name\t: whatever\nflags\t\t: {flags}\nprocessor\t: 1\nmodel\t\t: 1\n"


def slug(model, text, arch="x86-64"):
    return machine_slug.slug({"cpu": {"model": model, "arch": arch}}, text)


class Amd(unittest.TestCase):
    def test_zen_generation_is_appended(self):
        # results/x86-64-amd-epyc-zen4: a VM's bare "AMD EPYC" on Genoa (family 0x19, model 0x11).
        self.assertEqual(slug("AMD EPYC", cpuinfo("AuthenticAMD", 25, 17)), "x86-64-amd-epyc-zen4")
        self.assertEqual(slug("AMD EPYC 7B13 64-Core Processor", cpuinfo("AuthenticAMD", 25, 1)),
                         "x86-64-amd-epyc-7b13-zen3")
        self.assertEqual(slug("AMD EPYC 7742 64-Core Processor", cpuinfo("AuthenticAMD", 23, 49)),
                         "x86-64-amd-epyc-7742-zen2")

    def test_without_cpuinfo_the_model_alone(self):
        self.assertEqual(slug("AMD EPYC", None), "x86-64-amd-epyc")


class Intel(unittest.TestCase):
    def test_known_xeon_models(self):
        self.assertEqual(slug("Intel(R) Xeon(R) Platinum 8480+", cpuinfo("GenuineIntel", 6, 0x8F, SPR_FLAGS)),
                         "x86-64-intel-xeon-platinum-8480-sapphire-rapids")
        self.assertEqual(slug("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
                              cpuinfo("GenuineIntel", 6, 0x6A, "avx512f avx512_vnni avx512_vbmi2")),
                         "x86-64-intel-xeon-gold-6338-ice-lake-sp")

    def test_model_0x55_by_its_flags(self):
        xeon = "Intel(R) Xeon(R) CPU"
        self.assertEqual(slug(xeon, cpuinfo("GenuineIntel", 6, 0x55, "avx512f")), "x86-64-intel-xeon-skylake-sp")
        self.assertEqual(slug(xeon, cpuinfo("GenuineIntel", 6, 0x55, "avx512f avx512_vnni")),
                         "x86-64-intel-xeon-cascade-lake")
        self.assertEqual(slug(xeon, cpuinfo("GenuineIntel", 6, 0x55, "avx512f avx512_vnni avx512_bf16")),
                         "x86-64-intel-xeon-cooper-lake")

    def test_unknown_or_contradicted_model_names_the_avx512_level(self):
        # This project's VM: "Intel(R) Xeon(R) Processor", model 167 (a Rocket Lake desktop number), with
        # AVX512-FP16 and AMX: Sapphire Rapids or later, which the flags cannot narrow down.
        self.assertEqual(slug("Intel(R) Xeon(R) Processor", cpuinfo("GenuineIntel", 6, 167, SPR_FLAGS)),
                         "x86-64-intel-xeon-avx512fp16")
        # A model number that cannot have the flags it shows (Skylake-SP has no AVX512-FP16).
        self.assertEqual(slug("Intel(R) Xeon(R) Processor", cpuinfo("GenuineIntel", 6, 0x55, SPR_FLAGS)),
                         "x86-64-intel-xeon-avx512fp16")
        self.assertEqual(slug("Intel(R) Xeon(R) Processor", cpuinfo("GenuineIntel", 6, 0x99, "avx512f avx512_bf16")),
                         "x86-64-intel-xeon-avx512bf16")

    def test_no_avx512_keeps_the_bare_name(self):
        self.assertEqual(slug("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", cpuinfo("GenuineIntel", 6, 158, "avx2 fma")),
                         "x86-64-intel-core-i7-8700")


class Arm64(unittest.TestCase):
    def test_model_string(self):
        text = "processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
        self.assertEqual(slug("arm64 (implementer 0x41, part 0xd0c)", text, "arm64"), "arm64-0x41-0xd0c")
        self.assertEqual(slug("arm64 (implementer ?, part ?)", text, "arm64"), "arm64-unknown")


if __name__ == "__main__":
    unittest.main()
