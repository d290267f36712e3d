"""Fails if a function of the linked binary uses AVX registers (ymm, zmm, mask registers) without naming an ISA
path's namespace (halfmap::paths::avx...) in its demangled name: code compiled with ISA flags that the linker
could have merged with a copy from a folder compiled without them (see the ops.hpp headers).
Usage: check_isa_names_objdump.py OBJDUMP BINARY"""
import re
import subprocess
import sys

objdump, binary = sys.argv[1], sys.argv[2]
dis = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", binary], check=True, capture_output=True,
                     text=True).stdout
header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
wide = re.compile(r"%[yz]mm\d|%k[0-7]")
bad, fn, seen = [], None, 0
for line in dis.splitlines():
    m = header.match(line)
    if m:
        fn = m.group(1)
        continue
    if fn and wide.search(line):
        seen += 1
        if "halfmap::paths::avx" not in fn and fn not in bad:
            bad.append(fn)
        fn = None  # one report per function
print(f"{seen} functions use AVX registers; {len(bad)} without an ISA path's name")
for f in bad[:20]:
    print("  " + f[:200])
sys.exit(1 if bad else 0)
