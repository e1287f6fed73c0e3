"""Where a forking checker server's time per state goes (docs/performance.md, "Checkers").

Forks N children from this process as intact.checker does (the server's warm-up of what
every child runs, unless BENCH_COLD=1; a pipe for the verdict, the check run by
intact.checker.judge, os._exit) and measures, per state, the CPU time and
minor page faults of: the parent's os.fork() call; the child from its start to the end of
the interpreter's after-fork work (at-fork hooks of imported modules such as threading
and random); the check in the child; the child's verdict and exit as the parent sees
them (from the fork's return to the child reaped). For comparison, the same check in this
process. The state is a 20-row SQLite database made here in /dev/shm (removed at exit).

    PYTHONPATH=python python3 bench/checkers/fork_phases.py [N] [sqlite|trivial]
    PYTHONPATH=python python3 -S bench/checkers/fork_phases.py    # no site imports
"""

import json
import os
import resource
import shutil
import sqlite3
import sys
import time

from intact.checker import _warm_children_path, judge

# The benchmark's own checker (bench.sh runs it as a warm server), imported, not copied.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sqlite_check import check as sqlite_check  # noqa: E402


def trivial_check(crash_dir, stdout_file):
    pass


def snap():
    return time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID), resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_minflt


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    check = {"sqlite": sqlite_check, "trivial": trivial_check}[sys.argv[2] if len(sys.argv) > 2 else "sqlite"]
    # Not tempfile: it imports random, whose at-fork hook would then run in every child.
    tmp = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp", "fork-phases.%d" % os.getpid())
    os.mkdir(tmp)
    try:
        crash_dir, stdout_file = os.path.join(tmp, "crash"), os.path.join(tmp, "stdout")
        os.mkdir(crash_dir)
        open(stdout_file, "w").close()
        db = sqlite3.connect(os.path.join(crash_dir, "app.db"))
        db.execute("create table t(k integer primary key, v text)")
        for i in range(20):
            db.execute("insert into t values(?, ?)", (i, "x" * 100))
            db.commit()
        db.close()
        if os.environ.get("BENCH_COLD") != "1":
            _warm_children_path(True)  # as the helper's server does before its first fork
        total = [0.0] * 12
        k0 = children()
        for _ in range(n):
            r, w = os.pipe()
            s0 = snap()
            pid = os.fork()
            if pid == 0:
                s1 = snap()  # a child's CPU time and fault counts start at 0
                verdict = judge(check, crash_dir, stdout_file)
                s2 = snap()
                os.write(w, json.dumps([verdict, s1, s2]).encode())
                os._exit(0)
            s0b = snap()
            os.close(w)
            data = b""
            while True:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                data += chunk
            os.close(r)
            os.waitpid(pid, 0)
            s3 = snap()
            verdict, (c1, f1), (c2, f2) = json.loads(data)
            assert verdict == {"verdict": "pass"}, verdict
            for i, x in enumerate((s0b[0] - s0[0], s0b[1] - s0[1], c1, f1, c2 - c1, f2 - f1, s3[0] - s0b[0], s3[1] - s0b[1])):
                total[i] += x
        k1 = children()
        # What the children cost in all (getrusage counts them once reaped) less the two
        # phases they measured themselves: the verdict's write and the exit.
        total[8], total[9] = k1[0] - k0[0] - total[2] - total[4], k1[1] - k0[1] - total[3] - total[5]
        s0 = snap()
        for _ in range(n):
            judge(check, crash_dir, stdout_file)
        s1 = snap()
        total[10], total[11] = s1[0] - s0[0], s1[1] - s0[1]
    finally:
        shutil.rmtree(tmp)
    names = [
        "parent: os.fork()",
        "child: start and after-fork hooks",
        "child: the check",
        "parent: fork returned .. child reaped",
        "child: verdict written, exit",
        "the check in this process (no fork)",
    ]
    hooks = sorted(m for m in ("threading", "random", "logging", "multiprocessing") if m in sys.modules)
    print("%s, %d states, python3%s, modules with at-fork hooks: %s" % (
        check.__name__, n, " -S" if sys.flags.no_site else "", ", ".join(hooks) or "none"))
    for i, name in enumerate(names):
        print("  %-40s %6.3f ms CPU  %5.0f minor faults" % (name, total[2 * i] / n * 1e3, total[2 * i + 1] / n))


if __name__ == "__main__":
    main()
