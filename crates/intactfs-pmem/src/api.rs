//! The pmem engine behind the one engine interface ([`intactfs_types::Engine`]): one small
//! method per call. The caller's context is its open AD-transaction (None: a legacy call,
//! committed before it returns). Every call of the interface is the engine's own (the
//! last, extended attributes, came with format 4).

use crate::layout::{RENAME_EXCHANGE, RENAME_NOREPLACE};
use crate::{PmemFs, TxId};
use intactfs_device::PmemDevice;
use intactfs_types::{
    Attr, Capabilities, DirEntry, Engine, FileType, FsError, Ino, Owner, RenameFlags, Result,
    SetAttr, StatFs,
};

type Tx = Option<TxId>;

impl<P: PmemDevice> Engine for PmemFs<P> {
    type Ctx = Tx;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ad_transactions: true,
            ..Capabilities::default()
        }
    }
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        PmemFs::getattr(self, ino)
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        PmemFs::lookup(self, parent, name)
    }
    /// Cookies are slot numbers + 1, in slot order: the entries after `cookie`.
    fn readdir(&self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        let page = PmemFs::readdir_from(self, dir, cookie, max)?;
        assert!(page.windows(2).all(|w| w[0].cookie < w[1].cookie));
        assert!(page.first().is_none_or(|e| e.cookie > cookie));
        Ok(page)
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        PmemFs::readlink(self, ino)
    }
    fn parent(&self, dir: Ino) -> Result<Ino> {
        let rec = self.inode(dir)?;
        if rec.kind != FileType::Dir {
            return Err(FsError::NotDir(format!("inode {dir}")));
        }
        if rec.nlink == 0 {
            // Removed while open: its parent field may name a directory gone since.
            return Err(FsError::NotFound(format!("directory {dir} was removed")));
        }
        assert!(rec.parent != 0, "directory {dir} has no parent");
        Ok(rec.parent as Ino)
    }
    fn statfs(&self) -> StatFs {
        PmemFs::statfs(self)
    }
    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        PmemFs::read(self, ino, off, len as u64)
    }
    fn create(&mut self, t: Tx, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        PmemFs::create(self, t, p, name, mode, o.uid, o.gid)
    }
    fn mkdir(&mut self, t: Tx, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        PmemFs::mkdir(self, t, p, name, mode, o.uid, o.gid)
    }
    fn symlink(&mut self, t: Tx, p: Ino, name: &[u8], target: &[u8], o: Owner) -> Result<Attr> {
        PmemFs::symlink(self, t, p, name, target, o.uid, o.gid)
    }
    fn mknod(
        &mut self,
        t: Tx,
        p: Ino,
        name: &[u8],
        kind: FileType,
        mode: u32,
        rdev: u32,
        o: Owner,
    ) -> Result<Attr> {
        PmemFs::mknod(self, t, p, name, kind, mode, rdev, (o.uid, o.gid))
    }
    fn open(&mut self, ino: Ino) -> Result<()> {
        PmemFs::open(self, ino)
    }
    fn release(&mut self, _: Tx, ino: Ino) -> Result<()> {
        PmemFs::release(self, ino)
    }
    fn link(&mut self, t: Tx, ino: Ino, p: Ino, name: &[u8]) -> Result<Attr> {
        PmemFs::link(self, t, ino, p, name)
    }
    fn unlink(&mut self, t: Tx, p: Ino, name: &[u8]) -> Result<()> {
        PmemFs::unlink(self, t, p, name)
    }
    fn rmdir(&mut self, t: Tx, p: Ino, name: &[u8]) -> Result<()> {
        PmemFs::rmdir(self, t, p, name)
    }
    fn rename(
        &mut self,
        t: Tx,
        sp: Ino,
        sn: &[u8],
        dp: Ino,
        dn: &[u8],
        f: RenameFlags,
    ) -> Result<()> {
        let flags = if f.noreplace { RENAME_NOREPLACE } else { 0 }
            | if f.exchange { RENAME_EXCHANGE } else { 0 };
        PmemFs::rename2(self, t, sp, sn, dp, dn, flags)
    }
    fn setattr(&mut self, t: Tx, ino: Ino, a: SetAttr) -> Result<Attr> {
        PmemFs::setattr(self, t, ino, &a)
    }
    fn write(&mut self, t: Tx, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        PmemFs::write(self, t, ino, off, data)
    }
    /// Every call is durable when it returns (a legacy call commits; a transaction's
    /// changes are durable at its commit).
    fn fsync(&mut self, _: Tx, ino: Ino, _datasync: bool) -> Result<()> {
        PmemFs::fsync(self, ino)
    }
    fn setxattr(
        &mut self,
        t: Tx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        create: bool,
        replace: bool,
    ) -> Result<()> {
        PmemFs::setxattr(self, t, ino, name, value, create, replace)
    }
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        PmemFs::getxattr(self, ino, name)
    }
    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        PmemFs::listxattr(self, ino)
    }
    fn removexattr(&mut self, t: Tx, ino: Ino, name: &[u8]) -> Result<()> {
        PmemFs::removexattr(self, t, ino, name)
    }
}
