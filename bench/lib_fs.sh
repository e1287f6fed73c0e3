# The file-system side-by-side benchmarks' shell helpers (bench/optfs/bench.sh,
# bench/cfs/bench.sh): their options, the checks of the machine, the work directory, loop
# devices, ext4 and intactfs mounts, the clean-up on exit and the report.
#
# Sourced from the repository root (it sets repo to its path), after setting me (the script's
# path from the root, as messages name it). The caller's globals these helpers share:
#   quick write_docs        set by parse_args
#   intact                  set by find_intact
#   base base_fs            set by check_base (the directory the work directory goes in)
#   work started psi_cpu0 psi_io0 load0      set by start_work
#   ifss exts               the intactfs and the ext4 file systems (names; the host ext4 holding
#                           the intactfs images is "host", always there), set by the caller
#   mnt dev ifs_pid         associative arrays: mount point, loop device (loopN), daemon pid
#   loops                   the loop devices attach_loop made (detached on exit)
#   img_mib reps results failures    the caller's (the report and check_base read them)
# (bench/lib.sh is the other benchmarks': it builds intact and has no mounts.)

repo=$PWD
work="" loops=()
declare -A mnt=() dev=() ifs_pid=()

usage() { echo "usage: [REPS=3] bash $me [--quick] [--write-docs]   (as root; see the header)"; }
cannot() { echo "$me: $*" >&2; exit 2; }

parse_args() {  # parse_args "$@": --quick, --write-docs (sets quick, write_docs), -h
  local a
  quick=0 write_docs=0
  for a in "$@"; do
    case $a in
      --quick) quick=1 ;;
      --write-docs) write_docs=1 ;;
      -h | --help) usage; exit 0 ;;
      *) usage >&2; exit 2 ;;
    esac
  done
}

check_machine() {  # check_machine TOOLS...: root, the tools, FUSE and ext4 there, or exit 2
  local tool
  [[ $(id -u) == 0 ]] || cannot "needs root (losetup, mkfs.ext4, mount, FUSE): run it as root"
  for tool in "$@"; do
    command -v "$tool" >/dev/null || cannot "$tool is missing"
  done
  [[ -c /dev/fuse ]] || cannot "/dev/fuse is missing (FUSE)"
  grep -qw ext4 /proc/filesystems || cannot "the kernel has no ext4"
}

find_intact() {  # intact=INTACT (which must be an executable), else target/release/intact
  if [[ -n ${INTACT:-} ]]; then
    intact=$(realpath -e "$INTACT" 2>/dev/null) || cannot "INTACT=$INTACT does not exist"
    [[ -x $intact ]] || cannot "INTACT=$INTACT is not executable"
  else
    intact=$repo/target/release/intact
  fi
}

check_base() {  # check_base NEED_MIB: base=${TMPDIR:-/tmp}, on a disk, with NEED_MIB free
  local avail_mib
  base=${TMPDIR:-/tmp}
  [[ -d $base ]] || cannot "TMPDIR=$base is not a directory"
  [[ $base != *[[:space:]]* ]] || cannot "TMPDIR=$base contains white space"
  base_fs=$(stat -f -c %T "$base")
  case $base_fs in
    tmpfs | ramfs) cannot "$base is on $base_fs, where a flush costs nothing: set TMPDIR to a directory on a disk (e.g. TMPDIR=/var/tmp)" ;;
  esac
  avail_mib=$(($(df -Pk "$base" | awk 'NR == 2 {print $4}') / 1024))
  ((avail_mib >= $1)) || cannot "$base has $avail_mib MiB free; the images need $1 MiB (IMG_MIB=$img_mib)"
}

# ---------------------------------------------------------------- mounts and clean-up
mounted() { grep -q " $1 " /proc/mounts; }
kill_pid() {  # kill_pid PID: TERM, KILL after 10 s; only an intact daemon this script started
  local p=$1 i
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 0
  tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "fs mount" || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}
unmount_ifs() {  # unmount_ifs FS: unmount an intactfs, then end its daemon
  local c=$1 m=${mnt[$1]:-}
  [[ -n $m ]] || return 0
  if mounted "$m"; then
    "$intact" fs umount "$m" --timeout 300 >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true
  fi
  kill_pid "${ifs_pid[$c]:-}"
  ifs_pid[$c]=""
}
unmount_dir() {
  [[ -n $1 ]] && mounted "$1" || return 0
  umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
}
cleanup() {  # on exit: every intactfs, every ext4, the loop devices, the work directory
  local rc=$? c l
  set +e
  trap - EXIT INT TERM HUP
  cd /
  # A TERM sent to this script alone (not its process group) leaves a child such as dd
  # writing into a file system that then cannot be unmounted nor its loop device detached.
  pkill -TERM -P $$ 2>/dev/null && sleep 0.5
  for c in "${ifss[@]}"; do unmount_ifs "$c"; done
  for c in "${exts[@]}" host; do unmount_dir "${mnt[$c]:-}"; done
  for l in "${loops[@]}"; do [[ -n $l ]] && losetup -d "$l" 2>/dev/null; done
  if [[ -n $work && -d $work ]]; then
    if grep -q " $work/" /proc/mounts; then
      echo "$me: something is still mounted under $work; leaving it" >&2
    else
      rm -rf --one-file-system "$work"
    fi
  fi
  exit "$rc"
}
trap_cleanup() {  # cleanup on exit, on Ctrl-C, TERM and HUP
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
}

psi() { awk '/^some/ {sub("total=", "", $5); print $5}' "/proc/pressure/$1" 2>/dev/null || echo 0; }
start_work() {  # start_work NAME: the clock, PSI and load at the start; $work/{bin,mnt/FS}
  started=$(date +%s)
  psi_cpu0=$(psi cpu) psi_io0=$(psi io)
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  work=$(mktemp -d "$base/intact-$1.XXXXXX")
  mkdir -p "$work/bin" "$work/mnt"
  local c
  for c in "${exts[@]}" "${ifss[@]}" host; do mnt[$c]=$work/mnt/$c; mkdir "${mnt[$c]}"; done
}

# ---------------------------------------------------------------- devices
zeros() { dd if=/dev/zero of="$1" bs=4M count="$2" status=none; }  # zeros FILE COUNT: COUNT × 4 MiB
attach_loop() {  # attach_loop VAR FILE: a loop device over FILE in $VAR, detached on exit
  local l
  l=$(losetup -f --show "$2") || return 1
  loops+=("$l")
  printf -v "$1" %s "$l"
}
mkext4() { mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$1"; }
host_fs() {  # host_fs LOOP IMAGES...: ext4 on LOOP at ${mnt[host]}, holding IMAGES.img (zeros)
  local c
  mkext4 "$1"
  mount -t ext4 "$1" "${mnt[host]}"
  shift
  for c in "$@"; do zeros "${mnt[host]}/$c.img" $((img_mib / 4)); done
  sync -f "${mnt[host]}"
}
wait_mount() {  # wait_mount MNT PID
  local i
  for ((i = 0; i < 200; i++)); do
    mounted "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "$me: the daemon for $1 exited (log: $work/*.log)" >&2; return 1; }
    sleep 0.05
  done
  echo "$me: $1 did not appear" >&2; return 1
}
mount_ifs() {  # mount_ifs FS [OPTIONS...]: ${mnt[host]}/FS.img at ${mnt[FS]}, a daemon
  local c=$1
  shift
  "$intact" fs mount "${mnt[host]}/$c.img" "${mnt[$c]}" --daemon --pid-file "$work/$c.pid" --log "$work/$c.log" "$@" >/dev/null || return 1
  ifs_pid[$c]=$(cat "$work/$c.pid")
  wait_mount "${mnt[$c]}" "${ifs_pid[$c]}"
}

# ---------------------------------------------------------------- runs
json_str() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }
rotate() {  # rotate REP ITEMS...: the items, starting at index REP mod count
  local r=$1; shift
  local items=("$@") n=$# i
  for ((i = 0; i < n; i++)); do echo "${items[$(((i + r) % n))]}"; done
}
drop_dir() {  # drop_dir FS DIR: remove a run's directory (not timed) and make that durable (settle)
  if mounted "${mnt[$1]}"; then
    timeout --foreground 600 rm -rf "$2" || echo "$me: removing $2 failed" >&2
    settle "$1" || echo "$me: syncing $1 failed" >&2
  fi
}

# ---------------------------------------------------------------- report
# report "VARS" ARGS...: the report of $results by report.py beside $me, with the run's
# arguments (the command line, with those of the environment variables VARS that are set),
# then ARGS (the script's own), then --workdir-fs; RESULTS=FILE keeps the JSON lines and the
# arguments (FILE.args); --write-docs goes on. Exits: report.py's status, 1 if a run failed.
report() {
  local vars=$1 v cmd elapsed e pressure rc=0
  shift
  elapsed=$(($(date +%s) - started))
  e=$((elapsed > 0 ? elapsed : 1))
  pressure="CPU $((($(psi cpu) - psi_cpu0) / 10000 / e))%, I/O $((($(psi io) - psi_io0) / 10000 / e))%"
  cmd="bash $me"
  if ((quick)); then cmd+=" --quick"; fi
  if ((write_docs)); then cmd+=" --write-docs"; fi
  for v in $vars; do
    if [[ -n ${!v:-} ]]; then cmd="$v=${!v} $cmd"; fi
  done
  local report_args=(
    --reps "$reps" --command "$cmd" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --elapsed "$elapsed"
    --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --pressure "$pressure"
    "$@"
    --workdir-fs "$base on $(findmnt -n -o SOURCE,FSTYPE -T "$base" 2>/dev/null | tr -s ' ' || echo "$base_fs")"
  )
  if [[ -n ${RESULTS:-} ]]; then
    cp "$results" "$RESULTS"
    printf '%q ' "${report_args[@]}" >"$RESULTS.args"
  fi
  if ((write_docs)); then report_args+=(--write-docs "${DOCS:-docs/benchmarks.md}"); fi
  python3 "$(dirname "$me")/report.py" "$results" "${report_args[@]}" || rc=$?
  ((failures == 0)) || rc=1
  exit "$rc"
}
