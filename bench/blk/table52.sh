#!/usr/bin/env bash
# Thesis 004, Table 5.2(b) ("BoB": consistent post-reboot disk states) on today's software:
# LevelDB and git (default configuration) recorded at the block level with `intact blk
# record` on ext4 (data=ordered, the default) and on intactfs, every crash image checked with
# `intact blk check` and the study's own checkers (study/leveldb, study/git).
#   bash bench/blk/table52.sh [--apps leveldb,git] [--fs ext4,intactfs,ext4:commit=1]
#        [--variants unmount,sleep] [--seed 1] [--tear 4096] [--max-images 2000] [--jobs 2]
#        [--out DIR]
# --fs: FS or FS:MOUNT_OPTS. --variants: "unmount" = the workload, then the unmount writes
# back whatever is dirty; "sleep" = the workload, then 40 s of sleep inside the recording
# so the kernel's flusher and journal write back on their own, as the thesis did.
# Builds what it needs (idempotent: release intact, LevelDB's workload and checker through
# bench/leveldb/build.sh into target/table52/leveldb). Results go to DIR (default
# target/table52/results): per run <app>-<variant>-<fs>/ with the block log (log/), the report
# (report.json, report.txt), record and check times; table.md (the markdown table, also
# printed on stdout). docs/validation.md, "Table 5.2(b) on today's software", explains them.
# INTACT=path uses that intact binary instead of building one. Exit 0 when every run
# completed (inconsistent images are results, not errors), 1 when a run failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
self=$here/$(basename "$0")
SLEEP=40   # the "sleep" variant: seconds after the workload (thesis: 30 LevelDB, 40 git)

# ---- Thin wrappers around the study's workloads and checkers (run by intact) ---------
# git: the study's study_init (git init, its configuration, the initial commit; untraced in
# the study) is `intact blk record --setup`: run in the new file system before recording,
# part of the initial image. Then the study's WORKLOAD, unchanged, in repo/ (the working
# directory is the mount point). Its git is /usr/bin/git: the same Debian 2.39 that the
# study builds from source only to get line tables.
git_env() {
  export STUDY_CONFIG=default APP_DIR=$root/study/git BUILD=$1
  mkdir -p "$BUILD"
  ln -sfn /usr/bin/git "$BUILD/git"
  CONFIGS=(default) QUICK_CONFIGS=() RECORD_OPTS=() CHECK_OPTS=()
  # shellcheck source=../../study/git/study.sh
  source "$APP_DIR/study.sh"
}
case "${1:-}" in
  __git-setup)
    git_env "$2"
    mkdir repo
    study_init "$PWD/repo"
    exit 0 ;;
  __git-workload)
    git_env "$2"
    cd repo
    "${WORKLOAD[@]}"
    sleep "$3"
    exit 0 ;;
  # LevelDB: the study's workload, unchanged (it creates ./db), then the variant's sleep.
  __leveldb-workload)
    "$2"
    sleep "$3"
    exit 0 ;;
  # Checkers: CHECKER <mounted crash image> <stdout file>. `intact blk check` gives every
  # image the whole run's stdout (it cannot tell which lines a crash at that image's time
  # had seen), so the checkers get an empty one: they check what the thesis counted (the
  # store opens, every key is atomic, the keys present are a prefix of the Puts; the
  # repository opens, reads back, fsck, stays usable), not durability against output.
  __leveldb-check)
    exec "$2" "$3" /dev/null ;;
  __git-check)
    exec /usr/bin/python3 -I -S "$root/study/git/check.py" "$2/repo" /dev/null ;;
esac

# ---- Main --------------------------------------------------------------------------
apps=leveldb,git fss=ext4,intactfs,ext4:commit=1 variants=unmount,sleep seed=1 tear=4096 max_images=2000 jobs=2 out=$root/target/table52/results
while [ $# -gt 0 ]; do
  case "$1" in
    --apps) apps=$2; shift ;;
    --fs) fss=$2; shift ;;
    --variants) variants=$2; shift ;;
    --seed) seed=$2; shift ;;
    --tear) tear=$2; shift ;;
    --max-images) max_images=$2; shift ;;
    --jobs|-j) jobs=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "table52.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "table52.sh: needs root (loop devices, mounts)" >&2; exit 2; }

child="" current=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    # intact undoes its own mounts, loop devices and temp files on SIGTERM (and SIGINT).
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  # A run that did not finish leaves no half results.
  if [ -n "$current" ]; then rm -rf "$current"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
# Runs a command in the background and waits, so the traps can forward an interrupt.
run() {
  "$@" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

started=$EPOCHREALTIME
if [ -n "${INTACT:-}" ]; then
  intact=$INTACT
else
  run cargo build --release -q -p intact-cli -j 1 --manifest-path "$root/Cargo.toml"
  intact=$root/target/release/intact
fi
ldb=$root/target/table52/leveldb
need_ldb=0 need_git=0
case ",$apps," in *,leveldb,*) need_ldb=1 ;; esac
case ",$apps," in *,git,*) need_git=1 ;; esac
if [ "$need_ldb" = 1 ]; then run bash "$root/bench/leveldb/build.sh" "$ldb" >/dev/null; fi
if [ "$need_git" = 1 ] && ! { [ -x /usr/bin/git ] && [ -x /usr/bin/python3 ]; }; then
  apt-get update -qq && apt-get install -y -qq git python3 >/dev/null
fi
for t in mkfs.ext4 e2fsck losetup; do
  command -v "$t" >/dev/null || { apt-get update -qq && apt-get install -y -qq e2fsprogs mount >/dev/null; break; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

failed=0
IFS=, read -ra app_list <<<"$apps"
IFS=, read -ra fs_list <<<"$fss"
IFS=, read -ra variant_list <<<"$variants"
for app in "${app_list[@]}"; do
 for variant in "${variant_list[@]}"; do
  case "$variant" in
    unmount) nap=0 ;;
    sleep) nap=$SLEEP ;;
    *) echo "table52.sh: unknown variant $variant (unmount, sleep)" >&2; exit 2 ;;
  esac
  for fs_spec in "${fs_list[@]}"; do
    # ext4:OPTS = ext4 mounted with OPTS (e.g. ext4:commit=1); the directory keeps OPTS.
    fs=${fs_spec%%:*} mopts=""
    [ "$fs" = "$fs_spec" ] || mopts=${fs_spec#*:}
    o=$out/$app-$variant-$fs_spec
    rm -rf "$o"
    mkdir -p "$o"
    current=$o
    case "$app" in
      leveldb) workload=(bash "$self" __leveldb-workload "$ldb/workload" "$nap"); checker="bash '$self' __leveldb-check '$ldb/checker'"
               setup=() ;;
      git) workload=(bash "$self" __git-workload "$out/git-bin" "$nap"); checker="bash '$self' __git-check"
           setup=(--setup "bash '$self' __git-setup '$out/git-bin'") ;;
      *) echo "table52.sh: unknown application $app" >&2; exit 2 ;;
    esac
    echo "== $app, $variant, on $fs_spec" >&2
    t0=$EPOCHREALTIME
    if ! run "$intact" blk record --fs "$fs" --mount-opts "$mopts" "${setup[@]}" --out "$o/log" -- "${workload[@]}" >"$o/record.out" 2>"$o/record.err"; then
      echo "record failed:" >&2; tail -5 "$o/record.err" >&2; failed=1; current=""; continue
    fi
    t1=$EPOCHREALTIME
    crc=0
    run "$intact" blk check "$o/log" --checker "$checker" -j "$jobs" --seed "$seed" --tear "$tear" \
      --max-images "$max_images" -q --json "$o/report.json" >"$o/report.txt" 2>"$o/check.err" || crc=$?
    t2=$EPOCHREALTIME
    if [ "$crc" -gt 1 ]; then
      echo "check failed (exit $crc):" >&2; tail -5 "$o/check.err" >&2; failed=1; current=""; continue
    fi
    sed -n '2,4p' "$o/report.txt" >&2
    python3 -c 'import json,sys; json.dump({"record_seconds": float(sys.argv[2]) - float(sys.argv[1]), "check_seconds": float(sys.argv[3]) - float(sys.argv[2]), "seed": int(sys.argv[4]), "max_images": int(sys.argv[5]), "jobs": int(sys.argv[6]), "checker": sys.argv[7], "variant": sys.argv[8], "sleep": int(sys.argv[9]), "tear": int(sys.argv[10])}, open(sys.argv[11], "w"), indent=1)' \
      "$t0" "$t1" "$t2" "$seed" "$max_images" "$jobs" "$checker" "$variant" "$nap" "$tear" "$o/times.json"
    current=""
  done
 done
done

# ---- The table -----------------------------------------------------------------------
total=$(python3 -c "print(round($EPOCHREALTIME - $started))")
python3 - "$out" "$apps" "$fss" "$variants" "$total" <<'PY' | tee "$out/table.md"
import json, os, re, sys
from collections import Counter
out, apps, fss, variants, total = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4].split(","), sys.argv[5]
thesis = {("leveldb", "ext4"): "158 / 465", ("leveldb", "intactfs"): "427 / 427 (c²fs)",
          ("git", "ext4"): "84 / 112", ("git", "intactfs"): "96 / 96 (c²fs)"}
names = {"leveldb": "LevelDB", "git": "Git (default config)"}

def reason(i):
    if i.get("mount_error"):
        e = re.sub(r"/dev/loop\d+", "/dev/loopN", i["mount_error"])
        e = re.sub(r"\S*/intact-check\.\w+/w\d+/crash", "CRASH", e)
        e = re.sub(r"\S*/intact-check\.\w+/images/img-\d+\.img", "IMAGE", e)
        return "did not mount: " + " ".join(e.split())[:200]
    f = i.get("fsck")
    if f and not f["clean"]:
        return "fsck: " + " ".join(f["output"].split())[:200]
    c = i["checker"]
    if c["verdict"] == "fail":
        lines = [l for l in c["stderr"].splitlines() if l.startswith("consequence:")]
        return (lines[0] if lines else (c["stderr"].strip().splitlines() or ["(no message)"])[-1])[:200]
    return c["verdict"]

rows, notes = [], []
for app in apps:
    for variant in variants:
        for fs in fss:
            d = os.path.join(out, f"{app}-{variant}-{fs}")
            base = fs.split(":")[0]
            th = thesis.get((app, base), "") if variant == "sleep" and base == fs else ""
            try:
                r = json.load(open(os.path.join(d, "report.json")))
                t = json.load(open(os.path.join(d, "times.json")))
                meta = json.load(open(os.path.join(d, "log", "meta.json")))
            except OSError:
                rows.append(f"| {names.get(app, app)} | {variant} | {fs} | run failed | | | | | {th} |")
                continue
            imgs = r["images"]
            s = r["summary"]
            ok = sum(i["consistent"] for i in imgs)
            nomount = sum(bool(i.get("mount_error")) for i in imgs)
            fsck = sum(bool(i.get("fsck")) and not i["fsck"]["clean"] for i in imgs)
            chk = sum(i["checker"]["verdict"] in ("fail", "timeout", "error") for i in imgs)
            if s["distinct"] == s["checked"]:
                dist = f"all {s['distinct']} distinct"
            else:
                dist = f"sampled from {s['distinct']} distinct"
            vname = "unmount" if variant == "unmount" else f"sleep {t['sleep']} s"
            mo = ", ".join(["data=ordered"] * (base == "ext4") + [o for o in meta["mount_options"].split(",") if o])
            fs_name = base + (f" ({mo})" if mo else "")
            rows.append(f"| {names.get(app, app)} | {vname} | {fs_name} | **{ok} / {len(imgs)}** ({dist}) | {nomount} | {fsck} | {chk} | "
                        f"{t['record_seconds'] + t['check_seconds']:.0f} s | {th} |")
            c = meta["counts"]
            notes.append(f"- {names.get(app, app)}, {vname}, {fs_name}: {c['writes']} writes ({c['bytes'] >> 10} KiB), "
                         f"{c['flushes']} flushes, {meta['epochs']} epochs; workload {meta['workload']['seconds']:.2f} s; "
                         f"record {t['record_seconds']:.1f} s, check {t['check_seconds']:.1f} s")
            why = {}
            for i in imgs:
                if not i["consistent"]:
                    why.setdefault(reason(i), Counter())[i["kind"]] += 1
            top = sorted(why.items(), key=lambda kv: -sum(kv[1].values()))
            for w, kinds in top[:6]:
                k = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
                notes.append(f"  - {sum(kinds.values())} ({k}): `{w}`")
            if len(top) > 6:
                notes.append(f"  - {sum(sum(k.values()) for _, k in top[6:])} more, {len(top) - 6} other messages")
print("| application | variant | file system | images consistent / checked | did not mount | fsck errors | checker failures | time | thesis (ext4 / c²fs) |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print()
print("\n".join(notes))
print(f"\nTotal run time {total} s.")
PY
exit "$failed"
