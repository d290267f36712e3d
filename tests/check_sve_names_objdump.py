"""arm64: fails if a function of the linked binary uses SVE registers (z0-z31 with an element size, predicates
p0-p15) without naming the sve path's namespace (halfmap::paths::sve) in its demangled name: code compiled with
+sve that the linker could have merged with a copy from a folder compiled without it (see sve/ops.hpp). Also
fails if no function uses them (the check would then prove nothing).
Usage: check_sve_names_objdump.py OBJDUMP BINARY"""
import re
import subprocess
import sys

objdump, binary = sys.argv[1], sys.argv[2]
dis = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", binary], check=True, capture_output=True,
                     text=True).stdout
header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
sve = re.compile(r"\bz\d+\.[bhsdq]\b|\bp\d+/[mz]\b|\bp\d+\.[bhsd]\b")
bad, fn, seen = [], None, 0
for line in dis.splitlines():
    m = header.match(line)
    if m:
        fn = m.group(1)
        continue
    if fn and sve.search(line):
        seen += 1
        if "halfmap::paths::sve" not in fn and fn not in bad:
            bad.append(fn)
        fn = None  # one report per function
print(f"{seen} functions use SVE registers; {len(bad)} without the sve path's name")
for f in bad[:20]:
    print("  " + f[:200])
sys.exit(1 if bad or seen == 0 else 0)
