//! Logical entities and logical operations: the file-system-independent view of an
//! application's update protocol (thesis 004, §3.2, Tables 3.1 and 3.3).
//!
//! A [`State`] is a set of inodes (regular files, directories, symlinks) reachable from
//! a root directory. A [`LogicalOp`] changes a state; [`State::apply`] applies one.
//! [`snapshot`] reads a real directory into a state, [`State::diff`] compares two.

pub mod frame;
pub mod op;
pub mod recording;
pub mod snapshot;
pub mod sparse;
pub mod state;

pub use frame::{clean_path, Frame, Lang};
pub use op::{Data, InodeId, LogicalOp, Op, SyncKind};
pub use recording::{TaskExit, Unsupported};
pub use snapshot::{capture, IgnoreSet, SnapshotError};
pub use sparse::{Run, Seg, Sparse};
pub use state::{ApplyError, Inode, Node, State};
