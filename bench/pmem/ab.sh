#!/usr/bin/env bash
# One engine change on and off in the same run (issue 28 item 1): builds txbench at two
# revisions (each in a temporary git worktree with its own target directory), then runs
# them alternately, REPS times each, the FCFS system with and without the FCFS latency
# model, 1 thread, the same seed, and prints the median CPU µs per transaction of each and
# their ratio. FG-WAL runs in the same rounds as the common yardstick.
#
#   bash bench/pmem/ab.sh REV_OFF REV_ON     e.g. bash bench/pmem/ab.sh HEAD~1 HEAD
#
# Environment: REPS (5), FILES (200), FILE_MIB (1), TXNS (20000), SEED (1), PMEM_DIR
# (/var/tmp), AB_KEEP=DIR (keep the builds there; a later run with the same revisions
# reuses them). Exit 0: done; 1: a run failed; 2: cannot run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
me=bench/pmem/ab.sh
cannot() { echo "$me: cannot run: $*" >&2; exit 2; }
(($# == 2)) || cannot "usage: bash $me REV_OFF REV_ON"
reps=${REPS:-5} files=${FILES:-200} file_mib=${FILE_MIB:-1} txns=${TXNS:-20000} seed=${SEED:-1}
dir=${PMEM_DIR:-/var/tmp}
for v in reps files file_mib txns; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "${v^^}=${!v}: expected a positive whole number"
done
command -v python3 >/dev/null || cannot "python3 is missing"
[[ -d $dir && -w $dir ]] || cannot "PMEM_DIR=$dir is not a writable directory"
declare -A commit
for rev in "$1" "$2"; do
  commit[$rev]=$(git rev-parse --verify --short "$rev^{commit}" 2>/dev/null) ||
    cannot "$rev is not a revision of this repository"
done

work=${AB_KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/intactfs-pmem-ab.XXXXXX")}
mkdir -p "$work"
trees=()
cleanup() {
  local t
  for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
  [[ -n ${AB_KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build() {  # build REV: txbench of REV at $work/txbench-COMMIT
  local c=${commit[$1]} tree
  [[ -x $work/txbench-$c ]] && return 0
  tree=$work/tree-$c
  git worktree add --detach "$tree" "$c" >/dev/null 2>&1 || cannot "git worktree add $tree $c failed"
  trees+=("$tree")
  echo "building txbench at $c ..." >&2
  (cd "$tree" && CARGO_TARGET_DIR=$work/target-$c cargo build --release -q -p intactfs-pmem --example txbench) ||
    cannot "building txbench at $c failed"
  cp "$work/target-$c/release/examples/txbench" "$work/txbench-$c"
}
build "$1"
build "$2"

results=$work/ab.jsonl
: >"$results"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < reps; r++)); do
  for rev in "$1" "$2"; do
    c=${commit[$rev]}
    "$work/txbench-$c" --files "$files" --file-mib "$file_mib" --txns "$txns" --threads 1 \
      --latency none,fcfs --systems fcfs,fgwal --seed "$seed" --dir "$dir" 2>/dev/null |
      sed "s/^{/{\"build\":\"$c\",/" >>"$results" || { echo "$me: txbench at $c failed" >&2; exit 1; }
  done
done
python3 - "$results" "${commit[$1]}" "${commit[$2]}" "$reps" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, statistics, sys
path, off, on, reps, load0, load1 = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
def med(build, system, lat, key="cpu_us_per_txn"):
    v = [r[key] for r in runs if r["build"] == build and r["system"] == system and r["latency"] == lat]
    assert len(v) == int(reps), f"{build} {system} {lat}: {len(v)} runs, {reps} expected"
    return statistics.median(v)
print(f"off = {off}, on = {on}; {reps} alternating repetitions; load {load0} -> {load1}")
print("| latency | system | CPU µs/txn off | on | on ÷ off | lines/txn off | on | fences/txn off | on |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for lat in ("none", "fcfs"):
    for system in ("fcfs", "fgwal"):
        a, b = med(off, system, lat), med(on, system, lat)
        la, lb = med(off, system, lat, "lines_per_txn"), med(on, system, lat, "lines_per_txn")
        fa, fb = med(off, system, lat, "fences_per_txn"), med(on, system, lat, "fences_per_txn")
        print(f"| {lat} | {system} | {a:.1f} | {b:.1f} | {b / a:.2f}× | {la:.0f} | {lb:.0f} | {fa:.2f} | {fb:.2f} |")
for lat in ("none", "fcfs"):
    for build in (off, on):
        print(f"- {lat}, {build}: FCFS ÷ FG-WAL {med(build, 'fcfs', lat) / med(build, 'fgwal', lat):.2f}×")
EOF
