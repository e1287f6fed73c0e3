#!/usr/bin/env bash
# Recorder benchmarks (docs/performance.md): slowdown of `intact record` against the
# untraced workload, measured side by side in one run, and the trace-to-logical-ops
# conversion rate (`intact reconvert`, which times parsing + conversion only).
#   bash bench/record.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
source bench/lib.sh
gcc -g -O0 -o "$tmp/churn" bench/churn.c

git_wl() { sh -c 'git init -q . && git add a.txt b.txt && git -c user.name=t -c user.email=t@e commit -q -m first'; }
sql="PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL; CREATE TABLE t(a,b);"
for i in $(seq 1 20); do sql="$sql INSERT INTO t VALUES($i, 'row $i');"; done
sql="$sql PRAGMA journal_mode=WAL; BEGIN; UPDATE t SET b='x'; COMMIT;"

# fresh_dir NAME -> prints a new work directory prepared for the workload
fresh() { local d="$tmp/w.$RANDOM$RANDOM"; mkdir "$d"; echo hello > "$d/a.txt"; echo world > "$d/b.txt"; echo "$d"; }
now() { date +%s.%N; }

run_case() { # name, command...
  local name=$1; shift
  local plain=() traced=() nostack=()
  for r in $(seq 1 "$reps"); do
    d=$(fresh); t0=$(now); (cd "$d" && "$@" >/dev/null 2>&1); t1=$(now); plain+=("$(echo "$t1 - $t0" | bc -l)")
    d=$(fresh); t0=$(now); (cd "$d" && "$intact" record --out "$tmp/b.$name" --force -- "$@" >/dev/null 2>&1); t1=$(now); traced+=("$(echo "$t1 - $t0" | bc -l)")
    d=$(fresh); t0=$(now); (cd "$d" && "$intact" record --no-stacks --out "$tmp/n.$name" --force -- "$@" >/dev/null 2>&1); t1=$(now); nostack+=("$(echo "$t1 - $t0" | bc -l)")
  done
  local p t n
  p=$(median "${plain[@]}"); t=$(median "${traced[@]}"); n=$(median "${nostack[@]}")
  local calls; calls=$(python3 -c "import json;print(json.load(open('$tmp/b.$name/bundle.json'))['counts']['calls'])")
  printf '| %s | %s | %.3f | %.3f (%.0fx) | %.3f (%.0fx) |\n' "$name" "$calls" "$p" "$t" "$(echo "$t / $p" | bc -l)" "$n" "$(echo "$n / $p" | bc -l)"
}

command -v bc >/dev/null || { apt-get update -qq && apt-get install -y -qq bc >/dev/null; }
echo "machine: $(nproc) cores, $(uname -r), $(strace -V | head -1); medians of $reps runs"
echo
echo "| workload | traced calls | untraced s | record s (slowdown) | record --no-stacks s (slowdown) |"
echo "|---|---|---|---|---|"
run_case git sh -c 'git init -q . && git add a.txt b.txt && git -c user.name=t -c user.email=t@e commit -q -m first'
run_case sqlite sqlite3 test.db "$sql"
run_case churn-500 "$tmp/churn" 500
echo
echo "| bundle | conversion |"
echo "|---|---|"
for b in git sqlite churn-500; do
  echo "| $b (stacks) | $("$intact" reconvert "$tmp/b.$b") |"
done
d=$(fresh); (cd "$d" && "$intact" record --no-stacks --out "$tmp/big" -- "$tmp/churn" 20000 >/dev/null 2>&1)
echo "| churn-20000 (no stacks) | $("$intact" reconvert "$tmp/big") |"
d=$(fresh); (cd "$d" && "$intact" record --out "$tmp/bigk" -- "$tmp/churn" 3000 >/dev/null 2>&1)
echo "| churn-3000 (stacks) | $("$intact" reconvert "$tmp/bigk") |"
