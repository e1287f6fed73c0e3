#!/usr/bin/env bash
# OptFS's osync against fsync (the seeds' paper `001`, §6–§7; issue 12 item 4): the same
# unmodified programs, side by side in one run, on four configurations:
#   ext4            fresh ext4 on a loop device, default mount options (barriers on): fsync flushes
#   ext4-nobarrier  the same, mounted -o nobarrier: fsync sends no flush (not crash-safe)
#   intactfs-fsync  `intact fs mount --daemon` of an intactfs image (defaults: fsync=durable,
#                   commit=5, durability=30); the program runs under
#                   `intact fs exec --mount MNT --stream optfs --`: its fsync commits and flushes
#   intactfs-osync  a second image, the same mount options; the program runs under
#                   `intact fs exec --mount MNT --stream optfs --fsync-as osync --` (the unmodified-
#                   program path, OptFS §7), or with OSYNC_VIA=mount on a `-o fsync=osync` mount
# and four workloads:
#   gedit      bench/optfs/atomic_update.c: N times write doc.tmp (12 KiB), fsync, rename over doc
#   sqlite     bench/optfs/sqlite_insert.c: N single-row INSERT transactions, rollback journal
#              (journal_mode=DELETE), synchronous=FULL, the system's libsqlite3
#   varmail    bench/fs/personalities.c varmail (16 threads, fsync after each append), timed
#   randwrite  bench/fs/personalities.c randwrite: 4 KiB random overwrites, fsync after each
# Prints a markdown report (a table per workload: throughput, latency, device flushes, the
# final sync, and the ratios "osync vs ext4 (fsync)" and "osync vs intactfs-fsync"); with
# --write-docs it also replaces the section between <!-- optfs:begin --> and
# <!-- optfs:end --> of docs/benchmarks.md (DOCS=FILE: another file), appending the markers
# at its end if absent, and nothing else in that file.
#
#   [REPS=3] bash bench/optfs/bench.sh [--quick] [--write-docs]        (as root)
#
# Environment: REPS (default 3; --quick: 1), N_GEDIT (200), N_SQLITE (200), VARMAIL_SECS (10),
# VARMAIL_FILES (1000), RANDWRITE_OPS (20000), RANDWRITE_SIZE (64m), IMG_MIB (1024 per image),
# OSYNC_VIA (exec|mount), INTACT (an intact binary to use instead of building one with
# `cargo build --release -p intact-cli -j 1`), RESULTS=FILE (keep the raw JSON lines, and
# FILE.args: `eval python3 bench/optfs/report.py FILE "$(cat FILE.args)"` remakes the report),
# TMPDIR (where the work directory goes: must be on a disk, not tmpfs).
# --quick: one repetition, N=30, 2 s of varmail, 200 randwrite ops, 512 MiB images (a smoke
# run, ~2 minutes). The full default run takes about 2 minutes per repetition plus ~1 minute
# of set-up (4 GiB of images written, the build).
#
# Each repetition starts from freshly made file systems (ext4 mkfs'd again, intactfs images
# mkfs'd again); within it every workload runs on the four configurations in turn, the order
# rotating between repetitions; figures are medians over the repetitions. All four sit on
# files written full of zeros beforehand, in a fresh directory under ${TMPDIR:-/tmp}: ext4
# and ext4-nobarrier each on their own loop device; the two intactfs images in a third ext4
# on a third loop device (as bench/fs/mount.sh), so every configuration's flushes go through
# one loop device to a file on the root disk and that loop device counts them.
# Mounts, daemons (only those this script started, by pid), loop devices and the work
# directory are removed on exit, even on failure or Ctrl-C. Exit 0: every run succeeded;
# 1: some failed (the report says which; --write-docs then writes nothing); 2: cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.."
me=bench/optfs/bench.sh
source bench/lib_fs.sh  # options, checks, devices, mounts, clean-up, report (shared with bench/cfs)
parse_args "$@"

# ---------------------------------------------------------------- can it run here?
check_machine gcc python3 mkfs.ext4 losetup mount umount dd timeout stat sync df
[[ -n ${INTACT:-} ]] || command -v cargo >/dev/null || cannot "cargo is missing (or give INTACT=path/to/intact)"
[[ -e /usr/include/sqlite3.h ]] || cannot "SQLite headers missing (apt-get install -y libsqlite3-dev)"
osync_via=${OSYNC_VIA:-exec}
[[ $osync_via == exec || $osync_via == mount ]] || cannot "OSYNC_VIA=$osync_via: expected exec or mount"
find_intact

reps=${REPS:-3}
if ((quick)); then
  reps=${REPS:-1}
  n_gedit=${N_GEDIT:-30} n_sqlite=${N_SQLITE:-30} vm_secs=${VARMAIL_SECS:-2} vm_files=${VARMAIL_FILES:-200}
  rw_ops=${RANDWRITE_OPS:-200} rw_size=${RANDWRITE_SIZE:-16m} img_mib=${IMG_MIB:-512} timeout_s=300
else
  n_gedit=${N_GEDIT:-200} n_sqlite=${N_SQLITE:-200} vm_secs=${VARMAIL_SECS:-10} vm_files=${VARMAIL_FILES:-1000}
  rw_ops=${RANDWRITE_OPS:-20000} rw_size=${RANDWRITE_SIZE:-64m} img_mib=${IMG_MIB:-1024} timeout_s=1200
fi
for v in reps n_gedit n_sqlite vm_secs vm_files rw_ops img_mib; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "$v=${!v}: expected a positive whole number"
done
((img_mib >= 256)) || cannot "IMG_MIB=$img_mib: at least 256"

check_base $((4 * img_mib + 512))

# ---------------------------------------------------------------- clean-up, always
configs=(ext4 ext4-nobarrier intactfs-fsync intactfs-osync)
exts=(ext4 ext4-nobarrier) ifss=(intactfs-fsync intactfs-osync)
loop_e="" loop_n="" loop_h=""
trap_cleanup
start_work optfs

# ---------------------------------------------------------------- build
if [[ -z ${INTACT:-} ]]; then
  echo "building intact (cargo build --release -p intact-cli -j 1) ..." >&2
  cargo build --release -p intact-cli -j 1 -q
fi
"$intact" fs exec --help 2>/dev/null | grep -q -- --fsync-as || cannot "$intact has no \`fs exec --fsync-as\` (too old: rebuild it)"
gcc -O2 -Wall -o "$work/bin/atomic_update" bench/optfs/atomic_update.c
gcc -O2 -Wall -o "$work/bin/sqlite_insert" bench/optfs/sqlite_insert.c -lsqlite3
gcc -O2 -pthread -o "$work/bin/personalities" bench/fs/personalities.c
bin=$work/bin

# ---------------------------------------------------------------- devices
echo "writing the images ($img_mib MiB each, zeros) in $work ..." >&2
zeros "$work/ext4.img" $((img_mib / 4))
zeros "$work/nobarrier.img" $((img_mib / 4))
zeros "$work/host.img" $((img_mib / 2 + 64))
attach_loop loop_e "$work/ext4.img"
attach_loop loop_n "$work/nobarrier.img"
attach_loop loop_h "$work/host.img"
host_fs "$loop_h" "${ifss[@]}"
dev[ext4]=$(basename "$loop_e") dev[ext4-nobarrier]=$(basename "$loop_n")
dev[intactfs-fsync]=$(basename "$loop_h") dev[intactfs-osync]=$(basename "$loop_h")

fresh() {  # all four file systems made again and mounted
  local c
  for c in "${ifss[@]}"; do unmount_ifs "$c"; done
  unmount_dir "${mnt[ext4]}"
  unmount_dir "${mnt[ext4-nobarrier]}"
  mkext4 "$loop_e"
  mkext4 "$loop_n"
  mount -t ext4 "$loop_e" "${mnt[ext4]}"
  mount -t ext4 -o nobarrier "$loop_n" "${mnt[ext4-nobarrier]}"
  # The kernel shows nobarrier in the options; the default mount must not have it.
  grep " ${mnt[ext4-nobarrier]} " /proc/mounts | grep -q nobarrier || cannot "ext4 did not take -o nobarrier: $(grep " ${mnt[ext4-nobarrier]} " /proc/mounts)"
  ! grep " ${mnt[ext4]} " /proc/mounts | grep -q -e nobarrier -e barrier=0 || cannot "the default ext4 mount has barriers off"
  for c in "${ifss[@]}"; do "$intact" fs mkfs "${mnt[host]}/$c.img" --force >/dev/null; done
  sync -f "${mnt[host]}"
  mount_ifs intactfs-fsync
  if [[ $osync_via == mount ]]; then mount_ifs intactfs-osync -o fsync=osync; else mount_ifs intactfs-osync; fi
}

# ---------------------------------------------------------------- one run
results=$work/results.jsonl
: >"$results"
failures=0
streamsync() {  # streamsync PATH: the init stream's STREAMSYNC on an intactfs mount
  PYTHONPATH=$repo/python timeout --foreground 300 python3 -c 'import sys, intact.fs as f; f.streamsync(sys.argv[1])' "$1"
}
settle() {  # settle CONFIG: everything on that file system durable, its device quiet
  case $1 in
    ext4*) timeout --foreground 300 sync -f "${mnt[$1]}" ;;
    intactfs-*) streamsync "${mnt[$1]}" && timeout --foreground 300 sync -f "${mnt[host]}" ;;
  esac
}
# run CONFIG WORKLOAD REP CMD...: CMD prints one JSON line; @D@ is its work directory,
# @SYNC@ the final sync for this configuration, @DEV@ its loop device.
run() {
  local cfg=$1 wl=$2 rep=$3; shift 3
  local d=${mnt[$cfg]}/$wl.$rep sync_spec args=() a out rc=0 err=$work/err.txt prefix=()
  case $cfg in
    ext4*) sync_spec=syncfs:$d ;;
    *) sync_spec=streamsync:$d ;;
  esac
  for a in "$@"; do a=${a//@D@/$d}; a=${a//@SYNC@/$sync_spec}; args+=("${a//@DEV@/${dev[$cfg]}}"); done
  case $cfg in
    intactfs-fsync) prefix=("$intact" fs exec --mount "${mnt[$cfg]}" --stream optfs --) ;;
    intactfs-osync)
      if [[ $osync_via == exec ]]; then
        prefix=("$intact" fs exec --mount "${mnt[$cfg]}" --stream optfs --fsync-as osync --)
      else
        prefix=("$intact" fs exec --mount "${mnt[$cfg]}" --stream optfs --)
      fi ;;
  esac
  mkdir "$d"
  settle "$cfg" || echo "$me: syncing $cfg failed" >&2
  local t0 t1 wall
  t0=$(date +%s.%N)
  out=$(cd "$d" && timeout --foreground --kill-after=10 "$timeout_s" "${prefix[@]}" "${args[@]}" 2>"$err") || rc=$?
  t1=$(date +%s.%N)
  # The program was interrupted (Ctrl-C reaches it: timeout --foreground keeps it in our
  # process group) or terminated: stop here, the EXIT trap cleans up.
  if ((rc == 130 || rc == 143)); then echo "  $wl on $cfg: interrupted" >&2; exit "$rc"; fi
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  if ((rc == 0)) && [[ $out == \{*\} && $out != *$'\n'* ]]; then
    printf '{"config": "%s", "workload": "%s", "rep": %d, "wall_s": %s, %s\n' "$cfg" "$wl" "$rep" "$wall" "${out#\{}" >>"$results"
    echo "  $wl on $cfg: ok (${wall} s)" >&2
  else
    failures=$((failures + 1))
    printf '{"config": "%s", "workload": "%s", "rep": %d, "failed": true, "rc": %d, "error": %s}\n' "$cfg" "$wl" "$rep" "$rc" \
      "$(json_str "$(tail -c 600 "$err") $(tail -c 200 <<<"$out")")" >>"$results"
    echo "  $wl on $cfg: FAILED (exit $rc): $(tail -c 400 "$err")" >&2
  fi
  drop_dir "$cfg" "$d"
}

workloads=(
  "gedit $bin/atomic_update @D@ --n $n_gedit --size 12k --sync @SYNC@ --blockdev @DEV@"
  "sqlite $bin/sqlite_insert @D@ --n $n_sqlite --row-bytes 100 --sync @SYNC@ --blockdev @DEV@"
  "varmail $bin/personalities varmail @D@ --files $vm_files --dirwidth 1000000 --filesize 16k --appendsize 16k --iosize 1m --threads 16 --prealloc 80 --duration $vm_secs --sync @SYNC@ --blockdev @DEV@"
  "randwrite $bin/personalities randwrite @D@ --filesize $rw_size --iosize 4k --ops $rw_ops --fsync-every 1 --sync @SYNC@ --blockdev @DEV@"
)
for ((r = 1; r <= reps; r++)); do
  echo "repetition $r/$reps: fresh file systems" >&2
  fresh
  for w in "${workloads[@]}"; do
    read -ra wa <<<"$w"
    for c in $(rotate "$((r - 1))" "${configs[@]}"); do
      case ${wa[0]} in
        varmail | randwrite) run "$c" "${wa[0]}" "$r" "${wa[@]:1}" --seed "$r" --label "$c" ;;
        *) run "$c" "${wa[0]}" "$r" "${wa[@]:1}" --label "$c" ;;
      esac
    done
  done
done
for c in "${ifss[@]}"; do unmount_ifs "$c"; done

# ---------------------------------------------------------------- report
params="gedit: \`atomic_update DIR --n $n_gedit --size 12k\` ($n_gedit updates)
sqlite: \`sqlite_insert DIR --n $n_sqlite --row-bytes 100\` ($n_sqlite transactions)
varmail: \`personalities varmail DIR --files $vm_files --dirwidth 1000000 --filesize 16k --appendsize 16k --iosize 1m --threads 16 --prealloc 80 --duration $vm_secs --seed REP\`
randwrite: \`personalities randwrite DIR --filesize $rw_size --iosize 4k --ops $rw_ops --fsync-every 1 --seed REP\`"
report "REPS N_GEDIT N_SQLITE VARMAIL_SECS VARMAIL_FILES RANDWRITE_OPS RANDWRITE_SIZE IMG_MIB OSYNC_VIA" \
  --image-mib "$img_mib" --osync-via "$osync_via" --params "$params"
