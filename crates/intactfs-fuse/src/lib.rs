//! The intactfs FUSE mount: a thin layer over the engine ([`intactfs::Fs`]).
//!
//! * [`control`]: the ioctl ABI (setstream, getstream, streamsync) shared with
//!   `libintact` and the Python module.
//! * [`procs`]: which stream a request's process is in (inheritance from ancestors).
//! * [`fs`]: the `fuser::Filesystem` implementation.
//! * [`commit`]: commits written and flushed outside the engine lock (group commit).
//! * [`mount`]: locking the image, serving, signals, write-back at unmount.
//! * [`serve`]: picks the server by image kind ([`serve::serve`]).
//! * [`pmem`]: the `fuser::Filesystem` over the persistent-memory engine
//!   ([`intactfs_pmem::PmemFs`]) with its AD-transactions (TX_* ioctls).

pub mod commit;
pub mod control;
pub mod fs;
pub mod mount;
pub mod pmem;
pub mod procs;
pub mod serve;

pub use fs::{Caps, FsyncMode};
/// How many requests a `-o uring` mount served through FUSE over io_uring (the vendored
/// fuser's counter), for the daemon's closing message. Only with the `uring` feature.
#[cfg(feature = "uring")]
pub use fuser::uring_requests_served;
pub use mount::{run, MountConfig, MountError};
