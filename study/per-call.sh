#!/usr/bin/env bash
# Reruns the explorer on every saved study run (study/out/<run>/bundle) with durability
# vulnerabilities in the per-call view (`intact check --group per-call`, one per call before
# an output, as before issue 27 item 3) under the APMs the previous study had, writing
# study/out/<run>/per-call.json. report.py then shows each run's static count in that view
# beside the grouped one, so the part of a change that grouping by missing sync explains
# is measured, not guessed.
#   bash study/per-call.sh [--out DIR] [--jobs N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "study/per-call.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
APMS=default,ext3-j,ext3-o,ext3-w,ext4-o,btrfs,strict,intactfs
intact=${CARGO_TARGET_DIR:-$root/target}/release/intact
[ -x "$intact" ] || { echo "study/per-call.sh: $intact missing: run study/run.sh first" >&2; exit 2; }
failed=0
for meta in "$out"/*/meta.json; do
  o=$(dirname "$meta")
  [ -d "$o/bundle" ] || continue
  # The run's checker and options exactly as study/run.sh used them (meta.json).
  mapfile -t args < <(python3 - "$meta" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print("--checker-server" if m.get("checker_protocol") == "server" else "--checker")
print(m["checker"])
for x in m.get("check_opts", []):
    print(x)
PY
)
  echo "== $(basename "$o")" >&2
  rc=0
  "$intact" check "$o/bundle" "${args[0]}" "${args[1]}" --apm "$APMS" --group per-call --jobs "$jobs" -q \
    --json "$o/per-call.json.tmp" "${args[@]:2}" >/dev/null 2>"$o/per-call.err" || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "study/per-call.sh: $(basename "$o"): intact check exit $rc:" >&2; tail -3 "$o/per-call.err" >&2
    rm -f "$o/per-call.json.tmp"; failed=1; continue
  fi
  mv "$o/per-call.json.tmp" "$o/per-call.json"
done
exit "$failed"
