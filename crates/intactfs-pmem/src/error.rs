//! Errors of engine calls: the one error type of every intactfs engine, defined in
//! intactfs-types with its errno mapping. `PmemFsError` is its name here while callers
//! move to `FsError`.

pub use intactfs_types::{FsError, FsError as PmemFsError, Result};
