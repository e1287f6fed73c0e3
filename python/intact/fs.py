"""Stream control on an intactfs mount (docs/fs-api.md).

A process on an intactfs FUSE mount is in one *stream* (ccfs §3.2): its updates are
ordered with each other and independent of other streams', and fsync commits its stream.
The calls below issue the mount's ioctls on any file or directory of it; the stream
belongs to the calling *process* (every thread) and is inherited by the processes it
starts. Errors are ``OSError`` with the errno of the ioctl: ``ENOTTY`` when the file is
not on an intactfs mount, ``EINVAL`` for an unknown flag.

    import intact.fs as ifs
    with ifs.stream("/mnt/x", "myapp-db", ignore_fsync=True):
        ...                       # writes here are ordered; fsync returns at once
        ifs.streamsync("/mnt/x")  # durable now
"""

import contextlib
import fcntl
import os
import struct

__all__ = [
    "IOC_MAGIC", "SETSTREAM", "GETSTREAM", "STREAMSYNC", "IGNORE_FSYNC", "INIT_STREAM",
    "stream_id", "setstream", "getstream", "streamsync", "stream",
]

#: The ioctl "type" byte of every intactfs ioctl.
IOC_MAGIC = 0xCC
#: ``_IOW(0xCC, 1, struct intact_stream)``
SETSTREAM = 0x4010CC01
#: ``_IOR(0xCC, 2, struct intact_stream)``
GETSTREAM = 0x8010CC02
#: ``_IO(0xCC, 3)``
STREAMSYNC = 0x0000CC03
#: Flag: fsync and fdatasync in the stream return at once; streamsync stays durable.
IGNORE_FSYNC = 1
#: The stream of every process that neither set one nor inherited one.
INIT_STREAM = 0

# struct intact_stream { uint64_t id; uint32_t flags; uint32_t reserved; } (native order)
_ARG = struct.Struct("=QII")
assert _ARG.size == 16

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
def _fd(path_or_fd):
    """A descriptor for the ioctl: an int or an object with fileno() is used as is; a
    path is opened (read-only, else write-only if reading is not permitted) and closed."""
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
    try:
        fd = os.open(path, os.O_RDONLY | common)
    except PermissionError:
        fd = os.open(path, os.O_WRONLY | common)
    try:
        yield fd
    finally:
        os.close(fd)


def _set(fd, sid, flags):
    fcntl.ioctl(fd, SETSTREAM, _ARG.pack(sid, flags, 0))


def setstream(path_or_fd, name_or_id, ignore_fsync=False):
    """Put the calling process in a stream; return its id.

    ``path_or_fd``: any file or directory of the mount (path, fd or file object).
    ``name_or_id``: a name (see :func:`stream_id`) or a numeric id (0 is init).
    ``ignore_fsync``: the stream's IGNORE_FSYNC flag. Flags belong to the stream, so
    this also sets (or clears) it for the other processes in the stream.
    """
    sid = _to_id(name_or_id)
    with _fd(path_or_fd) as fd:
        _set(fd, sid, IGNORE_FSYNC if ignore_fsync else 0)
    return sid


def getstream(path_or_fd):
    """``(id, flags)``: the calling process's stream and that stream's flags."""
    with _fd(path_or_fd) as fd:
        out = fcntl.ioctl(fd, GETSTREAM, bytes(_ARG.size))
    sid, flags, _ = _ARG.unpack(out)
    return sid, flags


def streamsync(path_or_fd):
    """Commit the calling process's stream durably (even with IGNORE_FSYNC)."""
    with _fd(path_or_fd) as fd:
        fcntl.ioctl(fd, STREAMSYNC, 0)


@contextlib.contextmanager
def stream(mount, name, ignore_fsync=False):
    """Run a block in stream ``name`` (or a numeric id); yields its id.

    On exit the process goes back to the stream it was in on entry, with the flags that
    stream had then (set explicitly: an inherited stream becomes the process's own).
    """
    old_id, old_flags = getstream(mount)
    sid = setstream(mount, name, ignore_fsync)
    try:
        yield sid
    finally:
        with _fd(mount) as fd:
            _set(fd, old_id, old_flags)
