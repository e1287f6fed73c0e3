"""intact: a thin Python package for intact users (checkers, the intactfs API).

``intact.fs`` controls an intactfs mount: ccfs streams, OptFS osync/dsync and CFS atomic
regions; see docs/fs-api.md.
"""

from .fs import (  # noqa: F401
    ABORT,
    ADD,
    BEGIN,
    COMMIT,
    DSYNC,
    DURABLE,
    DURABLE_WAIT,
    FSYNC_AS_OSYNC,
    GETSTREAM,
    IGNORE_FSYNC,
    INIT_STREAM,
    IOC_MAGIC,
    OSYNC,
    SETSTREAM,
    STREAMSYNC,
    abort,
    add,
    atomic,
    begin,
    commit,
    dsync,
    durable,
    getstream,
    osync,
    region_strerror,
    setstream,
    stream,
    stream_id,
    streamsync,
)

__version__ = "0.1.0"
