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

__all__ = ["Inconsistent", "main", "serve", "judge", "serve_argv", "main_argv", "is_server"]

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


def _died(status):
    """The verdict for a child that ended without one, as a per-process checker killed by a
    signal (or exiting without a verdict) is judged."""
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


def _read_verdict(fd):
    """What a child sent: the verdict's JSON and a newline (JSON text has no raw newline),
    or less if it died; read up to that newline, not to EOF, so a process the check left
    running with the pipe open does not hold the reply back."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    os.close(fd)
    return b"".join(chunks)


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _encode(verdict):
    return json.dumps(verdict).encode()


_PASS = {"verdict": "pass"}
# What a child sends for a consistent state, encoded once in the server: the common verdict
# then costs the child no JSON encoding, whose code and objects are pages it would copy.
_PASS_LINE = _encode(_PASS) + b"\n"


def _judge_in_child(run, req, reply_fd, devnull):
    """``run(req)`` (a verdict) in a child forked from this process; its reply as bytes.
    The child's stdin is /dev/null, as a per-process checker's is, and the reply channel
    is closed in it; it sends its verdict on a pipe of its own and exits without cleanup.
    The child's death without a verdict is a failure, as a per-process checker killed by
    a signal is."""
    ver_r, ver_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(ver_r)
            os.close(reply_fd)
            os.dup2(devnull, 0)
            os.close(devnull)
            verdict = run(req)
            sys.stdout.flush()
            sys.stderr.flush()
            _write_all(ver_w, _PASS_LINE if verdict == _PASS else _encode(verdict) + b"\n")
        except BaseException:  # noqa: B902 -- nothing may escape a forked child
            code = 3
        os._exit(code)
    os.close(ver_w)
    text = _read_verdict(ver_r)
    _, status = os.waitpid(pid, 0)
    if text.endswith(b"\n"):
        return text[:-1]
    return _encode(_died(status))


def _lines(stdin):
    """Request lines as bytes: from fd 0 read directly (no text layer) unless a file or an
    iterable of lines is given."""
    if stdin is not None:
        for line in stdin:
            yield line.encode() if isinstance(line, str) else line
        return
    buf = b""
    while True:
        i = buf.find(b"\n")
        if i >= 0:
            yield buf[: i + 1]
            buf = buf[i + 1 :]
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            if buf.strip():
                yield buf
            return
        buf += chunk


_scan_once = json.JSONDecoder().scan_once


def _parse_request(line):
    """A request line as ``json.loads`` parses it. A forking server pays for every page it
    writes between two forks (each fork makes them copy-on-write again), so the common case
    goes through the decoder's scanner alone, without ``json.loads``'s Python layers
    (measured: about 20 fewer faults a state in the server); anything else, a line with
    leading blanks or that is not one object, takes ``json.loads`` and its errors."""
    try:
        text = line.decode()
        req, end = _scan_once(text, 0)
    except (UnicodeDecodeError, StopIteration):
        return json.loads(line)
    if not isinstance(req, dict) or text[end:].strip():
        return json.loads(line)
    return req


# Calls of a function before CPython 3.11 quickens its code (3.12 and later need fewer).
_WARM_RUNS = 10


def _no_check(crash_dir, stdout_file):
    pass


def _warm_children_path(warm_judge):
    """Runs, in the server before its first fork, the Python code every forked child runs
    besides the check: the interpreter's at-fork hooks of imported modules and (for
    ``serve``) ``judge`` and the reply. A child forked from a server that never ran that
    code does CPython's first-run work on it (quickening, the type-attribute cache, binding
    libpython's lazily resolved symbols) itself, on pages it shares with the server and so
    must copy, every time; done once here, the children find it done. Measured
    (docs/performance.md, "The forking server warmed"): 25-34 fewer page faults a state
    from the hooks, 18 from ``judge``.

    Only code that changes nothing the children can see is run: ``random.seed()`` reseeds
    the server's generator, which each child reseeds anyway (it is random's at-fork hook),
    and threading's at-fork hook, run in a server with one thread, leaves it as every child
    starts: that one thread, with fresh internal locks."""
    # The objects random and threading register as their at-fork hooks.
    reseed = getattr(getattr(sys.modules.get("random"), "_inst", None), "seed", None)
    threading = sys.modules.get("threading")
    # A private name of threading: without it (another Python) the children only do the
    # first-run work themselves, as before.
    after_fork = getattr(threading, "_after_fork", None)
    if after_fork is not None and (
        threading.active_count() != 1 or threading.current_thread() is not threading.main_thread()
    ):
        after_fork = None  # other threads are running: the hook would mark them stopped
    for _ in range(_WARM_RUNS):
        if reseed is not None:
            reseed()
        if after_fork is not None:
            after_fork()
        if warm_judge:
            judge(_no_check, "", "")
        _encode({"verdict": "fail", "message": "warm-up"})


def _serve_forking(run, stdin, check_request, warm_judge):
    _warm_children_path(warm_judge)
    sys.stdout.flush()
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    for line in _lines(stdin):
        req = _parse_request(line)
        check_request(req)
        os.environ["INTACT_STATE"] = str(req["state"])
        _write_all(reply_fd, _judge_in_child(run, req, reply_fd, devnull) + b"\n")
    os.close(devnull)


def _check_protocol(req):
    if req.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        sys.exit("intact.checker: protocol version %r is not %d" % (req.get("protocol"), PROTOCOL_VERSION))


def serve(check, isolate=True, stdin=None):
    """Judges states from the warm-checker protocol until stdin closes.

    The protocol owns the process's stdout: what the check prints (Python or C code) goes
    to stderr instead, so it cannot be mistaken for a reply."""
    if isolate:
        _serve_forking(lambda req: judge(check, req["crash_dir"], req["stdout_file"]), stdin, _check_protocol, True)
        return
    sys.stdout.flush()
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    for line in _lines(stdin):
        req = json.loads(line)
        _check_protocol(req)
        os.environ["INTACT_STATE"] = str(req["state"])
        verdict = judge(check, req["crash_dir"], req["stdout_file"])
        _write_all(reply_fd, _encode(verdict) + b"\n")


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
    _serve_forking(
        lambda req: _run_argv_main(main_fn, argv0 + [req["crash_dir"], req["stdout_file"]]),
        None,
        _check_protocol,
        False,
    )


def main_argv(main_fn):
    """The entry point of a script whose ``main()`` follows the ALICE contract (reads
    CRASH_DIR STDOUT_FILE from sys.argv, exits or returns its status): served warm by
    ``serve_argv`` when intact started the script with ``--checker-server``, else run once,
    the process exiting with the status main() returned (None: 0)."""
    if is_server():
        serve_argv(main_fn)
        return
    sys.exit(main_fn())


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
