//! `fuser::Filesystem` for the one server: each request decoded, handed to the call of the
//! same name (in [`super::namespace`], [`super::data`], [`super::xattr`]), and answered.

use super::attr::{file_attr, negative_attr, reply_statfs, time_arg, TTL};
use super::namespace::node_kind;
use super::xattr::sized;
use super::{errno, invalidate, IoctlCall, Served, Server, Who};
use fuser::{
    Errno, FileHandle, Generation, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner,
    OpenAccMode, OpenFlags, RenameFlags as FRename, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use intactfs_types::{Attr, FileType, SetAttr};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::SystemTime;

fn entry(r: Result<(Attr, Generation), Errno>, reply: ReplyEntry) {
    match r {
        Ok((a, g)) => reply.entry(&TTL, &file_attr(&a), g),
        Err(e) => reply.error(e),
    }
}

fn empty(r: Result<(), Errno>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn attr(r: Result<Attr, Errno>, reply: ReplyAttr) {
    match r {
        Ok(a) => reply.attr(&TTL, &file_attr(&a)),
        Err(e) => reply.error(e),
    }
}

fn data(r: Result<Vec<u8>, Errno>, reply: ReplyData) {
    match r {
        Ok(d) => reply.data(&d),
        Err(e) => reply.error(e),
    }
}

impl<E: Served> Server<E> {
    fn created(
        &self,
        r: Result<(Attr, Generation, FileHandle), Errno>,
        writable: bool,
        reply: ReplyCreate,
    ) {
        match r {
            Ok((a, g, fh)) => reply.created(&TTL, &file_attr(&a), g, fh, self.open_flags(writable)),
            Err(e) => reply.error(e),
        }
    }

    /// readdirplus: every entry sent is one more kernel reference (the write lock).
    fn readdirplus_call(
        &self,
        ino: INodeNo,
        offset: u64,
        reply: &mut ReplyDirectoryPlus,
    ) -> Result<(), Errno> {
        let mut st = self.lock()?;
        for (i, off, _, name) in Self::listing(st.fs_ref()?, ino.0, offset)? {
            // Gone since the listing cannot happen under the lock; skipped if it did.
            let Ok(a) = st.fs_ref()?.getattr(i) else {
                continue;
            };
            let g = st.refs.generation(i);
            if reply.add(
                INodeNo(i),
                off,
                OsStr::from_bytes(&name),
                &TTL,
                &file_attr(&a),
                g,
            ) {
                break;
            }
            // The kernel counts a lookup for every entry it received but "." and "..".
            if name != b"." && name != b".." {
                st.remember(i);
            }
        }
        Ok(())
    }

    /// A control call: refused in one place when the engine lacks it, else the engine's.
    fn ioctl_call(
        &self,
        call: &IoctlCall,
        reply: &mut Option<ReplyIoctl>,
    ) -> Result<Vec<u8>, Errno> {
        let mut st = self.lock()?;
        if let Some(e) = crate::control::refusal(call.cmd, st.fs_ref()?.capabilities()) {
            return Err(Errno::from_i32(e));
        }
        let r = E::ioctl(&self.driver, &mut st, call, reply);
        let out = r?;
        E::finish(&self.driver, st)?;
        Ok(out)
    }
}

impl<E: Served> fuser::Filesystem for Server<E> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(E::MAX_WRITE);
        let _ = config.set_max_readahead(E::MAX_WRITE);
        // We clear set-user-id/set-group-id ourselves (`kill_suid`): the kernel then no
        // longer asks for `security.capability` before every write (one round trip each),
        // and clears set-group-id as local file systems do. Lookups and readdir of one
        // directory may run in parallel: the engine lock orders them.
        // READDIRPLUS: a listing answers the lookups of its entries too (`ls -l`, `git add`
        // stat every entry after reading the directory); AUTO lets the kernel use it only
        // where that pays.
        let mut want = vec![InitFlags::FUSE_PARALLEL_DIROPS];
        if self.caps.readdirplus {
            want.push(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        }
        if self.caps.killpriv {
            want.push(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        }
        for f in want {
            if config.add_capabilities(f).is_err() {
                eprintln!("intactfs: the kernel does not offer {f:?}; going on without it");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup_call(parent.0, name.as_bytes()) {
            // A negative entry (node 0) the kernel may cache for TTL: every create goes
            // through the kernel, which replaces it, and repeated stats of a missing file
            // (SQLite's journal, git's lock files) stop costing a round trip each.
            Err(e) if e == Errno::ENOENT => reply.entry(&TTL, &negative_attr(), Generation(0)),
            r => entry(r, reply),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.forget_call(ino.0, nlookup)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        attr(
            (|| self.read()?.fs_ref()?.getattr(ino.0).map_err(|e| errno(&e)))(),
            reply,
        )
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: time_arg(atime),
            mtime: time_arg(mtime),
        };
        attr(self.setattr_call(&Who::of(req), ino.0, a), reply)
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        data(
            (|| {
                self.read()?
                    .fs_ref()?
                    .readlink(ino.0)
                    .map_err(|e| errno(&e))
            })(),
            reply,
        )
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        match node_kind(mode) {
            Some(k) => entry(
                self.make_call(&Who::of(req), (parent.0, name.as_bytes()), k, (mode, rdev)),
                reply,
            ),
            None => reply.error(Errno::EINVAL),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        entry(
            self.make_call(
                &Who::of(req),
                (parent.0, name.as_bytes()),
                FileType::Dir,
                (mode, 0),
            ),
            reply,
        )
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.remove_call(&Who::of(req), parent.0, name.as_bytes(), false),
            reply,
        )
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.remove_call(&Who::of(req), parent.0, name.as_bytes(), true),
            reply,
        )
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        entry(
            self.symlink_call(&Who::of(req), parent.0, link_name.as_bytes(), target),
            reply,
        )
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: FRename,
        reply: ReplyEmpty,
    ) {
        let (from, to) = (
            (parent.0, name.as_bytes()),
            (newparent.0, newname.as_bytes()),
        );
        empty(self.rename_call(&Who::of(req), from, to, flags), reply)
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        entry(
            self.link_call(&Who::of(req), ino.0, newparent.0, newname.as_bytes()),
            reply,
        )
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        match self.open_call(&Who::of(req), ino.0, writable) {
            Ok(fh) => reply.opened(fh, self.open_flags(writable)),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.closed(ino.0, fh.0, true, None);
        reply.ok()
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        data(self.read_call(ino.0, offset, size as usize), reply)
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill = wf.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        let (r, pending) = self.write_call(&Who::of(req), ino.0, fh.0, offset, data, kill);
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
        // Commit work the write left: done after the answer, without the lock.
        E::write_pending(&self.driver, pending);
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) of the descriptor that started an F2FS atomic write: aborted here, while
        // the closing caller waits, so that it sees the old content once close returns.
        // Only the starting process's close: a forked child's copy closes at its exit.
        self.closed(ino.0, fh.0, false, Some(crate::procs::tgid_of(req.pid())));
        reply.ok()
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(self.fsync_call(&Who::of(req), ino.0, datasync), reply)
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply)
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = (|| Self::listing(self.read()?.fs_ref()?, ino.0, offset))();
        match r {
            Ok(entries) => {
                for (i, off, k, name) in entries {
                    if reply.add(INodeNo(i), off, k, OsStr::from_bytes(&name)) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        match self.readdirplus_call(ino, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply_statfs(reply, (|| Ok(self.read()?.fs_ref()?.statfs()))())
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        empty(
            self.setxattr_call(&Who::of(req), ino.0, name.as_bytes(), value, flags),
            reply,
        )
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        sized(self.getxattr_call(ino.0, name.as_bytes()), size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        sized(self.listxattr_call(ino.0), size, reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            self.removexattr_call(&Who::of(req), ino.0, name.as_bytes()),
            reply,
        )
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let writable = OpenFlags(flags).acc_mode() != OpenAccMode::O_RDONLY;
        let r = self.create_call(&Who::of(req), (parent.0, name.as_bytes()), mode, writable);
        self.created(r, writable, reply)
    }

    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        self.created(
            self.tmpfile_call(&Who::of(req), parent.0, mode),
            true,
            reply,
        )
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let mut reply = Some(reply);
        let call = IoctlCall {
            who: Who::of(req),
            ino: ino.0,
            fh: fh.0,
            cmd,
            in_data,
        };
        let r = self.ioctl_call(&call, &mut reply);
        // After the lock, before the answer: the caller sees the old state once an abort
        // returns.
        invalidate(self.lock().ok().and_then(|mut st| st.take_invalidations()));
        let Some(reply) = reply else { return };
        match r {
            Ok(d) => reply.ioctl(0, &d),
            Err(e) => reply.error(e),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        match self.seek_call(ino.0, offset, whence) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        empty(
            self.fallocate_call(&Who::of(req), ino.0, (offset, length), mode),
            reply,
        )
    }
}
