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
# f holds its old or its new contents, never anything else; the new once "done" is printed.
f = read("f")
if f not in (b"old\n", b"new\n"):
    fail(f"f holds neither old nor new contents: {f!r}")
if b"done" in out and f != b"new\n":
    fail(f"done printed but f is {f!r}")
