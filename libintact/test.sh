#!/usr/bin/env bash
# libintact and the Python module (python/intact) against a REAL intactfs mount.
#
#   bash libintact/test.sh        (root or a user who may mount FUSE; exit 0 = all passed)
#
# Builds the library (make -C libintact, into a temporary BUILD unless BUILD= is given)
# and the intact binary (cargo build -j 1 -p intact-cli, unless INTACT= names one), makes
# a 1 GiB image in a temporary directory, mounts it with `intact fs mount --daemon`, and
# checks: the ABI numbers agree with crates/intactfs-fuse/src/control.rs; (a) getstream /
# setstream round trips in C and Python; (b) stream ids agree between C, Python and
# `intact fs exec`; (c) children inherit the stream; (d) the crash behaviour: the daemon
# is killed with SIGKILL after writes in one or two streams, the image is mounted again,
# and what survived is compared with ccfs's promise, and osync/dsync (tickets, the durability
# notification, exec --fsync-as osync); (e) the calls fail with ENOTTY off
# the mount; (f) atomic regions (CFS): the errors and their messages (EXDEV against a
# second, small mount), abort, inheritance, a process exiting inside a region, F2FS atomic
# writes, the atomic() context manager, and a crash with committed regions and regions
# open while the daemon is killed; (g) AD-transactions on a pmem mount (test_pmem.sh, its
# own mounts and trap); (h) embedded mode and SQLite over it (test_embed.sh, its own images,
# mount and trap). Whatever happens, the trap unmounts (both mounts),
# stops the daemons and region-holding processes it started (by pid) and removes the
# temporary directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-120}

T=$(mktemp -d "${TMPDIR:-/tmp}/libintact-test.XXXXXX")
MNT=$T/mnt
IMG=$T/img
PIDF=$T/daemon.pid
LOG=$T/daemon.log
OFF=$T/off-mount
MNT2=$T/mnt2
IMG2=$T/img2
PIDF2=$T/daemon2.pid
LOG2=$T/daemon2.log
BUILD=${BUILD:-$T/build}
INTACT=${INTACT:-}
BUILD_INTACT=
[ -n "$INTACT" ] || { BUILD_INTACT=1; INTACT=$ROOT/target/debug/intact; }
DAEMON_PID=
DAEMON2_PID=
HOLDERS=
mkdir -p "$MNT" "$OFF" "$MNT2"

export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
PYCHECK=$ROOT/python/tests/check_mount.py

# ---- cleanup ---------------------------------------------------------------------------

# is_mounted [DIR]: DIR (default $MNT) is a mount point.
is_mounted() { awk -v m="${1:-$MNT}" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

. "$HERE/test_lib.sh"

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    # Processes holding an atomic region open for the crash section (ours, by pid).
    for pid in $HOLDERS; do
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    # The second, small mount of section (f).
    if [ -n "$DAEMON2_PID" ] && daemon_alive "$DAEMON2_PID"; then
        timeout 60 "$INTACT" fs umount "$MNT2" >/dev/null 2>&1 ||
            { kill -TERM "$DAEMON2_PID" 2>/dev/null; wait_dead "$DAEMON2_PID"; } ||
            { kill -KILL "$DAEMON2_PID" 2>/dev/null; wait_dead "$DAEMON2_PID"; }
    fi
    if is_mounted "$MNT2"; then
        timeout 60 "$INTACT" fs umount "$MNT2" >/dev/null 2>&1 || umount -l "$MNT2" 2>/dev/null
    fi
    if is_mounted "$MNT2"; then
        echo "cleanup: $MNT2 is still mounted" >&2
        rc=1
    fi
    if [ -n "$DAEMON_PID" ] && daemon_alive "$DAEMON_PID"; then
        # Unmount normally (writes back); if that does not work, the daemon unmounts on
        # SIGTERM; SIGKILL as the last resort.
        timeout 60 "$INTACT" fs umount "$MNT" >/dev/null 2>&1 ||
            { kill -TERM "$DAEMON_PID" 2>/dev/null; wait_dead "$DAEMON_PID"; } ||
            { kill -KILL "$DAEMON_PID" 2>/dev/null; wait_dead "$DAEMON_PID"; }
    fi
    if is_mounted; then
        # A stale mount (the daemon is gone): `intact fs umount` removes it and the
        # daemon's state file; umount -l if even that fails.
        timeout 60 "$INTACT" fs umount "$MNT" >/dev/null 2>&1 || umount -l "$MNT" 2>/dev/null
    fi
    if is_mounted; then
        echo "cleanup: $MNT is still mounted" >&2
        rc=1
    fi
    rm -rf "$T"
    if [ $rc -ne 0 ]; then echo "libintact test: FAILED (exit $rc)"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- helpers (and those of test_lib.sh) ------------------------------------------------

# out CMD...: CMD's stdout, or "<exit N>" if it failed (so that eq reports it).
out() {
    local o rc=0
    o=$(timeout "$TIMEOUT" "$@" 2>/dev/null) || rc=$?
    if [ $rc -eq 0 ]; then printf '%s' "$o"; else printf '<exit %d>' "$rc"; fi
}

mount_fs() {
    rm -f "$PIDF"
    # commit=0: the crash sections decide what is committed (no periodic commits);
    # durability=2: DURABLE waits end soon.
    timeout "$TIMEOUT" "$INTACT" fs mount "$IMG" "$MNT" --daemon --pid-file "$PIDF" --log "$LOG" -o commit=0,durability=2 >/dev/null
    DAEMON_PID=$(cat "$PIDF")
    daemon_alive "$DAEMON_PID" || { echo "the mount daemon (pid $DAEMON_PID) is not running" >&2; exit 1; }
    is_mounted || { echo "$MNT is not mounted" >&2; exit 1; }
}

# The second mount (section (f)): a small image of its own.
mount_fs2() {
    rm -f "$PIDF2"
    timeout "$TIMEOUT" "$INTACT" fs mount "$IMG2" "$MNT2" --daemon --pid-file "$PIDF2" --log "$LOG2" -o commit=0 >/dev/null
    DAEMON2_PID=$(cat "$PIDF2")
    daemon_alive "$DAEMON2_PID" || { echo "the second mount's daemon (pid $DAEMON2_PID) is not running" >&2; exit 1; }
    is_mounted "$MNT2" || { echo "$MNT2 is not mounted" >&2; exit 1; }
}


# crash: SIGKILL the daemon (nothing is written back), remove the stale mount, mount the
# image again (which recovers from the journal).
crash() {
    kill -KILL "$DAEMON_PID"
    wait_dead "$DAEMON_PID" || { echo "the daemon $DAEMON_PID survived SIGKILL" >&2; exit 1; }
    DAEMON_PID=
    if stat "$MNT/." >/dev/null 2>&1; then bad "the mount still answers after the daemon was killed"; fi
    run "intact fs umount removes the stale mount" "$INTACT" fs umount "$MNT"
    mount_fs
    echo "    remounted: $(sed -n 's/.*recovered from/recovered from/p' "$LOG" | tail -1)"
}

size_of() { if [ -e "$1" ]; then stat -c %s "$1"; else echo absent; fi; }

# ---- build -----------------------------------------------------------------------------

section "build"
if [ -n "$BUILD_INTACT" ]; then
    (cd "$ROOT" && cargo build -j 1 -q -p intact-cli)
fi
[ -x "$INTACT" ] || { echo "no intact binary at $INTACT" >&2; exit 2; }
make -s -C "$HERE" BUILD="$BUILD" all
C=$BUILD/t_intact
ok "libintact built with -Wall -Wextra -Werror ($BUILD: $(cd "$BUILD" && ls libintact.a libintact.so streams t_intact | tr '\n' ' '))"
# The header also compiles as C99 (no _Static_assert) and as C++.
printf '#include <intact.h>\nint main(void) { return (int)intact_stream_id("x") & 0; }\n' >"$T/c99.c"
run "intact.h compiles as C99 with -Wall -Wextra -Werror -pedantic" cc -std=c99 -Wall -Wextra -Werror -Wpedantic -I"$HERE/include" -c "$T/c99.c" -o "$T/c99.o"
if command -v c++ >/dev/null; then
    cp "$T/c99.c" "$T/cxx.cc"
    run "intact.h compiles as C++11" c++ -std=c++11 -Wall -Wextra -Werror -I"$HERE/include" -c "$T/cxx.cc" -o "$T/cxx.o"
fi

section "the ABI agrees with crates/intactfs-fuse/src/control.rs"
rust_nr() { grep -o "assert_eq!($1, 0x[0-9A-Fa-f_]*)" "$ROOT/crates/intactfs-fuse/src/control.rs" | sed 's/.*, 0x//; s/)//; s/_//g' | tr 'A-F' 'a-f'; }
for n in SETSTREAM GETSTREAM STREAMSYNC OSYNC DSYNC DURABLE; do
    want=$(printf '0x%08x' "0x$(rust_nr "IOC_$n")")
    eq "C $n" "$("$C" abi | awk -v k="$n" '$1 == k { print $2 }')" "$want"
    eq "Python $n" "$("$PY" -c "import intact.fs as f; print('0x%08x' % f.$n)")" "$want"
done
# The region ioctls (control.rs pins them in one assert_eq! of a tuple) and F2FS's numbers.
CONTROL=$ROOT/crates/intactfs-fuse/src/control.rs
# (Read as one line: rustfmt spreads the assert_eq! over several.)
read -r R_BEGIN R_COMMIT R_ABORT R_ADD <<<"$({ tr -s ' \n' ' ' <"$CONTROL" | sed 's/( /(/g; s/ )/)/g' | grep -o 'assert_eq!((IOC_BEGIN, IOC_COMMIT, IOC_ABORT, IOC_ADD), ([0-9A-Fa-fx_, ]*))' || true; } | sed 's/.*), (//; s/))$//; s/[,_]//g')" || true
for n in BEGIN COMMIT ABORT ADD; do
    v=R_$n
    want=$(printf '0x%08x' "${!v:-missing}" 2>/dev/null || echo "(not found in control.rs)")
    eq "C $n" "$("$C" abi | awk -v k="$n" '$1 == k { print $2 }')" "$want"
    eq "Python $n" "$("$PY" -c "import intact.fs as f; print('0x%08x' % f.$n)")" "$want"
done
for n in F2FS_IOC_START_ATOMIC_WRITE F2FS_IOC_COMMIT_ATOMIC_WRITE F2FS_IOC_ABORT_VOLATILE_WRITE F2FS_IOC_GET_FEATURES F2FS_FEATURE_ATOMIC_WRITE; do
    v=$(sed -n "s/^pub const $n: u32 = \(0x[0-9A-Fa-f_]*\);/\1/p" "$CONTROL" | tr -d _)
    want=$(printf '0x%08x' "${v:-missing}" 2>/dev/null || echo "(not found in control.rs)")
    eq "C $n" "$("$C" abi | awk -v k="$n" '$1 == k { print $2 }')" "$want"
    eq "Python $n" "$("$PY" -c "import intact.fs as f; print('0x%08x' % f.$n)")" "$want"
done
eq "C IGNORE_FSYNC" "$("$C" abi | awk '$1 == "IGNORE_FSYNC" { print $2 }')" \
    "$(sed -n 's/^pub const FLAG_IGNORE_FSYNC: u32 = \([0-9]*\);/\1/p' "$ROOT/crates/intactfs-fuse/src/control.rs")"
eq "C FSYNC_AS_OSYNC" "$("$C" abi | awk '$1 == "FSYNC_AS_OSYNC" { print $2 }')" \
    "$(sed -n 's/^pub const FLAG_FSYNC_AS_OSYNC: u32 = \([0-9]*\);/\1/p' "$ROOT/crates/intactfs-fuse/src/control.rs")"
eq "sizeof(struct intact_durable)" "$("$C" abi | awk '$1 == "DURABLE_SIZE" { print $2 }')" \
    "$(sed -n 's/^pub const DURABLE_ARG_SIZE: usize = \([0-9]*\);/\1/p' "$ROOT/crates/intactfs-fuse/src/control.rs")"
eq "sizeof(struct intact_stream)" "$("$C" abi | awk '$1 == "SIZE" { print $2 }')" \
    "$(sed -n 's/^pub const STREAM_ARG_SIZE: usize = \([0-9]*\);/\1/p' "$ROOT/crates/intactfs-fuse/src/control.rs")"
run "Python unit tests (no mount)" "$PY" -m unittest discover -s "$ROOT/python/tests" -p 'test_*.py'

section "mount"
timeout "$TIMEOUT" "$INTACT" fs mkfs "$IMG" --size 1G >/dev/null
mount_fs
ok "mounted $IMG on $MNT (daemon pid $DAEMON_PID)"

# ---- (a) getstream / setstream ------------------------------------------------------

section "(a) getstream and setstream"
eq "a fresh process (C) is in init" "$(out "$C" get "$MNT")" "0x0000000000000000 0"
eq "a fresh process (Python) is in init" "$(out "$PY" "$PYCHECK" get "$MNT")" "0x0000000000000000 0"
run "C: round trips, fds, flags, EINVAL" "$C" basic "$MNT"
run "Python: round trips, fds, files, the stream() context manager" "$PY" "$PYCHECK" basic "$MNT"

# ---- (b) stream ids -------------------------------------------------------------------

section "(b) stream ids: C, Python and intact fs exec agree"
eq 'C intact_stream_id("a")' "$(out "$C" id a)" 0xaf63dc4c8601ec8c
eq 'Python stream_id("a")' "$(out "$PY" -c 'import intact.fs as f; print("0x%016x" % f.stream_id("a"))')" 0xaf63dc4c8601ec8c
eq "intact fs exec --stream a (getstream from Python)" \
    "$(out "$INTACT" fs exec --mount "$MNT" --stream a -- "$PY" "$PYCHECK" get "$MNT")" "0xaf63dc4c8601ec8c 0"
eq "intact fs exec --stream a --ignore-fsync" \
    "$(out "$INTACT" fs exec --mount "$MNT" --stream a --ignore-fsync -- "$PY" "$PYCHECK" get "$MNT")" "0xaf63dc4c8601ec8c 1"
eq "the example: streams run MNT a -i (getstream from C)" \
    "$(out "$BUILD/streams" run "$MNT" a -i -- "$C" get "$MNT")" "0xaf63dc4c8601ec8c 1"
for name in init "" A B libintact-x "a b" "é" "$(printf 'x%.0s' $(seq 1 300))"; do
    c=$(out "$C" id "$name")
    p=$(out "$PY" -c 'import sys, intact.fs as f; print("0x%016x" % f.stream_id(sys.argv[1]))' "$name")
    x=$(out "$INTACT" fs exec --mount "$MNT" --stream "$name" -- "$C" get "$MNT")
    eq "\"${name:0:12}\": C = Python = exec" "$c $p ${x%% *}" "$c $c $c"
done
eq "streams id init" "$(out "$BUILD/streams" id init)" 0x0000000000000000

# ---- (c) inheritance ------------------------------------------------------------------

section "(c) children inherit the stream"
run "C: fork, grandchild, exec, a child's own setstream" "$C" fork "$MNT" libintact-fork
run "Python: subprocess, grandchild, os.fork" "$PY" "$PYCHECK" inherit "$MNT" py-inherit
eq "intact fs exec -- sh -c '... python get': the grandchild is in the stream" \
    "$(out "$INTACT" fs exec --mount "$MNT" --stream exec-child -- sh -c '"$0" "$1" get "$2"' "$PY" "$PYCHECK" "$MNT" | cut -d' ' -f1)" \
    "$(out "$C" id exec-child)"

# ---- (d) crashes ----------------------------------------------------------------------

section "(d) crash: 4 MiB in stream A (no sync), 1 byte in stream B + fsync, SIGKILL"
A4=$((4 << 20))
SHA4=$("$C" pattern $A4 | sha256sum | cut -d' ' -f1)
SHA1=$("$C" pattern 1 | sha256sum | cut -d' ' -f1)
run "C: write s1-a (4 MiB) in stream A, no sync" "$C" write "$MNT/s1-a" A $A4 none
run "C: write s1-b (1 byte) in stream B, fsync" "$C" write "$MNT/s1-b" B 1 fsync
eq "before the crash s1-a has" "$(size_of "$MNT/s1-a")" $A4
crash
eq "s1-b (fsynced in B) survived, 1 byte" "$(size_of "$MNT/s1-b")" 1
eq "s1-b holds its byte" "$(sha_of "$MNT/s1-b")" "$SHA1"
eq "s1-a (stream A, never synced) is absent" "$(size_of "$MNT/s1-a")" absent

section "(d) crash: the same writes with both in one stream (write dependence)"
run "C: write s2-a (4 MiB) in stream S, no sync" "$C" write "$MNT/s2-a" S $A4 none
run "C: write s2-b (1 byte) in stream S (another process), fsync" "$C" write "$MNT/s2-b" S 1 fsync
crash
eq "s2-b survived" "$(size_of "$MNT/s2-b")" 1
eq "s2-a is present: b's fsync committed a, which came first in the stream" "$(size_of "$MNT/s2-a")" $A4
eq "s2-a holds its 4 MiB" "$(sha_of "$MNT/s2-a")" "$SHA4"

section "(d) crash: IGNORE_FSYNC and streamsync (Python under intact fs exec)"
run "python write s3-c + fsync in stream C --ignore-fsync" \
    "$INTACT" fs exec --mount "$MNT" --stream C --ignore-fsync -- "$PY" "$PYCHECK" write "$MNT/s3-c" 1 fsync
run "python write s3-d + streamsync in stream D" \
    "$INTACT" fs exec --mount "$MNT" --stream D -- "$PY" "$PYCHECK" write "$MNT/s3-d" 65536 streamsync
run "python write s3-e + streamsync in stream E --ignore-fsync" \
    "$INTACT" fs exec --mount "$MNT" --stream E --ignore-fsync -- "$PY" "$PYCHECK" write "$MNT/s3-e" 4096 streamsync
crash
eq "s3-c is absent: fsync in an IGNORE_FSYNC stream does not commit" "$(size_of "$MNT/s3-c")" absent
eq "s3-d survived (streamsync)" "$(sha_of "$MNT/s3-d")" "$("$C" pattern 65536 | sha256sum | cut -d' ' -f1)"
eq "s3-e survived (streamsync commits even with IGNORE_FSYNC)" "$(sha_of "$MNT/s3-e")" "$("$C" pattern 4096 | sha256sum | cut -d' ' -f1)"
eq "earlier crashes' survivors are still there" "$(size_of "$MNT/s1-b") $(size_of "$MNT/s2-a") $(size_of "$MNT/s1-a")" "1 $A4 absent"

section "(d) osync and dsync (OptFS): tickets, the durability notification, exec --fsync-as osync"
run "C: osync tickets, DURABLE poll and wait, dsync, FSYNC_AS_OSYNC" "$C" osync "$MNT/s4-c" libintact-osync
run "Python: the same through intact.fs" "$PY" "$PYCHECK" osync "$MNT/s4-p"
eq "intact fs exec --fsync-as osync sets FSYNC_AS_OSYNC" \
    "$(out "$INTACT" fs exec --mount "$MNT" --stream O --fsync-as osync -- "$PY" "$PYCHECK" get "$MNT")" "$(out "$C" id O) 2"
eq "intact fs exec --fsync-as osync without --stream: a stream of its own" \
    "$(out "$INTACT" fs exec --mount "$MNT" --fsync-as osync -- "$PY" "$PYCHECK" get "$MNT" | cut -d' ' -f2)" 2
rc=0; msg=$("$INTACT" fs exec --mount "$MNT" --fsync-as sometimes -- true 2>&1) || rc=$?
eq "--fsync-as with an unknown value exits 2" "$rc" 2
rc=0; msg=$("$INTACT" fs exec --mount "$MNT" --stream init --fsync-as osync -- true 2>&1) || rc=$?
eq "--fsync-as osync on the init stream is refused (exit 2)" "$rc" 2
run "python write s5-o + fsync in stream O --fsync-as osync (an osync: committed, not flushed)" \
    "$INTACT" fs exec --mount "$MNT" --stream O --fsync-as osync -- "$PY" "$PYCHECK" write "$MNT/s5-o" 65536 fsync
run "C: write s5-d (4 KiB) in stream P, dsync" "$C" write "$MNT/s5-d" P 4096 dsync
run "C: write s5-n (4 KiB) in stream Q, no sync" "$C" write "$MNT/s5-n" Q 4096 none
crash
# A daemon crash keeps what reached the image file, flushed or not; what a power loss
# keeps of osync'd commits (a prefix) is checked on crash images by
# crates/intact-cli/tests/blk.rs (intactfs_osync_keeps_each_stream_a_prefix_on_every_crash_image)
# and the crash simulation.
eq "s5-o survived the daemon's crash (osync committed it)" "$(sha_of "$MNT/s5-o")" "$("$C" pattern 65536 | sha256sum | cut -d' ' -f1)"
eq "s5-d survived (dsync)" "$(sha_of "$MNT/s5-d")" "$("$C" pattern 4096 | sha256sum | cut -d' ' -f1)"
eq "s5-n (never synced) is absent" "$(size_of "$MNT/s5-n")" absent

# ---- (e) off the mount ----------------------------------------------------------------

section "(e) off the mount: ENOTTY"
run "C on $OFF: -1/ENOTTY" "$C" notty "$OFF"
run "C on /tmp: -1/ENOTTY" "$C" notty /tmp
run "Python on $OFF: OSError(ENOTTY)" "$PY" "$PYCHECK" notty "$OFF"
rc=0
msg=$("$BUILD/streams" get "$OFF" 2>&1) || rc=$?
eq "the example fails off the mount (exit, message)" "$rc ${msg##*: }" "1 Inappropriate ioctl for device (not on an intactfs mount)"
rc=0
msg=$("$INTACT" fs exec --mount "$OFF" --stream x -- true 2>&1) || rc=$?
[ $rc -ne 0 ] && ok "intact fs exec off the mount fails (exit $rc: $msg)" || bad "intact fs exec off the mount succeeded"

# ---- (f) atomic regions ---------------------------------------------------------------

section "(f) atomic regions (CFS): the errors and their messages"
timeout "$TIMEOUT" "$INTACT" fs mkfs "$IMG2" --size 16M >/dev/null
mount_fs2
ok "a second intactfs mount (for EXDEV): $IMG2 on $MNT2 (daemon pid $DAEMON2_PID)"
ERRS="commit/abort without a region: EINVAL; nested begin: EALREADY; add on a directory: EINVAL, on another mount's file: EXDEV, off intactfs: ENOTTY"
run "C: $ERRS" "$C" regions-errors "$MNT" "$MNT2" "$OFF"
run "Python: the same" "$PY" "$PYCHECK" regions-errors "$MNT" "$MNT2" "$OFF"
run "intact fs umount (the second mount)" "$INTACT" fs umount "$MNT2"
wait_dead "$DAEMON2_PID" && DAEMON2_PID= || bad "the second mount's daemon did not exit after umount"

section "(f) atomic regions: abort, children, exit inside a region, dependents, F2FS atomic writes"
run "C: abort reverts writes, removes a created file, undoes a rename (fresh opens, at once)" "$C" regions-abort "$MNT"
run "Python: the same" "$PY" "$PYCHECK" regions-abort "$MNT"
run "C: right after abort, a descriptor opened before the region reads the old contents" "$C" regions-cache "$MNT"
run "Python: the same" "$PY" "$PYCHECK" regions-cache "$MNT"
run "C: a forked child is in the region; the parent's abort undoes its writes" "$C" regions-fork "$MNT"
run "Python: the same with a subprocess" "$PY" "$PYCHECK" regions-subprocess "$MNT"
run "C: a process that exits inside its region: its changes vanish (within 3 s)" "$C" regions-exit "$MNT"
run "Python: the same" "$PY" "$PYCHECK" regions-exit "$MNT"
run "C: a dependent write joins the region and goes with its abort; add of another region's file: EBUSY" "$C" regions-dependents "$MNT"
run "Python: with atomic(): commits on a normal exit, aborts (and re-raises) on an exception" "$PY" "$PYCHECK" regions-atomic "$MNT"
run "C: F2FS GET_FEATURES, START/write/ABORT, START/write/COMMIT, START/write/close, START on a directory" "$C" regions-f2fs "$MNT"
run "Python: the same" "$PY" "$PYCHECK" regions-f2fs "$MNT"

section "(f) crash: regions committed before, and regions open during, a SIGKILL of the daemon"
OLD_SHA=$("$C" pattern 4096 | sha256sum | cut -d' ' -f1)
NEW_SHA=$("$C" pattern 65536 0x5a | sha256sum | cut -d' ' -f1)
run "C: r1-a, r1-b old (fsynced); begin, new contents, commit" "$C" region "$MNT/r1-a" "$MNT/r1-b" commit
run "Python: r1-pa, r1-pb old; begin(), new contents, commit()" "$PY" "$PYCHECK" region "$MNT/r1-pa" "$MNT/r1-pb" commit
run "Python: r1-ma, r1-mb old; new contents in 'with atomic()'" "$PY" "$PYCHECK" region "$MNT/r1-ma" "$MNT/r1-mb" atomic
# Two processes each rewrite two files in a region of their own, sync them (no-ops inside
# a region) and stay in the region: the daemon is killed before they commit.
"$C" region "$MNT/r2-a" "$MNT/r2-b" hold "$T/ready-c" >"$T/hold-c.log" 2>&1 &
HOLD_C=$!
HOLDERS="$HOLDERS $HOLD_C"
"$PY" "$PYCHECK" region "$MNT/r2-pa" "$MNT/r2-pb" hold "$T/ready-p" >"$T/hold-p.log" 2>&1 &
HOLD_P=$!
HOLDERS="$HOLDERS $HOLD_P"
wait_file "$T/ready-c" || true
wait_file "$T/ready-p" || true
sed 's/^/    /' "$T/hold-c.log" "$T/hold-p.log"
eq "C: in a region, r2-a and r2-b rewritten and synced, not committed" \
    "$(cat "$T/ready-c" 2>/dev/null) $(kill -0 "$HOLD_C" 2>/dev/null && echo running)" "ready running"
eq "Python: in a region, r2-pa and r2-pb rewritten and synced, not committed" \
    "$(cat "$T/ready-p" 2>/dev/null) $(kill -0 "$HOLD_P" 2>/dev/null && echo running)" "ready running"
eq "before the crash r2-a and r2-pb show the regions' new contents" "$(sha_of "$MNT/r2-a") $(sha_of "$MNT/r2-pb")" "$NEW_SHA $NEW_SHA"
crash
for pid in $HOLDERS; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
HOLDERS=
eq "r1-a and r1-b (C region, committed) are durable, new" "$(sha_of "$MNT/r1-a") $(sha_of "$MNT/r1-b")" "$NEW_SHA $NEW_SHA"
eq "r1-pa and r1-pb (Python commit()) are durable, new" "$(sha_of "$MNT/r1-pa") $(sha_of "$MNT/r1-pb")" "$NEW_SHA $NEW_SHA"
eq "r1-ma and r1-mb (Python atomic()) are durable, new" "$(sha_of "$MNT/r1-ma") $(sha_of "$MNT/r1-mb")" "$NEW_SHA $NEW_SHA"
eq "r2-a and r2-b (C region open at the crash) are both old, never a mix" "$(sha_of "$MNT/r2-a") $(sha_of "$MNT/r2-b")" "$OLD_SHA $OLD_SHA"
eq "r2-pa and r2-pb (Python region open at the crash) are both old, never a mix" "$(sha_of "$MNT/r2-pa") $(sha_of "$MNT/r2-pb")" "$OLD_SHA $OLD_SHA"
eq "the aborted regions' files are as before them (a, b, created c, renamed d, d2)" \
    "$(cat "$MNT/ra-a") $(cat "$MNT/ra-b") $(size_of "$MNT/ra-c") $(cat "$MNT/ra-d") $(size_of "$MNT/ra-d2")" "old-a old-b absent old-d absent"
eq "the region of the process that exited inside it left nothing (rx-g, rx-h)" "$(cat "$MNT/rx-g") $(size_of "$MNT/rx-h")" "old-g absent"

# ---- unmount --------------------------------------------------------------------------

section "unmount"
run "intact fs umount" "$INTACT" fs umount "$MNT"
wait_dead "$DAEMON_PID" && DAEMON_PID= || bad "the daemon did not exit after umount"
is_mounted && bad "$MNT is still mounted" || ok "$MNT unmounted"
run "intact fs fsck: the image is clean" "$INTACT" fs fsck "$IMG"

# ---- (g) AD-transactions on a pmem mount --------------------------------------------------

section "(g) AD-transactions on a pmem mount (test_pmem.sh: mounts of its own, cleaned up by its trap)"
run "libintact/test_pmem.sh: commit, abort, exit, errors, ENOSPC, SIGKILL mid-transaction" env INTACT="$INTACT" BUILD="$BUILD" bash "$HERE/test_pmem.sh"

# ---- (h) embedded mode: a pmem image in-process, and SQLite over it ------------------------

section "(h) embedded mode (test_embed.sh: images and a mount of its own, cleaned up by its trap)"
TIMEOUT=600 run "libintact/test_embed.sh: C, Python, one owner against a mount, SIGKILL, SQLite VFS and its kill -9 rounds" env INTACT="$INTACT" bash "$HERE/test_embed.sh"

echo
echo "libintact test: $PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
