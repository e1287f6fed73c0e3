#!/usr/bin/env bash
# Benchmarks of the intactfs engine alone (no FUSE), with the kernel's ext4 doing the same
# operations in the same run as the baseline; writes docs/benchmarks.md.
#
#   [REPS=3] bash bench/fs/engine.sh [--quick]      (as root: losetup, mkfs.ext4, mount)
#
# One program, crates/intactfs/examples/engine_bench.rs, runs every workload on three
# systems, all on 1 GiB devices backed by files in a fresh /var/tmp directory (root disk),
# written full of zeros first so that no block write allocates in the root file system:
#   engine       the engine on a FileDevice over engine.img (flush = fdatasync of the file);
#   engine-loop  the engine on a FileDevice over /dev/loopN (the loop device ext4 uses):
#                the same lower stack as ext4, to separate "engine vs ext4" from "file vs loop"
#                (and to check the engine's byte counts against the loop device's own);
#   ext4         --backend ext4: the same calls as system calls on a fresh ext4 (mkfs.ext4 -b
#                4096, nodiscard, inode tables and journal zeroed at mkfs so no lazy-init
#                thread writes during runs; default mount options) on /dev/loopN (buffered)
#                over ext4.img. Bytes written: /sys/block/loopN/stat deltas.
# Every configuration runs $reps times, the systems alternating; each metric's median is
# reported. Mount, loop device and images are removed on exit, even on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bash bench/fs/engine.sh [--quick]" >&2; exit 2 ;;
esac
[[ $(id -u) == 0 ]] || { echo "engine.sh: needs root (losetup, mkfs.ext4, mount)" >&2; exit 1; }

started=$(date +%s)
# CPU and I/O pressure (PSI "some" stall time, µs) over the run: how busy the shared machine was.
psi() { awk '/^some/ {sub("total=", "", $5); print $5}' "/proc/pressure/$1" 2>/dev/null || echo 0; }
psi_cpu0=$(psi cpu); psi_io0=$(psi io)
cargo build --release -j 1 -q -p intactfs --example engine_bench
bin=$PWD/target/release/examples/engine_bench

work=$(mktemp -d /var/tmp/intactfs-bench.XXXXXX)
mnt=$work/mnt
loop=""
cleanup() {
  set +e
  if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
  [[ -n $loop ]] && losetup -d "$loop"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir "$mnt"

if ((quick)); then
  reps=${REPS:-3}; create_files=2000; create_dirs=20; fsync_files=500; append_n=300; ow_mib=16; ow_n=300; a_mib=20
else
  reps=${REPS:-3}; create_files=10000; create_dirs=100; fsync_files=10000; append_n=2000; ow_mib=64; ow_n=2000; a_mib=100
fi
device_mib=1024

for img in engine ext4; do
  dd if=/dev/zero of="$work/$img.img" bs=4M count=$((device_mib / 4)) status=none
done
sync
loop=$(losetup -f --show "$work/ext4.img")
dev=$(basename "$loop")
results=$work/results.jsonl
: >"$results"

fresh_ext4() {
  if mountpoint -q "$mnt"; then umount "$mnt"; fi
  mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$loop"
  mount "$loop" "$mnt"
  sync
}

run_engine() {
  sync
  "$bin" --backend engine --device-file "$work/engine.img" --label engine "$@" >>"$results"
  sync
  "$bin" --backend engine --device-file "$loop" --blockdev "$dev" --label engine-loop "$@" >>"$results"
}

run_ext4() {
  fresh_ext4
  "$bin" --backend ext4 --dir "$mnt" --blockdev "$dev" --unmount-at-end --label ext4 "$@" >>"$results"
  if mountpoint -q "$mnt"; then umount "$mnt"; fi
}

workloads=(
  "create --files $create_files --dirs $create_dirs --size 4096"
  "create --files $fsync_files --dirs $create_dirs --size 4096 --fsync-each"
  "append --n $append_n --size 4096"
  "overwrite --file-mib $ow_mib --n $ow_n --size 4096 --seed 1"
)
for v in append truncate overwrite; do
  workloads+=("table53 --variant $v --a-mib $a_mib")
done

for ((r = 1; r <= reps; r++)); do
  echo "run $r/$reps" >&2
  for w in "${workloads[@]}"; do
    read -ra args <<<"$w"
    if [[ ${args[0]} == table53 ]]; then
      run_engine "${args[@]}" --streams 1
      run_engine "${args[@]}" --streams 2
    else
      run_engine "${args[@]}"
    fi
    run_ext4 "${args[@]}"
  done
done

elapsed=$(($(date +%s) - started))
pressure="CPU $(( ($(psi cpu) - psi_cpu0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%, I/O $(( ($(psi io) - psi_io0) / 10000 / (elapsed > 0 ? elapsed : 1) ))%"
cmd="bash bench/fs/engine.sh"
if ((quick)); then cmd+=" --quick"; fi
python3 bench/fs/report.py "$results" docs/benchmarks.md \
  --command "$cmd" --reps "$reps" --elapsed "$elapsed" --device-mib "$device_mib" --pressure "$pressure" \
  --params "create: $create_files files of 4 KiB in $create_dirs dirs, one sync at the end; create-fsync: $fsync_files files of 4 KiB in $create_dirs dirs, fsync after each file; append: $append_n appends of 4 KiB, fsync after each; overwrite: $ow_n writes of 4 KiB at random 4 KiB-aligned offsets (seed 1) of a $ow_mib MiB file written and synced beforehand, fsync after each; table53: A = $a_mib MiB written in 1 MiB calls, B = 1 byte"
