#!/usr/bin/env python3
"""Prints the results/ folder name of this machine, from `halfmap info --json` (cpu.arch + cpu.model) and
/proc/cpuinfo (vendor, family, model, flags):

    python3 tools/machine_slug.py INFO_JSON [--cpuinfo PATH]

e.g. x86-64-amd-epyc-zen4. The model string names a part, not its microarchitecture, and virtual machines often
report a bare "AMD EPYC" or "Intel(R) Xeon(R) Processor": so the microarchitecture is appended, which is what
decides the results (the ISA paths, their speed). AMD: the Zen generation from family and model. Intel: the Xeon
generations that have AVX-512, from family 6 and the model number; where the model number is unknown, or
contradicts the flags (a VM may report an unrelated one: this project's Sapphire-Rapids-class VM says model 167,
a Rocket Lake desktop part, which has neither AVX512-FP16 nor AMX), the best AVX-512 level halfmap has a path for,
from the flags (avx512fp16, avx512bf16, avx512): that much the flags prove, the generation they do not. Stable:
the same machine always gets the same name. Python 3 standard library.
"""

import argparse
import json
import re
import sys

# Intel family 6 Xeon models with AVX-512: model -> [(name, flags it needs, flags it cannot have)], first match.
# 0x55 is Skylake-SP, Cascade Lake (adds AVX512-VNNI) and Cooper Lake (adds AVX512-BF16); the flags tell them
# apart where steppings may be made up.
SKYLAKE_SP = [("cooper-lake", {"avx512_bf16"}, {"avx512_fp16"}), ("cascade-lake", {"avx512_vnni"}, {"avx512_fp16"}),
              ("skylake-sp", {"avx512f"}, {"avx512_fp16"})]
ICE_LAKE_SP = [("ice-lake-sp", {"avx512_vbmi2"}, {"avx512_fp16"})]
INTEL_XEON_MODELS = {
    0x55: SKYLAKE_SP,
    0x6A: ICE_LAKE_SP,
    0x6C: ICE_LAKE_SP,
    0x8F: [("sapphire-rapids", {"amx_tile", "avx512_fp16"}, set())],
    0xCF: [("emerald-rapids", {"amx_tile", "avx512_fp16"}, set())],
    0xAD: [("granite-rapids", {"amx_tile", "avx512_fp16"}, set())],
    0xAE: [("granite-rapids", {"amx_tile", "avx512_fp16"}, set())],
}
# Without a known model: the highest AVX-512 level in the flags, named like halfmap's ISA paths.
INTEL_FLAG_LEVELS = [("avx512fp16", "avx512_fp16"), ("avx512bf16", "avx512_bf16"), ("avx512", "avx512f")]


def parse_cpuinfo(text):
    """(vendor, family, model, flags) of the first processor in /proc/cpuinfo's text; '', None, None, set() when
    absent (arm64 has none of them)."""
    vendor, family, model, flags = "", None, None, None
    for line in (text or "").splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "vendor_id" and not vendor:
            vendor = value
        elif key == "cpu family" and family is None:
            family = int(value)
        elif key == "model" and model is None and value.isdigit():
            model = int(value)
        elif key == "flags" and flags is None:
            flags = set(value.split())
    return vendor, family, model, flags or set()


def amd_generation(family, model):
    if family == 0x17:
        return "zen" if model < 0x30 else "zen2"
    if family == 0x19:
        zen4 = 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF
        return "zen4" if zen4 else "zen3"
    if family == 0x1A:
        return "zen5"
    return None


def intel_generation(family, model, flags):
    """The Xeon generation of a known family 6 model whose flags agree, else the AVX-512 level of the flags, else
    None."""
    if family == 6:
        for name, needs, cannot in INTEL_XEON_MODELS.get(model, []):
            if needs <= flags and not cannot & flags:
                return name
    for name, flag in INTEL_FLAG_LEVELS:
        if flag in flags:
            return name
    return None


def model_words(model, arch):
    """'AMD EPYC 7B13 64-Core Processor' -> ['amd', 'epyc', '7b13']: the model string without trademarks,
    clock, core count and filler words."""
    m = model.lower()
    m = re.sub(r"\((r|tm)\)", " ", m)
    m = re.sub(r"@.*$", " ", m)                              # "@ 2.40GHz"
    m = re.sub(r"\b(\d+-core|processor|cpu|with radeon.*)\b", " ", m)
    m = re.sub(r"\b(implementer|part)\b", " ", m)           # arm64: "arm64 (implementer 0x41, part 0xd0c)"
    words = [w for w in re.split(r"[^a-z0-9.]+", m) if w and w != "?"]
    return words[1:] if words and words[0] == arch.lower() else words


def slug(info, cpuinfo_text):
    """The folder name for `halfmap info --json`'s object `info` on a machine whose /proc/cpuinfo is
    cpuinfo_text (None or '' where there is none)."""
    cpu = info.get("cpu", {})
    arch = cpu.get("arch") or info.get("fp_env", {}).get("arch") or "unknown-arch"
    words = model_words(cpu.get("model") or "", arch)
    vendor, family, model, flags = parse_cpuinfo(cpuinfo_text)
    generation = None
    if vendor == "AuthenticAMD" and family is not None and model is not None:
        generation = amd_generation(family, model)
    elif vendor == "GenuineIntel":
        generation = intel_generation(family, model, flags)
    if generation and generation not in words:
        words.append(generation)
    name = "-".join([arch.lower()] + (words or ["unknown"]))
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("info_json", help="output of `halfmap info --json`")
    parser.add_argument("--cpuinfo", default="/proc/cpuinfo", help="the CPU description to read (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        with open(args.info_json, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"machine_slug.py: cannot read {args.info_json}: {e}")
    try:
        with open(args.cpuinfo, encoding="utf-8", errors="replace") as f:
            cpuinfo = f.read()
    except OSError:
        cpuinfo = None  # not Linux: the model string alone
    print(slug(info, cpuinfo))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
