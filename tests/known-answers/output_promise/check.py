#!/usr/bin/env python3
# f holds a counter value, never less than the last value printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash, fail
c = Crash(sys.argv)
f = c.one_of("f", (b"0\n", b"1\n", b"2\n"), "f is damaged")
printed = [int(x) for x in c.out.split()]
if printed and int(f) < printed[-1]:
    fail(f"{printed[-1]} printed but f is {f!r}")
