#!/usr/bin/env bash
# Fuzzes a reader with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer for SECONDS (default 300),
# starting from a copy of its seed corpus, and prints what it found: READER npy (the default; tests/fuzz/
# npy_fuzz.cpp, corpus tests/fuzz/corpus/npy/) or onnx (tests/fuzz/onnx_fuzz.cpp, corpus tests/fuzz/corpus/onnx/).
#
#   bash tools/fuzz.sh [SECONDS] [READER]
#
# Builds with clang++ (Debian's clang and libclang-rt-14-dev, installed by tools/setup.sh --fuzz) into
# build/fuzz/<reader>/, outside CMake: the npy harness needs only src/io/npy*.cpp (the sources of CMake's
# halfmap_npy) and header-only libraries; the onnx one src/io/onnx_*.cpp (halfmap_onnx's), linked with libonnx_proto,
# protobuf and fmt as built by Debian (only halfmap's code is instrumented). The run's log is
# build/fuzz/<reader>/fuzz.log, the grown corpus build/fuzz/<reader>/corpus/, crash inputs build/fuzz/<reader>/crash-*.
# A crash input belongs in the seed corpus (as a regression, replayed by ctest's <reader>_fuzz_replay) once its bug
# is fixed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-300}
reader=${2:-npy}
case $reader in
  npy) sources=(src/io/npy.cpp src/io/npy_header.cpp src/io/npy_dtype.cpp); libs=() ;;
  onnx) sources=(src/io/onnx_read.cpp src/io/onnx_lower.cpp src/io/onnx_pattern.cpp src/io/onnx_attention.cpp src/io/onnx_eval.cpp); libs=(-DONNX_ML=1 -DONNX_NAMESPACE=onnx -lonnx_proto -lprotobuf -lfmt) ;;
  *) echo "fuzz.sh: unknown reader '$reader' (the readers are npy and onnx)" >&2; exit 2 ;;
esac

bash tools/setup.sh && bash tools/setup.sh --fuzz

out=build/fuzz/$reader
mkdir -p "$out/corpus"
# Inputs a previous run left are evidence of that run only (copy one into the seed corpus to keep it).
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
cp -n tests/fuzz/corpus/"$reader"/* "$out/corpus/"
echo "fuzz.sh: building $out/${reader}_fuzz"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer -ffp-contract=off -Iinclude \
  tests/fuzz/"${reader}"_fuzz.cpp "${sources[@]}" "${libs[@]}" -o "$out/${reader}_fuzz"

echo "fuzz.sh: fuzzing for ${seconds}s (log: $out/fuzz.log)"
rc=0
(cd "$out" && ./"${reader}"_fuzz -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 corpus >fuzz.log 2>&1) || rc=$?

last=$(grep -E '^#[0-9]+' "$out/fuzz.log" | tail -n 1 || true)
echo "fuzz.sh: last status: ${last:-none}"
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$out/fuzz.log" || true
crashes=$(ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null || true)
if [ "$rc" -ne 0 ] || [ -n "$crashes" ]; then
  echo "fuzz.sh: FAILED (exit $rc); inputs: ${crashes:-none}; the end of $out/fuzz.log:"
  tail -n 40 "$out/fuzz.log"
  exit 1
fi
echo "fuzz.sh: no crash in ${seconds}s"
