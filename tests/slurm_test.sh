#!/usr/bin/env bash
# tools/sweep_slurm.sh end to end on a one-node Slurm cluster that this test starts itself: slurmctld and slurmd in
# the foreground, configured under WORK (own ports, state, spool, logs; no cgroups, no systemd, no accounting),
# running as the current user. The merged cells.csv, thresholds.json and thresholds.md must be byte-identical to
# one `halfmap sweep` with the same options. Every daemon it started is stopped on exit, also on failure.
#
#   bash tests/slurm_test.sh HALFMAP SWEEP_SLURM_SH WORK
#
# Exit 77 (a skip for CTest) when Slurm is not installed: tools/setup.sh installs it (slurm-wlm, munge).
set -uo pipefail

halfmap=$1 script=$2 work=$3
started=$SECONDS
fail() {
  echo "slurm_test: FAILED: $*" >&2
  for f in "$work"/slurm*.out "$work"/slurmctld.log "$work"/slurmd.log "$work"/cluster*/logs/*.log; do
    [ -f "$f" ] && { echo "--- $f (last 30 lines)" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}

for cmd in slurmctld slurmd sbatch squeue scontrol sinfo scancel python3; do
  if ! command -v "$cmd" >/dev/null; then
    echo "slurm_test: skipped: $cmd is not installed; tools/setup.sh installs Slurm (slurm-wlm, munge)."
    exit 77
  fi
done

# Slurm authenticates with auth/none (Debian 12's Slurm 22.05 has it): no munged, whose checks of the key's and the
# socket's folders (every parent searchable by all, none writable by others) a build folder under /root fails.
if [ -z "$(find /usr/lib /usr/lib64 -path '*slurm*' -name auth_none.so 2>/dev/null | head -n 1)" ]; then
  echo "slurm_test: FAILED: this Slurm has no auth/none plugin (auth_none.so), which the test's cluster uses." >&2
  exit 1
fi

# Nothing of an outer Slurm job (if ctest runs inside one) may reach this cluster's commands.
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p')

rm -rf "$work"
mkdir -p "$work/state" "$work/spool"
user=$(id -un)
node=$(hostname -s)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
: >"$work/plugstack.conf"  # no SPANK plugins of the host's /etc/slurm
# No cgroups: slurmd loads a cgroup plugin at start even with proctrack/linuxproc and task/none, and the default
# (autodetect) fails where /sys/fs/cgroup is not mounted (a chroot, a minimal container). cgroup/v1 over an empty
# folder of the test's own loads without touching any cgroup; nothing the jobs do needs one. (Slurm reads
# cgroup.conf from slurm.conf's folder.)
mkdir -p "$work/cgroup"
printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\nCgroupAutomount=no\n' "$work/cgroup" >"$work/cgroup.conf"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=halfmaptest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
PlugStackConfig=$work/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SchedulerParameters=sched_interval=1,bf_interval=1
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=halfmap Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

pids=()
cleanup() {
  if [ ${#pids[@]} -gt 0 ]; then
    # Jobs still queued or running (after a failure) end first, so that no job step outlives its slurmd.
    scancel --quiet --full --user="$user" 2>/dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
    kill "${pids[@]}" 2>/dev/null
    for _ in $(seq 40); do
      alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ "$alive" -eq 0 ] && break
      sleep 0.25
    done
    kill -9 "${pids[@]}" 2>/dev/null
    wait 2>/dev/null
  fi
  echo "slurm_test: $((SECONDS - started)) s"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # a CTest timeout's SIGTERM also stops the daemons (through the EXIT trap)

slurmctld -D -c -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 & pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 & pids+=($!)

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a Slurm daemon (pid $p) exited early."; done
    sleep 0.2
  done
}
node_idle() { [[ $(sinfo -h -n "$node" -o %T) == idle* ]]; }
wait_for 30 node_idle || fail "the node did not become idle within 30 s (sinfo: $(sinfo -h -o '%T %E' 2>&1))."

# Bad sweep options are refused before anything is submitted: exit 2, no job.
bash "$script" --out "$work/refused" --halfmap "$halfmap" -- --kernels nosuch 2>"$work/refused.err"
rc=$?
[ "$rc" -eq 2 ] || fail "tools/sweep_slurm.sh with a bad sweep option exited $rc, not 2."
[ -z "$(squeue -h -o %i)" ] || fail "tools/sweep_slurm.sh submitted jobs for a bad sweep option."

opts=(--kernels sum,dense_fwd --dists normal,uniform --s-min 2^-8 --s-max 2^8 --s-step 2^2 --S-max 2^8
      --S-step 2^4 --dense 4x8x4 --dense-amplifying 2x16x2 --n 64 --seed 5)
submitted=$(bash "$script" --out "$work/cluster" --shards 3 --halfmap "$halfmap" -- "${opts[@]}") ||
  fail "tools/sweep_slurm.sh failed: $submitted"
array_job=$(sed -n 's/^array //p' <<<"$submitted")
merge_job=$(sed -n 's/^merge //p' <<<"$submitted")
[ -n "$array_job" ] && [ -n "$merge_job" ] || fail "tools/sweep_slurm.sh printed no job ids: $submitted"

job_states() { scontrol -o show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
merge_ended() { [[ $(job_states "$merge_job") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }
wait_for 60 merge_ended || fail "the merge job $merge_job did not end within 60 s ($(job_states "$merge_job"))."
[ "$(job_states "$merge_job")" = COMPLETED ] || fail "the merge job ended $(job_states "$merge_job")."
tasks=$(job_states "$array_job" | sort | uniq -c | tr -s ' ')
[ "$tasks" = " 3 COMPLETED" ] || fail "the array's 3 tasks did not all complete: $tasks"
# Array ids 1..3 must have become shards 1/3..3/3 (--shard slurm).
for k in 1 2 3; do
  got=$(python3 -c 'import json, sys; print(*json.load(open(sys.argv[1]))["shard"], sep="/")' \
        "$work/cluster/shards/task-$k/shard.json") || got="no shard.json"
  [ "$got" = "$k/3" ] || fail "shards/task-$k holds shard $got, not $k/3."
done

"$halfmap" sweep "${opts[@]}" --quiet --out "$work/single" || fail "the single-machine sweep failed."
for f in cells.csv thresholds.json thresholds.md; do
  cmp "$work/single/$f" "$work/cluster/$f" || fail "$f of the Slurm run differs from the single-machine run."
done
# --wait: the script returns when the merge has ended, with the merge's exit status (here with 2 shards).
wait_out=$(timeout 90 bash "$script" --wait --out "$work/cluster-wait" --shards 2 --halfmap "$halfmap" -- "${opts[@]}") ||
  fail "tools/sweep_slurm.sh --wait failed or timed out: $wait_out"
cmp "$work/single/cells.csv" "$work/cluster-wait/cells.csv" || fail "cells.csv of the --wait run differs."
echo "slurm_test: the Slurm run (array $array_job, 3 shards, merge $merge_job) equals the single-machine run:" \
     "$(($(wc -l <"$work/single/cells.csv") - 1)) cells"
