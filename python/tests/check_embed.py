"""intact.embedded against a real pmem image opened in-process; driven by
libintact/test_embed.sh (which sets INTACT_EMBED_LIB).

    check_embed.py basic IMG     files, errors and AD-transactions (as t_embed basic)
    check_embed.py busy IMG      opening must fail with EBUSY ("in use"): a holder exists

Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any failed.
"""

import errno
import sys

from intact import embedded

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
    print(("ok: " if cond else "FAIL: ") + what, flush=True)


def raises(errnum, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return e.errno == errnum and bool(e.strerror)
    return False


def put(img, path, data):
    with img.open(path, "w") as f:
        f.pwrite(data, 0)


def get(img, path):
    try:
        with img.open(path) as f:
            return f.pread(1 << 16, 0)
    except FileNotFoundError:
        return None


def transactions(img):
    put(img, "pa", b"o" * 6000)
    put(img, "pb", b"o" * 6000)
    with img.open("pa", "r+") as a, img.open("pb", "r+") as b:
        with img.transaction([a, b]):
            a.pwrite(b"n" * 6000, 0)
            b.pwrite(b"n" * 6000, 0)
        check(get(img, "pa") == get(img, "pb") == b"n" * 6000, "with transaction(): committed, both new")
        try:
            with img.transaction([a, b]):
                a.pwrite(b"z" * 6000, 0)
                raise RuntimeError("the block fails")
        except RuntimeError:
            pass
        check(get(img, "pa") == b"n" * 6000, "an exception in the block aborts: pa unchanged")
        with img.transaction([a]) as t:
            a.pwrite(b"s" * 6000, 0)
            t.abort()
        check(get(img, "pa") == b"n" * 6000 and t.ended, "a block that aborts its transaction itself is left alone")
        tx = img.tx_begin([a])
        check(raises(errno.EBUSY, img.tx_begin, [b, a]), "EBUSY: a file of another open transaction")
        img.tx_abort(tx)
        check(raises(errno.EINVAL, img.tx_commit, tx), "EINVAL: a finished transaction")
    with img.open("pa") as ro:
        check(raises(errno.EBADF, img.tx_begin, [ro]), "EBADF: a read-only descriptor")


def basic(path):
    with embedded.Image(path) as img:
        check(raises(errno.EBUSY, embedded.Image, path), "a second open in the same process: EBUSY")
        put(img, "f", b"hello")
        check(get(img, "f") == b"hello" and img.stat("f")["size"] == 5, "write, read, stat")
        img.mkdir("d")
        img.rename("f", "d/g")
        check(get(img, "d/g") == b"hello" and get(img, "f") is None, "rename into a directory")
        check(img.listdir("d") == ["g"], "listdir")
        check(raises(errno.ENOENT, img.open, "none"), "ENOENT")
        transactions(img)
        check(img.counters()["fences"] > 0, "device counters")
    with embedded.Image(path) as img:
        check(get(img, "pa") == b"n" * 6000 and get(img, "d/g") == b"hello", "reopened: everything committed is there")


def busy(path):
    try:
        embedded.Image(path).close()
        check(False, "EBUSY expected: the image opened")
    except OSError as e:
        check(e.errno == errno.EBUSY and "in use" in e.strerror, "EBUSY: %s" % e.strerror)


if __name__ == "__main__":
    cmds = {"basic": basic, "busy": busy}
    if len(sys.argv) != 3 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2])
    sys.exit(1 if failures else 0)
