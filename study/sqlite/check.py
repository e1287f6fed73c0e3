#!/usr/bin/env python3
"""SQLite study checker: CHECKER <crash_dir> <stdout_file> (ALICE contract).

Opens the crashed database as a user would (SQLite rolls a hot journal back or
replays the WAL on open), then checks, in order:
  - the database opens and `PRAGMA integrity_check` says ok;
  - atomicity and ordering: the rows are exactly 1..k, each with its full value;
  - durability: the table exists if "created" was printed, and every row whose
    "committed N" was printed is present (SQLite documents that a committed
    transaction survives a power loss with synchronous=FULL; see README.md);
  - the database still accepts a write.
On failure prints `consequence: CLASS: detail` (thesis Table 4.3) and exits 1.
"""
import os
import sqlite3
import sys


def fail(cls, detail):
    print(f"consequence: {cls}: {detail}", file=sys.stderr)
    sys.exit(1)


def main():
    crash, stdout_file = sys.argv[1], sys.argv[2]
    printed = open(stdout_file, errors="replace").read().split("\n")
    created = "created" in printed
    committed = [int(l.split()[1]) for l in printed if l.startswith("committed ")]
    path = os.path.join(crash, "test.db")
    if not os.path.exists(path):
        if created:
            fail("data-loss", "test.db is missing although the table's creation was reported")
        return
    try:
        db = sqlite3.connect(path, isolation_level=None)
        ok = db.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.DatabaseError as e:
        fail("cannot-open", f"opening test.db: {e}")
    if ok != [("ok",)]:
        fail("silent-error", f"integrity_check: {ok[:3]}")
    try:
        has_t = db.execute("SELECT count(*) FROM sqlite_master WHERE name='t'").fetchone()[0] == 1
    except sqlite3.DatabaseError as e:
        fail("failed-reads-writes", f"reading the schema: {e}")
    if not has_t:
        if created:
            fail("data-loss", "table t is missing although its creation was reported")
        rows = []
    else:
        try:
            rows = db.execute("SELECT id, v FROM t ORDER BY id").fetchall()
        except sqlite3.DatabaseError as e:
            fail("failed-reads-writes", f"SELECT from t: {e}")
    ids = [r[0] for r in rows]
    if ids != list(range(1, len(ids) + 1)):
        fail("silent-error", f"rows are not a prefix of the committed ones: ids {ids}")
    for i, v in rows:
        if v != chr(64 + i) * 1500:
            fail("silent-error", f"row {i} has a wrong value ({len(v)} bytes, starts {v[:8]!r})")
    lost = sorted(set(committed) - set(ids))
    if lost:
        fail("data-loss", f"committed rows {lost} are missing (present: {ids})")
    try:
        if not has_t:
            db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        db.execute("INSERT INTO t VALUES(1000, 'x')")
        db.close()
    except sqlite3.DatabaseError as e:
        fail("failed-reads-writes", f"writing after recovery: {e}")


if __name__ == "__main__":
    main()
