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
# Every line of the log and of the table is a whole record; once "logged" is printed the
# record x=1 is in the log or in the table.
recs = []
for name in ("log", "table"):
    data = read(name) or b""
    if not data:
        continue
    for line in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        if line != b"x=1":
            fail(f"{name} holds a damaged record: {data!r}")
        recs.append(line)
if b"logged" in out and not recs:
    fail("logged printed but x=1 is neither in the log nor in the table")
