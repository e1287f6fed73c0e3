#!/usr/bin/env bash
# SQLite inserts through intactfs's embedded mode (issue 28 item 4) against the pmem FUSE
# mount and ext4, in one run: SQLite 3.54.1 (tools/sqlite-batch's amalgamation and driver)
# inserting one 100-byte row per transaction, synchronous=FULL everywhere (each COMMIT is
# durable when it returns), five ways:
#   embedded   sqlite-embed: the driver with the embedded VFS (libintact/sqlite/intact_vfs.c)
#              over a pmem image opened in-process (libintact_embed); journal_mode=MEMORY,
#              each commit one AD-transaction, no journal written
#   mount-batch  sqlite-batch on a pmem mount: the F2FS atomic-write ioctls, one
#              AD-transaction per commit through FUSE (bench/pmem/sqlite.sh's best method)
#   mount-journal  sqlite-batch-plain on the same mount: the stock rollback journal
#   ext4-journal / ext4-wal  sqlite-batch-plain on ext4 (journal_mode=DELETE / WAL)
# and, to separate the engine's cost from the msync each fence makes by default (on a
# mount and embedded alike), embedded-nosync and mount-batch-nosync: the same with fences
# that do not msync (INTACT_EMBED_NO_SYNC=1; `-o pmem_nosync`).
# Every store lives in PMEM_DIR (/dev/shm, RAM): the pmem images, and ext4's loop device
# file (mkfs.ext4 with inode tables and journal zeroed at mkfs, mounted with defaults), so the rows differ by software, not
# by medium (a flush of the loop device over tmpfs costs no device time: the kindest
# ext4 there can be). Each repetition makes fresh images and databases; the order of the
# methods rotates; the CREATE TABLE transaction is not timed. Besides wall-clock txn/s,
# each run records the CPU time it took (the program's user + system time, plus its
# daemon's on a mount: /proc/PID/stat), which waiting for a CPU does not inflate (FUSE's
# CPU per request still grows with the machine's load); ext4's journal thread and the
# loop device's worker are not counted. The pmem rows also give the
# device's work per transaction: embedded, INTACT_EMBED_COUNTERS (the program's run,
# opening the image included); mounted, what the daemon logs at unmount (each mount row
# has a mount of its own; the CREATE TABLE run included).
#
#   [REPS=3] bash bench/pmem/embed_sqlite.sh [--quick] [--write-docs]
#
# Environment: REPS (3; --quick: 1), TXNS (transactions per run, 2000; --quick: 300),
# PMEM_DIR (/dev/shm), IMG_MIB (256), JOURNAL (the pmem log, 1M), INTACT (an intact
# binary; default $CARGO_TARGET_DIR or target/release/intact, built with cargo -j 1),
# RESULTS=FILE (keep the JSON lines), DOCS=FILE (--write-docs target, docs/benchmarks.md).
# Needs root (losetup, mount) and /dev/fuse. Exit 0: the run succeeded; 1: it failed;
# 2: cannot run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD me=bench/pmem/embed_sqlite.sh
source bench/pmem/lib.sh  # parse_args, cannot, start_clock, stop_clock
parse_args "$@"
if ((quick)); then reps=${REPS:-1} txns=${TXNS:-300}; else reps=${REPS:-3} txns=${TXNS:-2000}; fi
dir=${PMEM_DIR:-/dev/shm} img_mib=${IMG_MIB:-256} journal=${JOURNAL:-1M} docs=${DOCS:-docs/benchmarks.md}
for v in reps txns img_mib; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "${v^^}=${!v}: expected a positive whole number"; done
[[ -d $dir && -w $dir ]] || cannot "PMEM_DIR=$dir is not a writable directory"
[[ -e /dev/fuse ]] || cannot "/dev/fuse is missing"
[[ $(id -u) == 0 ]] || cannot "needs root (losetup and mount for ext4)"
for t in python3 mkfs.ext4 losetup gcc; do command -v $t >/dev/null || cannot "$t is missing"; done

target=${CARGO_TARGET_DIR:-$repo/target}
intact=${INTACT:-$target/release/intact}
TIMEFORMAT='%U %S'  # bash's time keyword: user and system seconds of the run
echo "building intact and libintact_embed (cargo build --release -j 1) ..." >&2
pkgs=(-p intactfs-embed)
[[ -n ${INTACT:-} ]] || pkgs+=(-p intact-cli)
cargo build --release -j 1 -q "${pkgs[@]}" || cannot "building intact / intactfs-embed failed"
echo "building SQLite (tools/sqlite-batch/build.sh) and sqlite-embed ..." >&2
sb=$repo/target/sqlite-batch
bash tools/sqlite-batch/build.sh >/dev/null || cannot "tools/sqlite-batch/build.sh failed"
sqlite_version=$(grep -m1 '^#define SQLITE_VERSION ' "$sb/sqlite3.h" | tr -d '"' | awk '{print $3}')

work=$(mktemp -d "${TMPDIR:-/tmp}/intactfs-embed-sqlite.XXXXXX")
embed=$work/sqlite-embed
gcc -O2 -std=c11 -Wall -Wextra -DDRIVER_SETUP=intact_sqlite_setup_from_env -I"$sb" -Ilibintact/include \
  -o "$embed" tools/sqlite-batch/driver.c libintact/sqlite/intact_vfs.c "$sb/sqlite3-plain.o" \
  "$target/release/libintact_embed.a" -lpthread -ldl -lm || cannot "building sqlite-embed failed"

img=$dir/intactfs-embed-sqlite-$$.img eimg=$dir/intactfs-embed-sqlite-$$.ext4
mnt=$work/mnt emnt=$work/ext4 log=$work/daemon.log loopdev=
mkdir -p "$mnt" "$emnt"
mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
cleanup() {
  set +e
  if mounted "$mnt"; then timeout 120 "$intact" fs umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt"; fi
  if mounted "$emnt"; then umount "$emnt" || umount -l "$emnt"; fi
  [[ -z $loopdev ]] || losetup -d "$loopdev"
  rm -f "$img" "$eimg"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
results=${RESULTS:-$work/results.jsonl}
: >"$results"

# daemon_counters: the device counters the mount's daemon logs at unmount ("device while
# mounted: S stores, B bytes stored, L lines flushed, F fences"), as JSON fields: the
# mount is ended first (the CREATE TABLE run and the daemon's own reads are included).
daemon_counters() {
  mount_as none
  grep -o 'device while mounted: [0-9]* stores, [0-9]* bytes stored, [0-9]* lines flushed, [0-9]* fences' "$log" | tail -1 |
    awk '{ printf ", \"stores\": %s, \"bytes_stored\": %s, \"lines_flushed\": %s, \"fences\": %s", $4, $6, $9, $12 }'
}

# daemon_ticks: the CPU time (user + system, clock ticks) of the mount's daemon so far; 0
# when nothing is mounted.
daemon_ticks() {
  local pid
  pid=$(cat "$work/pid" 2>/dev/null) || { echo 0; return; }
  mounted "$mnt" && [[ -r /proc/$pid/stat ]] || { echo 0; return; }
  sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }'
}

# run_one METHOD: one timed run into the JSON lines (a failure is recorded, not fatal).
run_one() {
  local m=$1 prog db j=delete counters= out cpu
  local -a envs=()
  case $m in
    embedded) prog=$embed db=/bench.db j=memory envs=(INTACT_EMBED_IMAGE="$img" INTACT_EMBED_COUNTERS=1) ;;
    embedded-nosync) prog=$embed db=/nosync.db j=memory envs=(INTACT_EMBED_IMAGE="$img" INTACT_EMBED_COUNTERS=1 INTACT_EMBED_NO_SYNC=1) ;;
    mount-batch) prog=$sb/sqlite-batch db=$mnt/batch.db ;;
    mount-batch-nosync) prog=$sb/sqlite-batch db=$mnt/batch-nosync.db ;;
    mount-journal) prog=$sb/sqlite-batch-plain db=$mnt/journal.db ;;
    ext4-journal) prog=$sb/sqlite-batch-plain db=$emnt/journal.db ;;
    ext4-wal) prog=$sb/sqlite-batch-plain db=$emnt/wal.db j=wal ;;
  esac
  env "${envs[@]}" SQLITE_BATCH_JOURNAL=$j "$prog" "$db" insert 1 >/dev/null 2>&1  # CREATE TABLE
  local d0 d1 rc=0
  d0=$(daemon_ticks)
  { time env "${envs[@]}" SQLITE_BATCH_JOURNAL=$j "$prog" "$db" insert "$txns" >"$work/out" 2>"$work/err"; } 2>"$work/time" || rc=$?
  d1=$(daemon_ticks)
  out=$(cat "$work/out")
  if ((rc == 0)); then
    read -r _ n _ s _ tps <<<"$out"
    # CPU seconds: the program's (user + system) and, on a mount, its daemon's.
    cpu=$(awk -v d=$((d1 - d0)) -v hz="$(getconf CLK_TCK)" '{ printf "%.4f", $1 + $2 + d / hz }' "$work/time")
    counters=$(awk '/^intact_embed counters:/ { printf ", \"stores\": %s, \"bytes_stored\": %s, \"lines_flushed\": %s, \"fences\": %s", $4, $6, $8, $10 }' "$work/err")
    if [[ $m == mount-* ]]; then counters=$(daemon_counters); fi
    echo "{\"rep\": $r, \"method\": \"$m\", \"txns\": $n, \"seconds\": $s, \"tps\": $tps, \"cpu_s\": $cpu$counters, \"ok\": true}" >>"$results"
    echo "rep $r $m: $out" >&2
  else
    echo "{\"rep\": $r, \"method\": \"$m\", \"ok\": false}" >>"$results"
    echo "rep $r $m failed: $out $(cat "$work/err")" >&2
  fi
}

# mount_as none|sync|nosync: the pmem image unmounted, or mounted with fences that msync
# (the default) or not; one owner at a time, so the embedded runs want it unmounted.
mount_as() {
  case $1 in
    none) if mounted "$mnt"; then "$intact" fs umount "$mnt" >/dev/null; fi ;;
    sync) "$intact" fs mount "$img" "$mnt" --daemon --pid-file "$work/pid" --log "$log" >/dev/null ;;
    nosync) "$intact" fs mount "$img" "$mnt" --daemon --pid-file "$work/pid" --log "$log" -o pmem_nosync >/dev/null ;;
  esac
}

start_clock
methods=(embedded mount-batch mount-journal ext4-journal ext4-wal embedded-nosync mount-batch-nosync)
for ((r = 0; r < reps; r++)); do
  "$intact" fs mkfs "$img" --device pmem --size "${img_mib}M" --journal "$journal" --force >/dev/null
  rm -f "$eimg"; truncate -s 512M "$eimg"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$eimg"  # no background zeroing during the runs
  loopdev=$(losetup --find --show "$eimg")
  mount "$loopdev" "$emnt"
  k=$((r % ${#methods[@]}))
  order=("${methods[@]:k}" "${methods[@]:0:k}")
  for m in "${order[@]}"; do
    # Each mount row has a mount of its own: its daemon's device counters at unmount are
    # that method's (issue 28 item 5).
    case $m in
      mount-batch-nosync) mount_as nosync ;;
      mount-*) mount_as sync ;;
    esac
    run_one "$m"
    mount_as none
  done
  umount "$emnt"; losetup -d "$loopdev"; loopdev=
done
stop_clock
report=(python3 bench/pmem/embed_sqlite_report.py "$results" --reps "$reps" --command "$command_line" --date "$date"
  --elapsed "${e}s" --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --pressure "$pressure"
  --image-mib "$img_mib" --txns "$txns" --journal "$journal" --pmem-dir "$dir" --sqlite "$sqlite_version")
((write_docs)) && report+=(--write-docs "$docs")
"${report[@]}" || exit 1
! grep -q '"ok": false' "$results"
