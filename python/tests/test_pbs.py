"""`intact check --dask pbs:2` through dask-jobqueue's PBSCluster, with a STAND-IN for PBS:
tests/pbs-standin/ (qsub, qstat, qdel; its README says why there is no real PBS here).
Only the batch system is replaced: dask-jobqueue writes its PBS job script and runs `qsub`
and `qdel`, the stand-in runs the script (Dask worker and all) in the background with
PBS_JOBID set, and intact's driver, tasks and `check-unit --serve` run as on a cluster.
The report must equal a local run's:

    INTACT_PBS_TESTS=1 INTACT=target/debug/intact PYTHONPATH=python \\
        python3 -m unittest discover -s python/tests -p test_pbs.py

Opt-in (INTACT_PBS_TESTS=1), because libintact/test.sh runs every test_*.py. Needs gcc,
strace, the intact binary, dask.distributed and dask-jobqueue (pip-installed if missing).
Once opted in it never skips: nothing it needs is a batch system, so a missing piece is a
failure with its reason.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dask import (APMS, REPO, _find_intact, _normalized, _pip_missing, _procs_mentioning,  # noqa: E402
                       _record_kv, _untimed)

STANDIN = os.path.join(REPO, "tests", "pbs-standin")


def _need(module, spec):
    why = _pip_missing(module, spec)
    if why:
        raise RuntimeError(f"test_pbs cannot run: {why}")


class PbsStandInRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("INTACT_PBS_TESTS") != "1":
            # Opt-in, not a missing requirement: scripts/test.sh runs it with it set.
            raise unittest.SkipTest("set INTACT_PBS_TESTS=1 to run the PBS stand-in test")
        _need("distributed", "dask[distributed]")
        _need("dask_jobqueue", "dask-jobqueue")
        cls.intact = _find_intact()
        if not cls.intact:
            raise RuntimeError("test_pbs cannot run: no intact binary: set INTACT or run cargo build")
        for tool in ("gcc", "strace", "setsid", "flock"):
            if not shutil.which(tool):
                raise RuntimeError(f"test_pbs cannot run: {tool} is not installed")
        cls.tmp = tempfile.mkdtemp(prefix="intact-pbs-test-")
        try:
            cls._set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _set_up(cls):
        cls.tmpdir = os.path.join(cls.tmp, "tmp")
        cls.pbs = os.path.join(cls.tmp, "pbs")  # the stand-in's jobs: scripts, PIDs, calls.log
        cls.jobs = os.path.join(cls.tmp, "jobs")  # the jobs' output and the workers' scratch
        for d in (cls.tmpdir, cls.pbs, cls.jobs):
            os.mkdir(d)
        opts = ["--cluster-opt cores=1", "--cluster-opt processes=1", "--cluster-opt memory=1GB",
                "--cluster-opt queue=intact", "--cluster-opt walltime=00:10:00",
                f"--cluster-opt log_directory={cls.jobs}", f"--cluster-opt local_directory={cls.jobs}",
                "--connect-timeout 60"]
        cls.env = dict(os.environ, TMPDIR=cls.tmpdir, PBS_STANDIN_DIR=cls.pbs, INTACT_DASK_OPTS=" ".join(opts),
                       PATH=STANDIN + os.pathsep + os.environ.get("PATH", ""),
                       PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        _record_kv(cls)

    @classmethod
    def tearDownClass(cls):
        tmp = getattr(cls, "tmp", None)
        if not tmp:
            return
        # Any stand-in job still running (a failed run) is ended as qdel would.
        pbs = os.path.join(tmp, "pbs")
        left_jobs = [f[:-4] for f in os.listdir(pbs) if f.endswith(".pid")] if os.path.isdir(pbs) else []
        if left_jobs:
            subprocess.run([os.path.join(STANDIN, "qdel"), *left_jobs], env=dict(os.environ, PBS_STANDIN_DIR=pbs),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        left = _procs_mentioning(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        assert not left, f"processes of the PBS stand-in's jobs left running: {left}"

    @classmethod
    def intact_check(cls, *args, **kw):
        return subprocess.run([cls.intact, "check", cls.bundle, *args], env=cls.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, **kw)

    def test_pbs_gives_the_local_report(self):
        out = os.path.join(self.tmp, "pbs.json")
        p = self.intact_check("--checker", self.checker, "--apm", APMS, "--json", out, "--dask", "pbs:2",
                              timeout=600)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(_normalized(out), _normalized(self.local_json))
        self.assertEqual(_untimed(p.stdout), _untimed(self.local_text))
        self.assertIn("round 2", p.stderr)
        print("\n" + p.stderr, file=sys.stderr)
        # dask-jobqueue's PBS path ran: it printed its job script, submitted two jobs with
        # qsub and ended both with qdel.
        with open(os.path.join(self.pbs, "calls.log")) as f:
            calls = f.read().splitlines()
        submitted = [c.split()[1] for c in calls if c.startswith("qsub ")]
        deleted = sorted(c.split()[1].split(".")[0] for c in calls if c.startswith("qdel "))
        self.assertEqual(len(submitted), 2, calls)
        self.assertEqual(sorted(submitted), deleted, calls)
        for job in submitted:
            with open(os.path.join(self.pbs, f"{job}.sh")) as f:
                script = f.read()
            # The driver printed the script before submitting (with `--name dummy-name`,
            # filled in per job): the same #PBS directives.
            directives = [line for line in script.splitlines() if line.startswith("#PBS")]
            self.assertEqual(directives, [line for line in p.stderr.splitlines() if line.startswith("#PBS")])
            self.assertIn("#PBS -l select=1:ncpus=1:mem=", script)
            self.assertIn("#PBS -q intact", script)
            self.assertIn("distributed.cli.dask_worker", script)
        # The work ran in those jobs: each one's worker logged to its -e file.
        errs = [f for f in os.listdir(self.jobs) if ".e" in f]
        self.assertEqual(len(errs), 2, os.listdir(self.jobs))
        for _ in range(50):  # qdel waits for the group to end; the stand-in removes its PID file
            if not [f for f in os.listdir(self.pbs) if f.endswith(".pid")]:
                break
            time.sleep(0.1)
        self.assertEqual([f for f in os.listdir(self.pbs) if f.endswith(".pid")], [], "stand-in jobs left")
        with open(os.path.join(self.pbs, f"{submitted[0]}.sh")) as f:
            print(f"the stand-in's calls:\n" + "\n".join(calls) + f"\njob {submitted[0]} ran:\n{f.read()}",
                  file=sys.stderr)
        self.assertEqual(os.listdir(self.tmpdir), [], "temporary files left behind")


if __name__ == "__main__":
    unittest.main()
