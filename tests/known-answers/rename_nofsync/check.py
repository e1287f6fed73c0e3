#!/usr/bin/env python3
# f holds its old or its new contents, never anything else; the new once "done" is printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash
c = Crash(sys.argv)
c.one_of("f", (b"old\n", b"new\n"), "f holds neither old nor new contents")
c.promised("done", "f", b"new\n")
