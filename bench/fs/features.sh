#!/bin/bash
# What FUSE capabilities save on the intactfs mount (issue 17 item 3), each measured on
# vs off side by side in one run, REPS rounds alternating (default 5), medians:
#   READDIRPLUS  `ls -l` and `find -size` of a directory of 10,000 files, kernel caches
#                dropped first (-o noreaddirplus: plain readdir, one LOOKUP per entry)
#   KILLPRIV_V2  20,000 writes of 4 KiB with dd (-o nokillpriv: the kernel asks for
#                security.capability before every write)
#   NOFLUSH      4 processes each opening, reading and closing 5,000 times one of 1,000
#                cached 16 KiB files read-only, as a web server does (-o flushall: every
#                close waits for a FUSE_FLUSH)
#   io_uring     FUSE over io_uring (-o uring) vs the default /dev/fuse transport: the
#                workloads above, plus create+stat+unlink of 5,000 small files and 20,000
#                random 4 KiB O_DIRECT reads of a 64 MiB file (so each read is a request;
#                the daemon has the data in memory). The kernel's
#                /sys/module/fuse/parameters/enable_uring is set to Y for the run and put
#                back on exit; without it (a kernel before 6.14) these rows are left out.
# Usage (as root, from the repository root): [REPS=5] bash bench/fs/features.sh
# It builds target/release/intact if needed (with the `uring` feature, which -o uring
# needs); prints a Markdown table. Leaves nothing behind.
set -euo pipefail
me=bench/fs/features.sh
reps=${REPS:-5}
[ "$(id -u)" = 0 ] || { echo "$me: run as root (it mounts and drops the kernel's caches)" >&2; exit 2; }
[ -f Cargo.toml ] && [ -d crates/intactfs ] || { echo "$me: run from the repository root" >&2; exit 2; }
command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null
cargo build --release -q -p intact-cli --features uring
B=$PWD/target/release/intact
W=$(mktemp -d /var/tmp/intact-features.XXXXXX)
uring_param=/sys/module/fuse/parameters/enable_uring uring_was=""
cleanup() {
  for m in "$W"/m-*; do
    if mountpoint -q "$m" 2>/dev/null; then "$B" fs umount "$m" >/dev/null || umount -l "$m"; fi
  done
  rm -rf "$W"
  if [ -n "$uring_was" ]; then echo "$uring_was" > "$uring_param"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mountfs() {  # mountfs NAME OPTIONS...
  "$B" fs mkfs "$W/$1.img" --size 2G >/dev/null
  mkdir "$W/m-$1"
  "$B" fs mount "$W/$1.img" "$W/m-$1" --daemon "${@:2}" >/dev/null
}
mountfs on
mountfs noplus -o noreaddirplus
mountfs nokill -o nokillpriv
mountfs flushall -o flushall
rings=()
if [ -w "$uring_param" ]; then
  uring_was=$(cat "$uring_param")
  echo Y > "$uring_param"
  mountfs ring -o uring
  rings=(ring)
else
  echo "$me: $uring_param missing: no io_uring rows" >&2
fi
for v in on noplus "${rings[@]}"; do
  mkdir "$W/m-$v/d"
  (cd "$W/m-$v/d" && seq 1 10000 | xargs -n 500 touch)
done
dd if=/dev/urandom of="$W/m-on/r" bs=1M count=64 status=none
for v in on flushall; do
  mkdir "$W/m-$v/web"
  for i in $(seq 0 999); do head -c 16384 "$W/m-on/r" > "$W/m-$v/web/f$i"; done
done
for v in "${rings[@]}"; do cp "$W/m-on/r" "$W/m-$v/r"; done
sync

# create (100 bytes), stat, unlink 5,000 files: one CREATE, WRITE, FLUSH, RELEASE, GETATTR
# (or none: attributes are cached), UNLINK... each a round trip.
meta() {
  python3 - "$1" <<'PY'
import os, sys
d = os.path.join(sys.argv[1], "meta")
os.mkdir(d)
names = [os.path.join(d, f"f{i}") for i in range(5000)]
for n in names:
    with open(n, "wb") as f:
        f.write(b"x" * 100)
for n in names:
    os.stat(n)
for n in names:
    os.unlink(n)
os.rmdir(d)
PY
}
# 20,000 random aligned 4 KiB reads with O_DIRECT: each one a READ request.
randread() {
  python3 - "$1" <<'PY'
import mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
n = os.fstat(fd).st_size // 4096
rnd = random.Random(1)
for _ in range(20000):
    os.preadv(fd, [buf], rnd.randrange(n) * 4096)
PY
}

# 4 processes, each 5,000 x (open read-only, read 16 KiB, close) of random files of DIR/web.
openread() {
  python3 - "$1" <<'PY'
import os, random, sys
d = os.path.join(sys.argv[1], "web")
kids = []
for k in range(4):
    pid = os.fork()
    if pid == 0:
        rnd = random.Random(k)
        for _ in range(5000):
            fd = os.open(os.path.join(d, "f%d" % rnd.randrange(1000)), os.O_RDONLY)
            os.read(fd, 16384)
            os.close(fd)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    _, st = os.waitpid(pid, 0)
    assert st == 0, "a reader failed"
PY
}

t() { local a b; a=$(date +%s.%N); "$@" >/dev/null; b=$(date +%s.%N); echo "$b - $a" | bc; }
declare -A r=()
for ((i = 0; i < reps; i++)); do
  for v in on noplus "${rings[@]}"; do
    echo 3 > /proc/sys/vm/drop_caches
    r[ls-$v]+=" $(t ls -l "$W/m-$v/d")"
    echo 3 > /proc/sys/vm/drop_caches
    r[find-$v]+=" $(t find "$W/m-$v/d" -size +1)"
  done
  for v in on nokill "${rings[@]}"; do
    r[dd-$v]+=" $(t dd if=/dev/zero of="$W/m-$v/f" bs=4096 count=20000 conv=notrunc status=none)"
  done
  for v in on flushall; do
    r[web-$v]+=" $(t openread "$W/m-$v")"
  done
  for v in on "${rings[@]}"; do
    r[meta-$v]+=" $(t meta "$W/m-$v")"
    r[rand-$v]+=" $(t randread "$W/m-$v/r")"
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
row() {  # row WHAT KEY-ON KEY-OFF
  local on off
  on=$(med "${r[$2]}") off=$(med "${r[$3]}")
  printf '| %s | %.3f | %.3f | %.2f× |\n' "$1" "$on" "$off" "$(echo "$off / $on" | bc -l)"
}
echo "| workload (seconds, median of $reps) | capability on | off | saved (off ÷ on) |"
echo "|---|---:|---:|---:|"
row "ls -l of 10,000 files (READDIRPLUS)" ls-on ls-noplus
row "find -size of 10,000 files (READDIRPLUS)" find-on find-noplus
row "20,000 writes of 4 KiB (HANDLE_KILLPRIV_V2)" dd-on dd-nokill
row "4 x 5,000 open+read+close of cached 16 KiB files (NOFLUSH)" web-on web-flushall
if [ ${#rings[@]} -gt 0 ]; then
  # Here "on" is -o uring and "off" the default mount (/dev/fuse).
  row "ls -l of 10,000 files (io_uring)" ls-ring ls-on
  row "find -size of 10,000 files (io_uring)" find-ring find-on
  row "20,000 writes of 4 KiB (io_uring)" dd-ring dd-on
  row "create+stat+unlink of 5,000 files (io_uring)" meta-ring meta-on
  row "20,000 random 4 KiB O_DIRECT reads (io_uring)" rand-ring rand-on
fi
