#!/usr/bin/env bash
# Traces of a million calls (docs/performance.md, "Scale"; issue 29 item 2): peak memory
# (max RSS) and time of `intact record --no-stacks` and `intact reconvert` on
# bench/churn.c, a generated workload of 9 traced calls per round (write-temporary/
# pwrite/read/fsync/rename plus log appends), for each number of rounds given.
#   bash bench/scale/trace.sh [ROUNDS...]     (default: 111111, about 1,000,000 calls)
# BASE=/path/to/another/intact adds its rows, each run right after this build's, so the two
# are compared in the same run (e.g. a release binary of an earlier commit).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib.sh
rounds=("$@"); [ ${#rounds[@]} -gt 0 ] || rounds=(111111)
gcc -g -O0 -o "$tmp/churn" bench/churn.c
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| intact | rounds | calls | logical ops | raw trace MB | ops.jsonl MB | record MB | record s | reconvert MB | reconvert s | conversion |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
binaries=("$intact"); [ -z "${BASE:-}" ] || binaries+=("$BASE")
for r in "${rounds[@]}"; do
for bin in "${binaries[@]}"; do
    rm -rf "$tmp/w" "$tmp/b" && mkdir "$tmp/w" && echo hello > "$tmp/w/a.txt"
    (cd "$tmp/w" && /usr/bin/time -f '%M %e' -o "$tmp/rec.time" "$bin" record --no-stacks --out "$tmp/b" -- "$tmp/churn" "$r" >/dev/null 2>"$tmp/rec.err")
    read -r rec_kb rec_s <"$tmp/rec.time"
    rate=$(/usr/bin/time -f '%M %e' -o "$tmp/conv.time" "$bin" reconvert "$tmp/b")
    read -r conv_kb conv_s <"$tmp/conv.time"
    read -r calls ops < <(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counts']; print(c['calls'], c['ops'])" "$tmp/b/bundle.json")
    mb() { echo $(( $(stat -c %s "$1") >> 20 )); }
    name=this; [ "$bin" = "$intact" ] || name=base
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$r" "$calls" "$ops" "$(mb "$tmp/b/trace.raw")" "$(mb "$tmp/b/ops.jsonl")" \
      "$((rec_kb / 1024))" "$rec_s" "$((conv_kb / 1024))" "$conv_s" "$rate"
  done
done
