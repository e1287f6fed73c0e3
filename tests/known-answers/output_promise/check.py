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
# f holds a counter value, never less than the last value printed.
f = read("f")
if f not in (b"0\n", b"1\n", b"2\n"):
    fail(f"f is damaged: {f!r}")
printed = [int(x) for x in out.split()]
if printed and int(f) < printed[-1]:
    fail(f"{printed[-1]} printed but f is {f!r}")
