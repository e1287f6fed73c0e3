#!/usr/bin/env bash
# The FCFS paper's application case (seed paper 002 §VI: SQLite with AD-transactions instead
# of its rollback journal; intactfs: issue 14 item 5) on a pmem mount: SQLite 3.54.1
# (tools/sqlite-batch) inserting one 100-byte row per transaction, two ways in the same run:
#   journal  sqlite-batch-plain: the stock rollback journal (journal_mode=DELETE,
#            synchronous=FULL), each journal write, fsync and unlink a legacy call
#   batch    sqlite-batch (SQLITE_ENABLE_BATCH_ATOMIC_WRITE): the F2FS atomic-write ioctls,
#            which the pmem mount maps onto AD-transactions, so one transaction per commit
#            and no journal file (docs/fs-api.md, "F2FS atomic writes on a pmem mount")
# Each repetition mkfs'es a fresh pmem image in PMEM_DIR, mounts it (`intact fs mount
# --daemon`, default options: every fence also msyncs), and runs both methods on their own
# database (the order rotates between repetitions); the CREATE TABLE transaction is not
# timed. Figures are medians over the repetitions. The daemon logs its device counters
# only at unmount and both methods share one mount, so pmem bytes and flushes per
# transaction are not reported here (bench/pmem/embed_sqlite.sh reports them).
#
#   [REPS=3] bash bench/pmem/sqlite.sh [--quick] [--write-docs]
#
# Environment: REPS (3; --quick: 1), TXNS (transactions per run, 2000; --quick: 300),
# PMEM_DIR (where the image goes, /dev/shm: RAM, as emulated persistent memory), IMG_MIB
# (256), JOURNAL (the pmem log, mkfs --journal, 1M), MOUNT_OPTS (extra -o options, none),
# INTACT (an intact binary; default target/release/intact, built with cargo -j 1),
# RESULTS=FILE (keep the JSON lines), DOCS=FILE (--write-docs target, docs/benchmarks.md).
# Exit 0: the run succeeded; 1: it failed; 2: cannot run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD me=bench/pmem/sqlite.sh
source bench/pmem/lib.sh  # parse_args, cannot, start_clock, stop_clock
parse_args "$@"
if ((quick)); then reps=${REPS:-1} txns=${TXNS:-300}; else reps=${REPS:-3} txns=${TXNS:-2000}; fi
dir=${PMEM_DIR:-/dev/shm} img_mib=${IMG_MIB:-256} journal=${JOURNAL:-1M} docs=${DOCS:-docs/benchmarks.md}
for v in reps txns img_mib; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "${v^^}=${!v}: expected a positive whole number"; done
[[ -d $dir && -w $dir ]] || cannot "PMEM_DIR=$dir is not a writable directory"
[[ -e /dev/fuse ]] || cannot "/dev/fuse is missing"
command -v python3 >/dev/null || cannot "python3 is missing"

intact=${INTACT:-$repo/target/release/intact}
if [[ -z ${INTACT:-} ]]; then
  echo "building intact (cargo build --release -p intact-cli -j 1) ..." >&2
  cargo build --release -p intact-cli -j 1 -q || cannot "building intact failed"
fi
echo "building SQLite (tools/sqlite-batch/build.sh) ..." >&2
sb=$repo/target/sqlite-batch
bash tools/sqlite-batch/build.sh >/dev/null || cannot "tools/sqlite-batch/build.sh failed"
sqlite_version=$(grep -m1 '^#define SQLITE_VERSION ' "$sb/sqlite3.h" | tr -d '"' | awk '{print $3}')

work=$(mktemp -d "${TMPDIR:-/tmp}/intactfs-pmem-sqlite.XXXXXX")
img=$dir/intactfs-pmem-sqlite-$$.img mnt=$work/mnt log=$work/daemon.log
mkdir -p "$mnt"
mounted() { awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
cleanup() {
  set +e
  if mounted; then timeout 120 "$intact" fs umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt"; fi
  rm -f "$img"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
results=${RESULTS:-$work/results.jsonl}
: >"$results"

start_clock
fail=0
for ((r = 0; r < reps; r++)); do
  "$intact" fs mkfs "$img" --device pmem --size "${img_mib}M" --journal "$journal" --force >/dev/null
  # shellcheck disable=SC2086
  "$intact" fs mount "$img" "$mnt" --daemon --log "$log" ${MOUNT_OPTS:+-o $MOUNT_OPTS} >/dev/null
  order=(journal batch)
  ((r % 2)) && order=(batch journal)
  for method in "${order[@]}"; do
    prog=$sb/sqlite-batch-plain
    [[ $method == batch ]] && prog=$sb/sqlite-batch
    db=$mnt/$method.db
    feat=$("$prog" "$db" features | awk '{print $2}')
    "$prog" "$db" insert 1 >/dev/null  # CREATE TABLE (a journal in both methods: a new file)
    fits0=$(grep -c 'does not fit' "$log" || true)
    if out=$("$prog" "$db" insert "$txns" 2>&1); then
      read -r _ n _ s _ tps <<<"$out"
      fits=$(($(grep -c 'does not fit' "$log" || true) - fits0))
      journals=$(find "$mnt" -name '*-journal' | wc -l)
      echo "{\"rep\": $r, \"method\": \"$method\", \"txns\": $n, \"seconds\": $s, \"tps\": $tps, \"batch_atomic\": \"$feat\", \"fallbacks\": $fits, \"journals_left\": $journals, \"ok\": true}" >>"$results"
      echo "rep $r $method: $out (batch_atomic $feat)" >&2
    else
      echo "{\"rep\": $r, \"method\": \"$method\", \"ok\": false}" >>"$results"
      echo "rep $r $method failed: $out" >&2
      fail=1
    fi
  done
  "$intact" fs umount "$mnt" >/dev/null
done
stop_clock
report=(python3 bench/pmem/sqlite_report.py "$results" --reps "$reps" --command "$command_line" --date "$date"
  --elapsed "${e}s" --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --pressure "$pressure"
  --image-mib "$img_mib" --txns "$txns" --journal "$journal" --pmem-dir "$dir" --sqlite "$sqlite_version" --mount-opts "${MOUNT_OPTS:-}")
((write_docs)) && report+=(--write-docs "$docs")
"${report[@]}" || fail=1
exit $fail
