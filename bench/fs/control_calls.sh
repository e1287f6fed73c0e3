#!/usr/bin/env bash
# The cost of the owner and permission checks of the control calls (issue 25 item 3): N
# pmem TX_BEGIN+TX_COMMIT pairs and N block BEGIN+COMMIT pairs from one process, through
# crates/intact-cli/tests/perms/actor.c, on fresh 64 MiB images; prints the daemon's CPU
# time per pair (user+system from /proc/PID/stat, 10 ms ticks: steadier than wall time on
# a shared machine) and the wall time per pair. Give two binaries to compare them side by
# side, alternating, REPS times each.
#
#   [N=3000] [REPS=3] bash bench/fs/control_calls.sh INTACT [INTACT2]      (as root: FUSE)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=${N:-3000}
REPS=${REPS:-3}
[ $# -ge 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
T=$(mktemp -d /tmp/control-calls.XXXXXX)
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
gcc -O2 -Wall -I "$ROOT/libintact/include" -o "$T/actor" \
    "$ROOT/crates/intact-cli/tests/perms/actor.c" "$ROOT/libintact/src/intact.c"
cpu() { awk '{ print $14 + $15 }' "/proc/$(cat "$1")/stat"; }

# one INTACT DEV STEP...: the daemon's CPU µs and the wall µs per pair of steps (run in
# a subshell: its own trap unmounts whatever happens).
one() {
    local intact=$1 dev=$2 d
    shift 2
    d=$(mktemp -d "$T/$dev.XXXX")
    mkdir "$d/mnt"
    "$intact" fs mkfs "$d/img" --device "$dev" --size 64M >/dev/null
    # shellcheck disable=SC2064 # expanded now: the function's locals are gone at exit
    trap "grep -q ' $d/mnt ' /proc/mounts && '$intact' fs umount '$d/mnt' >/dev/null || true" EXIT
    "$intact" fs mount "$d/img" "$d/mnt" --daemon --pid-file "$d/pid" --log "$d/log" -o commit=0 >/dev/null
    printf x >"$d/mnt/f"
    local steps=("open-rw:$d/mnt/f") i
    for ((i = 0; i < N; i++)); do steps+=("$@"); done
    local c0 t0 c1 t1
    c0=$(cpu "$d/pid"); t0=$(date +%s%N)
    "$T/actor" "${steps[@]}" >"$d/out"
    t1=$(date +%s%N); c1=$(cpu "$d/pid")
    "$intact" fs umount "$d/mnt" >/dev/null
    [ "$(grep -vc ' ok' "$d/out")" = 0 ] || { echo "failed steps in $d/out" >&2; exit 1; }
    echo "daemon CPU $(((c1 - c0) * 10000 / N)) us/pair, wall $(((t1 - t0) / N / 1000)) us/pair"
}

for ((r = 1; r <= REPS; r++)); do
    for intact in "$@"; do
        echo "$intact (run $r): pmem TX_BEGIN+TX_COMMIT: $(one "$intact" pmem tx-begin tx-commit:last)"
        echo "$intact (run $r): block BEGIN+COMMIT: $(one "$intact" block begin commit)"
    done
done
