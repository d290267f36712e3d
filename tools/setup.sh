#!/usr/bin/env bash
# Installs the Debian 12 packages that halfmap's build, tests and main job need, and only those that are
# missing: a second run installs nothing and needs no network. Runs apt as root directly, otherwise with sudo.
# Adds the arm64 architecture for the cross build's libraries (the `arm64` preset).
#
#   bash tools/setup.sh          what the build, the tests and the main job need
#   bash tools/setup.sh --peers  that, and the libraries halfmap_bench compares against (bench/bench_peers.cpp:
#                                OpenBLAS, oneDNN, XNNPACK with pthreadpool, Eigen), native only: the build finds
#                                each that is present and skips the others (tools/main.sh asks for them); and
#                                PyTorch (python3-torch), whose CPU kernels the sweep runs through tools/torch_peer.py
#   bash tools/setup.sh --fuzz   only what tools/fuzz.sh needs besides: clang and its libFuzzer/sanitizer runtimes
#   bash tools/setup.sh --build  only what building and running halfmap needs (README's quick start): no Python
#                                packages, no Slurm for the tests' cluster, no arm64 cross build
set -euo pipefail

# What configuring and building every target needs (`--build`: README's quick start)...
build_packages=(
  cmake g++ ninja-build pkg-config git
  libxsimd-dev libxtensor-dev xtl-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev
)
# ...and what the tests and the main job add: Python with NumPy (the tests' data, diagnose_bench), matplotlib (the
# maps and charts), onnx (the tests' networks), GNU time and binutils (objdump, diagnose_bench).
native_packages=("${build_packages[@]}" python3 python3-matplotlib python3-numpy python3-onnx time binutils)
# The one-node Slurm cluster that tests/slurm_test.sh starts under the build folder to run tools/sweep_slurm.sh:
# slurm-wlm (slurmctld, slurmd and the client commands sbatch, squeue, scontrol) and munge, Slurm's usual
# authentication (a dependency of slurm-wlm; the test's cluster uses auth/none and starts its own daemons with
# its own configuration, never the system's services).
slurm_packages=(slurm-wlm munge)
peer_packages=(libopenblas-dev libdnnl-dev libxnnpack-dev libpthreadpool-dev libeigen3-dev python3-torch)
# The cross build (on a host that is not arm64): Debian's cross compiler, qemu to run its tests, and the arm64
# libraries it links (multiarch, /usr/lib/aarch64-linux-gnu). libgmock-dev is listed because GTest's CMake
# config references the gmock libraries. ONNX: libonnx-dev:arm64 cannot be installed beside the native one (its
# dependency libonnxifi ships /usr/lib/libonnxifi.so in both), so the cross build takes ONNX's generated protobuf
# classes from the native libonnx-dev's headers (they are the same for every architecture) and links the arm64
# runtime library libonnx1:arm64 (CMakeLists.txt, "ONNX").
cross_packages=(g++-aarch64-linux-gnu qemu-user libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64
                libbenchmark-dev:arm64 libonnx1:arm64 libprotobuf-dev:arm64)

fuzz_packages=(clang libclang-rt-14-dev)

export DEBIAN_FRONTEND=noninteractive
native_arch=$(dpkg --print-architecture)
fuzz=0
with_peers=0
build_only=0
for arg in "$@"; do
  case $arg in
    --fuzz) fuzz=1 ;;
    --peers) with_peers=1 ;;
    --build) build_only=1 ;;
    *) echo "setup.sh: unknown option '$arg' (the options are --peers, --build and --fuzz)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo DEBIAN_FRONTEND=noninteractive)
else
  echo "setup.sh: packages must be installed, but this is not root and sudo is missing; run it as root." >&2
  exit 1
fi

# True if the package is installed for the wanted architecture: the one after ':', otherwise the native one (or
# 'all'). A plain dpkg-query name would also match the arm64 copy of a Multi-Arch: same package.
installed() {
  local name=${1%%:*} arch=${1#*:}
  [ "$arch" != "$1" ] || arch="$native_arch|all"
  local status
  status=$(dpkg-query -W -f='${Status} ${Architecture}\n' "$name" 2>/dev/null) || return 1
  grep -Eq "^install ok installed ($arch)\$" <<<"$status"
}

# Runs an apt/dpkg command with its chatter in a log; shows the log only when the command fails.
quiet() {
  local log
  log=$(mktemp)
  if ! "${as_root[@]}" "$@" >"$log" 2>&1; then
    echo "setup.sh: failed: $*" >&2
    tail -n 40 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

if [ "$fuzz" -eq 0 ] && [ "$build_only" -eq 0 ] && [ "$native_arch" != arm64 ] && ! grep -qx arm64 <<<"$(dpkg --print-foreign-architectures)"; then
  echo "setup.sh: adding the arm64 architecture (dpkg --add-architecture arm64)"
  quiet dpkg --add-architecture arm64
fi

if [ "$fuzz" -eq 1 ]; then
  wanted=("${fuzz_packages[@]}")
else
  if [ "$build_only" -eq 1 ]; then
    wanted=("${build_packages[@]}")
  else
    wanted=("${native_packages[@]}" "${slurm_packages[@]}")
    [ "$native_arch" = arm64 ] || wanted+=("${cross_packages[@]}")
  fi
  [ "$with_peers" -eq 0 ] || wanted+=("${peer_packages[@]}")
fi
missing=()
for p in "${wanted[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all packages present"
  exit 0
fi

echo "setup.sh: installing ${missing[*]}"
quiet apt-get update -q
# One transaction: apt keeps the native and :arm64 copies of a Multi-Arch: same package at one version (it
# upgrades an installed twin when needed).
quiet apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup.sh: done"
