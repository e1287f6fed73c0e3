//! Attributes and data: setattr, open and close, read, write, fsync, and the calls only
//! some engines have (O_TMPFILE, SEEK_DATA/SEEK_HOLE, fallocate).

use super::namespace::S_ISGID;
use super::{errno, invalidate, Locked, Served, Server, Who};
use fuser::{Errno, FileHandle, FopenFlags, Generation};
use intactfs_types::{Attr, FileType, FsError, Ino, SetAttr};

/// Clears set-user-id, and set-group-id if the file is group-executable or the caller is
/// neither in the file's group nor root (the kernel's `setattr_should_drop_sgid`), as a
/// write, truncate or chown does.
fn kill_suid<E: Served>(
    st: &mut Locked<'_, E>,
    c: E::Ctx,
    ino: Ino,
    who: &Who,
) -> Result<Attr, Errno> {
    let a = st.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?;
    let mut kill = 0o4000;
    if a.mode & 0o010 != 0 || (who.uid != 0 && !crate::procs::in_group(who.pid, who.gid, a.gid)) {
        kill |= S_ISGID;
    }
    if a.mode & kill == 0 {
        return Ok(a);
    }
    let set = SetAttr {
        mode: Some(a.mode & 0o7777 & !kill),
        ..SetAttr::default()
    };
    st.fs()?.setattr(c, ino, set).map_err(|e| errno(&e))
}

impl<E: Served> Server<E> {
    pub(crate) fn setattr_call(&self, who: &Who, ino: Ino, mut a: SetAttr) -> Result<Attr, Errno> {
        let (mut st, c) = self.begin(who, &[ino])?;
        let (mode, uid, gid, size) = (a.mode, a.uid, a.gid, a.size);
        let bare = a == SetAttr::default();
        if bare {
            // chown(f, -1, -1) reaches us with no field set (the kernel sends ctime only
            // with a writeback cache); POSIX still wants ctime marked: set the owner to
            // itself, which the engine logs with a new ctime.
            a.uid = Some(st.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?.uid);
        }
        let r = st.fs()?.setattr(c, ino, a).map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[ino], &[]);
        // With FUSE_HANDLE_KILLPRIV_V2 the kernel leaves clearing set-user-id and
        // set-group-id on truncate and chown to us (it flags them with FATTR_KILL_SUIDGID,
        // which fuser 0.18 does not pass on): chown of a non-directory always clears
        // them; a truncate does when the caller lacks CAP_FSETID (uid 0 stands for it).
        let chown = (uid.is_some() || gid.is_some() || bare) && r.kind != FileType::Dir;
        if mode.is_none() && (chown || (size.is_some() && who.uid != 0)) {
            return kill_suid(&mut st, c, ino, who);
        }
        Ok(r)
    }

    /// What an open (or create) answers: the page cache kept where the engine allows; for
    /// a read-only descriptor no FUSE_FLUSH at close, since closing it has nothing to write
    /// or abort (the F2FS atomic write a close aborts needs a writable descriptor).
    pub(crate) fn open_flags(&self, writable: bool) -> FopenFlags {
        let mut f = FopenFlags::empty();
        if E::KEEP_CACHE {
            f |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        if !writable && self.caps.noflush_readonly {
            f |= FopenFlags::FOPEN_NOFLUSH;
        }
        f
    }

    /// The stream a handle opened by `who` writes in (shared-mapping write-back, pid 0).
    fn opener_stream(st: &super::State<E>, who: &Who) -> u64 {
        if st.fs.as_ref().is_some_and(|fs| fs.capabilities().streams) {
            st.procs().stream_of(who.pid)
        } else {
            0
        }
    }

    pub(crate) fn open_call(
        &self,
        who: &Who,
        ino: Ino,
        writable: bool,
    ) -> Result<FileHandle, Errno> {
        let st = self.read()?;
        st.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?;
        Ok(st.handles.open(Self::opener_stream(&st, who), writable))
    }

    pub(crate) fn create_call(
        &self,
        who: &Who,
        (parent, name): (Ino, &[u8]),
        mode: u32,
        writable: bool,
    ) -> Result<(Attr, Generation, FileHandle), Errno> {
        let mut st = self.lock()?;
        let (a, g) = self.make(&mut st, who, (parent, name), FileType::File, (mode, 0))?;
        let fh = st.handles.open(Self::opener_stream(&st, who), writable);
        Ok((a, g, fh))
    }

    /// O_TMPFILE (FUSE_TMPFILE: the vendored fuser's patch, vendor/fuser/PATCHES.md).
    pub(crate) fn tmpfile_call(
        &self,
        who: &Who,
        parent: Ino,
        mode: u32,
    ) -> Result<(Attr, Generation, FileHandle), Errno> {
        let (mut st, c) = self.begin(who, &[parent])?;
        let (owner, _) = Self::owner(&st, who, parent)?;
        let a = st
            .fs()?
            .tmpfile(c, parent, mode & 0o7777, owner)
            .map_err(|e| errno(&e))?;
        // The engine opened it already: that open is the kernel's first reference.
        st.remember_opened(a.ino);
        let g = st.refs.generation(a.ino);
        // O_TMPFILE needs O_WRONLY or O_RDWR.
        let fh = st.handles.open(Self::opener_stream(&st, who), true);
        Ok((a, g, fh))
    }

    /// A close (FLUSH, `closer` its process) or the handle's end (RELEASE, `forget_handle`):
    /// ends what the handle started (an F2FS atomic write) and tells the kernel what
    /// aborted changes undid; the write lock only when there is such work.
    pub(crate) fn closed(&self, ino: Ino, fh: u64, forget_handle: bool, closer: Option<u32>) {
        let work = self.read().map(|st| {
            if forget_handle {
                st.handles.close(fh);
            }
            !st.invalidate.is_empty() || E::close_has_work(&st, ino, fh, closer)
        });
        if work.unwrap_or(true) {
            invalidate(self.lock().ok().and_then(|mut st| {
                E::closed(&mut st, ino, fh, closer);
                st.take_invalidations()
            }));
        }
    }

    pub(crate) fn read_call(&self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, Errno> {
        {
            let st = self.read()?;
            if let Some(r) = st.fs_ref()?.read_shared(ino, off, len) {
                return r.map_err(|e| errno(&e));
            }
        }
        self.lock()?
            .fs()?
            .read(ino, off, len)
            .map_err(|e| errno(&e))
    }

    /// A write through handle `fh`; `kill`: the kernel asks to clear set-user-id.
    pub(crate) fn write_call(
        &self,
        who: &Who,
        ino: Ino,
        fh: u64,
        off: u64,
        data: &[u8],
        kill: bool,
    ) -> (Result<usize, Errno>, E::Pending) {
        let r = (|| {
            let mut st = self.lock()?;
            let c = E::ctx(&st, who, Some(fh), &[ino])?;
            let n = match st.fs()?.write(c, ino, off, data) {
                Ok(n) => n,
                Err(e) => return Err(E::write_errno(&st, c, &e)),
            };
            E::changed(&mut st, c, &[ino], &[]);
            if kill {
                kill_suid(&mut st, c, ino, who)?;
            }
            Ok((n, E::write_done(&self.driver, st)?))
        })();
        match r {
            Ok((n, p)) => (Ok(n), p),
            Err(e) => (Err(e), E::Pending::default()),
        }
    }

    pub(crate) fn fsync_call(&self, who: &Who, ino: Ino, datasync: bool) -> Result<(), Errno> {
        let (st, c) = self.begin(who, &[ino])?;
        E::sync_file(&self.driver, st, c, ino, datasync)
    }

    pub(crate) fn seek_call(&self, ino: Ino, offset: i64, whence: i32) -> Result<u64, Errno> {
        // The kernel handles SEEK_SET/CUR/END itself; only holes need the file system.
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return Err(Errno::EINVAL),
        };
        let off = u64::try_from(offset).map_err(|_| Errno::ENXIO)?;
        let st = self.read()?;
        match st.fs_ref()?.seek_data(ino, off, data) {
            Ok(o) => Ok(o),
            // An engine without holes: ENOSYS, and the kernel answers SEEK_DATA/SEEK_HOLE
            // itself from then on (the whole file is data), as POSIX allows.
            Err(FsError::Unsupported(_)) => Err(Errno::ENOSYS),
            Err(e) => Err(errno(&e)),
        }
    }

    pub(crate) fn fallocate_call(
        &self,
        who: &Who,
        ino: Ino,
        (off, len): (u64, u64),
        mode: i32,
    ) -> Result<(), Errno> {
        // Linux requires KEEP_SIZE with PUNCH_HOLE (the kernel refuses it alone).
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        if ![0, libc::FALLOC_FL_KEEP_SIZE, punch].contains(&mode) {
            return Err(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let (mut st, c) = self.begin(who, &[ino])?;
        let fs = st.fs()?;
        let done = if mode == punch {
            fs.punch_hole(c, ino, off, len)
        } else {
            fs.allocate(c, ino, off, len, mode == libc::FALLOC_FL_KEEP_SIZE)
        };
        done.map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[ino], &[]);
        Ok(())
    }
}
