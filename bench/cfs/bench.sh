#!/usr/bin/env bash
# CFS's atomic regions against the fsync protocols they replace (the seeds' paper `003`: §1
# Figures 1–2, §6 SQLite, §7.2 Figure 4, §7.3 Figure 5; intactfs: issue 13), side by side in
# one run. Two workloads:
#   two_db  the atomic update of two SQLite databases (bench/cfs/two_db.c, SQLite 3.54.1 from
#           tools/sqlite-batch): N transactions, each updating one 100-byte row in db1 and the
#           same row in db2 (ATTACHed), on
#             ext4 · master           SQLite's multi-database commit (rollback journals and a
#                                     super-journal, journal_mode=DELETE, synchronous=FULL:
#                                     Figure 2) on ext4
#             intactfs · master       the same protocol on intactfs (each fsync commits the stream)
#             intactfs · region       journal_mode=OFF, synchronous=OFF, every transaction in
#                                     ioctl BEGIN (0xCC07) … ioctl COMMIT (0xCC08) (Figure 1)
#   insert  SQLite single-row INSERT transactions (tools/sqlite-batch's driver, `DB insert N`,
#           journal_mode=DELETE, synchronous=FULL), on
#             ext4 · rollback journal        sqlite-batch-plain
#             intactfs · rollback journal    sqlite-batch-plain
#             intactfs · batch atomic write  sqlite-batch (SQLITE_ENABLE_BATCH_ATOMIC_WRITE: the
#                                            F2FS atomic-write ioctls, no journal file)
# and, when `intact fs mkfs --help` offers `--device txflash`, the intactfs rows again on an
# image made with `--device txflash` (intactfs-txflash); otherwise a note says it is missing.
# Prints a markdown report (transactions/s, latency, device flushes and bytes per
# transaction, the ratios, the targets met or missed, and the measured causes: the cost of
# a flush here, the FUSE round trip, system calls per transaction from strace -c); with
# --write-docs it also replaces the section between <!-- cfs:begin --> and <!-- cfs:end -->
# of docs/benchmarks.md (DOCS=FILE: another file), appending the markers at its end if
# absent, and nothing else in that file.
#
#   [REPS=3] bash bench/cfs/bench.sh [--quick] [--write-docs]        (as root)
#
# Environment: REPS (default 3; --quick: 1), N_TWO (two_db transactions, 500), N_INSERT
# (insert transactions, 1500), IMG_MIB (512 per image), PROFILE_N (transactions per strace
# profile, 20; 0: no profile), INTACT (an intact binary; default: target/release/intact,
# built with `cargo build --release -p intact-cli -j 1` when missing), RESULTS=FILE (keep the
# raw JSON lines, and FILE.args: `eval python3 bench/cfs/report.py FILE "$(cat FILE.args)"`
# remakes the report), TMPDIR (where the work directory goes: on a disk, not tmpfs).
# --quick: one repetition, N_TWO=60, N_INSERT=150, 256 MiB images (a smoke run, under a
# minute to ~2 minutes). The full default takes 5–10 minutes on 2 cores (most of it the
# master protocol and the rollback journal waiting for flushes; longer when the disk is busy).
#
# Each repetition starts from freshly made file systems (ext4 mkfs'd again, the intactfs
# images mkfs'd again); within it every workload runs on its configurations in turn, the
# order rotating between repetitions, each run in a fresh directory; figures are medians
# over the repetitions. ext4 sits on its own loop device; the intactfs images are files in a
# second ext4 on a second loop device (as bench/optfs/bench.sh), so every configuration's
# flushes go through one loop device to a file on the root disk, and that loop device's
# /sys/block/loopN/stat counts them (flushes: field 16; bytes written: field 7 × 512).
# After the repetitions (on the last repetition's file systems, not timed): the strace -c
# profile of each configuration (a run of PROFILE_N + 1 transactions minus a run of 1:
# system calls per transaction), the cost of a 4 KiB write + fdatasync on each ext4, and of
# a FUSE round trip (an ioctl the daemon answers at once).
# Mounts, daemons (only those this script started, by pid), loop devices and the work
# directory are removed on exit, even on failure or Ctrl-C. Exit 0: every run succeeded;
# 1: some failed (the report says which; --write-docs then writes nothing); 2: cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.."
me=bench/cfs/bench.sh
source bench/lib_fs.sh  # options, checks, devices, mounts, clean-up, report (shared with bench/optfs)
parse_args "$@"

# ---------------------------------------------------------------- can it run here?
check_machine gcc python3 mkfs.ext4 losetup mount umount dd timeout stat sync df findmnt
find_intact
if [[ -z ${INTACT:-} && ! -x $intact ]]; then
  command -v cargo >/dev/null || cannot "no $intact and no cargo (give INTACT=path/to/intact)"
  echo "building intact (cargo build --release -p intact-cli -j 1) ..." >&2
  cargo build --release -p intact-cli -j 1 -q || cannot "building intact failed"
fi

reps=${REPS:-3}
if ((quick)); then
  reps=${REPS:-1}
  n_two=${N_TWO:-60} n_insert=${N_INSERT:-150} img_mib=${IMG_MIB:-256} timeout_s=300
else
  n_two=${N_TWO:-500} n_insert=${N_INSERT:-1500} img_mib=${IMG_MIB:-512} timeout_s=1200
fi
profile_n=${PROFILE_N:-20}
for v in reps n_two n_insert img_mib; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "$v=${!v}: expected a positive whole number"
done
[[ $profile_n =~ ^[0-9]+$ ]] || cannot "PROFILE_N=$profile_n: expected a whole number"
((img_mib >= 128)) || cannot "IMG_MIB=$img_mib: at least 128"
have_strace=0
if ((profile_n > 0)); then
  if command -v strace >/dev/null; then have_strace=1; else echo "$me: strace is missing: no system-call profile" >&2; fi
fi

# txflash: only if this intact binary offers it.
txflash=0
mkfs_help=$("$intact" fs mkfs --help 2>&1 || true)
if grep -q -- '--device' <<<"$mkfs_help" && grep -q 'txflash' <<<"$mkfs_help"; then
  txflash=1
else
  echo "$me: note: $intact fs mkfs has no \`--device txflash\`: the transactional-flash device is not available in this binary; skipping the intactfs-txflash rows" >&2
fi

check_base $((2 * img_mib + txflash * img_mib * 5 / 4 + 256 + 256))

# ---------------------------------------------------------------- clean-up, always
exts=(ext4) ifss=(intactfs)
if ((txflash)); then ifss+=(intactfs-txflash); fi
loop_e="" loop_h=""
declare -A broken=()
trap_cleanup
start_work cfs

# ---------------------------------------------------------------- build
sb=$repo/target/sqlite-batch
echo "building SQLite 3.54.1 (tools/sqlite-batch/build.sh) ..." >&2
bash tools/sqlite-batch/build.sh >/dev/null 2>"$work/sqlite-build.log" || { cat "$work/sqlite-build.log" >&2; cannot "tools/sqlite-batch/build.sh failed"; }
for f in sqlite3.h sqlite3-plain.o sqlite-batch sqlite-batch-plain; do [[ -e $sb/$f ]] || cannot "$sb/$f is missing after tools/sqlite-batch/build.sh"; done
bin=$work/bin
gcc -O2 -Wall -Wextra -I "$sb" -o "$bin/two_db" bench/cfs/two_db.c "$sb/sqlite3-plain.o" -lm -lpthread -ldl
gcc -O2 -Wall -Wextra -o "$bin/cfs_tool" bench/cfs/cfs_tool.c
cp "$sb/sqlite-batch" "$sb/sqlite-batch-plain" "$bin/"
sqlite_version=$(grep -m1 '^#define SQLITE_VERSION ' "$sb/sqlite3.h" | tr -d '"' | awk '{print $3}')

# ---------------------------------------------------------------- devices
echo "writing the images ($img_mib MiB each, zeros) in $work ..." >&2
zeros "$work/ext4.img" $((img_mib / 4))
# the intactfs image, the txflash image (--size plus up to a quarter more) and 256 MiB spare
zeros "$work/host.img" $(((img_mib + txflash * img_mib * 5 / 4) / 4 + 64))
attach_loop loop_e "$work/ext4.img"
attach_loop loop_h "$work/host.img"
host_fs "$loop_h" intactfs  # (mkfs makes the txflash image)
dev[ext4]=$(basename "$loop_e")
for c in "${ifss[@]}"; do dev[$c]=$(basename "$loop_h"); done

mkfs_ifs() {  # mkfs_ifs FS
  local img=${mnt[host]}/$1.img
  case $1 in
    intactfs-txflash)
      # mkfs --device txflash makes a new (sparse) file, larger than --size by its spare
      # slots, mapping tables and commit log; its holes are then written out (the same
      # bytes, zeros for the holes) so that, as for the other images, no write allocates
      # in the ext4 under it.
      rm -f "$img" "$img.dense"
      "$intact" fs mkfs "$img" --device txflash --size "${img_mib}M" --force >/dev/null || return 1
      cp --sparse=never "$img" "$img.dense" && mv "$img.dense" "$img" ;;
    *) "$intact" fs mkfs "$img" --force >/dev/null ;;
  esac
}
fresh() {  # every file system made again and mounted
  local c err
  for c in "${ifss[@]}"; do unmount_ifs "$c"; done
  unmount_dir "${mnt[ext4]}"
  mkext4 "$loop_e"
  mount -t ext4 "$loop_e" "${mnt[ext4]}"
  ! grep " ${mnt[ext4]} " /proc/mounts | grep -q -e nobarrier -e barrier=0 || cannot "the ext4 mount has barriers off"
  for c in "${ifss[@]}"; do
    broken[$c]=""
    if ! err=$(mkfs_ifs "$c" 2>&1); then broken[$c]="intact fs mkfs failed: $err"; fi
  done
  sync -f "${mnt[host]}"
  for c in "${ifss[@]}"; do
    [[ -z ${broken[$c]} ]] || continue
    if ! err=$(mount_ifs "$c" 2>&1); then broken[$c]="intact fs mount failed: $err $(tail -c 300 "$work/$c.log" 2>/dev/null)"; fi
  done
  [[ -z ${broken[intactfs]} ]] || cannot "intactfs: ${broken[intactfs]}"
  "$bin/cfs_tool" probe "${mnt[intactfs]}" || cannot "$intact does not take the CFS region ioctls (BEGIN 0xCC07): too old, rebuild it"
}

# ---------------------------------------------------------------- one run
results=$work/results.jsonl
: >"$results"
failures=0
settle() {  # settle FS: everything on that file system durable, its device quiet
  case $1 in
    ext4) timeout --foreground 300 sync -f "${mnt[ext4]}" ;;
    *) timeout --foreground 300 "$bin/cfs_tool" streamsync "${mnt[$1]}" && timeout --foreground 300 sync -f "${mnt[host]}" ;;
  esac
}
sysblk() { awk '{printf "%.0f %.0f\n", $7 * 512, $16}' "/sys/block/$1/stat"; }  # bytes written, flushes
record_fail() {  # record_fail FS METHOD WORKLOAD REP RC MESSAGE
  failures=$((failures + 1))
  printf '{"fs": "%s", "method": "%s", "workload": "%s", "rep": %d, "failed": true, "rc": %d, "error": %s}\n' \
    "$1" "$2" "$3" "$4" "$5" "$(json_str "$6")" >>"$results"
  echo "  $3 $2 on $1: FAILED (exit $5): $(tail -c 400 <<<"$6")" >&2
}
# go RC OUT...: run the rest with the timeout, output to $out, stderr to $err; Ctrl-C stops all
go() {
  local rc=0
  out=$(timeout --foreground --kill-after=10 "$timeout_s" "$@" 2>"$err") || rc=$?
  if ((rc == 130 || rc == 143)); then echo "  interrupted" >&2; exit "$rc"; fi
  return "$rc"
}
# run FS METHOD WORKLOAD REP
run() {
  local fs=$1 method=$2 wl=$3 rep=$4
  local d=${mnt[$fs]}/$wl-$method.$rep rc=0 line
  local sync_spec=syncfs:$d
  err=$work/err.txt out=""
  [[ $fs == ext4 ]] || sync_spec=streamsync:$d
  if [[ -n ${broken[$fs]:-} ]]; then record_fail "$fs" "$method" "$wl" "$rep" 1 "${broken[$fs]}"; return; fi
  mkdir "$d"
  case $wl in
    two_db)
      settle "$fs" || echo "$me: syncing $fs failed" >&2
      go "$bin/two_db" "$d" --mode "$method" --n "$n_two" --rows 100 --row-bytes 100 --sync "$sync_spec" --blockdev "${dev[$fs]}" --label "$fs" || rc=$?
      if ((rc == 0)) && [[ $out == \{*\} && $out != *$'\n'* ]]; then
        line=${out%\}}
        # the check in a fresh process: both databases hold every update, nothing else
        if go "$bin/two_db" "$d" --mode verify --n "$n_two"; then
          line+=', "verified": true}'
        else
          rc=1 out="verify: $(cat "$err") $out"
        fi
      fi
      ;;
    insert)
      local prog=sqlite-batch-plain feat=""
      [[ $method == batch ]] && prog=sqlite-batch
      # The first transaction of a new database journals (SQLite: dbSize 0): not timed.
      go "$bin/$prog" "$d/bench.db" insert 1 100 || rc=$?
      if ((rc == 0)); then go "$bin/$prog" "$d/bench.db" features || rc=$?; feat=${out#batch_atomic }; fi
      if ((rc == 0)) && [[ $method == batch && $feat != yes ]]; then rc=1 out="sqlite-batch features: batch_atomic $feat on $fs (expected yes)"; fi
      if ((rc == 0)); then
        settle "$fs" || echo "$me: syncing $fs failed" >&2
        local s0 s1 t0 t1 b0 f0 b1 f1
        s0=$(sysblk "${dev[$fs]}")
        go "$bin/$prog" "$d/bench.db" insert "$n_insert" 100 || rc=$?
        s1=$(sysblk "${dev[$fs]}")
        if ((rc == 0)) && [[ $out =~ ^transactions\ ([0-9]+)\ seconds\ ([0-9.]+)\ tps\ ([0-9.]+)$ ]]; then
          local secs=${BASH_REMATCH[2]}
          t0=$(date +%s.%N)
          settle "$fs" || echo "$me: syncing $fs failed" >&2
          t1=$(date +%s.%N)
          # rows and integrity (Python's sqlite3 module, a fresh process)
          if go python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
ok = c.execute("PRAGMA integrity_check").fetchone()[0]
rows = c.execute("SELECT count(*) FROM t").fetchone()[0]
print(ok, rows)' "$d/bench.db" && [[ $out == "ok $((n_insert + 1))" ]]; then
            read -r b0 f0 <<<"$s0"
            read -r b1 f1 <<<"$s1"
            line=$(awk -v n="$n_insert" -v s="$secs" -v b="$((b1 - b0))" -v f="$((f1 - f0))" -v ts="$t0" -v te="$t1" -v feat="$feat" -v fs="$fs" \
              'BEGIN {printf "{\"bench\": \"insert\", \"label\": \"%s\", \"ops\": %d, \"secs\": %.6f, \"ops_per_s\": %.3f, \"lat_mean_us\": %.1f, \"disk_flushes\": %d, \"disk_bytes\": %d, \"settle_secs\": %.3f, \"batch_atomic\": \"%s\", \"verified\": true", fs, n, s, (s > 0 ? n / s : 0), s / n * 1e6, f, b, te - ts, feat}')
            line+='}'
          else
            rc=1 out="check after insert: $out $(cat "$err")"
          fi
        elif ((rc == 0)); then
          rc=1
        fi
      fi
      ;;
  esac
  if ((rc == 0)) && [[ -n ${line:-} ]]; then
    printf '{"fs": "%s", "method": "%s", "workload": "%s", "rep": %d, %s\n' "$fs" "$method" "$wl" "$rep" "${line#\{}" >>"$results"
    echo "  $wl $method on $fs: ok" >&2
  else
    record_fail "$fs" "$method" "$wl" "$rep" "$rc" "$(tail -c 600 "$err") $(tail -c 300 <<<"$out")"
  fi
  drop_dir "$fs" "$d"
}

two_cfgs=(ext4:master intactfs:master intactfs:region)
ins_cfgs=(ext4:plain intactfs:plain intactfs:batch)
if ((txflash)); then
  two_cfgs+=(intactfs-txflash:master intactfs-txflash:region)
  ins_cfgs+=(intactfs-txflash:plain intactfs-txflash:batch)
fi
for ((r = 1; r <= reps; r++)); do
  echo "repetition $r/$reps: fresh file systems" >&2
  fresh
  for c in $(rotate "$((r - 1))" "${two_cfgs[@]}"); do run "${c%%:*}" "${c#*:}" two_db "$r"; done
  for c in $(rotate "$((r - 1))" "${ins_cfgs[@]}"); do run "${c%%:*}" "${c#*:}" insert "$r"; done
done

# ---------------------------------------------------------------- causes (not timed)
# System calls per transaction: strace -c of a run of 1 + PROFILE_N transactions minus one of 1.
profile_json() {  # profile_json FS METHOD WL: one JSON line of syscalls per transaction
  local fs=$1 method=$2 wl=$3 k d a b
  for k in 1 $((1 + profile_n)); do
    d=${mnt[$fs]}/profile-$wl-$method-$k
    mkdir "$d"
    case $wl in
      two_db) strace -f -c -o "$work/strace.$k" "$bin/two_db" "$d" --mode "$method" --n "$k" >/dev/null 2>"$work/err.txt" || return 1 ;;
      insert)
        local prog=sqlite-batch-plain
        [[ $method == batch ]] && prog=sqlite-batch
        "$bin/$prog" "$d/bench.db" insert 1 >/dev/null 2>"$work/err.txt" || return 1
        strace -f -c -o "$work/strace.$k" "$bin/$prog" "$d/bench.db" insert "$k" >/dev/null 2>"$work/err.txt" || return 1 ;;
    esac
    rm -rf "$d"
  done
  python3 - "$work/strace.1" "$work/strace.$((1 + profile_n))" "$profile_n" "$fs" "$method" "$wl" <<'EOF'
import json, sys
def counts(p):
    c = {}
    for line in open(p):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] not in ("total",):
            c[f[-1]] = int(f[3])
    return c
a, b, k = counts(sys.argv[1]), counts(sys.argv[2]), int(sys.argv[3])
per = {s: (b.get(s, 0) - a.get(s, 0)) / k for s in set(a) | set(b)}
per = {s: v for s, v in per.items() if abs(v) >= 0.05}
print(json.dumps({"fs": sys.argv[4], "method": sys.argv[5], "workload": sys.argv[6], "profile": True, "n": k,
                  "syscalls": round(sum(per.values()), 2), "per_syscall": {s: round(v, 2) for s, v in sorted(per.items(), key=lambda x: -x[1])}}))
EOF
}
if ((have_strace)); then
  echo "system-call profiles (strace -c, $profile_n transactions) ..." >&2
  for c in "${two_cfgs[@]}"; do
    fs=${c%%:*} method=${c#*:}
    [[ -z ${broken[$fs]:-} ]] || continue
    profile_json "$fs" "$method" two_db >>"$results" || echo "$me: profiling two_db $method on $fs failed: $(tail -c 300 "$work/err.txt")" >&2
  done
  for c in "${ins_cfgs[@]}"; do
    fs=${c%%:*} method=${c#*:}
    [[ -z ${broken[$fs]:-} ]] || continue
    profile_json "$fs" "$method" insert >>"$results" || echo "$me: profiling insert $method on $fs failed: $(tail -c 300 "$work/err.txt")" >&2
  done
fi
echo "the cost of a flush and of a FUSE round trip ..." >&2
cost_n=$((quick ? 100 : 300))
for fs in ext4 host; do
  settle ext4 >/dev/null 2>&1 || true
  sync -f "${mnt[host]}"
  l=$loop_e
  [[ $fs == host ]] && l=$loop_h
  if o=$("$bin/cfs_tool" flushcost "${mnt[$fs]}/flushcost.dat" "$cost_n" "$(basename "$l")" 2>"$work/err.txt"); then
    echo "{\"cost\": \"flush\", \"where\": \"$fs\", ${o#\{}" >>"$results"
  else
    echo "$me: flushcost on $fs failed: $(cat "$work/err.txt")" >&2
  fi
done
if o=$("$bin/cfs_tool" rtt "${mnt[intactfs]}" $((cost_n * 10)) 2>"$work/err.txt"); then
  echo "{\"cost\": \"fuse_rtt\", \"where\": \"intactfs\", ${o#\{}" >>"$results"
else
  echo "$me: rtt on intactfs failed: $(cat "$work/err.txt")" >&2
fi
for c in "${ifss[@]}"; do unmount_ifs "$c"; done
for c in "${ifss[@]}"; do
  l=$(grep -h "unmounted and written back" "$work/$c.log" 2>/dev/null | tail -1 || true)
  [[ -z $l ]] || echo "{\"daemon\": \"$c\", \"last_line\": $(json_str "$l")}" >>"$results"
done

# ---------------------------------------------------------------- report
txnote=""
((txflash)) || txnote="\`$(basename "$intact") fs mkfs --help\` lists no \`--device txflash\`: the transactional-flash device is not available in this binary, so the intactfs-txflash rows are skipped"
report "REPS N_TWO N_INSERT IMG_MIB PROFILE_N" \
  --image-mib "$img_mib" --n-two "$n_two" --n-insert "$n_insert" --profile-n "$((have_strace ? profile_n : 0))" \
  --sqlite-version "$sqlite_version" --txflash-note "$txnote"
