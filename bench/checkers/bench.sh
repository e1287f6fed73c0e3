#!/usr/bin/env bash
# Warm checkers against one process per state (docs/performance.md, "Checkers"; issue 33).
# Two traces: a Python program inserting 20 rows into SQLite (bench/checkers/sqlite_rows.py)
# and the kvstore example (examples/kvstore, `kv x foo1 y foo2`). Each is checked under the
# default APM with: `true` (the spawn-rate ceiling), its Python checker one process per state
# (--checker), the same script as a warm server forking a child per state
# (--checker-server), and (SQLite) the server judging in process (BENCH_IN_PROCESS=1) and
# the forking server under `python3 -S` (no site module: what site imports, e.g. threading
# and random through a .pth, registers at-fork hooks that run in every child).
# Same run, same machine: the ratios are what counts.  Also asserts the verdicts agree.
#   bash bench/checkers/bench.sh [REPEATS]     (default 1; medians are printed)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-1}
source bench/lib.sh
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
here=$PWD/bench/checkers
json() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

mkdir "$tmp/sqlite" "$tmp/kv"
(cd "$tmp/sqlite" && "$intact" record --no-stacks --out "$tmp/sqlite.bundle" -- python3 "$here/sqlite_rows.py" >/dev/null 2>&1)
gcc -g -O0 -o "$tmp/kvbin" examples/kvstore/kv.c
(cd "$tmp/kv" && "$intact" record --no-stacks --out "$tmp/kv.bundle" -- "$tmp/kvbin" x foo1 y foo2 >/dev/null 2>&1)

echo "machine: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $reps runs; --jobs $(nproc)"
echo
echo "| trace | checker | how | distinct states | failing | check s | states/s |"
echo "|---|---|---|---:|---:|---:|---:|"
declare -A rate fails
run() {  # run NAME TRACE HOW CHECKER [ENV...]
  local name=$1 trace=$2 how=$3 ck=$4; shift 4
  local flag=--checker; [[ $how == server* ]] && flag=--checker-server
  local secs=()
  for _ in $(seq "$reps"); do
    env "$@" "$intact" check "$tmp/$trace.bundle" $flag "$ck" -q --timeout 120 --json "$tmp/r.json" >/dev/null || true
    secs+=("$(json "$tmp/r.json" "r['apms'][0]['seconds']")")
  done
  local distinct failing s
  distinct=$(json "$tmp/r.json" "r['apms'][0]['distinct']")
  failing=$(json "$tmp/r.json" "r['apms'][0]['failed']")
  s=$(median "${secs[@]}")
  rate[$name]=$(echo "$distinct / $s" | bc -l)
  fails[$name]=$failing
  printf '| %s | %s | %s | %s | %s | %.2f | %.1f |\n' "$trace" "${ck##*/}" "$how" "$distinct" "$failing" "$s" "${rate[$name]}"
}
# The quick rows back to back, the slow per-process ones last: a machine's load that
# changes during the minutes of a per-process run then does not fall between `true` and
# the servers it is compared with.
run sq-true sqlite process true
run sq-serv sqlite server "python3 $here/sqlite_check.py"
run sq-inproc sqlite server "python3 $here/sqlite_check.py" BENCH_IN_PROCESS=1
run sq-servS sqlite "server, python3 -S" "python3 -S $here/sqlite_check.py"
run kv-true kv process true
run kv-serv kv server "python3 $PWD/examples/kvstore/check.py"
run sq-proc sqlite process "python3 $here/sqlite_check.py"
run kv-proc kv process "python3 $PWD/examples/kvstore/check.py"
echo
ratio() { printf '%.1f' "$(echo "${rate[$1]} / ${rate[$2]}" | bc -l)"; }
pct() { printf '%.0f%%' "$(echo "100 * ${rate[$1]} / ${rate[$2]}" | bc -l)"; }
echo "SQLite: warm server (fork per state) $(ratio sq-serv sq-proc)x one process per state, $(pct sq-serv sq-true) of the true rate; in process $(ratio sq-inproc sq-proc)x, $(pct sq-inproc sq-true)"
echo "SQLite, server under python3 -S (no site, so none of the modules it imports; their at-fork hooks run in every child): $(ratio sq-servS sq-proc)x, $(pct sq-servS sq-true) of the true rate"
echo "kvstore: warm server $(ratio kv-serv kv-proc)x one process per state, $(pct kv-serv kv-true) of the true rate"
for t in sq kv; do
  [ "${fails[$t-proc]}" = "${fails[$t-serv]}" ] || { echo "verdicts differ on $t: ${fails[$t-proc]} vs ${fails[$t-serv]} failing" >&2; exit 1; }
done
[ "${fails[sq-proc]}" = "${fails[sq-servS]}" ] || { echo "verdicts differ on sq under -S" >&2; exit 1; }
