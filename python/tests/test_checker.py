"""intact.checker: the same check script per process and as a warm server (the protocol of
docs/checkers.md), with the isolation a forked child gives."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHECK = textwrap.dedent(
    '''
    import os, sys, time
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
        if "stdin" in names and sys.stdin.read():
            raise Inconsistent("stdin was not empty")   # /dev/null, as per process
        if "daemon" in names and os.fork() == 0:
            # Left running with every inherited descriptor but the test's pipes.
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            open(os.path.join(crash_dir, "daemon.pid"), "w").write(str(os.getpid()))
            time.sleep(60)
            os._exit(0)
        if "ok" not in names:
            raise Inconsistent("no ok (leaked {}, cwd {}, state {})".format(len(LEAK), os.getcwd() == "/", os.environ.get("INTACT_STATE")))
    main(check, isolate=ISOLATE)
    try:
        os.waitpid(-1, os.WNOHANG)
        sys.stderr.write("a child of the server is left\\n")
    except ChildProcessError:
        sys.stderr.write("no child left\\n")
    '''
)

ARGV_MAIN = textwrap.dedent(
    '''
    import os, sys
    from intact.checker import main_argv
    def main():
        # An ALICE-contract checker: CRASH_DIR STDOUT_FILE after its own arguments.
        flag, crash_dir, stdout_file = sys.argv[1:]
        names = os.listdir(crash_dir)
        if "ok" in names:
            return 0
        if "die" in names:
            os.kill(os.getpid(), 9)
        print("no ok in", os.path.basename(crash_dir), flag, os.environ["INTACT_STATE"])
        return 1
    main_argv(main)
    '''
)


THREADS = textwrap.dedent(
    '''
    import os, random, sys, threading
    from intact.checker import main, Inconsistent
    if BACKGROUND:
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
    def check(crash_dir, stdout_file):
        # Threads work in a child, and it draws its own random numbers, as a process would.
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        assert threading.current_thread() is threading.main_thread(), "not the main thread"
        raise Inconsistent("%d threads, %r" % (threading.active_count(), random.random()))
    main(check)
    if BACKGROUND:
        sys.stderr.write("server thread alive %s\\n" % worker.is_alive())
        stop.set()
        worker.join()
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
        lines = "".join(self.request(i, st) for i, st in enumerate(states))
        p = subprocess.run(
            [sys.executable, script], input=lines, capture_output=True, text=True, env=self.env, timeout=60
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()], p.stderr

    def request(self, i, state):
        d, o = state
        return json.dumps({"protocol": 1, "crash_dir": d, "stdout_file": o, "state": "s%d" % i, "worker": 0}) + "\n"

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
        self.assertIn("no child left", stderr)

    def test_a_check_reads_an_empty_stdin_not_the_requests(self):
        states = [self.state("0", "ok", "stdin"), self.state("1", "ok", "stdin"), self.state("2")]
        replies, stderr = self.serve(self.script(isolate=True), states)
        self.assertEqual(replies[:2], [{"verdict": "pass"}] * 2)
        self.assertEqual(replies[2], {"verdict": "fail", "message": "no ok (leaked 0, cwd False, state s2)"})

    def test_a_process_left_running_by_a_check_does_not_hold_the_reply(self):
        # It inherits the child's verdict pipe; the server reads the verdict up to its end
        # of line, not to EOF, so the reply comes now, not when that process ends.
        daemon = self.state("0", "ok", "daemon")
        started = time.monotonic()
        try:
            replies, stderr = self.serve(self.script(isolate=True), [daemon, self.state("1")])
            self.assertLess(time.monotonic() - started, 50)
        finally:
            pid_file = os.path.join(daemon[0], "daemon.pid")
            for _ in range(500):
                if os.path.exists(pid_file) and open(pid_file).read():
                    break
                time.sleep(0.01)
            try:
                os.kill(int(open(pid_file).read()), 9)
            except (OSError, ValueError):
                pass
        self.assertEqual(replies[0], {"verdict": "pass"})
        self.assertEqual(replies[1], {"verdict": "fail", "message": "no ok (leaked 0, cwd False, state s1)"})

    def test_serve_argv_runs_an_alice_main_per_state(self):
        path = os.path.join(self.tmp.name, "argv_main.py")
        with open(path, "w") as f:
            f.write(ARGV_MAIN)
        states = [self.state("a", "ok"), self.state("b"), self.state("c", "die"), self.state("d", "ok")]
        lines = "".join(self.request(i, st) for i, st in enumerate(states))
        env = dict(self.env, INTACT_CHECKER_SERVER="1")
        p = subprocess.run(
            [sys.executable, path, "--flag"], input=lines, capture_output=True, text=True, env=env, timeout=60
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        replies = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(replies[0], {"verdict": "pass"})
        self.assertEqual(replies[1], {"verdict": "fail", "message": "no ok in b --flag s1"})
        self.assertEqual(replies[2]["verdict"], "fail")
        self.assertIn("signal SIGKILL", replies[2]["message"])
        self.assertEqual(replies[3], {"verdict": "pass"})

    def test_main_argv_without_the_server_runs_main_once(self):
        # The same script, as intact runs a per-process checker: main()'s status is the exit status.
        path = os.path.join(self.tmp.name, "argv_main.py")
        with open(path, "w") as f:
            f.write(ARGV_MAIN)
        env = dict(self.env, INTACT_STATE="s9")
        env.pop("INTACT_CHECKER_SERVER", None)
        ok, bad = self.state("a", "ok"), self.state("b")
        p = subprocess.run([sys.executable, path, "--flag", *ok], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, ""), p.stderr)
        p = subprocess.run([sys.executable, path, "--flag", *bad], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (1, "no ok in b --flag s9\n"), p.stderr)

    def test_warming_the_children_path_changes_nothing_they_see(self):
        # The server runs the at-fork hooks of random and threading before its first fork
        # (intact.checker._warm_children_path); threading's only with no other thread.
        for background in (False, True):
            path = os.path.join(self.tmp.name, "threads_%s.py" % background)
            with open(path, "w") as f:
                f.write(THREADS.replace("BACKGROUND", str(background)))
            replies, stderr = self.serve(path, [self.state("%s%d" % (background, i)) for i in range(3)])
            messages = [r["message"] for r in replies]
            self.assertEqual([m.split(",")[0] for m in messages], ["1 threads"] * 3, stderr)
            self.assertEqual(len(set(messages)), 3, "each child reseeds random: %r" % messages)
            if background:
                self.assertIn("server thread alive True", stderr)

    def test_in_process_mode_keeps_what_a_check_leaves(self):
        states = [self.state("0", "ok", "leak", "chdir"), self.state("1")]
        replies, _ = self.serve(self.script(isolate=False), states)
        self.assertEqual(replies[0], {"verdict": "pass"})
        self.assertEqual(replies[1], {"verdict": "fail", "message": "no ok (leaked 1, cwd True, state s1)"})


if __name__ == "__main__":
    unittest.main()
