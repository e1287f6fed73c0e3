"""Stream control on an intactfs mount (docs/fs-api.md).

A process on an intactfs FUSE mount is in one *stream* (ccfs §3.2): its updates are
ordered with each other and independent of other streams', and fsync commits its stream.
The calls below issue the mount's ioctls on any file or directory of it; the stream
belongs to the calling *process* (every thread) and is inherited by the processes it
starts. Errors are ``OSError`` with the errno of the ioctl: ``ENOTTY`` when the file is
not on an intactfs mount (the message says so), ``EINVAL`` for an unknown flag.

    import intact.fs as ifs
    with ifs.stream("/mnt/x", "myapp-db", ignore_fsync=True):
        ...                       # writes here are ordered; fsync returns at once
        ifs.streamsync("/mnt/x")  # durable now

OptFS's osync/dsync (docs/fs-api.md, "osync and dsync"):

    f.write(b"..."); f.flush()
    t = ifs.osync(f)              # ordered now, durable later
    ifs.durable(f, t, wait=True)  # the notification: returns once it is durable
    ifs.dsync(f)                  # durable now

Atomic regions (CFS; docs/fs-api.md, "Atomic regions"): everything the process (and its
children) changes in the block reaches storage all or nothing:

    with ifs.atomic("/mnt/x"):    # BEGIN
        ...                       # commits on a normal exit (durable), aborts if it raises

AD-transactions on a persistent-memory mount (FCFS; docs/fs-api.md, "AD-transactions on
persistent memory"): the changes to the files named (and to files added later) reach the
image all or nothing:

    with ifs.transaction(["/mnt/p/a", "/mnt/p/b"]) as tx:
        ...                       # writes to a and b; tx.add(f) adds another file
                                  # commits on a normal exit, aborts if it raises
"""

import contextlib
import errno
import fcntl
import os
import struct

__all__ = [
    "IOC_MAGIC", "SETSTREAM", "GETSTREAM", "STREAMSYNC", "OSYNC", "DSYNC", "DURABLE",
    "IGNORE_FSYNC", "FSYNC_AS_OSYNC", "DURABLE_WAIT", "INIT_STREAM",
    "stream_id", "setstream", "getstream", "streamsync", "stream", "osync", "dsync", "durable",
    "BEGIN", "COMMIT", "ABORT", "ADD", "begin", "commit", "abort", "add", "atomic", "region_strerror",
    "F2FS_IOC_START_ATOMIC_WRITE", "F2FS_IOC_COMMIT_ATOMIC_WRITE", "F2FS_IOC_ABORT_VOLATILE_WRITE",
    "F2FS_IOC_GET_FEATURES", "F2FS_FEATURE_ATOMIC_WRITE",
    "TX_BEGIN", "TX_ADD", "TX_COMMIT", "TX_ABORT", "tx_begin", "tx_add", "tx_commit", "tx_abort",
    "transaction", "Transaction", "tx_strerror",
]

#: The ioctl "type" byte of every intactfs ioctl.
IOC_MAGIC = 0xCC
#: ``_IOW(0xCC, 1, struct intact_stream)``
SETSTREAM = 0x4010CC01
#: ``_IOR(0xCC, 2, struct intact_stream)``
GETSTREAM = 0x8010CC02
#: ``_IO(0xCC, 3)``
STREAMSYNC = 0x0000CC03
#: ``_IOR(0xCC, 4, uint64_t)``
OSYNC = 0x8008CC04
#: ``_IO(0xCC, 5)``
DSYNC = 0x0000CC05
#: ``_IOWR(0xCC, 6, struct intact_durable)``
DURABLE = 0xC010CC06
#: ``_IO(0xCC, 7)``: the calling process (and its children) enter an atomic region.
BEGIN = 0x0000CC07
#: ``_IO(0xCC, 8)``: commit the caller's atomic region, durably.
COMMIT = 0x0000CC08
#: ``_IO(0xCC, 9)``: abort the caller's atomic region.
ABORT = 0x0000CC09
#: ``_IO(0xCC, 10)``: CFS cfs_add: every write to this regular file belongs to the region.
ADD = 0x0000CC0A
#: ``_IOR(0xCC, 16, uint64_t)``: begin an AD-transaction on this file (pmem mounts); out: its id.
TX_BEGIN = 0x8008CC10
#: ``_IOW(0xCC, 17, uint64_t)``: in: a transaction id; this file joins it.
TX_ADD = 0x4008CC11
#: ``_IOW(0xCC, 18, uint64_t)``: in: a transaction id; commit it (durable, all or nothing).
TX_COMMIT = 0x4008CC12
#: ``_IOW(0xCC, 19, uint64_t)``: in: a transaction id; abort it.
TX_ABORT = 0x4008CC13
_TX_CMDS = (TX_BEGIN, TX_ADD, TX_COMMIT, TX_ABORT)
#: F2FS's atomic-write ioctls (magic 0xf5, Linux ``include/uapi/linux/f2fs.h``), which
#: intactfs answers on a regular file (one atomic region per file); F2FS's numbers, for
#: programs that test for them. ``_IO(0xf5, 1)``
F2FS_IOC_START_ATOMIC_WRITE = 0xF501
#: ``_IO(0xf5, 2)``
F2FS_IOC_COMMIT_ATOMIC_WRITE = 0xF502
#: ``_IO(0xf5, 5)``
F2FS_IOC_ABORT_VOLATILE_WRITE = 0xF505
#: ``_IOR(0xf5, 12, uint32_t)``: out: feature bits
F2FS_IOC_GET_FEATURES = 0x8004F50C
#: The GET_FEATURES bit intactfs reports.
F2FS_FEATURE_ATOMIC_WRITE = 0x4
#: Flag: fsync and fdatasync in the stream return at once; streamsync stays durable.
IGNORE_FSYNC = 1
#: Flag: fsync and fdatasync in the stream are osync (ordered now, durable later).
FSYNC_AS_OSYNC = 2
#: DURABLE flag: wait until the ticket is durable.
DURABLE_WAIT = 1
#: The stream of every process that neither set one nor inherited one.
INIT_STREAM = 0

# struct intact_stream { uint64_t id; uint32_t flags; uint32_t reserved; } (native order);
# struct intact_durable { uint64_t ticket; uint32_t flags; uint32_t reserved; } likewise.
_ARG = struct.Struct("=QII")
assert _ARG.size == 16
_TICKET = struct.Struct("=Q")

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


def stream_id(name):
    """The stream id of ``name`` (str, UTF-8 encoded, or bytes): FNV-1a 64 of its bytes.

    ``"init"`` and ``""`` are the init stream 0; a name that hashes to 0 gets 1. Two
    programs that use the same name share one stream (docs/fs-api.md, "Stream ids").
    """
    if isinstance(name, str):
        name = name.encode("utf-8")
    elif not isinstance(name, (bytes, bytearray)):
        raise TypeError("a stream name is str or bytes, not %s" % type(name).__name__)
    if name in (b"", b"init"):
        return INIT_STREAM
    h = _FNV_OFFSET
    for b in bytes(name):
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h or 1


def _to_id(name_or_id):
    if isinstance(name_or_id, bool):
        raise TypeError("a stream is a name (str or bytes) or an id (int), not bool")
    if isinstance(name_or_id, int):
        if not 0 <= name_or_id <= _MASK:
            raise ValueError("a stream id is a 64-bit unsigned integer: %d" % name_or_id)
        return name_or_id
    return stream_id(name_or_id)


@contextlib.contextmanager
def _fd(path_or_fd, write=False):
    """A descriptor for the ioctl: an int or an object with fileno() is used as is; a
    path is opened (read-only, else write-only if reading is not permitted) and closed.
    With ``write`` (the calls that need a descriptor open for writing: add, tx_begin,
    tx_add) a file is opened for reading and writing (``PermissionError`` if the caller
    may not write it) and a directory read-only."""
    if isinstance(path_or_fd, bool):
        raise TypeError("expected a path, a file descriptor or a file, not bool")
    if isinstance(path_or_fd, int):
        yield path_or_fd
        return
    if hasattr(path_or_fd, "fileno"):
        yield path_or_fd.fileno()
        return
    path = os.fspath(path_or_fd)
    common = os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
    if write and not os.path.isdir(path):
        fd = os.open(path, os.O_RDWR | common)
    else:
        try:
            fd = os.open(path, os.O_RDONLY | common)
        except PermissionError:
            fd = os.open(path, os.O_WRONLY | common)
    try:
        yield fd
    finally:
        os.close(fd)


_NOTTY = "not on an intactfs mount"

# What the errnos of BEGIN, COMMIT, ABORT and ADD mean (the texts of libintact's
# intact_region_strerror).
_REGION_MESSAGES = {
    errno.EALREADY: "an atomic region is already open (regions do not nest)",
    errno.EINVAL: "no atomic region is open",
    errno.EXDEV: "no atomic region of this process on that file's mount",
    errno.EBUSY: "the file belongs to another atomic region",
    errno.EBADF: "not a descriptor open for writing (ADD needs one)",
    errno.EPERM: "the atomic region belongs to another process",
    errno.ENOTTY: _NOTTY,
}

# ADD checks the caller's region first (EXDEV without one), so its EINVAL means the file.
_ADD_MESSAGES = dict(_REGION_MESSAGES)
_ADD_MESSAGES[errno.EINVAL] = "not a regular file"


def region_strerror(errnum):
    """The meaning of an errno of :func:`begin`, :func:`commit`, :func:`abort` and
    :func:`add` (the same texts as libintact's ``intact_region_strerror``); other values
    get ``os.strerror``'s text. (From :func:`add`, EINVAL means "not a regular file".)"""
    return _REGION_MESSAGES.get(errnum) or os.strerror(errnum)


# Streams, osync/dsync and atomic regions are the block engine's; a persistent-memory
# mount answers EOPNOTSUPP and has AD-transactions instead.
_NO_BLOCK_INTERFACE = (
    "this mount does not offer streams, osync/dsync or atomic regions: a persistent-memory "
    "mount? Its atomic updates are AD-transactions (intact.fs.transaction, tx_begin; "
    "docs/fs-api.md)"
)


def _ioctl(fd, cmd, arg, messages=None):
    try:
        return fcntl.ioctl(fd, cmd, arg)
    except OSError as e:
        msg = (messages or {}).get(e.errno) or (_NOTTY if e.errno == errno.ENOTTY else None)
        if msg is None and e.errno == errno.EOPNOTSUPP and cmd not in _TX_CMDS:
            msg = _NO_BLOCK_INTERFACE
        if msg is not None:
            raise OSError(e.errno, "%s (%s)" % (msg, os.strerror(e.errno))) from None
        raise


def _set(fd, sid, flags):
    _ioctl(fd, SETSTREAM, _ARG.pack(sid, flags, 0))


def setstream(path_or_fd, name_or_id, ignore_fsync=False, fsync_as_osync=False):
    """Put the calling process in a stream; return its id.

    ``path_or_fd``: any file or directory of the mount (path, fd or file object).
    ``name_or_id``: a name (see :func:`stream_id`) or a numeric id (0 is init).
    ``ignore_fsync``: the stream's IGNORE_FSYNC flag; ``fsync_as_osync``: its
    FSYNC_AS_OSYNC flag (not both). Flags belong to the stream, so this also sets (or
    clears) them for the other processes in the stream.
    """
    sid = _to_id(name_or_id)
    flags = (IGNORE_FSYNC if ignore_fsync else 0) | (FSYNC_AS_OSYNC if fsync_as_osync else 0)
    with _fd(path_or_fd) as fd:
        _set(fd, sid, flags)
    return sid


def getstream(path_or_fd):
    """``(id, flags)``: the calling process's stream and that stream's flags."""
    with _fd(path_or_fd) as fd:
        out = _ioctl(fd, GETSTREAM, bytes(_ARG.size))
    sid, flags, _ = _ARG.unpack(out)
    return sid, flags


def streamsync(path_or_fd):
    """Commit the calling process's stream durably (even with IGNORE_FSYNC)."""
    with _fd(path_or_fd) as fd:
        _ioctl(fd, STREAMSYNC, 0)


def osync(path_or_fd):
    """OptFS osync of a file (path, fd or file object; flush Python's buffer first):
    its stream's updates so far are ordered before every later one, and become durable
    within the mount's durability timeout. Returns the durability ticket."""
    with _fd(path_or_fd) as fd:
        out = _ioctl(fd, OSYNC, bytes(_TICKET.size))
    return _TICKET.unpack(out)[0]


def dsync(path_or_fd):
    """OptFS dsync: durable now (everything before it in the stream, and every earlier
    osync), whatever the stream's flags."""
    with _fd(path_or_fd) as fd:
        _ioctl(fd, DSYNC, 0)


def durable(path_or_fd, ticket, wait=False):
    """Whether the osync'd point ``ticket`` is durable; with ``wait``, block until it is
    (at the latest the mount's durability timeout) and return True."""
    if isinstance(ticket, bool) or not isinstance(ticket, int) or not 0 <= ticket <= _MASK:
        raise ValueError("a ticket is what osync() returned (a 64-bit unsigned integer), not %r" % (ticket,))
    with _fd(path_or_fd) as fd:
        out = _ioctl(fd, DURABLE, _ARG.pack(ticket, DURABLE_WAIT if wait else 0, 0))
    return _ARG.unpack(out)[0] >= ticket


@contextlib.contextmanager
def stream(mount, name, ignore_fsync=False, fsync_as_osync=False):
    """Run a block in stream ``name`` (or a numeric id); yields its id.

    On exit the process goes back to the stream it was in on entry, with the flags that
    stream had then (set explicitly: an inherited stream becomes the process's own).
    """
    old_id, old_flags = getstream(mount)
    sid = setstream(mount, name, ignore_fsync, fsync_as_osync)
    try:
        yield sid
    finally:
        with _fd(mount) as fd:
            _set(fd, old_id, old_flags)


# ---- Atomic regions ------------------------------------------------------------------


def _region(path_or_fd, cmd, messages=_REGION_MESSAGES, write=False):
    with _fd(path_or_fd, write) as fd:
        _ioctl(fd, cmd, 0, messages)


def begin(path_or_fd):
    """Enter a new atomic region (CFS): everything the calling process, and the processes
    it starts, change on the mount from now on reaches storage all or nothing, at
    :func:`commit`. ``path_or_fd``: any file or directory of the mount. Regions do not
    nest: ``OSError(EALREADY)`` if the process is already in one."""
    _region(path_or_fd, BEGIN)


def commit(path_or_fd):
    """Commit the calling process's region; returns once it is durable.
    ``OSError(EINVAL)``: the process is in no region."""
    _region(path_or_fd, COMMIT)


def abort(path_or_fd):
    """Abort the calling process's region: none of its changes stays (created files
    vanish, writes revert, renames are undone). ``OSError(EINVAL)``: in no region."""
    _region(path_or_fd, ABORT)


def add(path_or_fd):
    """CFS cfs_add on a regular file of the mount: every write to it, by any process
    (also mmap write-back), belongs to the caller's region. A path is opened for writing;
    a descriptor must be open for writing. ``OSError``: EXDEV if the process has no
    region on the file's mount, EINVAL if the file is not a regular file, EBADF if the
    descriptor is not open for writing, EBUSY if it belongs to another region."""
    _region(path_or_fd, ADD, _ADD_MESSAGES, write=True)


@contextlib.contextmanager
def atomic(mount_or_path):
    """Run a block as one atomic region: begin on entry, commit on a normal exit (durable
    when the block's ``with`` statement ends), abort if the block raises (then the
    exception propagates). ``mount_or_path``: any file or directory of the mount (a path
    is opened once and held for the block, so the block may rename or remove it), a
    descriptor or a file object.

    An abort that fails because the block itself already ended the region (EINVAL) is
    ignored; any other abort failure is raised, with the block's exception as its
    context. A commit after the block already ended the region raises
    ``OSError(EINVAL)``."""
    with _fd(mount_or_path) as fd:
        begin(fd)
        try:
            yield
        except BaseException:
            try:
                abort(fd)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
            raise
        commit(fd)


# ---- AD-transactions on persistent memory ----------------------------------------------

# What the errnos of the TX ioctls mean (the texts of libintact's intact_tx_strerror).
_TX_MESSAGES = {
    errno.EINVAL: "unknown, committed or aborted transaction",
    errno.EXDEV: "the transaction belongs to another mount",
    errno.EBUSY: "the file belongs to another open transaction",
    errno.EBADF: "not a descriptor open for writing (TX_BEGIN and TX_ADD need one)",
    errno.EACCES: "no permission to write the directory",
    errno.EPERM: "the transaction belongs to another process (only it and its children may add to, commit or abort it)",
    errno.ENOSPC: "the transaction does not fit in the log or the free space (see the daemon's log)",
    errno.EOPNOTSUPP: "not a persistent-memory mount (transactions need an image made with --device pmem)",
    errno.ENOTTY: _NOTTY,
}


def tx_strerror(errnum):
    """The meaning of an errno of the ``tx_*`` calls (libintact's ``intact_tx_strerror``);
    other values get ``os.strerror``'s text."""
    return _TX_MESSAGES.get(errnum) or os.strerror(errnum)


def _tx_id(tx):
    if isinstance(tx, Transaction):
        return tx.id
    if isinstance(tx, bool) or not isinstance(tx, int) or not 0 <= tx <= _MASK:
        raise ValueError("a transaction id is what tx_begin() returned (a 64-bit unsigned integer), not %r" % (tx,))
    return tx


def _tx_call(path_or_fd, cmd, tx):
    with _fd(path_or_fd, cmd == TX_ADD) as fd:
        _ioctl(fd, cmd, _TICKET.pack(_tx_id(tx)), _TX_MESSAGES)


def tx_begin(files):
    """Begin an AD-transaction (002's ``tx_begin(TxInfo{num, fdSet})``) on a pmem mount
    over ``files``: one path, fd or file object, or a non-empty list of them (all on the
    same mount); the first begins it, the others are added. Returns the transaction id.
    If adding one fails, the transaction is aborted and the ``OSError`` raised (EXDEV:
    another mount; EBUSY: another transaction's file). Paths are opened for writing
    (directories read-only); descriptors must be open for writing (EBADF), and a
    directory writable by the caller (EACCES). The transaction belongs to the calling
    process: only it and its children may add to, commit or abort it (EPERM)."""
    if isinstance(files, (str, bytes, int, os.PathLike)) or hasattr(files, "fileno"):
        files = [files]
    files = list(files)
    if not files:
        raise ValueError("tx_begin needs at least one file")
    with _fd(files[0], write=True) as fd:
        out = _ioctl(fd, TX_BEGIN, bytes(_TICKET.size), _TX_MESSAGES)
        tx = _TICKET.unpack(out)[0]
        try:
            for f in files[1:]:
                tx_add(tx, f)
        except BaseException:
            try:
                _ioctl(fd, TX_ABORT, _TICKET.pack(tx), _TX_MESSAGES)
            except OSError:
                pass
            raise
    return tx


def tx_add(tx, path_or_fd):
    """Add a file (path, fd or file object) to transaction ``tx``: its changes from now
    on, by any process, belong to it. ``OSError``: EXDEV (the file is on another mount),
    EINVAL (unknown, committed or aborted id), EBUSY (another transaction's file)."""
    _tx_call(path_or_fd, TX_ADD, tx)


def tx_commit(tx, path_or_fd):
    """Commit ``tx``: durable, all or nothing, when it returns. ``path_or_fd``: any file or
    directory of its mount. ``OSError(EINVAL)``: unknown, committed or aborted id."""
    _tx_call(path_or_fd, TX_COMMIT, tx)


def tx_abort(tx, path_or_fd):
    """Abort ``tx``: none of its changes stays. ``OSError(EINVAL)`` as for commit."""
    _tx_call(path_or_fd, TX_ABORT, tx)


class Transaction:
    """An open AD-transaction with a descriptor on its mount (what :func:`transaction`
    yields): ``id``, ``add(file)``, ``commit()``, ``abort()``."""

    def __init__(self, tx, fd):
        self.id = tx
        self._fd = fd
        self.ended = False

    def add(self, path_or_fd):
        tx_add(self.id, path_or_fd)

    def commit(self):
        tx_commit(self.id, self._fd)
        self.ended = True

    def abort(self):
        tx_abort(self.id, self._fd)
        self.ended = True

    def __repr__(self):
        return "Transaction(%d%s)" % (self.id, ", ended" if self.ended else "")


@contextlib.contextmanager
def transaction(files):
    """Run a block as one AD-transaction over ``files`` (see :func:`tx_begin`): commits on
    a normal exit (durable when the ``with`` statement ends), aborts if the block raises
    (then the exception propagates). Yields a :class:`Transaction`. A block that ends the
    transaction itself (``tx.commit()`` or ``tx.abort()``) is left alone at the exit."""
    if isinstance(files, (str, bytes, int, os.PathLike)) or hasattr(files, "fileno"):
        files = [files]
    files = list(files)
    if not files:
        raise ValueError("a transaction needs at least one file")
    # A descriptor held for the block: the block may rename or remove the files.
    with _fd(files[0], write=True) as fd0:
        fd = os.dup(fd0)
    try:
        t = Transaction(tx_begin([fd] + files[1:]), fd)
        try:
            yield t
        except BaseException:
            if not t.ended:
                try:
                    t.abort()
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise
            raise
        if not t.ended:
            t.commit()
    finally:
        os.close(fd)
