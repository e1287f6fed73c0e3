//! intactfs: a crash-consistent file system engine with streams (ccfs).
//!
//! The engine is a library over a [`BlockDevice`](intactfs_device::BlockDevice); the FUSE
//! mount is a thin layer over it. See `docs/fs-design.md` for the design and
//! `docs/fs-testing.md` for how it is proven.
//!
//! * [`meta`]: the metadata model and the logical operations journaled.
//! * [`layout`]: the on-disk format.
//! * [`alloc`]: free space, derived; reuse only after the freeing commit is durable.
//! * [`streams`]: streams, running transactions, related operations (ccfs §3.5).
//! * [`engine`]: [`Fs`], the POSIX operations (the engine traits of
//!   [`intactfs_types::Engine`], implemented in its modules), commit and checkpoint.
//! * [`recovery`]: mount-time replay and the structural invariants.
//! * [`fsck`] and [`dump`]: the tools; [`foreign`]: which other file system an image holds.
//! * [`mutation`]: deliberate bugs the crash simulation must catch (feature `mutations`).

pub mod alloc;
pub mod dump;
pub mod engine;
pub mod error;
pub mod foreign;
pub mod fsck;
pub mod layout;
pub mod meta;
pub mod mutation;
pub mod recovery;
pub mod streams;

pub use engine::{
    mkfs, Aborted, Attr, CommitInfo, CommitIo, DirEntry, Fs, MkfsOptions, MountOptions,
    MountReport, Owner, RenameFlags, SetAttr, StatFs, Stats, REGION_BASE,
};
pub use error::{FsError, Result};
pub use intactfs_types::{prelude, MknodKind, XattrMode};
pub use meta::{FileType, Ino, NewKind, Time, BLOCK, ROOT};
pub use streams::{StreamFlags, StreamId, INIT_STREAM};
