#!/usr/bin/env bash
# Rough costs of the LevelDB test case: system calls of the workload (strace -f -c) and the
# wall time of one checker run (mean of N runs, each on a fresh copy of the state; the copy
# is not timed).  Thesis 004, section 3.6: 0.626 s per checker run (LevelDB 1.15, 2014 HDD).
#   bash bench/leveldb/measure.sh [N]      (default 20)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace >/dev/null; }
bash "$here/build.sh" "$tmp/bin" >/dev/null
mkdir "$tmp/w" "$tmp/final" "$tmp/mid"
(cd "$tmp/w" && strace -f -c -o "$tmp/strace.txt" "$tmp/bin/workload" >/dev/null)
echo "--- strace -f -c ./workload"
cat "$tmp/strace.txt"
(cd "$tmp/final" && "$tmp/bin/workload" >"$tmp/final.out")
(cd "$tmp/mid" && "$tmp/bin/workload" --crash-after-sync >"$tmp/mid.out")
for s in final mid; do
  total=0
  for i in $(seq "$n"); do
    rm -rf "$tmp/c" && cp -a "$tmp/$s" "$tmp/c"
    t0=$EPOCHREALTIME
    "$tmp/bin/checker" "$tmp/c" "$tmp/$s.out"
    t1=$EPOCHREALTIME
    total=$(echo "$total + $t1 - $t0" | bc -l)
  done
  printf 'checker on the %-5s state: %.4f s per run (mean of %d)\n' "$s" "$(echo "$total / $n" | bc -l)" "$n"
done
