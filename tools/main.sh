#!/usr/bin/env bash
# The main job (see README.md): installs what is missing, builds the release preset, shows `halfmap info`, and
# writes this machine's results into results/<machine>/ (`--sweep-only`: all but the benchmarks' files):
#   info.json        `halfmap info --json`: CPU, ISA paths, kernels, FP environment, build
#   bench.json       halfmap_bench's reduce/, dense_fwd/, dense_bwd/, dense_fwd_threads/, dense_bwd_threads/,
#                    mse/, softmax/, softmax_naive/, xent/, layernorm/, rmsnorm/, gelu/, gelu_tanh/,
#                    attention_prescale/, attention_postscale/, fp8_encode/, fp8_encode_nonsat/, fp8_decode/,
#                    mx_quantize/ and roof/
#                    benchmarks and the peers' <op>/<lib>_<dtype>_<op>__peer/ where built, one run of 5 repetitions of
#                    each (Google Benchmark JSON with every repetition and its aggregates, the roofs measured at
#                    its start in the context)
#   diagnose_bench.json   `halfmap diagnose` timed on 2^16, 2^18 and 2^20 rows x 100 float32 columns and 2^18 x 16,
#                    and `halfmap diagnose --model` on a 4-layer MLP of width 512 with 2^16 x 256 rows (wall time,
#                    CPU time, peak memory, file sizes), by tools/diagnose_bench.py (NumPy data and the ONNX
#                    network in a temporary folder, removed afterwards)
#   bench_peers_<isa>.json   (x86-64, peers built) oneDNN and OpenBLAS again, each in a process of its own with its
#                    ISA capped by the environment (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE), so that each halfmap ISA
#                    path meets the peers' code for the same ISA: bench_peers_avx2.json (oneDNN at AVX2, OpenBLAS's
#                    Haswell kernels: onednn_avx2_f32_dense_fwd__peer, openblas_avx2_f32_dense_fwd__peer) and
#                    bench_peers_avx512bf16.json (oneDNN at AVX512_CORE_BF16, below AMX:
#                    onednn_avx512bf16_bf16_dense_fwd__peer); 5 repetitions each,
#                    with halfmap's dense forward kernels of that ISA timed again beside them (the ratios' pairs)
#   bench.md         the benchmark report: the run, the roofs, the performance targets (met or missed by how
#                    much), per kernel family throughput, fraction of the roof and ratio to the best peer, and the
#                    diagnose benchmark, by tools/bench_report.py
#   bench_reductions.png, bench_dense.png, bench_nn.png   its charts: GB/s from l1 to dram with the read roof,
#                    GFLOP/s from 64³ to 1024³ with the FMA roofs and the peers
#   cells.csv, thresholds.json, thresholds.md, meta.json, peers.md   the default `halfmap sweep` with PyTorch's
#                    kernels (HALFMAP_TORCH=1; docs/sweep.md); cells.csv.gz too when
#                    cells.csv exceeds 20 MB (then cells.csv is git-ignored)
#   maps/<op>_<dist>.png   the sweep's maps, by tools/plot_maps.py
#   headline.md      per op, every path's thresholds side by side and its window at s = 1, by tools/headline.py
#   lengths.json, lengths.md   `halfmap sweep --lengths`: per reduction kernel (sum, sumsq, dot), sequence and input
#                    scale, the smallest length n at which its forward overflows, is lost or stalls (about two
#                    minutes on 2 cores; docs/thresholds.md, "Lengths")
# and results/bench_compare.md (tools/bench_compare.py): every machine's bench.json side by side, per op, mode and
# size, rate, roof fraction and ratio to the best same-ISA peer;
# and results/compare.md (`halfmap compare`): every machine's sweep in results/ (in the current format), this one
# first, with the peers' paths beside halfmap's; and README.md's headline tables (tools/readme_tables.py).
# <machine> is a slug of the CPU architecture, model and microarchitecture (tools/machine_slug.py, e.g.
# x86-64-amd-epyc-zen4), so reruns on one machine replace its results and other machines' results stay beside
# them. Every file is written to a temporary name and renamed when complete: an interrupted run leaves the previous
# results intact.
#
# The job is a list of steps, one function each, run in order by main at the bottom.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PRESET=release
BUILD=build/$PRESET
HALFMAP=$BUILD/halfmap
BENCH=$BUILD/bench/halfmap_bench

MACHINE=""  # set by step_info
OUT=""      # results/$MACHINE

say() { echo "main.sh: $*"; }

# Debian's python3 (with python3-matplotlib from tools/setup.sh), even when another python3 comes first in PATH;
# every Python tool below runs with it.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

# Temporary files in progress; removed if the job stops before renaming them.
temps=()
cleanup() { [ ${#temps[@]} -eq 0 ] || rm -f "${temps[@]}"; }
trap cleanup EXIT

# Prints a fresh temporary path next to $1 (same file system, so the rename is atomic).
temp_for() {
  local t
  t=$(mktemp "$(dirname "$1")/.$(basename "$1").XXXXXX")
  temps+=("$t")
  echo "$t"
}

# Renames temp file $1 to $2, readable by all (mktemp creates 0600).
publish() {
  chmod 644 "$1"
  mv -f "$1" "$2"
}

step_setup() {
  bash tools/setup.sh --peers  # the peer libraries too: step_bench times them next to halfmap
}

step_build() {
  say "building preset $PRESET"
  cmake --preset "$PRESET" >/dev/null
  cmake --build --preset "$PRESET"
}

step_info() {
  "$HALFMAP" info
  mkdir -p results
  local tmp
  tmp=$(temp_for results/info.json)
  "$HALFMAP" info --json >"$tmp"
  MACHINE=$("$PY" tools/machine_slug.py "$tmp")  # from the model string and /proc/cpuinfo
  OUT=results/$MACHINE
  mkdir -p "$OUT"
  publish "$tmp" "$OUT/info.json"
  say "results go to $OUT/"
}

# `halfmap diagnose` at growing sizes (about half a minute on 2 cores, most of it the 2^20 x 100 runs); its JSON
# goes into bench.md (step_bench). Skipped, with its stale JSON removed, where NumPy or GNU time is missing.
step_diagnose_bench() {
  local json=$OUT/diagnose_bench.json rc=0
  say "timing halfmap diagnose (tools/diagnose_bench.py)"
  "$PY" tools/diagnose_bench.py --halfmap "$HALFMAP" --out "$json" || rc=$?
  if [ "$rc" -eq 3 ]; then
    rm -f "$json"
    say "SKIPPED the diagnose benchmark: see the line above"
  elif [ "$rc" -ne 0 ]; then
    return "$rc"
  fi
}

# One run of every suite, the peers' and the roofs', so that the report's ratios (to the roofs, to the peers, between
# kernels) all come from the same conditions; then the report and its charts. Each benchmark runs 5 times, at least
# 0.05 s each (bench.md shows the median and its spread), the repetitions of all benchmarks in one random order
# (--benchmark_enable_random_interleaving), so that a slow spell of the shared host costs single repetitions of many
# benchmarks instead of every repetition of a few, and a ratio between two cells compares the same conditions. The
# report puts the benchmarks back in registration order. About 9 minutes on a 2-core Zen 5
# (results/x86-64-oxide-virtual-turin-like-zen5/, December 2026, the capped peers' runs and the report included). The thread-scaling suites run at 1, 2, 4, ... up
# to every CPU (HALFMAP_THREADS caps it).
step_bench() {
  if [ ! -x "$BENCH" ]; then
    say "SKIPPED the benchmarks: $BENCH was not built (is bench/ part of this checkout?)"
    return 0
  fi
  # The kernels' names (reduce/<kernel>/<level>, ...) and the peers' (<op>/<lib>_<dtype>_<op>__peer/<size>) share
  # these prefixes, so the peers need no pattern of their own.
  local json=$OUT/bench.json tmp
  local filter='^(reduce|dense_fwd|dense_bwd|dense_fwd_threads|dense_bwd_threads|mse|softmax|softmax_naive|xent|layernorm|rmsnorm|gelu|gelu_tanh|attention_prescale|attention_postscale|fp8_encode|fp8_encode_nonsat|fp8_decode|mx_quantize|fp8_round|mx_round|roof)/'
  tmp=$(temp_for "$json")
  say "running the benchmarks: kernels, peers and roofs ($BENCH --benchmark_filter=$filter)"
  "$BENCH" --benchmark_filter="$filter" --benchmark_repetitions=5 --benchmark_min_time=0.05 \
    --benchmark_enable_random_interleaving=true \
    --benchmark_display_aggregates_only=true --benchmark_out="$tmp" --benchmark_out_format=json
  publish "$tmp" "$json"
  local extra=() isa
  for isa in avx2 avx512bf16; do
    bench_capped_peers "$isa"
    [ -f "$OUT/bench_peers_$isa.json" ] && extra+=(--peers-json "$OUT/bench_peers_$isa.json")
  done
  # bench_report.py writes bench.md and each chart to a temporary name and renames it.
  local diagnose=()
  [ -f "$OUT/diagnose_bench.json" ] && diagnose=(--diagnose "$OUT/diagnose_bench.json")
  "$PY" tools/bench_report.py "$json" "${extra[@]}" --info "$OUT/info.json" --machine "$MACHINE" \
    --out "$OUT/bench.md" --charts "$OUT" "${diagnose[@]}"
  say "wrote $json, $OUT/bench.md and $OUT/bench_{reductions,dense,nn}.png"
  # Every machine's bench.json side by side, this one first (arm64 folders, timed under qemu never, listed as
  # numerics only).
  "$PY" tools/bench_compare.py results --first "$MACHINE" --out results/bench_compare.md
}

# $1: avx2 or avx512bf16. The dense peers of oneDNN and OpenBLAS with their ISA capped, in a process of their own:
# both read the cap once, when loaded or first used (see src/peers/onednn.cpp, openblas.cpp), so it cannot
# change within the main run. halfmap's dense forward kernels of that ISA and the peers' arithmetic (f32 and
# f16_f32acc on avx2, bf16_f32acc on avx512bf16) run again in the same process, in the same random order, so that
# bench_report.py divides a kernel's median by a capped peer's from one run. Writes $OUT/bench_peers_$1.json, or
# removes it where the peers are not built, the machine is not x86-64, or the library cannot run that ISA here (no
# benchmark of the capped name exists).
bench_capped_peers() {
  local json=$OUT/bench_peers_$1.json env filter tmp
  case $1 in
    avx2) env=(ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell)
      filter='^dense_fwd/((onednn|openblas)_avx2_f32_dense_fwd__peer|(f32|f16_f32acc)_dense_fwd__avx2)/' ;;
    avx512bf16) env=(ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16)
      filter='^dense_fwd/(onednn_avx512bf16_bf16_dense_fwd__peer|bf16_f32acc_dense_fwd__avx512bf16)/' ;;
  esac
  if [ "$(uname -m)" != x86_64 ] ||
    ! env "${env[@]}" "$BENCH" --benchmark_list_tests --benchmark_filter="$filter" 2>/dev/null | grep -q __peer; then
    rm -f "$json"
    say "no $1-capped peers on this machine (not x86-64, peers not built, or no $1 there)"
    return 0
  fi
  tmp=$(temp_for "$json")
  say "running the $1-capped peers (${env[*]} $BENCH --benchmark_filter=$filter, median of 5)"
  env "${env[@]}" "$BENCH" --benchmark_filter="$filter" --benchmark_repetitions=5 \
    --benchmark_enable_random_interleaving=true --benchmark_display_aggregates_only=true --halfmap_roof_time=0 \
    --benchmark_out="$tmp" --benchmark_out_format=json >/dev/null
  publish "$tmp" "$json"
}

# Keeps results/.gitignore listing exactly the machines whose cells.csv is committed only as cells.csv.gz.
gitignore_cells() {  # $1: add|remove, $2: <machine>/cells.csv
  local ignore=results/.gitignore line=/$2 tmp
  touch "$ignore"
  if [ "$1" = add ] && grep -qxF "$line" "$ignore"; then return 0; fi  # listed already: leave the file as it is
  tmp=$(temp_for "$ignore")
  grep -vxF "$line" "$ignore" >"$tmp" || true
  [ "$1" = add ] && echo "$line" >>"$tmp"
  publish "$tmp" "$ignore"
}

step_sweep() {
  say "running the default sweep ($HALFMAP sweep --out $OUT): every kernel and path of this CPU"
  # halfmap writes each file to a temporary name in $OUT and renames it: an interrupted sweep keeps the
  # previous results. HALFMAP_TORCH=1: PyTorch's CPU kernels too (tools/torch_peer.py), where the build found
  # python3-torch; meta.json and peers.md name it missing otherwise.
  HALFMAP_TORCH=1 "$HALFMAP" sweep --out "$OUT"
  local csv=$OUT/cells.csv size tmp
  size=$(stat -c %s "$csv")
  if [ "$size" -gt $((20 * 1024 * 1024)) ]; then
    tmp=$(temp_for "$csv.gz")
    gzip -n -c "$csv" >"$tmp"  # -n: no name or time stamp, so the bytes depend only on cells.csv
    publish "$tmp" "$csv.gz"
    gitignore_cells add "$MACHINE/cells.csv"
    say "cells.csv is $((size / 1024 / 1024)) MB: stored as cells.csv.gz too; cells.csv itself is git-ignored"
  else
    rm -f "$csv.gz"
    gitignore_cells remove "$MACHINE/cells.csv"
  fi
  "$PY" tools/plot_maps.py "$csv" --out "$OUT"
  "$PY" tools/headline.py "$OUT/thresholds.json" --out "$OUT/headline.md"
  local dirs=("$OUT")  # this machine first (M1): the others are compared with the one that just ran
  # src/sweep/output.hpp's kComparableFormats: format 4 adds what crossed to format 3's numbers
  local formats='"format": "halfmap-sweep-thresholds-[34]"'
  for d in results/*/; do
    [ "${d%/}" != "$OUT" ] && [ -f "$d/thresholds.json" ] || continue
    if grep -q "$formats" "$d/thresholds.json"; then
      dirs+=("${d%/}")
    else  # an older format (single-number thresholds): compare would refuse it
      say "not comparing ${d%/}: its thresholds.json is an older format (rerun the sweep on that machine)"
    fi
  done
  # Also with this machine alone: compare.md then sets the peers' paths beside halfmap's, op by op and mode.
  "$HALFMAP" compare "${dirs[@]}" --out results/compare.md
  say "wrote results/compare.md (${#dirs[@]} machines)"
  say "wrote $OUT/thresholds.md, $OUT/headline.md, $OUT/cells.csv and $OUT/maps/"
}

# The length axis of the reductions: the default `halfmap sweep --lengths` (n up to 2^20 at s = 1 and 2^-8), whose
# files go beside the sweep's (it writes only lengths.json and lengths.md, each renamed into place when complete).
step_lengths() {
  say "running the length search ($HALFMAP sweep --lengths --out $OUT): where each reduction path stops"
  "$HALFMAP" sweep --lengths --out "$OUT"
}

# README's headline tables, regenerated from every machine folder of results/ (tools/readme_tables.py).
step_readme() {
  "$PY" tools/readme_tables.py
  say "README.md's headline tables regenerated from results/"
}

usage() {
  echo "usage: bash tools/main.sh [--sweep-only]"
  echo "  --sweep-only   the numerics alone: build, halfmap info, the sweep, its tables and maps, the length search"
  echo "                 (no benchmarks)"
}

main() {
  local sweep_only=0
  for arg in "$@"; do
    case $arg in
      --sweep-only) sweep_only=1 ;;
      -h | --help) usage; return 0 ;;
      *) echo "main.sh: unknown option '$arg'" >&2; usage >&2; return 2 ;;
    esac
  done
  step_setup
  step_build
  step_info
  if [ "$sweep_only" -eq 0 ]; then
    step_diagnose_bench
    step_bench
  fi
  step_sweep
  step_lengths
  step_readme
  say "done: results in $OUT/"
}

main "$@"
