#!/usr/bin/env python3
# Once "done" is printed, dst is a complete copy of src.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash
c = Crash(sys.argv)
c.promised("done", "dst", b"hello\n")
