"""What the known-answer checkers share. Each `<program>/check.py` follows the ALICE
contract (`check.py CRASH_DIR STDOUT_FILE`, exit 0 when the crash state is consistent),
states its program's property in its first comment, and builds it from these checks; a
failed check prints why on stderr and exits 1."""
import os
import sys


def fail(why):
    print(why, file=sys.stderr)
    sys.exit(1)


class Crash:
    """The crash directory and what the workload printed before the crash."""

    def __init__(self, argv):
        self.dir = argv[1]
        with open(argv[2], "rb") as f:
            self.out = f.read()

    def read(self, name):
        """The file's bytes, None when there is no regular file of that name."""
        p = os.path.join(self.dir, name)
        if not os.path.isfile(p):
            return None
        with open(p, "rb") as f:
            return f.read()

    def exists(self, name):
        return os.path.lexists(os.path.join(self.dir, name))

    def one_of(self, name, allowed, why):
        """`name` holds one of `allowed` (None: absent), else fail with `why`."""
        v = self.read(name)
        if v not in allowed:
            fail(f"{why}: {v!r}")
        return v

    def promised(self, word, name, want):
        """Once `word` is printed, `name` holds `want`."""
        v = self.read(name)
        if word.encode() in self.out and v != want:
            fail(f"{word} printed but {name} is {v!r}")


OLD, NEW = b"AAAA\nAAAA\n", b"BBBB\nBBBB\n"


def undo_journal(c):
    """Undo logging: a complete journal ("J" + the old records) is rolled back into db.
    Then db holds the old or the new records; the new once "done" is printed."""
    j = c.read("journal")
    db = c.read("db")
    if j is not None and len(j) == 11 and j[:1] == b"J" and all(
        len(r) == 4 and r.isalpha() for r in j[1:].split(b"\n")[:2]
    ) and j.endswith(b"\n"):
        db = j[1:]
    if db not in (OLD, NEW):
        fail(f"db after recovery is {db!r} (journal: {j!r})")
    if b"done" in c.out and db != NEW:
        fail(f"done printed but db after recovery is {db!r} (journal: {j!r})")


def redo_log(c):
    """Redo logging: a log holding the whole records and its commit mark is replayed into
    db. Then db holds both old or both new records; the new once "committed" is printed."""
    log = c.read("log")
    db = c.read("db")
    if log == b"BBBB\nBBBB\nC":
        db = NEW
    if db not in (OLD, NEW):
        fail(f"db after recovery is {db!r} (log: {log!r})")
    if b"committed" in c.out and db != NEW:
        fail(f"committed printed but db after recovery is {db!r} (log: {log!r})")
