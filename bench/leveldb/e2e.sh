#!/usr/bin/env bash
# End-to-end time of the LevelDB test case (thesis 004, section 3.6: 1,321 s on 4 threads for
# 5,121 states; 166 logical operations, 369 micro-operations) with intact: build, record the
# workload (native stacks on, LevelDB's debug log db/LOG* left out), then `intact check` with
# the real checker under the default APM, alice exploration.  Recording and checking are
# timed separately.
#   bash bench/leveldb/e2e.sh [JOBS]       (default 2)
# Leaves the report in the temp dir only; set KEEP=DIR to copy bundle, report.txt and
# report.json there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
jobs=${1:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && cargo build --release -q -p intact-cli)
intact=$root/target/release/intact
bash "$here/build.sh" "$tmp/bin" >/dev/null

mkdir "$tmp/w"
t0=$EPOCHREALTIME
(cd "$tmp/w" && "$intact" record --ignore 'db/LOG*' --out "$tmp/ldb.bundle" -- "$tmp/bin/workload" \
  >"$tmp/record.out" 2>"$tmp/record.err")
t1=$EPOCHREALTIME
rc=0
"$intact" check "$tmp/ldb.bundle" --checker "$tmp/bin/checker" --apm default --explore alice \
  --jobs "$jobs" --frame-skip 'libleveldb|libstdc' -q --json "$tmp/report.json" >"$tmp/report.txt" 2>&1 || rc=$?
t2=$EPOCHREALTIME
[ "$rc" -le 1 ] || { cat "$tmp/report.txt" >&2; echo "e2e: intact check exited $rc" >&2; exit 1; }

ops=$("$intact" ops "$tmp/ldb.bundle" --json | wc -l)
echo "machine: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "record:  intact record --ignore 'db/LOG*' -- workload        (stacks on)"
echo "         $(grep -E 'logical operations' "$tmp/record.err" | sed 's/^intact: //')"
echo "check:   intact check BUNDLE --checker checker --apm default --explore alice --jobs $jobs --frame-skip 'libleveldb|libstdc'"
echo "         $(head -1 "$tmp/report.txt")"
python3 - "$tmp/report.json" "$ops" "$t0" "$t1" "$t2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); ops = int(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
a = r["apms"][0]
rec, chk = t1 - t0, t2 - t1
print()
print("| logical ops | micro-ops | states built | distinct | checked | failing | static vulns (dynamic) | record s | check s | states/s |")
print("|---|---|---|---|---|---|---|---|---|---|")
print(f"| {ops} | {a['micro_ops']} | {a['constructed']} | {a['distinct']} | {a['checked']} | {a['failed']} "
      f"| {len(r['static'])} ({len(r['dynamic'])}) | {rec:.2f} | {chk:.1f} | {a['checked'] / a['seconds']:.0f} |")
print()
print(f"thesis (2014, 4 threads, other hardware): 1321 s for 5121 states = {5121 / 1321:.1f} states/s; "
      f"here end to end {rec + chk:.1f} s ({1321 / (rec + chk):.0f}x less), "
      f"{a['checked'] / a['seconds'] / (5121 / 1321):.0f}x the state rate")
EOF
echo
echo "--- vulnerabilities (intact check report, first lines)"
sed -n '3,$p' "$tmp/report.txt" | grep -E '^#|^[0-9]+ static' || true
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP" && cp -a "$tmp/ldb.bundle" "$tmp/report.txt" "$tmp/report.json" "$KEEP/"
fi
