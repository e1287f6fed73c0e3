#!/usr/bin/env bash
# The seeds' OptFS paper (`001`) §7, Table 3, on the explorer: how many crash states of
# SQLite's rollback journal and of a gedit-style atomic update are inconsistent when the
# file system keeps fsync's order without its durability (intactfs-osync, OptFS's
# osync), keeps both (intactfs; ext4-o, ext4 with flushes), or keeps neither (nobarrier,
# ext4 without flushes). Prints a markdown table on stdout.
#
#   bash bench/optfs/sqlite_states.sh [--apms A,B,...] [--samples N] [--seed S] [--jobs N]
#
# Workloads (bench/optfs/, each binary is also its own checker):
#   sqlite    sqlite_txn.c: journal_mode=DELETE, synchronous=FULL, 4 transactions of 3
#             rows each; consistency-only checker (integrity_check ok, the rows are those
#             of transactions 1..k, each whole; no durability demand)
#   gedit     gedit_update.c: write f.tmp, fsync, rename over f, print "saved"; checker:
#             f is the old or the new version
#   gedit-durable  the same plus fsync(".") after the rename; checker also demands the new
#             version once "saved" was printed (durability)
# Each (workload, exploration, APM) is its own `intact check` run, so that every APM's
# counts cover all its states (in one run with several APMs, a state is checked only under
# the first APM that builds it). "states" = distinct crash states built and checked,
# "inconsistent" = those the checker rejected. SQLite is explored with ALICE's strategy
# (`--explore alice`) and with N random closed sets (`--explore random`, the analog of
# Table 3's simulated crash points, whose counts are distinct states among the samples);
# the gedit traces are small enough for `--explore exhaustive`.
#
# Needs gcc, strace, libsqlite3-dev. INTACT=path uses that intact binary; otherwise it
# builds target/release/intact (cargo -j ${CARGO_JOBS:-1}). Temporary files go to a
# mktemp directory, removed on exit. Exit 0 when every run completed (inconsistent states
# are results, not errors), 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
apms=intactfs,intactfs-osync,nobarrier,ext4-o
samples=1000
seed=1
jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --apms) apms=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "sqlite_states.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in gcc strace python3; do
  command -v "$tool" >/dev/null || { echo "sqlite_states.sh: $tool is needed" >&2; exit 1; }
done
[ -f /usr/include/sqlite3.h ] || { echo "sqlite_states.sh: libsqlite3-dev is needed (apt-get install -y libsqlite3-dev)" >&2; exit 1; }
if [ -z "${INTACT:-}" ]; then
  cargo build --release -q -j "${CARGO_JOBS:-1}" -p intact-cli --manifest-path "$root/Cargo.toml"
  INTACT=$root/target/release/intact
fi
INTACT=$(realpath "$(command -v "$INTACT")")
start=$(date +%s.%N)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gcc -O1 -Wall -o "$tmp/gedit_update" "$here/gedit_update.c"
gcc -O1 -Wall -o "$tmp/sqlite_txn" "$here/sqlite_txn.c" -lsqlite3

# record NAME SETUP_CMD -- CMD...: records CMD in a fresh directory $tmp/NAME.work (after
# running SETUP_CMD there, untraced) into the bundle $tmp/NAME.
record() {
  local name=$1 setup=$2; shift 3
  mkdir "$tmp/$name.work"
  (cd "$tmp/$name.work" && $setup)
  (cd "$tmp/$name.work" && "$INTACT" record --dir . --out "$tmp/$name" --no-stacks -- "$@" >/dev/null 2>"$tmp/$name.log") ||
    { cat "$tmp/$name.log" >&2; exit 1; }
}
record sqlite true -- "$tmp/sqlite_txn" run
record gedit "$tmp/gedit_update init" -- "$tmp/gedit_update" save
record gedit-durable "$tmp/gedit_update init" -- "$tmp/gedit_update" save --durable

failed_runs=0
echo "| workload | checker | exploration | APM | states | inconsistent | fraction |"
echo "|---|---|---|---|---|---|---|"
# run WORKLOAD CHECKER_LABEL CHECKER EXPLORE_LABEL EXPLORE_ARGS...
run() {
  local w=$1 label=$2 checker=$3 xlabel=$4; shift 4
  local apm rc
  for apm in ${apms//,/ }; do
    rc=0
    "$INTACT" check "$tmp/$w" --checker "$checker" --apm "$apm" -j "$jobs" -q "$@" \
      --json "$tmp/report.json" >"$tmp/report.txt" 2>&1 || rc=$?
    if [ "$rc" -gt 1 ]; then
      echo "sqlite_states.sh: intact check $w --apm $apm failed (exit $rc):" >&2
      tail -5 "$tmp/report.txt" >&2
      failed_runs=$((failed_runs + 1))
      continue
    fi
    python3 - "$tmp/report.json" "$w" "$label" "$xlabel" <<'EOF'
import json, sys
rep, w, label, xlabel = json.load(open(sys.argv[1])), *sys.argv[2:]
a = rep["apms"][0]
n, bad, t = a["distinct"], a["failed"], a["timeouts"]
note = "" if a["complete"] else " (bound reached)"
late = f" (+{t} timed out)" if t else ""
print(f"| {w} | {label} | {xlabel} | {a['apm']} | {n}{note} | {bad}{late} | {bad / n:.1%} |")
EOF
  done
}
run sqlite consistency "$tmp/sqlite_txn check" alice --explore alice
run sqlite consistency "$tmp/sqlite_txn check" "random, $samples samples" --explore random --samples "$samples" --seed "$seed"
run gedit "old or new" "$tmp/gedit_update check" exhaustive --explore exhaustive
run gedit-durable "old or new; new once saved" "$tmp/gedit_update check --durability" exhaustive --explore exhaustive
printf '\n%s s (%s; intact check -j %s)\n' "$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)")" \
  "$(nproc) cores" "$jobs"
[ "$failed_runs" -eq 0 ]
