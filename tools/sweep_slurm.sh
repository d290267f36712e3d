#!/usr/bin/env bash
# Runs `halfmap sweep` on a Slurm cluster: one job array whose N tasks each run one shard
# (`halfmap sweep --shard slurm`, which takes K/N from SLURM_ARRAY_TASK_ID/MIN/MAX/COUNT), and one merge job that
# starts only when every task succeeded (`--dependency=afterok:<array job>`) and joins the shards with
# `halfmap merge`. The merged cells.csv, thresholds.json and thresholds.md are byte-identical to one
# `halfmap sweep` with the same options on one machine.
#
#   bash tools/sweep_slurm.sh --out DIR [--shards N] [--partition P] [--cpus C] [--time T] [--halfmap PATH]
#                             [--sbatch OPT]... [--wait] [-- SWEEP OPTIONS...]
#
#   --out DIR        the result folder (created): the merged files, shards/task-<id>/ (one per array task),
#                    jobs/ (the two job scripts as submitted) and logs/ (each job's output). DIR and the halfmap
#                    binary must be on a file system every node sees.
#   --shards N       array tasks, i.e. shards (default 4); more than the sweep's work items leaves some empty
#   --partition P    sbatch --partition (default: the cluster's default partition)
#   --cpus C         CPUs per task: sbatch --cpus-per-task and the sweep's --threads (default 1)
#   --time T         sbatch --time of each job (default: the partition's limit)
#   --halfmap PATH   the binary (default: build/release/halfmap of this checkout, else `halfmap` on PATH)
#   --sbatch OPT     one more sbatch option for both jobs, e.g. --sbatch --account=proj (repeatable)
#   --wait           wait for the merge job (sbatch --wait); the exit status is then the merge's
#   -- ...           options for `halfmap sweep` (--kernels, --dists, the grids, sizes, --seed, ...); --out, --shard
#                    and --threads belong to this script
#
# Prints the two job ids (`array <id>`, `merge <id>`). Bad options, the sweep's included (halfmap checks them on
# this node first), are one sentence and exit code 2; nothing is submitted. A failed shard leaves the merge job unsatisfiable, and --kill-on-invalid-dep cancels it.
set -euo pipefail

die() { echo "sweep_slurm.sh: $*" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="" shards=4 partition="" cpus=1 time_limit="" halfmap="" wait=0
extra_sbatch=() sweep_opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --out|--shards|--partition|--cpus|--time|--halfmap|--sbatch)
      [ $# -ge 2 ] || die "$1 needs a value."
      case $1 in
        --out) out=$2 ;; --shards) shards=$2 ;; --partition) partition=$2 ;; --cpus) cpus=$2 ;;
        --time) time_limit=$2 ;; --halfmap) halfmap=$2 ;; --sbatch) extra_sbatch+=("$2") ;;
      esac
      shift 2 ;;
    --wait) wait=1; shift ;;
    --) shift; sweep_opts=("$@"); break ;;
    *) die "unknown option '$1' (sweep options go after '--'; see the top of tools/sweep_slurm.sh)." ;;
  esac
done

[ -n "$out" ] || die "--out DIR is required."
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "--shards '$shards' is not a positive integer."
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus '$cpus' is not a positive integer."
for o in "${sweep_opts[@]}"; do
  case $o in
    --out|--out=*|--shard|--shard=*|--threads|--threads=*) die "the sweep option $o is set by this script." ;;
  esac
done
if [ -z "$halfmap" ]; then
  if [ -x "$here/../build/release/halfmap" ]; then halfmap=$here/../build/release/halfmap
  else halfmap=$(command -v halfmap) || die "no halfmap binary: build it (cmake --build --preset release) or give --halfmap."
  fi
fi
[ -x "$halfmap" ] || die "--halfmap '$halfmap' is not an executable."
command -v sbatch >/dev/null || die "sbatch is not on PATH: run this on a Slurm login node."
halfmap=$(cd "$(dirname "$halfmap")" && pwd)/$(basename "$halfmap")

# The sweep options are checked here, before anything is submitted: halfmap validates every option before it runs,
# and shard N/N of N = 2^32-1 holds no work item, so this writes an empty shard in milliseconds.
check=$(mktemp -d)
if ! msg=$("$halfmap" sweep "${sweep_opts[@]}" --shard 4294967295/4294967295 --threads 1 --quiet \
             --out "$check/shard" 2>&1); then
  rm -rf "$check"
  die "the sweep options are refused: ${msg#halfmap: }"
fi
rm -rf "$check"

mkdir -p "$out"
out=$(cd "$out" && pwd)
mkdir -p "$out/shards" "$out/jobs" "$out/logs"

# The job scripts are written out (and kept in jobs/) so that every sweep option reaches halfmap exactly as given,
# whatever its characters: printf %q quotes each one for bash.
quoted_opts=""
[ ${#sweep_opts[@]} -eq 0 ] || quoted_opts=$(printf ' %q' "${sweep_opts[@]}")
cat >"$out/jobs/shard.sbatch" <<EOF
#!/bin/bash
# One shard of the sweep: task \$SLURM_ARRAY_TASK_ID of the array; halfmap derives K/N from the array variables.
set -eu
exec $(printf %q "$halfmap") sweep${quoted_opts} --shard slurm --threads "\${SLURM_CPUS_PER_TASK:-$cpus}" \\
  --quiet --out $(printf %q "$out/shards")/task-"\$SLURM_ARRAY_TASK_ID"
EOF
cat >"$out/jobs/merge.sbatch" <<EOF
#!/bin/bash
# Joins the shards once every array task succeeded; merge checks that each shard is there exactly once.
set -eu
exec $(printf %q "$halfmap") merge $(printf %q "$out/shards")/task-* --out $(printf %q "$out")
EOF

common=(--parsable --chdir="$out" "${extra_sbatch[@]}")
[ -z "$partition" ] || common+=(--partition="$partition")
[ -z "$time_limit" ] || common+=(--time="$time_limit")
array_job=$(sbatch "${common[@]}" --job-name=halfmap-sweep --array="1-$shards" --cpus-per-task="$cpus" \
                   --output="$out/logs/shard-%a.log" "$out/jobs/shard.sbatch")
array_job=${array_job%%;*}  # --parsable prints "id" or "id;cluster"
echo "array $array_job"
merge_args=("${common[@]}" --job-name=halfmap-merge --dependency="afterok:$array_job" --kill-on-invalid-dep=yes
            --output="$out/logs/merge.log")
if [ "$wait" -eq 0 ]; then
  merge_job=$(sbatch "${merge_args[@]}" "$out/jobs/merge.sbatch")
  echo "merge ${merge_job%%;*}"
else
  # --wait blocks until the job ends and returns its exit code; the id is printed first (--parsable).
  sbatch "${merge_args[@]}" --wait "$out/jobs/merge.sbatch" | sed -u 's/^\([0-9]*\).*/merge \1/'
fi
