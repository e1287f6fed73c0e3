"""`intact check --dask slurm:2` on a real Slurm: a single-node cluster started on this
machine by tests/slurm/cluster.sh (Debian's slurm-wlm and munge, apt-get-installed if
missing; everything under a temporary directory; stopped by PID at the end), workers as
Slurm batch jobs through dask-jobqueue, against a local run of the key-value store example:

    INTACT_SLURM_TESTS=1 INTACT=target/debug/intact PYTHONPATH=python \\
        python3 -m unittest discover -s python/tests -p test_slurm.py

Opt-in (INTACT_SLURM_TESTS=1; well under two minutes on two cores), because
libintact/test.sh runs every test_*.py. Needs root (or sudo) where Slurm is not installed,
gcc, strace, the intact binary, dask.distributed and dask-jobqueue (pip-installed here if
missing). Where Slurm cannot start, the tests fail under INTACT_REQUIRE_ALL=1 and are
skipped otherwise, saying why.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dask import (APMS, REPO, _assert_hang_timed_out, _find_intact, _normalized,  # noqa: E402
                       _pip_missing, _procs_mentioning, _record_kv, _runs_per_state, _untimed)


def _skip(reason):
    # Under the test command (INTACT_REQUIRE_ALL=1) a test that cannot run is a failure.
    if os.environ.get("INTACT_REQUIRE_ALL") == "1":
        raise RuntimeError(f"test_slurm cannot run: {reason} (INTACT_REQUIRE_ALL=1: every test must run)")
    print(f"\ntest_slurm: skipped: {reason}", file=sys.stderr)
    raise unittest.SkipTest(reason)


def _pip_install(module, spec):
    why = _pip_missing(module, spec)
    if why:
        _skip(why)


class SlurmRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("INTACT_SLURM_TESTS") != "1":
            # Opt-in, not a missing requirement: scripts/test.sh runs them with it set.
            raise unittest.SkipTest("set INTACT_SLURM_TESTS=1 to run the Slurm tests")
        _pip_install("distributed", "dask[distributed]")
        _pip_install("dask_jobqueue", "dask-jobqueue")
        cls.intact = _find_intact()
        if not cls.intact:
            _skip("no intact binary: set INTACT or run cargo build")
        for tool in ("gcc", "strace"):
            if not shutil.which(tool):
                _skip(f"{tool} is not installed")
        if not shutil.which("slurmctld") and os.geteuid() != 0 and not shutil.which("sudo"):
            _skip("Slurm is not installed and installing it needs root or sudo")
        cls.tmp = tempfile.mkdtemp(prefix="intact-slurm-test-")
        cls.tmpdir = os.path.join(cls.tmp, "tmp")
        os.mkdir(cls.tmpdir)
        cls.cluster = os.path.join(cls.tmp, "slurm")
        os.mkdir(cls.cluster)
        p = subprocess.run(["bash", os.path.join(REPO, "tests/slurm/cluster.sh"), "start", cls.cluster],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            _skip(f"a single-node Slurm could not start here: {p.stderr.strip()[-1500:]}")
        try:
            cls._set_up(p.stdout)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _set_up(cls, started):
        conf = [line.split("=", 1)[1] for line in started.splitlines() if line.startswith("SLURM_CONF=")]
        assert conf, started
        # The jobs' logs and the workers' scratch space: the cluster's business, not checked
        # for leftovers (a worker killed by SIGKILL leaves its directory).
        cls.jobs = os.path.join(cls.tmp, "jobs")
        os.mkdir(cls.jobs)
        opts = ["--cluster-opt cores=1", "--cluster-opt processes=1", "--cluster-opt memory=1GB",
                "--cluster-opt queue=intact", "--cluster-opt walltime=00:10:00",
                f"--cluster-opt log_directory={cls.jobs}", f"--cluster-opt local_directory={cls.jobs}",
                "--connect-timeout 60"]
        cls.env = dict(os.environ, TMPDIR=cls.tmpdir, SLURM_CONF=conf[0], INTACT_DASK_OPTS=" ".join(opts),
                       PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        _record_kv(cls)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "cluster", None):
            p = subprocess.run(["bash", os.path.join(REPO, "tests/slurm/cluster.sh"), "stop", cls.cluster],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            left = _procs_mentioning(cls.cluster)
            shutil.rmtree(cls.tmp, ignore_errors=True)
            assert p.returncode == 0, p.stdout
            assert not left, f"processes of the Slurm cluster left running: {left}"

    @classmethod
    def intact_check(cls, *args, **kw):
        return subprocess.run([cls.intact, "check", cls.bundle, *args], env=cls.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, **kw)

    def slurm(self, *args):
        return subprocess.run(list(args), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=30)

    def assert_no_jobs_left(self):
        # dask-jobqueue cancels its jobs when the cluster closes; give Slurm a moment to end them.
        for _ in range(100):
            q = self.slurm("squeue", "-h", "-o", "%i %T")
            if q.returncode == 0 and not q.stdout.strip():
                break
            time.sleep(0.2)
        self.assertEqual(q.stdout.strip(), "", "Slurm jobs left")
        self.assertEqual(os.listdir(self.tmpdir), [], "temporary files left behind")

    def test_slurm_gives_the_local_report(self):
        out = os.path.join(self.tmp, "slurm.json")
        p = self.intact_check("--checker", self.checker, "--apm", APMS, "--json", out, "--dask", "slurm:2")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(_normalized(out), _normalized(self.local_json))
        self.assertEqual(_untimed(p.stdout), _untimed(self.local_text))
        self.assertIn("#SBATCH", p.stderr)  # the job script, shown
        self.assertIn("round 2", p.stderr)
        # The work ran in Slurm jobs: their logs are there.
        self.assertTrue([f for f in os.listdir(self.jobs) if f.endswith(".err")], os.listdir(self.jobs))
        print("\n" + p.stderr, file=sys.stderr)
        self.assert_no_jobs_left()

    def test_a_cancelled_worker_job_loses_no_verdict(self):
        # Each worker's second unit of round 2 (from s9 on) kills the whole Slurm job it runs
        # in (scancel --signal=KILL: the worker, its nanny, check-unit and the checker at
        # once), once in the run, after a pause that lets the worker send the verdict of the
        # unit before. The other job's worker takes the batch and checks only the unit the
        # job was killed at again.
        runs = os.path.join(self.tmp, "slurm-runs")
        mark = os.path.join(self.tmp, "job-killed")
        seen = os.path.join(self.tmp, "slurm-seen")
        checker = os.path.join(self.tmp, "job-killing-check")
        with open(checker, "w") as f:
            f.write(f"#!/bin/sh\necho \"$INTACT_STATE\" >>{runs}\n"
                    "n=${INTACT_STATE#s}\n"
                    "if [ \"$n\" -ge 9 ]; then\n"
                    f"  echo \"$INTACT_STATE\" >>{seen}-$SLURM_JOB_ID\n"
                    f"  if [ \"$(wc -l <{seen}-$SLURM_JOB_ID)\" -eq 2 ] && mkdir {mark} 2>/dev/null; then\n"
                    f"    echo \"$INTACT_STATE $SLURM_JOB_ID\" >{mark}/state; sleep 0.5\n"
                    "    scancel --full --signal=KILL \"$SLURM_JOB_ID\"; sleep 30; exit 1\n"
                    "  fi\n"
                    "fi\n"
                    f"exec {self.checker} \"$@\"\n")
        os.chmod(checker, 0o755)
        out = os.path.join(self.tmp, "slurm-killed.json")
        p = self.intact_check("--checker", checker, "--apm", APMS, "--json", out, "--dask", "slurm:2")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(os.path.isdir(mark), "no job was killed: " + p.stderr)
        with open(os.path.join(mark, "state")) as f:
            killed_at, job = f.read().split()
        self.assertEqual(_normalized(out, drop_checker=True), _normalized(self.local_json, drop_checker=True))
        counts = _runs_per_state(runs)
        self.assertEqual(len(counts), 62, "every state checked")
        repeated = {s: n for s, n in counts.items() if n > 1}
        self.assertEqual(repeated, {killed_at: 2}, f"job {job} killed at {killed_at}; runs per state {counts}")
        self.assert_no_jobs_left()


    def test_a_hanging_checker_times_out_on_a_slurm_worker(self):
        # One state's checker hangs: check-unit in the worker's job kills it at --timeout
        # and the report (the state under "timeouts") is the local run's.
        pids = os.path.join(self.tmp, "slurm-hung-pids")
        checker = os.path.join(self.tmp, "slurm-hanging-check")
        with open(checker, "w") as f:
            f.write(f"#!/bin/sh\nif [ \"$INTACT_STATE\" = s20 ]; then echo $$ >>{pids}; exec sleep 600; fi\n"
                    f"exec {self.checker} \"$@\"\n")
        os.chmod(checker, 0o755)
        _assert_hang_timed_out(self, checker, pids, "slurm:2", "slurm-hang")
        self.assert_no_jobs_left()

if __name__ == "__main__":
    unittest.main()
