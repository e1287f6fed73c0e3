"""Write a crash-state checker once; run it per process (ALICE's contract) or warm.

A checker is a function ``check(crash_dir, stdout_file)``: it returns normally when the
crash state is consistent, and raises (or returns ``False``) when it is not; the exception's
text is the reason shown in the report. ``main(check)`` makes a script serve both ways:

- ``intact check --checker "python3 check.py"``: the script is run once per state with
  ``<crash_dir> <stdout_file>`` and exits 0 (consistent) or 1 (reason on stderr);
- ``intact check --checker-server "python3 check.py"``: the script is started once per
  worker with no arguments, imports its modules once, and judges every state the worker
  gets through the warm-checker protocol (docs/checkers.md): one JSON request line on
  stdin, one JSON reply line on stdout.

Isolation: by default each state is judged in a forked child, so what a check leaves
behind (memory, open files, a changed working directory, module state, a crash) cannot
reach the next state; the parent process only imports and forks. ``isolate=False`` judges
in the server process itself, for checks known to leave nothing behind.
"""

import json
import os
import signal
import sys
import traceback

__all__ = ["Inconsistent", "main", "serve", "judge", "serve_argv", "is_server"]

PROTOCOL_VERSION = 1


class Inconsistent(Exception):
    """Raise with the reason when the crash state is inconsistent."""


def _reason(exc):
    if isinstance(exc, (Inconsistent, AssertionError)) and str(exc):
        return str(exc)
    tail = traceback.format_exception_only(type(exc), exc)
    return "".join(tail).strip()


def judge(check, crash_dir, stdout_file):
    """Runs ``check`` here and returns a verdict dict (``{"verdict": "pass"}`` or
    ``{"verdict": "fail", "message": ...}``). ``sys.exit(code)`` inside the check counts as a
    per-process checker's exit status would."""
    try:
        result = check(crash_dir, stdout_file)
    except SystemExit as e:
        if e.code in (0, None):
            return {"verdict": "pass"}
        return {"verdict": "fail", "message": "the check exited with %r" % (e.code,)}
    except BaseException as e:  # noqa: B902 -- every failure of a check is its verdict
        return {"verdict": "fail", "message": _reason(e)}
    if result is False:
        return {"verdict": "fail", "message": "the check returned False"}
    return {"verdict": "pass"}


def _judge_in_child(check, crash_dir, stdout_file):
    """``judge`` in a forked child; the child's death without a verdict is a failure, as a
    per-process checker killed by a signal is."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            verdict = judge(check, crash_dir, stdout_file)
            sys.stdout.flush()
            sys.stderr.flush()
            with os.fdopen(write_end, "w") as out:
                json.dump(verdict, out)
        except BaseException:  # noqa: B902 -- nothing may escape a forked child
            code = 3
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if text:
        return json.loads(text)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return {"verdict": "fail", "message": "the check was killed by signal %s" % name}
    return {
        "verdict": "fail",
        "message": "the check ended (status %d) without a verdict" % os.WEXITSTATUS(status),
    }


def serve(check, isolate=True, stdin=None):
    """Judges states from the warm-checker protocol until stdin closes.

    The protocol owns the process's stdout: what the check prints (Python or C code) goes
    to stderr instead, so it cannot be mistaken for a reply."""
    sys.stdout.flush()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    requests = stdin if stdin is not None else sys.stdin
    for line in requests:
        req = json.loads(line)
        if req.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
            sys.exit("intact.checker: protocol version %r is not %d" % (req.get("protocol"), PROTOCOL_VERSION))
        os.environ["INTACT_STATE"] = str(req["state"])
        if isolate:
            verdict = _judge_in_child(check, req["crash_dir"], req["stdout_file"])
        else:
            verdict = judge(check, req["crash_dir"], req["stdout_file"])
        replies.write(json.dumps(verdict) + "\n")
        replies.flush()


def is_server():
    """Whether intact started this process as a warm checker server (--checker-server)."""
    return os.environ.get("INTACT_CHECKER_SERVER") == "1"


def _run_argv_main(main_fn, argv):
    """Runs an ALICE-contract ``main()`` (reads sys.argv, writes its reason to stderr, exits
    or returns its status) here, with its stdout and stderr captured; returns a verdict with
    what it printed, as the runner reports a per-process checker's output."""
    import tempfile
    sys.argv = argv
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(err.fileno(), 2)
        os.dup2(out.fileno(), 1)
        try:
            status = main_fn()
        except SystemExit as e:
            status = e.code
        except BaseException:  # noqa: B902 -- as an uncaught exception would end the process
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        if isinstance(status, str):  # sys.exit("message"): printed, status 1
            sys.stderr.write(status + "\n")
            sys.stderr.flush()
            status = 1
        if not status:  # None, 0, False: as the process would exit 0
            return {"verdict": "pass"}
        text = b""
        for f in (err, out):
            f.seek(0)
            text = f.read().strip()
            if text:
                break
        return {"verdict": "fail", "message": text.decode(errors="replace") or "(exit status %r, no output)" % (status,)}


def serve_argv(main_fn):
    """Serves the warm protocol with a script's existing ALICE-contract ``main()``: for each
    state, a forked child runs it with ``sys.argv`` = the server's own arguments plus
    CRASH_DIR STDOUT_FILE, and its exit status and output become the verdict, exactly as if
    it had been run as a process."""
    argv0 = list(sys.argv)
    sys.stdout.flush()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        req = json.loads(line)
        os.environ["INTACT_STATE"] = str(req["state"])
        argv = argv0 + [req["crash_dir"], req["stdout_file"]]
        verdict = _judge_in_child(lambda _d, _o: _raise_unless_pass(_run_argv_main(main_fn, argv)), "", "")
        replies.write(json.dumps(verdict) + "\n")
        replies.flush()


def _raise_unless_pass(verdict):
    if verdict["verdict"] != "pass":
        raise Inconsistent(verdict["message"])


def main(check, isolate=True):
    """The script's entry point: a warm server when intact started it as one (or when run
    without arguments), else one state per process with CRASH_DIR STDOUT_FILE."""
    args = sys.argv[1:]
    if is_server():
        serve(check, isolate=isolate)
        return
    if len(args) == 2:
        verdict = judge(check, args[0], args[1])
        if verdict["verdict"] == "pass":
            sys.exit(0)
        sys.stderr.write(verdict["message"] + "\n")
        sys.exit(1)
    if not args:
        serve(check, isolate=isolate)
        return
    sys.exit(
        "usage: %s CRASH_DIR STDOUT_FILE (one state), or no arguments to serve the "
        "warm-checker protocol on stdin (intact check --checker-server)" % sys.argv[0]
    )
