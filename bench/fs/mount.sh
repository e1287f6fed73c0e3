#!/usr/bin/env bash
# Benchmarks through the intactfs FUSE mount, side by side in one run with the kernel's ext4,
# a passthrough FUSE file system over ext4 (the bare cost of FUSE) and the FUSE file systems
# Debian packages that a user would compare with (bindfs, fuse-overlayfs); writes its
# section of docs/benchmarks.md (between the bench/fs/mount.sh markers).
#
#   [REPS=3] [SYSTEMS="ext4 passthrough bindfs fuse-overlayfs intactfs"] [DOCS=FILE]
#       bash bench/fs/mount.sh [--quick]     (as root: losetup, mkfs.ext4, mount, FUSE)
#
# About 7 minutes per repetition with ext4, passthrough and intactfs (an estimated 12 with all
# five systems) plus ~2 minutes of set-up (a 4 GiB image per system: 21 GiB with all five);
# --quick (1 GiB images, small sizes, 3 s runs, one repetition) takes 3 to 7 minutes with the
# five systems, depending on the other work on the machine. Needs jq,
# gcc, g++, git, libleveldb-dev; bindfs and fuse-overlayfs are installed with apt-get when
# missing. SYSTEMS picks the systems (default: all five); bindfs and fuse-overlayfs are
# optional: if one cannot be installed or mounted, or stops working, the run goes on without
# it and the report says why ("not available: REASON"). RESULTS=FILE keeps the raw JSON lines
# (and FILE.args, the report's arguments, to regenerate the report from them); DOCS=FILE
# writes the report's section into FILE instead of docs/benchmarks.md.
#
# Each system has its own loop device over a file in a fresh /var/tmp/intact-bench.*
# directory on the root disk (the files are written full of zeros first, so no block write
# allocates in the root file system); /sys/block/loopN/stat of that loop device counts what
# each system sends to the disk:
#   ext4            mkfs.ext4 -b 4096 (nodiscard, inode tables and journal zeroed at mkfs),
#                   default mount options, on its loop device over ext4.img;
#   passthrough     crates/intactfs-fuse/examples/passthrough.rs (the intactfs mount's fuser
#                   configuration) over a directory of a second such ext4 (pt.img);
#   bindfs          Debian's bindfs (libfuse 2) mirroring a directory of a third such ext4
#                   (bindfs.img): `bindfs -f --multithreaded -o big_writes` (its defaults are
#                   one thread and 4 KiB write requests), otherwise its defaults;
#   fuse-overlayfs  Debian's fuse-overlayfs (libfuse 3): an overlay of one empty lower
#                   directory and an upper directory (and its work directory) on a fourth
#                   such ext4 (ovl.img), `-o threaded=1,writeback=0` (its defaults are one
#                   thread and the kernel's FUSE writeback cache, which would keep written
#                   data in the FUSE mount's page cache, out of reach of the final sync of the
#                   backing ext4), otherwise its defaults;
#   intactfs        `intact fs mount --daemon` (its defaults: 4 threads, fsync=durable, commit=5,
#                   dirty limit a tenth of RAM) of an image made by
#                   `intact fs mkfs`, a zero-filled file in a fifth ext4 (host.img) that holds
#                   nothing else: its loop device counts the engine's writes (its pwrites and
#                   fdatasyncs of the image file), plus that ext4's own journal (a few KiB).
# The final sync of a workload is syncfs(2) on ext4 and on the backing ext4 of passthrough,
# bindfs and fuse-overlayfs (syncfs on a FUSE mount never reaches the daemon), the STREAMSYNC
# ioctl on intactfs. Every repetition starts from freshly made file systems; every workload
# runs on the systems in turn (the order rotates between repetitions) in an empty directory
# that is removed (and the removal synced) afterwards. Figures are medians over the
# repetitions. Mounts, daemons, loop devices and images are removed on exit, even on failure
# or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: [REPS=N] [SYSTEMS=\"...\"] [DOCS=FILE] bash bench/fs/mount.sh [--quick]" >&2; exit 2 ;;
esac
[[ $(id -u) == 0 ]] || { echo "mount.sh: needs root (losetup, mkfs.ext4, mount, FUSE)" >&2; exit 1; }
for tool in jq gcc g++ git mkfs.ext4 losetup; do
  command -v "$tool" >/dev/null || { echo "mount.sh: $tool is missing" >&2; exit 1; }
done
[[ -e /usr/include/leveldb/db.h ]] || { echo "mount.sh: LevelDB headers missing (apt-get install -y libleveldb-dev)" >&2; exit 1; }
docs=${DOCS:-docs/benchmarks.md}

# The systems, in the order the report shows them; SYSTEMS picks some (any order, kept in
# this one). bindfs and fuse-overlayfs are optional: unavail[S] holds why one is left out.
all_systems=(ext4 passthrough bindfs fuse-overlayfs intactfs)
optional=" bindfs fuse-overlayfs "
systems=()
for s in ${SYSTEMS:-${all_systems[*]}}; do
  [[ " ${all_systems[*]} " == *" $s "* ]] || { echo "mount.sh: SYSTEMS: unknown system $s (known: ${all_systems[*]})" >&2; exit 2; }
done
for s in "${all_systems[@]}"; do
  [[ " ${SYSTEMS:-${all_systems[*]}} " == *" $s "* ]] && systems+=("$s")
done
((${#systems[@]})) || { echo "mount.sh: SYSTEMS names no system" >&2; exit 2; }
has() { [[ " ${systems[*]} " == *" $1 "* ]]; }
declare -A unavail=() version=() options=()
# The options of the two Debian FUSE file systems (the set-up text of the report says why).
bindfs_opts=(--multithreaded -o big_writes)
ovl_opts="threaded=1,writeback=0"
options[bindfs]="bindfs -f ${bindfs_opts[*]} BACKING/data MNT"
options[fuse-overlayfs]="fuse-overlayfs -f -o lowerdir=BACKING/lower,upperdir=BACKING/upper,workdir=BACKING/work,$ovl_opts MNT"

started=$(date +%s)
# Other work on the shared machine (lifetime-average CPU of processes above 20%), at the start.
others=$(ps -eo ni=,pcpu=,comm= --sort=-pcpu | awk '$2 > 20 {printf "%s%s (nice %s, %s%% CPU)", sep, $3, $1, $2; sep=", "}' | head -c 400)
psi() { awk '/^some/ {sub("total=", "", $5); print $5}' "/proc/pressure/$1" 2>/dev/null || echo 0; }
psi_cpu0=$(psi cpu); psi_io0=$(psi io)
load0=$(cut -d' ' -f1-3 /proc/loadavg)

work=$(mktemp -d /var/tmp/intact-bench.XXXXXX)
# mnt: where a system is mounted; back: the backing ext4 of a FUSE system (intactfs: the
# host ext4 holding its image); loop: the loop device; pid: the FUSE daemon.
declare -A mnt=() back=() loop=() pid=() imgname=()
mnt[ext4]=$work/mnt/ext4 mnt[passthrough]=$work/mnt/pt mnt[bindfs]=$work/mnt/bindfs mnt[fuse-overlayfs]=$work/mnt/ovl mnt[intactfs]=$work/mnt/ifs
back[passthrough]=$work/backing/pt back[bindfs]=$work/backing/bindfs back[fuse-overlayfs]=$work/backing/ovl back[intactfs]=$work/backing/host
imgname[ext4]=ext4 imgname[passthrough]=pt imgname[bindfs]=bindfs imgname[fuse-overlayfs]=ovl imgname[intactfs]=host
mnt_ifs=${mnt[intactfs]} back_host=${back[intactfs]}
intact=$PWD/target/release/intact
pt_bin=$PWD/target/release/examples/passthrough

kill_pid() {  # kill_pid PID: TERM, then KILL after 10 s (only processes this script started)
  local p=$1 i
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}
mounted() { grep -q " $1 " /proc/mounts; }
stop_fuse() {  # stop_fuse SYSTEM: unmount a FUSE system, end its daemon
  local s=$1 m=${mnt[$1]}
  if [[ $s == intactfs ]]; then
    if [[ -n ${pid[intactfs]:-} ]] || mounted "$m"; then
      if mounted "$m"; then
        "$intact" fs umount "$m" --timeout 300 >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true
      fi
      kill_pid "${pid[intactfs]:-}"; pid[intactfs]=""
    fi
    return 0
  fi
  if [[ -n ${pid[$s]:-} ]] || mounted "$m"; then
    if mounted "$m"; then umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
    kill_pid "${pid[$s]:-}"
    [[ -n ${pid[$s]:-} ]] && { wait "${pid[$s]}" 2>/dev/null || true; }
    pid[$s]=""
  fi
}
unmount_fuse() {
  local s
  for s in intactfs passthrough bindfs fuse-overlayfs; do stop_fuse "$s"; done
}
unmount_ext4() {  # the ext4 mounts, except the host of the intactfs image unless named
  local m
  for m in "${mnt[ext4]}" "${back[passthrough]}" "${back[bindfs]}" "${back[fuse-overlayfs]}" "$@"; do
    if mounted "$m"; then umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
  done
}
cleanup() {
  set +e
  cd /
  unmount_fuse
  unmount_ext4 "$back_host"
  local s
  for s in "${all_systems[@]}"; do [[ -n ${loop[$s]:-} ]] && losetup -d "${loop[$s]}"; done
  if grep -q " $work/" /proc/mounts; then
    echo "mount.sh: something is still mounted under $work; leaving it" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- the optional systems
# need_pkg SYSTEM COMMAND PACKAGE: COMMAND there, or installed with apt-get; else
# unavail[SYSTEM] says why.
need_pkg() {
  local s=$1 cmd=$2 pkg=$3 log=$work/apt-$3.log
  command -v "$cmd" >/dev/null && return 0
  if ! command -v apt-get >/dev/null; then unavail[$s]="$cmd is missing and there is no apt-get to install Debian's $pkg"; return 1; fi
  echo "mount.sh: $cmd is missing: apt-get install -y $pkg ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends "$pkg" ||
      { apt-get update -q && apt-get install -y -q --no-install-recommends "$pkg"; }; } >"$log" 2>&1 || true
  command -v "$cmd" >/dev/null && return 0
  unavail[$s]="$cmd is missing and \`apt-get install $pkg\` failed ($(grep -E '^E:' "$log" | tail -1 | cut -c1-200 || true))"
  return 1
}
pkg_version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo "?"; }
if has bindfs && need_pkg bindfs bindfs bindfs; then
  v=$(bindfs --version 2>/dev/null | awk '$1 == "bindfs" {print $2; exit}' || true)
  version[bindfs]="bindfs ${v:-?}, Debian package $(pkg_version bindfs), libfuse $(pkg_version libfuse2)"
fi
if has fuse-overlayfs && need_pkg fuse-overlayfs fuse-overlayfs fuse-overlayfs; then
  v=$(fuse-overlayfs --version 2>/dev/null | awk '/^fuse-overlayfs: version/ {print $3; exit}' || true)
  version[fuse-overlayfs]="fuse-overlayfs ${v:-?}, Debian package $(pkg_version fuse-overlayfs), libfuse $(pkg_version libfuse3-3)"
fi
[[ -c /dev/fuse ]] || { echo "mount.sh: /dev/fuse is missing (FUSE)" >&2; exit 1; }
# The systems that run (selected and, so far, available).
active() {
  local s
  for s in "${systems[@]}"; do [[ -z ${unavail[$s]:-} ]] && echo "$s"; done
  return 0
}

# ---------------------------------------------------------------- parameters
reps=${REPS:-3}
if ((quick)); then
  reps=${REPS:-1}; img_mib=1024; dur=3; a_mib=20
  create_files=3000; fs_files=1000; seq_size=128m; rand_size=64m; rand_ops=2000
  sqlite_rows=300; ldb_num=20000; ldb_sync_num=200; tree_limit=600; log_cap=128m
else
  img_mib=4096; dur=20; a_mib=100
  create_files=50000; fs_files=10000; seq_size=1g; rand_size=1g; rand_ops=20000
  sqlite_rows=2000; ldb_num=100000; ldb_sync_num=1000; tree_limit=0; log_cap=512m
fi
timeout_s=$((quick ? 300 : 1200))
personalities=(
  "createfiles --files $create_files --dirwidth 100 --filesize 16k --iosize 1m --threads 16"
  "varmail --files 1000 --dirwidth 1000000 --filesize 16k --appendsize 16k --iosize 1m --threads 16 --prealloc 80 --duration $dur"
  "fileserver --files $fs_files --dirwidth 20 --filesize 128k --appendsize 16k --iosize 1m --threads 50 --prealloc 80 --duration $dur"
  "webserver --files 1000 --dirwidth 20 --filesize 16k --appendsize 16k --iosize 1m --threads 100 --prealloc 100 --duration $dur --log-cap $log_cap"
  "seqwrite --filesize $seq_size --iosize 1m"
  "randwrite --filesize $rand_size --iosize 4k --ops $rand_ops --fsync-every 100"
)

# ---------------------------------------------------------------- build
echo "building (cargo -j 1) ..." >&2
cargo build --release -j 1 -q -p intact-cli
cargo build --release -j 1 -q -p intactfs-fuse --example passthrough
mkdir -p "$work/bin" "$work/mnt" "$work/backing" "$work/home" "${mnt[@]}" "${back[@]}"
gcc -O2 -pthread -o "$work/bin/personalities" bench/fs/personalities.c
g++ -O2 -o "$work/bin/leveldb_fill" bench/fs/leveldb_fill.cc -lleveldb
pers=$work/bin/personalities ldb=$work/bin/leveldb_fill mb="python3 $PWD/bench/fs/mount_bench.py"

# ---------------------------------------------------------------- the git tree
# The PostgreSQL 15 source tree (the release tarball the study caches) if present, else a
# generated tree of the same shape (deterministic).
pg_tar=study/out/build/postgres/src/postgresql-15_15.18.orig.tar.bz2
mkdir "$work/tree"
if [[ -f $pg_tar ]]; then
  tar xjf "$pg_tar" -C "$work/tree" --strip-components=1
  tree_desc="the PostgreSQL 15.18 source tree (\`$pg_tar\`, unpacked)"
else
  python3 - "$work/tree" <<'EOF'
import os, random, sys
root, rng = sys.argv[1], random.Random(1)
words = ["int", "return", "struct", "static", "void", "if", "else", "for", "while", "const", "char", "buffer", "state", "node", "list", "error", "value", "index", "size", "result"]
for i in range(8000):
    d = os.path.join(root, f"d{i % 40:02d}", f"s{i % 400:03d}")
    os.makedirs(d, exist_ok=True)
    n = int(rng.expovariate(1 / 19000)) + 200
    text = []
    while sum(map(len, text)) < n:
        text.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + ";\n")
    open(os.path.join(d, f"f{i:05d}.c"), "w").write("".join(text)[:n])
EOF
  tree_desc="a generated tree (no PostgreSQL tarball at \`$pg_tar\`)"
fi
if ((tree_limit)); then  # --quick: a slice of the tree
  find "$work/tree" -type f | sort | tail -n +$((tree_limit + 1)) | xargs -r rm -f
fi
# Every file goes into the commit: the tree's own .gitignore files would leave some out.
find "$work/tree" -name .gitignore -delete
tree_files=$(find "$work/tree" -type f | wc -l)
tree_mib=$(du -sm --apparent-size "$work/tree" | cut -f1)
tree_desc+=" without its .gitignore files: $tree_files files, $tree_mib MiB"

# ---------------------------------------------------------------- devices
echo "writing the images ($img_mib MiB each) ..." >&2
for s in "${systems[@]}"; do
  [[ -z ${unavail[$s]:-} ]] || continue
  extra=0; [[ $s == intactfs ]] && extra=64  # the host ext4 holds an image of img_mib
  dd if=/dev/zero of="$work/${imgname[$s]}.img" bs=4M count=$((img_mib / 4 + extra)) status=none
  loop[$s]=$(losetup -f --show "$work/${imgname[$s]}.img")
done
mkext4() { mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$1"; }
if has intactfs; then
  mkext4 "${loop[intactfs]}"
  mount "${loop[intactfs]}" "$back_host"
  dd if=/dev/zero of="$back_host/intactfs.img" bs=4M count=$((img_mib / 4)) status=none
  sync
fi

# dev: the loop device that counts a system's writes; dir: where its workloads run;
# syncspec: its final sync (syncfs of ext4 or of a FUSE system's backing ext4, STREAMSYNC).
declare -A dev=() dir=() syncspec=()
for s in "${systems[@]}"; do
  [[ -n ${loop[$s]:-} ]] && dev[$s]=$(basename "${loop[$s]}")
  dir[$s]=${mnt[$s]}
  case $s in
    ext4) syncspec[$s]="syncfs:${mnt[ext4]}" ;;
    intactfs) syncspec[$s]="streamsync:$mnt_ifs" ;;
    *) syncspec[$s]="syncfs:${back[$s]}" ;;
  esac
done

wait_mount() {  # wait_mount MNT PID
  local i
  for ((i = 0; i < 200; i++)); do
    mounted "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "mount.sh: the daemon for $1 exited" >&2; return 1; }
    sleep 0.05
  done
  echo "mount.sh: $1 did not appear" >&2; return 1
}
# smoke_test SYSTEM: the calls the workloads make work on the mount (create, write, fsync,
# rename, hard link, symlink, xattr, unlink, mkdir, rmdir, a directory made again where one
# was removed, rm -rf of a tree) and syncfs of the backing ext4; prints what failed.
smoke_test() {
  python3 - "${mnt[$1]}/smoke" "${syncspec[$1]#syncfs:}" <<'EOF'
import ctypes, os, shutil, sys
d, backing = sys.argv[1], sys.argv[2]
os.mkdir(d)
p = os.path.join(d, "a")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"x" * 200000, 0)
os.fsync(fd)
os.fdatasync(fd)
os.setxattr(p, "user.bench", b"1")
assert os.getxattr(p, "user.bench") == b"1"
os.close(fd)
os.rename(p, p + "2")
os.link(p + "2", p + "3")
os.symlink("a2", p + "4")
assert open(p + "4", "rb").read() == b"x" * 200000
for n in ("2", "3", "4"):
    os.unlink(p + n)
os.makedirs(os.path.join(d, "t", "u"))
os.rmdir(os.path.join(d, "t", "u"))
os.mkdir(os.path.join(d, "t", "u"))
open(os.path.join(d, "t", "u", "f"), "w").write("f")
shutil.rmtree(d)
assert not os.path.exists(d)
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(backing, os.O_RDONLY)
assert libc.syncfs(fd) == 0, os.strerror(ctypes.get_errno())
os.close(fd)
EOF
}
log_tail() {  # log_tail FILE N: the last N lines of a daemon's log on one line (never fails)
  { grep -v 'unknown argument ignored' "$1" 2>/dev/null || true; } | tail -"$2" | tr '\n' ' ' | cut -c1-300
}
# start_optional SYSTEM: mount bindfs or fuse-overlayfs over its fresh backing ext4; if the
# mount or the smoke test fails, the system is left out from here on (unavail says why).
start_optional() {
  local s=$1 log=$work/$1.log err
  case $s in
    bindfs)
      mkdir "${back[$s]}/data"
      bindfs -f "${bindfs_opts[@]}" "${back[$s]}/data" "${mnt[$s]}" >>"$log" 2>&1 &
      ;;
    fuse-overlayfs)
      mkdir "${back[$s]}/lower" "${back[$s]}/upper" "${back[$s]}/work"
      fuse-overlayfs -f -o "lowerdir=${back[$s]}/lower,upperdir=${back[$s]}/upper,workdir=${back[$s]}/work,$ovl_opts" "${mnt[$s]}" >>"$log" 2>&1 &
      ;;
  esac
  pid[$s]=$!
  if ! wait_mount "${mnt[$s]}" "${pid[$s]}" 2>/dev/null; then
    if kill -0 "${pid[$s]}" 2>/dev/null; then
      unavail[$s]="mounting failed: the mount did not appear within 10 s"
    else
      unavail[$s]="mounting failed: $s exited: $(log_tail "$log" 3)"
    fi
  elif ! err=$(smoke_test "$s" 2>&1); then
    unavail[$s]="mounted, but a smoke test of the calls the workloads make failed: $(tail -3 <<<"$err" | tr '\n' ' ' | cut -c1-300 || true)"
  else
    return 0
  fi
  echo "mount.sh: $s left out: ${unavail[$s]}" >&2
  stop_fuse "$s"
}
fresh() {  # new ext4 file systems, backing ext4s and intactfs; every active system mounted
  local s
  unmount_fuse
  unmount_ext4
  for s in $(active); do
    case $s in
      ext4) mkext4 "${loop[ext4]}"; mount "${loop[ext4]}" "${mnt[ext4]}" ;;
      intactfs) "$intact" fs mkfs "$back_host/intactfs.img" --force >/dev/null ;;
      *) mkext4 "${loop[$s]}"; mount "${loop[$s]}" "${back[$s]}" ;;
    esac
  done
  sync
  for s in $(active); do
    case $s in
      passthrough)
        mkdir "${back[passthrough]}/data"
        "$pt_bin" "${back[passthrough]}/data" "${mnt[passthrough]}" 2>>"$work/passthrough.log" &
        pid[passthrough]=$!
        wait_mount "${mnt[passthrough]}" "${pid[passthrough]}"
        ;;
      bindfs | fuse-overlayfs) start_optional "$s" ;;
      intactfs)
        "$intact" fs mount "$back_host/intactfs.img" "$mnt_ifs" --daemon --pid-file "$work/ifs.pid" --log "$work/intactfs.log" >/dev/null
        pid[intactfs]=$(cat "$work/ifs.pid")
        wait_mount "$mnt_ifs" "${pid[intactfs]}"
        ;;
    esac
  done
}

# ---------------------------------------------------------------- running one workload
results=$work/results.jsonl
: >"$results"
stat_of() { awk '{printf "%.0f %.0f\n", $7 * 512, ($16 == "" ? 0 : $16)}' "/sys/block/$1/stat"; }
cpu_of() { [[ -n ${1:-} && -r /proc/$1/stat ]] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
sys_sync() {  # make everything on system $1 durable
  if [[ $1 == intactfs ]]; then timeout 300 $mb sync --intactfs "$mnt_ifs"; else timeout 300 $mb sync "${syncspec[$1]#syncfs:}"; fi
}
failures=0
record_failure() {  # record_failure SYSTEM NAME REP RC ERROR
  failures=$((failures + 1))
  jq -nc --arg sys "$1" --arg name "$2" --argjson rep "$3" --argjson rc "$4" --arg err "$5" \
    '{system: $sys, name: $name, rep: $rep, failed: true, rc: $rc, error: $err}' >>"$results"
  echo "  $2 on $1: FAILED (exit $4): $(tail -c 300 <<<"$5")" >&2
}
# run SYSTEM NAME REP CMD...: CMD prints one JSON line; @D@ in CMD is the work directory.
run() {
  local sys=$1 name=$2 rep=$3; shift 3
  local d=${dir[$sys]}/w args=() a out err=$work/err.txt rc=0
  [[ -z ${unavail[$sys]:-} ]] || return 0
  # An optional system whose daemon has gone is left out from here on.
  if [[ $optional == *" $sys "* ]] && { ! kill -0 "${pid[$sys]:-0}" 2>/dev/null || ! mounted "${dir[$sys]}"; }; then
    local lt; lt=$(log_tail "$work/$sys.log" 2)
    unavail[$sys]="its daemon exited during repetition $rep, before $name${lt:+ (its log: $lt)}"
    echo "mount.sh: $sys left out: ${unavail[$sys]}" >&2
    stop_fuse "$sys"
    return 0
  fi
  for a in "$@"; do args+=("${a//@D@/$d}"); done
  if ! mkdir "$d" 2>"$err"; then
    record_failure "$sys" "$name" "$rep" 1 "mkdir $d: $(cat "$err")"
    return 0
  fi
  sys_sync "$sys" || echo "mount.sh: syncing $sys failed" >&2
  local p=${pid[$sys]:-}
  read -r b0 f0 < <(stat_of "${dev[$sys]}")
  local c0; c0=$(cpu_of "$p")
  local t0; t0=$(date +%s.%N)
  out=$(cd "$d" && HOME=$work/home timeout --kill-after=10 "$timeout_s" "${args[@]}" 2>"$err") || rc=$?
  local t1; t1=$(date +%s.%N)
  local c1; c1=$(cpu_of "$p")
  read -r b1 f1 < <(stat_of "${dev[$sys]}")
  if ((rc == 0)) && jq -e . >/dev/null 2>&1 <<<"$out"; then
    jq -c --arg sys "$sys" --arg name "$name" --argjson rep "$rep" --argjson b $((b1 - b0)) --argjson f $((f1 - f0)) \
      --argjson cpu "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print (b - a) / 100}')" --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
      '. + {system: $sys, name: $name, rep: $rep, dev_bytes: $b, dev_flushes: $f, daemon_cpu_s: $cpu, wall_s: $wall}' <<<"$out" >>"$results"
    echo "  $name on $sys: ok ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s)" >&2
  else
    record_failure "$sys" "$name" "$rep" "$rc" "$(tail -c 1500 "$err")$(tail -c 500 <<<"$out")"
  fi
  # Remove the work directory (not timed) and make the removal durable.
  if mounted "${dir[$sys]}"; then
    timeout 600 rm -rf "$d" 2>"$err" || echo "mount.sh: removing $d failed: $(head -1 "$err")" >&2
    sys_sync "$sys" || echo "mount.sh: syncing $sys failed" >&2
  fi
}

git_bench() {  # git_bench MODE: copies the tree in, then git init + add -A + commit
  local mode=$1 sync cfg
  case $mode in
    default) cfg="" ;;
    committed) cfg="-c core.fsync=committed -c core.fsyncMethod=fsync" ;;
  esac
  cat <<EOF
set -e
now() { date +%s.%N; }
t0=\$(now); cp -a "$work/tree" tree; t1=\$(now)
$( [[ $SYS == intactfs ]] && echo "$mb sync --intactfs $mnt_ifs" || echo "$mb sync ${syncspec[$SYS]#syncfs:}" ); t2=\$(now)
git -C tree init -q
t3=\$(now); git -C tree -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid $cfg add -A; t4=\$(now)
git -C tree -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid $cfg commit -q -m bench; t5=\$(now)
$( [[ $SYS == intactfs ]] && echo "$mb sync --intactfs $mnt_ifs" || echo "$mb sync ${syncspec[$SYS]#syncfs:}" ); t6=\$(now)
files=\$(git -C tree ls-files | wc -l)
git -C tree fsck --no-progress --no-dangling >&2
[ "\$files" -eq $tree_files ] || { echo "git: \$files files in the commit, want $tree_files" >&2; exit 1; }
d() { awk -v a="\$1" -v b="\$2" 'BEGIN {printf "%.6f", b - a}'; }
echo "{\"bench\": \"git\", \"mode\": \"$mode\", \"files\": \$files, \"copy_s\": \$(d \$t0 \$t1), \"copy_sync_s\": \$(d \$t1 \$t2), \"add_s\": \$(d \$t3 \$t4), \"commit_s\": \$(d \$t4 \$t5), \"git_sync_s\": \$(d \$t5 \$t6)}"
EOF
}

rotate() {  # rotate REP ITEMS...: the items, starting at index REP mod count
  local r=$1; shift
  local n=$# i
  local items=("$@")
  for ((i = 0; i < n; i++)); do echo "${items[$(((i + r) % n))]}"; done
}

for ((r = 1; r <= reps; r++)); do
  echo "repetition $r/$reps: fresh file systems" >&2
  fresh
  mapfile -t order < <(rotate "$r" $(active))
  ((${#order[@]})) || { echo "mount.sh: no system left to run" >&2; exit 1; }

  # Table 5.3 through the mount: each system; intactfs with one stream and with two streams.
  cfgs=()
  for s in "${order[@]}"; do
    if [[ $s == intactfs ]]; then cfgs+=(intactfs-1 intactfs-2); else cfgs+=("$s"); fi
  done
  for v in append truncate overwrite; do
    for cfg in $(rotate "$r" "${cfgs[@]}"); do
      case $cfg in
        intactfs-*) run intactfs "table53-$v-${cfg#intactfs-}" "$r" $mb table53 --dir @D@ --variant "$v" --a-mib "$a_mib" --streams "${cfg#intactfs-}" --intactfs --blockdev "${dev[intactfs]}" --sync-path "$mnt_ifs" --system "$cfg" ;;
        *) run "$cfg" "table53-$v" "$r" $mb table53 --dir @D@ --variant "$v" --a-mib "$a_mib" --blockdev "${dev[$cfg]:-}" --sync-path "${syncspec[$cfg]#syncfs:}" --system "$cfg" ;;
      esac
    done
  done

  # Filebench-style personalities.
  for p in "${personalities[@]}"; do
    read -ra pa <<<"$p"
    for s in "${order[@]}"; do
      run "$s" "${pa[0]}" "$r" "$pers" "${pa[0]}" @D@ "${pa[@]:1}" --seed "$r" --sync "${syncspec[$s]}" --label "$s" --blockdev "${dev[$s]:-}"
    done
  done

  # git add + commit of a large tree (git's default fsync settings, and core.fsync=committed).
  for mode in default committed; do
    for s in "${order[@]}"; do
      SYS=$s
      run "$s" "git-$mode" "$r" bash -c "$(git_bench "$mode")"
    done
  done

  # SQLite: inserts, each its own transaction.
  for s in "${order[@]}"; do
    if [[ $s == intactfs ]]; then
      for m in default streamsync-commit streamsync-end; do
        run intactfs "sqlite-$m" "$r" $mb sqlite --dir @D@ --rows "$sqlite_rows" --row-bytes 120 --mode "$m" --intactfs --blockdev "${dev[intactfs]}" --sync-path "$mnt_ifs" --system intactfs
      done
    else
      run "$s" sqlite-default "$r" $mb sqlite --dir @D@ --rows "$sqlite_rows" --row-bytes 120 --blockdev "${dev[$s]:-}" --sync-path "${syncspec[$s]#syncfs:}" --system "$s"
    fi
  done

  # LevelDB fillrandom (sync off) and fillsync (sync on).
  for s in "${order[@]}"; do
    run "$s" leveldb-fillrandom "$r" "$ldb" @D@ --num "$ldb_num" --value-size 100 --final-sync "${syncspec[$s]}"
    run "$s" leveldb-fillsync "$r" "$ldb" @D@ --num "$ldb_sync_num" --value-size 100 --sync --final-sync "${syncspec[$s]}"
    if [[ $s == intactfs ]]; then
      run intactfs leveldb-fillsync-streamsync "$r" "$ldb" @D@ --num "$ldb_sync_num" --value-size 100 --sync --stream leveldb --ignore-fsync --streamsync-each --final-sync "${syncspec[$s]}"
    fi
  done
done

# The intactfs daemon's own totals for the last repetition (printed when it unmounts).
unmount_fuse
ifs_totals=$(grep -hs "unmounted and written back" "$work/intactfs.log" | tail -1 || true)

elapsed=$(($(date +%s) - started))
pressure="CPU $(( ($(psi cpu) - psi_cpu0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%, I/O $(( ($(psi io) - psi_io0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%"
cmd="bash bench/fs/mount.sh"
if ((quick)); then cmd+=" --quick"; fi
if [[ -n ${SYSTEMS:-} ]]; then cmd="SYSTEMS=\"$SYSTEMS\" $cmd"; fi
if [[ -n ${REPS:-} ]]; then cmd="REPS=$REPS $cmd"; fi
# Per system: version, options and, for one left out, why (the report's set-up and rows).
sysinfo=$(for s in "${systems[@]}"; do
  jq -nc --arg s "$s" --arg v "${version[$s]:-}" --arg o "${options[$s]:-}" --arg u "${unavail[$s]:-}" '{($s): {version: $v, options: $o, unavailable: $u}}'
done | jq -sc 'add')
# The commit as the report states it (report.py's machine()), kept in the saved arguments.
rev=$(cd bench/fs && python3 -c 'import report; print(report.machine()["commit"])')
report_args=(
  --command "$cmd" --reps "$reps" --elapsed "$elapsed" --image-mib "$img_mib" --pressure "$pressure"
  --load-start "$load0" --load-end "$(cut -d' ' -f1-3 /proc/loadavg)" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --others "$others" --tree "$tree_desc" --failures "$failures" --intactfs-totals "$ifs_totals"
  --params "$(printf '%s\n' "${personalities[@]}")" --a-mib "$a_mib" --sqlite-rows "$sqlite_rows"
  --ldb-num "$ldb_num" --ldb-sync-num "$ldb_sync_num" --duration "$dur" --commit "$rev"
  --systems "${systems[*]}" --system-info "$sysinfo"
)
if [[ -n ${RESULTS:-} ]]; then
  # Keep the raw results and the report's arguments: the report can be regenerated from them
  # (python3 bench/fs/mount_report.py RESULTS docs/benchmarks.md $(cat RESULTS.args), via eval).
  cp "$results" "$RESULTS"
  printf '%q ' "${report_args[@]}" > "$RESULTS.args"
fi
python3 bench/fs/mount_report.py "$results" "$docs" "${report_args[@]}"
