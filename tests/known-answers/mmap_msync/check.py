#!/usr/bin/env python3
# f's first record is old or new, its second untouched; new once "done" is printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash
c = Crash(sys.argv)
c.one_of("f", (b"AAAA\nAAAA\n", b"BBBB\nAAAA\n"), "f is damaged")
c.promised("done", "f", b"BBBB\nAAAA\n")
