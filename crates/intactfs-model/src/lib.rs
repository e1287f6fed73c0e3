//! An independent reference model of POSIX file-system state, shared by both crash
//! simulations (`intactfs-sim` for the block engine, `intactfs-pmem`'s `sim` for the
//! persistent-memory engine). It shares no code with either engine: each simulation runs
//! its engine and this model in lockstep and compares what they show.
//!
//! * [`MState`] ([`state`]): the namespace, sparse file contents ([`MData`]), modes,
//!   owners and extended attributes; files unlinked (directories removed) while open stay
//!   as orphans until the simulation frees them.
//! * [`MOp`] ([`op`]): one mutating call, with inode numbers resolved when it ran;
//!   [`MState::apply`] makes one the checks allowed.
//! * The checks ([`check`]): the errno each call must fail with, in the order the engines
//!   check (EBUSY where another transaction owns an inode, for the pmem engine).
//! * [`Snap`] ([`snap`]): a canonical snapshot of a state, read from the model or from an
//!   engine through its traits, with a digest and a diff for messages.
//!
//! What only one engine's promise needs stays in its simulation (the block engine's
//! relatedness rule, the pmem engine's transaction ownership).

pub mod check;
pub mod data;
pub mod op;
pub mod snap;
pub mod state;

pub use data::{sparse_hash, MData, CHUNK};
pub use op::{MFalloc, MOp, MSpecial};
pub use snap::{by_first_path, diff, digest, engine_snapshot, xattr_digest, SNode, Snap};
pub use state::{MNode, MState};

/// A model inode number (the engine's, or the simulation's own numbering).
pub type MIno = u64;
/// The root directory.
pub const MROOT: MIno = 1;

/// The errnos the model predicts (Linux's numbers, as the engines' `errno()` gives them).
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const EFBIG: i32 = 27;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOTEMPTY: i32 = 39;
    pub const ENODATA: i32 = 61;
}
