#!/usr/bin/env bash
# Embedded mode (issue 28 item 4): a pmem image opened in-process through the C ABI
# (tests/t_embed.c over libintact_embed), the Python module (python/tests/check_embed.py)
# and SQLite through the embedded VFS (sqlite/intact_vfs.c, with tools/sqlite-batch's
# driver), against real image files and a real FUSE mount.
#
#   bash libintact/test_embed.sh   (root or a user who may mount FUSE; exit 0 = all passed)
#
# test.sh runs it at its end (with its INTACT). Standalone it builds the intact binary
# (cargo build -j 1 -p intact-cli, unless INTACT= names one). It always builds
# libintact_embed (cargo build -p intactfs-embed, into $CARGO_TARGET_DIR or target/) and
# links the programs against it and the system's SQLite (libsqlite3-dev). Checks: files,
# errors and transactions (C, Python); one owner: an embedded open of a mounted image is
# EBUSY with a message (C, Python), and so is a mount of an image a program holds; a
# program killed (SIGKILL) with a transaction open leaves neither file changed; SQLite
# through the VFS (journal_mode=MEMORY) inserts and passes its integrity check, a journal
# mode that would write a journal fails, and ROUNDS (10) kill -9 rounds at random points
# (1-400 ms after its start) of tools/sqlite-batch's crash-test writer each leave a database that passes
# `PRAGMA integrity_check` and holds the last transaction the writer reported committed.
# The trap unmounts, stops what it started (by pid) and removes its temporary directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-120}
ROUNDS=${ROUNDS:-10}
CC=${CC:-cc}

T=$(mktemp -d "${TMPDIR:-/tmp}/libintact-embed.XXXXXX")
IMG=$T/img
MNT=$T/mnt
INTACT=${INTACT:-}
BUILD_INTACT=
[ -n "$INTACT" ] || { BUILD_INTACT=1; INTACT=$ROOT/target/debug/intact; }
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
DAEMON=
HOLDERS=
mkdir -p "$MNT"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
export INTACT_EMBED_LIB=$TARGET/debug/libintact_embed.so

is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
. "$HERE/test_lib.sh"

cleanup() {
    local rc=$? pid
    set +e
    trap - EXIT INT TERM
    for pid in $HOLDERS; do
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ -n "$DAEMON" ] && daemon_alive "$DAEMON"; then
        timeout 60 "$INTACT" fs umount "$MNT" >/dev/null 2>&1 || { kill -TERM "$DAEMON"; wait_dead "$DAEMON"; }
    fi
    if is_mounted "$MNT"; then umount -l "$MNT" 2>/dev/null; echo "cleanup: $MNT was still mounted" >&2; rc=1; fi
    rm -rf "$T"
    if [ $rc -ne 0 ]; then echo "libintact embedded test: FAILED (exit $rc)"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "build"
[ -z "$BUILD_INTACT" ] || (cd "$ROOT" && cargo build -j 1 -q -p intact-cli)
[ -x "$INTACT" ] || { echo "no intact binary at $INTACT" >&2; exit 2; }
(cd "$ROOT" && cargo build -q -p intactfs-embed)
[ -f /usr/include/sqlite3.h ] || { echo "cannot run: /usr/include/sqlite3.h is missing (apt-get install libsqlite3-dev)" >&2; exit 2; }
LINK=("$TARGET/debug/libintact_embed.a" -lpthread -ldl -lm)
WARN=(-std=c11 -Wall -Wextra -Werror -Wshadow)
"$CC" -O2 "${WARN[@]}" -I"$HERE/include" -o "$T/t_embed" "$HERE/tests/t_embed.c" "${LINK[@]}"
# The crash-test driver: tools/sqlite-batch/driver.c calling intact_sqlite_setup_from_env first.
"$CC" -O2 -Wall -Wextra -std=c11 -DDRIVER_SETUP=intact_sqlite_setup_from_env -I"$HERE/include" \
    -o "$T/sqlite-embed" "$ROOT/tools/sqlite-batch/driver.c" "$HERE/sqlite/intact_vfs.c" -lsqlite3 "${LINK[@]}"
ok "t_embed and sqlite-embed built against $TARGET/debug/libintact_embed.a"
C=$T/t_embed
SQ=$T/sqlite-embed

section "files, errors, transactions (C, Python)"
run "t_embed: mkfs 32 MiB" "$C" "$IMG" mkfs 32
run "C: files, EBUSY, EBADF, EINVAL, commit, abort, reopen" "$C" "$IMG" basic
run "Python: the same" "$PY" "$ROOT/python/tests/check_embed.py" basic "$IMG"

section "one owner: a mount and an embedded program exclude each other"
timeout "$TIMEOUT" "$INTACT" fs mount "$IMG" "$MNT" --daemon --pid-file "$T/pid" --log "$T/daemon.log" >/dev/null
DAEMON=$(cat "$T/pid")
run "C: opening the mounted image is EBUSY, with a message" "$C" "$IMG" busy
run "Python: the same" "$PY" "$ROOT/python/tests/check_embed.py" busy "$IMG"
run "intact fs umount" "$INTACT" fs umount "$MNT"
wait_dead "$DAEMON" && DAEMON= || bad "the daemon did not exit after umount"
"$C" "$IMG" hold "$T/ready" >"$T/hold.log" 2>&1 &
HOLDERS="$HOLDERS $!"
wait_file "$T/ready" || bad "the holder did not start: $(cat "$T/hold.log")"
out=$(timeout "$TIMEOUT" "$INTACT" fs mount "$IMG" "$MNT" --daemon --log "$T/daemon2.log" 2>&1) && rc=0 || rc=$?
eq "mounting an image a program holds fails, saying it is in use" "$rc $(printf '%s' "$out" | grep -c 'in use')" "2 1"
is_mounted "$MNT" && { bad "$MNT got mounted"; timeout 60 "$INTACT" fs umount "$MNT"; }
run "C: a second program is refused too" "$C" "$IMG" busy
for pid in $HOLDERS; do kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; done
HOLDERS=
run "C: killed with a transaction open: both files old after the reopen" "$C" "$IMG" after-hold

section "SQLite through the embedded VFS"
# Fences without msync: a kill -9 loses nothing the program stored (the page cache keeps
# the mapping's stores), and an image in a disk file system would pay a writeback per fence.
export INTACT_EMBED_IMAGE=$IMG INTACT_EMBED_NO_SYNC=1 SQLITE_BATCH_JOURNAL=memory
run "insert 200 one-row transactions (journal_mode=MEMORY)" "$SQ" /t.db insert 200
out=$(SQLITE_BATCH_JOURNAL=delete "$SQ" /j.db insert 5 2>&1) && rc=0 || rc=$?
eq "journal_mode=DELETE would write a journal: refused (exit, SQLITE_CANTOPEN)" "$rc $(printf '%s' "$out" | grep -c 'unable to open')" "1 1"
run "the crash-test writer: 20 transactions" sh -c "'$SQ' /crash.db loop 20 | tail -1"
eq "check: integrity_check ok, all rows of the last generation" "$("$SQ" /crash.db check 2>&1)" "consistent generation 20"

section "SQLite: kill -9 at random points ($ROUNDS rounds)"
bad_rounds=0 prev=20 early=0 unreported=0
for ((r = 1; r <= ROUNDS; r++)); do
    "$SQ" /crash.db loop >"$T/loop.out" 2>"$T/loop.err" &
    pid=$!
    HOLDERS=$pid
    # 1-400 ms: some rounds land in the reopen (recovery, resume), most in the loop.
    sleep "0.$(printf '%03d' $((1 + RANDOM % 400)))"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    HOLDERS=
    last=$(awk '$1 == "committed" { g = $2 } END { print (g == "" ? -1 : g) }' "$T/loop.out")
    floor=$((last > prev ? last : prev))
    out=$("$SQ" /crash.db check 2>&1) && rc=0 || rc=$?
    got=$(printf '%s' "$out" | awk '/^consistent generation/ { print $3 }')
    # The kill may land after a COMMIT returned and before its line was printed: floor or floor + 1.
    if [ $rc -ne 0 ] || [ -z "$got" ] || [ "$got" -lt "$floor" ] || [ "$got" -gt $((floor + 1)) ]; then
        bad "round $r: last reported committed $floor, check said: $out $(cat "$T/loop.err")"
        bad_rounds=$((bad_rounds + 1))
    fi
    [ "$last" -ge 0 ] || early=$((early + 1))
    [ "${got:-0}" -ne $((floor + 1)) ] || unreported=$((unreported + 1))
    prev=${got:-$floor}
done
[ $bad_rounds -eq 0 ] && ok "$ROUNDS rounds: integrity_check ok and the last committed generation present every time ($early killed before the writer reported a commit, in the reopen or resume; $unreported with one commit durable but not yet reported; last round: committed $last, found $got)"

echo
echo "libintact embedded test: $PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
