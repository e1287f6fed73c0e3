#!/usr/bin/env python3
"""Checker for the dbm.dumb workload: CHECKER <crash_dir> <stdout_file>.

dbm.dumb documents no crash guarantee; the expectations are a lay user's (README.md):
  - the store opens the way the application opens it (flag "c");
  - every key maps to a value the workload wrote for it (no torn or foreign value);
  - what the workload had finished (sync(), close()) when it printed is still there:
    each key holds the value it had then or a later one.
Then it writes a key and reads it back. On failure: `consequence: CLASS: detail`, exit 1.
"""
import dbm.dumb
import os
import sys


def val(key, gen, n=300):
    return (f"{key}:{gen}:" * 300)[:n].encode()


# The key-value history: after each printed line, what the store held (None = absent).
V = {"k0": val("k0", 1), "k1": val("k1", 1), "k2": val("k2", 1), "k3": None}
HISTORY = [("", {k: None for k in V})]
HISTORY.append(("synced 1", dict(V)))
V.update(k1=val("k1", 2), k3=val("k3", 1))
HISTORY.append(("closed 1", dict(V)))
V.update(k0=val("k0", 3, 700), k2=None)
HISTORY.append(("closed 2", dict(V)))


def fail(cls, detail):
    print(f"consequence: {cls}: {detail}", file=sys.stderr)
    sys.exit(1)


def main():
    crash, stdout_file = sys.argv[1], sys.argv[2]
    printed = open(stdout_file).read().split("\n")
    done = max(i for i, (line, _) in enumerate(HISTORY) if i == 0 or line in printed)
    # Values each key may hold: its value at the last printed point or any later one.
    allowed = {k: [h[k] for _, h in HISTORY[done:]] for k in V}
    base = os.path.join(crash, "store")
    try:
        db = dbm.dumb.open(base, "c")
    except Exception as e:
        fail("cannot-open", f"dbm.dumb.open: {type(e).__name__}: {e}")
    try:
        got = {k: db.get(k.encode()) for k in V}
        extra = [k for k in db.keys() if k.decode("latin-1") not in V]
    except Exception as e:
        fail("failed-reads-writes", f"reading: {type(e).__name__}: {e}")
    if extra:
        fail("silent-error", f"keys nobody wrote: {extra}")
    for k, v in got.items():
        ever = [h[k] for _, h in HISTORY]
        if v not in ever:
            fail("silent-error", f"{k} holds a value never written ({len(v)} bytes: {v[:24]!r})")
        if v not in allowed[k]:
            what = "missing" if v is None else "an older value"
            fail("data-loss", f"after {HISTORY[done][0]!r} was printed, {k} is {what}")
    try:
        db["new"] = b"x" * 10
        db.close()
        db = dbm.dumb.open(base, "r")
        assert db[b"new"] == b"x" * 10
        db.close()
    except Exception as e:
        fail("failed-reads-writes", f"writing after the crash: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
