#!/usr/bin/env python3
# ALICE contract: check.py CRASH_DIR STDOUT_FILE; exit 0 when the crash state is consistent.
import os, sys
d, out = sys.argv[1], open(sys.argv[2], "rb").read()
def read(name):
    p = os.path.join(d, name)
    return open(p, "rb").read() if os.path.isfile(p) else None
def fail(why):
    print(why, file=sys.stderr)
    sys.exit(1)
# Recovery: a log holding the whole records and its commit mark is replayed into db. Then
# db holds both old or both new records; the new once "committed" is printed.
log = read("log")
db = read("db")
if log == b"BBBB\nBBBB\nC":
    db = b"BBBB\nBBBB\n"
if db not in (b"AAAA\nAAAA\n", b"BBBB\nBBBB\n"):
    fail(f"db after recovery is {db!r} (log: {log!r})")
if b"committed" in out and db != b"BBBB\nBBBB\n":
    fail(f"committed printed but db after recovery is {db!r} (log: {log!r})")
