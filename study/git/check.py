#!/usr/bin/env python3
"""intact checker for the git study (study/git): is a crash state of the workload
"add two files and commit them" a usable repository that kept what git reported done?

    check.py [--durability=documented|lay] CRASH_DIR STDOUT_FILE

Exit 0 = consistent; 1 = inconsistent; 2 = usage error. Two layers (issue 32): every rule
runs (when the repository opens at all), each failing rule prints `rule: LAYER: NAME:
CLASS: detail` on stderr, and the one `consequence: CLASS: detail` line (thesis 004 Table
4.3) comes from the first failing documented rule, else the first failing lay rule
(`layer: ...` says which), followed by the failing command and its output. The checker
modifies the crash directory (recovery, a new commit). Python 3 standard library and
/usr/bin/git only. The expected contents below must match study.sh.

documented (git 2.39, `git help config`, core.fsync): with core.fsync=all, "added" hardens
  "the results of commands like git add" and "committed" the work "committed to the
  repository with git commit"; with git's defaults, "items that are not hardened may be
  lost in the event of an unclean system shutdown". So the durability rule's layer is the
  configuration's (--durability, set in study.sh): documented for `fsync`, lay for
  `default`. git documents nothing else about crashes: the other rules are lay.
Rules, as a user would go after the crash:
  opens (lay): recovery: delete leftover lock files (*.lock under .git), as git's own
     message ("Unable to create '.../index.lock': File exists ... remove the file
     manually") tells the user to; if `git status` fails or prints an error, delete
     .git/index and run `git reset` (loses only what was staged, never a commit); then
     `git status`, `git log` work (cannot-open; a branch that vanished, "does not have any
     commits yet", is data-loss). If this fails, no other rule can run.
  history (lay): the initial commit is still there; HEAD is the initial commit or the
     workload's commit; HEAD holds exactly the files it should, and they read back
     (silent-error / failed-reads-writes).
  durable (configuration's layer): after "committed", HEAD is the workload's commit;
     after "added" (and no commit yet), the index stages one.txt and two.txt with the
     right blobs (data-loss).
  index (lay): the index stages nothing the workload did not, and everything HEAD has:
     anything else shows in `git status` as a change nobody made (silent-error).
  write path (lay): finish the workload if its commit is missing (without "added": write
     the two files again, `git add`, `git commit`; after "added": `git commit`), then add
     and commit a new file; each commit must read back (failed-reads-writes when a command
     fails, silent-error when it succeeds but wrote a commit that does not read back).
  fsck (lay): `git fsck --full` (run before the write path), reported as `other:
     fsck-only`.
"""
import hashlib
import os
import subprocess
import sys

GIT = "/usr/bin/git"
BASE = {"base.txt": b"initial file\n"}                               # study_init's commit
ADDED = {"one.txt": b"first file\n", "two.txt": b"second file\n"}    # the workload's files
INITIAL_MSG = "initial commit"
WORKLOAD_MSG = "add two files"
PROBE = {"probe.txt": b"written after the crash\n"}                 # the checker's commit


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Inconsistent(Exception):
    def __init__(self, cls, detail, cmd=None):
        super().__init__(detail)
        self.cls, self.detail, self.cmd = cls, detail, cmd


class Git:
    def __init__(self, repo):
        self.repo = repo
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update({
            "HOME": "/nonexistent",           # private: no ~/.gitconfig, ~/.config/git/*
            "XDG_CONFIG_HOME": "/nonexistent",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CEILING_DIRECTORIES": os.path.dirname(repo),
            "GIT_CONFIG_COUNT": "1",          # the crash directory's owner may differ
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
            "GIT_AUTHOR_NAME": "Checker", "GIT_AUTHOR_EMAIL": "checker@example.org",
            "GIT_COMMITTER_NAME": "Checker", "GIT_COMMITTER_EMAIL": "checker@example.org",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        })
        self.env = env

    def run(self, *args, stdin=None):
        """(returncode, stdout bytes, stderr text, printable command)"""
        p = subprocess.run([GIT, "-C", self.repo, *args], input=stdin, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode, p.stdout, p.stderr.decode(errors="replace"), "git " + " ".join(args)

    def must(self, cls, detail, *args, stdin=None):
        rc, out, err, cmd = self.run(*args, stdin=stdin)
        if rc != 0:
            raise Inconsistent(cls, f"{detail} (`{cmd}` exit {rc}: {first_line(err)})",
                               (cmd, rc, out, err))
        return out


def first_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    fatal = [l for l in lines if l.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no message"])[0].strip()


def remove_locks(gitdir):
    removed = []
    for root, _dirs, files in os.walk(gitdir):
        for name in files:
            if name.endswith(".lock"):
                os.unlink(os.path.join(root, name))
                removed.append(os.path.relpath(os.path.join(root, name), gitdir))
    return removed


def read_blobs(git, specs):
    """Contents of each object spec (e.g. HEAD:one.txt, :one.txt), None if missing.
    Raises if git fails to read one (a corrupt object)."""
    rc, out, err, cmd = git.run("cat-file", "--batch", stdin="".join(s + "\n" for s in specs).encode())
    result = {}
    pos = 0
    for spec in specs:
        nl = out.find(b"\n", pos)
        if nl < 0:
            break
        header = out[pos:nl].decode(errors="replace")
        pos = nl + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            result[spec] = None
            continue
        oid, typ, size = header.split(" ")
        size = int(size)
        result[spec] = (oid, typ, out[pos:pos + size])
        pos += size + 1
    if rc != 0 or len(result) != len(specs):
        bad = specs[len(result)] if len(result) < len(specs) else specs[-1]
        raise Inconsistent("failed-reads-writes",
                           f"reading {bad} fails (`{cmd}` exit {rc}: {first_line(err)})",
                           (cmd, rc, out, err))
    return result


class Repo:
    """What the rules share: the crash directory, git, what was printed, and what the
    open rule read (history, the index)."""

    def __init__(self, crash_dir, stdout_file):
        try:
            with open(stdout_file, "rb") as f:
                printed = f.read().split(b"\n")
        except OSError:
            printed = []
        self.added, self.committed = b"added" in printed, b"committed" in printed
        self.crash_dir, self.gitdir = crash_dir, os.path.join(crash_dir, ".git")
        self.git = Git(os.path.abspath(crash_dir))
        self.notes = []


def rule_opens(r):
    """Steps 1, 2: recovery as a user would do it; the repository opens and its log reads.
    Sets r.commits, r.subjects, r.has_commit, r.want_head, r.index."""
    if not os.path.isdir(r.gitdir):
        raise Inconsistent("cannot-open", ".git is missing")
    git = r.git
    removed = remove_locks(r.gitdir)
    if removed:
        r.notes.append("removed " + ", ".join(removed))
    status = git.run("status", "--porcelain")
    if status[0] != 0 or "error:" in status[2] or "fatal:" in status[2]:
        # git reports a problem: rebuild the index from HEAD (loses only what was staged)
        r.notes.append(f"`git status` said {first_line(status[2])!r}: index rebuilt with `git reset`")
        if os.path.lexists(os.path.join(r.gitdir, "index")):
            os.unlink(os.path.join(r.gitdir, "index"))
        rc, out, err, cmd = git.run("reset", "-q")
        if rc != 0:
            raise Inconsistent("cannot-open", f"`git status` fails ({first_line(status[2])}) "
                               f"and rebuilding the index fails too: `{cmd}` exit {rc}: "
                               f"{first_line(err)}", (cmd, rc, out, err))
        status = git.run("status", "--porcelain")
        if status[0] != 0:
            raise Inconsistent("cannot-open", f"`git status` fails even with a rebuilt "
                               f"index: {first_line(status[2])}", (status[3], status[0], status[1], status[2]))
    rc, out, err, cmd = git.run("log", "--format=%H %P%x09%s")
    if rc != 0 and "does not have any commits yet" in err:
        raise Inconsistent("data-loss", "branch main is gone: git says it has no commits yet "
                           "(the history's objects are still on disk)", (cmd, rc, out, err))
    if rc != 0:
        raise Inconsistent("cannot-open", f"`git log` fails: {first_line(err)}", (cmd, rc, out, err))
    r.log = out.decode(errors="replace")
    r.commits = [line.split("\t", 1) for line in r.log.splitlines()]
    r.subjects = [s for _ids, s in r.commits]
    r.has_commit = len(r.commits) == 2
    r.want_head = dict(BASE, **(ADDED if r.has_commit else {}))
    r.index_cmd = git.run("ls-files", "--stage")
    r.index = {}
    for line in r.index_cmd[1].decode(errors="replace").splitlines():
        meta, _, path = line.partition("\t")
        r.index[path] = meta.split()[1] if len(meta.split()) > 1 else meta


def rule_history(r):
    """Step 4: the initial commit is there, HEAD is one of the two commits, holds exactly its
    files, and they read back."""
    if not r.commits or r.subjects[-1] != INITIAL_MSG:
        raise Inconsistent("data-loss", f"the initial commit is gone: history is {r.subjects}",
                           ("git log", 0, r.log.encode(), ""))
    if r.subjects not in ([INITIAL_MSG], [WORKLOAD_MSG, INITIAL_MSG]):
        raise Inconsistent("silent-error", f"unexpected history {r.subjects}", ("git log", 0, r.log.encode(), ""))
    tree = r.git.must("failed-reads-writes", "listing HEAD's tree fails",
                      "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    if sorted(tree) != sorted(r.want_head):
        raise Inconsistent("silent-error", f"HEAD ({r.subjects[0]!r}) holds {tree}, "
                           f"expected {sorted(r.want_head)}", ("git ls-tree -r HEAD", 0, "", ""))
    blobs = read_blobs(r.git, [f"HEAD:{p}" for p in r.want_head])
    for path, data in r.want_head.items():
        got = blobs[f"HEAD:{path}"]
        if got is None:
            raise Inconsistent("failed-reads-writes", f"HEAD:{path} is unreadable (object "
                               f"{blob_id(data)} missing or empty)")
        if got[2] != data:
            raise Inconsistent("silent-error", f"HEAD:{path} reads {got[2][:40]!r}, expected {data!r}")


def rule_durable(r):
    """Step 5: after "committed", HEAD is the workload's commit; after "added" (and no
    commit), the index stages both files with the right blobs."""
    if r.committed and not r.has_commit:
        raise Inconsistent("data-loss", "'committed' was printed but HEAD is still the initial commit"
                           + (" (the index still stages both files)" if all(p in r.index for p in ADDED) else ""))
    if r.added and not r.has_commit:   # once committed, the index rule checks it
        for path, data in ADDED.items():
            if r.index.get(path) != blob_id(data):
                what = "no longer staged" if path not in r.index else \
                    f"staged as {r.index[path]}, not {blob_id(data)}"
                raise Inconsistent("data-loss", f"'added' was printed but {path} is {what}", r.index_cmd[3:4] + r.index_cmd[:3])


def rule_index(r):
    """The index stages only what the workload staged, and everything HEAD has (a staged
    object that is missing or broken surfaces in the write path)."""
    allowed = {p: blob_id(d) for p, d in dict(BASE, **ADDED).items()}
    cmd = r.index_cmd[3:4] + r.index_cmd[:3]
    for path, oid in r.index.items():
        if allowed.get(path) != oid:
            raise Inconsistent("silent-error", f"the index holds {path!r} as {oid}, which was never staged", cmd)
    for path in r.want_head:
        if path not in r.index:
            raise Inconsistent("silent-error", f"HEAD ({r.subjects[0]!r}) has {path} but the "
                               "index does not: `git status` shows it as a staged deletion", cmd)


def rule_write_path(r):
    """Step 6: if the workload's commit is missing, finish the workload (without "added":
    write one.txt and two.txt, `git add`, `git commit`; after "added": `git commit`), then
    commit a new file. What git says it committed must read back (git skips writing an
    object whose file exists, even an empty one a crash left: that is caught here)."""
    steps = []
    if not r.has_commit:
        steps.append((ADDED if not r.added else {}, WORKLOAD_MSG, dict(BASE, **ADDED)))
    steps.append((PROBE, "probe", dict(BASE, **ADDED, **PROBE)))
    for files, msg, want in steps:
        for path, data in files.items():
            with open(os.path.join(r.crash_dir, path), "wb") as f:
                f.write(data)
        if files:
            r.git.must("failed-reads-writes", "a new `git add` fails", "add", "--", *files)
        r.git.must("failed-reads-writes", f"a new `git commit -m {msg!r}` fails", "commit", "-q", "-m", msg)
        done = f"`git commit -m {msg!r}` succeeded but"
        try:
            blobs = read_blobs(r.git, [f"HEAD:{p}" for p in want])
        except Inconsistent as e:
            e.cls, e.detail = "silent-error", f"{done} {e.detail}"
            raise
        for path, data in want.items():
            got = blobs[f"HEAD:{path}"]
            if got is None or got[2] != data:
                raise Inconsistent("silent-error", f"{done} HEAD:{path} " + (
                    "is unreadable (missing or empty object: git reused a tree or an object "
                    "file the crash left)" if got is None else f"reads {got[2][:40]!r}"))


def rule_fsck(r):
    """Step 3: `git fsck --full` (reported as `other: fsck-only`)."""
    if r.fsck[0] != 0:
        raise Inconsistent("other", f"fsck-only: `git fsck --full` exit {r.fsck[0]}: "
                           f"{first_line(r.fsck[2] + r.fsck[1].decode(errors='replace'))} "
                           "(status, log, reads and new commits work)",
                           (r.fsck[3], r.fsck[0], r.fsck[1], r.fsck[2]))


def check(crash_dir, stdout_file, durability):
    """Runs every rule (the write path last: it changes the repository); returns (notes,
    failures), each failure (layer, name, Inconsistent). When the repository does not open,
    no other rule can run."""
    r = Repo(crash_dir, stdout_file)
    try:
        rule_opens(r)
    except Inconsistent as e:
        return r.notes, [("lay", "opens", e)]
    r.fsck = r.git.run("fsck", "--full", "--no-dangling", "--no-progress")  # before the write path
    failures = []
    for layer, name, rule in [("lay", "history", rule_history), (durability, "durable", rule_durable),
                              ("lay", "index", rule_index), ("lay", "write path", rule_write_path),
                              ("lay", "fsck", rule_fsck)]:
        try:
            rule(r)
        except Inconsistent as e:
            failures.append((layer, name, e))
    return r.notes, failures


def main():
    args = sys.argv[1:]
    durability = "documented"
    if args and args[0].startswith("--durability="):
        durability = args.pop(0).split("=", 1)[1]
    if len(args) != 2 or durability not in ("documented", "lay"):
        sys.stderr.write("usage: check.py [--durability=documented|lay] CRASH_DIR STDOUT_FILE\n")
        sys.exit(2)
    notes, failures = check(args[0], args[1], durability)
    for layer, name, e in failures:
        sys.stderr.write(f"rule: {layer}: {name}: {e.cls}: {e.detail}\n")
    if failures:
        layer, _name, e = next((f for f in failures if f[0] == "documented"), failures[0])
        sys.stderr.write(f"layer: {layer}\nconsequence: {e.cls}: {e.detail}\n")
        if e.cmd:
            cmd, rc, out, err = e.cmd
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            sys.stderr.write(f"$ {cmd}  # exit {rc}\n")
            for line in (out + err).splitlines()[:20]:
                sys.stderr.write(f"  | {line}\n")
        sys.exit(1)
    for note in notes:
        print(f"recovered: {note}")


if __name__ == "__main__":
    # A warm server under --checker-server, else one state (python/intact/checker.py).
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from intact.checker import main_argv
    main_argv(main)
