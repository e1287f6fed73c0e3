"""intact: a thin Python package for intact users (checkers, the intactfs API).

``intact.fs`` controls ccfs streams on an intactfs mount; see docs/fs-api.md.
"""

from .fs import (  # noqa: F401
    GETSTREAM,
    IGNORE_FSYNC,
    INIT_STREAM,
    IOC_MAGIC,
    SETSTREAM,
    STREAMSYNC,
    getstream,
    setstream,
    stream,
    stream_id,
    streamsync,
)

__version__ = "0.1.0"
