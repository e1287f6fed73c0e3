#!/usr/bin/env bash
# Does xfs keep a replaced file's data before the rename that replaces it (issue 32, item 3;
# docs/validation.md, "xfs")? Runs `intact blk validate-apm` on xfs under ext4-o (data before
# every rename) with two four-step workloads that differ only in whether the rename
# replaces a file:
#   replace:  write f ("old"), sync; write 8 KiB to f.new; rename f.new -> f; fsync the directory
#   new name: write g ("old"), sync; write 8 KiB to f.new; rename f.new -> f; fsync the directory
# A forbidden image (f present with 0 bytes) means the directory fsync made the rename
# durable before the file's delayed data.
#   bash study/xfs-replace.sh [--runs N]     (root; needs xfsprogs, loop devices; ~1 min per run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=1
[ "${1:-}" = --runs ] && runs=$2
intact=$here/../target/release/intact
[ -x "$intact" ] || (cd "$here/.." && cargo build --release -q -p intact-cli)
scratch=$(mktemp -d /tmp/intact-xfs-replace.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
replace="sh -c 'printf old > f && sync && yes abcdefgh | head -c 8192 > f.new && mv f.new f && sync .'"
newname="sh -c 'printf old > g && sync && yes abcdefgh | head -c 8192 > f.new && mv f.new f && sync .'"
for i in $(seq "$runs"); do
  for w in replace newname; do
    rc=0
    "$intact" blk validate-apm --fs xfs --apm xfs=ext4-o --generated 0 --jobs 1 --scratch "$scratch" \
      --workload "${!w}" >"$scratch/out" 2>&1 || rc=$?
    [ "$rc" -le 1 ] || { cat "$scratch/out" >&2; exit "$rc"; }
    echo "run $i, $w: $(grep -o '[0-9]* images, [0-9]* allowed, [0-9]* forbidden' "$scratch/out")"
  done
done
