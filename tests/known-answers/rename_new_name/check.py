#!/usr/bin/env python3
# g is absent or complete; it exists and is complete once "done" is printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash
c = Crash(sys.argv)
c.one_of("g", (None, b"new\n"), "g is there but incomplete")
c.promised("done", "g", b"new\n")
