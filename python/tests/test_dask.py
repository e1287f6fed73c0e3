"""intact's checker on Dask (intact.dask_run, docs/distributed.md), against a local run of
the key-value store example (examples/kvstore):

    INTACT_DASK_TESTS=1 INTACT=target/debug/intact PYTHONPATH=python \\
        python3 -m unittest discover -s python/tests -p test_dask.py

Opt-in (INTACT_DASK_TESTS=1; about three minutes on two cores), because libintact/test.sh
runs every test_*.py. Needs gcc, strace, the intact binary ($INTACT, else the newer of
target/debug and target/release) and dask.distributed (pip-installed here if missing; the
tests are skipped, with the reason printed, if that fails).
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APMS = "default,ext4-o"


def _skip(reason):
    # Under the test command (INTACT_REQUIRE_ALL=1) a test that cannot run is a failure.
    if os.environ.get("INTACT_REQUIRE_ALL") == "1":
        raise RuntimeError(f"test_dask cannot run: {reason} (INTACT_REQUIRE_ALL=1: every test must run)")
    print(f"\ntest_dask: skipped: {reason}", file=sys.stderr)
    raise unittest.SkipTest(reason)


def _pip_missing(module, spec):
    """None when `module` imports (after `pip install spec` if it did not); else why not."""
    try:
        __import__(module)
        return None
    except ImportError:
        pass
    p = None
    for extra in ([], ["--break-system-packages"]):
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *extra, spec],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode == 0:
            break
    try:
        __import__(module)
        return None
    except ImportError:
        return f"{module} cannot be imported, also after `pip install {spec}`: " + \
            p.stdout.decode(errors="replace").strip()[-300:]


def _find_intact():
    if os.environ.get("INTACT"):
        return os.path.abspath(os.environ["INTACT"])
    found = [p for p in (os.path.join(REPO, "target", d, "intact") for d in ("debug", "release")) if os.access(p, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else None


def _normalized(path, drop_checker=False):
    """The JSON report without timings; timed-out states sorted (arrival order)."""
    with open(path) as f:
        r = json.load(f)
    r.pop("seconds")
    for a in r["apms"]:
        a.pop("seconds")
    r["timeouts"].sort(key=lambda t: json.dumps(t, sort_keys=True))
    if drop_checker:
        r.pop("checker")
    return r


def _untimed(text):
    return re.sub(r"\(\d+\.\d s\)|in \d+\.\d s", "", text)


def _procs_mentioning(needle):
    """PIDs whose command line mentions `needle` (read-only scan of /proc)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def _runs_per_state(log):
    """How often each state's checker ran, from a log of one state name per run."""
    counts = {}
    with open(log) as f:
        for state in f.read().split():
            counts[state] = counts.get(state, 0) + 1
    return counts


def _record_kv(cls):
    """The kvstore example recorded in cls.tmp, its checker and a local run's report
    (cls.bundle, cls.checker, cls.local_json, cls.local_text): the Dask and Slurm tests'
    common ground."""
    kv = os.path.join(cls.tmp, "kv")
    subprocess.run(["gcc", "-g", "-O0", "-o", kv, os.path.join(REPO, "examples/kvstore/kv.c")], check=True)
    db = os.path.join(cls.tmp, "db")
    os.mkdir(db)
    cls.bundle = os.path.join(cls.tmp, "b")
    subprocess.run([cls.intact, "record", "--out", cls.bundle, "--", kv, "x", "foo1", "y", "foo2"], cwd=db,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The interpreter itself, not a version manager's shim (~0.3 s per run).
    cls.checker = f"{sys.executable} {os.path.join(REPO, 'examples/kvstore/check.py')}"
    cls.local_json = os.path.join(cls.tmp, "local.json")
    p = cls.intact_check("--checker", cls.checker, "--apm", APMS, "-j", "2", "-q", "--json", cls.local_json)
    assert p.returncode == 1, p.stderr
    cls.local_text = p.stdout


def _assert_hang_timed_out(test, checker, pids, dask, tag):
    """`checker` hangs on state s20 (appending its PID to `pids`): a run with `--dask dask`
    reports it under "timeouts" exactly as a local run does, and no hanging checker is
    left running."""
    local = os.path.join(test.tmp, f"{tag}-local.json")
    p = test.intact_check("--checker", checker, "--apm", APMS, "--timeout", "3", "-j", "2", "-q", "--json", local)
    test.assertEqual(p.returncode, 1, p.stderr)
    out = os.path.join(test.tmp, f"{tag}-dask.json")
    p = test.intact_check("--checker", checker, "--apm", APMS, "--timeout", "3", "--json", out, "--dask", dask)
    test.assertEqual(p.returncode, 1, p.stderr)
    report = _normalized(out)
    test.assertEqual(report, _normalized(local))
    test.assertIn("s20", json.dumps(report["timeouts"]))
    with open(pids) as f:
        hung = f.read().split()
    test.assertEqual(len(hung), 2, f"one hanging run locally, one through --dask {dask}")
    test.assertEqual([p for p in hung if os.path.exists(f"/proc/{p}")], [], "hanging checkers left running")


class DaskRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("INTACT_DASK_TESTS") != "1":
            # Opt-in, not a missing requirement: scripts/test.sh runs them with it set.
            raise unittest.SkipTest("set INTACT_DASK_TESTS=1 to run the Dask tests")
        try:
            import distributed  # noqa: F401
        except ImportError:
            p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "dask[distributed]"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            try:
                import distributed  # noqa: F401,F811
            except ImportError:
                _skip("dask.distributed is missing and `pip install dask[distributed]` failed: "
                      + p.stdout.decode(errors="replace").strip()[-300:])
        cls.intact = _find_intact()
        if not cls.intact:
            _skip("no intact binary: set INTACT or run cargo build")
        for tool in ("gcc", "strace"):
            if not shutil.which(tool):
                _skip(f"{tool} is not installed")
        cls.tmp = tempfile.mkdtemp(prefix="intact-dask-test-")
        # Temporary files of everything started here go to a directory checked for leftovers.
        cls.tmpdir = os.path.join(cls.tmp, "tmp")
        os.mkdir(cls.tmpdir)
        cls.env = dict(os.environ, TMPDIR=cls.tmpdir,
                       PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        _record_kv(cls)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def intact_check(cls, *args, **kw):
        return subprocess.run([cls.intact, "check", cls.bundle, *args], env=cls.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, **kw)

    def assert_no_leftovers(self):
        self.assertEqual(os.listdir(self.tmpdir), [], "temporary files left behind")
        time.sleep(0.5)
        self.assertEqual(_procs_mentioning(self.bundle), [], "processes left behind")

    def test_local_cluster_gives_the_local_report(self):
        out = os.path.join(self.tmp, "dask.json")
        p = self.intact_check("--checker", self.checker, "--apm", APMS, "--json", out, "--dask", "local:3")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(_normalized(out), _normalized(self.local_json))
        self.assertEqual(_untimed(p.stdout), _untimed(self.local_text))
        self.assertIn("round 2", p.stderr)
        self.assert_no_leftovers()

    def test_a_checker_server_starts_once_per_worker(self):
        # The kvstore checker as a warm server, behind a script that notes each start.
        pids = os.path.join(self.tmp, "server-pids")
        server = os.path.join(self.tmp, "server.sh")
        with open(server, "w") as f:
            f.write(f"#!/bin/sh\necho $$ >>{pids}\nexec {self.checker}\n")
        os.chmod(server, 0o755)
        local = os.path.join(self.tmp, "local-server.json")
        p = self.intact_check("--checker-server", server, "--apm", APMS, "-j", "2", "-q", "--json", local)
        self.assertEqual(p.returncode, 1, p.stderr)
        local_text = p.stdout
        os.remove(pids)
        out = os.path.join(self.tmp, "dask-server.json")
        p = self.intact_check("--checker-server", server, "--apm", APMS, "--json", out, "--dask", "local:2")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(_normalized(out), _normalized(local))
        self.assertEqual(_untimed(p.stdout), _untimed(local_text))
        # The same verdicts as the per-process checker's.
        self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
        self.assertIn("round 2", p.stderr)
        with open(pids) as f:
            started = set(f.read().split())
        # 62 units in 2 rounds, 2 single-threaded workers: at most one server each.
        self.assertTrue(1 <= len(started) <= 2, f"checker servers started: {sorted(started)}")
        time.sleep(0.5)
        self.assertEqual([p for p in started if os.path.exists(f"/proc/{p}")], [], "checker servers left running")
        self.assert_no_leftovers()

    def test_a_dead_check_unit_process_is_replaced(self):
        # The first checker run kills its parent, the worker's `intact check-unit --serve`:
        # the task starts another one and sends it the same unit.
        mark = os.path.join(self.tmp, "killed-once")
        killer = os.path.join(self.tmp, "kill-parent-once")
        with open(killer, "w") as f:
            # It removes the runner's scratch root (CRASH_DIR/../..) first, which a process
            # killed by SIGKILL leaves behind.
            f.write(f"#!/bin/sh\nif mkdir {mark} 2>/dev/null; then\n"
                    "  rm -rf \"$(dirname \"$(dirname \"$1\")\")\"; kill -9 $PPID; exit 1\nfi\n"
                    f"exec {self.checker} \"$@\"\n")
        os.chmod(killer, 0o755)
        out = os.path.join(self.tmp, "replaced.json")
        # No Dask retries: the task itself must retry.
        p = subprocess.run([self.intact, "check", self.bundle, "--checker", killer, "--apm", APMS, "--json", out,
                            "--dask", "local:2"], env=dict(self.env, INTACT_DASK_OPTS="--retries 0"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(os.path.isdir(mark))
        self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
        self.assert_no_leftovers()

    def test_a_killed_worker_loses_no_state(self):
        # A checker that takes a while, so that tasks are running when a worker dies.
        slow = os.path.join(self.tmp, "slow-check")
        with open(slow, "w") as f:
            f.write(f"#!/bin/sh\nsleep 0.5\nexec {self.checker} \"$@\"\n")
        os.chmod(slow, 0o755)
        sfile = os.path.join(self.tmp, "scheduler.json")
        # The cluster's own scratch space (lock files) is the cluster's business.
        cenv = dict(self.env, DASK_TEMPORARY_DIRECTORY=os.path.join(self.tmp, "cluster"))
        procs = []
        slog = open(os.path.join(self.tmp, "scheduler.log"), "w")
        try:
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                           "--port", "0", "--no-dashboard", "--scheduler-file", sfile],
                                          env=cenv, stdout=subprocess.DEVNULL, stderr=slog))
            for i in range(3):
                wdir = os.path.join(self.tmp, f"w{i}")
                os.mkdir(wdir)
                procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", sfile,
                                               "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", f"w{i}",
                                               "--local-directory", wdir],
                                              env=cenv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            out = os.path.join(self.tmp, "killed.json")
            drv = subprocess.Popen([sys.executable, "-m", "intact.dask_run", "--scheduler", sfile, "--scheduler-file",
                                    "--connect-timeout", "30", "--intact", self.intact, "--bundle", self.bundle,
                                    "--checker", slow, "--apm", APMS, "--json", out],
                                   env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            err_lines = []
            killed = threading.Event()
            running = []
            w0 = os.path.join(self.tmp, "w0") + "/"

            def watch():
                for line in drv.stderr:
                    err_lines.append(line)
                    if "round 2" in line and not killed.is_set():
                        # Kill worker w0 (by its PID) while it runs a unit's checker.
                        deadline = time.monotonic() + 30
                        while not running and time.monotonic() < deadline:
                            time.sleep(0.05)
                            running.extend(p for p in _procs_mentioning(w0) if p != procs[1].pid)
                        time.sleep(0.2)
                        procs[1].kill()
                        killed.set()
            t = threading.Thread(target=watch)
            t.start()
            stdout = drv.stdout.read()
            drv.wait(timeout=600)
            t.join()
            drv.stdout.close()
            drv.stderr.close()
            err = "".join(err_lines)
            self.assertTrue(killed.is_set(), err)
            self.assertTrue(running, "w0 was running no unit when killed")
            # Its `intact check-unit` (and checker) stopped with it (--exit-with-parent).
            time.sleep(0.5)
            self.assertEqual([p for p in running if os.path.exists(f"/proc/{p}")], [])
            self.assertEqual(procs[1].wait(timeout=10), -signal.SIGKILL)
            self.assertEqual(drv.returncode, 1, err)
            self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
            self.assertEqual(_untimed(stdout), _untimed(self.local_text))
            with open(out) as f:
                self.assertEqual(json.load(f)["checker"], [slow])
        finally:
            slog.close()
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for d in ["cluster"] + [f"w{i}" for i in range(3)]:
            shutil.rmtree(os.path.join(self.tmp, d), ignore_errors=True)
        self.assert_no_leftovers()

    def _counting_checker(self, name, body):
        """A checker script that notes every run (INTACT_STATE) in a log, runs `body`, then
        the kvstore checker; returns (path, log)."""
        runs = os.path.join(self.tmp, name + ".runs")
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho \"$INTACT_STATE\" >>{runs}\n{body}\nexec {self.checker} \"$@\"\n")
        os.chmod(path, 0o755)
        return path, runs

    def test_units_go_in_batches(self):
        # The python checker costs tens of ms per state: a task takes several units.
        checker, runs = self._counting_checker("batched-check", "")
        out = os.path.join(self.tmp, "batched.json")
        p = self.intact_check("--checker", checker, "--apm", APMS, "--json", out, "--dask", "local:2")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
        m = re.search(r"(\d+) unit\(s\) checked in 2 round\(s\) by (\d+) task\(s\)", p.stderr)
        self.assertTrue(m, p.stderr)
        units, tasks = int(m.group(1)), int(m.group(2))
        self.assertEqual(units, 62)
        self.assertLess(tasks, units, "no task took more than one unit")
        # Every state checked exactly once.
        counts = _runs_per_state(runs)
        self.assertEqual(len(counts), 62)
        self.assertEqual(set(counts.values()), {1})
        self.assert_no_leftovers()

    def test_a_worker_killed_mid_batch_repeats_only_its_current_unit(self):
        # Each worker's second unit of round 2 (states after round 1's nine: s9 on) kills
        # that worker's process (the parent of its `intact check-unit --serve`), once in the
        # run, after a pause that lets the worker send the verdict of the unit before. The
        # nanny starts a new worker; the batch is given to a worker again and checks only
        # the units whose verdicts did not come back: the one it was killed at.
        mark = os.path.join(self.tmp, "worker-killed")
        seen = os.path.join(self.tmp, "seen-by-worker")
        body = (f"n=${{INTACT_STATE#s}}\n"
                f"if [ \"$n\" -ge 9 ]; then\n"
                f"  echo \"$INTACT_STATE\" >>{seen}-$INTACT_WORKER\n"
                f"  if [ \"$(wc -l <{seen}-$INTACT_WORKER)\" -eq 2 ] && mkdir {mark} 2>/dev/null; then\n"
                f"    echo \"$INTACT_STATE\" >{mark}/state; sleep 0.5\n"
                f"    rm -rf \"$(dirname \"$(dirname \"$1\")\")\"\n"
                f"    kill -9 \"$(awk '{{print $4}}' /proc/$PPID/stat)\"; sleep 5; exit 1\n"
                f"  fi\n"
                f"fi")
        checker, runs = self._counting_checker("killing-check", body)
        out = os.path.join(self.tmp, "killed-mid-batch.json")
        p = subprocess.run([self.intact, "check", self.bundle, "--checker", checker, "--apm", APMS, "--json", out,
                            "--dask", "local:2"], env=dict(self.env, INTACT_DASK_OPTS="--retries 0"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(os.path.isdir(mark), "no worker was killed")
        with open(os.path.join(mark, "state")) as f:
            killed_at = f.read().strip()
        self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
        counts = _runs_per_state(runs)
        self.assertEqual(len(counts), 62, "every state checked")
        repeated = {s: n for s, n in counts.items() if n > 1}
        self.assertEqual(repeated, {killed_at: 2}, f"killed at {killed_at}; runs per state {counts}")
        self.assert_no_leftovers()

    def test_a_hanging_checker_times_out_on_the_worker(self):
        # One state's checker hangs: the worker's check-unit kills it at --timeout, and the
        # report (the state under "timeouts") is the local run's.
        pids = os.path.join(self.tmp, "hung-pids")
        checker, _ = self._counting_checker(
            "hanging-check", f"if [ \"$INTACT_STATE\" = s20 ]; then echo $$ >>{pids}; exec sleep 600; fi")
        _assert_hang_timed_out(self, checker, pids, "local:2", "hang")
        self.assert_no_leftovers()

    def test_unreachable_scheduler(self):
        out = os.path.join(self.tmp, "unreachable.json")
        p = subprocess.run([sys.executable, "-m", "intact.dask_run", "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2",
                            "--intact", self.intact, "--bundle", self.bundle, "--checker", self.checker, "--json", out],
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("cannot reach the Dask scheduler at tcp://127.0.0.1:9", p.stderr)
        self.assertIn("no report written", p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertFalse(os.path.exists(out))
        self.assert_no_leftovers()

    def test_a_worker_without_the_checker(self):
        out = os.path.join(self.tmp, "nochecker.json")
        p = self.intact_check("--checker", "intact-no-such-checker --flag", "--apm", APMS, "--json", out, "--dask", "local:2")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("checker `intact-no-such-checker` not found", p.stderr)
        self.assertRegex(p.stderr, r"worker tcp://127\.0\.0\.1:\d+ \(host ")
        self.assertIn("no report written", p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertFalse(os.path.exists(out))
        self.assert_no_leftovers()

    def test_bad_arguments(self):
        p = self.intact_check("--checker", self.checker, "--dask", "local:0")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("positive number of workers", p.stderr)
        p = subprocess.run([self.intact, "run", "--checker", "true", "--dask", "local:1", "--", "true"], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assert_no_leftovers()


if __name__ == "__main__":
    unittest.main()
