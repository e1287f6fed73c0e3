#!/usr/bin/env python3
# Once "done" is printed, d/f exists with its record.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash
c = Crash(sys.argv)
c.promised("done", "d/f", b"x\n")
