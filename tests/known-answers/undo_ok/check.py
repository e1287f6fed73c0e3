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
# Recovery: a complete journal ("J" + old records) is rolled back into db. Then db holds the
# old or the new records; the new once "done" is printed.
j = read("journal")
db = read("db")
if j is not None and len(j) == 11 and j[:1] == b"J" and all(
    len(r) == 4 and r.isalpha() for r in j[1:].split(b"\n")[:2]
) and j.endswith(b"\n"):
    db = j[1:]
if db not in (b"AAAA\nAAAA\n", b"BBBB\nBBBB\n"):
    fail(f"db after recovery is {db!r} (journal: {j!r})")
if b"done" in out and db != b"BBBB\nBBBB\n":
    fail(f"done printed but db after recovery is {db!r} (journal: {j!r})")
