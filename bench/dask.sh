#!/usr/bin/env bash
# Dask benchmark (docs/distributed.md, docs/performance.md): distinct crash states checked per
# second by `intact check -j N` (local) and by `intact check --dask ADDRESS` on a local Dask
# cluster of N single-threaded worker processes (N = the machine's cores; started once,
# before the timings: scheduler + N workers, no nanny), on the same bundles in the same run
# (local and Dask alternate, repetition by repetition); ratio = Dask / local. Wall time of the
# whole command each way (the Dask run includes starting the driver, emitting units,
# shipping the bundle once, the rounds of batched tasks, and assembling the report). Rows:
#   kv:    examples/kvstore recorded as in the quick start (2 puts); its checker (python3
#          check.py, a cheap checker: tens of ms), and the same after a 0.2 s sleep;
#   kv8:   the same program with 8 puts (more states), both checkers;
#   gen:   bench/gen_workload.c (seed 1, --no-stacks), the no-op checker `true`, 400 random
#          states (--explore random --samples 400): the per-state overhead alone.
# Default APM. Checks that both ways give the same JSON report (timings aside). A second
# table splits the last Dask run's time as the driver reports it (connecting, emitting the
# units, checking them; the rest is the driver's start and the report).
#   bash bench/dask.sh [REPEATS]        (default 3; medians are printed)
#
# Mode `servers` (issue 33 item 3): the kvstore checker four ways on the same cluster —
# local --checker (the baseline), local --checker-server, Dask --checker, Dask
# --checker-server (one `intact check-unit --serve` per worker, one warm server each) —
# on the quick start's kv (2 puts) and kv8 (8 puts), states/s as ratios to local --checker:
#   bash bench/dask.sh servers [REPEATS]
#
# Mode `scale` (issue 29 item 3): simulated workers — a checker that only waits 0.2 s — on
# kv8 with 1, 2, 4 and 8 workers, speed-up against 1 worker:
#   bash bench/dask.sh scale [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=rows
case "${1:-}" in servers | scale) mode=$1; shift ;; esac
reps=${1:-3}
python3 -c "import distributed" 2>/dev/null || { echo "bench/dask.sh needs dask.distributed: pip install 'dask[distributed]'" >&2; exit 2; }
source bench/lib.sh
py=$(python3 -c 'import sys; print(sys.executable)')   # not a version manager's shim
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
pids=()
cleanup_pids() {
  # Workers first; a worker whose scheduler is gone may not stop on SIGTERM: SIGKILL after 5 s.
  local p i alive
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for i in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
cleanup() {
  cleanup_pids
  rm -rf "$tmp"
}
trap cleanup EXIT

# Recordings.
gcc -g -O0 -o "$tmp/kv" examples/kvstore/kv.c
gcc -O2 -Wall -o "$tmp/gen_workload" bench/gen_workload.c
mkdir "$tmp/kvdb" "$tmp/gen"
(cd "$tmp/kvdb" && "$intact" record --out "$tmp/kv.bundle" -- "$tmp/kv" x foo1 y foo2 >/dev/null 2>&1)
kv8_puts="a 1 b 2 c 3 d 4 e 5 f 6 g 7 h 8"
mkdir "$tmp/kv8db"
(cd "$tmp/kv8db" && "$intact" record --out "$tmp/kv8.bundle" -- "$tmp/kv" $kv8_puts >/dev/null 2>&1)
(cd "$tmp/gen" && "$intact" record --no-stacks --out "$tmp/gen.bundle" -- "$tmp/gen_workload" 1 >/dev/null 2>&1)
printf '#!/bin/sh\nsleep 0.2\nexec %s %s "$@"\n' "$py" "$PWD/examples/kvstore/check.py" >"$tmp/slow-check"
chmod +x "$tmp/slow-check"

json() { "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
same() {
  "$py" - "$1" "$2" <<'EOF'
import json, sys
def n(p):
    r = json.load(open(p)); r.pop("seconds")
    for a in r["apms"]: a.pop("seconds")
    r["timeouts"].sort(key=json.dumps)
    return r
print("yes" if n(sys.argv[1]) == n(sys.argv[2]) else "NO")
EOF
}

# The cluster: a scheduler and one worker of 1 thread per core, killed by PID on exit.
cores=$(nproc)
export DASK_TEMPORARY_DIRECTORY=$tmp/dask
start_cluster() {  # N TAG: a scheduler and N single-threaded workers; sets $addr
  local n=$1 tag=$2 i
  "$py" -m distributed.cli.dask_scheduler --host 127.0.0.1 --port 0 --no-dashboard \
    --scheduler-file "$tmp/sched-$tag.json" >"$tmp/sched-$tag.log" 2>&1 &
  pids+=($!)
  for i in $(seq "$n"); do
    mkdir -p "$tmp/w$tag-$i"
    "$py" -m distributed.cli.dask_worker --scheduler-file "$tmp/sched-$tag.json" --nthreads 1 --no-nanny \
      --no-dashboard --local-directory "$tmp/w$tag-$i" >"$tmp/w$tag-$i.log" 2>&1 &
    pids+=($!)
  done
  "$py" - "$tmp/sched-$tag.json" "$n" <<'EOF'
import sys, time
from distributed import Client
for _ in range(600):
    try:
        c = Client(scheduler_file=sys.argv[1], timeout=5)
        break
    except Exception:
        time.sleep(0.1)
c.wait_for_workers(int(sys.argv[2]), timeout=60)
c.close()
EOF
  addr=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['address'])" "$tmp/sched-$tag.json")
}
stop_cluster() {  # ends every process started so far (cleanup, by PID)
  cleanup_pids
  pids=()
}

if [ "$mode" = scale ]; then
  # Simulated workers: a checker that only waits (sleep 0.2, no CPU), so that 1, 2, 4 and 8
  # workers on this machine behave like workers with that much latency each on their own
  # cores; speed-up against 1 worker, same bundle (kv8), same run.
  printf '#!/bin/sh\nsleep 0.2\n' >"$tmp/sleep-check"
  chmod +x "$tmp/sleep-check"
  echo "machine: $cores cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $reps runs"
  echo "intact check kv8 --checker 'sleep 0.2' --json R --dask ADDR (N workers x 1 thread, started before the timings)"
  echo
  echo "| workers | states checked | s | states/s | speed-up | efficiency | same report | the last run, as the driver reports it |"
  echo "|---|---|---|---|---|---|---|---|"
  base=
  for n in 1 2 4 8; do
    start_cluster "$n" "s$n"
    ws=()
    for r in $(seq "$reps"); do
      t0=$EPOCHREALTIME
      "$intact" check "$tmp/kv8.bundle" --checker "$tmp/sleep-check" --json "$tmp/s.json" --dask "$addr" \
        >/dev/null 2>"$tmp/s.err" || [ $? -le 1 ] || { cat "$tmp/s.err" >&2; exit 1; }
      t1=$EPOCHREALTIME
      ws+=("$(echo "$t1 - $t0" | bc -l)")
    done
    stop_cluster
    s=$(median "${ws[@]}")
    [ -n "$base" ] || { base=$s; cp "$tmp/s.json" "$tmp/s1.json"; }
    n_states=$(json "$tmp/s.json" "sum(a['checked'] for a in r['apms'])")
    printf '| %s | %s | %.2f | %.1f | %.2f | %.2f | %s | %s |\n' "$n" "$n_states" "$s" "$(echo "$n_states / $s" | bc -l)" \
      "$(echo "$base / $s" | bc -l)" "$(echo "$base / $s / $n" | bc -l)" "$(same "$tmp/s1.json" "$tmp/s.json")" \
      "$(grep -E 'unit\(s\) checked in' "$tmp/s.err" | tail -1 | sed 's/^intact dask: //')"
  done
  exit 0
fi
start_cluster "$cores" main


if [ "$mode" = servers ]; then
  echo "machine: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $reps runs"
  echo "local: intact check BUNDLE --checker|--checker-server C -q --json R -j 2;  Dask: the same with --dask $addr (2 workers x 1 thread)"
  echo
  echo "| bundle | how | states checked | s | states/s | / local --checker | same report |"
  echo "|---|---|---|---|---|---|---|"
  way() {  # NAME BUNDLE FLAG [--dask ADDR]: median seconds; the report in $tmp/w.json
    local name=$1 bundle=$2 flag=$3; shift 3
    local ws=() t0 t1
    for r in $(seq "$reps"); do
      t0=$EPOCHREALTIME
      "$intact" check "$bundle" "$flag" "$py $PWD/examples/kvstore/check.py" -q --json "$tmp/w.json" -j 2 "$@" \
        >/dev/null 2>"$tmp/w.err" || [ $? -le 1 ] || { cat "$tmp/w.err" >&2; exit 1; }
      t1=$EPOCHREALTIME
      ws+=("$(echo "$t1 - $t0" | bc -l)")
    done
    median "${ws[@]}"
  }
  servers_rows() {  # NAME BUNDLE
    local name=$1 bundle=$2 base n s how
    base=$(way "$name" "$bundle" --checker)
    cp "$tmp/w.json" "$tmp/base.json"
    n=$(json "$tmp/base.json" "sum(a['checked'] for a in r['apms'])")
    printf '| %s | local --checker | %s | %.2f | %.1f | 1.00 | - |\n' "$name" "$n" "$base" "$(echo "$n / $base" | bc -l)"
    for how in "local --checker-server" "Dask --checker" "Dask --checker-server"; do
      case $how in
        "local --checker-server") s=$(way "$name" "$bundle" --checker-server) ;;
        "Dask --checker") s=$(way "$name" "$bundle" --checker --dask "$addr") ;;
        "Dask --checker-server") s=$(way "$name" "$bundle" --checker-server --dask "$addr") ;;
      esac
      printf '| %s | %s | %s | %.2f | %.1f | %.2f | %s |\n' "$name" "$how" "$n" "$s" "$(echo "$n / $s" | bc -l)" \
        "$(echo "$base / $s" | bc -l)" "$(same "$tmp/base.json" "$tmp/w.json")"
    done
  }
  servers_rows kv "$tmp/kv.bundle"
  # The checker learns kv8's puts from KV_EXPECT, here and (--env) on the workers.
  KV_EXPECT=$(printf '%s=%s ' $kv8_puts) INTACT_DASK_OPTS="--env KV_EXPECT" servers_rows kv8 "$tmp/kv8.bundle"
  exit 0
fi
echo "machine: $cores cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $reps runs"
echo "local: intact check BUNDLE --checker C -q --json R -j $cores;  Dask: the same with --dask $addr ($cores workers x 1 thread)"
echo
echo "| bundle | checker | states checked | local s | local states/s | Dask s | Dask states/s | Dask / local | same report |"
echo "|---|---|---|---|---|---|---|---|---|"
phases=()
row() {  # NAME BUNDLE CHECKER-LABEL CHECKER [intact check options...]
  local name=$1 bundle=$2 label=$3 checker=$4; shift 4
  local lw=() dw=() t0 t1
  for r in $(seq "$reps"); do
    t0=$EPOCHREALTIME
    "$intact" check "$bundle" --checker "$checker" "$@" -q --json "$tmp/l.json" -j "$cores" >/dev/null || [ $? -le 1 ]
    t1=$EPOCHREALTIME
    lw+=("$(echo "$t1 - $t0" | bc -l)")
    # Not -q: the driver's last line splits its time (a few lines on stderr cost nothing).
    t0=$EPOCHREALTIME
    "$intact" check "$bundle" --checker "$checker" "$@" --json "$tmp/d.json" --dask "$addr" >/dev/null 2>"$tmp/d.err" \
      || [ $? -le 1 ] || { cat "$tmp/d.err" >&2; exit 1; }
    t1=$EPOCHREALTIME
    dw+=("$(echo "$t1 - $t0" | bc -l)")
  done
  local n l d last
  n=$(json "$tmp/l.json" "sum(a['checked'] for a in r['apms'])")
  l=$(median "${lw[@]}") d=$(median "${dw[@]}")
  printf '| %s | %s | %s | %.2f | %.1f | %.2f | %.1f | %.2f | %s |\n' "$name" "$label" "$n" "$l" "$(echo "$n / $l" | bc -l)" \
    "$d" "$(echo "$n / $d" | bc -l)" "$(echo "$l / $d" | bc -l)" "$(same "$tmp/l.json" "$tmp/d.json")"
  last=$(grep -E 'unit\(s\) checked in' "$tmp/d.err" | tail -1 | sed 's/^intact dask: //')
  phases+=("| $name | $label | $(echo "${dw[-1]}" | xargs printf '%.2f') | $last |")
}
slow="$tmp/slow-check"
row kv "$tmp/kv.bundle" "check.py" "$py $PWD/examples/kvstore/check.py"
row kv "$tmp/kv.bundle" "sleep 0.2; check.py" "$slow"
# The checker learns kv8's puts from KV_EXPECT, here and (--env) on the workers.
export KV_EXPECT INTACT_DASK_OPTS
KV_EXPECT=$(printf '%s=%s ' $kv8_puts) INTACT_DASK_OPTS="--env KV_EXPECT"
row kv8 "$tmp/kv8.bundle" "check.py" "$py $PWD/examples/kvstore/check.py"
row kv8 "$tmp/kv8.bundle" "sleep 0.2; check.py" "$slow"
unset KV_EXPECT INTACT_DASK_OPTS
row gen "$tmp/gen.bundle" "true" "true" --explore random --samples 400
echo
echo "The last Dask run of each row, as the driver reports it:"
echo
echo "| bundle | checker | Dask s | driver's account |"
echo "|---|---|---|---|"
printf '%s\n' "${phases[@]}"
