#!/usr/bin/env bash
# A/B of the webserver personality (bench/fs/personalities.c, mount.sh's parameters) on the
# passthrough FUSE file system and one or more intactfs mounts, alternating in one run, with
# each daemon's CPU time per op. For one personality where mount.sh (all workloads, ~7 min
# per repetition) is too coarse: e.g. intactfs with and without a mount option.
#
#   [REPS=6] [DUR=10] [THREADS=100] [AGE=1] bash bench/fs/webserver_ab.sh NAME=[BINARY][@OPTIONS] ...
#   e.g. bash bench/fs/webserver_ab.sh default= flushall=@-o,flushall      (as root)
#
# BINARY defaults to target/release/intact; OPTIONS are `intact fs mount` arguments with
# commas for spaces. The passthrough (crates/intactfs-fuse/examples/passthrough.rs) runs over
# a directory of an ext4 on its own loop device; the intactfs images lie in a second ext4
# (both 4 GiB, in a fresh /var/tmp/intact-ab.* directory). Every round runs each system once,
# in rotated order, in a fresh directory removed afterwards. Prints one JSON line per run
# (ops/s, ops/s including the final sync, daemon CPU µs per op) and the medians with each
# system's ratio to the passthrough. Mounts, daemons, loop devices and files are removed
# on exit, even on failure. AGE=1 first runs, on every system, 50,000 creates (then removed)
# and 20 s of fileserver (then removed), as mount.sh's earlier workloads leave its mounts.
set -euo pipefail
cd "$(dirname "$0")/../.."
(($#)) || { echo "usage: [REPS=6] [DUR=10] [THREADS=100] bash bench/fs/webserver_ab.sh NAME=[BINARY][@OPTIONS] ..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "webserver_ab.sh: run as root (loop devices, mounts)" >&2; exit 2; }
reps=${REPS:-6} dur=${DUR:-10} threads=${THREADS:-100}
for nb in "$@"; do [[ $nb == *=* && ${nb%%=*} =~ ^[a-z0-9_-]+$ && ${nb%%=*} != passthrough ]] || { echo "webserver_ab.sh: $nb: expected NAME=[BINARY][@OPTIONS] (NAME: a-z0-9_-, not passthrough)" >&2; exit 2; }; done
cargo build --release -j 1 -q -p intact-cli
cargo build --release -j 1 -q -p intactfs-fuse --example passthrough
w=$(mktemp -d /var/tmp/intact-ab.XXXXXX)
declare -A pid=()
cleanup() {
  local m l
  for m in "$w"/mnt/*; do mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }; done
  for l in "${pid[@]}"; do kill "$l" 2>/dev/null || true; done
  sleep 1
  for m in "$w/pt" "$w/host"; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  for l in $(losetup -j "$w/pt.img" -O NAME -n) $(losetup -j "$w/host.img" -O NAME -n); do losetup -d "$l"; done
  rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
gcc -O2 -pthread -o "$w/pers" bench/fs/personalities.c
mkdir -p "$w/pt" "$w/host" "$w/mnt/passthrough"
for i in pt host; do dd if=/dev/zero of="$w/$i.img" bs=4M count=1024 status=none; done
lp=$(losetup -f --show "$w/pt.img")
lh=$(losetup -f --show "$w/host.img")
for l in $lp $lh; do mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$l"; done
mount "$lp" "$w/pt"
mount "$lh" "$w/host"
mkdir "$w/pt/data"
target/release/examples/passthrough "$w/pt/data" "$w/mnt/passthrough" 2>"$w/pt.log" &
pid[passthrough]=$!
names=(passthrough)
img_mib=$((3500 / $#))
for nb in "$@"; do
  n=${nb%%=*} b=${nb#*=} mo=""
  if [[ $b == *@* ]]; then mo=${b#*@}; b=${b%%@*}; fi
  b=${b:-target/release/intact}
  dd if=/dev/zero of="$w/host/$n.img" bs=1M count=$img_mib status=none
  "$b" fs mkfs "$w/host/$n.img" --force >/dev/null
  mkdir "$w/mnt/$n"
  # shellcheck disable=SC2086
  "$b" fs mount "$w/host/$n.img" "$w/mnt/$n" --daemon --pid-file "$w/$n.pid" --log "$w/$n.log" ${mo//,/ } >/dev/null
  pid[$n]=$(cat "$w/$n.pid")
  names+=("$n")
done
sleep 1
for n in "${names[@]}"; do mountpoint -q "$w/mnt/$n" || { echo "webserver_ab.sh: $n did not mount (log: $w/$n.log)" >&2; exit 1; }; done
sync
if [[ -n ${AGE:-} ]]; then
  # Age every system first as mount.sh's earlier workloads do: 50,000 files created and
  # removed, then 20 s of fileserver (10,000 files of 128 KiB), removed.
  for n in "${names[@]}"; do
    if [[ $n == passthrough ]]; then sp="syncfs:$w/pt"; else sp="streamsync:$w/mnt/$n"; fi
    mkdir "$w/mnt/$n/age"
    "$w/pers" createfiles "$w/mnt/$n/age" --files 50000 --dirwidth 100 --filesize 16k --iosize 1m --threads 16 --sync "$sp" >/dev/null
    rm -rf "$w/mnt/$n/age"
    mkdir "$w/mnt/$n/age"
    "$w/pers" fileserver "$w/mnt/$n/age" --files 10000 --dirwidth 20 --filesize 128k --appendsize 16k --iosize 1m --threads 50 --prealloc 80 --duration 20 --sync "$sp" >/dev/null
    rm -rf "$w/mnt/$n/age"
    echo "aged $n" >&2
  done
  sync
fi
: >"$w/results"
for ((r = 0; r < reps; r++)); do
  k=${#names[@]}
  for ((i = 0; i < k; i++)); do
    n=${names[$(((i + r) % k))]}
    d=$w/mnt/$n/w
    mkdir "$d"
    if [[ $n == passthrough ]]; then sp="syncfs:$w/pt"; else sp="streamsync:$w/mnt/$n"; fi
    c0=$(awk '{print $14 + $15}' "/proc/${pid[$n]}/stat")
    out=$("$w/pers" webserver "$d" --files 1000 --dirwidth 20 --filesize 16k --appendsize 16k --iosize 1m --threads "$threads" --prealloc 100 --duration "$dur" --log-cap 512m --seed $((r + 1)) --sync "$sp" --label "$n")
    c1=$(awk '{print $14 + $15}' "/proc/${pid[$n]}/stat")
    jq -c --arg n "$n" --argjson r "$r" --argjson c $((c1 - c0)) '{system: $n, round: $r, ops_s: .ops_per_s, ops_s_synced: .ops_per_s_synced, daemon_us_per_op: ($c * 10000 / .ops)}' <<<"$out" | tee -a "$w/results"
    rm -rf "$d"
    sync
  done
done
echo "medians over $reps rounds of ${dur} s, $threads threads (ops/s including the final sync):"
jq -rs 'def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  (map(select(.system == "passthrough").ops_s_synced) | med) as $pt
  | group_by(.system)[] | {s: .[0].system, o: (map(.ops_s_synced) | med), c: (map(.daemon_us_per_op) | med)}
  | "\(.s): \(.o | floor) ops/s, \(.o / $pt * 100 | floor / 100)x the passthrough, daemon \(.c * 10 | floor / 10) us/op"' "$w/results"
