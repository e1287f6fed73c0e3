"""intact: a thin Python package for intact users (checkers, the intactfs API).

``intact.fs`` controls an intactfs mount: ccfs streams, OptFS osync/dsync, CFS atomic
regions, and FCFS AD-transactions on a persistent-memory mount; see docs/fs-api.md.
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
    TX_ABORT,
    TX_ADD,
    TX_BEGIN,
    TX_COMMIT,
    Transaction,
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
    transaction,
    tx_abort,
    tx_add,
    tx_begin,
    tx_commit,
    tx_strerror,
)

__version__ = "0.1.0"
