#!/usr/bin/env bash
# THE test command (see README.md): installs what is missing (tools/setup.sh), then configures, builds and runs
# the tests of the presets release, asan and arm64 (cross-built, run under qemu-aarch64; skipped on an arm64
# host, where `release` is already the arm64 build). Every preset is tried even when an earlier one fails; the
# exit status is non-zero if any step of any preset failed.
#
#   bash tools/test.sh                  all presets
#   bash tools/test.sh release asan     only these
#
# Each preset's full output is in build/<preset>/test-sh.log, ctest's in build/<preset>/ctest.log.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/setup.sh || { echo "test.sh: tools/setup.sh failed" >&2; exit 1; }

if [ $# -gt 0 ]; then
  presets=("$@")
elif [ "$(uname -m)" = aarch64 ]; then
  presets=(release asan)
else
  presets=(release asan arm64)
fi

summary=()
failed=0

# Runs one step with its output in the preset's log; shows the log's end only if the step fails.
step() {
  local preset=$1 what=$2
  shift 2
  echo "--- [$preset] $what: $*"
  if "$@" >>"build/$preset/test-sh.log" 2>&1; then
    return 0
  fi
  echo "--- [$preset] $what FAILED; the last lines of build/$preset/test-sh.log:"
  tail -n 60 "build/$preset/test-sh.log"
  return 1
}

# The cross build must contain arm64 code only: the binary is AArch64 and nothing links an x86-64 library.
check_arm64_isolation() {
  local elf
  elf=$(readelf -h build/arm64/halfmap 2>&1 | sed -n 's/^ *Machine: *//p')
  if [ "$elf" != AArch64 ]; then
    echo "build/arm64/halfmap is not an AArch64 binary (readelf: ${elf:-nothing})"
    return 1
  fi
  if grep -n x86_64-linux-gnu build/arm64/build.ninja build/arm64/CMakeCache.txt; then
    echo "the arm64 build refers to x86-64 libraries (above)"
    return 1
  fi
}

for preset in "${presets[@]}"; do
  mkdir -p "build/$preset"
  : >"build/$preset/test-sh.log"
  SECONDS=0
  if ! step "$preset" configure cmake --preset "$preset"; then
    summary+=("$preset: configure FAILED"); failed=1; continue
  fi
  if ! step "$preset" build cmake --build --preset "$preset"; then
    summary+=("$preset: build FAILED"); failed=1; continue
  fi
  if [ "$preset" = arm64 ] && ! step "$preset" "isolation check" check_arm64_isolation; then
    summary+=("$preset: not a clean arm64 build"); failed=1; continue
  fi
  echo "--- [$preset] test: ctest --preset $preset"
  ctest_log="build/$preset/ctest.log"
  # Only failures are shown as they come; skips (an ISA this CPU lacks) are counted in the summary, with their
  # reasons in the log.
  ctest --preset "$preset" 2>&1 | tee "$ctest_log" |
    grep --line-buffered -E '\*\*\*|Not Run|Timeout|Exception' | grep --line-buffered -v -E '\*\*\*Skipped|Not Run \(Disabled\)'
  rc=${PIPESTATUS[0]}
  cat "$ctest_log" >>"build/$preset/test-sh.log"
  # ctest's closing line "N% tests passed, M tests failed out of T", and the list of failed tests if any.
  result=$(grep -E 'tests passed|tests failed|No tests were found' "$ctest_log" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    failed=1
    # What the failed tests printed, where CI shows it (the full log stays in the build folder).
    echo "--- [$preset] output of the failed tests (ctest --rerun-failed --output-on-failure, last 150 lines)"
    ctest --preset "$preset" --rerun-failed --output-on-failure 2>&1 | tail -n 150
    summary+=("$preset: ${result:-ctest failed (exit $rc)}; see $ctest_log")
    summary+=("$(sed -n '/The following tests FAILED/,$p' "$ctest_log" | grep -v '^Errors while running' | sed 's/^/    /')")
  else
    skipped=$(grep -c '(Skipped)' "$ctest_log")
    summary+=("$preset: $result, $skipped skipped (${SECONDS}s)")
  fi
done

echo
echo "=== test.sh summary"
printf '%s\n' "${summary[@]}" | sed '/^$/d'
if [ "$failed" -ne 0 ]; then
  echo "=== FAILED"
  exit 1
fi
echo "=== all presets passed"
