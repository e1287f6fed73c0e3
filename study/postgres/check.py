#!/usr/bin/env python3
"""intact checker for the PostgreSQL study (study/postgres/README.md).

    check.py CRASH_DIR STDOUT_FILE

CRASH_DIR holds pgdata/ (a crash state of the cluster made by study_init and changed by
workload.sh); STDOUT_FILE holds what the workload had printed when the crash happened:
"created" after CREATE TABLE t returned, "committed N" after the transaction inserting
row (N, 10*N) returned, "checkpoint", "stopped".

Does what a user does after a power failure -- give the files back to the postgres user,
chmod 700 pgdata, remove a stale postmaster.pid, start the server (it runs crash recovery
by itself) -- then runs every rule, in two layers (issue 32): each failing rule prints
`rule: LAYER: NAME: CLASS: detail`, and the one consequence line comes from the first
failing documented rule, else the first failing lay rule (`layer: ...` says which).
documented (PostgreSQL 15 documentation, chapter 30 "Reliability and the Write-Ahead Log":
WAL lets the server recover the database after a crash, and with fsync and
synchronous_commit on, their defaults, a transaction is durable once its commit returns):
  open        the server accepts connections within START_WAIT seconds (if not, no other
              rule can run)
  atomic      every row of t is one the workload inserted: id in 1..6, v = 10*id, no
              duplicates (a rolled-back or torn insert never shows)
  durable     t exists if "created" was printed; every row whose "committed N" was printed
              is present
lay:
  ordered     the ids form a prefix 1..k of the inserts (the transactions were run one
              after the other: a later one cannot survive without an earlier one; expected
              from WAL's sequential replay, not stated as a guarantee)
  writable    a new table can be created and written, a new row of t can be inserted and
              read back; both are then removed again (so that rerunning the checker on
              the same directory gives the same verdict) and a CHECKPOINT succeeds
All of it within BUDGET seconds (below intact check's default --timeout of 60 s).
Exit 0 = consistent; 1 = inconsistent, the rule lines and one "consequence: CLASS: detail"
line on stderr, followed by the tail of the server log; 2 = usage error.

The server is always stopped (immediate shutdown, SIGKILL after 5 s), also on failure or
SIGTERM; its socket and log live in CRASH_DIR/.intact-pg (or a temp dir if that path is
too long for a unix socket), which is removed at the end. Port 55432 + INTACT_WORKER.
Python 3 standard library only; run as root.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")  # study.sh sets the -g build
START_WAIT = 20.0      # seconds for startup + crash recovery
QUERY_WAIT = 10.0      # seconds per psql call
BUDGET = 45.0          # seconds for start + queries: stays below intact's --timeout (60 s)
STOP_WAIT = 5.0        # seconds between immediate shutdown and SIGKILL
ROWS = 6               # the workload inserts rows 1..ROWS
AS_PG = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
         "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


class Inconsistent(Exception):
    def __init__(self, cls, detail):
        super().__init__(f"{cls}: {detail}")
        self.cls, self.detail = cls, detail


class Server:
    def __init__(self, crash_dir):
        self.data = os.path.join(os.path.abspath(crash_dir), "pgdata")
        self.port = 55432 + int(os.environ.get("INTACT_WORKER", "0") or 0)
        self.proc = None
        self.tmp = None
        self.deadline = time.monotonic() + BUDGET
        work = os.path.join(os.path.abspath(crash_dir), ".intact-pg")
        # sun_path holds 107 bytes: "<dir>/.s.PGSQL.<port>" must fit.
        if len(work) + len(f"/.s.PGSQL.{self.port}") > 100:
            self.tmp = work = tempfile.mkdtemp(prefix="intact-pg-check.")
        else:
            os.makedirs(work, exist_ok=True)
        self.work = work
        shutil.chown(work, "postgres", "postgres")
        self.log_path = os.path.join(work, "server.log")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self.env["PGCONNECT_TIMEOUT"] = "10"

    # --- the steps a user takes after the crash ---------------------------------------
    def prepare(self):
        if not os.path.isdir(self.data):
            raise Inconsistent("cannot-open", "pgdata is missing")
        for root, dirs, files in os.walk(self.data):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.lchown(name, _uid("postgres"), _gid("postgres"))
        os.chmod(self.data, 0o700)
        try:
            os.unlink(os.path.join(self.data, "postmaster.pid"))
        except FileNotFoundError:
            pass

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                AS_PG + [f"{PG_BIN}/postgres", "-D", self.data, "-k", self.work,
                         "-p", str(self.port), "-c", "listen_addresses=",
                         # DSM segments as files in pgdata/pg_dynshmem, not /dev/shm:
                         # nothing leaks if the server has to be killed
                         "-c", "dynamic_shared_memory_type=mmap"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env, cwd="/")
        deadline = time.monotonic() + START_WAIT
        while True:
            r = subprocess.run([f"{PG_BIN}/pg_isready", "-q", "-h", self.work, "-p", str(self.port),
                                "-U", "postgres", "-d", "postgres", "-t", "2"],
                               env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                return
            if self.proc.poll() is not None:
                raise Inconsistent("cannot-open", f"the server exited during startup "
                                   f"(status {self.proc.returncode})")
            if time.monotonic() > deadline:
                raise Inconsistent("cannot-open", f"the server did not accept connections "
                                   f"within {START_WAIT:.0f} s")
            time.sleep(0.05)

    def sql(self, query, what):
        """Rows of `query` (psql -A -t, '|' separated); failed-reads-writes on any error."""
        wait = min(QUERY_WAIT, self.deadline - time.monotonic())
        if wait <= 0:
            raise Inconsistent("failed-reads-writes", f"{what}: the checker's {BUDGET:.0f} s ran out")
        try:
            r = subprocess.run([f"{PG_BIN}/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                                "-h", self.work, "-p", str(self.port), "-U", "postgres",
                                "-d", "postgres", "-c", query],
                               env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=wait)
        except subprocess.TimeoutExpired:
            raise Inconsistent("failed-reads-writes", f"{what}: no answer within {wait:.0f} s")
        if r.returncode != 0:
            err = " ".join(r.stderr.split()) or f"psql exit status {r.returncode}"
            cls = "cannot-open" if "connection to server" in err else "failed-reads-writes"
            raise Inconsistent(cls, f"{what}: {err}")
        return [line.split("|") for line in r.stdout.splitlines() if line]

    def stop(self):
        p = self.proc
        if p is not None and p.poll() is None:
            children = _children(p.pid)
            p.send_signal(signal.SIGQUIT)          # immediate shutdown
            try:
                p.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                children |= _children(p.pid)
                p.kill()
                p.wait()
                for c in children:                 # the server's own processes
                    try:
                        os.kill(c, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                _remove_shm(self.data)
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def cleanup_dir(self):
        if not self.tmp:
            shutil.rmtree(self.work, ignore_errors=True)

    def log_tail(self, n=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.readlines()[-n:]
        except OSError:
            return []


def _uid(name):
    import pwd
    return pwd.getpwnam(name).pw_uid


def _gid(name):
    import grp
    return grp.getgrnam(name).gr_gid


def _children(pid):
    """Pids whose parent is pid (the server's processes, read from /proc)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _remove_shm(data):
    """After a SIGKILL: mark the server's System V segment (line 7 of postmaster.pid) for removal."""
    try:
        with open(os.path.join(data, "postmaster.pid")) as f:
            lines = f.read().splitlines()
        shmid = lines[6].split()[1]
        subprocess.run(["ipcrm", "-m", shmid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, IndexError):
        pass


def printed(stdout_file):
    try:
        with open(stdout_file, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    created = "created" in lines
    committed = sorted(int(m.group(1)) for m in map(re.compile(r"committed (\d+)$").match, lines) if m)
    return created, committed


def rule_atomic(srv, exists):
    """Every row of t is one the workload inserted, once. Returns the ids present."""
    if not exists:
        return []
    ids = []
    for row in srv.sql("SELECT id, v FROM t ORDER BY id", "reading table t"):
        if len(row) != 2 or not all(re.fullmatch(r"-?\d+", x) for x in row):
            raise Inconsistent("silent-error", f"table t holds a row the workload never wrote: {row}")
        i, v = int(row[0]), int(row[1])
        if not 1 <= i <= ROWS or v != 10 * i:
            raise Inconsistent("silent-error", f"table t holds a row the workload never wrote: (id {i}, v {v})")
        if ids and ids[-1] == i:
            raise Inconsistent("silent-error", f"table t holds row {i} twice")
        ids.append(i)
    return ids


def rule_durable(exists, ids, created, committed):
    """What was reported created or committed is there."""
    if not exists and (created or committed):
        raise Inconsistent("data-loss", "table t is missing, but its CREATE TABLE had returned"
                           + (f" and rows {committed} were committed" if committed else ""))
    missing = [i for i in committed if i not in ids]
    if exists and missing:
        raise Inconsistent("data-loss", f"row {missing[0]} is missing, but its commit had returned "
                           f"(rows present: {ids or 'none'})")


def rule_ordered(ids):
    if ids != list(range(1, len(ids) + 1)):
        gap = next(i for i in range(1, ROWS + 1) if i not in ids)
        raise Inconsistent("data-loss", f"row {gap} is missing, but the later row {ids[-1]} "
                           f"survived (rows present: {ids})")


def rule_writable(srv, exists):
    """A new table and a new row of t can be written and read back; both are removed again
    (so that a rerun gives the same verdict) and a CHECKPOINT succeeds."""
    got = srv.sql("CREATE TABLE intact_probe (x integer); INSERT INTO intact_probe VALUES (42); "
                  "SELECT x FROM intact_probe", "writing a new table")
    if got != [["42"]]:
        raise Inconsistent("failed-reads-writes", f"new table intact_probe reads back {got}, not [42]")
    if exists:
        srv.sql("INSERT INTO t VALUES (1000, 10000)", "inserting a new row into t")
        got = srv.sql("SELECT count(*) FROM t WHERE id = 1000", "reading the new row of t")
        if got != [["1"]]:
            raise Inconsistent("failed-reads-writes", f"the new row of t reads back {got} times, not once")
    srv.sql("DROP TABLE intact_probe", "dropping table intact_probe")
    if exists:
        srv.sql("DELETE FROM t WHERE id = 1000", "deleting the new row of t")
    srv.sql("CHECKPOINT", "checkpoint after the new writes")


def check(srv, created, committed):
    """Runs every rule; returns the failures, each (layer, name, Inconsistent). When the
    server does not start (or cannot say whether t exists), no other rule can run."""
    try:
        srv.prepare()
        srv.start()
        exists = srv.sql("SELECT to_regclass('public.t') IS NOT NULL", "looking up table t") == [["t"]]
    except Inconsistent as e:
        return [("documented", "open", e)]
    failures = []
    ids = []
    try:
        ids = rule_atomic(srv, exists)
    except Inconsistent as e:
        failures.append(("documented", "atomic", e))
    for layer, name, rule in [("documented", "durable", lambda: rule_durable(exists, ids, created, committed)),
                              ("lay", "ordered", lambda: rule_ordered(ids)),
                              ("lay", "writable", lambda: rule_writable(srv, exists))]:
        if name != "writable" and failures and failures[0][1] == "atomic":
            continue  # the rows could not be read: nothing to compare
        try:
            rule()
        except Inconsistent as e:
            failures.append((layer, name, e))
    return failures


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def say(text):
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:     # nobody reads stderr any more: the verdict is the exit status
        pass


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: check.py CRASH_DIR STDOUT_FILE\n")
        sys.exit(2)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _terminate)
    created, committed = printed(sys.argv[2])
    srv = Server(sys.argv[1])
    status = 1
    try:
        try:
            failures = check(srv, created, committed)
            for layer, name, e in failures:
                say(f"rule: {layer}: {name}: {e.cls}: {e.detail}\n")
            if failures:
                layer, _name, e = next((f for f in failures if f[0] == "documented"), failures[0])
                say(f"layer: {layer}\nconsequence: {e.cls}: {e.detail}\n")
            else:
                status = 0
        except Exception as e:  # a checker problem: say so, still stop the server
            say(f"consequence: other: checker error: {type(e).__name__}: {e}\n")
        finally:
            srv.stop()
        if status:
            tail = srv.log_tail()
            if tail:
                say("server log (tail):\n" + "".join("  | " + l for l in tail))
    finally:
        srv.cleanup_dir()
    sys.exit(status)


if __name__ == "__main__":
    # A warm server under --checker-server, else one state (python/intact/checker.py).
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from intact.checker import main_argv
    main_argv(main)
