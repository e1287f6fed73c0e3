#!/usr/bin/env bash
# fsync throughput with concurrent fsyncing workers, side by side in one run: N workers, each
# appending 4 KiB to a file of its own and fsyncing it, over and over (bench/fs/fsync_threads.c,
# built with libintact), for each mode of MODES and each N of THREADS on four systems. Modes:
#   threads          N threads of one process (on intactfs they share the process's stream, the
#                    init stream, so one fsync commits every thread's appends so far);
#   streams          N processes; on the two intactfs each joins a stream of its own first
#                    ("fsync-tI", libintact's intact_setstream_path: fsync_threads.c --streams),
#                    so an fsync commits its own process's appends only; on ext4 and the
#                    passthrough, which have no streams, plain processes (--procs).
# Systems:
#   ext4             mkfs.ext4 -b 4096 (nodiscard, inode tables and journal zeroed at mkfs),
#                    default mount options, on loop device 1 over ext4.img;
#   passthrough      crates/intactfs-fuse/examples/passthrough.rs (the intactfs mount's fuser
#                    configuration) over a directory of a second such ext4 (loop 2 over pt.img);
#   intactfs-locked  `intact fs mount --daemon -o locked_commit`: the old commit, one engine
#                    lock held across every commit's device writes and flush (the option string
#                    is INTACT_LOCKED_OPT; when the mount refuses it, these rows say "not
#                    available" and the run goes on);
#   intactfs         `intact fs mount --daemon` as it is (commits write and flush outside the
#                    engine lock: group commit);
# both intactfs images are zero-filled files in a third ext4 (loop 3 over host.img) that holds
# nothing else (the two run one after the other; the idle one has nothing to commit). Each
# loop device's /sys/block/loopN/stat counts what its system sends to the disk over the timed
# part (flushes: field 16; bytes written: field 7 × 512), per operation in the report.
# Every repetition starts from freshly made file systems; within it, for each mode and within
# that for each thread count, the four systems run in turn (the order rotating between
# repetitions; every JSON line records its "mode"), each run in a fresh directory, synced
# before (ext4: sync -f; passthrough: sync -f of its ext4; intactfs: STREAMSYNC, then sync -f
# of the ext4 under the images) and removed (and synced) after.
# Figures are medians over the repetitions, min–max of ops/s in brackets.
#
#   [REPS=3] [SECONDS=10] [THREADS="1 4"] [MODES="threads streams"] bash bench/fs/fsync_threads.sh
#                                                           [--quick] [--write-docs]   (as root)
# Prints a markdown report and writes it, with the raw JSON lines, to OUT (default
# target/bench/fs): fsync_threads.md, fsync_threads.jsonl and fsync_threads.args (the
# report's arguments: `eval python3 bench/fs/fsync_threads_report.py
# target/bench/fs/fsync_threads.jsonl "$(cat target/bench/fs/fsync_threads.args)"` remakes the
# report). --write-docs also replaces the section between the bench/fs/fsync_threads.sh
# markers of docs/benchmarks.md (DOCS=FILE: another file), appending it at the end if absent;
# not when a run failed.
#
# Environment: REPS (repetitions, default 3; --quick: 1), SECONDS (each run's length, default
# 10; --quick: 3), THREADS (worker counts, default "1 4"; up to 256 each, e.g. "1 4 8"),
# MODES (default and --quick: "threads streams"; either alone), SIZE (bytes per append,
# default 4096), IMG_MIB (MiB per image, default 1024), INTACT_LOCKED_OPT (the mount
# option of intactfs-locked, default locked_commit), INTACT (an intact binary; default
# target/release/intact, built with cargo -j 1 when missing), PASSTHROUGH (the passthrough
# example binary; default target/release/examples/passthrough, built when missing), TMPDIR
# (where the work directory goes: on a disk, not tmpfs; default /tmp), OUT, DOCS.
# The default takes about 4 minutes per repetition (16 runs of 10 s: 2 modes × 2 thread counts
# × 4 systems, each with its syncs) plus half a minute of set-up; each more thread count adds 8
# runs per repetition.
# Mounts, daemons (only those this script started, by pid), loop devices and the work
# directory are removed on exit, even on failure or Ctrl-C. Exit 0: every run succeeded (an
# intactfs-locked that cannot mount is not a failure); 1: some failed; 2: cannot run.
set -euo pipefail
# SECONDS is bash's own clock: take the value given in the environment, if any, as it came.
env_seconds=$(tr '\0' '\n' </proc/$$/environ | sed -n 's/^SECONDS=//p' | head -1)
caller_pwd=$PWD
cd "$(dirname "$0")/../.."
me=bench/fs/fsync_threads.sh
source bench/lib_fs.sh  # options, checks, devices, mounts, clean-up (shared with bench/optfs, bench/cfs)
parse_args "$@"
# Other work on the shared machine (lifetime-average CPU of processes above 20%), at the start.
others=$(ps -eo ni=,pcpu=,comm= --sort=-pcpu | awk '$2 > 20 {printf "%s%s (nice %s, %s%% CPU)", sep, $3, $1, $2; sep=", "}' | head -c 400)

# ---------------------------------------------------------------- can it run here?
check_machine gcc python3 mkfs.ext4 losetup mount umount dd timeout stat sync df findmnt
reps=${REPS:-3} dur=${env_seconds:-10} thread_counts=${THREADS:-1 4} modes=${MODES:-threads streams}
if ((quick)); then reps=${REPS:-1} dur=${env_seconds:-3}; fi
size=${SIZE:-4096} img_mib=${IMG_MIB:-1024}
locked_opt=${INTACT_LOCKED_OPT-locked_commit}
for v in reps dur size img_mib; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || cannot "$v=${!v}: expected a positive whole number"
done
read -ra threads_list <<<"$thread_counts"
((${#threads_list[@]} > 0)) || cannot "THREADS is empty"
for t in "${threads_list[@]}"; do
  [[ $t =~ ^[1-9][0-9]*$ ]] && ((t <= 256)) || cannot "THREADS=\"$thread_counts\": expected whole numbers from 1 to 256"
done
read -ra modes_list <<<"$modes"
((${#modes_list[@]} > 0)) || cannot "MODES is empty"
declare -A seen_mode=()
for m in "${modes_list[@]}"; do
  [[ $m == threads || $m == streams ]] || cannot "MODES=\"$modes\": expected threads and/or streams"
  [[ -z ${seen_mode[$m]:-} ]] || cannot "MODES=\"$modes\": $m twice"
  seen_mode[$m]=1
done
((img_mib >= 256)) || cannot "IMG_MIB=$img_mib: at least 256"
out_dir=$(cd "$caller_pwd" && realpath -m "${OUT:-$repo/target/bench/fs}")
# ext4.img, pt.img, host.img (two images and 256 MiB for its ext4), 256 MiB to spare
check_base $((4 * img_mib + 256 + 256))

# intact and the passthrough: the given binaries, else those of target/release (built when missing)
find_intact
if [[ -z ${INTACT:-} && ! -x $intact ]]; then
  command -v cargo >/dev/null || cannot "no $intact and no cargo (give INTACT=path/to/intact)"
  echo "building intact (cargo build --release -p intact-cli -j 1) ..." >&2
  cargo build --release -p intact-cli -j 1 -q || cannot "building intact failed"
fi
if [[ -n ${PASSTHROUGH:-} ]]; then
  pt_bin=$(cd "$caller_pwd" && realpath -e "$PASSTHROUGH" 2>/dev/null) || cannot "PASSTHROUGH=$PASSTHROUGH does not exist"
  [[ -x $pt_bin ]] || cannot "PASSTHROUGH=$PASSTHROUGH is not executable"
else
  pt_bin=$repo/target/release/examples/passthrough
  if [[ ! -x $pt_bin ]]; then
    command -v cargo >/dev/null || cannot "no $pt_bin and no cargo (give PASSTHROUGH=path/to/passthrough)"
    echo "building the passthrough (cargo build --release -p intactfs-fuse --example passthrough -j 1) ..." >&2
    cargo build --release -p intactfs-fuse --example passthrough -j 1 -q || cannot "building the passthrough failed"
  fi
fi

# ---------------------------------------------------------------- clean-up, always
systems=(ext4 passthrough intactfs-locked intactfs)
exts=(ext4 ptback) ifss=(intactfs-locked intactfs)
loop_e="" loop_p="" loop_h="" pt_pid=""
declare -A unavail=()
stop_pt() {  # unmount the passthrough, then end its daemon (started here; by pid)
  local m=${mnt[passthrough]:-} i
  if [[ -n $m ]] && mounted "$m"; then umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
  if [[ -n $pt_pid ]]; then
    for ((i = 0; i < 100; i++)); do kill -0 "$pt_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pt_pid" 2>/dev/null; then
      kill -TERM "$pt_pid" 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do kill -0 "$pt_pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pt_pid" 2>/dev/null || true
    fi
    wait "$pt_pid" 2>/dev/null || true
    pt_pid=""
  fi
  return 0
}
cleanup_all() {  # the passthrough (lib_fs.sh's cleanup knows no FUSE but intactfs), then the rest
  local rc=$?
  set +e
  stop_pt
  (exit "$rc")
  cleanup
}
trap_cleanup
trap cleanup_all EXIT
start_work fsync
mnt[passthrough]=$work/mnt/passthrough
mkdir "${mnt[passthrough]}"

# ---------------------------------------------------------------- build
bin=$work/bin
gcc -O2 -Wall -Wextra -pthread -Ilibintact/include -o "$bin/fsync_threads" bench/fs/fsync_threads.c libintact/src/intact.c

# ---------------------------------------------------------------- devices
echo "writing the images ($img_mib MiB each, zeros) in $work ..." >&2
zeros "$work/ext4.img" $((img_mib / 4))
zeros "$work/pt.img" $((img_mib / 4))
zeros "$work/host.img" $((2 * img_mib / 4 + 64))
attach_loop loop_e "$work/ext4.img"
attach_loop loop_p "$work/pt.img"
attach_loop loop_h "$work/host.img"
host_fs "$loop_h" "${ifss[@]}"
dev[ext4]=$(basename "$loop_e") dev[passthrough]=$(basename "$loop_p")
for c in "${ifss[@]}"; do dev[$c]=$(basename "$loop_h"); done

fresh() {  # every file system made again and mounted
  local c
  stop_pt
  for c in "${ifss[@]}"; do unmount_ifs "$c"; done
  unmount_dir "${mnt[ext4]}"
  unmount_dir "${mnt[ptback]}"
  mkext4 "$loop_e"
  mount -t ext4 "$loop_e" "${mnt[ext4]}"
  mkext4 "$loop_p"
  mount -t ext4 "$loop_p" "${mnt[ptback]}"
  mkdir "${mnt[ptback]}/data"
  for c in "${ifss[@]}"; do "$intact" fs mkfs "${mnt[host]}/$c.img" --force >/dev/null; done
  sync -f "${mnt[host]}"
  "$pt_bin" "${mnt[ptback]}/data" "${mnt[passthrough]}" 2>>"$work/passthrough.log" &
  pt_pid=$!
  wait_mount "${mnt[passthrough]}" "$pt_pid" || cannot "the passthrough did not mount: $(tail -c 300 "$work/passthrough.log")"
  mount_ifs intactfs 2>"$work/mount-err.txt" || cannot "intact fs mount failed: $(cat "$work/mount-err.txt") $(tail -c 300 "$work/intactfs.log" 2>/dev/null)"
  unavail[intactfs-locked]=""
  if [[ -z $locked_opt ]]; then
    unavail[intactfs-locked]="INTACT_LOCKED_OPT is empty"
  elif ! mount_ifs intactfs-locked -o "$locked_opt" 2>"$work/mount-err.txt"; then
    unavail[intactfs-locked]="\`intact fs mount -o $locked_opt\` failed: $(tr -s '\n' ' ' <"$work/mount-err.txt" | tail -c 300)"
    unmount_ifs intactfs-locked
  fi
}

# ---------------------------------------------------------------- one run
results=$work/results.jsonl
: >"$results"
failures=0
settle() {  # settle SYSTEM: everything on it durable, its device quiet
  case $1 in
    ext4) timeout --foreground 300 sync -f "${mnt[ext4]}" ;;
    passthrough) timeout --foreground 300 sync -f "${mnt[ptback]}" ;;
    *) timeout --foreground 300 python3 bench/fs/mount_bench.py sync "${mnt[$1]}" --intactfs && timeout --foreground 300 sync -f "${mnt[host]}" ;;
  esac
}
run() {  # run SYSTEM MODE THREADS REP
  local s=$1 mode=$2 t=$3 r=$4 d=${mnt[$1]}/$2-t$3.$4 rc=0 out err=$work/err.txt how=() what
  what="$mode, $t worker$( ((t == 1)) || echo s) on $s"
  if [[ -n ${unavail[$s]:-} ]]; then
    printf '{"system": "%s", "mode": "%s", "threads": %d, "rep": %d, "unavailable": true, "error": %s}\n' "$s" "$mode" "$t" "$r" "$(json_str "${unavail[$s]}")" >>"$results"
    echo "  $what: not available" >&2
    return
  fi
  if [[ $mode == streams ]]; then
    case $s in
      intactfs*) how=(--streams) ;;  # a stream of its own per worker process
      *) how=(--procs) ;;            # no streams: plain processes
    esac
  fi
  mkdir "$d"
  settle "$s" || echo "$me: syncing $s failed" >&2
  out=$(timeout --foreground --kill-after=10 $((dur + 300)) "$bin/fsync_threads" "$d" "$t" "$dur" --size "$size" --blockdev "${dev[$s]}" "${how[@]}" 2>"$err") || rc=$?
  if ((rc == 130 || rc == 143)); then echo "  interrupted" >&2; exit "$rc"; fi
  if ((rc == 0)) && [[ $out == \{*\} && $out != *$'\n'* ]]; then
    printf '{"system": "%s", "mode": "%s", "rep": %d, %s\n' "$s" "$mode" "$r" "${out#\{}" >>"$results"
    echo "  $what: $(sed -n 's/.*"ops_per_s": \([0-9.]*\).*/\1/p' <<<"$out") ops/s" >&2
  else
    failures=$((failures + 1))
    printf '{"system": "%s", "mode": "%s", "threads": %d, "rep": %d, "failed": true, "rc": %d, "error": %s}\n' \
      "$s" "$mode" "$t" "$r" "$rc" "$(json_str "$(tail -c 600 "$err") $(tail -c 300 <<<"$out")")" >>"$results"
    echo "  $what: FAILED (exit $rc): $(tail -c 300 "$err")" >&2
  fi
  drop_dir "$s" "$d"
}

for ((r = 1; r <= reps; r++)); do
  echo "repetition $r/$reps: fresh file systems" >&2
  fresh
  for mode in "${modes_list[@]}"; do
    for t in "${threads_list[@]}"; do
      for s in $(rotate "$((r - 1))" "${systems[@]}"); do run "$s" "$mode" "$t" "$r"; done
    done
  done
done

# The daemons' own totals for the last repetition (printed when they unmount).
for c in "${ifss[@]}"; do unmount_ifs "$c"; done
for c in "${ifss[@]}"; do
  l=$(grep -h "unmounted and written back" "$work/$c.log" 2>/dev/null | tail -1 || true)
  [[ -z $l ]] || echo "{\"daemon\": \"$c\", \"last_line\": $(json_str "${l//$work/\$WORK}")}" >>"$results"
done

# ---------------------------------------------------------------- report
# Not lib_fs.sh's report(): that runs the report.py beside the script (bench/fs/report.py is
# engine.sh's), reads SECONDS as bash's clock, and keeps the results only with RESULTS=FILE;
# this one writes the report, the results and its arguments to OUT.
elapsed=$(($(date +%s) - started))
e=$((elapsed > 0 ? elapsed : 1))
pressure="CPU $((($(psi cpu) - psi_cpu0) / 10000 / e))%, I/O $((($(psi io) - psi_io0) / 10000 / e))%"
cmd="bash $me"
if ((quick)); then cmd+=" --quick"; fi
if ((write_docs)); then cmd+=" --write-docs"; fi
prefix=""
for v in REPS SECONDS THREADS MODES SIZE IMG_MIB INTACT_LOCKED_OPT INTACT PASSTHROUGH TMPDIR OUT; do
  if [[ $v == SECONDS ]]; then val=$env_seconds; [[ -n $val ]] || continue
  elif [[ -n ${!v+x} ]]; then val=${!v}
  else continue
  fi
  [[ $val =~ ^[A-Za-z0-9_./:,=+-]+$ ]] || val="\"$val\""
  prefix+="$v=$val "
done
cmd=$prefix$cmd
report_args=(
  --reps "$reps" --command "$cmd" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --elapsed "$elapsed"
  --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --pressure "$pressure"
  --image-mib "$img_mib" --duration "$dur" --size "$size" --threads "${threads_list[*]}" --modes "${modes_list[*]}" --locked-opt "$locked_opt"
  --intact "${intact#"$repo"/} (built $(date -u -r "$intact" '+%Y-%m-%d %H:%M UTC'))"
  --passthrough "${pt_bin#"$repo"/} (built $(date -u -r "$pt_bin" '+%Y-%m-%d %H:%M UTC'))" --others "$others"
  --workdir-fs "$base on $(findmnt -n -o SOURCE,FSTYPE -T "$base" 2>/dev/null | tr -s ' ' || echo "$base_fs")"
)
mkdir -p "$out_dir"
cp "$results" "$out_dir/fsync_threads.jsonl"
printf '%q ' "${report_args[@]}" >"$out_dir/fsync_threads.args"
if ((write_docs)); then report_args+=(--write-docs "${DOCS:-docs/benchmarks.md}"); fi
rc=0
python3 bench/fs/fsync_threads_report.py "$results" "${report_args[@]}" >"$out_dir/fsync_threads.md" || rc=$?
cat "$out_dir/fsync_threads.md"
echo "$me: report, results and the report's arguments in $out_dir/fsync_threads.{md,jsonl,args} (${elapsed} s)" >&2
((failures == 0)) || rc=1
exit "$rc"
