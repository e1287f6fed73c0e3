"""intact.fs against a real intactfs mount; driven by libintact/test.sh.

    check_mount.py get PATH                 print "0xID FLAGS" of this process
    check_mount.py basic MNT                round trips, fds and files, the context manager
    check_mount.py inherit MNT NAME         subprocesses and forked children inherit
    check_mount.py notty DIR                OSError(ENOTTY) off the mount
    check_mount.py write FILE BYTES none|fsync|streamsync
                                            write the pattern in the current stream

Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any failed.
"""

import errno
import os
import subprocess
import sys

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


def pattern(n):
    # The same bytes as t_intact's pattern: the low byte of ((i + 1) * 2654435761) >> 11.
    return bytes(((i + 1) * 2654435761 >> 11) & 0xFF for i in range(n))


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
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
