#!/bin/bash
# What two FUSE capabilities save on the intactfs mount (issue 17 item 3), each measured on
# vs off side by side in one run, REPS rounds alternating (default 5), medians:
#   READDIRPLUS  `ls -l` and `find -size` of a directory of 10,000 files, kernel caches
#                dropped first (-o noreaddirplus: plain readdir, one LOOKUP per entry)
#   KILLPRIV_V2  20,000 writes of 4 KiB with dd (-o nokillpriv: the kernel asks for
#                security.capability before every write)
# Usage (as root, from the repository root): [REPS=5] bash bench/fs/features.sh
# It builds target/release/intact if needed; prints a Markdown table. Leaves nothing behind.
set -euo pipefail
me=bench/fs/features.sh
reps=${REPS:-5}
[ "$(id -u)" = 0 ] || { echo "$me: run as root (it mounts and drops the kernel's caches)" >&2; exit 2; }
[ -f Cargo.toml ] && [ -d crates/intactfs ] || { echo "$me: run from the repository root" >&2; exit 2; }
command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null
cargo build --release -q -p intact-cli
B=$PWD/target/release/intact
W=$(mktemp -d /var/tmp/intact-features.XXXXXX)
cleanup() {
  for m in "$W"/m-*; do
    if mountpoint -q "$m" 2>/dev/null; then "$B" fs umount "$m" >/dev/null || umount -l "$m"; fi
  done
  rm -rf "$W"
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
for v in on noplus; do
  mkdir "$W/m-$v/d"
  (cd "$W/m-$v/d" && seq 1 10000 | xargs -n 500 touch)
done
sync

t() { local a b; a=$(date +%s.%N); "$@" >/dev/null; b=$(date +%s.%N); echo "$b - $a" | bc; }
declare -A r=()
for ((i = 0; i < reps; i++)); do
  for v in on noplus; do
    echo 3 > /proc/sys/vm/drop_caches
    r[ls-$v]+=" $(t ls -l "$W/m-$v/d")"
    echo 3 > /proc/sys/vm/drop_caches
    r[find-$v]+=" $(t find "$W/m-$v/d" -size +1)"
  done
  for v in on nokill; do
    r[dd-$v]+=" $(t dd if=/dev/zero of="$W/m-$v/f" bs=4096 count=20000 conv=notrunc status=none)"
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
