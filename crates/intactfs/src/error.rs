//! Errors of engine calls: the one error type of every intactfs engine, defined in
//! intactfs-types with its errno mapping.

pub use intactfs_types::{FsError, Result};
