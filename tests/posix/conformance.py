#!/usr/bin/env python3
"""intact's own POSIX conformance suite (differential, stdlib only).

Every case runs twice: once in a fresh subdirectory of the file system under test
(--dir) and once in a fresh subdirectory of a reference kernel file system
(--reference, e.g. tmpfs or ext4).  A case records normalized observations (return
values, errno names, selected stat fields, timestamp *relations*, sorted directory
listings, content hashes); the case passes when both runs recorded the same thing.

    python3 tests/posix/conformance.py --dir /mnt/under-test --reference /tmp/ref
    python3 tests/posix/conformance.py --list
    python3 tests/posix/conformance.py --dir D --reference R --only 'rename/*' --json out.json

Exit status: 0 all passed, 1 some failed, 2 usage error.  See README.md next to this
file for what is covered and what is normalized (and why).
"""

import argparse
import ctypes
import errno
import fcntl
import fnmatch
import hashlib
import json
import mmap
import os
import platform
import random
import shutil
import signal
import socket
import stat
import sys
import time
import traceback

NOBODY = 65534          # the unprivileged user (and group) non-root cases run as
OTHER = 65533           # a second unprivileged user (sticky-directory cases)
GRP = 1234              # a group nobody is not a member of (unless a case adds it)
TICK = 0.03             # sleep before an operation whose timestamp effect is observed;
                        # longer than a coarse kernel clock tick (HZ=100 -> 10 ms)
CASE_TIMEOUT = 600      # seconds per case run before it is reported as hung
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

THIS_FILE = os.path.abspath(__file__)

# ----------------------------------------------------------------------------------------
# libc helpers (ctypes) for calls the os module lacks
# ----------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276, "riscv64": 276,
                 "i386": 353, "i686": 353, "armv7l": 382, "armv6l": 382, "ppc64le": 357,
                 "ppc64": 357, "s390x": 347, "loongarch64": 276}.get(platform.machine())
O_TMPFILE = getattr(os, "O_TMPFILE", 0o20200000)
O_PATH = getattr(os, "O_PATH", 0o10000000)


def _raise_errno(what):
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e), what)


def renameat2(src, dst, flags):
    """renameat2(2) through the raw system call (glibc's wrapper is newer than some hosts)."""
    s, d = os.fsencode(src), os.fsencode(dst)
    if SYS_RENAMEAT2 is not None:
        r = _libc.syscall(ctypes.c_long(SYS_RENAMEAT2), ctypes.c_int(AT_FDCWD), ctypes.c_char_p(s),
                          ctypes.c_int(AT_FDCWD), ctypes.c_char_p(d), ctypes.c_uint(flags))
    else:  # unknown architecture: fall back to glibc >= 2.28
        r = _libc.renameat2(ctypes.c_int(AT_FDCWD), ctypes.c_char_p(s), ctypes.c_int(AT_FDCWD),
                            ctypes.c_char_p(d), ctypes.c_uint(flags))
    if r != 0:
        _raise_errno(src)


_fallocate = getattr(_libc, "fallocate64", None) or _libc.fallocate
_fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def fallocate(fd, mode, offset, length):
    if _fallocate(fd, mode, offset, length) != 0:
        _raise_errno("fallocate")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat(path, atime, mtime, flags=0):
    """utimensat(2); atime/mtime are (sec, nsec) pairs, nsec may be UTIME_NOW / UTIME_OMIT."""
    ts = (_Timespec * 2)(_Timespec(*atime), _Timespec(*mtime))
    if _libc.utimensat(ctypes.c_int(AT_FDCWD), ctypes.c_char_p(os.fsencode(path)), ts, ctypes.c_int(flags)) != 0:
        _raise_errno(path)


AT_SYMLINK_FOLLOW = 0x400


def linkat_follow(src, dst):
    """linkat(AT_FDCWD, src, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) (os.link uses plain link(2))."""
    if _libc.linkat(ctypes.c_int(AT_FDCWD), ctypes.c_char_p(os.fsencode(src)), ctypes.c_int(AT_FDCWD),
                    ctypes.c_char_p(os.fsencode(dst)), ctypes.c_int(AT_SYMLINK_FOLLOW)) != 0:
        _raise_errno(src)


def syncfs(fd):
    if _libc.syncfs(ctypes.c_int(fd)) != 0:
        _raise_errno("syncfs")


_sfr = _libc.sync_file_range
_sfr.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]


def sync_file_range(fd, off, n, flags):
    if _sfr(fd, off, n, flags) != 0:
        _raise_errno("sync_file_range")

# ----------------------------------------------------------------------------------------
# normalization
# ----------------------------------------------------------------------------------------


def ename(e):
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, "errno %d" % e.errno)
    return type(e).__name__


def short(b):
    """A readable, comparable stand-in for a bytes value."""
    if len(b) <= 24:
        return repr(b)
    return "%d bytes sha256:%s" % (len(b), hashlib.sha256(b).hexdigest()[:16])


def norm(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return short(bytes(v))
    if isinstance(v, dict):
        return {str(k): norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def ftype(mode):
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "chr"),
                       (stat.S_ISBLK, "blk")):
        if test(mode):
            return name
    return "type %o" % stat.S_IFMT(mode)


def count_subdirs(where):
    n = 0
    with os.scandir(where) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                n += 1
    return n


def snap(st, where=None):
    """The stat fields every Linux file system must agree on.

    Not compared: st_dev/st_ino (differ by nature; relations are checked by cases),
    st_blocks (allocation policy; cases check relations), st_blksize (a hint),
    timestamps (cases check relations), atime (relatime/noatime mount options),
    a directory's st_size (ext4: multiple of the block size, tmpfs: per-entry bytes,
    btrfs: sum of name lengths)."""
    t = ftype(st.st_mode)
    d = {"type": t, "mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
    if t == "dir":
        # A directory's link count is 2 + subdirectories on ext4/xfs/tmpfs; btrfs and
        # several FUSE file systems report 1 ("unknown", which find(1) understands).
        # Both conventions are accepted; any other value is compared raw.
        n = st.st_nlink
        if n == 0:
            d["nlink"] = 0
        elif where is not None:
            try:
                sub = count_subdirs(where)
                d["nlink"] = "2+subdirs" if n in (1, 2 + sub) else n
            except OSError as e:
                d["nlink"] = "unlistable (%s)" % ename(e)
        else:
            d["nlink"] = "2+subdirs" if n >= 1 else n
    else:
        d["nlink"] = st.st_nlink
        d["size"] = st.st_size
    if t in ("chr", "blk"):
        d["rdev"] = "%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    return d


def pattern(n, seed):
    return random.Random(seed).randbytes(n)


def touch(path, data=b"", mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def readall(path):
    with open(path, "rb") as f:
        return f.read()


def pread_all(fd, n, off):
    out = b""
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return out


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def shortname(n):
    if isinstance(n, bytes):
        return n if len(n) <= 40 else b"<%d bytes %s...>" % (len(n), n[:8])
    return n if len(n) <= 40 else "<%d chars %s...>" % (len(n), n[:8])


def describe_exc(e):
    line = "?"
    for fr in traceback.extract_tb(e.__traceback__):
        if os.path.abspath(fr.filename) == THIS_FILE:
            line = fr.lineno
    if isinstance(e, OSError):
        # Only the last component: the two runs live under different directories.
        name = os.path.basename(os.fsdecode(e.filename)) if e.filename else ""
        return "%s %s (%s) at line %s" % (type(e).__name__, ename(e), name, line)
    return "%s: %s at line %s" % (type(e).__name__, e, line)


class CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CaseTimeout("case did not finish within %d s" % CASE_TIMEOUT)

# ----------------------------------------------------------------------------------------
# the recorder every case gets
# ----------------------------------------------------------------------------------------


class Rec:
    """Working directory of one case run plus the ordered list of observations."""

    def __init__(self, d, prefix=""):
        self.d = d
        self.prefix = prefix
        self.records = []
        self.fds = []
        self.err = None

    def p(self, *names):
        return os.path.join(self.d, *names)

    # -- recording ----------------------------------------------------------------------
    def rec(self, label, value):
        self.records.append([self.prefix + label, norm(value)])

    def ok(self, label, fn, *a, **kw):
        """Run fn; record "ok" or the errno name; return its result (None on error)."""
        try:
            r = fn(*a, **kw)
        except OSError as e:
            self.err = ename(e)
            self.rec(label, self.err)
            return None
        self.err = None
        self.rec(label, "ok")
        return r

    def val(self, label, fn, *a, **kw):
        """Run fn; record its return value or the errno name."""
        try:
            r = fn(*a, **kw)
        except OSError as e:
            self.err = ename(e)
            self.rec(label, self.err)
            return None
        self.err = None
        self.rec(label, r)
        return r

    def open(self, label, path, flags, mode=0o644):
        fd = self.ok(label, os.open, path, flags, mode)
        if fd is not None:
            self.fds.append(fd)
        return fd

    def fd(self, path, flags=os.O_RDONLY, mode=0o644):
        """Open without recording (setup); closed automatically at the end of the case."""
        fd = os.open(path, flags, mode)
        self.fds.append(fd)
        return fd

    def close(self, fd):
        if fd in self.fds:
            self.fds.remove(fd)
        os.close(fd)

    def close_fds(self):
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def stat(self, label, path, follow=True):
        try:
            st = os.stat(path, follow_symlinks=follow)
        except OSError as e:
            self.rec(label, ename(e))
            return None
        self.rec(label, snap(st, path if stat.S_ISDIR(st.st_mode) else None))
        return st

    def fstat(self, label, fd):
        try:
            st = os.fstat(fd)
        except OSError as e:
            self.rec(label, ename(e))
            return None
        where = None
        if stat.S_ISDIR(st.st_mode) and st.st_nlink:
            where = fd
        self.rec(label, snap(st, where))
        return st

    def ls(self, label, path=None):
        try:
            names = sorted(os.listdir(self.d if path is None else path))
        except OSError as e:
            self.rec(label, ename(e))
            return None
        self.rec(label, [shortname(n) for n in names])
        return names

    def content(self, label, path):
        try:
            data = readall(path)
        except OSError as e:
            self.rec(label, ename(e))
            return None
        self.rec(label, short(data))
        return data

    def fcontent(self, label, fd):
        try:
            size = os.fstat(fd).st_size
            data = pread_all(fd, size, 0)
        except OSError as e:
            self.rec(label, ename(e))
            return None
        self.rec(label, short(data))
        return data

    # -- timestamps -----------------------------------------------------------------------
    @staticmethod
    def times(path, follow=True):
        if isinstance(path, int):
            return os.fstat(path)
        return os.stat(path, follow_symlinks=follow)

    @staticmethod
    def tick():
        time.sleep(TICK)

    def tcmp(self, label, before, after, which="mc"):
        """Record how mtime/ctime (and atime if asked) moved: advanced / unchanged / went back."""
        rel = {}
        for k, attr in (("a", "st_atime_ns"), ("m", "st_mtime_ns"), ("c", "st_ctime_ns")):
            if k in which:
                x, y = getattr(before, attr), getattr(after, attr)
                rel[k + "time"] = "advanced" if y > x else "unchanged" if y == x else "went back"
        self.rec(label, rel)

    # -- processes ------------------------------------------------------------------------
    def world(self, path=None):
        """Make the case directory (or path) accessible to the unprivileged users."""
        os.chmod(self.d if path is None else path, 0o777)

    def child(self, fn, uid=None, gid=None, groups=(), tag=None):
        """Run fn(Rec) in a forked child (optionally as uid/gid with the given
        supplementary groups); its observations are appended to this case's."""
        tag = tag if tag is not None else ("uid %d" % uid if uid is not None else "child")
        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                sub = Rec(self.d, prefix="[%s] %s" % (tag, self.prefix))
                try:
                    if uid is not None:
                        os.setgroups(list(groups))
                        os.setresgid(gid, gid, gid)
                        os.setresuid(uid, uid, uid)
                    fn(sub)
                except BaseException as e:  # noqa: B036 - report anything
                    sub.records.append([sub.prefix + "error", describe_exc(e)])
                sub.close_fds()
                with os.fdopen(w, "wb") as f:
                    f.write(json.dumps(sub.records).encode())
            finally:
                os._exit(0)
        os.close(w)
        try:
            with os.fdopen(r, "rb") as f:
                data = f.read()
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        os.waitpid(pid, 0)
        try:
            self.records.extend(json.loads(data))
        except ValueError:
            self.records.append([self.prefix + "error", "child died without a report"])

    def as_user(self, fn, uid=NOBODY, gid=NOBODY, groups=()):
        self.child(fn, uid=uid, gid=gid, groups=groups)


# ----------------------------------------------------------------------------------------
# case registry
# ----------------------------------------------------------------------------------------

class Case:
    def __init__(self, name, fn, root, doc):
        self.name, self.fn, self.root, self.doc = name, fn, root, doc

    @property
    def group(self):
        return self.name.split("/", 1)[0]


CASES = []


def case(name, root=False):
    """Register a case.  root=True: needs uid 0 (chown, other users, device nodes)."""
    def deco(fn):
        if any(c.name == name for c in CASES):
            raise SystemExit("duplicate case name " + name)
        CASES.append(Case(name, fn, root, (fn.__doc__ or "").strip()))
        return fn
    return deco


# ========================================================================================
# generic path-resolution errors, for every path-taking system call (pjdfstest's
# "01..07" files: ENOTDIR, ENAMETOOLONG, ENOENT, EACCES, ELOOP)
# ========================================================================================

def _prep_file(c, p):
    touch(p, b"data")


def _prep_dir(c, p):
    os.mkdir(p, 0o755)


def _prep_symlink(c, p):
    os.symlink("target", p)


def _ensure(path, mode=0o666):
    if not os.path.lexists(path):
        touch(path, b"companion", mode)
        os.chmod(path, mode)


def _run_link_src(c, p):
    os.link(p, c.p("link.new"))
    os.unlink(c.p("link.new"))


def _run_link_dst(c, p):
    os.link(c.p("link.src"), p)


def _run_rename_src(c, p):
    os.rename(p, c.p("ren.new"))
    os.unlink(c.p("ren.new"))


def _run_rename_dst(c, p):
    _ensure(c.p("ren.src"))
    os.rename(c.p("ren.src"), p)


class PathOp:
    def __init__(self, name, run, prep=None, dirmod=False, setup=None):
        self.name, self.run, self.prep, self.dirmod, self.setup = name, run, prep, dirmod, setup

    def do_setup(self, c):
        if self.setup:
            self.setup(c)

    def do_prep(self, c, label, p):
        if self.prep:
            c.ok(label, self.prep, c, p)


PATH_OPS = [
    PathOp("open-rdonly", lambda c, p: os.close(os.open(p, os.O_RDONLY)), _prep_file),
    PathOp("open-creat", lambda c, p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)), None, True),
    PathOp("mkdir", lambda c, p: os.mkdir(p, 0o755), None, True),
    PathOp("rmdir", lambda c, p: os.rmdir(p), _prep_dir, True),
    PathOp("unlink", lambda c, p: os.unlink(p), _prep_file, True),
    PathOp("mkfifo", lambda c, p: os.mkfifo(p, 0o644), None, True),
    PathOp("mknod", lambda c, p: os.mknod(p, stat.S_IFREG | 0o644), None, True),
    PathOp("link-src", _run_link_src, _prep_file),
    PathOp("link-dst", _run_link_dst, None, True, setup=lambda c: _ensure(c.p("link.src"))),
    PathOp("symlink", lambda c, p: os.symlink("target", p), None, True),
    PathOp("readlink", lambda c, p: os.readlink(p), _prep_symlink),
    PathOp("rename-src", _run_rename_src, _prep_file, True),
    PathOp("rename-dst", _run_rename_dst, None, True, setup=lambda c: _ensure(c.p("ren.src"))),
    PathOp("chmod", lambda c, p: os.chmod(p, 0o600), _prep_file),
    PathOp("chown", lambda c, p: os.chown(p, NOBODY, NOBODY), _prep_file),
    PathOp("lchown", lambda c, p: os.lchown(p, NOBODY, NOBODY), _prep_symlink),
    PathOp("truncate", lambda c, p: os.truncate(p, 123), _prep_file),
    PathOp("utimensat", lambda c, p: os.utime(p, ns=(10 ** 18, 10 ** 18)), _prep_file),
    PathOp("stat", lambda c, p: os.stat(p), _prep_file),
    PathOp("lstat", lambda c, p: os.lstat(p), _prep_symlink),
    PathOp("opendir", lambda c, p: os.listdir(p), _prep_dir),
]


def _deep_paths(c):
    """Create nested directories so that base/.../NAME is exactly 4095 bytes (accepted:
    PATH_MAX is 4096 including the NUL) and a sibling name one byte longer (4096, refused)."""
    remaining = 4095 - len(os.fsencode(c.d))
    n = (remaining - 2) // 201
    parent = c.d
    for i in range(n):
        parent = os.path.join(parent, chr(ord("a") + i % 26) * 200)
        os.mkdir(parent)
    f = 4095 - len(os.fsencode(parent)) - 1
    assert 1 <= f < 255, f
    ok, bad = os.path.join(parent, "p" * f), os.path.join(parent, "q" * (f + 1))
    assert len(os.fsencode(ok)) == 4095 and len(os.fsencode(bad)) == 4096
    return ok, bad


def _register_generic(op):
    n = op.name

    @case("%s/enotdir" % n)
    def _enotdir(c):
        """A path prefix component that is a regular file -> ENOTDIR."""
        touch(c.p("f"))
        op.do_setup(c)
        op.do_prep(c, "prep f/x", c.p("f", "x"))
        c.ok("%s f/x" % n, op.run, c, c.p("f", "x"))

    @case("%s/enametoolong-component" % n)
    def _name(c):
        """A 255-byte name works, a 256-byte name -> ENAMETOOLONG."""
        op.do_setup(c)
        ok = c.p("x" * 255)
        op.do_prep(c, "prep 255-byte name", ok)
        c.ok("%s 255-byte name" % n, op.run, c, ok)
        c.ls("listing")
        c.ok("%s 256-byte name" % n, op.run, c, c.p("y" * 256))

    @case("%s/enametoolong-path" % n)
    def _path(c):
        """A 4095-byte path works, a 4096-byte path -> ENAMETOOLONG."""
        op.do_setup(c)
        ok, bad = _deep_paths(c)
        op.do_prep(c, "prep 4095-byte path", ok)
        c.ok("%s 4095-byte path" % n, op.run, c, ok)
        # the final name's length depends on the base path, so record the entry count only
        c.val("entries in the deepest dir", lambda: len(os.listdir(os.path.dirname(ok))))
        c.ok("%s 4096-byte path" % n, op.run, c, bad)

    @case("%s/enoent" % n)
    def _enoent(c):
        """A missing prefix component -> ENOENT; a missing final component."""
        op.do_setup(c)
        c.ok("%s missing/x" % n, op.run, c, c.p("missing", "x"))
        c.ok("%s missing" % n, op.run, c, c.p("missing"))
        c.ls("listing")

    @case("%s/eacces-search" % n, root=True)
    def _search(c):
        """No search permission on a prefix directory -> EACCES (as an unprivileged user);
        the same with search permission as a control."""
        op.do_setup(c)
        for d, mode in (("s", 0o666), ("t", 0o777)):
            os.mkdir(c.p(d))
            op.do_prep(c, "prep %s/x" % d, c.p(d, "x"))
            os.chmod(c.p(d), mode)
        c.world()
        c.as_user(lambda u: (u.ok("%s s/x (dir 0666)" % n, op.run, u, u.p("s", "x")),
                             u.ok("%s t/x (dir 0777)" % n, op.run, u, u.p("t", "x"))))
        c.ls("listing s", c.p("s"))
        c.ls("listing t", c.p("t"))

    @case("%s/eloop" % n)
    def _eloop(c):
        """A symlink loop in the prefix -> ELOOP; as the final component (followed or not)."""
        op.do_setup(c)
        os.symlink("l2", c.p("l1"))
        os.symlink("l1", c.p("l2"))
        op.do_prep(c, "prep l1/x", c.p("l1", "x"))
        c.ok("%s l1/x" % n, op.run, c, c.p("l1", "x"))
        c.ok("%s l1" % n, op.run, c, c.p("l1"))
        c.ls("listing")

    if op.dirmod:
        @case("%s/eacces-write" % n, root=True)
        def _write(c):
            """No write permission on the parent directory -> EACCES (as an unprivileged
            user); the same in a world-writable directory as a control."""
            op.do_setup(c)
            for d, mode in (("w", 0o555), ("v", 0o777)):
                os.mkdir(c.p(d))
                op.do_prep(c, "prep %s/x" % d, c.p(d, "x"))
                os.chmod(c.p(d), mode)
            c.world()
            c.as_user(lambda u: (u.ok("%s w/x (dir 0555)" % n, op.run, u, u.p("w", "x")),
                                 u.ok("%s v/x (dir 0777)" % n, op.run, u, u.p("v", "x"))))
            c.ls("listing w", c.p("w"))
            c.ls("listing v", c.p("v"))


for _op in PATH_OPS:
    _register_generic(_op)


# ========================================================================================
# open(2)
# ========================================================================================

@case("open/creat-mode")
def _(c):
    """O_CREAT creates a regular file with mode & ~umask, size 0, one link, our uid/gid."""
    c.open("open O_CREAT 0640", c.p("f"), os.O_CREAT | os.O_WRONLY, 0o640)
    c.stat("stat", c.p("f"))
    c.open("open O_CREAT 0777", c.p("g"), os.O_CREAT | os.O_WRONLY, 0o777)
    c.stat("stat g (umask 022)", c.p("g"))
    c.open("open O_CREAT 07777", c.p("h"), os.O_CREAT | os.O_WRONLY, 0o7777)
    c.stat("stat h (07777 requested)", c.p("h"))


@case("open/creat-umask")
def _(c):
    """The umask is applied to the creation mode."""
    old = os.umask(0o027)
    try:
        c.open("open O_CREAT 0777 umask 027", c.p("f"), os.O_CREAT | os.O_WRONLY, 0o777)
        os.umask(0o777)
        c.open("open O_CREAT 0777 umask 0777", c.p("g"), os.O_CREAT | os.O_WRONLY, 0o777)
    finally:
        os.umask(old)
    c.stat("stat f", c.p("f"))
    c.stat("stat g", c.p("g"))
    c.open("open g O_RDONLY as root", c.p("g"), os.O_RDONLY)


@case("open/creat-times")
def _(c):
    """Creating a file advances the parent's mtime and ctime; the new file's times are set."""
    d0 = c.times(c.d)
    c.tick()
    c.open("create", c.p("f"), os.O_CREAT | os.O_WRONLY)
    d1 = c.times(c.d)
    c.tcmp("parent times", d0, d1)
    st = c.times(c.p("f"))
    c.rec("file mtime == ctime", st.st_mtime_ns == st.st_ctime_ns)
    c.rec("file mtime > parent's old mtime", st.st_mtime_ns > d0.st_mtime_ns)


@case("open/creat-existing")
def _(c):
    """O_CREAT on an existing file (no O_EXCL) opens it: no truncation, mode and times unchanged."""
    touch(c.p("f"), b"hello", 0o600)
    t0 = c.times(c.p("f"))
    c.tick()
    fd = c.open("open O_CREAT|O_RDWR 0777", c.p("f"), os.O_CREAT | os.O_RDWR, 0o777)
    c.val("read", os.read, fd, 100)
    c.stat("stat", c.p("f"))
    c.tcmp("times", t0, c.times(c.p("f")))


@case("open/excl")
def _(c):
    """O_CREAT|O_EXCL fails with EEXIST on anything that exists, succeeds otherwise."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    os.mkfifo(c.p("p"))
    for name in ("f", "d", "l", "p", "new"):
        c.open("O_CREAT|O_EXCL %s" % name, c.p(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    c.ls("listing")


@case("open/excl-dangling-symlink")
def _(c):
    """O_CREAT|O_EXCL does not follow a dangling symlink: EEXIST, target not created."""
    os.symlink("target", c.p("l"))
    c.open("O_CREAT|O_EXCL l", c.p("l"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    c.ls("listing")


@case("open/creat-dangling-symlink")
def _(c):
    """O_CREAT through a dangling symlink creates the target; O_NOFOLLOW refuses (ELOOP)."""
    os.symlink("target", c.p("l"))
    os.symlink("target2", c.p("m"))
    c.open("O_CREAT|O_NOFOLLOW m", c.p("m"), os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW)
    fd = c.open("O_CREAT l", c.p("l"), os.O_CREAT | os.O_WRONLY, 0o640)
    c.val("write", os.write, fd, b"through")
    c.ls("listing")
    c.stat("stat target", c.p("target"))
    c.stat("lstat l", c.p("l"), follow=False)
    c.content("content target", c.p("target"))


@case("open/trunc")
def _(c):
    """O_TRUNC empties a file and advances mtime/ctime; data written afterwards is all there is."""
    touch(c.p("f"), pattern(10000, 1))
    t0 = c.times(c.p("f"))
    c.tick()
    fd = c.open("O_WRONLY|O_TRUNC", c.p("f"), os.O_WRONLY | os.O_TRUNC)
    c.stat("stat after open", c.p("f"))
    c.tcmp("times", t0, c.times(c.p("f")))
    c.val("write", os.write, fd, b"new")
    c.content("content", c.p("f"))


@case("open/trunc-empty")
def _(c):
    """O_TRUNC on an already empty file: the timestamp effect must match the reference."""
    touch(c.p("f"))
    t0 = c.times(c.p("f"))
    c.tick()
    c.open("O_WRONLY|O_TRUNC", c.p("f"), os.O_WRONLY | os.O_TRUNC)
    c.tcmp("times", t0, c.times(c.p("f")))


@case("open/rdonly-trunc")
def _(c):
    """O_RDONLY|O_TRUNC truncates on Linux (POSIX leaves it unspecified)."""
    touch(c.p("f"), b"0123456789")
    c.open("O_RDONLY|O_TRUNC", c.p("f"), os.O_RDONLY | os.O_TRUNC)
    c.stat("stat", c.p("f"))


@case("open/append")
def _(c):
    """O_APPEND: every write goes to the end, whatever the file offset."""
    touch(c.p("f"), b"abc")
    fd = c.open("O_WRONLY|O_APPEND", c.p("f"), os.O_WRONLY | os.O_APPEND)
    c.val("lseek 0", os.lseek, fd, 0, os.SEEK_SET)
    c.val("write def", os.write, fd, b"def")
    c.val("offset after write", os.lseek, fd, 0, os.SEEK_CUR)
    c.val("lseek 1", os.lseek, fd, 1, os.SEEK_SET)
    c.val("write ghi", os.write, fd, b"ghi")
    c.content("content", c.p("f"))


@case("open/append-pwrite")
def _(c):
    """pwrite on an O_APPEND descriptor appends on Linux (a documented deviation from POSIX)."""
    touch(c.p("f"), b"abc")
    fd = c.open("O_RDWR|O_APPEND", c.p("f"), os.O_RDWR | os.O_APPEND)
    c.val("pwrite at 0", os.pwrite, fd, b"XY", 0)
    c.content("content", c.p("f"))


@case("open/append-two-fds")
def _(c):
    """Two O_APPEND descriptors interleaving writes never overwrite each other."""
    touch(c.p("f"))
    a = c.open("open a", c.p("f"), os.O_WRONLY | os.O_APPEND)
    b = c.open("open b", c.p("f"), os.O_WRONLY | os.O_APPEND)
    for i in range(10):
        os.write(a, b"a%d;" % i)
        os.write(b, b"b%d;" % i)
    c.content("content", c.p("f"))


@case("open/directory-flag")
def _(c):
    """O_DIRECTORY: ok on a directory (or a symlink to one), ENOTDIR otherwise."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("d", c.p("ld"))
    os.symlink("f", c.p("lf"))
    os.mkfifo(c.p("p"))
    for name in ("d", "ld", "f", "lf", "p"):
        c.open("O_DIRECTORY|O_RDONLY|O_NONBLOCK %s" % name, c.p(name), os.O_DIRECTORY | os.O_RDONLY | os.O_NONBLOCK)
    c.open("O_CREAT|O_DIRECTORY new", c.p("new"), os.O_CREAT | os.O_DIRECTORY | os.O_RDONLY)
    c.ls("listing")


@case("open/nofollow")
def _(c):
    """O_NOFOLLOW: a symlink as the final component -> ELOOP; symlinks in the prefix are followed."""
    touch(c.p("f"), b"x")
    os.mkdir(c.p("d"))
    touch(c.p("d", "g"), b"y")
    os.symlink("f", c.p("lf"))
    os.symlink("d", c.p("ld"))
    c.open("O_NOFOLLOW f", c.p("f"), os.O_RDONLY | os.O_NOFOLLOW)
    c.open("O_NOFOLLOW lf", c.p("lf"), os.O_RDONLY | os.O_NOFOLLOW)
    c.open("O_NOFOLLOW ld", c.p("ld"), os.O_RDONLY | os.O_NOFOLLOW)
    c.open("O_NOFOLLOW|O_DIRECTORY ld", c.p("ld"), os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY)
    c.open("O_NOFOLLOW ld/g", c.p("ld", "g"), os.O_RDONLY | os.O_NOFOLLOW)
    c.open("O_NOFOLLOW|O_CREAT lf", c.p("lf"), os.O_WRONLY | os.O_NOFOLLOW | os.O_CREAT)
    fd = c.open("O_PATH|O_NOFOLLOW lf", c.p("lf"), O_PATH | os.O_NOFOLLOW)
    if fd is not None:
        c.fstat("fstat O_PATH fd", fd)


@case("open/eisdir")
def _(c):
    """A directory can be opened read-only only: O_WRONLY/O_RDWR/O_CREAT/O_TRUNC -> EISDIR."""
    os.mkdir(c.p("d"))
    for label, flags in (("O_RDONLY", os.O_RDONLY), ("O_WRONLY", os.O_WRONLY), ("O_RDWR", os.O_RDWR),
                         ("O_CREAT|O_RDONLY", os.O_CREAT | os.O_RDONLY),
                         ("O_CREAT|O_WRONLY", os.O_CREAT | os.O_WRONLY),
                         ("O_WRONLY|O_TRUNC", os.O_WRONLY | os.O_TRUNC)):
        c.open("open d %s" % label, c.p("d"), flags)
    c.stat("stat d", c.p("d"))


@case("open/enoent")
def _(c):
    """Opening a missing file without O_CREAT -> ENOENT (and creates nothing)."""
    for label, flags in (("O_RDONLY", os.O_RDONLY), ("O_WRONLY", os.O_WRONLY),
                         ("O_RDWR|O_TRUNC", os.O_RDWR | os.O_TRUNC), ("O_APPEND", os.O_WRONLY | os.O_APPEND)):
        c.open("open missing %s" % label, c.p("missing"), flags)
    c.ls("listing")


@case("open/fifo")
def _(c):
    """FIFO open rules: O_RDONLY|O_NONBLOCK succeeds, O_WRONLY|O_NONBLOCK without a reader -> ENXIO;
    data written is read back."""
    os.mkfifo(c.p("p"))
    c.open("O_WRONLY|O_NONBLOCK (no reader)", c.p("p"), os.O_WRONLY | os.O_NONBLOCK)
    r = c.open("O_RDONLY|O_NONBLOCK", c.p("p"), os.O_RDONLY | os.O_NONBLOCK)
    w = c.open("O_WRONLY|O_NONBLOCK (reader)", c.p("p"), os.O_WRONLY | os.O_NONBLOCK)
    if r is not None and w is not None:
        c.val("write", os.write, w, b"through the pipe")
        c.val("read", os.read, r, 100)
    c.stat("stat", c.p("p"))


@case("open/read-write")
def _(c):
    """Data written in odd-sized chunks reads back identically (1 MiB)."""
    data = pattern(MiB + 12345, 7)
    fd = c.open("create", c.p("f"), os.O_CREAT | os.O_RDWR)
    pos, sizes = 0, [1, 4095, 4097, 65536, 123457, 3, 8192]
    i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        write_all(fd, data[pos:pos + n])
        pos += n
        i += 1
    c.val("offset", os.lseek, fd, 0, os.SEEK_CUR)
    c.fcontent("read back via fd", fd)
    c.close(fd)
    c.content("read back via path", c.p("f"))
    c.stat("stat", c.p("f"))


@case("open/tmpfile")
def _(c):
    """O_TMPFILE makes an unnamed file that linkat(/proc/self/fd/N) can give a name."""
    fd = c.open("O_TMPFILE|O_RDWR", c.d, O_TMPFILE | os.O_RDWR, 0o600)
    if fd is None:
        return
    c.val("write", os.write, fd, b"anonymous")
    c.fstat("fstat", fd)
    c.ls("listing before link")
    c.ok("linkat AT_SYMLINK_FOLLOW", linkat_follow, "/proc/self/fd/%d" % fd, c.p("named"))
    c.ls("listing after link")
    c.stat("stat named", c.p("named"))
    c.content("content", c.p("named"))


@case("open/root-dac-override", root=True)
def _(c):
    """root reads and writes a mode-0000 file; access(X_OK) needs at least one x bit."""
    touch(c.p("f"), b"secret", 0o000)
    os.chmod(c.p("f"), 0)
    touch(c.p("x"), b"#!/bin/sh\n", 0o100)
    os.chmod(c.p("x"), 0o100)
    c.open("O_RDWR mode 0000", c.p("f"), os.O_RDWR)
    c.content("content", c.p("f"))
    c.rec("access X_OK mode 0000", os.access(c.p("f"), os.X_OK))
    c.rec("access X_OK mode 0100", os.access(c.p("x"), os.X_OK))


@case("open/nonroot-eacces", root=True)
def _(c):
    """An unprivileged user gets EACCES where the mode bits deny the access."""
    for name, mode in (("m600", 0o600), ("m644", 0o644), ("m666", 0o666), ("m000", 0o000), ("m604", 0o604),
                       ("m602", 0o602)):
        touch(c.p(name), b"data", mode)
        os.chmod(c.p(name), mode)
    c.world()

    def body(u):
        for name in ("m600", "m644", "m666", "m000", "m604", "m602"):
            for label, flags in (("O_RDONLY", os.O_RDONLY), ("O_WRONLY", os.O_WRONLY), ("O_RDWR", os.O_RDWR)):
                fd = u.open("open %s %s" % (name, label), u.p(name), flags)
                if fd is not None:
                    u.close(fd)
    c.as_user(body)


@case("open/nonroot-class-precedence", root=True)
def _(c):
    """Only the first matching class (owner, group, other) counts: an owner with mode 0077
    cannot read although everyone else could; likewise for the group class."""
    touch(c.p("own"), b"data", 0o077)
    os.chmod(c.p("own"), 0o077)
    os.chown(c.p("own"), NOBODY, NOBODY)
    touch(c.p("grp"), b"data", 0o604)
    os.chmod(c.p("grp"), 0o604)
    os.chown(c.p("grp"), 0, NOBODY)
    touch(c.p("grp2"), b"data", 0o640)
    os.chmod(c.p("grp2"), 0o640)
    os.chown(c.p("grp2"), 0, GRP)
    c.world()
    c.as_user(lambda u: [u.open("open %s O_RDONLY" % n, u.p(n), os.O_RDONLY) for n in ("own", "grp", "grp2")])
    c.as_user(lambda u: [u.open("open %s O_RDONLY (in group %d)" % (n, GRP), u.p(n), os.O_RDONLY)
                         for n in ("grp2",)], groups=(GRP,))


@case("open/nonroot-creat-owner", root=True)
def _(c):
    """A file (and directory) created by an unprivileged user belongs to its uid and gid."""
    c.world()
    c.as_user(lambda u: (u.open("create", u.p("f"), os.O_CREAT | os.O_WRONLY, 0o644),
                         u.ok("mkdir", os.mkdir, u.p("d"))))
    c.stat("stat f", c.p("f"))
    c.stat("stat d", c.p("d"))


@case("open/nonroot-readonly-file", root=True)
def _(c):
    """Opening one's own 0444 file for writing or truncation -> EACCES; root may."""
    c.world()

    def body(u):
        fd = u.open("create 0444", u.p("f"), os.O_CREAT | os.O_WRONLY, 0o444)
        if fd is not None:
            u.val("write on the creating fd", os.write, fd, b"still writable")
        u.open("O_WRONLY", u.p("f"), os.O_WRONLY)
        u.open("O_RDONLY|O_TRUNC", u.p("f"), os.O_RDONLY | os.O_TRUNC)
        u.open("O_RDONLY", u.p("f"), os.O_RDONLY)
    c.as_user(body)
    c.stat("stat", c.p("f"))
    c.open("root O_WRONLY|O_APPEND", c.p("f"), os.O_WRONLY | os.O_APPEND)
    c.content("content", c.p("f"))


# ========================================================================================
# mkdir(2), rmdir(2)
# ========================================================================================

@case("mkdir/basic")
def _(c):
    """mkdir creates an empty directory (mode & ~umask, our uid/gid); the parent gains a link
    and its mtime/ctime advance."""
    p0 = c.times(c.d)
    c.stat("parent before", c.d)
    c.tick()
    c.ok("mkdir 0755", os.mkdir, c.p("d"), 0o755)
    c.stat("stat d", c.p("d"))
    c.stat("parent after", c.d)
    c.tcmp("parent times", p0, c.times(c.d))
    c.ls("listing of d", c.p("d"))
    st = c.times(c.p("d"))
    c.rec("new dir mtime == ctime", st.st_mtime_ns == st.st_ctime_ns)
    c.ok("mkdir 0777", os.mkdir, c.p("e"), 0o777)
    c.ok("mkdir 0", os.mkdir, c.p("z"), 0)
    c.stat("stat e (umask 022)", c.p("e"))
    c.stat("stat z", c.p("z"))


@case("mkdir/umask")
def _(c):
    """The umask applies to mkdir."""
    old = os.umask(0o077)
    try:
        c.ok("mkdir 0777 umask 077", os.mkdir, c.p("d"), 0o777)
    finally:
        os.umask(old)
    c.stat("stat", c.p("d"))


@case("mkdir/special-bits")
def _(c):
    """mkdir keeps the sticky bit of the requested mode; what happens to setuid/setgid must
    match the reference."""
    for name, mode in (("sticky", 0o1777), ("sgid", 0o2755), ("suid", 0o4755), ("all", 0o7777)):
        c.ok("mkdir %s %04o" % (name, mode), os.mkdir, c.p(name), mode)
        c.stat("stat %s" % name, c.p(name))


@case("mkdir/eexist")
def _(c):
    """mkdir over anything that exists (even a dangling symlink) -> EEXIST."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("d", c.p("ld"))
    os.symlink("nowhere", c.p("dangling"))
    os.mkfifo(c.p("p"))
    for n in ("f", "d", "ld", "dangling", "p"):
        c.ok("mkdir %s" % n, os.mkdir, c.p(n))
    c.ls("listing")


@case("mkdir/trailing-slash")
def _(c):
    """mkdir accepts trailing slashes."""
    c.ok("mkdir d/", os.mkdir, c.p("d") + "/")
    c.ok("mkdir e//", os.mkdir, c.p("e") + "//")
    c.ls("listing")


@case("mkdir/nlink")
def _(c):
    """A directory's link count follows its subdirectories (files do not count)."""
    os.mkdir(c.p("d"))
    for i in range(3):
        os.mkdir(c.p("d", "s%d" % i))
        touch(c.p("d", "f%d" % i))
    c.stat("stat d with 3 subdirs", c.p("d"))
    os.rmdir(c.p("d", "s1"))
    c.stat("stat d after rmdir", c.p("d"))
    c.val("raw nlink of d (1 or 2+subdirs accepted)", lambda: os.stat(c.p("d")).st_nlink in (1, 4))
    c.val("raw nlink of empty dir", lambda: os.stat(c.p("d", "s0")).st_nlink in (1, 2))


@case("mkdir/deep")
def _(c):
    """A 100-level deep directory tree can be created, walked and removed."""
    p = c.d
    for i in range(100):
        p = os.path.join(p, "d%d" % i)
        os.mkdir(p)
    touch(os.path.join(p, "leaf"), b"bottom")
    c.content("leaf", os.path.join(p, "leaf"))
    c.val("walk depth", lambda: sum(1 for _ in os.walk(c.p("d0"))))


@case("rmdir/basic")
def _(c):
    """rmdir removes an empty directory; the parent loses a link and its times advance."""
    os.mkdir(c.p("d"))
    c.stat("parent before", c.d)
    p0 = c.times(c.d)
    c.tick()
    c.ok("rmdir", os.rmdir, c.p("d"))
    c.stat("parent after", c.d)
    c.tcmp("parent times", p0, c.times(c.d))
    c.ls("listing")
    c.ok("rmdir again", os.rmdir, c.p("d"))


@case("rmdir/enotempty")
def _(c):
    """rmdir of a directory holding a file, a subdirectory, a symlink or a fifo -> ENOTEMPTY."""
    for n, mk in (("withfile", lambda p: touch(p)), ("withdir", os.mkdir),
                  ("withlink", lambda p: os.symlink("x", p)), ("withfifo", os.mkfifo)):
        os.mkdir(c.p(n))
        mk(c.p(n, "entry"))
        c.ok("rmdir %s" % n, os.rmdir, c.p(n))
        os.unlink(c.p(n, "entry")) if n != "withdir" else os.rmdir(c.p(n, "entry"))
        c.ok("rmdir %s after emptying" % n, os.rmdir, c.p(n))
    c.ls("listing")


@case("rmdir/non-directory")
def _(c):
    """rmdir of a file, a fifo or a symlink to a directory -> ENOTDIR."""
    touch(c.p("f"))
    os.mkfifo(c.p("p"))
    os.mkdir(c.p("d"))
    os.symlink("d", c.p("ld"))
    for n in ("f", "p", "ld"):
        c.ok("rmdir %s" % n, os.rmdir, c.p(n))
    c.ls("listing")


@case("rmdir/dot-dotdot")
def _(c):
    """rmdir d/. -> EINVAL, rmdir d/.. -> ENOTEMPTY."""
    os.mkdir(c.p("d"))
    os.mkdir(c.p("d", "e"))
    c.ok("rmdir d/e/.", os.rmdir, c.p("d", "e", "."))
    c.ok("rmdir d/e/..", os.rmdir, c.p("d", "e", ".."))
    c.ok("rmdir d/e/", os.rmdir, c.p("d", "e") + "/")
    c.ls("listing d", c.p("d"))


@case("rmdir/open-dir")
def _(c):
    """A removed directory stays usable through an open descriptor: link count 0, empty,
    nothing can be created in it (ENOENT)."""
    os.mkdir(c.p("d"))
    fd = c.fd(c.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    c.ok("rmdir", os.rmdir, c.p("d"))
    c.fstat("fstat", fd)
    c.val("listdir(fd)", lambda: os.listdir(fd))
    c.ok("openat(fd, new, O_CREAT)", lambda: os.close(os.open("new", os.O_CREAT | os.O_WRONLY, dir_fd=fd)))
    c.ok("mkdirat(fd, new)", os.mkdir, "new", dir_fd=fd)


# ========================================================================================
# unlink(2)
# ========================================================================================

@case("unlink/basic")
def _(c):
    """unlink removes the name; the parent's mtime/ctime advance."""
    touch(c.p("f"), b"x")
    p0 = c.times(c.d)
    c.tick()
    c.ok("unlink", os.unlink, c.p("f"))
    c.tcmp("parent times", p0, c.times(c.d))
    c.ls("listing")
    c.ok("unlink again", os.unlink, c.p("f"))


@case("unlink/nlink")
def _(c):
    """Unlinking one of two names drops the link count of the other and advances its ctime."""
    touch(c.p("a"), b"shared")
    os.link(c.p("a"), c.p("b"))
    c.stat("stat b before", c.p("b"))
    t0 = c.times(c.p("b"))
    c.tick()
    c.ok("unlink a", os.unlink, c.p("a"))
    c.stat("stat b after", c.p("b"))
    c.tcmp("times of b", t0, c.times(c.p("b")))
    c.content("content b", c.p("b"))


@case("unlink/eisdir")
def _(c):
    """unlink of a directory -> EISDIR (Linux; POSIX allows EPERM)."""
    os.mkdir(c.p("d"))
    c.ok("unlink d", os.unlink, c.p("d"))
    c.ok("unlink d/", os.unlink, c.p("d") + "/")
    touch(c.p("f"))
    c.ok("unlink f/", os.unlink, c.p("f") + "/")
    c.ls("listing")


@case("unlink/open-file")
def _(c):
    """An unlinked open file stays readable and writable (link count 0); a new file with the
    same name is a different file."""
    touch(c.p("f"), b"original data")
    fd = c.fd(c.p("f"), os.O_RDWR)
    c.ok("unlink", os.unlink, c.p("f"))
    c.fstat("fstat", fd)
    c.val("pread", os.pread, fd, 100, 0)
    c.val("pwrite at 100", os.pwrite, fd, b"more", 100)
    c.ok("fsync", os.fsync, fd)
    c.fcontent("content via fd", fd)
    c.fstat("fstat after write", fd)
    touch(c.p("f"), b"new")
    c.rec("new file is another inode", os.stat(c.p("f")).st_ino != os.fstat(fd).st_ino)
    c.content("new content", c.p("f"))
    c.fcontent("old content via fd", fd)


@case("unlink/special")
def _(c):
    """unlink removes a symlink (not its target), a fifo and a socket."""
    touch(c.p("target"), b"stays")
    os.symlink("target", c.p("l"))
    os.mkfifo(c.p("p"))
    os.mknod(c.p("s"), stat.S_IFSOCK | 0o644)
    for n in ("l", "p", "s"):
        c.ok("unlink %s" % n, os.unlink, c.p(n))
    c.ls("listing")
    c.content("target", c.p("target"))


@case("unlink/many")
def _(c):
    """Create 500 files, unlink every other one: the listing has exactly the rest."""
    for i in range(500):
        touch(c.p("f%03d" % i))
    for i in range(0, 500, 2):
        os.unlink(c.p("f%03d" % i))
    names = c.ls("listing") or []
    c.rec("count", len(names))


# ========================================================================================
# link(2)
# ========================================================================================

@case("link/basic")
def _(c):
    """link gives a second name to the same inode: both see link count 2 and the same data;
    the file's ctime and the parent's mtime/ctime advance."""
    touch(c.p("a"), b"data of a")
    t0, p0 = c.times(c.p("a")), c.times(c.d)
    c.tick()
    c.ok("link a b", os.link, c.p("a"), c.p("b"))
    c.stat("stat a", c.p("a"))
    c.stat("stat b", c.p("b"))
    c.rec("same inode", os.stat(c.p("a")).st_ino == os.stat(c.p("b")).st_ino)
    c.tcmp("times of a", t0, c.times(c.p("a")))
    c.tcmp("parent times", p0, c.times(c.d))
    with open(c.p("b"), "ab") as f:
        f.write(b" + via b")
    c.content("content a", c.p("a"))


@case("link/dir")
def _(c):
    """Hard links to directories are refused: EPERM."""
    os.mkdir(c.p("d"))
    c.ok("link d e", os.link, c.p("d"), c.p("e"))
    c.ls("listing")


@case("link/eexist")
def _(c):
    """link onto an existing name (file, dir, symlink, dangling symlink) -> EEXIST."""
    touch(c.p("a"))
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    os.symlink("nowhere", c.p("dl"))
    for n in ("f", "d", "l", "dl", "a"):
        c.ok("link a %s" % n, os.link, c.p("a"), c.p(n))
    c.stat("stat a", c.p("a"))


@case("link/symlink")
def _(c):
    """link(2) does not follow a symlink source (Linux): the new name is a symlink;
    linkat(AT_SYMLINK_FOLLOW) links the target."""
    touch(c.p("f"), b"x")
    os.symlink("f", c.p("l"))
    c.ok("link l nf", os.link, c.p("l"), c.p("nf"))
    c.stat("lstat nf", c.p("nf"), follow=False)
    c.stat("lstat l", c.p("l"), follow=False)
    c.ok("linkat follow l lf", linkat_follow, c.p("l"), c.p("lf"))
    c.stat("lstat lf", c.p("lf"), follow=False)
    c.stat("stat f", c.p("f"))
    os.symlink("nowhere", c.p("dangling"))
    c.ok("link dangling nd", os.link, c.p("dangling"), c.p("nd"))
    c.ok("linkat follow dangling nd2", linkat_follow, c.p("dangling"), c.p("nd2"))
    c.ls("listing")


@case("link/special")
def _(c):
    """Fifos and sockets can be hard-linked."""
    os.mkfifo(c.p("p"))
    os.mknod(c.p("s"), stat.S_IFSOCK | 0o600)
    c.ok("link fifo", os.link, c.p("p"), c.p("p2"))
    c.ok("link socket", os.link, c.p("s"), c.p("s2"))
    c.stat("stat p2", c.p("p2"))
    c.stat("stat s2", c.p("s2"))


@case("link/many")
def _(c):
    """Twenty names for one file: link count 21; unlinking them brings it back to 1."""
    touch(c.p("f"), b"many")
    os.mkdir(c.p("d"))
    for i in range(20):
        os.link(c.p("f"), c.p("d", "n%02d" % i))
    c.stat("stat f with 20 links", c.p("f"))
    for i in range(20):
        os.unlink(c.p("d", "n%02d" % i))
    c.stat("stat f after unlinking them", c.p("f"))
    c.ls("listing d", c.p("d"))


@case("link/cross-dir")
def _(c):
    """A link in another directory survives the removal of the original name."""
    os.mkdir(c.p("d"))
    touch(c.p("a"), b"moves")
    c.ok("link a d/b", os.link, c.p("a"), c.p("d", "b"))
    c.ok("unlink a", os.unlink, c.p("a"))
    c.stat("stat d/b", c.p("d", "b"))
    c.content("content d/b", c.p("d", "b"))


@case("link/nonroot-protected", root=True)
def _(c):
    """With fs.protected_hardlinks=1, an unprivileged user may link only files it owns or
    can read and write (EPERM otherwise)."""
    touch(c.p("root600"), b"x", 0o600)
    touch(c.p("root644"), b"x", 0o644)
    touch(c.p("root666"), b"x", 0o666)
    os.chmod(c.p("root666"), 0o666)
    c.world()

    def body(u):
        touch(u.p("mine"), b"x", 0o400)
        for n in ("root600", "root644", "root666", "mine"):
            u.ok("link %s" % n, os.link, u.p(n), u.p(n + ".link"))
    c.as_user(body)
    c.ls("listing")


# ========================================================================================
# symlink(2), readlink(2)
# ========================================================================================

@case("symlink/basic")
def _(c):
    """A symlink stores its target verbatim: lstat gives type symlink, mode 0777 and a size
    equal to the target's length; the parent's times advance."""
    p0 = c.times(c.d)
    c.tick()
    c.ok("symlink", os.symlink, "some/target", c.p("l"))
    c.val("readlink", os.readlink, c.p("l"))
    c.stat("lstat", c.p("l"), follow=False)
    c.stat("stat (dangling)", c.p("l"))
    c.tcmp("parent times", p0, c.times(c.d))
    st = c.times(c.p("l"), follow=False)
    c.rec("symlink mtime == ctime", st.st_mtime_ns == st.st_ctime_ns)


@case("symlink/dangling")
def _(c):
    """A dangling symlink: stat/open -> ENOENT, lstat works, creating through it works."""
    os.symlink("nowhere", c.p("l"))
    c.stat("stat", c.p("l"))
    c.stat("lstat", c.p("l"), follow=False)
    c.open("open O_RDONLY", c.p("l"), os.O_RDONLY)
    c.ok("unlink", os.unlink, c.p("l"))
    c.ls("listing")


@case("symlink/target-length")
def _(c):
    """Targets of 1 to 4095 bytes round-trip; 4096 bytes -> ENAMETOOLONG."""
    for n in (1, 59, 60, 61, 255, 256, 1023, 4000, 4095):
        target = ("t/" * (n // 2) + "x" * (n % 2))[:n]
        c.ok("symlink %d bytes" % n, os.symlink, target, c.p("l%d" % n))
        c.rec("readlink %d bytes equal" % n, os.readlink(c.p("l%d" % n)) == target if c.err is None else c.err)
        c.val("lstat size %d" % n, lambda: os.lstat(c.p("l%d" % n)).st_size)
    c.ok("symlink 4096 bytes", os.symlink, "y" * 4096, c.p("too-long"))
    c.ls("listing")


@case("symlink/odd-targets")
def _(c):
    """Targets with non-UTF-8 bytes, newlines, spaces, '..' and absolute paths round-trip."""
    for i, t in enumerate((b"\xff\xfe\x01", b"new\nline", b"with space", b"../../..", b"/", b"/etc/passwd",
                           b".", "ünïcødé".encode())):
        link = os.fsencode(c.p("l%d" % i))
        c.ok("symlink %r" % t, os.symlink, t, link)
        c.val("readlink %d" % i, os.readlink, link)


@case("symlink/eexist")
def _(c):
    """symlink over an existing name -> EEXIST."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    for n in ("f", "d", "l"):
        c.ok("symlink x %s" % n, os.symlink, "x", c.p(n))
        c.stat("lstat %s" % n, c.p(n), follow=False)


@case("symlink/max-follow")
def _(c):
    """A chain of 40 symlinks resolves; 41 -> ELOOP (Linux MAXSYMLINKS); a self-loop -> ELOOP."""
    touch(c.p("f"), b"end")
    prev = "f"
    for i in range(41):
        os.symlink(prev, c.p("l%02d" % i))
        prev = "l%02d" % i
    c.open("open via 40 links", c.p("l39"), os.O_RDONLY)
    c.open("open via 41 links", c.p("l40"), os.O_RDONLY)
    os.symlink("self", c.p("self"))
    c.stat("stat self-loop", c.p("self"))
    c.stat("lstat self-loop", c.p("self"), follow=False)


@case("symlink/follow")
def _(c):
    """Operations through a symlink reach the target: stat, write, listdir of a linked dir,
    relative targets resolved from the link's directory."""
    os.mkdir(c.p("d"))
    touch(c.p("d", "f"), b"in d")
    os.symlink("d", c.p("ld"))
    os.symlink("f", c.p("d", "lf"))
    os.symlink("../d/f", c.p("d", "up"))
    c.stat("stat ld", c.p("ld"))
    c.ls("listdir ld", c.p("ld"))
    c.content("read d/lf", c.p("d", "lf"))
    c.content("read ld/up", c.p("ld", "up"))
    with open(c.p("ld", "lf"), "ab") as f:
        f.write(b" + appended via links")
    c.content("read d/f", c.p("d", "f"))
    c.stat("stat d/lf", c.p("d", "lf"))


@case("symlink/readlink-einval")
def _(c):
    """readlink of something that is not a symlink -> EINVAL."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.mkfifo(c.p("p"))
    for n in ("f", "d", "p"):
        c.val("readlink %s" % n, os.readlink, c.p(n))


@case("symlink/nonroot-owner", root=True)
def _(c):
    """A symlink made by an unprivileged user belongs to it; following it still applies the
    target's permissions."""
    touch(c.p("secret"), b"x", 0o600)
    c.world()

    def body(u):
        u.ok("symlink", os.symlink, "secret", u.p("l"))
        u.stat("lstat", u.p("l"), follow=False)
        u.open("open through link", u.p("l"), os.O_RDONLY)
    c.as_user(body)


# ========================================================================================
# rename(2), renameat2(2)
# ========================================================================================

@case("rename/file")
def _(c):
    """rename moves a file to a new name: same inode and data; both parents' times advance."""
    touch(c.p("a"), b"payload")
    ino = os.stat(c.p("a")).st_ino
    t0, p0 = c.times(c.p("a")), c.times(c.d)
    c.tick()
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.ls("listing")
    c.stat("stat b", c.p("b"))
    c.rec("same inode", os.stat(c.p("b")).st_ino == ino)
    c.content("content b", c.p("b"))
    c.tcmp("parent times", p0, c.times(c.d))
    c.tcmp("file times", t0, c.times(c.p("b")))


@case("rename/file-over-file")
def _(c):
    """Renaming over a file replaces it atomically; the replaced file lives on through an
    open descriptor with link count 0."""
    touch(c.p("a"), b"new contents")
    touch(c.p("b"), b"old contents")
    fd = c.fd(c.p("b"))
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.ls("listing")
    c.content("content b", c.p("b"))
    c.fstat("fstat of replaced", fd)
    c.fcontent("content of replaced", fd)


@case("rename/file-over-hardlinked")
def _(c):
    """Renaming over one name of a hard-linked file lowers that file's link count."""
    touch(c.p("a"), b"A")
    touch(c.p("b"), b"B")
    os.link(c.p("b"), c.p("b2"))
    t0 = c.times(c.p("b2"))
    c.tick()
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.stat("stat b2", c.p("b2"))
    c.tcmp("times of b2", t0, c.times(c.p("b2")))
    c.content("content b", c.p("b"))


@case("rename/dir-over-empty-dir")
def _(c):
    """A directory may replace an empty directory."""
    os.mkdir(c.p("a"))
    touch(c.p("a", "inside"))
    os.mkdir(c.p("b"))
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.ls("listing")
    c.ls("listing b", c.p("b"))
    c.stat("stat parent", c.d)


@case("rename/dir-over-nonempty-dir")
def _(c):
    """A directory cannot replace a non-empty directory: ENOTEMPTY (Linux)."""
    os.mkdir(c.p("a"))
    os.mkdir(c.p("b"))
    touch(c.p("b", "x"))
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.ls("listing")
    c.ls("listing b", c.p("b"))


@case("rename/type-mismatch")
def _(c):
    """file over dir -> EISDIR, dir over file -> ENOTDIR, also for symlinks to dirs."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.mkdir(c.p("d2"))
    os.symlink("d2", c.p("ld"))
    c.ok("rename f d", os.rename, c.p("f"), c.p("d"))
    c.ok("rename d f", os.rename, c.p("d"), c.p("f"))
    c.ok("rename d ld", os.rename, c.p("d"), c.p("ld"))
    c.ls("listing")
    c.stat("lstat ld", c.p("ld"), follow=False)


@case("rename/dir-into-itself")
def _(c):
    """A directory cannot be moved into itself or below itself: EINVAL."""
    os.makedirs(c.p("d", "sub", "subsub"))
    c.ok("rename d d/sub/x", os.rename, c.p("d"), c.p("d", "sub", "x"))
    c.ok("rename d d/x", os.rename, c.p("d"), c.p("d", "x"))
    c.ok("rename d d/sub/subsub", os.rename, c.p("d"), c.p("d", "sub", "subsub"))
    c.ok("rename d/sub d/sub/subsub/x", os.rename, c.p("d", "sub"), c.p("d", "sub", "subsub", "x"))
    c.ls("listing d", c.p("d"))


@case("rename/same-name")
def _(c):
    """Renaming something onto itself succeeds and changes nothing."""
    touch(c.p("f"), b"same")
    os.mkdir(c.p("d"))
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("rename f f", os.rename, c.p("f"), c.p("f"))
    c.ok("rename d d", os.rename, c.p("d"), c.p("d"))
    c.tcmp("times of f", t0, c.times(c.p("f")))
    c.ls("listing")


@case("rename/hardlinks-noop")
def _(c):
    """rename between two names of one inode is a successful no-op: both names remain."""
    touch(c.p("a"), b"one inode")
    os.link(c.p("a"), c.p("b"))
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.ls("listing")
    c.stat("stat a", c.p("a"))
    c.stat("stat b", c.p("b"))


@case("rename/symlink")
def _(c):
    """rename moves the symlink itself, not its target."""
    touch(c.p("f"), b"target")
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    c.ok("rename l m", os.rename, c.p("l"), c.p("m"))
    c.val("readlink m", os.readlink, c.p("m"))
    os.symlink("d", c.p("ld"))
    c.ok("rename ld ld2", os.rename, c.p("ld"), c.p("ld2"))
    c.ls("listing")
    c.stat("lstat ld2", c.p("ld2"), follow=False)


@case("rename/cross-dir-file")
def _(c):
    """Moving a file between directories advances both parents' times."""
    os.mkdir(c.p("src"))
    os.mkdir(c.p("dst"))
    touch(c.p("src", "f"), b"travels")
    s0, d0 = c.times(c.p("src")), c.times(c.p("dst"))
    c.tick()
    c.ok("rename src/f dst/g", os.rename, c.p("src", "f"), c.p("dst", "g"))
    c.ls("listing src", c.p("src"))
    c.ls("listing dst", c.p("dst"))
    c.tcmp("src times", s0, c.times(c.p("src")))
    c.tcmp("dst times", d0, c.times(c.p("dst")))
    c.content("content", c.p("dst", "g"))


@case("rename/cross-dir-dir")
def _(c):
    """Moving a directory updates '..' and both parents' link counts."""
    os.mkdir(c.p("src"))
    os.mkdir(c.p("dst"))
    os.mkdir(c.p("src", "sub"))
    touch(c.p("src", "sub", "f"), b"inside")
    c.ok("rename src/sub dst/sub", os.rename, c.p("src", "sub"), c.p("dst", "sub"))
    c.stat("stat src", c.p("src"))
    c.stat("stat dst", c.p("dst"))
    c.rec("dst/sub/.. is dst", os.stat(c.p("dst", "sub", "..")).st_ino == os.stat(c.p("dst")).st_ino)
    c.ls("listing dst/sub", c.p("dst", "sub"))
    c.content("content", c.p("dst", "sub", "f"))
    c.ok("rmdir src", os.rmdir, c.p("src"))


@case("rename/dir-with-tree")
def _(c):
    """A whole tree moves with its directory."""
    os.makedirs(c.p("a", "b", "c"))
    for i in range(20):
        touch(c.p("a", "b", "c", "f%d" % i), b"%d" % i)
    os.symlink("../x", c.p("a", "b", "l"))
    c.ok("rename a z", os.rename, c.p("a"), c.p("z"))
    c.rec("tree", sorted((os.path.relpath(r, c.p("z")), sorted(ds), sorted(fs)) for r, ds, fs in os.walk(c.p("z"))))
    c.content("one file", c.p("z", "b", "c", "f7"))


@case("rename/open-file")
def _(c):
    """A descriptor keeps working across a rename of its file."""
    touch(c.p("a"), b"start")
    fd = c.fd(c.p("a"), os.O_RDWR | os.O_APPEND)
    c.ok("rename a b", os.rename, c.p("a"), c.p("b"))
    c.val("write", os.write, fd, b" end")
    c.content("content b", c.p("b"))


@case("rename/errors")
def _(c):
    """Missing source -> ENOENT; '.' or '..' as source or target -> EBUSY/EINVAL as Linux;
    trailing slash on a file -> ENOTDIR."""
    os.mkdir(c.p("d"))
    touch(c.p("f"))
    c.ok("rename missing x", os.rename, c.p("missing"), c.p("x"))
    c.ok("rename d/. x", os.rename, c.p("d", "."), c.p("x"))
    c.ok("rename d/.. x", os.rename, c.p("d", ".."), c.p("x"))
    c.ok("rename f d/.", os.rename, c.p("f"), c.p("d", "."))
    c.ok("rename f/ g", os.rename, c.p("f") + "/", c.p("g"))
    c.ok("rename f g/", os.rename, c.p("f"), c.p("g") + "/")
    c.ok("rename d/ e/", os.rename, c.p("d") + "/", c.p("e") + "/")
    c.ls("listing")


@case("rename/many")
def _(c):
    """300 renames in a row leave exactly the new names with the right contents."""
    for i in range(300):
        touch(c.p("a%03d" % i), b"%d" % i)
    for i in range(300):
        os.rename(c.p("a%03d" % i), c.p("b%03d" % ((i * 7) % 300)))
    names = c.ls("listing") or []
    c.rec("count", len(names))
    c.rec("contents", [readall(c.p("b%03d" % i)) for i in range(0, 300, 37)])


@case("rename/noreplace")
def _(c):
    """renameat2(RENAME_NOREPLACE): EEXIST if the target exists (both untouched), else a rename."""
    touch(c.p("a"), b"A")
    touch(c.p("b"), b"B")
    c.ok("noreplace a b", renameat2, c.p("a"), c.p("b"), RENAME_NOREPLACE)
    c.content("a", c.p("a"))
    c.content("b", c.p("b"))
    c.ok("noreplace a c", renameat2, c.p("a"), c.p("c"), RENAME_NOREPLACE)
    os.mkdir(c.p("d"))
    os.mkdir(c.p("e"))
    c.ok("noreplace d e", renameat2, c.p("d"), c.p("e"), RENAME_NOREPLACE)
    os.symlink("nowhere", c.p("dangling"))
    c.ok("noreplace c dangling", renameat2, c.p("c"), c.p("dangling"), RENAME_NOREPLACE)
    c.ls("listing")


@case("rename/exchange-files")
def _(c):
    """renameat2(RENAME_EXCHANGE) swaps two files atomically (names keep their inodes' data)."""
    touch(c.p("a"), b"AAAA")
    touch(c.p("b"), b"BB")
    ia, ib = os.stat(c.p("a")).st_ino, os.stat(c.p("b")).st_ino
    c.ok("exchange a b", renameat2, c.p("a"), c.p("b"), RENAME_EXCHANGE)
    c.content("a", c.p("a"))
    c.content("b", c.p("b"))
    c.rec("inodes swapped", (os.stat(c.p("a")).st_ino, os.stat(c.p("b")).st_ino) == (ib, ia))


@case("rename/exchange-file-dir")
def _(c):
    """RENAME_EXCHANGE swaps a file and a directory, also across directories ('..' follows)."""
    os.mkdir(c.p("p"))
    os.mkdir(c.p("q"))
    touch(c.p("p", "f"), b"file")
    os.mkdir(c.p("q", "d"))
    touch(c.p("q", "d", "inside"))
    c.ok("exchange p/f q/d", renameat2, c.p("p", "f"), c.p("q", "d"), RENAME_EXCHANGE)
    c.stat("stat p/f", c.p("p", "f"))
    c.stat("stat q/d", c.p("q", "d"))
    c.stat("stat p", c.p("p"))
    c.stat("stat q", c.p("q"))
    c.ls("listing p/f", c.p("p", "f"))
    c.rec("p/f/.. is p", os.stat(c.p("p", "f", "..")).st_ino == os.stat(c.p("p")).st_ino)


@case("rename/exchange-errors")
def _(c):
    """RENAME_EXCHANGE needs both names (ENOENT); RENAME_EXCHANGE|RENAME_NOREPLACE -> EINVAL;
    exchanging a directory into its own subtree -> EINVAL."""
    touch(c.p("a"))
    os.makedirs(c.p("d", "sub"))
    c.ok("exchange a missing", renameat2, c.p("a"), c.p("missing"), RENAME_EXCHANGE)
    c.ok("exchange missing a", renameat2, c.p("missing"), c.p("a"), RENAME_EXCHANGE)
    c.ok("exchange|noreplace", renameat2, c.p("a"), c.p("d"), RENAME_EXCHANGE | RENAME_NOREPLACE)
    c.ok("exchange d d/sub", renameat2, c.p("d"), c.p("d", "sub"), RENAME_EXCHANGE)
    c.ok("exchange a a", renameat2, c.p("a"), c.p("a"), RENAME_EXCHANGE)
    c.ls("listing")


# ========================================================================================
# chmod(2), fchmod(2) and the setuid/setgid/sticky bits
# ========================================================================================

@case("chmod/basic")
def _(c):
    """chmod changes the permission bits and ctime, not mtime."""
    touch(c.p("f"), b"x")
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("chmod 0600", os.chmod, c.p("f"), 0o600)
    c.stat("stat", c.p("f"))
    c.tcmp("times", t0, c.times(c.p("f")))


@case("chmod/all-bits-file")
def _(c):
    """root can set any combination of mode bits on a file (umask does not apply)."""
    touch(c.p("f"))
    old = os.umask(0o777)
    try:
        for mode in (0, 0o7777, 0o4755, 0o2755, 0o2745, 0o1755, 0o777, 0o111, 0o421, 0o6000):
            c.ok("chmod %04o" % mode, os.chmod, c.p("f"), mode)
            c.val("mode", lambda: "%04o" % stat.S_IMODE(os.stat(c.p("f")).st_mode))
    finally:
        os.umask(old)


@case("chmod/all-bits-dir")
def _(c):
    """Mode bits on a directory, including sticky and setgid."""
    os.mkdir(c.p("d"))
    for mode in (0, 0o7777, 0o1777, 0o2755, 0o4755, 0o700, 0o555):
        c.ok("chmod %04o" % mode, os.chmod, c.p("d"), mode)
        c.val("mode", lambda: "%04o" % stat.S_IMODE(os.stat(c.p("d")).st_mode))


@case("chmod/special-files")
def _(c):
    """chmod works on fifos, sockets and through symlinks (the target changes, the link
    keeps 0777)."""
    os.mkfifo(c.p("p"))
    os.mknod(c.p("s"), stat.S_IFSOCK | 0o644)
    touch(c.p("f"))
    os.symlink("f", c.p("l"))
    c.ok("chmod fifo 0600", os.chmod, c.p("p"), 0o600)
    c.ok("chmod socket 0600", os.chmod, c.p("s"), 0o600)
    c.ok("chmod via symlink 0640", os.chmod, c.p("l"), 0o640)
    for n in ("p", "s", "f"):
        c.stat("stat %s" % n, c.p(n))
    c.stat("lstat l", c.p("l"), follow=False)


@case("chmod/fchmod")
def _(c):
    """fchmod on an open descriptor; an unlinked file too."""
    touch(c.p("f"))
    fd = c.fd(c.p("f"))
    c.ok("fchmod 0604", os.fchmod, fd, 0o604)
    c.stat("stat", c.p("f"))
    os.unlink(c.p("f"))
    c.ok("fchmod unlinked 0600", os.fchmod, fd, 0o600)
    c.fstat("fstat unlinked", fd)


@case("chmod/nonroot", root=True)
def _(c):
    """An unprivileged user may chmod only its own files (EPERM otherwise); a setgid bit for a
    group it is not in is silently dropped; the sticky bit on a file is allowed (Linux)."""
    touch(c.p("roots"))
    touch(c.p("mine"))
    os.chown(c.p("mine"), NOBODY, NOBODY)
    touch(c.p("mine-grp"))
    os.chown(c.p("mine-grp"), NOBODY, GRP)
    c.world()

    def body(u):
        u.ok("chmod root's file", os.chmod, u.p("roots"), 0o777)
        for mode in (0o600, 0o4755, 0o2755, 0o1644, 0o7777):
            u.ok("chmod mine %04o" % mode, os.chmod, u.p("mine"), mode)
            u.val("mode", lambda: "%04o" % stat.S_IMODE(os.stat(u.p("mine")).st_mode))
        u.ok("chmod mine-grp 2755", os.chmod, u.p("mine-grp"), 0o2755)
        u.val("mode mine-grp", lambda: "%04o" % stat.S_IMODE(os.stat(u.p("mine-grp")).st_mode))
    c.as_user(body)
    c.stat("stat roots", c.p("roots"))


@case("chmod/sgid-dir-inherit", root=True)
def _(c):
    """In a setgid directory new files take the directory's group and new subdirectories also
    inherit the setgid bit (root creating)."""
    os.mkdir(c.p("d"))
    os.chown(c.p("d"), 0, GRP)
    os.chmod(c.p("d"), 0o2775)
    touch(c.p("d", "f"))
    os.mkdir(c.p("d", "sub"), 0o755)
    os.mkfifo(c.p("d", "p"))
    os.symlink("f", c.p("d", "l"))
    for n in ("f", "sub", "p"):
        c.stat("stat %s" % n, c.p("d", n))
    c.stat("lstat l", c.p("d", "l"), follow=False)
    touch(c.p("d", "sub", "g"))
    c.stat("stat sub/g", c.p("d", "sub", "g"))
    os.mkdir(c.p("plain"))
    os.chown(c.p("plain"), 0, GRP)
    touch(c.p("plain", "f"))
    c.stat("stat plain/f (no setgid)", c.p("plain", "f"))


@case("chmod/sgid-dir-inherit-nonroot", root=True)
def _(c):
    """An unprivileged non-member creating in a setgid directory: group inherited; a requested
    setgid bit on a group-executable file is stripped; subdirectories keep setgid."""
    os.mkdir(c.p("d"))
    os.chown(c.p("d"), 0, GRP)
    os.chmod(c.p("d"), 0o2777)
    c.world()

    def body(u):
        u.open("create f 02755", u.p("d", "f"), os.O_CREAT | os.O_WRONLY, 0o2755)
        u.open("create g 02745", u.p("d", "g"), os.O_CREAT | os.O_WRONLY, 0o2745)
        u.ok("mkdir sub", os.mkdir, u.p("d", "sub"), 0o755)
        u.ok("mkdir sub2 02755", os.mkdir, u.p("d", "sub2"), 0o2755)
    c.as_user(body)
    for n in ("f", "g", "sub", "sub2"):
        c.stat("stat %s" % n, c.p("d", n))


@case("chmod/write-clears-suid", root=True)
def _(c):
    """Writing to a setuid/setgid file as an unprivileged user clears the bits (Linux
    file_remove_privs); root (CAP_FSETID) keeps them."""
    for n in ("w", "t", "r", "g"):
        touch(c.p(n), b"x" * 100)
    for n, mode in (("w", 0o6777), ("t", 0o6777), ("r", 0o6777), ("g", 0o2767)):
        os.chmod(c.p(n), mode)
    c.world()

    def body(u):
        fd = u.open("open w", u.p("w"), os.O_WRONLY)
        if fd is not None:
            u.val("write w", os.write, fd, b"changed")
        u.ok("truncate t", os.truncate, u.p("t"), 10)
        fd = u.open("open g", u.p("g"), os.O_WRONLY)
        if fd is not None:
            u.val("write g", os.write, fd, b"changed")
    c.as_user(body)
    with open(c.p("r"), "r+b") as f:
        f.write(b"root writes")
    for n in ("w", "t", "g", "r"):
        c.stat("stat %s" % n, c.p(n))


# ========================================================================================
# chown(2), lchown(2), fchown(2)
# ========================================================================================

@case("chown/root", root=True)
def _(c):
    """root changes owner and group: ctime advances, mtime does not."""
    touch(c.p("f"))
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("chown 65534:65534", os.chown, c.p("f"), NOBODY, NOBODY)
    c.stat("stat", c.p("f"))
    c.tcmp("times", t0, c.times(c.p("f")))
    c.ok("chown -1:1234", os.chown, c.p("f"), -1, GRP)
    c.stat("stat", c.p("f"))
    c.ok("chown 0:-1", os.chown, c.p("f"), 0, -1)
    c.stat("stat", c.p("f"))
    os.mkdir(c.p("d"))
    c.ok("chown dir", os.chown, c.p("d"), NOBODY, GRP)
    c.stat("stat d", c.p("d"))


@case("chown/noop", root=True)
def _(c):
    """chown(-1, -1) succeeds; whether ctime moves must match the reference."""
    touch(c.p("f"))
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("chown -1:-1", os.chown, c.p("f"), -1, -1)
    c.tcmp("times after chown -1:-1", t0, c.times(c.p("f")))
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("chown 0:0 (unchanged)", os.chown, c.p("f"), 0, 0)
    c.tcmp("times after chown 0:0", t0, c.times(c.p("f")))


@case("chown/clears-suid", root=True)
def _(c):
    """chown of a regular file clears setuid and (group-executable) setgid, even by root;
    directories keep theirs."""
    for n, mode in (("a", 0o6755), ("b", 0o6745), ("c", 0o4700), ("d", 0o2070)):
        touch(c.p(n))
        os.chmod(c.p(n), mode)
        c.ok("chown %s (%04o)" % (n, mode), os.chown, c.p(n), NOBODY, NOBODY)
        c.stat("stat %s" % n, c.p(n))
    os.mkdir(c.p("dir"))
    os.chmod(c.p("dir"), 0o6755)
    c.ok("chown dir", os.chown, c.p("dir"), NOBODY, NOBODY)
    c.stat("stat dir", c.p("dir"))
    touch(c.p("e"))
    os.chmod(c.p("e"), 0o6755)
    c.ok("chown e -1:-1", os.chown, c.p("e"), -1, -1)
    c.stat("stat e", c.p("e"))


@case("chown/symlinks", root=True)
def _(c):
    """chown follows a symlink, lchown changes the link itself."""
    touch(c.p("f"))
    os.symlink("f", c.p("l"))
    c.ok("chown l", os.chown, c.p("l"), NOBODY, NOBODY)
    c.stat("stat f", c.p("f"))
    c.stat("lstat l", c.p("l"), follow=False)
    c.ok("lchown l", os.lchown, c.p("l"), OTHER, GRP)
    c.stat("stat f", c.p("f"))
    c.stat("lstat l", c.p("l"), follow=False)
    os.symlink("nowhere", c.p("dangling"))
    c.ok("chown dangling", os.chown, c.p("dangling"), NOBODY, NOBODY)
    c.ok("lchown dangling", os.lchown, c.p("dangling"), NOBODY, NOBODY)
    c.stat("lstat dangling", c.p("dangling"), follow=False)


@case("chown/fchown", root=True)
def _(c):
    """fchown on an open (and on an unlinked) file."""
    touch(c.p("f"))
    fd = c.fd(c.p("f"))
    c.ok("fchown", os.fchown, fd, NOBODY, GRP)
    c.stat("stat", c.p("f"))
    os.unlink(c.p("f"))
    c.ok("fchown unlinked", os.fchown, fd, OTHER, NOBODY)
    c.fstat("fstat", fd)


@case("chown/special-files", root=True)
def _(c):
    """chown of a fifo, socket and directory."""
    os.mkfifo(c.p("p"))
    os.mknod(c.p("s"), stat.S_IFSOCK | 0o644)
    os.mkdir(c.p("d"))
    for n in ("p", "s", "d"):
        c.ok("chown %s" % n, os.chown, c.p(n), NOBODY, GRP)
        c.stat("stat %s" % n, c.p(n))


@case("chown/nonroot", root=True)
def _(c):
    """An unprivileged user cannot give files away or take a group it is not in (EPERM);
    it may set its own file's group to one of its groups."""
    touch(c.p("roots"))
    touch(c.p("mine"))
    os.chown(c.p("mine"), NOBODY, NOBODY)
    c.world()

    def body(u):
        u.ok("chown root's file to me", os.chown, u.p("roots"), NOBODY, NOBODY)
        u.ok("chown mine to uid 0", os.chown, u.p("mine"), 0, -1)
        u.ok("chown mine to gid 1234", os.chown, u.p("mine"), -1, GRP)
        u.ok("chown mine to myself", os.chown, u.p("mine"), NOBODY, NOBODY)
        u.ok("chown mine -1:-1", os.chown, u.p("mine"), -1, -1)
    c.as_user(body)
    c.as_user(lambda u: u.ok("chown mine to gid 1234 (member)", os.chown, u.p("mine"), -1, GRP), groups=(GRP,))
    c.stat("stat roots", c.p("roots"))
    c.stat("stat mine", c.p("mine"))


@case("chown/nonroot-clears-suid", root=True)
def _(c):
    """An unprivileged owner changing the group of its setuid/setgid file clears the bits."""
    touch(c.p("f"))
    os.chown(c.p("f"), NOBODY, NOBODY)
    os.chmod(c.p("f"), 0o6755)
    c.world()
    c.as_user(lambda u: u.ok("chown f -1:1234", os.chown, u.p("f"), -1, GRP), groups=(GRP,))
    c.stat("stat", c.p("f"))


# ========================================================================================
# utimensat(2) / utimes
# ========================================================================================

T1 = 1234567890123456789      # 2009-02-13T23:31:30.123456789
T2 = 987654321987654321       # 2001-04-19T04:25:21.987654321


def _times_exact(c, label, path, follow=True):
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError as e:
        c.rec(label, ename(e))
        return
    c.rec(label, {"atime": st.st_atime_ns, "mtime": st.st_mtime_ns})


@case("utime/exact")
def _(c):
    """Explicit atime/mtime are stored exactly, including nanoseconds; ctime advances."""
    touch(c.p("f"), b"x")
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("utime", os.utime, c.p("f"), ns=(T1, T2))
    _times_exact(c, "times", c.p("f"))
    c.tcmp("ctime", t0, c.times(c.p("f")), "c")
    c.ok("utime 1 ns", os.utime, c.p("f"), ns=(1, 999999999))
    _times_exact(c, "times", c.p("f"))


@case("utime/range")
def _(c):
    """Times at the epoch, before 1970 and after 2038 (as far as the reference keeps them)."""
    touch(c.p("f"))
    for label, t in (("epoch", 0), ("1969 -1.5 s", -1_500_000_000), ("1969 -1 ns", -1),
                     ("1969 -1.000000001 s", -1_000_000_001), ("1969 -2 s", -2_000_000_000),
                     ("1901", -2 ** 31 * 10 ** 9),
                     ("2038+", (2 ** 31 + 10) * 10 ** 9 + 5), ("2106+", (2 ** 32 + 7) * 10 ** 9 + 11),
                     ("2400", 13_569_465_600 * 10 ** 9 + 123)):
        c.ok("utime %s" % label, os.utime, c.p("f"), ns=(t, t))
        _times_exact(c, "times %s" % label, c.p("f"))


@case("utime/now")
def _(c):
    """utime(NULL) sets atime and mtime to the current time."""
    touch(c.p("f"))
    os.utime(c.p("f"), ns=(T1, T2))
    before = time.time_ns()
    c.ok("utime now", os.utime, c.p("f"))
    after = time.time_ns()
    st = os.stat(c.p("f"))
    slack = 100_000_000  # the kernel stamps with a coarse clock
    c.rec("atime is now", before - slack <= st.st_atime_ns <= after + slack)
    c.rec("mtime is now", before - slack <= st.st_mtime_ns <= after + slack)


@case("utime/omit")
def _(c):
    """UTIME_OMIT leaves that time alone; both omitted changes nothing (not even ctime)."""
    touch(c.p("f"))
    os.utime(c.p("f"), ns=(T1, T2))
    c.ok("atime OMIT, mtime set", utimensat, c.p("f"), (0, UTIME_OMIT), (5, 6))
    _times_exact(c, "times", c.p("f"))
    c.ok("atime set, mtime OMIT", utimensat, c.p("f"), (7, 8), (0, UTIME_OMIT))
    _times_exact(c, "times", c.p("f"))
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("both OMIT", utimensat, c.p("f"), (0, UTIME_OMIT), (0, UTIME_OMIT))
    _times_exact(c, "times", c.p("f"))
    c.tcmp("ctime", t0, c.times(c.p("f")), "c")


@case("utime/now-and-exact")
def _(c):
    """UTIME_NOW for one field, an exact value for the other."""
    touch(c.p("f"))
    before = time.time_ns()
    c.ok("atime NOW, mtime exact", utimensat, c.p("f"), (0, UTIME_NOW), (T2 // 10 ** 9, T2 % 10 ** 9))
    st = os.stat(c.p("f"))
    c.rec("atime is now", st.st_atime_ns >= before - 100_000_000)
    c.rec("mtime", st.st_mtime_ns)
    c.ok("tv_nsec 1e9 -> EINVAL", utimensat, c.p("f"), (0, 10 ** 9), (0, 0))
    c.ok("tv_nsec -1 -> EINVAL", utimensat, c.p("f"), (0, -1), (0, 0))


@case("utime/symlink-nofollow")
def _(c):
    """AT_SYMLINK_NOFOLLOW sets the symlink's own times; following sets the target's."""
    touch(c.p("f"))
    os.utime(c.p("f"), ns=(T1, T1))
    os.symlink("f", c.p("l"))
    c.ok("utime l nofollow", os.utime, c.p("l"), ns=(T2, T2), follow_symlinks=False)
    _times_exact(c, "lstat l", c.p("l"), follow=False)
    _times_exact(c, "stat f", c.p("f"))
    c.ok("utime l follow", os.utime, c.p("l"), ns=(5 * 10 ** 9, 6 * 10 ** 9))
    _times_exact(c, "stat f", c.p("f"))
    c.rec("symlink mtime unchanged", os.lstat(c.p("l")).st_mtime_ns == T2)


@case("utime/dir-and-special")
def _(c):
    """Exact times on a directory, a fifo and through a descriptor (futimens)."""
    os.mkdir(c.p("d"))
    os.mkfifo(c.p("p"))
    touch(c.p("f"))
    c.ok("utime d", os.utime, c.p("d"), ns=(T1, T2))
    c.ok("utime p", os.utime, c.p("p"), ns=(T2, T1))
    fd = c.fd(c.p("f"))
    c.ok("futimens", os.utime, fd, ns=(T1, T1))
    for n in ("d", "p", "f"):
        _times_exact(c, "times %s" % n, c.p(n))


@case("utime/nonroot", root=True)
def _(c):
    """Owner may set any time; a non-owner with write permission may only set 'now'
    (explicit -> EPERM); without write permission even 'now' -> EACCES."""
    touch(c.p("mine"))
    os.chown(c.p("mine"), NOBODY, NOBODY)
    touch(c.p("rw"))
    os.chmod(c.p("rw"), 0o666)
    touch(c.p("ro"))
    os.chmod(c.p("ro"), 0o644)
    c.world()

    def body(u):
        u.ok("mine explicit", os.utime, u.p("mine"), ns=(T1, T2))
        u.ok("rw now", os.utime, u.p("rw"))
        u.ok("rw explicit", os.utime, u.p("rw"), ns=(T1, T2))
        u.ok("rw omit both", utimensat, u.p("rw"), (0, UTIME_OMIT), (0, UTIME_OMIT))
        u.ok("ro now", os.utime, u.p("ro"))
        u.ok("ro explicit", os.utime, u.p("ro"), ns=(T1, T2))
    c.as_user(body)
    _times_exact(c, "times mine", c.p("mine"))


# ========================================================================================
# truncate(2), ftruncate(2)
# ========================================================================================

@case("truncate/grow")
def _(c):
    """Growing a file fills with zeros; mtime and ctime advance."""
    touch(c.p("f"), b"abc")
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("truncate 10000", os.truncate, c.p("f"), 10000)
    c.stat("stat", c.p("f"))
    c.content("content", c.p("f"))
    c.rec("tail is zeros", readall(c.p("f"))[3:] == bytes(9997))
    c.tcmp("times", t0, c.times(c.p("f")))


@case("truncate/shrink")
def _(c):
    """Shrinking keeps the prefix; growing again reads zeros where the old data was."""
    data = pattern(20000, 3)
    touch(c.p("f"), data)
    c.ok("truncate 100", os.truncate, c.p("f"), 100)
    c.content("content", c.p("f"))
    c.ok("truncate 20000", os.truncate, c.p("f"), 20000)
    got = readall(c.p("f"))
    c.rec("prefix kept", got[:100] == data[:100])
    c.rec("rest is zeros", got[100:] == bytes(19900))
    c.ok("truncate 4096", os.truncate, c.p("f"), 4096)
    c.ok("truncate 0", os.truncate, c.p("f"), 0)
    c.stat("stat", c.p("f"))


@case("truncate/same-size")
def _(c):
    """Truncating to the current size: timestamp effect must match the reference."""
    touch(c.p("f"), b"12345")
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("truncate 5", os.truncate, c.p("f"), 5)
    c.tcmp("times", t0, c.times(c.p("f")))
    fd = c.fd(c.p("f"), os.O_RDWR)
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("ftruncate 5", os.ftruncate, fd, 5)
    c.tcmp("times after ftruncate", t0, c.times(c.p("f")))


@case("truncate/5gib")
def _(c):
    """Truncating to 5 GiB makes a sparse file: size exact, the end reads zeros, few blocks."""
    touch(c.p("f"), b"head")
    c.ok("truncate 5 GiB", os.truncate, c.p("f"), 5 * GiB)
    st = c.stat("stat", c.p("f"))
    fd = c.fd(c.p("f"))
    c.val("pread last 16 bytes", os.pread, fd, 16, 5 * GiB - 16)
    c.val("pread at the end", os.pread, fd, 16, 5 * GiB)
    c.val("pread head", os.pread, fd, 4, 0)
    if st:
        c.rec("allocated < 1 MiB", st.st_blocks * 512 < MiB)
    c.ok("truncate back to 4", os.truncate, c.p("f"), 4)
    c.content("content", c.p("f"))


@case("truncate/frees-blocks")
def _(c):
    """Truncating a written file to 0 releases its blocks (st_blocks 0)."""
    touch(c.p("f"), pattern(MiB, 4))
    fd = c.fd(c.p("f"), os.O_RDWR)
    os.fsync(fd)
    c.rec("allocated >= 1 MiB", os.fstat(fd).st_blocks * 512 >= MiB)
    c.ok("ftruncate 0", os.ftruncate, fd, 0)
    os.fsync(fd)
    c.val("st_blocks after", lambda: os.fstat(fd).st_blocks)


@case("truncate/errors")
def _(c):
    """truncate: negative -> EINVAL, directory -> EISDIR, fifo -> EINVAL, through a symlink
    truncates the target."""
    touch(c.p("f"), b"0123456789")
    os.mkdir(c.p("d"))
    os.mkfifo(c.p("p"))
    os.symlink("f", c.p("l"))
    c.ok("truncate -1", os.truncate, c.p("f"), -1)
    c.ok("truncate dir", os.truncate, c.p("d"), 0)
    c.ok("truncate fifo", os.truncate, c.p("p"), 0)
    c.ok("truncate via symlink", os.truncate, c.p("l"), 3)
    c.content("content f", c.p("f"))
    c.stat("lstat l", c.p("l"), follow=False)


@case("truncate/nonroot", root=True)
def _(c):
    """truncate needs write permission: EACCES on a root 0644 file, ok on 0666."""
    touch(c.p("ro"), b"x" * 10)
    touch(c.p("rw"), b"x" * 10)
    os.chmod(c.p("rw"), 0o666)
    c.world()
    c.as_user(lambda u: (u.ok("truncate ro", os.truncate, u.p("ro"), 1),
                         u.ok("truncate rw", os.truncate, u.p("rw"), 1)))
    c.stat("stat ro", c.p("ro"))
    c.stat("stat rw", c.p("rw"))


@case("ftruncate/basic")
def _(c):
    """ftruncate grows and shrinks through a descriptor and leaves the offset alone, so a
    write after shrinking leaves a hole."""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    os.write(fd, b"x" * 100)
    c.ok("ftruncate 10", os.ftruncate, fd, 10)
    c.val("offset", os.lseek, fd, 0, os.SEEK_CUR)
    c.val("write", os.write, fd, b"end")
    c.fcontent("content", fd)
    c.ok("ftruncate 200", os.ftruncate, fd, 200)
    c.fstat("fstat", fd)
    c.ok("ftruncate -1", os.ftruncate, fd, -1)


@case("ftruncate/descriptor-modes")
def _(c):
    """ftruncate on a read-only descriptor -> EINVAL (Linux); on O_APPEND works; on a
    directory descriptor -> EINVAL/EISDIR as the reference."""
    touch(c.p("f"), b"0123456789")
    os.mkdir(c.p("d"))
    ro = c.fd(c.p("f"))
    ap = c.fd(c.p("f"), os.O_WRONLY | os.O_APPEND)
    dfd = c.fd(c.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    c.ok("ftruncate O_RDONLY", os.ftruncate, ro, 1)
    c.ok("ftruncate O_APPEND", os.ftruncate, ap, 5)
    c.ok("ftruncate dir fd", os.ftruncate, dfd, 0)
    c.content("content", c.p("f"))


@case("ftruncate/unlinked")
def _(c):
    """ftruncate and writes on an unlinked file."""
    touch(c.p("f"), b"data")
    fd = c.fd(c.p("f"), os.O_RDWR)
    os.unlink(c.p("f"))
    c.ok("ftruncate 50000", os.ftruncate, fd, 50000)
    c.val("pwrite at 49999", os.pwrite, fd, b"Z", 49999)
    c.fstat("fstat", fd)
    c.fcontent("content", fd)


@case("ftruncate/permission-at-open", root=True)
def _(c):
    """Permissions are checked at open: after chmod 0444 the open read-write descriptor can
    still write and ftruncate."""
    c.world()

    def body(u):
        fd = u.open("create", u.p("f"), os.O_CREAT | os.O_RDWR, 0o644)
        if fd is None:
            return
        u.ok("chmod 0444", os.chmod, u.p("f"), 0o444)
        u.val("write", os.write, fd, b"after chmod")
        u.ok("ftruncate 5", os.ftruncate, fd, 5)
        u.ok("fchmod 0", os.fchmod, fd, 0)
        u.val("pwrite", os.pwrite, fd, b"!", 5)
        u.fcontent("content", fd)
        u.open("reopen O_RDONLY", u.p("f"), os.O_RDONLY)
    c.as_user(body)


# ========================================================================================
# read/write at offsets: pread(2), pwrite(2), lseek(2), readv/writev, copy_file_range
# ========================================================================================

@case("io/pwrite-hole")
def _(c):
    """pwrite past the end leaves a hole that reads as zeros."""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    c.val("pwrite abc at 1000", os.pwrite, fd, b"abc", 1000)
    c.fstat("fstat", fd)
    c.val("pread 0..1003", lambda: pread_all(fd, 1003, 0) == bytes(1000) + b"abc")
    c.val("offset unchanged", os.lseek, fd, 0, os.SEEK_CUR)


@case("io/pread-eof")
def _(c):
    """pread at/after EOF returns nothing; across EOF returns the short remainder."""
    touch(c.p("f"), b"0123456789")
    fd = c.fd(c.p("f"))
    c.val("pread 5 at 8", os.pread, fd, 5, 8)
    c.val("pread 5 at 10", os.pread, fd, 5, 10)
    c.val("pread 5 at 1000", os.pread, fd, 5, 1000)
    c.val("pread 0 at 0", os.pread, fd, 0, 0)
    c.val("read after lseek past EOF", lambda: (os.lseek(fd, 100, os.SEEK_SET), os.read(fd, 10)))


@case("io/overwrite")
def _(c):
    """Overwrites in the middle, across block boundaries and at odd offsets."""
    data = bytearray(pattern(3 * 65536, 5))
    touch(c.p("f"), data)
    fd = c.fd(c.p("f"), os.O_RDWR)
    for off, n in ((0, 1), (4095, 2), (4096, 4096), (65535, 70000), (100, 3), (3 * 65536 - 7, 7)):
        chunk = pattern(n, off)
        os.pwrite(fd, chunk, off)
        data[off:off + n] = chunk
    c.rec("content matches", pread_all(fd, len(data), 0) == bytes(data))
    c.fstat("fstat", fd)
    c.fcontent("content", fd)


@case("io/lseek")
def _(c):
    """lseek SEEK_SET/CUR/END, past EOF (then a write leaves a hole), negative -> EINVAL."""
    touch(c.p("f"), b"x" * 100)
    fd = c.fd(c.p("f"), os.O_RDWR)
    c.val("SEEK_END", os.lseek, fd, 0, os.SEEK_END)
    c.val("SEEK_END -10", os.lseek, fd, -10, os.SEEK_END)
    c.val("SEEK_CUR +5", os.lseek, fd, 5, os.SEEK_CUR)
    c.val("SEEK_SET -1", os.lseek, fd, -1, os.SEEK_SET)
    c.val("SEEK_SET 200", os.lseek, fd, 200, os.SEEK_SET)
    c.val("write", os.write, fd, b"y")
    c.fstat("fstat", fd)
    c.fcontent("content", fd)


@case("io/seek-data-hole")
def _(c):
    """SEEK_DATA/SEEK_HOLE never report a hole where data is.  (Reporting the whole file as
    data is allowed: how exactly holes are reported is file-system specific.)"""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    size = 4 * MiB
    os.ftruncate(fd, size)
    extents = [(0, 4096), (MiB, 8192), (3 * MiB + 4096, 4096)]
    for off, n in extents:
        os.pwrite(fd, b"D" * n, off)
    os.fsync(fd)
    holes = []
    off = 0
    try:
        while off < size:
            d = os.lseek(fd, off, os.SEEK_DATA)
            if d > off:
                holes.append((off, d))
            h = os.lseek(fd, d, os.SEEK_HOLE)
            off = h
    except OSError as e:
        if e.errno != errno.ENXIO:
            c.rec("lseek error", ename(e))
            return
        holes.append((off, size))
    bad = [(ho, hl) for ho, hl in holes for do, dn in extents if ho < do + dn and do < hl]
    c.rec("data reported as hole", bad)
    c.val("SEEK_HOLE at size", os.lseek, fd, size, os.SEEK_HOLE)
    c.val("SEEK_DATA past end", os.lseek, fd, size + 1, os.SEEK_DATA)


@case("io/large-write")
def _(c):
    """A single 8 MiB write and a read back."""
    data = pattern(8 * MiB, 9)
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    c.val("write 8 MiB", lambda: len(data) if write_all(fd, data) is None else None)
    c.ok("fsync", os.fsync, fd)
    c.fstat("fstat", fd)
    c.content("content via path", c.p("f"))


@case("io/sparse-6gib")
def _(c):
    """One byte written at 6 GiB: size 6 GiB + 1, few blocks allocated, zeros before it."""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    c.val("pwrite 1 byte at 6 GiB", os.pwrite, fd, b"!", 6 * GiB)
    os.fsync(fd)
    st = c.fstat("fstat", fd)
    if st:
        c.rec("allocated < 1 MiB", st.st_blocks * 512 < MiB)
        c.rec("allocated > 0", st.st_blocks > 0)
    c.val("pread last byte", os.pread, fd, 1, 6 * GiB)
    c.val("pread 4 KiB at 3 GiB is zeros", lambda: os.pread(fd, 4096, 3 * GiB) == bytes(4096))
    c.val("pread across the byte", os.pread, fd, 8, 6 * GiB - 4)


@case("io/readv-writev")
def _(c):
    """Vectored I/O writes and reads the buffers in order."""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    c.val("writev", os.writev, fd, [b"one,", b"", b"two,", b"three" * 1000])
    os.lseek(fd, 0, os.SEEK_SET)
    bufs = [bytearray(3), bytearray(5), bytearray(10000)]
    c.val("readv", os.readv, fd, bufs)
    c.rec("buffers", [bytes(b) for b in bufs])
    c.val("pwritev at 2", os.pwritev, fd, [b"AB", b"CD"], 2)
    c.val("preadv at 0", lambda: (os.preadv(fd, bufs[:2], 0), [bytes(b) for b in bufs[:2]]))


@case("io/copy-file-range")
def _(c):
    """copy_file_range copies data (whole file, with offsets, within the same file)."""
    data = pattern(MiB + 3, 11)
    touch(c.p("src"), data)
    s = c.fd(c.p("src"))
    d = c.fd(c.p("dst"), os.O_RDWR | os.O_CREAT)

    def copy_all(n, so, do):
        done = 0
        while done < n:
            r = os.copy_file_range(s, d, n - done, so + done, do + done)
            if r == 0:
                break
            done += r
        return done
    c.val("copy 1 MiB+3", copy_all, len(data), 0, 0)
    c.content("dst", c.p("dst"))
    c.val("copy 100 bytes from 1000 to 5 MiB", copy_all, 100, 1000, 5 * MiB)
    c.fstat("fstat dst", d)
    c.val("copied bytes", os.pread, d, 100, 5 * MiB)


@case("io/descriptor-errors")
def _(c):
    """read on a directory -> EISDIR; write on O_RDONLY / read on O_WRONLY -> EBADF;
    write on a closed descriptor -> EBADF."""
    os.mkdir(c.p("d"))
    touch(c.p("f"), b"abc")
    dfd = c.fd(c.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    ro = c.fd(c.p("f"))
    wo = c.fd(c.p("f"), os.O_WRONLY)
    c.val("read dir", os.read, dfd, 10)
    c.val("write O_RDONLY", os.write, ro, b"x")
    c.val("read O_WRONLY", os.read, wo, 1)
    c.val("pwrite O_RDONLY", os.pwrite, ro, b"x", 0)


@case("io/shared-offsets")
def _(c):
    """Two descriptors have separate offsets; a dup shares it; writes are visible at once."""
    touch(c.p("f"))
    a = c.fd(c.p("f"), os.O_RDWR)
    b = c.fd(c.p("f"), os.O_RDWR)
    d = os.dup(a)
    c.fds.append(d)
    os.write(a, b"AAAA")
    c.val("read via b", os.read, b, 10)
    os.write(d, b"DD")
    c.val("offset of a after write via dup", os.lseek, a, 0, os.SEEK_CUR)
    os.write(b, b"b")
    c.content("content", c.p("f"))


@case("io/o-sync-dsync")
def _(c):
    """O_SYNC and O_DSYNC descriptors write normally."""
    fd = c.open("open O_SYNC", c.p("f"), os.O_WRONLY | os.O_CREAT | os.O_SYNC)
    g = c.open("open O_DSYNC", c.p("g"), os.O_WRONLY | os.O_CREAT | os.O_DSYNC)
    if fd is not None:
        c.val("write O_SYNC", os.write, fd, b"synced" * 1000)
    if g is not None:
        c.val("write O_DSYNC", os.write, g, b"dsynced" * 1000)
    c.content("f", c.p("f"))
    c.content("g", c.p("g"))


@case("io/o-direct")
def _(c):
    """O_DIRECT with block-aligned buffers, offsets and sizes writes and reads back."""
    fd = c.open("open O_DIRECT", c.p("f"), os.O_RDWR | os.O_CREAT | os.O_DIRECT)
    if fd is None:
        return
    buf = mmap.mmap(-1, 64 * KiB)      # page-aligned memory
    buf[:] = pattern(64 * KiB, 17)
    c.val("pwrite 64 KiB at 0", os.pwrite, fd, buf, 0)
    c.val("pwrite 64 KiB at 1 MiB", os.pwrite, fd, buf, MiB)
    rbuf = mmap.mmap(-1, 64 * KiB)
    c.val("preadv 64 KiB at 1 MiB", os.preadv, fd, [rbuf], MiB)
    c.rec("read back equal", rbuf[:] == buf[:])
    c.fstat("fstat", fd)
    c.content("content via buffered read", c.p("f"))
    buf.close()
    rbuf.close()


@case("io/mmap-shared")
def _(c):
    """A MAP_SHARED write + msync is visible to read(2) and after munmap."""
    touch(c.p("f"), bytes(3 * 4096 + 100))
    fd = c.fd(c.p("f"), os.O_RDWR)
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:5] = b"hello"
    m[4096 * 3:4096 * 3 + 6] = b"across"
    m[-1:] = b"$"
    c.ok("msync", m.flush)
    g = c.fd(c.p("f"))
    c.val("pread head", os.pread, g, 5, 0)
    c.val("pread page 3", os.pread, g, 6, 4096 * 3)
    m.close()
    c.content("content after munmap", c.p("f"))
    c.stat("stat", c.p("f"))


@case("io/mmap-read-after-write")
def _(c):
    """A mapping sees data written with write(2); MAP_PRIVATE changes stay private."""
    touch(c.p("f"), bytes(8192))
    fd = c.fd(c.p("f"), os.O_RDWR)
    m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
    os.pwrite(fd, b"written", 4000)
    c.rec("map sees write", m[4000:4007])
    m.close()
    p = mmap.mmap(fd, 8192, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    p[0:7] = b"private"
    c.rec("private map", p[0:7])
    p.close()
    c.val("file untouched", os.pread, fd, 7, 0)


@case("io/mmap-extend")
def _(c):
    """Grow a file with ftruncate, write the new area through a mapping, read it back."""
    touch(c.p("f"), b"start")
    fd = c.fd(c.p("f"), os.O_RDWR)
    os.ftruncate(fd, 3 * 4096)
    m = mmap.mmap(fd, 3 * 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[2 * 4096:2 * 4096 + 4] = b"tail"
    m.flush()
    m.close()
    c.ok("fsync", os.fsync, fd)
    c.content("content", c.p("f"))


# ========================================================================================
# fallocate(2), posix_fallocate(3)
# ========================================================================================

@case("fallocate/mode0")
def _(c):
    """fallocate mode 0 extends the size, allocates the blocks and reads zeros."""
    fd = c.fd(c.p("f"), os.O_RDWR | os.O_CREAT)
    _settle(c)
    v0 = os.statvfs(c.d)
    c.ok("fallocate 0..1 MiB", fallocate, fd, 0, 0, MiB)
    v1 = os.statvfs(c.d)
    c.rec("space reserved (f_bfree lowered by >= 1 MiB)", (v0.f_bfree - v1.f_bfree) * v1.f_frsize >= MiB)
    st = c.fstat("fstat", fd)
    if st:
        c.rec("st_blocks counts the allocation (>= 1 MiB)", st.st_blocks * 512 >= MiB)
    c.fcontent("content", fd)


@case("fallocate/keep-size")
def _(c):
    """FALLOC_FL_KEEP_SIZE allocates without changing the size."""
    touch(c.p("f"), b"abc")
    fd = c.fd(c.p("f"), os.O_RDWR)
    _settle(c)
    # The block holding "abc" is allocated already: the range needs only the rest (tmpfs
    # lowers f_bfree by 1 MiB - 4 KiB here).
    held = os.fstat(fd).st_blocks * 512
    v0 = os.statvfs(c.d)
    c.ok("fallocate KEEP_SIZE 0..1 MiB", fallocate, fd, FALLOC_FL_KEEP_SIZE, 0, MiB)
    v1 = os.statvfs(c.d)
    c.rec("space reserved (f_bfree lowered by >= 1 MiB less the blocks the file held)",
          (v0.f_bfree - v1.f_bfree) * v1.f_frsize >= MiB - held)
    st = c.fstat("fstat", fd)
    if st:
        c.rec("st_blocks counts the allocation (>= 1 MiB)", st.st_blocks * 512 >= MiB)
    c.fcontent("content", fd)
    c.val("append after", os.pwrite, fd, b"def", 3)
    c.fcontent("content", fd)


@case("fallocate/beyond-eof")
def _(c):
    """fallocate past EOF (mode 0) grows the file and keeps existing data."""
    touch(c.p("f"), b"x" * 100)
    fd = c.fd(c.p("f"), os.O_RDWR)
    c.ok("fallocate 4096+8192", fallocate, fd, 0, 4096, 8192)
    c.fstat("fstat", fd)
    c.fcontent("content", fd)
    c.ok("fallocate inside (no-op size)", fallocate, fd, 0, 0, 10)
    c.fstat("fstat", fd)


@case("fallocate/punch-hole")
def _(c):
    """PUNCH_HOLE|KEEP_SIZE zeros the range, keeps the size and frees blocks."""
    data = pattern(256 * KiB, 12)
    touch(c.p("f"), data)
    fd = c.fd(c.p("f"), os.O_RDWR)
    os.fsync(fd)
    b0 = os.fstat(fd).st_blocks
    c.ok("punch 64 KiB at 64 KiB", fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 64 * KiB, 64 * KiB)
    os.fsync(fd)
    st = c.fstat("fstat", fd)
    got = pread_all(fd, len(data), 0)
    c.rec("range zeroed", got[64 * KiB:128 * KiB] == bytes(64 * KiB))
    c.rec("rest intact", got[:64 * KiB] == data[:64 * KiB] and got[128 * KiB:] == data[128 * KiB:])
    if st:
        c.rec("blocks decreased", st.st_blocks < b0)
    c.ok("punch without KEEP_SIZE", fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096)


@case("fallocate/errors")
def _(c):
    """fallocate: length 0 -> EINVAL, negative offset -> EINVAL, read-only fd -> EBADF,
    directory -> EISDIR/EBADF as the reference."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    rw = c.fd(c.p("f"), os.O_RDWR)
    ro = c.fd(c.p("f"))
    dfd = c.fd(c.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    c.ok("len 0", fallocate, rw, 0, 0, 0)
    c.ok("offset -1", fallocate, rw, 0, -1, 10)
    c.ok("O_RDONLY fd", fallocate, ro, 0, 0, 10)
    c.ok("dir fd", fallocate, dfd, 0, 0, 10)


@case("fallocate/posix-fallocate")
def _(c):
    """posix_fallocate reserves space and extends the size (glibc falls back to writing
    zeros where fallocate is unsupported)."""
    touch(c.p("f"), b"xyz")
    fd = c.fd(c.p("f"), os.O_RDWR)
    c.ok("posix_fallocate 0..100000", os.posix_fallocate, fd, 0, 100000)
    c.fstat("fstat", fd)
    c.fcontent("content", fd)


# ========================================================================================
# directories: many entries, readdir while changing, entry types, odd names
# ========================================================================================

@case("dir/20000-entries")
def _(c):
    """A directory with 20,000 entries lists exactly those names; removing them empties it."""
    os.mkdir(c.p("d"))
    names = ["entry-%05d-%s" % (i, "x" * (i % 50)) for i in range(20000)]
    for n in names:
        os.close(os.open(c.p("d", n), os.O_CREAT | os.O_WRONLY, 0o644))
    got = sorted(os.listdir(c.p("d")))
    c.rec("count", len(got))
    c.rec("names equal", got == sorted(names))
    c.rec("no duplicates", len(set(got)) == len(got))
    seen = 0
    with os.scandir(c.p("d")) as it:
        for e in it:
            seen += 1
    c.rec("scandir count", seen)
    c.stat("stat a few", c.p("d", names[12345]))
    for n in names:
        os.unlink(c.p("d", n))
    c.ls("listing after unlinking all", c.p("d"))
    c.ok("rmdir", os.rmdir, c.p("d"))


@case("dir/unlink-while-reading")
def _(c):
    """Unlinking entries while reading the directory (what rm -r does) still visits every
    entry exactly once, and the directory ends up empty."""
    os.mkdir(c.p("d"))
    for i in range(3000):
        touch(c.p("d", "f%04d" % i))
    seen = []
    with os.scandir(c.p("d")) as it:
        for e in it:
            seen.append(e.name)
            os.unlink(e.path)
    c.rec("seen", len(seen))
    c.rec("seen once each", len(set(seen)) == len(seen))
    c.ls("left", c.p("d"))


@case("dir/create-while-reading")
def _(c):
    """Entries that existed when reading started are all returned, once, even if others
    are created meanwhile."""
    os.mkdir(c.p("d"))
    old = ["o%04d" % i for i in range(1000)]
    for n in old:
        touch(c.p("d", n))
    seen = []
    with os.scandir(c.p("d")) as it:
        for i, e in enumerate(it):
            seen.append(e.name)
            if i < 500:
                touch(c.p("d", "n%04d" % i))
    c.rec("all old entries seen", set(old) <= set(seen))
    c.rec("no entry twice", len(set(seen)) == len(seen))
    c.val("final count", lambda: len(os.listdir(c.p("d"))))


@case("dir/entry-types")
def _(c):
    """readdir types (via scandir, which falls back to lstat for DT_UNKNOWN) and inodes match
    lstat for every kind of file."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    os.symlink("d", c.p("ld"))
    os.mkfifo(c.p("p"))
    os.mknod(c.p("s"), stat.S_IFSOCK | 0o644)
    out = {}
    with os.scandir(c.d) as it:
        for e in it:
            out[e.name] = {"dir": e.is_dir(follow_symlinks=False), "file": e.is_file(follow_symlinks=False),
                           "symlink": e.is_symlink(), "dir_followed": e.is_dir(),
                           "inode ok": e.inode() == os.lstat(e.path).st_ino}
    c.rec("scandir", dict(sorted(out.items())))


@case("dir/odd-names")
def _(c):
    """Names with spaces, newlines, non-UTF-8 bytes, unicode, leading dashes and dots."""
    names = [b"with space", b"new\nline", b"\xff\xfe", "ünïcødé-名前".encode(), b"-rf", b"...", b".hidden",
             b"a" * 255, b"tab\there", b"back\\slash", b"quote\"'", b"*?[", b"\x01\x1f"]
    base = os.fsencode(c.d)
    for n in names:
        c.ok("create %r" % shortname(n), touch, os.path.join(base, n), n)
    got = sorted(os.listdir(base))
    c.rec("listing", [shortname(n) for n in got])
    c.rec("contents", [readall(os.path.join(base, n)) == n for n in sorted(names)])


@case("dir/dot-entries")
def _(c):
    """'.' is the directory itself and '..' its parent; the root of the case is stable."""
    os.makedirs(c.p("a", "b"))
    ino = lambda *p: os.stat(c.p(*p)).st_ino  # noqa: E731
    c.rec("a/. is a", ino("a", ".") == ino("a"))
    c.rec("a/b/.. is a", ino("a", "b", "..") == ino("a"))
    c.rec("a/.. is case dir", ino("a", "..") == os.stat(c.d).st_ino)
    c.val("listdir does not show . and ..", os.listdir, c.p("a"))


@case("dir/nonempty-listing-stable")
def _(c):
    """A mixed sequence of creates, renames and removals gives the same listing."""
    os.mkdir(c.p("d"))
    for i in range(200):
        touch(c.p("d", "f%03d" % i), b"%d" % i)
    for i in range(0, 200, 3):
        os.rename(c.p("d", "f%03d" % i), c.p("d", "r%03d" % i))
    for i in range(1, 200, 5):
        os.unlink(c.p("d", "f%03d" % i) if i % 3 else c.p("d", "r%03d" % i))
    for i in range(20):
        os.mkdir(c.p("d", "sub%02d" % i))
    c.ls("listing", c.p("d"))
    c.stat("stat d", c.p("d"))


# ========================================================================================
# statvfs(3)
# ========================================================================================

def _settle(c):
    """Commit pending work before a free-space measurement, so that late credit for files
    removed by earlier cases does not blur it."""
    fd = os.open(c.d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.sync()


@case("statvfs/sanity")
def _(c):
    """statvfs: positive block sizes, blocks >= bfree >= bavail, files >= ffree, 255-byte names;
    fstatvfs agrees."""
    v = os.statvfs(c.d)
    c.rec("f_bsize > 0", v.f_bsize > 0)
    c.rec("f_frsize > 0", v.f_frsize > 0)
    c.rec("f_blocks >= f_bfree >= f_bavail", v.f_blocks >= v.f_bfree >= v.f_bavail)
    c.rec("f_blocks > 0", v.f_blocks > 0)
    c.rec("f_files >= f_ffree", v.f_files >= v.f_ffree)
    c.rec("f_namemax", v.f_namemax)
    fd = c.fd(c.d, os.O_RDONLY | os.O_DIRECTORY)
    w = os.fstatvfs(fd)
    c.rec("fstatvfs same size", (w.f_blocks, w.f_frsize) == (v.f_blocks, v.f_frsize))
    touch(c.p("f"))
    c.rec("statvfs of a file works", os.statvfs(c.p("f")).f_blocks == v.f_blocks)


@case("statvfs/space-accounting")
def _(c):
    """Writing 10 MiB and fsyncing lowers f_bfree; unlinking it (and syncing) raises it again."""
    _settle(c)
    v0 = os.statvfs(c.d)
    fd = c.fd(c.p("f"), os.O_WRONLY | os.O_CREAT)
    write_all(fd, pattern(10 * MiB, 13))
    os.fsync(fd)
    v1 = os.statvfs(c.d)
    used = (v0.f_bfree - v1.f_bfree) * v1.f_frsize
    c.rec("f_bfree lowered", v1.f_bfree < v0.f_bfree)
    c.rec("by at least 10 MiB", used >= 10 * MiB)
    c.rec("f_bavail lowered", v1.f_bavail < v0.f_bavail)
    c.close(fd)
    os.unlink(c.p("f"))
    dfd = c.fd(c.d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.sync()
    # A FUSE file system learns that the last reference to an unlinked file is gone from
    # the kernel's FORGET/RELEASE, which are sent asynchronously after close() and
    # unlink() return: wait for the credit (bounded), rather than expect it at once.
    deadline = time.monotonic() + 10
    while True:
        v2 = os.statvfs(c.d)
        if v2.f_bfree > v1.f_bfree or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    c.rec("f_bfree raised after unlink", v2.f_bfree > v1.f_bfree)


# ========================================================================================
# fsync(2), fdatasync(2), sync(2), syncfs(2), sync_file_range(2)
# ========================================================================================

@case("sync/file")
def _(c):
    """fsync/fdatasync/sync_file_range on read-write and read-only file descriptors."""
    touch(c.p("f"), b"x" * 10000)
    rw = c.fd(c.p("f"), os.O_RDWR)
    ro = c.fd(c.p("f"))
    os.write(rw, b"dirty")
    c.ok("fsync rw", os.fsync, rw)
    c.ok("fdatasync rw", os.fdatasync, rw)
    c.ok("fsync ro", os.fsync, ro)
    c.ok("fdatasync ro", os.fdatasync, ro)
    c.ok("sync_file_range", sync_file_range, rw, 0, 0, 1 | 2 | 4)
    c.ok("sync_file_range bad flags", sync_file_range, rw, 0, 0, 8)


@case("sync/dir")
def _(c):
    """fsync and fdatasync on a directory descriptor succeed."""
    os.mkdir(c.p("d"))
    touch(c.p("d", "f"))
    fd = c.fd(c.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    c.ok("fsync dir", os.fsync, fd)
    c.ok("fdatasync dir", os.fdatasync, fd)
    pfd = c.fd(c.d, os.O_RDONLY | os.O_DIRECTORY)
    c.ok("fsync parent", os.fsync, pfd)


@case("sync/global")
def _(c):
    """sync() and syncfs() succeed."""
    touch(c.p("f"), b"data")
    fd = c.fd(c.p("f"))
    c.ok("sync", os.sync)
    c.ok("syncfs", syncfs, fd)


@case("sync/special")
def _(c):
    """fsync on a fifo -> EINVAL; on an unlinked file works; on an O_PATH descriptor -> EBADF."""
    os.mkfifo(c.p("p"))
    pfd = c.fd(c.p("p"), os.O_RDONLY | os.O_NONBLOCK)
    c.ok("fsync fifo", os.fsync, pfd)
    touch(c.p("f"), b"x")
    fd = c.fd(c.p("f"), os.O_RDWR)
    os.unlink(c.p("f"))
    os.write(fd, b"more")
    c.ok("fsync unlinked", os.fsync, fd)
    opath = c.fd(c.d, O_PATH)
    c.ok("fsync O_PATH", os.fsync, opath)


# ========================================================================================
# permissions as an unprivileged user
# ========================================================================================

@case("perm/dir-read-no-search", root=True)
def _(c):
    """A directory with r but no x: names can be listed, entries cannot be reached (EACCES)."""
    os.mkdir(c.p("d"))
    touch(c.p("d", "f"), b"x")
    os.chmod(c.p("d"), 0o744)
    c.world()
    c.as_user(lambda u: (u.val("listdir", lambda: sorted(os.listdir(u.p("d")))),
                         u.stat("stat d/f", u.p("d", "f")),
                         u.open("open d/f", u.p("d", "f"), os.O_RDONLY),
                         u.ok("chdir d", os.chdir, u.p("d"))))


@case("perm/dir-search-only", root=True)
def _(c):
    """A directory with x but no r: known entries are reachable, listing -> EACCES,
    creating -> EACCES."""
    os.mkdir(c.p("d"))
    touch(c.p("d", "f"), b"reachable")
    os.chmod(c.p("d"), 0o711)
    c.world()

    def body(u):
        u.val("listdir", lambda: os.listdir(u.p("d")))
        u.content("read d/f", u.p("d", "f"))
        u.stat("stat d/missing", u.p("d", "missing"))
        u.open("create d/new", u.p("d", "new"), os.O_CREAT | os.O_WRONLY)
        u.ok("unlink d/f", os.unlink, u.p("d", "f"))
    c.as_user(body)


@case("perm/dir-no-write", root=True)
def _(c):
    """Without write permission on a directory: no create, unlink, rename, mkdir, rmdir, link,
    symlink in it (EACCES), while files in it stay writable if their mode allows."""
    os.mkdir(c.p("d"))
    touch(c.p("d", "f"), b"x", 0o666)
    os.chmod(c.p("d", "f"), 0o666)
    os.mkdir(c.p("d", "sub"))
    os.chmod(c.p("d", "sub"), 0o777)
    os.chmod(c.p("d"), 0o755)
    c.world()

    def body(u):
        u.open("create", u.p("d", "new"), os.O_CREAT | os.O_WRONLY)
        u.ok("unlink", os.unlink, u.p("d", "f"))
        u.ok("rename", os.rename, u.p("d", "f"), u.p("d", "g"))
        u.ok("rename out", os.rename, u.p("d", "f"), u.p("g"))
        u.ok("mkdir", os.mkdir, u.p("d", "e"))
        u.ok("rmdir", os.rmdir, u.p("d", "sub"))
        u.ok("symlink", os.symlink, "x", u.p("d", "l"))
        u.ok("mkfifo", os.mkfifo, u.p("d", "p"))
        fd = u.open("open f O_WRONLY", u.p("d", "f"), os.O_WRONLY)
        if fd is not None:
            u.val("write f", os.write, fd, b"ok")
        u.open("create in d/sub (writable)", u.p("d", "sub", "new"), os.O_CREAT | os.O_WRONLY)
    c.as_user(body)
    c.ls("listing d", c.p("d"))


@case("perm/sticky-unlink", root=True)
def _(c):
    """In a sticky world-writable directory, users may remove only their own entries, unless
    they own the directory (EPERM otherwise)."""
    os.mkdir(c.p("t"))
    os.chown(c.p("t"), OTHER, OTHER)
    os.chmod(c.p("t"), 0o1777)
    touch(c.p("t", "roots"))
    os.chmod(c.p("t", "roots"), 0o666)
    os.mkdir(c.p("t", "rootdir"))
    os.chmod(c.p("t", "rootdir"), 0o777)
    c.world()
    c.as_user(lambda u: (touch(u.p("t", "nobodys")), touch(u.p("t", "nobodys2")),
                         u.ok("mkdir nobodysdir", os.mkdir, u.p("t", "nobodysdir"))))

    def nobody(u):
        u.ok("unlink roots", os.unlink, u.p("t", "roots"))
        u.ok("rmdir rootdir", os.rmdir, u.p("t", "rootdir"))
        u.ok("unlink own", os.unlink, u.p("t", "nobodys"))
        u.ok("rmdir own", os.rmdir, u.p("t", "nobodysdir"))
    c.as_user(nobody)
    c.as_user(lambda u: u.ok("unlink nobodys2 as dir owner", os.unlink, u.p("t", "nobodys2")),
              uid=OTHER, gid=OTHER)
    c.ls("listing", c.p("t"))
    c.stat("stat t", c.p("t"))


@case("perm/sticky-rename", root=True)
def _(c):
    """Sticky directory: renaming away or over another user's entry -> EPERM."""
    os.mkdir(c.p("t"))
    os.chmod(c.p("t"), 0o1777)
    touch(c.p("t", "roots"))
    os.chmod(c.p("t", "roots"), 0o666)
    c.world()

    def body(u):
        touch(u.p("t", "mine"), b"mine")
        touch(u.p("t", "mine2"), b"mine2")
        u.ok("rename roots away", os.rename, u.p("t", "roots"), u.p("t", "stolen"))
        u.ok("rename mine over roots", os.rename, u.p("t", "mine"), u.p("t", "roots"))
        u.ok("rename mine to new name", os.rename, u.p("t", "mine"), u.p("t", "renamed"))
        u.ok("rename mine2 over renamed", os.rename, u.p("t", "mine2"), u.p("t", "renamed"))
        u.ok("exchange renamed roots", renameat2, u.p("t", "renamed"), u.p("t", "roots"), RENAME_EXCHANGE)
    c.as_user(body)
    c.ls("listing", c.p("t"))
    c.content("roots", c.p("t", "roots"))


@case("perm/rename-dir-needs-write", root=True)
def _(c):
    """Moving a directory to another parent needs write permission on the directory itself
    (its '..' changes): EACCES for a root-owned 0755 directory."""
    for d in ("a", "b"):
        os.mkdir(c.p(d))
        os.chmod(c.p(d), 0o777)
    os.mkdir(c.p("a", "rootdir"))
    os.mkdir(c.p("a", "rootdir2"))
    c.world()
    c.as_user(lambda u: (u.ok("rename a/rootdir b/rootdir", os.rename, u.p("a", "rootdir"), u.p("b", "rootdir")),
                         u.ok("rename a/rootdir2 a/renamed (same parent)", os.rename, u.p("a", "rootdir2"),
                              u.p("a", "renamed"))))
    c.ls("a", c.p("a"))
    c.ls("b", c.p("b"))


@case("perm/read-write-bits", root=True)
def _(c):
    """Write-only and read-only files for an unprivileged user."""
    touch(c.p("wo"), b"secret")
    os.chmod(c.p("wo"), 0o222)
    touch(c.p("ro"), b"public")
    os.chmod(c.p("ro"), 0o444)
    c.world()

    def body(u):
        u.open("read wo", u.p("wo"), os.O_RDONLY)
        fd = u.open("write wo", u.p("wo"), os.O_WRONLY)
        if fd is not None:
            u.val("write", os.write, fd, b"X")
        u.content("read ro", u.p("ro"))
        u.open("write ro", u.p("ro"), os.O_WRONLY)
        u.open("append ro", u.p("ro"), os.O_WRONLY | os.O_APPEND)
    c.as_user(body)
    c.content("wo", c.p("wo"))


@case("perm/access", root=True)
def _(c):
    """access(2) as an unprivileged user for owner/group/other classes."""
    modes = {"u7": (0o700, NOBODY, 0), "g7": (0o070, 0, NOBODY), "o7": (0o007, 0, 0), "u4g2o1": (0o421, NOBODY, NOBODY),
             "none": (0, NOBODY, NOBODY)}
    for n, (mode, uid, gid) in modes.items():
        touch(c.p(n))
        os.chown(c.p(n), uid, gid)
        os.chmod(c.p(n), mode)
    c.world()

    def body(u):
        for n in modes:
            u.rec("access %s" % n, [os.access(u.p(n), m) for m in (os.R_OK, os.W_OK, os.X_OK, os.F_OK)])
    c.as_user(body)


@case("perm/supplementary-groups", root=True)
def _(c):
    """Group permissions apply through supplementary groups."""
    touch(c.p("f"), b"group data")
    os.chown(c.p("f"), 0, GRP)
    os.chmod(c.p("f"), 0o640)
    c.world()
    c.as_user(lambda u: u.content("read without group", u.p("f")))
    c.as_user(lambda u: u.content("read with supplementary group", u.p("f")), groups=(GRP,))
    c.as_user(lambda u: u.content("read with primary group", u.p("f")), gid=GRP)


@case("perm/execute", root=True)
def _(c):
    """Executing a script needs x permission: EACCES without it; a directory -> EACCES."""
    touch(c.p("run"), b"#!/bin/sh\nexit 7\n")
    os.chmod(c.p("run"), 0o755)
    touch(c.p("norun"), b"#!/bin/sh\nexit 7\n")
    os.chmod(c.p("norun"), 0o644)
    os.mkdir(c.p("d"))
    c.world()

    def try_exec(path):
        pid = os.fork()
        if pid == 0:
            try:
                os.execv(path, [path])
            except OSError as e:
                os._exit(100 + e.errno)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def body(u):
        for n in ("run", "norun", "d"):
            code = try_exec(u.p(n))
            u.rec("exec %s" % n, errno.errorcode.get(code - 100, code) if code >= 100 else "exit %d" % code)
    c.as_user(body)


# ========================================================================================
# mknod(2), mkfifo(3), unix-domain sockets
# ========================================================================================

@case("mknod/fifo")
def _(c):
    """mkfifo creates a fifo with mode & ~umask; the parent's times advance."""
    p0 = c.times(c.d)
    c.tick()
    c.ok("mkfifo 0666", os.mkfifo, c.p("p"), 0o666)
    c.stat("stat", c.p("p"))
    c.tcmp("parent times", p0, c.times(c.d))
    old = os.umask(0o077)
    try:
        c.ok("mkfifo 0666 umask 077", os.mkfifo, c.p("q"), 0o666)
    finally:
        os.umask(old)
    c.stat("stat q", c.p("q"))
    c.ok("mkfifo existing", os.mkfifo, c.p("p"))


@case("mknod/fifo-io")
def _(c):
    """Data flows through a fifo on the file system in both open orders."""
    os.mkfifo(c.p("p"))
    r = c.fd(c.p("p"), os.O_RDONLY | os.O_NONBLOCK)
    w = c.fd(c.p("p"), os.O_WRONLY)
    c.val("write 64 KiB", os.write, w, pattern(65536, 1))
    got = b""
    while len(got) < 65536:
        got += os.read(r, 65536)
    c.rec("read back", got == pattern(65536, 1))
    c.stat("stat (size stays 0)", c.p("p"))


@case("mknod/regular")
def _(c):
    """mknod S_IFREG, or with no type bits, creates a regular file; S_IFDIR -> EPERM."""
    c.ok("mknod S_IFREG 0640", os.mknod, c.p("f"), stat.S_IFREG | 0o640)
    c.ok("mknod type 0", os.mknod, c.p("g"), 0o600)
    c.ok("mknod S_IFIFO", os.mknod, c.p("p"), stat.S_IFIFO | 0o644)
    c.ok("mknod S_IFSOCK", os.mknod, c.p("s"), stat.S_IFSOCK | 0o644)
    c.ok("mknod S_IFDIR", os.mknod, c.p("d"), stat.S_IFDIR | 0o755)
    c.ok("mknod existing", os.mknod, c.p("f"), stat.S_IFREG | 0o640)
    for n in ("f", "g", "p", "s"):
        c.stat("stat %s" % n, c.p(n))
    c.ls("listing")


@case("mknod/devices", root=True)
def _(c):
    """root creates character and block device nodes; the device number is kept."""
    c.ok("mknod chr 1,3", os.mknod, c.p("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    c.ok("mknod blk 7,200", os.mknod, c.p("blk"), stat.S_IFBLK | 0o600, os.makedev(7, 200))
    c.ok("mknod chr 259,1048575", os.mknod, c.p("big"), stat.S_IFCHR | 0o600, os.makedev(259, 1048575))
    for n in ("null", "blk", "big"):
        c.stat("stat %s" % n, c.p(n))
    c.ok("rename chr", os.rename, c.p("null"), c.p("null2"))
    c.stat("stat renamed", c.p("null2"))


@case("mknod/nonroot", root=True)
def _(c):
    """An unprivileged user cannot make device nodes (EPERM) but can make fifos."""
    c.world()
    c.as_user(lambda u: (u.ok("mknod chr", os.mknod, u.p("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3)),
                         u.ok("mkfifo", os.mkfifo, u.p("p"))))
    c.ls("listing")
    c.stat("stat p", c.p("p"))


@case("mknod/unix-socket")
def _(c):
    """A unix-domain socket bound in the directory is a socket file; clients can connect;
    binding again -> EADDRINUSE; unlink removes it."""
    old = os.getcwd()
    os.chdir(c.d)   # short relative path: sun_path is limited to 108 bytes
    try:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.ok("bind", srv.bind, "sock")
            srv.listen(1)
            c.stat("stat", c.p("sock"))
            cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.ok("connect", cli.connect, "sock")
            conn, _ = srv.accept()
            cli.sendall(b"ping")
            c.rec("received", conn.recv(10))
            conn.close()
            cli.close()
            other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.ok("bind again", other.bind, "sock")
            other.close()
            dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            c.ok("bind datagram", dg.bind, "dgram")
            dg.close()
        finally:
            srv.close()
        c.ok("unlink", os.unlink, c.p("sock"))
        c.ls("listing")
    finally:
        os.chdir(old)


# ========================================================================================
# locks: flock(2), fcntl(2) record locks, open file description locks
# ========================================================================================

def _child_try(c, label, path, fn):
    """In a separate process, open path and record fn(fd)."""
    def body(u):
        fd = os.open(path, os.O_RDWR)
        u.ok(label, fn, fd)
        os.close(fd)
    c.child(body, tag="other process")


@case("lock/flock")
def _(c):
    """flock: exclusive locks conflict across open file descriptions; shared ones do not;
    unlocking and closing release."""
    touch(c.p("f"))
    a = c.fd(c.p("f"), os.O_RDWR)
    c.ok("LOCK_EX", fcntl.flock, a, fcntl.LOCK_EX)
    _child_try(c, "LOCK_EX|LOCK_NB while held", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
    _child_try(c, "LOCK_SH|LOCK_NB while held", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
    c.ok("downgrade to LOCK_SH", fcntl.flock, a, fcntl.LOCK_SH)
    _child_try(c, "LOCK_SH|LOCK_NB while shared", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
    _child_try(c, "LOCK_EX|LOCK_NB while shared", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
    c.ok("LOCK_UN", fcntl.flock, a, fcntl.LOCK_UN)
    _child_try(c, "LOCK_EX|LOCK_NB after unlock", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
    b = c.fd(c.p("f"), os.O_RDWR)
    c.ok("LOCK_EX on second fd", fcntl.flock, b, fcntl.LOCK_EX)
    c.ok("LOCK_EX|LOCK_NB on first fd (same process, other description)",
         fcntl.flock, a, fcntl.LOCK_EX | fcntl.LOCK_NB)
    c.close(b)
    _child_try(c, "LOCK_EX|LOCK_NB after close", c.p("f"), lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))


def _getlk(fd, typ, start, length):
    import struct
    fmt = "hhqqi"  # struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid
    res = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, typ, 0, start, length, 0) + bytes(4))
    t, w, s, n, pid = struct.unpack(fmt, res[:struct.calcsize(fmt)])
    return t, s, n, pid


@case("lock/fcntl")
def _(c):
    """POSIX record locks: conflicting ranges -> EAGAIN/EACCES, disjoint ones succeed, F_GETLK
    reports the holder's range and pid, read locks share."""
    touch(c.p("f"), bytes(1000))
    a = c.fd(c.p("f"), os.O_RDWR)
    me = os.getpid()
    c.ok("F_SETLK write [0,100)", fcntl.lockf, a, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 0)
    c.ok("F_SETLK read [200,300)", fcntl.lockf, a, fcntl.LOCK_SH | fcntl.LOCK_NB, 100, 200)
    _child_try(c, "write [50,60)", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 50))
    _child_try(c, "write [100,200)", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 100))
    _child_try(c, "read [250,260)", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 250))
    _child_try(c, "write [250,260)", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 250))

    def getlk(u):
        fd = os.open(c.p("f"), os.O_RDWR)
        t, s, n, pid = _getlk(fd, fcntl.F_WRLCK, 0, 10)
        u.rec("F_GETLK [0,10)", {"type": {fcntl.F_WRLCK: "F_WRLCK", fcntl.F_RDLCK: "F_RDLCK",
                                          fcntl.F_UNLCK: "F_UNLCK"}.get(t, t), "start": s, "len": n,
                                 "pid is holder": pid == me})
        t, s, n, pid = _getlk(fd, fcntl.F_WRLCK, 500, 10)
        u.rec("F_GETLK [500,510)", {fcntl.F_UNLCK: "F_UNLCK"}.get(t, t))
        os.close(fd)
    c.child(getlk, tag="other process")


@case("lock/fcntl-close-releases")
def _(c):
    """Closing any descriptor of the file drops the process's POSIX locks on it."""
    touch(c.p("f"), bytes(100))
    a = c.fd(c.p("f"), os.O_RDWR)
    b = c.fd(c.p("f"), os.O_RDONLY)
    c.ok("lock whole file", fcntl.lockf, a, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _child_try(c, "lock while held", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
    c.close(b)
    _child_try(c, "lock after closing another fd", c.p("f"), lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))


@case("lock/ofd")
def _(c):
    """Open-file-description locks conflict between two descriptions in one process."""
    import struct
    touch(c.p("f"), bytes(100))
    a = c.fd(c.p("f"), os.O_RDWR)
    b = c.fd(c.p("f"), os.O_RDWR)
    F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
    lk = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 10, 0) + bytes(4)
    c.ok("OFD write lock via a", fcntl.fcntl, a, F_OFD_SETLK, lk)
    c.ok("OFD write lock via b", fcntl.fcntl, b, F_OFD_SETLK, lk)
    un = struct.pack("hhqqi", fcntl.F_UNLCK, 0, 0, 10, 0) + bytes(4)
    c.ok("OFD unlock via a", fcntl.fcntl, a, F_OFD_SETLK, un)
    c.ok("OFD write lock via b again", fcntl.fcntl, b, F_OFD_SETLK, lk)


# ========================================================================================
# extended attributes (not in pjdfstest; cp -a, rsync -X and ACL tools rely on them)
# ========================================================================================

@case("xattr/user")
def _(c):
    """user.* attributes: set, get, list, replace, remove; missing -> ENODATA."""
    touch(c.p("f"))
    c.ok("setxattr user.test", os.setxattr, c.p("f"), "user.test", b"value")
    c.val("getxattr", os.getxattr, c.p("f"), "user.test")
    c.val("listxattr", lambda: sorted(a for a in os.listxattr(c.p("f")) if a.startswith("user.")))
    c.ok("replace", os.setxattr, c.p("f"), "user.test", b"other value")
    c.val("getxattr", os.getxattr, c.p("f"), "user.test")
    c.ok("setxattr empty value", os.setxattr, c.p("f"), "user.empty", b"")
    c.val("getxattr empty", os.getxattr, c.p("f"), "user.empty")
    c.ok("removexattr", os.removexattr, c.p("f"), "user.test")
    c.val("getxattr removed", os.getxattr, c.p("f"), "user.test")
    c.ok("removexattr missing", os.removexattr, c.p("f"), "user.test")


@case("xattr/flags")
def _(c):
    """XATTR_CREATE on an existing attribute -> EEXIST; XATTR_REPLACE on a missing one -> ENODATA."""
    touch(c.p("f"))
    c.ok("XATTR_REPLACE missing", os.setxattr, c.p("f"), "user.a", b"1", os.XATTR_REPLACE)
    c.ok("XATTR_CREATE new", os.setxattr, c.p("f"), "user.a", b"1", os.XATTR_CREATE)
    c.ok("XATTR_CREATE existing", os.setxattr, c.p("f"), "user.a", b"2", os.XATTR_CREATE)
    c.ok("XATTR_REPLACE existing", os.setxattr, c.p("f"), "user.a", b"3", os.XATTR_REPLACE)
    c.val("getxattr", os.getxattr, c.p("f"), "user.a")


@case("xattr/values-and-kinds")
def _(c):
    """A 4000-byte binary value; attributes on a directory; user.* on a symlink -> EPERM;
    ctime advances when an attribute is set."""
    touch(c.p("f"))
    os.mkdir(c.p("d"))
    os.symlink("f", c.p("l"))
    big = pattern(4000, 21)
    t0 = c.times(c.p("f"))
    c.tick()
    c.ok("setxattr 4000 bytes", os.setxattr, c.p("f"), "user.big", big)
    c.tcmp("times", t0, c.times(c.p("f")))
    c.val("getxattr 4000 bytes", os.getxattr, c.p("f"), "user.big")
    c.ok("setxattr on dir", os.setxattr, c.p("d"), "user.d", b"dir")
    c.val("getxattr on dir", os.getxattr, c.p("d"), "user.d")
    c.ok("setxattr on symlink (nofollow)", os.setxattr, c.p("l"), "user.l", b"x", follow_symlinks=False)
    c.ok("setxattr through symlink", os.setxattr, c.p("l"), "user.through", b"y")
    c.val("getxattr on target", os.getxattr, c.p("f"), "user.through")


# ========================================================================================
# stat(2) generalities
# ========================================================================================

@case("stat/fields")
def _(c):
    """stat/fstat/lstat agree; inode numbers are stable and distinct; st_blksize is positive;
    new files have mtime == ctime."""
    touch(c.p("a"), b"a")
    touch(c.p("b"), b"b")
    fd = c.fd(c.p("a"))
    s1, s2, f1 = os.stat(c.p("a")), os.stat(c.p("a")), os.fstat(fd)
    c.rec("inode stable", s1.st_ino == s2.st_ino == f1.st_ino)
    c.rec("inodes distinct", s1.st_ino != os.stat(c.p("b")).st_ino)
    c.rec("same device", s1.st_dev == os.stat(c.p("b")).st_dev == os.stat(c.d).st_dev)
    c.rec("fstat == stat", snap(f1) == snap(s1))
    c.rec("st_blksize > 0", s1.st_blksize > 0)
    c.rec("lstat == stat for a file", snap(os.lstat(c.p("a"))) == snap(s1))


@case("stat/times-on-write")
def _(c):
    """write advances mtime and ctime; read does not change them; a chmod changes only ctime."""
    touch(c.p("f"), b"start")
    t0 = c.times(c.p("f"))
    c.tick()
    with open(c.p("f"), "ab") as f:
        f.write(b"more")
    t1 = c.times(c.p("f"))
    c.tcmp("after write", t0, t1)
    c.tick()
    readall(c.p("f"))
    t2 = c.times(c.p("f"))
    c.tcmp("after read", t1, t2)
    fd = c.fd(c.p("f"), os.O_RDWR)
    c.tick()
    os.pwrite(fd, b"x", 0)
    c.tcmp("after pwrite (fstat)", t2, os.fstat(fd))
    t3 = os.fstat(fd)
    c.tick()
    os.write(fd, b"")
    c.tcmp("after empty write", t3, os.fstat(fd))


# ---- more cases go above this line ----

# ========================================================================================
# runner
# ========================================================================================


def select(patterns):
    if not patterns:
        return list(CASES)
    pats = [p for p in patterns.split(",") if p]
    out = []
    for cs in CASES:
        for p in pats:
            if any(ch in p for ch in "*?["):
                if fnmatch.fnmatchcase(cs.name, p):
                    out.append(cs)
                    break
            elif p in cs.name:
                out.append(cs)
                break
    return out


def _rmtree(path):
    if os.geteuid() != 0:
        # an unprivileged run needs write and search permission on every directory it
        # empties (cases leave 0000 and 0555 directories behind); root does not
        for root, dirs, _files in os.walk(path):
            for d in dirs:
                p = os.path.join(root, d)
                if not os.path.islink(p):
                    try:
                        os.chmod(p, 0o700)
                    except OSError:
                        pass
    shutil.rmtree(path)


def run_case(cs, base, index):
    d = os.path.join(base, "%03d-%s" % (index, cs.name.replace("/", "-")))
    os.mkdir(d, 0o755)
    os.chmod(d, 0o755)
    c = Rec(d)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT)
    t = time.monotonic()
    try:
        cs.fn(c)
    except Exception as e:
        c.records.append(["error", describe_exc(e)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        c.close_fds()
        os.umask(0o022)
    elapsed = time.monotonic() - t
    try:
        _rmtree(d)
        if os.path.lexists(d):
            raise OSError(errno.ENOTEMPTY, "still there", d)
        c.records.append(["cleanup", "ok"])
    except OSError as e:
        c.records.append(["cleanup", "%s (%s)" % (ename(e), e.filename)])
    return c.records, elapsed


def compare(a, b):
    """Return a list of human-readable differences between two record lists."""
    diffs = []
    errs = [r for r in a + b if r[0].endswith("error")]
    if a == b:
        if errs:
            return ["case error on both file systems: %s" % errs[0][1]]
        return []
    n = max(len(a), len(b))
    for i in range(n):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x == y:
            continue
        if x is not None and y is not None and x[0] == y[0]:
            diffs.append("%s: (under test: %s, reference: %s)" % (
                x[0], json.dumps(x[1], ensure_ascii=False), json.dumps(y[1], ensure_ascii=False)))
        else:
            fx = "%s = %s" % (x[0], json.dumps(x[1], ensure_ascii=False)) if x else "nothing"
            fy = "%s = %s" % (y[0], json.dumps(y[1], ensure_ascii=False)) if y else "nothing"
            diffs.append("step %d: (under test: %s, reference: %s)" % (i + 1, fx, fy))
            break  # the two runs went different ways; later steps do not line up
    return diffs


def usage_error(msg):
    print("conformance.py: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def check_dir(opt, path):
    if path is None:
        usage_error("%s is required (unless --list)" % opt)
    if not os.path.isdir(path):
        usage_error("%s %s: not an existing directory" % (opt, path))
    if not os.access(path, os.W_OK | os.X_OK):
        usage_error("%s %s: not writable" % (opt, path))
    return os.path.abspath(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Differential POSIX conformance suite: every case runs in "
                                 "--dir and in --reference and the normalized outcomes are compared.")
    ap.add_argument("--dir", help="directory on the file system under test")
    ap.add_argument("--reference", help="directory on a reference kernel file system (tmpfs, ext4)")
    ap.add_argument("--json", help="write per-case results to this file")
    ap.add_argument("--only", help="run only cases matching PATTERN (glob, or substring; comma-separated list)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--known-failures", help="file listing cases expected to fail (one name per line, '#' comments): "
                    "the run passes if exactly those fail")
    ap.add_argument("-v", "--verbose", action="store_true", help="print timings and every difference")
    args = ap.parse_args(argv)

    cases = select(args.only)
    if args.list:
        for cs in cases:
            print("%-45s %s" % (cs.name, cs.doc.splitlines()[0] if cs.doc else ""))
        print("%d cases" % len(cases))
        return 0
    if not cases:
        usage_error("--only %r matches no case (see --list)" % args.only)
    test_dir = check_dir("--dir", args.dir)
    ref_dir = check_dir("--reference", args.reference)
    if os.path.realpath(test_dir) == os.path.realpath(ref_dir):
        usage_error("--dir and --reference are the same directory")
    if os.stat(test_dir).st_dev == os.stat(ref_dir).st_dev:
        print("warning: --dir and --reference are on the same file system", file=sys.stderr)
    is_root = os.geteuid() == 0
    os.umask(0o022)

    stamp = "posix-conformance.%d" % os.getpid()
    bases = []
    for top in (test_dir, ref_dir):
        b = os.path.join(top, stamp)
        try:
            os.mkdir(b, 0o755)
            os.chmod(b, 0o755)
        except OSError as e:
            usage_error("cannot create %s: %s" % (b, e))
        bases.append(b)

    results = []
    passed = failed = skipped = 0
    t_start = time.monotonic()
    try:
        for i, cs in enumerate(cases):
            if cs.root and not is_root:
                print("skip %s (needs root)" % cs.name)
                skipped += 1
                results.append({"name": cs.name, "status": "skip", "why": "needs root"})
                continue
            rec_t, el_t = run_case(cs, bases[0], i)
            rec_r, el_r = run_case(cs, bases[1], i)
            diffs = compare(rec_t, rec_r)
            timing = " (%.2fs / %.2fs)" % (el_t, el_r) if args.verbose else ""
            if diffs:
                failed += 1
                shown = diffs if args.verbose else diffs[:3]
                more = "" if len(shown) == len(diffs) else "; ... %d more" % (len(diffs) - len(shown))
                print("FAIL %s: %s%s%s" % (cs.name, "; ".join(shown), more, timing))
            else:
                passed += 1
                print("ok %s%s" % (cs.name, timing))
            sys.stdout.flush()
            results.append({"name": cs.name, "status": "fail" if diffs else "ok", "differences": diffs,
                            "under_test": rec_t, "reference": rec_r, "seconds": [el_t, el_r]})
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    finally:
        for b in bases:
            try:
                _rmtree(b)
            except OSError as e:
                print("warning: cannot remove %s: %s" % (b, e), file=sys.stderr)

    total = passed + failed + skipped
    summary = "%d cases, %d passed, %d failed" % (total, passed, failed)
    if skipped:
        summary += ", %d skipped" % skipped
    print(summary + " (%.0f s)" % (time.monotonic() - t_start))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dir": test_dir, "reference": ref_dir, "summary": {"cases": total, "passed": passed,
                       "failed": failed, "skipped": skipped}, "cases": results}, f, indent=1)
    if args.known_failures:
        known = set()
        with open(args.known_failures) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    known.add(line)
        failing = {r["name"] for r in results if r["status"] == "fail"}
        ran = {r["name"] for r in results}
        unexpected = sorted(failing - known)
        fixed = sorted((known & ran) - failing)
        for n in unexpected:
            print("UNEXPECTED FAILURE %s" % n)
        for n in fixed:
            print("KNOWN FAILURE NOW PASSES %s: remove it from %s" % (n, args.known_failures))
        print("%d known failures (%s)" % (len(failing & known), args.known_failures))
        return 0 if not unexpected and not fixed and total == len(cases) else 1
    return 0 if failed == 0 and total == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
