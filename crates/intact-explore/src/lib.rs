//! Crash states (thesis 004 §3.2 "State Re-construction", §3.3, §3.5).
//!
//! - [`crashfs`]: a crash state in memory, its content hash, and materialisation.
//! - [`strategy`]: which states to build: ALICE's default, exhaustive, random.

pub mod crashfs;
pub mod strategy;

pub use crashfs::{garbage, CrashFs, CrashFsError, Delta, DirDelta, FileDelta, StateHash};
pub use strategy::{describe_set, Explorer, Provenance};
