#!/usr/bin/env python3
# Every line of the log and of the table is a whole record; once "logged" is printed the
# record x=1 is in the log or in the table.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash, fail
c = Crash(sys.argv)
recs = []
for name in ("log", "table"):
    data = c.read(name) or b""
    if not data:
        continue
    for line in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        if line != b"x=1":
            fail(f"{name} holds a damaged record: {data!r}")
        recs.append(line)
if b"logged" in c.out and not recs:
    fail("logged printed but x=1 is neither in the log nor in the table")
