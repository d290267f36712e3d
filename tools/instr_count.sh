#!/usr/bin/env bash
# Instructions per element of memory-bound kernels, counted by callgrind (exact and repeatable whatever the load;
# perf counters are often unavailable on shared machines): the evidence for why a kernel stays below the read
# roof. Each kernel is called once on 2^17 elements (bench/instr_count.cpp). Valgrind 3.19 has no AVX-512, so
# the kernels named must be avx2 or ref ones; HALFMAP_ISA=avx2 is set for them.
#
#   bash tools/instr_count.sh [KERNEL...]     default: the avx2 kernels of sum, sumsq, mse, softmax and xent
#
# Needs a release build (cmake --preset release && cmake --build --preset release) and valgrind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=build/release/bench/halfmap_instr_count
[ -x "$BIN" ] || { echo "instr_count.sh: $BIN is missing: build the release preset first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instr_count.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 2; }

kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
  for op in sum sumsq mse softmax xent; do
    for mode in f32 f16_f32acc f16; do kernels+=("${mode}_${op}__avx2"); done
  done
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| kernel | instructions per element |"
echo "| --- | ---: |"
for k in "${kernels[@]}"; do
  HALFMAP_ISA=avx2 valgrind --tool=callgrind --toggle-collect=halfmap_instr_call \
    --callgrind-out-file="$tmp/cg.out" "$BIN" "$k" >"$tmp/stdout" 2>"$tmp/stderr" ||
    { echo "instr_count.sh: $k failed:" >&2; grep -v '^==' "$tmp/stderr" >&2; exit 2; }
  read -r _ n <"$tmp/stdout"
  ir=$(sed -n 's/^totals: *//p' "$tmp/cg.out" | awk '{print $1}')
  awk -v k="$k" -v ir="$ir" -v n="$n" 'BEGIN { printf "| `%s` | %.3f |\n", k, ir / n }'
done
