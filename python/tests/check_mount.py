"""intact.fs against a real intactfs mount; driven by libintact/test.sh.

    check_mount.py get PATH                 print "0xID FLAGS" of this process
    check_mount.py basic MNT                round trips, fds and files, the context manager
    check_mount.py inherit MNT NAME         subprocesses and forked children inherit
    check_mount.py notty DIR                OSError(ENOTTY) off the mount
    check_mount.py write FILE BYTES none|fsync|streamsync
                                            write the pattern in the current stream
    check_mount.py regions-errors MNT OTHER DIR
                                            atomic regions: the errors and their messages
                                            (OTHER: a second intactfs mount, DIR: off
                                            intactfs)
    check_mount.py regions-PART MNT         PART: abort (writes, a created file, a rename;
                                            fresh opens), cache (a descriptor opened
                                            before), subprocess (in the parent's region),
                                            exit (inside a region), atomic (the context
                                            manager), f2fs (F2FS atomic writes)
    check_mount.py region A B commit|atomic|hold [READY]
                                            A and B: REGION_OLD bytes of the pattern
                                            (fsynced), then in a region REGION_NEW bytes XOR
                                            REGION_XOR; commit: begin() and commit();
                                            atomic: in `with atomic()`; hold: syncs (no-ops
                                            in a region), "ready" to READY, wait to be killed

Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any failed.
"""

import errno
import fcntl
import os
import struct
import subprocess
import sys
import time

import intact.fs as ifs

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)


def get(path):
    sid, flags = ifs.getstream(path)
    print("0x%016x %d" % (sid, flags))


def basic(mnt):
    check(ifs.getstream(mnt) == (0, 0), "a fresh process is in the init stream: %r" % (ifs.getstream(mnt),))
    sid = ifs.setstream(mnt, "py-basic-1", ignore_fsync=True)
    check(sid == ifs.stream_id("py-basic-1"), "setstream returns the id of the name")
    check(ifs.getstream(mnt) == (sid, ifs.IGNORE_FSYNC), "getstream = (id, IGNORE_FSYNC): %r" % (ifs.getstream(mnt),))
    # Descriptors and file objects of a regular file on the mount.
    path = os.path.join(mnt, "py-basic-file")
    with open(path, "wb") as f:
        check(ifs.getstream(f) == (sid, 1), "getstream(file object)")
        ifs.setstream(f.fileno(), 0xDEADBEEF)
        check(ifs.getstream(f.fileno()) == (0xDEADBEEF, 0), "setstream(fd, numeric id) then getstream(fd)")
        f.write(b"x")
        f.flush()
        ifs.streamsync(f)
    os.unlink(path)
    # The context manager restores the previous stream and its flags, on error too.
    ifs.setstream(mnt, "py-outer", ignore_fsync=True)
    outer = ifs.stream_id("py-outer")
    with ifs.stream(mnt, "py-inner") as inner:
        check(ifs.getstream(mnt) == (inner, 0) and inner == ifs.stream_id("py-inner"), "inside stream(): (inner, 0)")
        with ifs.stream(mnt, 42, ignore_fsync=True):
            check(ifs.getstream(mnt) == (42, 1), "nested stream() with a numeric id")
        check(ifs.getstream(mnt) == (inner, 0), "the nested block restored the inner stream")
    check(ifs.getstream(mnt) == (outer, 1), "stream() restored the outer stream and its flag: %r" % (ifs.getstream(mnt),))
    try:
        with ifs.stream(mnt, "py-raises"):
            raise KeyError("boom")
    except KeyError:
        pass
    check(ifs.getstream(mnt) == (outer, 1), "stream() restores when the block raises")
    ifs.setstream(mnt, "init")
    check(ifs.getstream(mnt) == (0, 0), "setstream('init') returns to the init stream")


def inherit(mnt, name):
    sid = ifs.setstream(mnt, name)
    want = "0x%016x 0" % sid
    out = subprocess.run([sys.executable, __file__, "get", mnt], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
    check(out == want, "a subprocess inherits the stream: %s (want %s)" % (out, want))
    out = subprocess.run(["sh", "-c", '"$0" "$1" get "$2"', sys.executable, __file__, mnt], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
    check(out == want, "a grandchild (through sh) inherits the stream: %s" % out)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            ok = ifs.getstream(mnt)[0] == sid
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "a forked child inherits the stream")


def notty(d):
    calls = (
        ("getstream", lambda: ifs.getstream(d)), ("setstream", lambda: ifs.setstream(d, "x")), ("streamsync", lambda: ifs.streamsync(d)),
        ("osync", lambda: ifs.osync(d)), ("dsync", lambda: ifs.dsync(d)), ("durable", lambda: ifs.durable(d, 1, wait=True)),
        ("begin", lambda: ifs.begin(d)), ("commit", lambda: ifs.commit(d)), ("abort", lambda: ifs.abort(d)),
    )
    for name, call in calls:
        try:
            call()
            check(False, "%s(%s) raised nothing" % (name, d))
        except OSError as e:
            check(e.errno == errno.ENOTTY and "not on an intactfs mount" in str(e), "%s(%s) raises OSError(ENOTTY, not on an intactfs mount): %r" % (name, d, e))


def osync(path):
    """osync tickets, DURABLE polling and waiting, dsync, FSYNC_AS_OSYNC, bad tickets."""
    with open(path, "wb") as f:
        f.write(b"one")
        f.flush()
        t1 = ifs.osync(f)
        check(isinstance(t1, int) and t1 > 0, "osync returns a ticket (%r)" % (t1,))
        print("after osync, durable without waiting: %s" % ifs.durable(f, t1))
        f.write(b"two")
        f.flush()
        t2 = ifs.osync(f.fileno())
        check(t2 > t1, "a later osync's ticket is larger")
        ifs.dsync(f)
        check(ifs.durable(f, t1) and ifs.durable(f, t2), "after dsync both tickets are durable")
        f.write(b"three")
        f.flush()
        t3 = ifs.osync(path)
        check(ifs.durable(f, t3, wait=True) is True, "durable(wait=True) returns once the ticket is durable")
        try:
            ifs.durable(f, t3 + 10**6)
            check(False, "a ticket never issued raised nothing")
        except OSError as e:
            check(e.errno == errno.EINVAL, "a ticket never issued: OSError(EINVAL): %r" % (e,))
        for bad in (-1, "1", True, 1 << 64):
            try:
                ifs.durable(f, bad)
                check(False, "ticket %r raised nothing" % (bad,))
            except ValueError:
                check(True, "ticket %r: ValueError" % (bad,))
        sid = ifs.setstream(f, "py-osync", fsync_as_osync=True)
        check(ifs.getstream(f) == (sid, ifs.FSYNC_AS_OSYNC), "FSYNC_AS_OSYNC is a stream flag")
        try:
            ifs.setstream(f, "py-osync", ignore_fsync=True, fsync_as_osync=True)
            check(False, "both flags raised nothing")
        except OSError as e:
            check(e.errno == errno.EINVAL, "IGNORE_FSYNC with FSYNC_AS_OSYNC: OSError(EINVAL)")


def pattern(n, xor=0):
    # The same bytes as t_intact's pattern: the low byte of ((i + 1) * 2654435761) >> 11
    # (XOR xor).
    return bytes((((i + 1) * 2654435761 >> 11) & 0xFF) ^ xor for i in range(n))


def write(path, n, sync):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = pattern(n)
        while data:
            data = data[os.write(fd, data):]
        if sync == "fsync":
            os.fsync(fd)
        elif sync == "streamsync":
            ifs.streamsync(fd)
        elif sync == "osync":
            ifs.osync(fd)
        elif sync == "dsync":
            ifs.dsync(fd)
        elif sync != "none":
            raise SystemExit("sync must be none, fsync, streamsync, osync or dsync")
    finally:
        os.close(fd)


# ---- atomic regions --------------------------------------------------------------------

# The crash sections' files: old contents, then the region's (as in t_intact).
REGION_OLD = 4096
REGION_NEW = 65536
REGION_XOR = 0x5A

NESTED = "an atomic region is already open (regions do not nest)"
NO_REGION = "no atomic region is open"
OTHER_MOUNT = "no atomic region of this process on that file's mount"
OTHER_REGION = "the file belongs to another atomic region"
NOTTY = "not on an intactfs mount"

# Run by a subprocess in the parent's region: its own begin fails with EALREADY; it
# rewrites E and creates F.
INHERIT_CHILD = """
import errno, sys, intact.fs as ifs
mnt, e, f = sys.argv[1:]
try:
    ifs.begin(mnt)
    sys.exit("begin in the parent's region succeeded")
except OSError as x:
    if x.errno != errno.EALREADY:
        raise
for path, text in ((e, b"child-e"), (f, b"child-f")):
    with open(path, "wb") as out:
        out.write(text)
"""

# A subprocess that begins its own region, rewrites G, creates H and exits without commit.
EXIT_CHILD = """
import sys, intact.fs as ifs
mnt, g, h = sys.argv[1:]
ifs.begin(mnt)
for path, text in ((g, b"exit-g"), (h, b"exit-h")):
    with open(path, "wb") as out:
        out.write(text)
for path, text in ((g, b"exit-g"), (h, b"exit-h")):
    with open(path, "rb") as f:
        assert f.read() == text
"""


def put(path, data, sync=False):
    if isinstance(data, str):
        data = data.encode()
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def data(path):
    """The bytes in ``path`` through a fresh open, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def contents(path):
    """The text in ``path`` through a fresh open, or "<absent>"."""
    d = data(path)
    return "<absent>" if d is None else d.decode("utf-8", "replace")


def late(ok, want):
    """After a check of what fresh opens see right after a call failed: whether, and
    when, they see ``want`` ({path: contents}) within 3 s, to tell caches dropped late
    from a wrong result. "" if ``ok``."""
    if ok:
        return ""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:
        if all(contents(p) == w for p, w in want.items()):
            return " (seen %d ms later: the kernel's cached pages and entries were dropped only after the call returned)" % ((time.monotonic() - t0) * 1000)
        time.sleep(0.001)
    return " (not even 3 s later)"


def expect_error(call, want, what, message=None):
    """``call`` raises OSError(want), whose message contains ``message``."""
    try:
        call()
        check(False, "%s raised nothing (want OSError(%s))" % (what, errno.errorcode[want]))
    except OSError as e:
        ok = e.errno == want and (message is None or message in str(e))
        check(ok, "%s: OSError(%s, %r) (want %s%s)" % (what, errno.errorcode.get(e.errno, e.errno), e.strerror, errno.errorcode[want], ", %r" % message if message else ""))


def regions_errors(mnt, other, offdir):
    """The errors of the region calls and their messages."""
    a = os.path.join(mnt, "py-ra-a")
    put(a, "old-a", sync=True)

    # Without a region.
    expect_error(lambda: ifs.commit(mnt), errno.EINVAL, "commit without a region", NO_REGION)
    expect_error(lambda: ifs.abort(mnt), errno.EINVAL, "abort without a region", NO_REGION)
    expect_error(lambda: ifs.add(a), errno.EXDEV, "add without a region", OTHER_MOUNT)

    # In a region: nesting, setstream, add on a directory and on another mount's file, F2FS.
    ifs.begin(mnt)
    expect_error(lambda: ifs.begin(a), errno.EALREADY, "a nested begin", NESTED)
    expect_error(lambda: ifs.setstream(mnt, 0x1234), errno.EBUSY, "setstream inside a region")
    expect_error(lambda: ifs.add(mnt), errno.EINVAL, "add on a directory", "not a regular file")
    o = os.path.join(other, "py-ra-other")
    put(o, "other")
    expect_error(lambda: ifs.add(o), errno.EXDEV, "add on a file of another intactfs mount", OTHER_MOUNT)
    with open(a, "rb") as f:
        expect_error(lambda: ifs.add(f), errno.EBADF, "add through a read-only descriptor", "not a descriptor open for writing")
    ifs.add(a)  # a path is opened for writing
    with open(a, "r+b") as f:
        expect_error(lambda: fcntl.ioctl(f.fileno(), ifs.F2FS_IOC_START_ATOMIC_WRITE, 0), errno.EBUSY, "F2FS START_ATOMIC_WRITE inside a BEGIN region")
    ifs.abort(mnt)
    expect_error(lambda: ifs.abort(mnt), errno.EINVAL, "a second abort (the region ended)", NO_REGION)

    # Off intactfs.
    n = os.path.join(offdir, "py-ra-off")
    put(n, "off")
    expect_error(lambda: ifs.begin(n), errno.ENOTTY, "begin on a file off intactfs", NOTTY)
    expect_error(lambda: ifs.add(n), errno.ENOTTY, "add on a file off intactfs", NOTTY)
    os.unlink(n)


def regions_abort(mnt):
    """Abort: writes revert, a created file vanishes, a rename is undone; fresh opens see it
    at once."""
    a, b, c, d, d2 = (os.path.join(mnt, x) for x in ("py-ra-a", "py-ra-b", "py-ra-c", "py-ra-d", "py-ra-d2"))
    put(a, "old-a", sync=True)
    put(b, "old-b", sync=True)
    put(d, "old-d", sync=True)
    ifs.begin(mnt)
    put(a, "new-a, longer")
    put(b, "new-b")
    put(c, "created")
    os.rename(d, d2)
    check(contents(a) == "new-a, longer" and contents(c) == "created" and contents(d2) == "old-d" and contents(d) == "<absent>",
          "no isolation: the region's changes are visible at once")
    ifs.abort(mnt)
    # What fresh opens see right after ABORT returned, then compared.
    sa, sb, sc, sd, sd2 = (contents(x) for x in (a, b, c, d, d2))
    want = {a: "old-a", b: "old-b", c: "<absent>", d: "old-d", d2: "<absent>"}
    ok = sa == "old-a" and sb == "old-b"
    check(ok, "right after abort, fresh opens read the old a and b (%r, %r)%s" % (sa, sb, late(ok, want)))
    ok = sc == "<absent>"
    check(ok, "the created c is gone (%s)%s" % (sc, late(ok, want)))
    ok = sd == "old-d" and sd2 == "<absent>"
    check(ok, "the rename is undone: d %r, d2 %s%s" % (sd, sd2, late(ok, want)))


def regions_cache(mnt):
    """Abort seen through a descriptor opened before the region."""
    a = os.path.join(mnt, "py-rc-a")
    put(a, "old-a", sync=True)
    pre = os.open(a, os.O_RDONLY | os.O_CLOEXEC)
    try:
        got = os.pread(pre, 256, 0)
        check(got == b"old-a", "a descriptor opened before the region reads %r" % got)
        ifs.begin(mnt)
        put(a, "new-a, longer")
        got = os.pread(pre, 256, 0)
        check(got == b"new-a, longer", "no isolation: the old descriptor reads the region's %r" % got)
        ifs.abort(mnt)
        got = os.pread(pre, 256, 0)
        late = ""
        if got != b"old-a":
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3 and os.pread(pre, 256, 0) != b"old-a":
                time.sleep(0.001)
            late = " (it reads b'old-a' %d ms later: ABORT returned before the kernel's cached pages were dropped)" % ((time.monotonic() - t0) * 1000)
        check(got == b"old-a", "right after abort, the descriptor opened before the region reads %r (want b'old-a')%s" % (got, late))
    finally:
        os.close(pre)


def regions_subprocess(mnt):
    """A subprocess is in the parent's region; the parent's abort undoes its changes."""
    e, f = os.path.join(mnt, "py-ri-e"), os.path.join(mnt, "py-ri-f")
    put(e, "old-e", sync=True)
    ifs.begin(mnt)
    r = subprocess.run([sys.executable, "-c", INHERIT_CHILD, mnt, e, f])
    check(r.returncode == 0, "a subprocess is in the parent's region (its begin: EALREADY), writes e and creates f")
    check(contents(e) == "child-e" and contents(f) == "child-f", "the subprocess's changes are visible")
    ifs.abort(mnt)
    se, sf = contents(e), contents(f)
    ok = se == "old-e" and sf == "<absent>"
    check(ok, "right after it, the parent's abort undid the subprocess's changes: e %r, f %s%s" % (se, sf, late(ok, {e: "old-e", f: "<absent>"})))


def regions_exit(mnt):
    """A process that exits inside its region: the daemon aborts it."""
    g, h = os.path.join(mnt, "py-rx-g"), os.path.join(mnt, "py-rx-h")
    put(g, "old-g", sync=True)
    r = subprocess.run([sys.executable, "-c", EXIT_CHILD, mnt, g, h])
    check(r.returncode == 0, "a subprocess begins a region, writes g, creates h and exits without commit")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 and not (contents(g) == "old-g" and contents(h) == "<absent>"):
        time.sleep(0.02)
    waited = (time.monotonic() - t0) * 1000
    check(contents(g) == "old-g" and contents(h) == "<absent>",
          "the daemon aborted the exited process's region within 3 s (%d ms): g %r, h %s" % (waited, contents(g), contents(h)))


def regions_atomic(mnt):
    """The atomic() context manager: commit on a normal exit, abort if the block raises."""
    m1, m2, m2x, m3 = (os.path.join(mnt, x) for x in ("py-rm-1", "py-rm-2", "py-rm-2x", "py-rm-3"))
    put(m1, "old-1", sync=True)
    put(m2, "old-2", sync=True)
    with ifs.atomic(mnt):
        put(m1, "atomic-1")
        put(m2, "atomic-2")
        expect_error(lambda: ifs.begin(mnt), errno.EALREADY, "inside atomic(): begin", NESTED)
    check(contents(m1) == "atomic-1" and contents(m2) == "atomic-2", "atomic() committed on a normal exit: %r, %r" % (contents(m1), contents(m2)))
    expect_error(lambda: ifs.commit(mnt), errno.EINVAL, "after atomic(): commit (in no region)", NO_REGION)
    raised = False
    try:
        with ifs.atomic(mnt):
            put(m1, "raised-1")
            put(m3, "created")
            os.rename(m2, m2x)
            raise KeyError("boom")
    except KeyError:
        raised = True
    got = {p: contents(p) for p in (m1, m2, m2x, m3)}
    want = {m1: "atomic-1", m2: "atomic-2", m2x: "<absent>", m3: "<absent>"}
    check(raised, "atomic() re-raised the block's exception")
    ok = got == want
    check(ok, "atomic() aborted when the block raised: 1 %r, 2 %r, 2x %s, 3 %s%s" % (got[m1], got[m2], got[m2x], got[m3], late(ok, want)))
    expect_error(lambda: ifs.abort(mnt), errno.EINVAL, "after a raising atomic() block: abort (in no region)", NO_REGION)
    with ifs.atomic(m1):  # the path is held open: the block may rename it
        os.rename(m1, m3)
    check(contents(m1) == "<absent>" and contents(m3) == "atomic-1", "atomic(FILE) commits after the block renamed FILE")


def regions_f2fs(mnt):
    """F2FS atomic writes."""
    q = os.path.join(mnt, "py-rf-q")
    put(q, "old-q", sync=True)
    fd = os.open(q, os.O_RDWR | os.O_CLOEXEC)
    feat = struct.unpack("=I", fcntl.ioctl(fd, ifs.F2FS_IOC_GET_FEATURES, bytes(4)))[0]
    check(feat & ifs.F2FS_FEATURE_ATOMIC_WRITE, "F2FS GET_FEATURES: 0x%x (want bit 0x4)" % feat)
    fcntl.ioctl(fd, ifs.F2FS_IOC_START_ATOMIC_WRITE, 0)
    os.pwrite(fd, b"NEW", 0)
    fcntl.ioctl(fd, ifs.F2FS_IOC_ABORT_VOLATILE_WRITE, 0)
    got = contents(q)
    check(got == "old-q", "F2FS START, write, ABORT_VOLATILE: reverted (%r)%s" % (got, late(got == "old-q", {q: "old-q"})))
    fcntl.ioctl(fd, ifs.F2FS_IOC_START_ATOMIC_WRITE, 0)
    os.pwrite(fd, b"F2F", 0)
    fcntl.ioctl(fd, ifs.F2FS_IOC_COMMIT_ATOMIC_WRITE, 0)
    check(contents(q) == "F2F-q", "F2FS START, write, COMMIT: kept (%r)" % contents(q))
    fcntl.ioctl(fd, ifs.F2FS_IOC_START_ATOMIC_WRITE, 0)
    os.pwrite(fd, b"ZZZ", 0)
    os.close(fd)
    got = contents(q)
    check(got == "F2F-q", "F2FS START, write, close without COMMIT: reverted (%r)%s" % (got, late(got == "F2F-q", {q: "F2F-q"})))
    dfd = os.open(mnt, os.O_RDONLY | os.O_CLOEXEC)
    try:
        expect_error(lambda: fcntl.ioctl(dfd, ifs.F2FS_IOC_START_ATOMIC_WRITE, 0), errno.EINVAL, "F2FS START on a directory")
    finally:
        os.close(dfd)


def region(a, b, mode, ready):
    """The crash sections' region (see the usage at the top)."""
    if mode not in ("commit", "atomic", "hold") or (mode == "hold") != (ready is not None):
        raise SystemExit("region A B commit|atomic|hold [READY] (READY with hold only)")
    old, new = pattern(REGION_OLD), pattern(REGION_NEW, REGION_XOR)
    for p in (a, b):
        put(p, old, sync=True)
    mnt = os.path.dirname(os.path.abspath(a))

    def writes():
        put(a, new)
        put(b, new)
        check(data(a) == new and data(b) == new, "in the region: both files show their new contents")

    if mode == "atomic":
        with ifs.atomic(mnt):
            writes()
        check(data(a) == new and data(b) == new, "after the atomic() block both files show their new contents")
        return
    ifs.begin(mnt)
    writes()
    if mode == "commit":
        ifs.commit(mnt)
        check(data(a) == new and data(b) == new, "after commit both files show their new contents")
        expect_error(lambda: ifs.commit(mnt), errno.EINVAL, "a second commit", NO_REGION)
        return
    t0 = time.monotonic()
    with open(a, "rb+") as f, open(b, "rb+") as g:
        os.fsync(f.fileno())
        os.fdatasync(g.fileno())
        ifs.dsync(f)
        ifs.osync(g)
        ifs.streamsync(f)
    check(True, "fsync, fdatasync, dsync, osync and streamsync inside the region return (in %d ms)" % ((time.monotonic() - t0) * 1000))
    # Nothing of this process stays open on the mount: the crash removes it.
    with open(ready + ".tmp", "w") as f:
        f.write("failed\n" if failures else "ready\n")
    os.rename(ready + ".tmp", ready)
    time.sleep(60)  # the test kills it
    raise SystemExit(1)


REGION_PARTS = {
    "abort": regions_abort, "cache": regions_cache, "subprocess": regions_subprocess,
    "exit": regions_exit, "atomic": regions_atomic, "f2fs": regions_f2fs,
}


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "get" and len(argv) == 3:
        get(argv[2])
    elif cmd == "basic" and len(argv) == 3:
        basic(argv[2])
    elif cmd == "inherit" and len(argv) == 4:
        inherit(argv[2], argv[3])
    elif cmd == "notty" and len(argv) == 3:
        notty(argv[2])
    elif cmd == "osync" and len(argv) == 3:
        osync(argv[2])
    elif cmd == "write" and len(argv) == 5:
        write(argv[2], int(argv[3]), argv[4])
    elif cmd == "regions-errors" and len(argv) == 5:
        regions_errors(argv[2], argv[3], argv[4])
    elif cmd.startswith("regions-") and cmd[8:] in REGION_PARTS and len(argv) == 3:
        REGION_PARTS[cmd[8:]](argv[2])
    elif cmd == "region" and len(argv) in (5, 6):
        region(argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else None)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
