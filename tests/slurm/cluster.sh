#!/usr/bin/env bash
# A single-node Slurm on this machine, for the tests (python/tests/test_slurm.py) and as the
# worked example of docs/distributed.md ("Slurm and PBS"):
#
#   bash tests/slurm/cluster.sh start DIR   # DIR: a new, empty directory (mode 0700)
#   bash tests/slurm/cluster.sh stop DIR
#
# start: installs Debian's slurm-wlm and munge with apt-get if they are missing (root, or
# sudo), writes DIR/slurm.conf for this host (one node with the CPUs and memory `slurmd -C`
# finds, one partition, no accounting, no cgroups), and starts munged, slurmctld and slurmd
# in the foreground of this script's children, everything under DIR: the munge key and
# socket, Slurm's state and spool, logs and PID files (nothing in /etc, /run or /var). Waits
# until the node is idle, then prints `SLURM_CONF=DIR/slurm.conf`: Slurm's commands (sbatch,
# squeue, scancel: what dask-jobqueue runs) find this cluster through that variable.
# Exit 0 when it is up; otherwise exit 1 with the reason on stderr and the daemons it
# started stopped again.
#
# stop: cancels the cluster's jobs, stops the daemons by the PIDs in DIR/*.pid (TERM, KILL
# after 10 s) and any slurmstepd they left, and returns when they are gone. DIR itself is
# the caller's to remove.
set -euo pipefail

die() { echo "tests/slurm/cluster.sh: $*" >&2; exit 1; }

daemon_pids() {  # the PIDs this script started for DIR
  local f
  for f in "$1"/munged.pid "$1"/slurmctld.pid "$1"/slurmd.pid; do
    [ -s "$f" ] && cat "$f"
  done
  return 0
}

stop() {
  local dir=$1 p i alive
  [ -d "$dir" ] || die "stop: $dir is not a directory"
  if [ -f "$dir/slurm.conf" ] && command -v scancel >/dev/null; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet --partition=intact 2>/dev/null || true
  fi
  # slurmd first (it ends its job steps), then slurmctld, then munged.
  for p in $(daemon_pids "$dir" | tac); do kill -TERM "$p" 2>/dev/null || true; done
  for i in $(seq 100); do
    alive=0
    for p in $(daemon_pids "$dir"); do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in $(daemon_pids "$dir"); do kill -KILL "$p" 2>/dev/null || true; done
  # Job steps of this cluster that outlived slurmd (their command lines name DIR's spool).
  for p in $(pgrep -f "slurmstepd.*$dir" || true); do kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$dir"/*.pid
}

install() {
  local need=()
  command -v slurmctld >/dev/null || need+=(slurm-wlm)
  command -v munged >/dev/null || need+=(munge)
  [ ${#need[@]} = 0 ] && return 0
  echo "installing: ${need[*]}" >&2
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  # Debian's policy-rc.d (containers) or our own start below: the packages' services are
  # not wanted running.
  "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null \
    || die "apt-get install ${need[*]} failed"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
  local dir=$1 host node name ctld_port d_port i state
  [ -d "$dir" ] && [ -z "$(ls -A "$dir")" ] || die "start: $dir must be an existing empty directory"
  chmod 0700 "$dir"
  install
  host=$(hostname -s)
  node=$(slurmd -C 2>/dev/null | head -1)
  [[ $node == NodeName=* ]] || die "slurmd -C did not describe this node: $node"
  name=${node%% *}
  name=${name#NodeName=}
  ctld_port=$(free_port)
  d_port=$(free_port)
  [ "$ctld_port" != "$d_port" ] || d_port=$(free_port)
  mkdir -m 0700 "$dir/state" "$dir/spool" "$dir/munge"
  cat >"$dir/slurm.conf" <<EOF
# A single-node cluster for intact's tests (tests/slurm/cluster.sh).
ClusterName=intact
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid.conf
SlurmdPidFile=$dir/slurmd.pid.conf
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=5
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=intact Nodes=$name Default=YES MaxTime=INFINITE State=UP
EOF
  # A fresh key: 1 KiB of random bytes, readable by root only (munged refuses anything else).
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 0400 "$dir/munge/munge.key"
  # munged and slurm*: foreground children of ours, their PIDs noted for `stop`.
  munged --foreground --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pidfile" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
    </dev/null >>"$dir/munged.out" 2>&1 &
  echo $! >"$dir/munged.pid"
  for i in $(seq 100); do [ -S "$dir/munge/munge.sock" ] && break; sleep 0.1; done
  if [ ! -S "$dir/munge/munge.sock" ]; then
    stop "$dir"
    die "munged did not start: $(tail -5 "$dir/munged.out" "$dir/munged.log" 2>/dev/null)"
  fi
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$dir/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.pid"
  slurmd -D -f "$SLURM_CONF" -N "$name" </dev/null >>"$dir/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.pid"
  state=
  for i in $(seq 300); do
    state=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | head -1 || true)
    [ "$state" = idle ] && break
    for p in $(daemon_pids "$dir"); do
      kill -0 "$p" 2>/dev/null || { stop "$dir"; die "a daemon exited at start: $(tail -5 "$dir"/*.out "$dir"/*.log 2>/dev/null)"; }
    done
    sleep 0.1
  done
  if [ "$state" != idle ]; then
    stop "$dir"
    die "the node did not become idle within 30 s (state: ${state:-none}): $(tail -5 "$dir"/slurmctld.log "$dir"/slurmd.log 2>/dev/null)"
  fi
  echo "SLURM_CONF=$SLURM_CONF"
}

case "${1:-}" in
  start) [ $# = 2 ] || die "usage: cluster.sh start DIR"; start "$(realpath "$2")" ;;
  stop) [ $# = 2 ] || die "usage: cluster.sh stop DIR"; stop "$(realpath "$2")" ;;
  *) die "usage: cluster.sh start DIR | stop DIR" ;;
esac
