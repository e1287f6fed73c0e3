//! The intactfs FUSE mount: one thin server over any engine ([`intactfs_types::Engine`]).
//!
//! * [`server`]: the one `fuser::Filesystem`, generic over the engine, with what differs
//!   per engine behind [`server::Served`].
//! * [`block`]: the block engine (and transactional flash under it) as served: streams,
//!   osync/dsync, atomic regions, commits outside the lock.
//! * [`pmem`]: the persistent-memory engine ([`intactfs_pmem::PmemFs`]) as served, with
//!   its AD-transactions (TX_* ioctls), and the mount of a pmem image.
//! * [`control`]: the ioctl ABI shared with `libintact` and the Python module, and the
//!   one refusal of control calls an engine lacks.
//! * [`procs`]: which stream a request's process is in (inheritance from ancestors).
//! * [`commit`]: commits written and flushed outside the engine lock (group commit).
//! * [`mount`]: locking the image, serving, signals, write-back at unmount.
//! * [`serve`]: picks the engine by image kind ([`serve::serve`]).

pub mod block;
pub mod commit;
pub mod control;
pub mod mount;
pub mod pmem;
pub mod procs;
pub mod serve;
pub mod server;

pub use block::FsyncMode;
/// How many requests a `-o uring` mount served through FUSE over io_uring (the vendored
/// fuser's counter), for the daemon's closing message. Only with the `uring` feature.
#[cfg(feature = "uring")]
pub use fuser::uring_requests_served;
pub use mount::{run, MountConfig, MountError};
pub use server::Caps;
