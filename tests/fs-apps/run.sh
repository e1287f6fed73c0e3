#!/usr/bin/env bash
# Real applications on an intactfs FUSE mount, compared with the same runs on tmpfs
# (tests/fs-apps/README.md):
#
#   bash tests/fs-apps/run.sh [APP...]     APP: sqlite-rollback sqlite-wal git leveldb
#                                          postgres tar rsync (default: all)
#
# As root. Environment:
#   INTACT=path      the intact binary (default: build target/debug/intact with cargo -j 1)
#   DEVICE=kind      the image's kind: block (default), txflash or pmem (`intact fs mkfs
#                    --device`); SIZE=4G its size (a pmem image is mapped whole: keep it small)
#   STREAMS=0        run the applications in the init stream (default 1 on block and
#                    txflash, 0 on pmem, which has no streams: each application
#                    runs under `intact fs exec --stream fsapps-APP` on intactfs)
#   KEEP=1           keep the work directory (images, results, logs); mounts are still undone
#
# Output: one line per check, "ok APP: what" or "FAIL APP: what (details)", the time each
# application took, a summary. Exit 0 only if every check passed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ALL_APPS=(sqlite-rollback sqlite-wal git leveldb postgres tar rsync)
DEVICE=${DEVICE:-block}
SIZE=${SIZE:-4G}
if [ "$DEVICE" = pmem ]; then STREAMS=${STREAMS:-0}; else STREAMS=${STREAMS:-1}; fi
KEEP=${KEEP:-0}
PG_PORT_INTACTFS=55490
PG_PORT_TMPFS=55491

if [ $# -gt 0 ]; then APPS=("$@"); else APPS=("${ALL_APPS[@]}"); fi
for a in "${APPS[@]}"; do
  case " ${ALL_APPS[*]} " in *" $a "*) ;; *) echo "run.sh: unknown application '$a' (known: ${ALL_APPS[*]})" >&2; exit 2 ;; esac
done
if [ "$(id -u)" != 0 ]; then echo "run.sh: run as root (it mounts file systems)" >&2; exit 2; fi

# ---------------------------------------------------------------------------------------
# Tools

if [ -z "${INTACT:-}" ]; then
  (cd "$ROOT" && cargo build -j 1 -q -p intact-cli)
  INTACT=$ROOT/target/debug/intact
fi

missing=()
command -v sqlite3 >/dev/null || missing+=(sqlite3)
command -v git >/dev/null || missing+=(git)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ -e /usr/include/leveldb/db.h ] || missing+=(libleveldb-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v tar >/dev/null || missing+=(tar)
command -v rsync >/dev/null || missing+=(rsync)
command -v gzip >/dev/null || missing+=(gzip)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
export PG_BIN

# ---------------------------------------------------------------------------------------
# Work directory, mounts, cleanup

WORK=$(mktemp -d /tmp/intact-fs-apps.XXXXXX)
chmod 755 "$WORK"  # user postgres must reach its data directories below
IMG=$WORK/intactfs.img
MNT=$WORK/intactfs
TMPFS=$WORK/tmpfs
RES=$WORK/results
mkdir -p "$MNT" "$TMPFS" "$RES/intactfs" "$RES/tmpfs" "$RES/remount"
DAEMON_PID=
MOUNT_LOG=

pg_stop_dir() {  # stop a server this script may have left running on data directory $1
  local d=$1
  [ -d "$d" ] || return 0
  if (cd / && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$d" status >/dev/null 2>&1); then
    echo "cleanup: stopping the PostgreSQL server on $d" >&2
    (cd / && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$d" stop -m immediate -w -t 60 >/dev/null 2>&1) || true
  fi
}

unmount_intactfs() {  # returns 0 if the first `intact fs umount` succeeded
  local rc=0
  if mountpoint -q "$MNT"; then
    "$INTACT" fs umount "$MNT" || rc=$?
    # Busy (e.g. processes of an interrupted step still exiting): retry, then detach lazily.
    for _ in $(seq 10); do
      mountpoint -q "$MNT" || break
      sleep 1
      "$INTACT" fs umount "$MNT" 2>/dev/null || true
    done
    if mountpoint -q "$MNT"; then
      echo "cleanup: $MNT still busy; intact fs umount --lazy" >&2
      "$INTACT" fs umount --lazy "$MNT" || umount -l "$MNT" || true
    fi
  fi
  if [ -n "$DAEMON_PID" ]; then
    # The daemon exits once everything is written back.
    for _ in $(seq 1200); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
      echo "cleanup: the mount daemon (pid $DAEMON_PID) is still running after 120 s; SIGTERM" >&2
      kill "$DAEMON_PID" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
      rc=1
    fi
    DAEMON_PID=
  fi
  return $rc
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  cd /
  pg_stop_dir "$MNT/postgres/pgdata"
  pg_stop_dir "$TMPFS/postgres/pgdata"
  unmount_intactfs
  if mountpoint -q "$TMPFS"; then umount "$TMPFS" || umount -l "$TMPFS"; fi
  if [ "$KEEP" = 1 ]; then
    echo "kept: $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_intactfs() {  # $1: log file
  MOUNT_LOG=$1
  "$INTACT" fs mount "$IMG" "$MNT" --daemon --pid-file "$WORK/daemon.pid" --log "$MOUNT_LOG"
  DAEMON_PID=$(cat "$WORK/daemon.pid")
}

"$INTACT" fs mkfs "$IMG" --device "$DEVICE" --size "$SIZE"
mount_intactfs "$WORK/mount-1.log"
mount -t tmpfs -o size=2G,mode=755 fsapps-reference "$TMPFS"

# ---------------------------------------------------------------------------------------
# Checks

PASSED=0
FAILED=0
FAILS=()
ok() { echo "ok $1: $2"; PASSED=$((PASSED + 1)); }
fail() {  # APP WHAT DETAILS [FILE with more details, printed indented]
  echo "FAIL $1: $2 ($3)"
  FAILED=$((FAILED + 1))
  FAILS+=("$1: $2")
  if [ -n "${4:-}" ] && [ -s "$4" ]; then head -40 "$4" | sed 's/^/    | /'; fi
}
check() {  # APP WHAT CONDITION-COMMAND...  (ok when the command succeeds)
  local app=$1 what=$2
  shift 2
  if "$@" >/dev/null 2>&1; then ok "$app" "$what"; else fail "$app" "$what" "check failed: $*"; fi
}
same() {  # APP WHAT FILE-A(intactfs side) FILE-B(reference)
  local app=$1 what=$2 a=$3 b=$4
  if cmp -s "$a" "$b"; then
    ok "$app" "$what"
  else
    local d=$WORK/diff.$$.txt
    diff -u --label reference --label intactfs "$b" "$a" >"$d" || true
    fail "$app" "$what" "$(grep -c '^[-+][^-+]' "$d" || true) lines differ; diff reference -> intactfs below" "$d"
  fi
}
contains() {  # APP WHAT FILE REGEX
  if grep -qE -- "$4" "$3"; then ok "$1" "$2"; else fail "$1" "$2" "no line matching /$4/ in $(basename "$3")" "$3"; fi
}

now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }

# The command of application $1, phase $2 (run|verify), on file system $3 (intactfs|tmpfs)
# rooted at $4.
command_of() {
  local app=$1 phase=$2 fs=$3 root=$4 port
  if [ "$fs" = intactfs ]; then port=$PG_PORT_INTACTFS; else port=$PG_PORT_TMPFS; fi
  case $app in
  sqlite-rollback) CMD=(bash "$HERE/sqlite.sh" "$phase" delete "$root/sqlite-rollback") ;;
  sqlite-wal) CMD=(bash "$HERE/sqlite.sh" "$phase" wal "$root/sqlite-wal") ;;
  git) CMD=(bash "$HERE/git.sh" "$phase" "$root/git") ;;
  leveldb) CMD=(bash "$HERE/leveldb.sh" "$phase" "$WORK/leveldb_app" "$root/leveldb") ;;
  postgres) CMD=(bash "$HERE/postgres.sh" "$phase" "$root/postgres" "$port" "$WORK/pgsock-$fs" "$WORK/postgres-$fs.log") ;;
  tar) CMD=(bash "$HERE/tar.sh" "$phase" "$WORK/src.tar" "$root/tar") ;;
  rsync)
    if [ "$phase" = run ]; then CMD=(bash "$HERE/rsync.sh" run "$WORK/src" "$WORK/src2" "$root/rsync")
    else CMD=(bash "$HERE/rsync.sh" verify "$WORK/src" "$root/rsync"); fi ;;
  esac
  if [ "$fs" = intactfs ] && [ "$STREAMS" = 1 ]; then
    CMD=("$INTACT" fs exec --mount "$MNT" --stream "fsapps-$app" -- "${CMD[@]}")
  fi
}

# Runs phase $2 of app $1 on file system $3 (root $4); stdout to $5, stderr to $5.err.
# Sets ELAPSED (seconds) and returns the command's exit status.
run_phase() {
  local app=$1 phase=$2 fs=$3 root=$4 out=$5 t0 rc=0
  command_of "$app" "$phase" "$fs" "$root"
  t0=$(now)
  (cd / && "${CMD[@]}") >"$out" 2>"$out.err" </dev/null || rc=$?
  ELAPSED=$(secs "$t0" "$(now)")
  return $rc
}

# What the verification output of each application must contain (on every file system).
sanity() {  # APP FILE LABEL
  local app=$1 f=$2 label=$3
  case $app in
  sqlite-*) contains "$app" "$label: PRAGMA integrity_check is ok" "$f" '^ok$' ;;
  git) contains "$app" "$label: git fsck --full --strict is clean" "$f" '^fsck: clean$'
       contains "$app" "$label: git status --porcelain is empty" "$f" '^status: clean$' ;;
  leveldb) contains "$app" "$label: every key present with the generator's value" "$f" '^keys: ([0-9]+) \(expected \1\), values not matching the generator: 0,' ;;
  postgres) contains "$app" "$label: pg_checksums finds no bad page" "$f" '^pg_checksums: Bad checksums: +0$'
            contains "$app" "$label: amcheck verify_heapam finds nothing in table t" "$f" '^amcheck heap t\|0$'
            contains "$app" "$label: amcheck verify_heapam finds nothing in table docs" "$f" '^amcheck heap docs\|0$' ;;
  tar) contains "$app" "$label: tar --compare against the archive finds no difference" "$f" '^tar --compare: no differences$' ;;
  rsync) contains "$app" "$label: rsync --checksum dry run finds nothing to do" "$f" '^checksum dry run: \[\]$' ;;
  esac
}

# ---------------------------------------------------------------------------------------
# Inputs shared by both file systems

prepare() {
  case $1 in
  leveldb)
    g++ -O2 -o "$WORK/leveldb_app" "$HERE/leveldb.cc" -lleveldb -lpthread ;;
  tar | rsync)
    if [ ! -e "$WORK/src.tar" ]; then
      python3 "$HERE/tree.py" gen "$WORK/src"
      cp -a "$WORK/src" "$WORK/src2"
      python3 "$HERE/tree.py" change "$WORK/src2"
      tar -c --sparse --format=gnu --sort=name --numeric-owner -f "$WORK/src.tar" -C "$WORK/src" .
    fi ;;
  esac
}

declare -A RAN TIMES
for app in "${APPS[@]}"; do
  echo "== $app"
  if ! prepare "$app" >"$WORK/prepare-$app.txt" 2>&1; then
    fail "$app" "preparing inputs" "see below" "$WORK/prepare-$app.txt"
    continue
  fi
  RAN[$app]=0
  times=""
  ran_ok=0
  for fs in tmpfs intactfs; do
    if [ "$fs" = tmpfs ]; then root=$TMPFS; else root=$MNT; fi
    out=$RES/$fs/$app
    if run_phase "$app" run "$fs" "$root" "$out.run"; then
      ok "$app" "workload on $fs exited 0"
    else
      fail "$app" "workload on $fs exited $?" "stderr below" "$out.run.err"
      times+=" $fs run failed after ${ELAPSED}s;"
      continue
    fi
    trun=$ELAPSED
    if run_phase "$app" verify "$fs" "$root" "$out.verify"; then
      ok "$app" "verification on $fs exited 0"
    else
      fail "$app" "verification on $fs exited $?" "stderr below" "$out.verify.err"
    fi
    times+=" $fs run ${trun}s + verify ${ELAPSED}s;"
    sanity "$app" "$out.verify" "$fs"
    ran_ok=$((ran_ok + 1))
  done
  a=$RES/intactfs/$app b=$RES/tmpfs/$app
  if [ $ran_ok = 2 ]; then
    same "$app" "workload output on intactfs equals tmpfs" "$a.run" "$b.run"
    same "$app" "verification on intactfs equals tmpfs" "$a.verify" "$b.verify"
  fi
  case $app in
  tar | rsync)
    sub=tar/x
    [ "$app" = rsync ] && sub=rsync/dst
    if [ -d "$MNT/$sub" ] && [ -d "$TMPFS/$sub" ]; then
      if diff -r --no-dereference --exclude='*.fifo' "$TMPFS/$sub" "$MNT/$sub" >"$WORK/diff-$app.txt" 2>&1; then
        ok "$app" "diff -r of the trees on intactfs and tmpfs is clean"
      else
        fail "$app" "diff -r of the trees on intactfs and tmpfs" "differences below" "$WORK/diff-$app.txt"
      fi
    fi ;;
  esac
  if [ -s "$a.verify" ]; then RAN[$app]=1; fi
  TIMES[$app]=$times
  echo "time $app:$times"
done

# ---------------------------------------------------------------------------------------
# Unmount, fsck, mount again: the results must have reached the image.

fsck_image() {  # LABEL
  local rc=0
  echo "== intact fs fsck ($1)"
  "$INTACT" fs fsck "$IMG" 2>&1 | sed 's/^/  /' || true
  "$INTACT" fs fsck "$IMG" >/dev/null 2>&1 || rc=$?
  if [ $rc = 0 ]; then ok intactfs "fsck after $1 is clean (exit 0)"; else fail intactfs "fsck after $1" "exit $rc"; fi
}
daemon_log() {  # LABEL (the work directory's random name is left out of the search)
  local n
  n=$(sed "s|$WORK||g" "$MOUNT_LOG" | grep -ciE 'error|panic|fail|warn' || true)
  if [ "$n" != 0 ]; then
    fail intactfs "daemon log of the $1 mount has no errors" "$n suspicious lines" "$MOUNT_LOG"
  else
    ok intactfs "daemon log of the $1 mount has no errors"
  fi
}

echo "== unmount, fsck, mount again"
t0=$(now)
if unmount_intactfs; then ok intactfs "intact fs umount (write-back) succeeded in $(secs "$t0" "$(now)")s"; else fail intactfs "intact fs umount" "see above"; fi
daemon_log first
fsck_image "the applications"

if mount_intactfs "$WORK/mount-2.log"; then
  ok intactfs "mounted again"
  for app in "${APPS[@]}"; do
    [ "${RAN[$app]:-0}" = 1 ] || continue
    if run_phase "$app" verify intactfs "$MNT" "$RES/remount/$app.verify"; then
      ok "$app" "verification after remount exited 0 (${ELAPSED}s)"
      sanity "$app" "$RES/remount/$app.verify" "after remount"
      same "$app" "verification after remount equals before unmount" "$RES/remount/$app.verify" "$RES/intactfs/$app.verify"
    else
      fail "$app" "verification after remount exited $?" "stderr below" "$RES/remount/$app.verify.err"
    fi
  done
  t0=$(now)
  if unmount_intactfs; then ok intactfs "second intact fs umount succeeded in $(secs "$t0" "$(now)")s"; else fail intactfs "second intact fs umount" "see above"; fi
  daemon_log second
  fsck_image "the verifications"
else
  fail intactfs "mount again" "intact fs mount failed"
fi

# ---------------------------------------------------------------------------------------
echo "== summary"
for app in "${APPS[@]}"; do echo "time $app:${TIMES[$app]:- not run}"; done
echo "$PASSED passed, $FAILED failed"
for f in "${FAILS[@]}"; do echo "  failed: $f"; done
[ "$FAILED" = 0 ]
