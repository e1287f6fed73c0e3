#!/usr/bin/env python3
# Undo logging (checklib.undo_journal): db holds the old or the new records after recovery; the new once "done" is printed.
import os, sys
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Crash, undo_journal
c = Crash(sys.argv)
undo_journal(c)
