//! One mutating call, in the model's terms.

use crate::MIno;
use intactfs_types::RenameFlags;

/// What a non-directory that is not a regular file is (the model's own names, not the
/// engines' codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MSpecial {
    /// Its target is the node's `data`.
    Symlink,
    Fifo,
    Socket,
    Char(u32),
    Block(u32),
}

/// What a fallocate asks for (the model's own names for the Linux modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MFalloc {
    /// Mode 0: the range reads as before (holes as zeros), the size reaches its end.
    Allocate,
    /// FALLOC_FL_KEEP_SIZE: nothing a read sees changes.
    KeepSize,
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: the range reads as zeros, the size stays.
    Punch,
}

/// One mutating call, with inode numbers resolved when it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MOp {
    /// create, mkdir (`dir`), symlink and mknod (`special`: the kind, and a link's target).
    Create {
        parent: MIno,
        name: Vec<u8>,
        ino: MIno,
        dir: bool,
        mode: u32,
        special: Option<(MSpecial, Vec<u8>)>,
    },
    /// unlink, or rmdir (`dir`). `keep`: the target was open, so it stays (an orphan)
    /// until its last release.
    Remove {
        parent: MIno,
        name: Vec<u8>,
        dir: bool,
        keep: bool,
    },
    /// renameat2 with `flags` (an exchange swaps the two entries' inodes). `keep`: a
    /// replaced target was open (it stays, an orphan).
    Rename {
        /// The source entry: (directory, name).
        from: (MIno, Vec<u8>),
        /// The target entry.
        to: (MIno, Vec<u8>),
        flags: RenameFlags,
        keep: bool,
    },
    /// A new name for a file (hard link).
    Link {
        ino: MIno,
        parent: MIno,
        name: Vec<u8>,
    },
    Write {
        ino: MIno,
        off: u64,
        data: Vec<u8>,
    },
    /// A setattr: mode, owner, size (a truncate or an extension). `times` (seconds and
    /// nanoseconds for both atime and mtime) is carried for the engine's call only: the
    /// engines stamp times, the model does not predict them.
    SetAttr {
        ino: MIno,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        times: Option<(i64, u32)>,
    },
    /// setxattr (`value` Some) or removexattr (None).
    SetXattr {
        ino: MIno,
        name: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    /// fallocate of [off, off+len).
    Fallocate {
        ino: MIno,
        off: u64,
        len: u64,
        mode: MFalloc,
    },
}

impl MOp {
    /// The inode whose data or attributes the call changes (None for calls on names).
    pub fn file(&self) -> Option<MIno> {
        match self {
            MOp::Write { ino, .. }
            | MOp::SetAttr { ino, .. }
            | MOp::SetXattr { ino, .. }
            | MOp::Fallocate { ino, .. } => Some(*ino),
            MOp::Create { .. } | MOp::Remove { .. } | MOp::Rename { .. } | MOp::Link { .. } => None,
        }
    }
}
