"""Checker of the warm-checker benchmark: the database opens and passes integrity_check.
Per process with two arguments, a warm server with none (intact.checker); BENCH_IN_PROCESS=1
judges in the server process instead of a forked child."""
import os
import sqlite3

from intact.checker import Inconsistent, main


def check(crash_dir, stdout_file):
    db = sqlite3.connect(os.path.join(crash_dir, "app.db"))
    ok = db.execute("pragma integrity_check").fetchone()[0]
    db.close()
    if ok != "ok":
        raise Inconsistent(ok)


if __name__ == "__main__":
    main(check, isolate=os.environ.get("BENCH_IN_PROCESS") != "1")
