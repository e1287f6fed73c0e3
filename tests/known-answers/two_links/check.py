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
# a and b appear together or not at all.
a, b = os.path.lexists(os.path.join(d, "a")), os.path.lexists(os.path.join(d, "b"))
if a != b:
    fail(f"only one of the two links exists (a: {a}, b: {b})")
