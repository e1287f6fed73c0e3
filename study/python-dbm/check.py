#!/usr/bin/env python3
"""Checker for the dbm.dumb workload: CHECKER <crash_dir> <stdout_file>.

Two layers (issue 32). Every rule runs; each failing rule prints
`rule: LAYER: NAME: CLASS: detail` on stderr, and the one `consequence: CLASS: detail` line
(thesis Table 4.3 class) comes from the first failing documented rule, else the first
failing lay rule. Exit 1 if any rule fails.

documented: what Python's documentation says a dbm.dumb object does (Doc/library/dbm.rst,
  "dbm.dumb" and the dbm interface it implements; Python 3.11). It states no crash
  behaviour at all (the module is "a last resort fallback"), so these rules only ask that a
  crashed store still behaves as the documented interface:
  - open:  dbm.dumb.open(file, "c") opens the database, creating it if needed;
  - read:  the object supports the mapping interface (get, keys) without raising;
  - write: a key stored through the interface reads back after close and reopen.
lay: what a user might expect although nothing documents it (README.md):
  - values:  every key holds a value the workload wrote for it; no unknown keys;
  - durable: what the workload had finished (sync(), close()) when it printed is still
    there: each key holds its value at that point or a later one.
"""
import dbm.dumb
import os
import sys


def val(key, gen, n=300):
    return (f"{key}:{gen}:" * 300)[:n].encode()


# The key-value history: after each printed line, what the store held (None = absent).
V = {"k0": val("k0", 1), "k1": val("k1", 1), "k2": val("k2", 1), "k3": None}
HISTORY = [("", {k: None for k in V})]
HISTORY.append(("synced 1", dict(V)))
V.update(k1=val("k1", 2), k3=val("k3", 1))
HISTORY.append(("closed 1", dict(V)))
V.update(k0=val("k0", 3, 700), k2=None)
HISTORY.append(("closed 2", dict(V)))

LAYERS = ("documented", "lay")


def rule_open(base, state):
    try:
        state["db"] = dbm.dumb.open(base, "c")
    except Exception as e:
        return ("cannot-open", f"dbm.dumb.open: {type(e).__name__}: {e}")
    return None


def rule_read(base, state):
    db = state.get("db")
    if db is None:
        return None  # the open rule failed: nothing to read
    try:
        state["got"] = {k: db.get(k.encode()) for k in V}
        state["keys"] = [k.decode("latin-1") for k in db.keys()]
    except Exception as e:
        return ("failed-reads-writes", f"reading: {type(e).__name__}: {e}")
    return None


def rule_values(base, state):
    if "got" not in state:
        return None
    extra = [k for k in state["keys"] if k not in V]
    if extra:
        return ("silent-error", f"keys nobody wrote: {extra}")
    for k, v in state["got"].items():
        if v not in [h[k] for _, h in HISTORY]:
            return ("silent-error", f"{k} holds a value never written ({len(v)} bytes: {v[:24]!r})")
    return None


def rule_durable(base, state):
    if "got" not in state:
        return None
    done = state["done"]
    for k, v in state["got"].items():
        if v not in [h[k] for _, h in HISTORY[done:]] and v in [h[k] for _, h in HISTORY]:
            what = "missing" if v is None else "an older value"
            return ("data-loss", f"after {HISTORY[done][0]!r} was printed, {k} is {what}")
    return None


def rule_write(base, state):
    db = state.pop("db", None)
    if db is None:
        return None
    try:
        db["new"] = b"x" * 10
        db.close()
        db = dbm.dumb.open(base, "r")
        ok = db[b"new"] == b"x" * 10
        db.close()
    except Exception as e:
        return ("failed-reads-writes", f"writing after the crash: {type(e).__name__}: {e}")
    return None if ok else ("failed-reads-writes", "a key written after the crash reads back wrong")


# In the order they run; write last (it modifies the store the other rules read).
RULES = [
    ("documented", "open", rule_open),
    ("documented", "read", rule_read),
    ("lay", "values", rule_values),
    ("lay", "durable", rule_durable),
    ("documented", "write", rule_write),
]


def main():
    crash, stdout_file = sys.argv[1], sys.argv[2]
    printed = open(stdout_file).read().split("\n")
    state = {"done": max(i for i, (line, _) in enumerate(HISTORY) if i == 0 or line in printed)}
    base = os.path.join(crash, "store")
    failed = []
    for layer, name, rule in RULES:
        assert layer in LAYERS
        got = rule(base, state)
        if got:
            failed.append((layer, name) + got)
            print(f"rule: {layer}: {name}: {got[0]}: {got[1]}", file=sys.stderr)
    if not failed:
        return 0
    first = next((f for f in failed if f[0] == "documented"), failed[0])
    print(f"layer: {first[0]}", file=sys.stderr)
    print(f"consequence: {first[2]}: {first[3]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    # A warm server under --checker-server, else one state (python/intact/checker.py).
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from intact.checker import main_argv
    main_argv(main)
