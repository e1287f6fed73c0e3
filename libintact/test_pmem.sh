#!/usr/bin/env bash
# AD-transactions (FCFS, issue 14) on a REAL FUSE mount of a pmem image, through libintact
# (tests/t_tx.c) and the Python module (python/tests/check_pmem.py).
#
#   bash libintact/test_pmem.sh   (root or a user who may mount FUSE; exit 0 = all passed)
#
# test.sh runs it at its end (with its INTACT and BUILD). Standalone it builds the intact
# binary (cargo build -j 1 -p intact-cli, unless INTACT= names one) and the library (into
# a temporary BUILD unless BUILD= is given). It makes a 64 MiB pmem image with a 64 KiB log
# (1024 entries), mounts it with `intact fs mount --daemon`, and checks: the ABI numbers
# agree with crates/intactfs-fuse/src/control.rs; fsck recognises the image; a two-file
# transaction commits (C and Python), an aborted one leaves both files unchanged, a process
# that exits with its transaction open has it aborted; the errors and their messages
# (EINVAL, EXDEV against a second pmem mount and a block mount, EOPNOTSUPP, ENOTTY, EBUSY,
# ENOSPC with the engine's message in the daemon's log); and the crash: committed
# transactions and legacy writes survive a SIGKILL of the daemon and the remount, and two
# transactions open at the kill (C and Python) leave neither of their files changed. The
# trap unmounts every mount, stops the daemons and transaction holders it started (by pid)
# and removes the temporary directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-120}

T=$(mktemp -d "${TMPDIR:-/tmp}/libintact-pmem.XXXXXX")
IMG=$T/img
MNT=$T/mnt
LOG=$T/daemon.log
MNT2=$T/mnt2
MNTB=$T/mntb
OFF=$T/off
BUILD=${BUILD:-$T/build}
INTACT=${INTACT:-}
BUILD_INTACT=
[ -n "$INTACT" ] || { BUILD_INTACT=1; INTACT=$ROOT/target/debug/intact; }
declare -A DAEMON=()
HOLDERS=
mkdir -p "$MNT" "$MNT2" "$MNTB" "$OFF"

export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
PYCHECK=$ROOT/python/tests/check_pmem.py

is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

. "$HERE/test_lib.sh"

cleanup() {
    local rc=$? m pid
    set +e
    trap - EXIT INT TERM
    for pid in $HOLDERS; do
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    for m in "$MNT" "$MNT2" "$MNTB"; do
        pid=${DAEMON[$m]:-}
        if [ -n "$pid" ] && daemon_alive "$pid"; then
            timeout 60 "$INTACT" fs umount "$m" >/dev/null 2>&1 ||
                { kill -TERM "$pid" 2>/dev/null; wait_dead "$pid"; } ||
                { kill -KILL "$pid" 2>/dev/null; wait_dead "$pid"; }
        fi
        if is_mounted "$m"; then
            timeout 60 "$INTACT" fs umount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null
        fi
        if is_mounted "$m"; then
            echo "cleanup: $m is still mounted" >&2
            rc=1
        fi
    done
    rm -rf "$T"
    if [ $rc -ne 0 ]; then echo "libintact pmem test: FAILED (exit $rc)"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# mount_at IMAGE MNT [LOG]: mount with --daemon, remember the daemon's pid.
mount_at() {
    local img=$1 m=$2 log=${3:-$T/log-$(basename "$2")}
    rm -f "$T/pid"
    timeout "$TIMEOUT" "$INTACT" fs mount "$img" "$m" --daemon --pid-file "$T/pid" --log "$log" >/dev/null
    DAEMON[$m]=$(cat "$T/pid")
    daemon_alive "${DAEMON[$m]}" || { echo "the daemon for $m is not running" >&2; exit 1; }
    is_mounted "$m" || { echo "$m is not mounted" >&2; exit 1; }
}

umount_at() {
    local m=$1 pid=${DAEMON[$1]}
    run "intact fs umount $(basename "$m")" "$INTACT" fs umount "$m"
    wait_dead "$pid" && DAEMON[$m]= || bad "the daemon of $m did not exit after umount"
}



# ---- build -----------------------------------------------------------------------------

section "build"
if [ -n "$BUILD_INTACT" ]; then
    (cd "$ROOT" && cargo build -j 1 -q -p intact-cli)
fi
[ -x "$INTACT" ] || { echo "no intact binary at $INTACT" >&2; exit 2; }
[ -x "$BUILD/t_tx" ] || make -s -C "$HERE" BUILD="$BUILD" all
C=$BUILD/t_tx
ok "t_tx built ($C)"

section "the TX ABI agrees with crates/intactfs-fuse/src/control.rs"
CONTROL=$ROOT/crates/intactfs-fuse/src/control.rs
# (Read as one line: rustfmt spreads the assert_eq! over several.)
read -r R_BEGIN R_ADD R_COMMIT R_ABORT <<<"$({ tr -s ' \n' ' ' <"$CONTROL" | sed 's/( /(/g; s/ )/)/g' | grep -o 'assert_eq!((IOC_TX_BEGIN, IOC_TX_ADD, IOC_TX_COMMIT, IOC_TX_ABORT), ([0-9A-Fa-fx_, ]*))' || true; } | sed 's/.*), (//; s/))$//; s/[,_]//g')" || true
for n in BEGIN ADD COMMIT ABORT; do
    v=R_$n
    want=$(printf '0x%08x' "${!v:-missing}" 2>/dev/null || echo "(not found in control.rs)")
    eq "C TX_$n" "$("$C" abi | awk -v k="TX_$n" '$1 == k { print $2 }')" "$want"
    eq "Python TX_$n" "$("$PY" -c "import intact.fs as f; print('0x%08x' % f.TX_$n)")" "$want"
done

OLD=4096
NEW=65536
OLD_SHA=$("$C" pattern $OLD | sha256sum | cut -d' ' -f1)
NEW_SHA=$("$C" pattern $NEW 0x5a | sha256sum | cut -d' ' -f1)
# old A B...: each file gets OLD bytes of the pattern (a legacy write: durable at once).
old() { local f; for f in "$@"; do "$C" legacy "$f" $OLD >/dev/null || bad "legacy write of $f"; done; }

section "mkfs, fsck, mount"
run "intact fs mkfs --device pmem --size 64M --journal 64K" "$INTACT" fs mkfs "$IMG" --device pmem --size 64M --journal 64K
out=$("$INTACT" fs fsck "$IMG" 2>&1) && rc=0 || rc=$?
eq "intact fs fsck recognises the pmem image, clean (exit)" "$rc $(printf '%s' "$out" | grep -c 'pmem image (superblock INTPMEM1)')" "0 1"
mount_at "$IMG" "$MNT" "$LOG"
ok "mounted $IMG on $MNT (daemon pid ${DAEMON[$MNT]}): $(grep -o 'pmem image with AD-transactions[^)]*' "$LOG" | head -1)"

section "commit, abort, exit with a transaction open (C and Python)"
old "$MNT/c-a" "$MNT/c-b" "$MNT/p-a" "$MNT/p-b"
run "C: a two-file transaction commits" "$C" run "$MNT/c-a" "$MNT/c-b" commit
run "Python: with transaction([a, b]) commits" "$PY" "$PYCHECK" run "$MNT/p-a" "$MNT/p-b" commit
eq "both files of each committed transaction are new" "$(sha_of "$MNT/c-a") $(sha_of "$MNT/c-b") $(sha_of "$MNT/p-a") $(sha_of "$MNT/p-b")" "$NEW_SHA $NEW_SHA $NEW_SHA $NEW_SHA"
old "$MNT/ca-a" "$MNT/ca-b" "$MNT/pa-a" "$MNT/pa-b"
run "C: a two-file transaction aborts" "$C" run "$MNT/ca-a" "$MNT/ca-b" abort
run "Python: an exception in the block aborts" "$PY" "$PYCHECK" run "$MNT/pa-a" "$MNT/pa-b" abort
eq "both files of each aborted transaction are unchanged" "$(sha_of "$MNT/ca-a") $(sha_of "$MNT/ca-b") $(sha_of "$MNT/pa-a") $(sha_of "$MNT/pa-b")" "$OLD_SHA $OLD_SHA $OLD_SHA $OLD_SHA"
old "$MNT/ce-a" "$MNT/ce-b" "$MNT/pe-a" "$MNT/pe-b"
run "C: a process exits with its transaction open" "$C" run "$MNT/ce-a" "$MNT/ce-b" exit
run "Python: the same" "$PY" "$PYCHECK" run "$MNT/pe-a" "$MNT/pe-b" exit
got=
for i in $(seq 1 30); do
    got="$(sha_of "$MNT/ce-a") $(sha_of "$MNT/ce-b") $(sha_of "$MNT/pe-a") $(sha_of "$MNT/pe-b")"
    [ "$got" = "$OLD_SHA $OLD_SHA $OLD_SHA $OLD_SHA" ] && break
    sleep 0.1
done
eq "the daemon aborted both exited processes' transactions (within 3 s)" "$got" "$OLD_SHA $OLD_SHA $OLD_SHA $OLD_SHA"
eq "the daemon's log says why" "$(grep -c 'exited with it open' "$LOG")" 2

section "errors and their messages"
run "mkfs a second pmem image (8M) and a block image (16M)" sh -c "'$INTACT' fs mkfs '$T/img2' --device pmem --size 8M && '$INTACT' fs mkfs '$T/imgb' --size 16M"
mount_at "$T/img2" "$MNT2"
mount_at "$T/imgb" "$MNTB"
ok "second pmem mount on $MNT2, block mount on $MNTB"
run "C: EINVAL, EXDEV (pmem and block), EOPNOTSUPP, ENOTTY, EBUSY" "$C" errors "$MNT" "$MNT2" "$MNTB" "$OFF"
run "Python: the same, and transaction() over two mounts" "$PY" "$PYCHECK" errors "$MNT" "$MNT2" "$MNTB" "$OFF"
umount_at "$MNT2"
umount_at "$MNTB"
run "C: a transaction larger than the log: ENOSPC, abortable, file unchanged" "$C" nospace "$MNT/big-c" $((16 << 20))
run "Python: the same" "$PY" "$PYCHECK" nospace "$MNT/big-p" $((16 << 20))
msg=$(grep -m1 'no space left on device: the log has' "$LOG" || true)
[ -n "$msg" ] && ok "the engine's ENOSPC message is in the daemon's log: ${msg:0:200}" || bad "no ENOSPC message in the daemon's log: $(tail -3 "$LOG")"

section "crash: SIGKILL of the daemon with two transactions open"
old "$MNT/k-ca" "$MNT/k-cb" "$MNT/k-pa" "$MNT/k-pb" "$MNT/k-ha" "$MNT/k-hb" "$MNT/k-qa" "$MNT/k-qb"
run "C: a two-file transaction commits before the crash" "$C" run "$MNT/k-ca" "$MNT/k-cb" commit
run "Python: the same" "$PY" "$PYCHECK" run "$MNT/k-pa" "$MNT/k-pb" commit
run "legacy: a file written without a transaction (100000 bytes)" "$C" legacy "$MNT/k-legacy" 100000 7
run "legacy: rename and mkdir" sh -c "mv '$MNT/k-legacy' '$MNT/k-legacy2' && mkdir '$MNT/k-dir'"
"$C" run "$MNT/k-ha" "$MNT/k-hb" hold "$T/ready-c" >"$T/hold-c.log" 2>&1 &
HOLDERS="$HOLDERS $!"
"$PY" "$PYCHECK" run "$MNT/k-qa" "$MNT/k-qb" hold "$T/ready-p" >"$T/hold-p.log" 2>&1 &
HOLDERS="$HOLDERS $!"
wait_file "$T/ready-c" || true
wait_file "$T/ready-p" || true
sed 's/^/    /' "$T/hold-c.log" "$T/hold-p.log"
eq "before the crash the open transactions' files show their new contents" \
    "$(sha_of "$MNT/k-ha") $(sha_of "$MNT/k-hb") $(sha_of "$MNT/k-qa") $(sha_of "$MNT/k-qb")" "$NEW_SHA $NEW_SHA $NEW_SHA $NEW_SHA"
kill -KILL "${DAEMON[$MNT]}"
wait_dead "${DAEMON[$MNT]}" || { echo "the daemon survived SIGKILL" >&2; exit 1; }
DAEMON[$MNT]=
for pid in $HOLDERS; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
HOLDERS=
run "intact fs umount removes the stale mount" "$INTACT" fs umount "$MNT"
out=$("$INTACT" fs fsck "$IMG" 2>&1) && rc=0 || rc=$?
printf '%s\n' "$out" | sed 's/^/    /'
eq "fsck of the crashed image (read-only): clean, 2 uncommitted transactions to undo" "$rc $(printf '%s' "$out" | grep -c ' 2 uncommitted transaction(s) to undo')" "0 1"
mount_at "$IMG" "$MNT" "$LOG"
echo "    remounted: $(grep -o 'recovered [^)]*' "$LOG" | tail -1)"
eq "the transactions open at the crash: neither file changed (C, Python)" \
    "$(sha_of "$MNT/k-ha") $(sha_of "$MNT/k-hb") $(sha_of "$MNT/k-qa") $(sha_of "$MNT/k-qb")" "$OLD_SHA $OLD_SHA $OLD_SHA $OLD_SHA"
eq "the transactions committed before the crash: both files new (C, Python)" \
    "$(sha_of "$MNT/k-ca") $(sha_of "$MNT/k-cb") $(sha_of "$MNT/k-pa") $(sha_of "$MNT/k-pb")" "$NEW_SHA $NEW_SHA $NEW_SHA $NEW_SHA"
eq "legacy writes, rename and mkdir survived" "$(sha_of "$MNT/k-legacy2") $(sha_of "$MNT/k-legacy") $([ -d "$MNT/k-dir" ] && echo dir)" \
    "$("$C" pattern 100000 7 | sha256sum | cut -d' ' -f1) absent dir"
eq "earlier commits are still there, aborted ones still old" "$(sha_of "$MNT/c-a") $(sha_of "$MNT/ca-b")" "$NEW_SHA $OLD_SHA"
run "C: transactions work after the recovery" "$C" run "$MNT/k-ha" "$MNT/k-hb" commit

section "unmount"
umount_at "$MNT"
is_mounted "$MNT" && bad "$MNT is still mounted" || ok "$MNT unmounted"
out=$("$INTACT" fs fsck "$IMG" 2>&1) && rc=0 || rc=$?
eq "intact fs fsck: clean, the log empty after a clean unmount" "$rc $(printf '%s' "$out" | grep -c 'unmounted cleanly')" "0 1"

echo
echo "libintact pmem test: $PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
