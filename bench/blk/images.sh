#!/usr/bin/env bash
# Crash images per second of `intact blk check` (docs/benchmarks.md, "Block-level
# validator"): a 64 MiB ext4 image, a workload with many flushes, a no-op checker, 2 jobs.
# Measured in one run, alternating: the default materialisation (scratch in /dev/shm: a
# sparse copy of the initial image's allocated ranges plus the changed sectors), reflinks
# (--scratch on an xfs made for the purpose, itself in /dev/shm: per-epoch base images
# shared block by block) and full copies of the device (the baseline), each without fsck;
# then the default with fsck, for the cost of fsck per image. Needs root.
#   bash bench/blk/images.sh [REPS]     (default 3 repetitions of each)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
source bench/lib.sh
cat > "$tmp/work.sh" <<'W'
#!/bin/sh
# 200 files of 4-16 KiB; every 6th file is synced, every file is renamed into place.
set -e
i=0
while [ $i -lt 200 ]; do
  head -c $((4096 * (1 + i % 4))) /dev/urandom > f$i.tmp
  [ $((i % 6)) -eq 0 ] && sync f$i.tmp
  mv f$i.tmp f$i
  i=$((i + 1))
done
sync
W
chmod +x "$tmp/work.sh"
"$intact" blk record --fs ext4 --size 64M --out "$tmp/log" -- "$tmp/work.sh" 2>"$tmp/record.err"
grep -o 'recorded .*' "$tmp/record.err" >&2
# A reflink-capable scratch: xfs in a sparse file in /dev/shm, unmounted on exit.
xfsimg=/dev/shm/intact-bench-scratch.$$.xfs
truncate -s 4G "$xfsimg" && mkfs.xfs -q -f -m reflink=1 "$xfsimg"
mkdir -p "$tmp/xfs" && mount -o loop "$xfsimg" "$tmp/xfs"
trap 'umount "$tmp/xfs" 2>/dev/null; rm -f "$xfsimg"; rm -rf "$tmp"' EXIT
declare -A rate
run() { # label, extra args
  local label=$1; shift
  local t0 t1 n
  t0=$(date +%s.%N)
  "$intact" blk check "$tmp/log" -j 2 -q --json "$tmp/$label.json" "$@" >/dev/null
  t1=$(date +%s.%N)
  n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["checked"])' "$tmp/$label.json")
  rate[$label]="${rate[$label]:-} $(python3 -c "print($n / ($t1 - $t0))")"
  echo "$label: $n images in $(python3 -c "print(round($t1 - $t0, 2))") s" >&2
}
for _ in $(seq "$reps"); do
  run cow --no-fsck
  run reflink --no-fsck --scratch "$tmp/xfs"
  run full --no-fsck --full-copy
  run fsck
done
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["checked"])' "$tmp/cow.json")
cow=$(median ${rate[cow]}) full=$(median ${rate[full]}) fsck=$(median ${rate[fsck]}) reflink=$(median ${rate[reflink]})
echo "| materialisation | images/s (median of $reps, $n images, -j 2, no-op checker) | vs full copies |"
echo "|---|---:|---:|"
printf '| sparse copy + changed sectors in /dev/shm (default), no fsck | %.0f | %.2fx |\n' "$cow" "$(python3 -c "print($cow / $full)")"
printf '| reflinks of per-epoch bases on a scratch xfs, no fsck | %.0f | %.2fx |\n' "$reflink" "$(python3 -c "print($reflink / $full)")"
printf '| full copy of the 64 MiB device, no fsck | %.0f | 1.00x |\n' "$full"
printf '| default, with e2fsck -f -n | %.0f | %.2fx |\n' "$fsck" "$(python3 -c "print($fsck / $full)")"
printf '\nfsck costs %.1f ms per image (2 jobs: %.1f ms of wall time per image on each of 2 workers).\n' \
  "$(python3 -c "print(1000 / $fsck - 1000 / $cow)")" "$(python3 -c "print(2 * (1000 / $fsck - 1000 / $cow))")"
