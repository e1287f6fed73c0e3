"""intact.fs's AD-transactions against a real pmem mount; driven by libintact/test_pmem.sh.

    check_pmem.py run A B commit|abort|exit|hold [READY]
                                in `with transaction([A, B])` replace both files with
                                TX_NEW bytes of the pattern XOR TX_XOR; commit: leave the
                                block normally; abort: raise in it; exit: tx_begin() and
                                exit without ending it; hold: tx_begin(), write, "ready" to
                                READY, wait to be killed
    check_pmem.py errors MNT OTHER BLOCK DIR
                                the errors and their messages (as t_tx errors)
    check_pmem.py nospace FILE BYTES
                                a transaction outgrows the log: OSError(ENOSPC); abortable

Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any failed.
"""

import errno
import os
import sys
import time

import intact
import intact.fs as ifs

TX_NEW = 65536
TX_XOR = 0x5A

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
    print(("ok: " if cond else "FAIL: ") + what, flush=True)


def pattern(n, xor=0):
    return bytes(((i * 7 + i // 251) ^ xor) & 0xFF for i in range(n))


def rewrite(f, data):
    f.seek(0)
    f.truncate()
    f.write(data)
    f.flush()


def run(a, b, mode, ready):
    new = pattern(TX_NEW, TX_XOR)
    fa, fb = open(a, "r+b", buffering=0), open(b, "r+b", buffering=0)
    if mode in ("exit", "hold"):
        tx = ifs.tx_begin([fa, fb])
        check(tx > 0, "tx_begin([a, b]) = %d" % tx)
        rewrite(fa, new)
        rewrite(fb, new)
        if mode == "exit":
            print("exiting with transaction %d open" % tx, flush=True)
            os._exit(1 if failures else 0)
        with open(ready, "w") as r:
            r.write("ready")
        while True:
            time.sleep(60)

    class Stop(Exception):
        pass

    try:
        with intact.transaction([a, fb]) as tx:
            check(isinstance(tx.id, int) and tx.id > 0, "with transaction([a, b]) as tx: id %d" % tx.id)
            rewrite(fa, new)
            rewrite(fb, new)
            os.fsync(fa.fileno())  # a no-op on pmem: commits nothing of the transaction
            if mode == "abort":
                raise Stop()
        check(mode == "commit", "the block ended normally: committed")
    except Stop:
        check(os.stat(a).st_size != TX_NEW, "raising in the block aborted it: a is no longer %d bytes" % TX_NEW)
        try:
            ifs.tx_commit(tx.id, fa)
            check(False, "commit after the abort fails")
        except OSError as e:
            check(e.errno == errno.EINVAL, "commit of the aborted transaction: OSError(EINVAL) %r" % e.strerror)
    fa.close()
    fb.close()


def expect(call, want, what):
    try:
        call()
    except OSError as e:
        check(e.errno == want and ifs.tx_strerror(want) in e.strerror,
              "%s: OSError(%s) %r" % (what, errno.errorcode.get(e.errno, e.errno), e.strerror))
        return
    check(False, "%s: no error (want %s)" % (what, errno.errorcode[want]))


def errors(mnt, other, block, offdir):
    paths = {k: os.path.join(d, "tp-" + k) for k, d in (("a", mnt), ("b", mnt), ("o", other), ("k", block), ("x", offdir))}
    for p in paths.values():
        open(p, "ab").close()
    a, b, o, k, x = (paths[c] for c in "abokx")
    tx = ifs.tx_begin(a)
    ifs.tx_commit(tx, mnt)
    expect(lambda: ifs.tx_commit(tx, mnt), errno.EINVAL, "commit of a committed transaction")
    tx = ifs.tx_begin([a])
    ifs.tx_abort(tx, b)
    expect(lambda: ifs.tx_commit(tx, a), errno.EINVAL, "commit of an aborted transaction")
    expect(lambda: ifs.tx_abort(tx, a), errno.EINVAL, "abort of an aborted transaction")
    expect(lambda: ifs.tx_commit(12345, a), errno.EINVAL, "commit of an unknown id")
    with open(a, "rb") as ro:
        expect(lambda: ifs.tx_begin(ro), errno.EBADF, "begin through a read-only descriptor")
        t0 = ifs.tx_begin(b)
        expect(lambda: ifs.tx_add(t0, ro), errno.EBADF, "add through a read-only descriptor")
        ifs.tx_abort(t0, b)
    tx = ifs.tx_begin(a)
    expect(lambda: ifs.tx_add(tx, o), errno.EXDEV, "add of a file on another pmem mount")
    expect(lambda: ifs.tx_add(tx, k), errno.EXDEV, "add of a file on a block intactfs mount")
    expect(lambda: ifs.tx_add(tx, x), errno.ENOTTY, "add of a file off intactfs")
    expect(lambda: ifs.tx_begin(a), errno.EBUSY, "begin on a file another transaction owns")
    t2 = ifs.tx_begin(b)
    expect(lambda: ifs.tx_add(t2, a), errno.EBUSY, "add of another transaction's file")
    ifs.tx_commit(t2, b)
    ifs.tx_commit(tx, a)
    expect(lambda: ifs.tx_begin([a, o]), errno.EXDEV, "tx_begin over files of two mounts")
    t3 = ifs.tx_begin(a)
    check(t3 > 0, "a is free again: the failed tx_begin aborted its transaction")
    ifs.tx_abort(t3, a)
    expect(lambda: ifs.tx_begin(k), errno.EOPNOTSUPP, "begin on a block intactfs mount")
    expect(lambda: ifs.tx_begin(x), errno.ENOTTY, "begin off intactfs")
    try:
        with ifs.transaction([a, o]):
            check(False, "transaction() over two mounts starts")
    except OSError as e:
        check(e.errno == errno.EXDEV, "transaction() over two mounts: OSError(EXDEV)")
    # The block ends the transaction itself: the context manager leaves it alone.
    with ifs.transaction(a) as t:
        t.abort()
    check(t.ended, "a block may end its transaction itself (%r)" % t)


def nospace(path, n):
    with open(path, "wb", buffering=0) as f:
        tx = ifs.tx_begin(f)
        done, err = 0, None
        chunk = b"\x44" * (128 << 10)
        while done < n:
            try:
                done += os.pwrite(f.fileno(), chunk, done)
            except OSError as e:
                err = e
                break
        check(err is not None and err.errno == errno.ENOSPC,
              "a transaction writing %d bytes fails with OSError(ENOSPC) after %d bytes" % (n, done))
        ifs.tx_abort(tx, f)
        check(os.fstat(f.fileno()).st_size == 0, "abortable; the file is empty again")


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "run" and len(argv) >= 5:
        run(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else os.devnull)
    elif cmd == "errors" and len(argv) == 6:
        errors(*argv[2:6])
    elif cmd == "nospace" and len(argv) == 4:
        nospace(argv[2], int(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
