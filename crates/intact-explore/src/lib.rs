//! Crash states (thesis 004 §3.2 "State Re-construction", §3.3, §3.5).
//!
//! - [`crashfs`]: a crash state in memory, its content hash, and materialisation.
//! - [`dropped`]: the units a reorder state leaves out, stored by their span.
//! - [`filehash`]: a file's content hash from cached hashes of its shared chunks.
//! - [`strategy`]: which states to build: ALICE's default, exhaustive, random.

pub mod crashfs;
pub mod dropped;
pub mod filehash;
pub mod strategy;

pub use crashfs::{
    garbage, CrashFs, CrashFsError, Delta, DirDelta, FileDelta, HashCache, StateHash,
};
pub use strategy::{describe_set, Dropped, Explorer, Provenance};
