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
# g is absent or complete; it exists and is complete once "done" is printed.
g = read("g")
if g not in (None, b"new\n"):
    fail(f"g is there but incomplete: {g!r}")
if b"done" in out and g != b"new\n":
    fail(f"done printed but g is {g!r}")
