#!/usr/bin/env bash
# The application study (thesis 004, chapter 4): records every application's workload,
# explores its crash states under every built-in APM with its own checker, saves one
# failing state per static vulnerability, and writes docs/study.md (study/report.py).
#   bash study/run.sh [--quick] [--slow] [--apps a,b] [--jobs N] [--out DIR] [--no-doc]
# --quick: only each application's QUICK_CONFIGS (the CI subset). --slow: also the
# applications marked SLOW=1 (--apps runs them when it names them). Results go to
# study/out/<app>-<config>/ (see study/README.md). Exit 0 when every run completed
# (vulnerabilities found or not), 1 when a run failed (its error is in the doc and above).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
quick=0 apps="" jobs=$(nproc) out=$here/out doc=1 slow=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --apps) apps=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --out) out=$2; shift ;;
    --no-doc) doc=0 ;;
    --slow) slow=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "study/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
APMS=default,ext3-j,ext3-o,ext3-w,ext4-o,btrfs,ext4,ext4-dioread_lock,xfs,btrfs-linux6,strict,intactfs
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace >/dev/null; }
(cd "$root" && cargo build --release -q -p intact-cli)
intact=${CARGO_TARGET_DIR:-$root/target}/release/intact
mkdir -p "$out"
out=$(cd "$out" && pwd)
slow_ok=$slow
if [ -z "$apps" ]; then
  apps=$(cd "$here" && for d in */study.sh; do printf '%s,' "${d%/study.sh}"; done)
else
  slow_ok=1   # an application named with --apps runs even when slow
fi
failed=0 started=$EPOCHREALTIME
IFS=, read -ra app_list <<<"$apps"
for app in "${app_list[@]}"; do
  [ -n "$app" ] || continue
  [ -f "$here/$app/study.sh" ] || { echo "study/run.sh: no study/$app/study.sh" >&2; exit 2; }
  # An application marked SLOW=1 (its run takes over ~20 minutes) runs only with --slow
  # or when --apps names it.
  configs=$(STUDY_CONFIG=__list__ bash -c 'CONFIGS=(default); QUICK_CONFIGS=(); SLOW=0; source "$1" 2>/dev/null || true
    if [ "$SLOW" = 1 ] && [ "$4" = 0 ]; then echo "== $5: slow, skipped (--slow runs it)" >&2; exit 0; fi
    if [ "$2" = 1 ]; then echo "${QUICK_CONFIGS[*]:-}"; else echo "${CONFIGS[*]}"; fi' _ "$here/$app/study.sh" "$quick" "" "$slow_ok" "$app")
  for cfg in $configs; do
    name=$app; [ "$cfg" = default ] || name=$app-$cfg
    o=$out/$name
    rm -rf "$o" && mkdir -p "$o" "$out/build/$app"
    echo "== $name" >&2
    rc=0
    # One subshell per run: the application's definitions, its temp dir and its cleanup
    # stay inside it.
    (
      set -euo pipefail
      export STUDY_CONFIG=$cfg APP_DIR=$here/$app BUILD=$out/build/$app
      CONFIGS=(default) QUICK_CONFIGS=() RECORD_OPTS=() CHECK_OPTS=() CHECKER_PROTOCOL=process
      source "$APP_DIR/study.sh"
      study_build
      work=$(mktemp -d /tmp/intact-study.XXXXXX)
      trap 'rm -rf "$work"' EXIT
      mkdir "$work/dir"
      study_init "$work/dir"
      t0=$EPOCHREALTIME
      (cd "$work/dir" && "$intact" record --out "$work/bundle" "${RECORD_OPTS[@]}" -- "${WORKLOAD[@]}" \
        >"$o/record.out" 2>"$o/record.err") || { echo "record failed (exit $?):" >&2; tail -5 "$o/record.err" >&2; exit 1; }
      t1=$EPOCHREALTIME
      crc=0
      flag=--checker; [ "$CHECKER_PROTOCOL" = server ] && flag=--checker-server
      "$intact" check "$work/bundle" "$flag" "$CHECKER" --apm "$APMS" --jobs "$jobs" -q \
        --json "$o/report.json" --keep-examples "$o/failing" "${CHECK_OPTS[@]}" \
        >"$o/report.txt" 2>"$o/check.err" || crc=$?
      t2=$EPOCHREALTIME
      if [ "$crc" -gt 1 ]; then echo "check failed (exit $crc):" >&2; tail -5 "$o/check.err" >&2; exit 1; fi
      mv "$work/bundle" "$o/bundle"
      RO=$(printf '%s\x1f' "${RECORD_OPTS[@]}") CO=$(printf '%s\x1f' "${CHECK_OPTS[@]}") \
      python3 - "$o/meta.json" "$app" "$cfg" "$name" "$APP_TITLE" "$(study_version)" "$t0" "$t1" "$t2" "$jobs" "$CHECKER" "$CHECKER_PROTOCOL" <<'PY'
import json, os, sys
f, app, cfg, name, title, version, t0, t1, t2, jobs, checker, protocol = sys.argv[1:]
opts = lambda v: [x for x in os.environ.get(v, "").split("\x1f") if x]
json.dump({"app": app, "config": cfg, "name": name, "title": title, "version": version,
           "record_seconds": float(t1) - float(t0), "check_seconds": float(t2) - float(t1),
           "jobs": int(jobs), "checker": checker, "checker_protocol": protocol,
           "record_opts": opts("RO"), "check_opts": opts("CO")},
          open(f, "w"), indent=1)
PY
      head -1 "$o/report.txt" >&2
      tail -1 "$o/report.txt" >&2
    ) || rc=$?
    if [ "$rc" != 0 ]; then
      failed=1
      echo "{\"app\": \"$app\", \"config\": \"$cfg\", \"name\": \"$name\", \"failed\": true}" >"$o/meta.json"
      echo "== $name: FAILED (see above)" >&2
    fi
  done
done
total=$(python3 -c "print(round($EPOCHREALTIME - $started, 1))")
echo "study: $total s in total" >&2
echo "$total" >"$out/total_seconds"
if [ "$doc" = 1 ]; then
  python3 "$here/report.py" --out "$out" --doc "$root/docs/study.md" $([ "$quick" = 1 ] && echo --quick)
fi
exit "$failed"
