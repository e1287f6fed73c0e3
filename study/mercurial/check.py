#!/usr/bin/env python3
"""intact checker for the Mercurial study (study/mercurial): is a crash state of the workload
"add two files and commit them" a usable repository that kept what hg reported done?

    check.py CRASH_DIR STDOUT_FILE

Exit 0 = consistent; 1 = inconsistent; 2 = usage error. Two layers (issue 32): every rule
runs (when the repository opens at all), each failing rule prints `rule: LAYER: NAME:
CLASS: detail` on stderr, and the one `consequence: CLASS: detail` line (thesis 004 Table
4.3) comes from the first failing documented rule, else the first failing lay rule
(`layer: ...` says which), followed by the failing command and its output. The checker
modifies the crash directory (lock removal, recovery, a new commit). Python 3 standard
library and Debian's Mercurial only. The expected contents below must match study.sh.

How hg runs (STUDY_HG_MODE): `fork` (the default) imports Debian's Mercurial
(/usr/lib/python3/dist-packages/mercurial, what /usr/bin/hg imports) once, in the warm
server before its first state, and runs each hg command in a forked child of the state's
process: /usr/bin/hg's own script, compiled once, with that command line (it calls
`dispatch.run()`), stdin /dev/null, stdout and stderr captured, the exit status and an
uncaught exception's traceback as the interpreter would give them. A command then costs a
fork instead of an interpreter start and Mercurial's imports. The checker first
re-executes itself with the environment hg gets (hg_env: the locale, HGRCPATH, HGPLAIN are
read when Mercurial is imported). `subprocess` runs /usr/bin/hg per command, the first
version; both give the same verdicts and messages (study/mercurial/README.md, "Checker").

documented (Mercurial 6.3, `hg help recover`): "Recover from an interrupted commit or
  pull. This command tries to fix the repository status after an interrupted operation";
  Mercurial tells the user to run it when it finds an abandoned transaction. Mercurial
  documents nothing else about crashes (thesis 004 §4.2: "does not provide any
  guarantees"; it never calls fsync), so every other rule is lay.
Rules, as a user would go after the crash:
  opens (lay): remove the lock symlinks .hg/wlock and .hg/store/lock (their holder is dead;
     Mercurial itself breaks a dead holder's lock on the same host); if .hg/store/journal
     exists, run `hg recover`; then `hg log` works (cannot-open). If this fails, no other
     rule can run.
  recover (documented): when there was an abandoned transaction, `hg recover` succeeds and
     `hg verify` then passes (failed-reads-writes: repository corruption).
  verify (lay): without an abandoned transaction, `hg verify` passes (failed-reads-writes).
  history (lay): the initial changeset is still there; tip is the initial or the workload's
     changeset, and tip holds exactly the files it should, which read back (silent-error /
     failed-reads-writes).
  durable (lay): after "committed", tip is the workload's changeset; after "added" (and no
     commit yet), `hg status` lists one.txt and two.txt as added (data-loss).
  dirstate (lay): `hg status` and `hg identify` work and the working directory's parent is
     a changeset that exists (failed-reads-writes, "dirstate: ..."; the thesis counts these
     apart, as less harmful: `hg debugrebuilddirstate` repairs them, wiki
     RepositoryCorruption).
  write path (lay): add and commit a new file; it must read back from the new tip.
"""
import gc
import os
import subprocess
import sys
import tempfile
import traceback

HG = "/usr/bin/hg"
HG_LIB = "/usr/lib/python3/dist-packages"   # where Debian's /usr/bin/hg finds mercurial
MODE = os.environ.get("STUDY_HG_MODE", "fork")
BASE = {"base.txt": b"initial file\n"}                               # study_init's commit
ADDED = {"one.txt": b"first file\n", "two.txt": b"second file\n"}    # the workload's files
INITIAL_MSG = "initial commit"
WORKLOAD_MSG = "add two files"
PROBE = ("probe.txt", b"written after the crash\n")                  # the checker's commit


class Inconsistent(Exception):
    def __init__(self, cls, detail, cmd=None):
        super().__init__(detail)
        self.cls, self.detail, self.cmd = cls, detail, cmd


def first_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    bad = [l for l in lines if l.startswith(("abort:", "error", "warning:"))]
    return (bad or lines or ["no message"])[0].strip()


def hg_env():
    """The environment every hg command runs with: the checker's own without HG* variables,
    no configuration file, plain output, the C locale, a fixed user."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HG")}
    env.update({"HGRCPATH": "", "HGPLAIN": "1", "LC_ALL": "C", "HOME": "/nonexistent",
                "HGUSER": "Checker <checker@example.org>"})
    return env


def load_mercurial():
    """Fork mode: imports Mercurial here, once (in the warm server, before any state). The
    interpreter is first restarted with hg_env(), as /usr/bin/hg would be started: Python's
    UTF-8 mode follows LC_ALL=C at start-up, and Mercurial reads its encoding, policy and
    translations from the environment when it is imported."""
    if dict(os.environ) != hg_env():
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, sys.orig_argv, hg_env())
    if HG_LIB not in sys.path:
        sys.path.append(HG_LIB)   # python3 -S has no dist-packages; hg's own python3 has
    global _hg_code, _pycompat, _procutil
    # /usr/bin/hg itself, compiled once and run in each command's child: its frame is the
    # one a traceback starts from, as when it runs as a process.
    with open(HG, "rb") as f:
        _hg_code = compile(f.read(), HG, "exec")
    import hgdemandimport, hgdemandimport.tracing   # noqa: F401,E401 -- the script's own imports
    from mercurial import dispatch, pycompat as _pycompat   # noqa: F401
    from mercurial.utils import procutil as _procutil
    # What the commands below load on first use (the hg script imports them on demand).
    from mercurial import verify, transaction, revlog, changelog, manifest, filelog  # noqa: F401
    from mercurial import context, cmdutil, logcmdutil, scmutil, dirstate, lock   # noqa: F401
    # What is imported stays out of every later collection: a child's collection (each hg
    # command ends with one, as the interpreter's exit does) then does not walk, and so
    # copy, the parent's ~40,000 objects (80 ms a command, against 10 frozen).
    gc.freeze()


def _flush_stdio():
    for f in (sys.stdout, sys.stderr, _procutil.stdout, _procutil.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001 -- a closed stream has nothing to flush
            pass


def _hg_script(argv, env):
    """In a forked child: /usr/bin/hg's script run as __main__ with `argv` (it enables
    demandimport and calls dispatch.run(), which exits with the command's status & 255),
    then what the interpreter does at exit: an uncaught exception's traceback (from the
    script's frame, not this one) and status 1, a last collection (a transaction or lock
    left in a cycle is finalised), flushed output. Returns the exit status."""
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    _pycompat.sysargv = [os.fsencode(a) for a in argv]
    try:
        exec(_hg_code, {"__name__": "__main__", "__file__": HG, "__builtins__": __builtins__})
        code = 0
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):
            sys.stderr.write(code + "\n")
            code = 1
        code = 0 if code is None else code
    except BaseException:  # noqa: B902 -- as an uncaught exception ends /usr/bin/hg
        etype, value, tb = sys.exc_info()
        traceback.print_exception(etype, value, tb.tb_next)
        code = 1
    gc.collect()
    _flush_stdio()
    return code & 255


class Hg:
    def __init__(self, repo):
        self.repo = repo
        self.env = hg_env()

    def run(self, *args):
        """(returncode, stdout text, stderr text, printable command)"""
        argv = [HG, "--cwd", self.repo, *args]
        if MODE == "subprocess":
            p = subprocess.run(argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            rc, out, err = p.returncode, p.stdout, p.stderr
        else:
            rc, out, err = self._forked(argv)
        return (rc, out.decode(errors="replace"), err.decode(errors="replace"), "hg " + " ".join(args))

    def _forked(self, argv):
        """Runs the hg command `argv` in a forked child; (status, stdout, stderr) as bytes,
        the status negative for a signal, as subprocess reports it."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            _flush_stdio()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.dup2(out.fileno(), 1)
                    os.dup2(err.fileno(), 2)
                    code = _hg_script(argv, self.env)
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            out.seek(0)
            err.seek(0)
            return rc, out.read(), err.read()

    def must(self, cls, detail, *args):
        rc, out, err, cmd = self.run(*args)
        if rc != 0:
            raise Inconsistent(cls, f"{detail} (`{cmd}` exit {rc}: {first_line(err)})",
                               (cmd, rc, out, err))
        return out


class Repo:
    """What the rules share: the crash directory, hg, what was printed, what opens read."""

    def __init__(self, crash_dir, stdout_file):
        try:
            with open(stdout_file, "rb") as f:
                printed = f.read().split(b"\n")
        except OSError:
            printed = []
        self.added, self.committed = b"added" in printed, b"committed" in printed
        self.crash_dir, self.hgdir = crash_dir, os.path.join(crash_dir, ".hg")
        self.hg = Hg(os.path.abspath(crash_dir))
        self.notes = []
        self.recovered = None   # (rc, out, err, cmd) of `hg recover` when it ran


def rule_opens(r):
    """Lock removal and the recovery Mercurial asks for; the log reads. Sets r.log: a list
    of (rev, description) from the oldest."""
    if not os.path.isdir(r.hgdir):
        raise Inconsistent("cannot-open", ".hg is missing")
    for lock in (".hg/wlock", ".hg/store/lock"):
        path = os.path.join(r.crash_dir, lock)
        if os.path.lexists(path):
            os.unlink(path)
            r.notes.append(f"removed {lock}")
    if os.path.lexists(os.path.join(r.hgdir, "store", "journal")):
        r.recovered = r.hg.run("recover")
        r.notes.append(f"`hg recover` exit {r.recovered[0]}")
    rc, out, err, cmd = r.hg.run("log", "-r", "0:tip", "--template", "{rev}\\t{desc}\\n")
    if rc != 0:
        raise Inconsistent("cannot-open", f"`hg log` fails: {first_line(err)}", (cmd, rc, out, err))
    r.log = [tuple(l.split("\t", 1)) for l in out.splitlines() if "\t" in l]


def rule_recover(r):
    """Documented: `hg recover` repairs an interrupted transaction; verify then passes."""
    if r.recovered is None:
        return
    rc, out, err, cmd = r.recovered
    if rc != 0:
        raise Inconsistent("failed-reads-writes", f"`hg recover` fails: {first_line(err + out)}",
                           (cmd, rc, out, err))
    r.hg.must("failed-reads-writes", "repository corruption after `hg recover`", "verify", "-q")


def rule_verify(r):
    if r.recovered is None:
        r.hg.must("failed-reads-writes", "repository corruption", "verify", "-q")


def rule_history(r):
    descs = [d for _rev, d in r.log]
    if not descs or descs[0] != INITIAL_MSG:
        raise Inconsistent("data-loss", f"the initial changeset is gone (log: {descs})")
    if descs not in ([INITIAL_MSG], [INITIAL_MSG, WORKLOAD_MSG]):
        raise Inconsistent("silent-error", f"unexpected history {descs}")
    want = dict(BASE, **(ADDED if len(descs) == 2 else {}))
    have = r.hg.must("failed-reads-writes", "listing tip's files", "files", "-r", "tip").split()
    if sorted(have) != sorted(want):
        raise Inconsistent("silent-error", f"tip holds {sorted(have)}, expected {sorted(want)}")
    for name, data in want.items():
        got = r.hg.must("failed-reads-writes", f"reading {name} at tip", "cat", "-r", "tip", name)
        if got.encode() != data:
            raise Inconsistent("silent-error", f"{name} at tip reads {got.encode()!r}, not {data!r}")


def rule_durable(r):
    descs = [d for _rev, d in r.log]
    if r.committed and descs[-1:] != [WORKLOAD_MSG]:
        raise Inconsistent("data-loss", f"'committed' was printed but tip is {descs[-1:]}")
    if r.added and not r.committed and len(descs) == 1:
        out = r.hg.must("failed-reads-writes", "`hg status`", "status", "-a")
        added = sorted(l[2:] for l in out.splitlines() if l.startswith("A "))
        if added != sorted(ADDED):
            raise Inconsistent("data-loss", f"'added' was printed but the added files are {added}")


def rule_dirstate(r):
    rc, out, err, cmd = r.hg.run("status")
    if rc != 0 or "abort" in err:
        raise Inconsistent("failed-reads-writes", f"dirstate: `hg status` fails: {first_line(err)}",
                           (cmd, rc, out, err))
    rc, out, err, cmd = r.hg.run("identify", "--id")
    if rc != 0 or "unknown" in err:
        raise Inconsistent("failed-reads-writes", f"dirstate: the working directory's parent "
                           f"is not a changeset: {first_line(err)}", (cmd, rc, out, err))


def rule_write(r):
    name, data = PROBE
    with open(os.path.join(r.crash_dir, name), "wb") as f:
        f.write(data)
    r.hg.must("failed-reads-writes", "`hg add` of a new file", "add", name)
    r.hg.must("failed-reads-writes", "committing a new file", "commit", "-m", "probe",
              "-d", "1700000200 0", name)
    got = r.hg.must("failed-reads-writes", "reading the new commit", "cat", "-r", "tip", name)
    if got.encode() != data:
        raise Inconsistent("silent-error", f"the new commit's {name} reads {got.encode()!r}")


RULES = [("documented", "recover", rule_recover), ("lay", "verify", rule_verify),
         ("lay", "history", rule_history), ("lay", "durable", rule_durable),
         ("lay", "dirstate", rule_dirstate), ("lay", "write", rule_write)]


def check(crash_dir, stdout_file):
    """(notes, failures): failures are (layer, rule, Inconsistent) in rule order."""
    r = Repo(crash_dir, stdout_file)
    try:
        rule_opens(r)
    except Inconsistent as e:
        return r.notes, [("lay", "opens", e)]
    failures = []
    for layer, name, rule in RULES:
        try:
            rule(r)
        except Inconsistent as e:
            failures.append((layer, name, e))
    return r.notes, failures


def main():
    args = sys.argv[1:]
    if len(args) != 2:
        sys.stderr.write("usage: check.py CRASH_DIR STDOUT_FILE\n")
        sys.exit(2)
    notes, failures = check(args[0], args[1])
    for layer, name, e in failures:
        sys.stderr.write(f"rule: {layer}: {name}: {e.cls}: {e.detail}\n")
    if failures:
        layer, _name, e = next((f for f in failures if f[0] == "documented"), failures[0])
        sys.stderr.write(f"layer: {layer}\nconsequence: {e.cls}: {e.detail}\n")
        if e.cmd:
            cmd, rc, out, err = e.cmd
            sys.stderr.write(f"$ {cmd}  # exit {rc}\n")
            for line in (out + err).splitlines()[:20]:
                sys.stderr.write(f"  | {line}\n")
        sys.exit(1)
    for note in notes:
        print(f"recovered: {note}")


if __name__ == "__main__":
    if MODE != "subprocess":
        load_mercurial()
    # A warm server under --checker-server, else one state (python/intact/checker.py).
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from intact.checker import main_argv
    main_argv(main)
