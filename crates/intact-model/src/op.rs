//! Logical operations (thesis Table 3.1) plus mkdir/rmdir/symlink, as recorded in a bundle.

use crate::frame::Frame;
use serde::{Deserialize, Serialize};

/// An inode of a logical state ([`crate::State`]); operations name inodes by it.
pub type InodeId = u64;

/// Bytes carried by an operation. Bytes live in the bundle's data blob (`data.bin`),
/// referenced by offset, so that operations stay small and the blob is written once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Data {
    /// `len` bytes at offset `at` of the data blob.
    Bytes { at: u64, len: u64 },
    /// `zeros` zero bytes (hole punching, zeroing fallocate).
    Zeros { zeros: u64 },
}

impl Data {
    pub fn len(&self) -> u64 {
        match *self {
            Data::Bytes { len, .. } => len,
            Data::Zeros { zeros } => zeros,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes, read from `blob`. Panics never: out-of-range references are an error.
    pub fn bytes<'a>(&self, blob: &'a [u8]) -> Result<std::borrow::Cow<'a, [u8]>, String> {
        match *self {
            Data::Bytes { at, len } => {
                let end = at.checked_add(len).ok_or("data reference overflows")?;
                if end > blob.len() as u64 {
                    return Err(format!(
                        "data reference {at}+{len} is past the end of the data blob ({} bytes)",
                        blob.len()
                    ));
                }
                Ok(std::borrow::Cow::Borrowed(&blob[at as usize..end as usize]))
            }
            Data::Zeros { zeros } => Ok(std::borrow::Cow::Owned(vec![0u8; zeros as usize])),
        }
    }
    /// Sub-range `[off, off+len)` of this data.
    pub fn slice(&self, off: u64, len: u64) -> Data {
        debug_assert!(off.checked_add(len).is_some_and(|end| end <= self.len()));
        match *self {
            // Saturating: a reference past the blob is refused when its bytes are read.
            Data::Bytes { at, .. } => Data::Bytes {
                at: at.saturating_add(off),
                len,
            },
            Data::Zeros { .. } => Data::Zeros { zeros: len },
        }
    }
}

/// How a sync operation was requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    Fsync,
    Fdatasync,
    SyncFileRange,
    Msync,
    /// write on a file opened with O_SYNC (or pwritev2 RWF_SYNC)
    OSync,
    /// write on a file opened with O_DSYNC (or pwritev2 RWF_DSYNC)
    ODsync,
    Syncfs,
    Sync,
    /// intactfs STREAMSYNC: the caller's stream (and streams merged with it) is durable.
    StreamSync,
}

/// One logical operation (thesis Table 3.1), over logical entities (inode ids).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LogicalOp {
    /// Write within the current size of a regular file.
    Overwrite {
        inode: InodeId,
        offset: u64,
        count: u64,
        data: Data,
    },
    /// Write just beyond the current size, growing the file from `old_size` to `new_size`.
    Append {
        inode: InodeId,
        old_size: u64,
        new_size: u64,
        data: Data,
    },
    /// Change the size without writing data (growth exposes zeros).
    Truncate {
        inode: InodeId,
        old_size: u64,
        new_size: u64,
    },
    /// Link `inode` as `dir/name`. `created` marks the creation of a new regular file;
    /// `link_count` is the inode's number of links after the operation.
    Link {
        dir: InodeId,
        name: String,
        inode: InodeId,
        link_count: u64,
        created: bool,
    },
    /// Remove the link `dir/name` to a non-directory; `link_count` is what remains.
    Unlink {
        dir: InodeId,
        name: String,
        inode: InodeId,
        link_count: u64,
    },
    /// rename(2). `replaced` is the inode the destination pointed to, if any.
    /// With `exchange` (RENAME_EXCHANGE), `replaced` moves to the source name.
    Rename {
        src_dir: InodeId,
        src_name: String,
        dst_dir: InodeId,
        dst_name: String,
        inode: InodeId,
        replaced: Option<InodeId>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exchange: bool,
    },
    Mkdir {
        dir: InodeId,
        name: String,
        inode: InodeId,
    },
    Rmdir {
        dir: InodeId,
        name: String,
        inode: InodeId,
    },
    Symlink {
        dir: InodeId,
        name: String,
        inode: InodeId,
        target: String,
    },
    /// Flush an inode (or, with `inode: None`, the whole file system: sync/syncfs).
    /// `range` is the byte range `[offset, offset+count)` where the call has one.
    Sync {
        inode: Option<InodeId>,
        how: SyncKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        range: Option<(u64, u64)>,
    },
    /// The application wrote to standard output.
    Output { data: Data },
}

impl LogicalOp {
    pub fn name(&self) -> &'static str {
        match self {
            LogicalOp::Overwrite { .. } => "overwrite",
            LogicalOp::Append { .. } => "append",
            LogicalOp::Truncate { .. } => "truncate",
            LogicalOp::Link { .. } => "link",
            LogicalOp::Unlink { .. } => "unlink",
            LogicalOp::Rename { .. } => "rename",
            LogicalOp::Mkdir { .. } => "mkdir",
            LogicalOp::Rmdir { .. } => "rmdir",
            LogicalOp::Symlink { .. } => "symlink",
            LogicalOp::Sync { .. } => "sync",
            LogicalOp::Output { .. } => "output",
        }
    }
    /// A directory operation (link, unlink, rename, mkdir, rmdir, symlink).
    pub fn is_namespace(&self) -> bool {
        matches!(
            self,
            LogicalOp::Link { .. }
                | LogicalOp::Unlink { .. }
                | LogicalOp::Rename { .. }
                | LogicalOp::Mkdir { .. }
                | LogicalOp::Rmdir { .. }
                | LogicalOp::Symlink { .. }
        )
    }
    /// The data this operation carries, if any.
    pub fn data(&self) -> Option<Data> {
        match self {
            LogicalOp::Overwrite { data, .. }
            | LogicalOp::Append { data, .. }
            | LogicalOp::Output { data } => Some(*data),
            _ => None,
        }
    }
}

/// A logical operation with where it came from: the system call, the task, the stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the update protocol (0-based, dense).
    pub id: usize,
    /// Index of the system-call event that produced it (several ops may share one).
    pub call: usize,
    pub pid: u32,
    pub tid: u32,
    pub syscall: String,
    #[serde(flatten)]
    pub op: LogicalOp,
    /// Path (relative to the recorded directory) of the object, at the time of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Second path (rename destination, link source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path2: Option<String>,
    /// Resolved stack, innermost first (Python frames first where the shim gave them).
    #[serde(default)]
    pub stack: Vec<Frame>,
    /// The representative frame chosen by the frame filter at record time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Frame>,
    /// The intactfs stream the process was in (SETSTREAM; 0 = init, the default).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stream: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
