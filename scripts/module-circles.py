#!/usr/bin/env python3
"""Lists pairs of modules of one crate whose code names each other through `crate::` paths
(an import circle, issue 27 item 6). Prints nothing and exits 0 when there are none.

Usage: python3 scripts/module-circles.py [crates/intact-*]  (default: every crate)"""
import glob
import os
import re
import sys

found = 0
for crate in sys.argv[1:] or sorted(glob.glob("crates/*")):
    src = os.path.join(crate, "src")
    mods = {}
    for f in glob.glob(src + "/**/*.rs", recursive=True):
        top = os.path.relpath(f, src)[:-3].split("/")[0]
        if top in ("lib", "main"):
            continue
        # Comments (doc links among them) are not imports.
        lines = open(f, encoding="utf-8").read().split("\n")
        text = "\n".join(l for l in lines if not l.lstrip().startswith("//"))
        mods.setdefault(top, set()).update(re.findall(r"\bcrate::(\w+)", text))
    for a, uses in sorted(mods.items()):
        for b in sorted(uses):
            if a < b and b in mods and a in mods[b]:
                print(f"{crate}: {a} <-> {b}")
                found += 1
sys.exit(1 if found else 0)
