"""Embedded mode: a persistent-memory intactfs image opened in this process (no FUSE), with
files and FCFS AD-transactions as on a pmem mount (docs/fs-api.md, "Embedded mode").

A thin ctypes layer over libintact_embed (crates/intactfs-embed, the C ABI of
libintact/include/intact_embed.h)::

    from intact import embedded
    with embedded.Image("/dev/shm/img") as img:       # EBUSY if a mount holds it
        with img.open("a", "w") as a, img.open("b", "w") as b:
            with img.transaction([a, b]):              # one AD-transaction
                a.pwrite(b"new", 0)
                b.pwrite(b"new", 0)

Every failure raises ``OSError`` with the errno a mount gives and the library's message
(what was being done, on which path or descriptor). The library is found through
``INTACT_EMBED_LIB`` (a path), else as ``libintact_embed.so`` under ``$CARGO_TARGET_DIR``
or the repository's ``target/`` (release, then debug).
"""

import contextlib
import ctypes
import os

__all__ = ["Image", "File", "Transaction", "mkfs", "library_path", "NO_SYNC", "INLINE_CHECKPOINTS"]

NO_SYNC = 1
INLINE_CHECKPOINTS = 2

_KINDS = {1: "file", 2: "dir", 3: "symlink", 4: "other"}
_READDIR_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint32)


class _Stat(ctypes.Structure):
    _fields_ = [("ino", ctypes.c_uint64), ("size", ctypes.c_uint64), ("mode", ctypes.c_uint32),
                ("nlink", ctypes.c_uint32), ("kind", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class _Counters(ctypes.Structure):
    _fields_ = [("stores", ctypes.c_uint64), ("bytes_stored", ctypes.c_uint64),
                ("lines_flushed", ctypes.c_uint64), ("fences", ctypes.c_uint64)]


def library_path():
    """Where libintact_embed.so is (see the module documentation); ``OSError(ENOENT)``
    naming the places looked at if it is nowhere."""
    env = os.environ.get("INTACT_EMBED_LIB")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    targets = [os.environ.get("CARGO_TARGET_DIR"), os.path.join(root, "target")]
    tried = []
    for t in filter(None, targets):
        for profile in ("release", "debug"):
            p = os.path.join(t, profile, "libintact_embed.so")
            tried.append(p)
            if os.path.exists(p):
                return p
    raise OSError(2, "libintact_embed.so not found (build it: cargo build -p intactfs-embed; "
                     "or set INTACT_EMBED_LIB); looked at " + ", ".join(tried))


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(library_path(), use_errno=True)
    c, i64, u64, u32, p = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p
    s = ctypes.c_char_p
    sigs = {
        "intact_embed_mkfs": (c, [s, u64, u64]),
        "intact_embed_open": (p, [s, u32]),
        "intact_embed_close": (c, [p]),
        "intact_embed_open_file": (c, [p, s, c, u32]),
        "intact_embed_close_file": (c, [p, c]),
        "intact_embed_pread": (i64, [p, c, p, u64, u64]),
        "intact_embed_pwrite": (i64, [p, c, s, u64, u64]),
        "intact_embed_ftruncate": (c, [p, c, u64]),
        "intact_embed_fsync": (c, [p, c]),
        "intact_embed_fstat": (c, [p, c, ctypes.POINTER(_Stat)]),
        "intact_embed_stat": (c, [p, s, ctypes.POINTER(_Stat)]),
        "intact_embed_unlink": (c, [p, s]),
        "intact_embed_mkdir": (c, [p, s, u32]),
        "intact_embed_rmdir": (c, [p, s]),
        "intact_embed_rename": (c, [p, s, s]),
        "intact_embed_tx_begin": (i64, [p, ctypes.POINTER(c), c]),
        "intact_embed_tx_add": (c, [p, i64, c]),
        "intact_embed_tx_commit": (c, [p, i64]),
        "intact_embed_tx_abort": (c, [p, i64]),
        "intact_embed_counters": (c, [p, ctypes.POINTER(_Counters)]),
        "intact_embed_readdir": (c, [p, s, _READDIR_CB, p]),
        "intact_embed_errmsg": (s, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def _check(r, bad=-1):
    """``r``, or ``OSError`` with the errno and the library's message if it is ``bad``."""
    if r == bad or (bad is None and not r):
        e = ctypes.get_errno()
        msg = (_load().intact_embed_errmsg() or b"").decode("utf-8", "replace")
        raise OSError(e, msg or os.strerror(e))
    return r


def _path(p):
    return os.fsencode(p)


def mkfs(image, size_bytes, log_bytes=0):
    """Make a fresh pmem image (as ``intact fs mkfs IMAGE --device pmem``)."""
    _check(_load().intact_embed_mkfs(_path(image), size_bytes, log_bytes))


def _stat_dict(st):
    return {"ino": st.ino, "size": st.size, "mode": st.mode, "nlink": st.nlink,
            "kind": _KINDS.get(st.kind, "other")}


class File:
    """A descriptor of an :class:`Image` (not a kernel descriptor)."""

    def __init__(self, image, fd, path):
        self.image, self.fd, self.path = image, fd, path

    def pread(self, n, off):
        buf = ctypes.create_string_buffer(n)
        got = _check(self.image._lib.intact_embed_pread(self.image._h, self.fd, buf, n, off))
        return buf.raw[:got]

    def pwrite(self, data, off):
        data = bytes(data)
        return _check(self.image._lib.intact_embed_pwrite(self.image._h, self.fd, data, len(data), off))

    def truncate(self, size):
        _check(self.image._lib.intact_embed_ftruncate(self.image._h, self.fd, size))

    def fsync(self):
        _check(self.image._lib.intact_embed_fsync(self.image._h, self.fd))

    def stat(self):
        st = _Stat()
        _check(self.image._lib.intact_embed_fstat(self.image._h, self.fd, ctypes.byref(st)))
        return _stat_dict(st)

    def close(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            _check(self.image._lib.intact_embed_close_file(self.image._h, fd))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "embedded.File(%r, fd=%r)" % (self.path, self.fd)


_MODES = {"r": os.O_RDONLY, "r+": os.O_RDWR, "w": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
          "a+": os.O_RDWR | os.O_CREAT, "x": os.O_RDWR | os.O_CREAT | os.O_EXCL}


class Image:
    """A pmem image opened in this process; the image's only owner until :meth:`close`
    (``OSError(EBUSY)`` if a mount or another program holds it)."""

    def __init__(self, path, sync_on_fence=True, background_checkpoints=True):
        self._lib = _load()
        self.path = path
        flags = (0 if sync_on_fence else NO_SYNC) | (0 if background_checkpoints else INLINE_CHECKPOINTS)
        self._h = _check(self._lib.intact_embed_open(_path(path), flags), None)

    def close(self):
        """Clean close: open transactions aborted, everything checkpointed and written back."""
        if self._h:
            h, self._h = self._h, None
            _check(self._lib.intact_embed_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self, path, mode="r", perm=0o644):
        """Open ``path`` in the image; ``mode`` is one of r, r+, w (create, truncate),
        a+ (create), x (create, must not exist), or open(2) flags as an int."""
        flags = mode if isinstance(mode, int) else _MODES.get(mode)
        if flags is None:
            raise ValueError("mode %r: expected one of %s or open(2) flags" % (mode, ", ".join(_MODES)))
        fd = _check(self._lib.intact_embed_open_file(self._h, _path(path), flags, perm))
        return File(self, fd, path)

    def stat(self, path):
        st = _Stat()
        _check(self._lib.intact_embed_stat(self._h, _path(path), ctypes.byref(st)))
        return _stat_dict(st)

    def unlink(self, path):
        _check(self._lib.intact_embed_unlink(self._h, _path(path)))

    def mkdir(self, path, perm=0o755):
        _check(self._lib.intact_embed_mkdir(self._h, _path(path), perm))

    def rmdir(self, path):
        _check(self._lib.intact_embed_rmdir(self._h, _path(path)))

    def rename(self, src, dst):
        _check(self._lib.intact_embed_rename(self._h, _path(src), _path(dst)))

    def listdir(self, path="/"):
        """The names in the directory at ``path`` (bytes as str via os.fsdecode), in slot order."""
        names = []

        def each(_arg, name, _ino, _kind):
            names.append(os.fsdecode(name))
            return 0

        _check(self._lib.intact_embed_readdir(self._h, _path(path), _READDIR_CB(each), None))
        return names

    def counters(self):
        """The device's stores, bytes stored, lines flushed and fences since the open."""
        c = _Counters()
        _check(self._lib.intact_embed_counters(self._h, ctypes.byref(c)))
        return {k: getattr(c, k) for k, _ in _Counters._fields_}

    def tx_begin(self, files):
        """Begin an AD-transaction over ``files`` (:class:`File` objects, at least one);
        returns its id. EBUSY: a file of another open transaction; EBADF: a file not
        open for writing."""
        files = [files] if isinstance(files, File) else list(files)
        if not files:
            raise ValueError("a transaction needs at least one file")
        fds = (ctypes.c_int * len(files))(*[f.fd for f in files])
        return _check(self._lib.intact_embed_tx_begin(self._h, fds, len(files)))

    def tx_add(self, tx, f):
        _check(self._lib.intact_embed_tx_add(self._h, tx, f.fd))

    def tx_commit(self, tx):
        """Durable, all or nothing, when it returns."""
        _check(self._lib.intact_embed_tx_commit(self._h, tx))

    def tx_abort(self, tx):
        _check(self._lib.intact_embed_tx_abort(self._h, tx))

    @contextlib.contextmanager
    def transaction(self, files):
        """The block as one AD-transaction (as ``intact.fs.transaction`` on a mount):
        committed at a normal exit, aborted if the block raises (the exception then
        propagates). Yields a :class:`Transaction`; a block that ends it itself
        (``tx.commit()`` or ``tx.abort()``) is left alone at the exit."""
        t = Transaction(self, self.tx_begin(files))
        try:
            yield t
        except BaseException:
            if not t.ended:
                t.abort()
            raise
        if not t.ended:
            t.commit()


class Transaction:
    """An open AD-transaction of an :class:`Image`: ``id``, ``add(file)``, ``commit()``,
    ``abort()``, ``ended``."""

    def __init__(self, image, tx):
        self.image, self.id, self.ended = image, tx, False

    def add(self, f):
        self.image.tx_add(self.id, f)

    def commit(self):
        self.image.tx_commit(self.id)
        self.ended = True

    def abort(self):
        self.image.tx_abort(self.id)
        self.ended = True

    def __repr__(self):
        return "embedded.Transaction(%d%s)" % (self.id, ", ended" if self.ended else "")
