#!/usr/bin/env bash
# The POSIX conformance suite on a fresh intactfs mount against tmpfs (root needed).
# Passes if exactly the documented known failures fail; then fsck must find the image clean.
# MOUNT_OPTS: mount options for the intactfs mount (e.g. MOUNT_OPTS=uring, which needs
# /sys/module/fuse/parameters/enable_uring set to Y).
set -euo pipefail
cd "$(dirname "$0")/../.."
INTACT=${INTACT:-target/debug/intact}
[ -x "$INTACT" ] || cargo build -q -p intact-cli
INTACT=$(realpath "$INTACT")
D=$(mktemp -d /tmp/intact-posix.XXXXXX)
chmod 755 "$D"   # the unprivileged cases need to reach their directories
mkdir "$D/ref" "$D/mnt"
cleanup() {
  mountpoint -q "$D/mnt" && { "$INTACT" fs umount "$D/mnt" >/dev/null 2>&1 || umount -l "$D/mnt"; }
  mountpoint -q "$D/ref" && umount "$D/ref"
  rm -rf "$D"
}
trap cleanup EXIT
mount -t tmpfs none "$D/ref"
"$INTACT" fs mkfs "$D/img" --size 16G >/dev/null
"$INTACT" fs mount "$D/img" "$D/mnt" --daemon --log "$D/log" ${MOUNT_OPTS:+-o "$MOUNT_OPTS"} >/dev/null
python3 tests/posix/conformance.py --dir "$D/mnt" --reference "$D/ref" \
  --known-failures tests/posix/intactfs-known-failures.txt "$@" | grep -v '^ok '
"$INTACT" fs umount "$D/mnt" >/dev/null
"$INTACT" fs fsck "$D/img" | tail -1
