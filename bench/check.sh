#!/usr/bin/env bash
# Explorer benchmark (docs/performance.md, "Exploring crash states"): distinct crash states
# constructed and checked per second by `intact check` with a no-op checker (`true`), on
#   gen: bench/gen_workload.c (seed 1, ~400 micro-ops under the default APM), and
#   git: `git init; git add` of 20 small files; `git commit`, run by `sh -c` in the dir;
# both recorded with --no-stacks (stacks do not change the states).  Default APM, alice
# exploration, default --jobs (all cores).  Same-run baseline: spawning the same `true`
# binary as many times as the larger trace has states, two at a time (xargs -P <jobs>), i.e.
# the process-spawn ceiling of any checker-per-state explorer on this machine.  Second
# checker, for intact's own ceiling: `exit0`, a static binary without libc that only calls
# exit(0) (glibc's start-up alone costs ~0.7 ms of CPU per process on these VMs).
#   bash bench/check.sh [REPEATS]        (default 3; medians are printed)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
source bench/lib.sh
gcc -O2 -Wall -o "$tmp/gen_workload" bench/gen_workload.c
printf 'void _start(void) { __asm__ volatile("mov $60, %%eax; xor %%edi, %%edi; syscall"); }\n' >"$tmp/exit0.c"
gcc -O2 -static -nostdlib -o "$tmp/exit0" "$tmp/exit0.c"
jobs=$(nproc)
true_bin=$(type -P true)   # intact resolves the checker to a path once; so does the baseline

json() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# Recordings.
mkdir "$tmp/gen" "$tmp/git"
(cd "$tmp/gen" && "$intact" record --no-stacks --out "$tmp/gen.bundle" -- "$tmp/gen_workload" 1 >/dev/null 2>&1)
for i in $(seq -w 1 20); do printf 'file %s\n%s\n' "$i" "$(seq "$i")" >"$tmp/git/f$i.txt"; done
(cd "$tmp/git" && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
  GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' \
  "$intact" record --no-stacks --ignore maintenance.lock --out "$tmp/git.bundle" -- \
  sh -c 'git init -q . && git add . && git -c user.name=t -c user.email=t@e commit -q -m first' >/dev/null 2>&1)

echo "machine: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); medians of $reps runs"
echo "command: intact check BUNDLE --checker CHECKER -q --json R.json   (default APM, alice, --jobs $jobs)"
echo
echo "| trace | checker | calls | micro-ops | states built | distinct states | explore s | states/s | wall s |"
echo "|---|---|---|---|---|---|---|---|---|"
max_distinct=0
for ck in true exit0; do
  ckcmd=$ck; [ "$ck" = exit0 ] && ckcmd=$tmp/exit0
  for t in gen git; do
    secs=() walls=()
    for r in $(seq "$reps"); do
      t0=$EPOCHREALTIME
      "$intact" check "$tmp/$t.bundle" --checker "$ckcmd" -q --json "$tmp/$t.json" >/dev/null
      t1=$EPOCHREALTIME
      secs+=("$(json "$tmp/$t.json" "r['apms'][0]['seconds']")")
      walls+=("$(echo "$t1 - $t0" | bc -l)")
    done
    read -r calls micro built distinct checked < <(json "$tmp/$t.json" \
      "' '.join(str(r['apms'][0][k]) for k in ('calls','micro_ops','constructed','distinct','checked'))")
    [ "$checked" = "$distinct" ] || echo "warning: $t: $checked of $distinct distinct states checked" >&2
    [ "$distinct" -gt "$max_distinct" ] && max_distinct=$distinct
    s=$(median "${secs[@]}") w=$(median "${walls[@]}")
    printf '| %s | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f |\n' "$t" "$ck" "$calls" "$micro" "$built" "$distinct" \
      "$s" "$(echo "$distinct / $s" | bc -l)" "$w"
  done
done

# Baseline: the bare cost of spawning the checker, $jobs at a time, as many times as the
# larger trace has distinct states.
echo
n=$max_distinct
for b in "$true_bin" "$tmp/exit0"; do
  walls=()
  for r in $(seq "$reps"); do
    t0=$EPOCHREALTIME
    seq "$n" | xargs -P "$jobs" -n 1 "$b"
    t1=$EPOCHREALTIME
    walls+=("$(echo "$t1 - $t0" | bc -l)")
  done
  w=$(median "${walls[@]}")
  printf 'baseline: seq %d | xargs -P %d -n 1 %s: %.2f s, %.0f spawns/s\n' "$n" "$jobs" "${b##*/}" "$w" "$(echo "$n / $w" | bc -l)"
done
