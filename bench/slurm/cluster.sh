#!/usr/bin/env bash
# A one-host Slurm cluster for bench:slurm (bench/slurm.bench.ts), from Debian's packages:
#   cluster.sh start DIR   installs slurmctld, slurmd, slurm-client and munge if absent (root), writes
#                          a munge key, slurm.conf and gres.conf (8 fake GPUs) under DIR, starts
#                          munged, slurmctld and slurmd as root on loopback and waits until the
#                          node is idle; everything it writes (state, logs, sockets) stays in DIR
#   cluster.sh stop DIR    stops the daemons started for DIR (by the pids in DIR), then waits
#                          until they are gone
# SLURM_BENCH_CTLD_PORT / SLURM_BENCH_SLURMD_PORT: the two daemons' ports (6817 / 6818).
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}
. "$(dirname "$0")/../../scripts/setup/common.sh"

GPUS=8
# pidfile → process id, empty when the file is missing or the process is gone
pid_of() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && cat "$1" || true; }

stop() {
  local f pid i
  # slurmd first (it holds the jobs' steps), munged last (the others authenticate through it).
  for f in slurmd slurmctld munged; do
    pid="$(pid_of "$dir/$f.pid")"
    [ -n "$pid" ] || continue
    kill -TERM "$pid"
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  done
  return 0
}

start() {
  [ "$(id -u)" -eq 0 ] || {
    echo "bench:slurm runs the Slurm daemons as root: run it as root" >&2
    exit 1
  }
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && command -v munged >/dev/null ||
    apt_install slurmctld slurmd slurm-client munge
  mkdir -p "$dir"/{state,spool,dev}
  chmod 700 "$dir"

  # A fresh key for this run only; munged refuses a key others can read.
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 400 "$dir/munge.key"
  # --force: munged refuses to run as root otherwise.
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" </dev/null >/dev/null 2>&1

  # gres.conf File= must be a character device (slurmd reads its major:minor): copies of /dev/null.
  local i
  for i in $(seq 0 $((GPUS - 1))); do
    mknod "$dir/dev/fakegpu$i" c 1 3
  done

  local host cpus mem
  host="$(hostname -s)"
  cpus="$(nproc)"
  mem="$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))"
  cat >"$dir/gres.conf" <<EOF
NodeName=$host Name=gpu File=$dir/dev/fakegpu[0-$((GPUS - 1))]
EOF
  cat >"$dir/slurm.conf" <<EOF
ClusterName=bench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${SLURM_BENCH_CTLD_PORT:-6817}
SlurmdPort=${SLURM_BENCH_SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=error
SlurmdDebug=error
# No cgroups, no accounting daemon: job records go to a text file (start and end times).
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
# GPUs are the resource that limits, as on the platform: a core may hold up to $GPUS jobs
# (OverSubscribe=FORCE below), so 8 one-GPU jobs run at once however few cores the box has.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# Scheduling on every submit and every end ("defer" would leave a lone job for the next
# interval); finished jobs leave memory soon, so 2,000 of them do not slow the controller.
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
MinJobAge=10
MaxJobCount=100000
MaxArraySize=10001
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$GPUS State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE OverSubscribe=FORCE:$GPUS State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  # The daemons detach; their output goes to their log files, not to the caller's pipes.
  slurmctld -f "$dir/slurm.conf" </dev/null >/dev/null 2>&1
  slurmd -f "$dir/slurm.conf" </dev/null >/dev/null 2>&1
  # Up once the controller answers and the node registered idle (30 s at most; sinfo alone
  # would retry an absent controller for minutes).
  local deadline=$((SECONDS + 30)) state=""
  while [ $SECONDS -lt $deadline ]; do
    state="$(timeout 3 sinfo -h -N -o '%T' 2>/dev/null || true)"
    [ "$state" = idle ] && {
      echo "slurm: $host idle, $cpus CPUs, gpu:$GPUS ($(slurmctld -V))"
      return 0
    }
    sleep 0.2
  done
  echo "slurm: the node did not become idle (state '${state:-none}'); logs:" >&2
  tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log "$dir"/munged.log >&2 || true
  stop
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
