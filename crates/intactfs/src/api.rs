//! The block engine behind the one engine interface ([`intactfs_types::Engine`]): one
//! small method per call, each the inherent call of the same name. The caller's context is
//! its stream (ccfs); every seed interface but AD-transactions is here.

use crate::engine::Fs;
use crate::meta::{Body, NewKind};
use crate::streams::StreamId;
use intactfs_device::BlockDevice;
use intactfs_types::{
    Attr, Capabilities, DirEntry, Engine, FileType, FsError, Ino, Owner, RenameFlags, Result,
    SetAttr, StatFs,
};

/// What `mknod` of `kind` creates (a directory is mkdir's).
fn node_kind(kind: FileType, rdev: u32) -> Result<NewKind> {
    kind.check_mknod()?;
    Ok(match kind {
        FileType::File => NewKind::File,
        FileType::Fifo => NewKind::Fifo,
        FileType::Socket => NewKind::Socket,
        FileType::CharDev => NewKind::CharDev(rdev),
        FileType::BlockDev => NewKind::BlockDev(rdev),
        FileType::Dir | FileType::Symlink => unreachable!("refused by check_mknod"),
    })
}

impl<D: BlockDevice> Engine for Fs<D> {
    type Ctx = StreamId;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: true,
            osync_dsync: true,
            atomic_regions: true,
            ad_transactions: false,
        }
    }
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        Fs::getattr(self, ino)
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        Fs::lookup(self, parent, name)
    }
    fn readdir(&self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        Fs::readdir(self, dir, cookie, max)
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        Fs::readlink(self, ino)
    }
    fn parent(&self, dir: Ino) -> Result<Ino> {
        match self.live_meta().get(dir).map(|n| &n.body) {
            Some(Body::Dir { parent, .. }) => Ok(*parent),
            Some(_) => Err(FsError::NotDir(format!("inode {dir}"))),
            None => Err(FsError::NotFound(format!("inode {dir}"))),
        }
    }
    fn statfs(&self) -> StatFs {
        Fs::statfs(self)
    }
    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        Fs::read(self, ino, off, len)
    }
    fn create(&mut self, s: StreamId, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        Fs::create(self, s, p, name, NewKind::File, mode, o)
    }
    fn mkdir(&mut self, s: StreamId, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        Fs::mkdir(self, s, p, name, mode, o)
    }
    fn symlink(&mut self, s: StreamId, p: Ino, name: &[u8], t: &[u8], o: Owner) -> Result<Attr> {
        Fs::symlink(self, s, p, name, t, o)
    }
    fn mknod(
        &mut self,
        s: StreamId,
        p: Ino,
        name: &[u8],
        kind: FileType,
        mode: u32,
        rdev: u32,
        o: Owner,
    ) -> Result<Attr> {
        Fs::create(self, s, p, name, node_kind(kind, rdev)?, mode, o)
    }
    fn open(&mut self, ino: Ino) -> Result<()> {
        Fs::open(self, ino)
    }
    fn release(&mut self, s: StreamId, ino: Ino) -> Result<()> {
        Fs::release(self, s, ino)
    }
    fn link(&mut self, s: StreamId, ino: Ino, p: Ino, name: &[u8]) -> Result<Attr> {
        Fs::link(self, s, ino, p, name)
    }
    fn unlink(&mut self, s: StreamId, p: Ino, name: &[u8]) -> Result<()> {
        Fs::unlink(self, s, p, name)
    }
    fn rmdir(&mut self, s: StreamId, p: Ino, name: &[u8]) -> Result<()> {
        Fs::rmdir(self, s, p, name)
    }
    fn rename(
        &mut self,
        s: StreamId,
        sp: Ino,
        sn: &[u8],
        dp: Ino,
        dn: &[u8],
        f: RenameFlags,
    ) -> Result<()> {
        Fs::rename(self, s, sp, sn, dp, dn, f)
    }
    fn setattr(&mut self, s: StreamId, ino: Ino, a: SetAttr) -> Result<Attr> {
        Fs::setattr(self, s, ino, a)
    }
    fn write(&mut self, s: StreamId, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        Fs::write(self, s, ino, off, data)
    }
    fn fsync(&mut self, s: StreamId, ino: Ino, datasync: bool) -> Result<()> {
        Fs::fsync(self, s, ino, datasync)
    }
    fn setxattr(
        &mut self,
        s: StreamId,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        create: bool,
        replace: bool,
    ) -> Result<()> {
        Fs::setxattr(self, s, ino, name, value, create, replace)
    }
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        Fs::getxattr(self, ino, name)
    }
    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Fs::listxattr(self, ino)
    }
    fn removexattr(&mut self, s: StreamId, ino: Ino, name: &[u8]) -> Result<()> {
        Fs::removexattr(self, s, ino, name)
    }
}
