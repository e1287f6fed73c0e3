#!/usr/bin/env python3
"""intact checker for the git study (study/git): is a crash state of the workload
"add two files and commit them" a usable repository that kept what git reported done?

    check.py CRASH_DIR STDOUT_FILE

Exit 0 = consistent; 1 = inconsistent: one line `consequence: CLASS: detail` on stderr
(CLASS from thesis 004 Table 4.3: silent-error, data-loss, cannot-open,
failed-reads-writes, other), then the failing command and its output; 2 = usage error.
The checker modifies the crash directory (recovery, a new commit). Python 3 standard
library and /usr/bin/git only. The expected contents below must match study.sh.

Steps, as a user would take them after the crash (the first failure is reported):
  1. recovery: delete leftover lock files (*.lock under .git), as git's own message
     ("Unable to create '.../index.lock': File exists ... remove the file manually")
     tells the user to; if `git status` fails or prints an error, delete .git/index and
     run `git reset` (rebuilds the index from HEAD: loses only what was staged, never a
     commit).
  2. `git status`, `git log`: the repository opens and its history reads (cannot-open;
     a branch that vanished, "does not have any commits yet", is data-loss).
  3. `git fsck --full` (integrity); its errors are reported last, as `other: fsck-only`,
     when nothing a user does fails.
  4. history: the initial commit is still there; HEAD is the initial commit or the
     workload's commit; HEAD holds exactly the files it should, and they read back
     (silent-error / failed-reads-writes).
  5. durability against what was printed: after "committed", HEAD is the workload's
     commit; after "added" (and no commit yet), the index stages one.txt and two.txt
     with the right blobs (data-loss). The index stages nothing the workload did not,
     and everything HEAD has: anything else shows in `git status` as a change nobody
     made (silent-error).
  6. the write path, as the user goes on: finish the workload if its commit is missing
     (without "added": write the two files again, `git add`, `git commit`; after
     "added": `git commit`), then add and commit a new file; each commit must read back
     (failed-reads-writes when a command fails, silent-error when it succeeds but wrote
     a commit that does not read back).
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


def check(crash_dir, stdout_file):
    try:
        with open(stdout_file, "rb") as f:
            printed = f.read().split(b"\n")
    except OSError:
        printed = []
    added, committed = b"added" in printed, b"committed" in printed
    gitdir = os.path.join(crash_dir, ".git")
    if not os.path.isdir(gitdir):
        raise Inconsistent("cannot-open", ".git is missing")
    git = Git(os.path.abspath(crash_dir))
    notes = []

    # 1, 2. recovery; the repository opens
    removed = remove_locks(gitdir)
    if removed:
        notes.append("removed " + ", ".join(removed))
    status = git.run("status", "--porcelain")
    if status[0] != 0 or "error:" in status[2] or "fatal:" in status[2]:
        # git reports a problem: rebuild the index from HEAD (loses only what was staged)
        notes.append(f"`git status` said {first_line(status[2])!r}: index rebuilt "
                     "with `git reset`")
        if os.path.lexists(os.path.join(gitdir, "index")):
            os.unlink(os.path.join(gitdir, "index"))
        rc, out, err, cmd = git.run("reset", "-q")
        if rc != 0:
            raise Inconsistent("cannot-open", f"`git status` fails ({first_line(status[2])}) "
                               f"and rebuilding the index fails too: `{cmd}` exit {rc}: "
                               f"{first_line(err)}", (cmd, rc, out, err))
        status = git.run("status", "--porcelain")
        if status[0] != 0:
            raise Inconsistent("cannot-open", f"`git status` fails even with a rebuilt "
                               f"index: {first_line(status[2])}",
                               (status[3], status[0], status[1], status[2]))
    rc, out, err, cmd = git.run("log", "--format=%H %P%x09%s")
    if rc != 0 and "does not have any commits yet" in err:
        raise Inconsistent("data-loss", "branch main is gone: git says it has no commits yet "
                           "(the history's objects are still on disk)", (cmd, rc, out, err))
    if rc != 0:
        raise Inconsistent("cannot-open", f"`git log` fails: {first_line(err)}", (cmd, rc, out, err))
    log = out.decode(errors="replace")

    # 3. integrity (reported at the end when nothing else fails)
    fsck = git.run("fsck", "--full", "--no-dangling", "--no-progress")

    # 4. history and what it holds
    commits = [line.split("\t", 1) for line in log.splitlines()]
    subjects = [s for _ids, s in commits]
    if not commits or subjects[-1] != INITIAL_MSG:
        raise Inconsistent("data-loss", f"the initial commit is gone: history is {subjects}",
                           ("git log", 0, log.encode(), ""))
    if subjects not in ([INITIAL_MSG], [WORKLOAD_MSG, INITIAL_MSG]):
        raise Inconsistent("silent-error", f"unexpected history {subjects}",
                           ("git log", 0, log.encode(), ""))
    has_commit = len(commits) == 2
    want_head = dict(BASE, **(ADDED if has_commit else {}))
    tree = git.must("failed-reads-writes", "listing HEAD's tree fails",
                    "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    if sorted(tree) != sorted(want_head):
        raise Inconsistent("silent-error", f"HEAD ({subjects[0]!r}) holds {tree}, "
                           f"expected {sorted(want_head)}", ("git ls-tree -r HEAD", 0, "", ""))
    rc, out, err, cmd = git.run("ls-files", "--stage")
    index = {}
    for line in out.decode(errors="replace").splitlines():
        meta, _, path = line.partition("\t")
        index[path] = meta.split()[1] if len(meta.split()) > 1 else meta
    blobs = read_blobs(git, [f"HEAD:{p}" for p in want_head])
    for path, data in want_head.items():
        got = blobs[f"HEAD:{path}"]
        if got is None:
            raise Inconsistent("failed-reads-writes", f"HEAD:{path} is unreadable (object "
                               f"{blob_id(data)} missing or empty)")
        if got[2] != data:
            raise Inconsistent("silent-error", f"HEAD:{path} reads {got[2][:40]!r}, "
                               f"expected {data!r}")

    # 5. durability
    if committed and not has_commit:
        raise Inconsistent("data-loss", "'committed' was printed but HEAD is still the "
                           "initial commit" + (" (the index still stages both files)"
                                               if all(p in index for p in ADDED) else ""))
    if added and not has_commit:   # once committed, the index is checked below
        for path, data in ADDED.items():
            if index.get(path) != blob_id(data):
                what = "no longer staged" if path not in index else \
                    f"staged as {index[path]}, not {blob_id(data)}"
                raise Inconsistent("data-loss", f"'added' was printed but {path} is {what}",
                                   (cmd, rc, out, err))

    # the index: only what the workload staged, and all of it once HEAD has it (a staged
    # object that is missing or broken surfaces at the commits below)
    allowed = {p: blob_id(d) for p, d in dict(BASE, **ADDED).items()}
    for path, oid in index.items():
        if allowed.get(path) != oid:
            raise Inconsistent("silent-error", f"the index holds {path!r} as {oid}, which "
                               "was never staged", (cmd, rc, out, err))
    for path in want_head:
        if path not in index:
            raise Inconsistent("silent-error", f"HEAD ({subjects[0]!r}) has {path} but the "
                               "index does not: `git status` shows it as a staged deletion",
                               (cmd, rc, out, err))

    # 6. the write path, as the user goes on: if the workload's commit is missing, finish
    # the workload -- without "added", redo it all (write one.txt and two.txt, `git add`,
    # `git commit`); after "added", only `git commit` -- then commit a new file. What git
    # says it committed must read back (git skips writing an object whose file exists,
    # even an empty one a crash left: that is caught here).
    steps = []
    if not has_commit:
        steps.append((ADDED if not added else {}, WORKLOAD_MSG, dict(BASE, **ADDED)))
    steps.append((PROBE, "probe", dict(BASE, **ADDED, **PROBE)))
    for files, msg, want in steps:
        for path, data in files.items():
            with open(os.path.join(crash_dir, path), "wb") as f:
                f.write(data)
        if files:
            git.must("failed-reads-writes", "a new `git add` fails", "add", "--", *files)
        git.must("failed-reads-writes", f"a new `git commit -m {msg!r}` fails",
                 "commit", "-q", "-m", msg)
        done = f"`git commit -m {msg!r}` succeeded but"
        try:
            blobs = read_blobs(git, [f"HEAD:{p}" for p in want])
        except Inconsistent as e:
            e.cls, e.detail = "silent-error", f"{done} {e.detail}"
            raise
        for path, data in want.items():
            got = blobs[f"HEAD:{path}"]
            if got is None or got[2] != data:
                raise Inconsistent("silent-error", f"{done} HEAD:{path} " + (
                    "is unreadable (missing or empty object: git reused a tree or an object "
                    "file the crash left)" if got is None else f"reads {got[2][:40]!r}"))

    if fsck[0] != 0:
        raise Inconsistent("other", f"fsck-only: `git fsck --full` exit {fsck[0]}: "
                           f"{first_line(fsck[2] + fsck[1].decode(errors='replace'))} "
                           "(status, log, reads and new commits work)",
                           (fsck[3], fsck[0], fsck[1], fsck[2]))
    return notes


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: check.py CRASH_DIR STDOUT_FILE\n")
        sys.exit(2)
    try:
        notes = check(sys.argv[1], sys.argv[2])
    except Inconsistent as e:
        sys.stderr.write(f"consequence: {e.cls}: {e.detail}\n")
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
    main()
