//! The block-level validator ("BoB", thesis `004` §5.6): record every write, flush and
//! discard a real file system sends to its device, build the crash images the device may
//! leave, and check file systems and applications on them.
//!
//! * [`recorder`]: a one-file FUSE file system serving a loop device's backing file,
//!   logging what reaches it ([`log`] is the format);
//! * [`record`]: mkfs, mount through the recorder, run the workload, write a [`logdir`];
//! * [`images`]: which images a crash may leave (prefixes of epochs, subsets and tears of
//!   the open epoch), deduplicated by content;
//! * [`check`]: materialise each image, mount it (recovery), run the application's checker
//!   and the file system's fsck;
//! * [`fskind`]: ext4, xfs, btrfs, intactfs — how to make, mount and check each;
//! * [`validate`]: `validate-apm` — are the images a real file system leaves crash states
//!   its APM allows?
//! * [`sys`]: programs, loop devices and mounts as guards; image copies.

pub mod check;
pub mod fskind;
pub mod images;
pub mod log;
pub mod logdir;
pub mod record;
pub mod recorder;
pub mod sys;
pub mod validate;
