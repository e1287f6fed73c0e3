"""intact.checker: the same check script per process and as a warm server (the protocol of
docs/checkers.md), with the isolation a forked child gives."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHECK = textwrap.dedent(
    '''
    import os, sys
    from intact.checker import main, Inconsistent
    LEAK = []
    def check(crash_dir, stdout_file):
        names = sorted(os.listdir(crash_dir))
        if "chdir" in names:
            os.chdir("/")            # must not reach the next state
        if "leak" in names:
            LEAK.append(1)           # nor this
        if "print" in names:
            print("chatty check")    # goes to stderr, not the protocol
        if "segv" in names:
            os.kill(os.getpid(), 9)
        if "exit3" in names:
            sys.exit(3)
        if "assert" in names:
            assert False, "assertion text"
        if "ok" not in names:
            raise Inconsistent("no ok (leaked {}, cwd {}, state {})".format(len(LEAK), os.getcwd() == "/", os.environ.get("INTACT_STATE")))
    main(check, isolate=ISOLATE)
    '''
)


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.env = dict(os.environ, PYTHONPATH=PYTHON_DIR)

    def script(self, isolate=True):
        path = os.path.join(self.tmp.name, "check_%s.py" % isolate)
        with open(path, "w") as f:
            f.write(CHECK.replace("ISOLATE", str(isolate)))
        return path

    def state(self, name, *files):
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d)
        for f in files:
            open(os.path.join(d, f), "w").close()
        out = os.path.join(self.tmp.name, name + ".stdout")
        open(out, "w").close()
        return d, out

    def serve(self, script, states):
        """Runs the script as a server over the given states; returns the replies."""
        lines = "".join(
            json.dumps({"protocol": 1, "crash_dir": d, "stdout_file": o, "state": "s%d" % i, "worker": 0}) + "\n"
            for i, (d, o) in enumerate(states)
        )
        p = subprocess.run(
            [sys.executable, script], input=lines, capture_output=True, text=True, env=self.env, timeout=60
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()], p.stderr

    def test_per_process_exit_status_and_reason(self):
        script = self.script()
        ok = self.state("a", "ok")
        bad = self.state("b")
        p = subprocess.run([sys.executable, script, *ok], capture_output=True, text=True, env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([sys.executable, script, *bad], capture_output=True, text=True, env=self.env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no ok", p.stderr)

    def test_server_verdicts_match_and_children_are_isolated(self):
        states = [
            self.state("0", "ok", "chdir", "leak", "print"),
            self.state("1"),
            self.state("2", "ok", "segv"),
            self.state("3", "ok", "exit3"),
            self.state("4", "ok", "assert"),
            self.state("5", "ok"),
        ]
        replies, stderr = self.serve(self.script(isolate=True), states)
        self.assertEqual(len(replies), 6)
        self.assertEqual(replies[0], {"verdict": "pass"})
        # The chdir and the leak of state 0 stayed in its child; INTACT_STATE is per state.
        self.assertEqual(replies[1], {"verdict": "fail", "message": "no ok (leaked 0, cwd False, state s1)"})
        self.assertEqual(replies[2]["verdict"], "fail")
        self.assertIn("signal SIGKILL", replies[2]["message"])
        self.assertEqual(replies[3], {"verdict": "fail", "message": "the check exited with 3"})
        self.assertEqual(replies[4], {"verdict": "fail", "message": "assertion text"})
        self.assertEqual(replies[5], {"verdict": "pass"})
        self.assertIn("chatty check", stderr)

    def test_in_process_mode_keeps_what_a_check_leaves(self):
        states = [self.state("0", "ok", "leak", "chdir"), self.state("1")]
        replies, _ = self.serve(self.script(isolate=False), states)
        self.assertEqual(replies[0], {"verdict": "pass"})
        self.assertEqual(replies[1], {"verdict": "fail", "message": "no ok (leaked 1, cwd True, state s1)"})


if __name__ == "__main__":
    unittest.main()
