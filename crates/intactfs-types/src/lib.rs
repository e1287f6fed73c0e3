//! intactfs-types: the vocabulary every intactfs engine speaks.
//!
//! The block engine (`intactfs`, with transactional flash under it) and the
//! persistent-memory engine (`intactfs-pmem`) answer the same POSIX calls with the same
//! types, defined once here: inode numbers, times, file types, attributes, set-attribute
//! requests, owners, rename flags, directory entries, statfs, and one error type whose
//! errno mapping lives in one place ([`FsError::errno`]). The FUSE layer, the CLI and both
//! simulations use them.
//!
//! [`Engine`] is the one interface both engines implement, four traits by concern (the
//! traits speak only this vocabulary, and both engines already depend on this crate: a
//! crate of its own would add a second tiny crate with the same dependents). Bring them
//! into scope with `use intactfs_types::prelude::*`. [`longrun`] is the long run both
//! engines' crash-simulation programs share.
//!
//! What a caller may rely on: these are in-memory API types. An engine's on-media encoding
//! is its own (the block engine serialises [`Time`] and [`FileType`] with postcard, so
//! their field and variant order is part of its format; the pmem engine packs them into
//! words in its `layout`).

#![forbid(unsafe_code)]

mod engine;
mod error;
pub mod longrun;
mod mutation;

pub use engine::{
    Capabilities, Capability, Engine, EngineBase, ExtAttrs, FileData, Namespace, XattrMode,
};
pub use error::{FsError, Result};
use serde::{Deserialize, Serialize};

/// The engine traits, for `use intactfs_types::prelude::*` where a concrete engine is
/// called (a caller generic over `E: Engine` needs no import).
pub mod prelude {
    pub use crate::engine::{Engine, EngineBase, ExtAttrs, FileData, Namespace};
}

/// Longest symbolic-link target in bytes (Linux's PATH_MAX less the terminating NUL);
/// every engine refuses a longer or an empty one with EINVAL.
pub const SYMLINK_MAX: usize = 4095;

/// An inode number (0 is never one).
pub type Ino = u64;

/// Most names a file may have (link(2) answers EMLINK beyond), on every engine.
pub const MAX_LINKS: u32 = 65_000;

/// Longest file name in bytes (Linux's NAME_MAX), on every engine.
pub const NAME_MAX: usize = 255;

/// A name a directory entry may have: 1..=NAME_MAX bytes, not `.` or `..`, no `/` or NUL.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != b"."
        && name != b".."
        && !name.iter().any(|&b| b == b'/' || b == 0)
}

/// The check every engine makes on the name of a new entry (create, mkdir, link, rename):
/// ENAMETOOLONG past [`NAME_MAX`], EINVAL for any other name [`valid_name`] refuses.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong(name.len()));
    }
    if !valid_name(name) {
        return Err(FsError::Invalid(format!(
            "{:?} is not a file name (empty, '.', '..', or holds '/' or NUL)",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// Longest extended-attribute name and value (Linux's XATTR_NAME_MAX and XATTR_SIZE_MAX);
/// each engine sets its own limit on the total per inode.
pub const XATTR_NAME_MAX: usize = 255;
pub const XATTR_VALUE_MAX: usize = 65_536;

/// A name an extended attribute may have: 1..=XATTR_NAME_MAX bytes, no NUL.
pub fn valid_xattr_name(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= XATTR_NAME_MAX && !name.contains(&0)
}

/// The checks every engine makes on a setxattr before looking at the inode's attributes:
/// ENAMETOOLONG past [`XATTR_NAME_MAX`], EINVAL for an empty name or one with a NUL,
/// EFBIG for a value past [`XATTR_VALUE_MAX`].
pub fn check_xattr(name: &[u8], value: &[u8]) -> Result<()> {
    if name.len() > XATTR_NAME_MAX {
        return Err(FsError::NameTooLong(name.len()));
    }
    if !valid_xattr_name(name) {
        return Err(FsError::Invalid("extended attribute name".into()));
    }
    if value.len() > XATTR_VALUE_MAX {
        return Err(FsError::TooBig(format!(
            "an attribute value of {} bytes (at most {XATTR_VALUE_MAX})",
            value.len()
        )));
    }
    Ok(())
}

/// A time stamp: seconds and nanoseconds since the epoch.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Time {
    pub sec: i64,
    pub nsec: u32,
}

impl Time {
    /// The wall clock now (the epoch if the clock is before it).
    pub fn now() -> Time {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Time {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }
}

/// The kind of an inode. The variant order is part of the block engine's on-disk format
/// (postcard encodes the index): append, never reorder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileType {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

impl FileType {
    /// A character or block device: the kinds whose inode keeps a device number.
    pub fn has_rdev(self) -> bool {
        matches!(self, FileType::CharDev | FileType::BlockDev)
    }
}

/// What mknod(2) makes through every engine: an empty regular file, a FIFO, a socket, or a
/// character or block device with its device number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MknodKind {
    File,
    Fifo,
    Socket,
    CharDev(u32),
    BlockDev(u32),
}

impl MknodKind {
    /// What mknod(2) of `kind` makes (`rdev` kept for a device, dropped otherwise); EINVAL
    /// for a directory or a symbolic link (mkdir and symlink make those).
    pub fn new(kind: FileType, rdev: u32) -> Result<MknodKind> {
        Ok(match kind {
            FileType::File => MknodKind::File,
            FileType::Fifo => MknodKind::Fifo,
            FileType::Socket => MknodKind::Socket,
            FileType::CharDev => MknodKind::CharDev(rdev),
            FileType::BlockDev => MknodKind::BlockDev(rdev),
            FileType::Dir | FileType::Symlink => {
                return Err(FsError::Invalid(format!(
                    "mknod of a {kind:?} (mkdir and symlink make those)"
                )))
            }
        })
    }

    pub fn file_type(self) -> FileType {
        match self {
            MknodKind::File => FileType::File,
            MknodKind::Fifo => FileType::Fifo,
            MknodKind::Socket => FileType::Socket,
            MknodKind::CharDev(_) => FileType::CharDev,
            MknodKind::BlockDev(_) => FileType::BlockDev,
        }
    }

    /// The device number (0 for a kind that keeps none).
    pub fn rdev(self) -> u32 {
        match self {
            MknodKind::CharDev(r) | MknodKind::BlockDev(r) => r,
            _ => 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: FileType,
    /// Permission bits (0o7777).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    /// 512-byte units allocated (the block engine counts dirty data not yet allocated; the
    /// pmem engine counts home blocks, not pending versions).
    pub blocks: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// Device number of a character or block special file (0 otherwise).
    pub rdev: u32,
}

/// A setattr request: each `Some` field is changed, the others are left alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Truncate or extend (an extension reads as zeros).
    pub size: Option<u64>,
    pub atime: Option<Time>,
    pub mtime: Option<Time>,
}

/// Who creates a file: the new inode's owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// renameat2(2) flags (RENAME_NOREPLACE, RENAME_EXCHANGE); both set is invalid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
}

impl RenameFlags {
    /// rename(2): an existing target is replaced.
    pub const NONE: RenameFlags = RenameFlags {
        noreplace: false,
        exchange: false,
    };
    pub const NOREPLACE: RenameFlags = RenameFlags {
        noreplace: true,
        exchange: false,
    };
    pub const EXCHANGE: RenameFlags = RenameFlags {
        noreplace: false,
        exchange: true,
    };
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileType,
    /// Pass this back to continue after this entry (never 0: 0 means "from the start").
    pub cookie: u64,
}

/// What statfs(2) reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u64,
    /// Data blocks in all and free.
    pub blocks: u64,
    pub free_blocks: u64,
    /// Inodes in all (used and free) and free; an engine that allocates inodes on demand
    /// reports a bound.
    pub files: u64,
    pub free_files: u64,
    pub name_max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mknod_makes_no_directory_or_link_and_keeps_only_a_devices_number() {
        for k in [FileType::Dir, FileType::Symlink] {
            assert_eq!(MknodKind::new(k, 0).unwrap_err().errno(), 22, "{k:?}");
        }
        let fifo = MknodKind::new(FileType::Fifo, 7).unwrap();
        assert_eq!((fifo, fifo.rdev()), (MknodKind::Fifo, 0));
        let chr = MknodKind::new(FileType::CharDev, 0x0501).unwrap();
        assert_eq!((chr.file_type(), chr.rdev()), (FileType::CharDev, 0x0501));
    }
}
