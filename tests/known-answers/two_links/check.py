#!/usr/bin/env python3
# a and b appear together or not at all.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash, fail
c = Crash(sys.argv)
a, b = c.exists("a"), c.exists("b")
if a != b:
    fail(f"only one of the two links exists (a: {a}, b: {b})")
