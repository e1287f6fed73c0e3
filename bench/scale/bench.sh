#!/usr/bin/env bash
# Explorer scale (docs/performance.md, "Scale"; issue 29): peak memory (max RSS) and time of
# `intact record` and `intact check --checker true` (default APM, alice exploration) on a
# program that appends N blocks of 4 KiB to one file with an fsync every K appends
# (bench/scale/appends.c), for each N given. Each check runs under an address-space limit
# (LIMIT_GB, default 16) so a run that would exhaust the machine stops and is reported as
# over the limit instead. The fitted exponent b of RSS ~ N^b over the measured N is printed
# (1 = linear, 2 = quadratic).
#   bash bench/scale/bench.sh [N...]          (default: 250 500 1000; K=100)
#   CHECKER=server bash bench/scale/bench.sh [N...]
# CHECKER=server checks with the no-op warm server bench/scale/pass_server.c
# (`--checker-server`, one process per worker answering "pass" to every state) instead of
# one `true` process per state, so the time is the explorer's and not process starts.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib.sh
ns=("$@"); [ ${#ns[@]} -gt 0 ] || ns=(250 500 1000)
k=${K:-100} limit_gb=${LIMIT_GB:-16}
gcc -O2 -Wall -o "$tmp/appends" bench/scale/appends.c
case ${CHECKER:-true} in
  true) checker=(--checker true) ;;
  server) gcc -O2 -Wall -o "$tmp/pass_server" bench/scale/pass_server.c
    checker=(--checker-server "$tmp/pass_server") ;;
  *) echo "bench/scale/bench.sh: CHECKER must be true or server, not ${CHECKER}" >&2; exit 2 ;;
esac
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); K=$k; check limit ${limit_gb} GiB; CHECKER=${CHECKER:-true}"
echo
echo "| appends N | calls | micro-ops | distinct states | record MB | record s | check MB | check s |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
fit=()
for n in "${ns[@]}"; do
  rm -rf "$tmp/w" "$tmp/b" && mkdir "$tmp/w"
  (cd "$tmp/w" && /usr/bin/time -f '%M %e' -o "$tmp/rec.time" "$intact" record --no-stacks --out "$tmp/b" -- "$tmp/appends" "$n" "$k" >/dev/null 2>"$tmp/rec.err")
  read -r rec_kb rec_s <"$tmp/rec.time"
  rc=0
  /usr/bin/time -f '%M %e' -o "$tmp/chk.time" prlimit --as=$((limit_gb << 30)) -- \
    "$intact" check "$tmp/b" "${checker[@]}" -q --json "$tmp/r.json" >/dev/null 2>"$tmp/chk.err" || rc=$?
  read -r chk_kb chk_s < <(tail -1 "$tmp/chk.time")
  if [ "$rc" -gt 1 ]; then
    printf '| %s | | | | %.0f | %.1f | over %s GiB (exit %s) | %.1f |\n' "$n" "$((rec_kb / 1024))" "$rec_s" "$limit_gb" "$rc" "$chk_s"
    continue
  fi
  read -r calls micro distinct < <(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['apms'][0]; print(a['calls'], a['micro_ops'], a['distinct'])" "$tmp/r.json")
  printf '| %s | %s | %s | %s | %.0f | %.1f | %.0f | %.1f |\n' "$n" "$calls" "$micro" "$distinct" "$((rec_kb / 1024))" "$rec_s" "$((chk_kb / 1024))" "$chk_s"
  fit+=("$n $chk_kb")
done
printf '%s\n' "${fit[@]}" | python3 -c "
import math, sys
pts = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
if len(pts) < 2:
    sys.exit(print('fewer than two measured N: no exponent'))
xs = [math.log(n) for n, _ in pts]; ys = [math.log(kb) for _, kb in pts]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
print(f'fitted exponent of check peak RSS over N: {b:.2f} (1 = linear, 2 = quadratic)')
"
