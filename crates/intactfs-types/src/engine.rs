//! The one engine interface: the POSIX calls a FUSE server needs, and what else an engine
//! can do (its capabilities), so that one server can serve any engine and answer the
//! control calls an engine lacks from one place.
//!
//! Contract: every method answers with the shared vocabulary of this crate. A call the
//! engine does not implement answers [`FsError::Unsupported`] (EOPNOTSUPP), never EINVAL:
//! a program must be able to tell "not here" from "wrong argument". `Ctx` is what an engine
//! needs to know of the caller to place a change: the block engine's stream (ccfs), the
//! pmem engine's open AD-transaction (None: a legacy call, its own transaction).

use crate::{Attr, DirEntry, FileType, Ino, Owner, RenameFlags, Result, SetAttr, StatFs};

/// An interface beyond POSIX that an engine may offer (design brief: the seeds' calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// ccfs streams: setstream/getstream/streamsync, IGNORE_FSYNC.
    Streams,
    /// OptFS osync/dsync and durability tickets.
    OsyncDsync,
    /// CFS atomic regions (begin/add/commit/abort, and the F2FS atomic writes over them).
    AtomicRegions,
    /// FCFS AD-transactions over several files (tx_begin/tx_add/tx_commit/tx_abort).
    AdTransactions,
}

/// The capabilities an engine has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub streams: bool,
    pub osync_dsync: bool,
    pub atomic_regions: bool,
    pub ad_transactions: bool,
}

impl Capabilities {
    pub fn has(&self, c: Capability) -> bool {
        match c {
            Capability::Streams => self.streams,
            Capability::OsyncDsync => self.osync_dsync,
            Capability::AtomicRegions => self.atomic_regions,
            Capability::AdTransactions => self.ad_transactions,
        }
    }
}

/// The POSIX calls of an intactfs engine (what the FUSE server needs of it).
pub trait Engine {
    /// Where a change goes: the caller's stream, or transaction (see the module comment).
    type Ctx: Copy;

    fn capabilities(&self) -> Capabilities;

    fn getattr(&self, ino: Ino) -> Result<Attr>;
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr>;
    /// Up to `max` entries after `cookie` (0: from the start), each with its own cookie.
    fn readdir(&self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>>;
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;
    /// The parent of directory `dir` (the root's is the root): what ".." names.
    fn parent(&self, dir: Ino) -> Result<Ino>;
    fn statfs(&self) -> StatFs;
    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>>;

    fn create(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        mode: u32,
        o: Owner,
    ) -> Result<Attr>;
    fn mkdir(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        mode: u32,
        o: Owner,
    ) -> Result<Attr>;
    fn symlink(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        o: Owner,
    ) -> Result<Attr>;
    /// A special file (FIFO, socket, character or block device; `rdev` for devices) or an
    /// empty regular file.
    #[allow(clippy::too_many_arguments)]
    fn mknod(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        kind: FileType,
        mode: u32,
        rdev: u32,
        o: Owner,
    ) -> Result<Attr>;
    /// Counts an open of `ino` (the FUSE server: one per kernel reference). An inode that
    /// loses its last name while open lives on until its last [`Engine::release`].
    fn open(&mut self, ino: Ino) -> Result<()>;
    /// Counts a close of `ino`; the last close of an unlinked file frees it. A release of
    /// an inode that is not open does nothing.
    fn release(&mut self, c: Self::Ctx, ino: Ino) -> Result<()>;
    fn link(&mut self, c: Self::Ctx, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr>;
    fn unlink(&mut self, c: Self::Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    fn rmdir(&mut self, c: Self::Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    #[allow(clippy::too_many_arguments)]
    fn rename(
        &mut self,
        c: Self::Ctx,
        sp: Ino,
        sn: &[u8],
        dp: Ino,
        dn: &[u8],
        flags: RenameFlags,
    ) -> Result<()>;
    fn setattr(&mut self, c: Self::Ctx, ino: Ino, a: SetAttr) -> Result<Attr>;
    fn write(&mut self, c: Self::Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize>;
    /// Durable when it returns (unless the caller's stream says otherwise).
    fn fsync(&mut self, c: Self::Ctx, ino: Ino, datasync: bool) -> Result<()>;

    /// `create`: fail if it exists (EEXIST); `replace`: fail if it does not (ENODATA).
    #[allow(clippy::too_many_arguments)]
    fn setxattr(
        &mut self,
        c: Self::Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        create: bool,
        replace: bool,
    ) -> Result<()>;
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;
    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>>;
    fn removexattr(&mut self, c: Self::Ctx, ino: Ino, name: &[u8]) -> Result<()>;
}
