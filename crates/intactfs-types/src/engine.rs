//! The one engine interface: the POSIX calls a FUSE server needs, and what else an engine
//! can do (its capabilities), so that one server can serve any engine and answer the
//! control calls an engine lacks from one place.
//!
//! The interface is four traits by concern over one base, and [`Engine`], every one of
//! them (implemented for any type that has the four): [`EngineBase`] (the caller's
//! context, capabilities, attributes, statfs), [`Namespace`] (names: lookup, readdir,
//! create, link, unlink, rename, ...), [`FileData`] (open files and their bytes and
//! attributes) and [`ExtAttrs`] (extended attributes). Each engine implements each trait
//! in the module that holds that code: the traits are its call surface, not a layer over
//! another one. A caller with a concrete engine brings the calls into scope with
//! `use intactfs_types::prelude::*`; a caller generic over `E: Engine` has them all.
//!
//! Contract: every method answers with the shared vocabulary of this crate. A call the
//! engine does not implement answers [`FsError::Unsupported`](crate::FsError) (EOPNOTSUPP),
//! never EINVAL: a program must be able to tell "not here" from "wrong argument". `Ctx` is
//! what an engine needs to know of the caller to place a change: the block engine's stream
//! (ccfs), the pmem engine's open AD-transaction (None: a legacy call, its own transaction).

use crate::{Attr, DirEntry, FsError, Ino, MknodKind, Owner, RenameFlags, Result, SetAttr, StatFs};

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

/// What a setxattr may find: setxattr(2)'s XATTR_CREATE and XATTR_REPLACE flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XattrMode {
    /// No flag: creates or replaces.
    #[default]
    Any,
    /// XATTR_CREATE: EEXIST when the attribute exists.
    Create,
    /// XATTR_REPLACE: ENODATA when it does not.
    Replace,
    /// Both flags: fails either way (EEXIST when it exists, ENODATA when not), as on
    /// Linux's file systems.
    Both,
}

impl XattrMode {
    /// The mode of setxattr(2)'s flags.
    pub fn from_flags(create: bool, replace: bool) -> XattrMode {
        match (create, replace) {
            (false, false) => XattrMode::Any,
            (true, false) => XattrMode::Create,
            (false, true) => XattrMode::Replace,
            (true, true) => XattrMode::Both,
        }
    }

    /// Whether a set in this mode may go ahead where the attribute `exists` or not.
    pub fn check(self, exists: bool) -> Result<()> {
        match (self, exists) {
            (XattrMode::Create | XattrMode::Both, true) => Err(FsError::Exists(String::new())),
            (XattrMode::Replace | XattrMode::Both, false) => Err(FsError::NoData),
            _ => Ok(()),
        }
    }
}

/// What every engine has: the caller's context, its capabilities, and the attributes of
/// an inode and of the whole file system.
pub trait EngineBase {
    /// Where a change goes: the caller's stream, or transaction (see the module comment).
    type Ctx: Copy;

    fn capabilities(&self) -> Capabilities;
    fn getattr(&self, ino: Ino) -> Result<Attr>;
    fn statfs(&self) -> StatFs;
}

/// Names: finding them, listing them, making and removing them.
pub trait Namespace: EngineBase {
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr>;
    /// Up to `max` entries after `cookie` (0: from the start), each with its own cookie.
    fn readdir(&self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>>;
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;
    /// The parent of directory `dir` (the root's is the root): what ".." names.
    fn parent(&self, dir: Ino) -> Result<Ino>;

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
    /// A symbolic link to `target` (mode 0o777); EINVAL for an empty target or one longer
    /// than [`SYMLINK_MAX`](crate::SYMLINK_MAX).
    fn symlink(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        o: Owner,
    ) -> Result<Attr>;
    /// A special file (FIFO, socket, character or block device) or an empty regular file.
    fn mknod(
        &mut self,
        c: Self::Ctx,
        parent: Ino,
        name: &[u8],
        kind: MknodKind,
        mode: u32,
        o: Owner,
    ) -> Result<Attr>;
    /// A new name `name` in `parent` for `ino` (EPERM for a directory).
    fn link(&mut self, c: Self::Ctx, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr>;
    fn unlink(&mut self, c: Self::Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    fn rmdir(&mut self, c: Self::Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    /// renameat2(2) of `sn` in `sp` to `dn` in `dp`.
    fn rename(
        &mut self,
        c: Self::Ctx,
        sp: Ino,
        sn: &[u8],
        dp: Ino,
        dn: &[u8],
        flags: RenameFlags,
    ) -> Result<()>;
}

/// Open files: open counts, bytes and the attributes a file's owner changes.
pub trait FileData: EngineBase {
    /// Counts an open of `ino` (the FUSE server: one per kernel reference). An inode that
    /// loses its last name while open lives on until its last [`FileData::release`].
    fn open(&mut self, ino: Ino) -> Result<()>;
    /// Counts a close of `ino`; the last close of an unlinked file frees it. A release of
    /// an inode that is not open does nothing.
    fn release(&mut self, c: Self::Ctx, ino: Ino) -> Result<()>;
    /// Up to `len` bytes at `off` (fewer at the end of the file).
    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>>;
    fn write(&mut self, c: Self::Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize>;
    /// Changes the `Some` fields; a size truncates or extends (an extension reads as zeros).
    fn setattr(&mut self, c: Self::Ctx, ino: Ino, a: SetAttr) -> Result<Attr>;
    /// Durable when it returns (unless the caller's stream says otherwise).
    fn fsync(&mut self, c: Self::Ctx, ino: Ino, datasync: bool) -> Result<()>;
}

/// Extended attributes.
pub trait ExtAttrs: EngineBase {
    /// Sets attribute `name` to `value`, as `mode` allows.
    fn setxattr(
        &mut self,
        c: Self::Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        mode: XattrMode,
    ) -> Result<()>;
    /// ENODATA when `ino` has no attribute `name`.
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;
    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>>;
    /// ENODATA when `ino` has no attribute `name`.
    fn removexattr(&mut self, c: Self::Ctx, ino: Ino, name: &[u8]) -> Result<()>;
}

/// The POSIX calls of an intactfs engine (what the FUSE server needs of it): all four
/// traits, implemented for every type that has them.
pub trait Engine: Namespace + FileData + ExtAttrs {}

impl<T: Namespace + FileData + ExtAttrs> Engine for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_modes_are_setxattrs_flags() {
        let errno = |m: XattrMode, exists| m.check(exists).err().map_or(0, |e| e.errno());
        assert_eq!(XattrMode::from_flags(false, false), XattrMode::Any);
        assert_eq!(XattrMode::from_flags(true, true), XattrMode::Both);
        let want = [(XattrMode::Any, 0, 0), (XattrMode::Create, 17, 0)];
        let want = want
            .into_iter()
            .chain([(XattrMode::Replace, 0, 61), (XattrMode::Both, 17, 61)]);
        for (m, exists, missing) in want {
            assert_eq!(
                (errno(m, true), errno(m, false)),
                (exists, missing),
                "{m:?}"
            );
        }
    }
}
