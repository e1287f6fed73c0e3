#!/usr/bin/env python3
# Redo logging (checklib.redo_log): db holds both old or both new records after recovery; the new once "committed" is printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash, redo_log
c = Crash(sys.argv)
redo_log(c)
