//! `fuser::Filesystem` over the engine: each request resolves its stream from the calling
//! process, locks the engine, and maps the engine's answer (or errno) back.

use crate::commit::{CommitState, Committer};
use crate::control::{
    self, DurableArg, StreamArg, DURABLE_WAIT, FLAGS_ALL, FLAG_FSYNC_AS_OSYNC, FLAG_IGNORE_FSYNC,
};
use crate::procs::ProcTable;
use fuser::{
    Errno, FileAttr, FileHandle, FileType as FType, FopenFlags, Generation, INodeNo, InitFlags,
    IoctlFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags as FRename, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use intactfs::meta::Body;
use intactfs::{
    Attr, FileType, Fs, FsError, Ino, NewKind, Owner, RenameFlags, SetAttr, StreamFlags, StreamId,
    Time, BLOCK, ROOT,
};
use intactfs_device::ImageDevice;
use intactfs_types::{Engine, StatFs};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may cache attributes and entries: every change goes through the
/// kernel, which updates its caches itself, so this only bounds staleness after a crash.
pub const TTL: Duration = Duration::from_secs(1);
/// Largest write request (the kernel's default page limit is 256 pages).
pub const MAX_WRITE: u32 = 1 << 20;

/// How fsync behaves on this mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncMode {
    /// fsync/fdatasync commit the caller's stream durably (unless the stream ignores fsync).
    #[default]
    Durable,
    /// fsync/fdatasync return at once in every stream; streamsync and sync stay durable.
    Ignore,
    /// fsync/fdatasync are OptFS osync in every stream (ordered now, durable within the
    /// durability timeout); dsync, streamsync and sync stay durable.
    Osync,
}

/// The engine and the kernel's references to its inodes, behind one lock.
pub struct State {
    pub fs: Option<Fs<ImageDevice>>,
    /// Kernel lookup counts. An inode the kernel knows is kept open in the engine, so an
    /// unlinked file lives (and its number is not reused) until the kernel forgets it.
    /// (Behind its own mutex: a lookup of an inode the kernel already knows only counts
    /// one more, under the engine's read lock.)
    lookups: Mutex<HashMap<Ino, u64>>,
    /// (Own mutexes for this, the handles and the next handle number: open, release and
    /// flush need only the engine's read lock.)
    procs: Mutex<ProcTable>,
    /// Open file handle → the opener's stream, for writes the kernel sends on its own
    /// behalf (pid 0: write-back of shared mappings), and whether it was opened for writing.
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: std::sync::atomic::AtomicU64,
    /// First engine failure that makes further changes unsafe, for the log.
    pub failure: Option<String>,
    /// DURABLE ioctls waiting for their ticket (answered by [`State::notify`]).
    waiters: Vec<(u64, ReplyIoctl)>,
    /// When the oldest commit not yet flushed was written (the durability timeout runs
    /// from here).
    pub unflushed_since: Option<std::time::Instant>,
    /// Open atomic regions of process groups: region → who opened it.
    regions: HashMap<StreamId, RegionOwner>,
    /// F2FS atomic writes: file → (its region, the handle that started it, the process
    /// that started it: only its FLUSH of the handle ends it, see [`crate::procs::closer_ends`]).
    f2fs: HashMap<Ino, (StreamId, u64, u32)>,
    /// Tells the kernel to drop cached pages and entries an aborted region changed.
    pub notifier: Option<fuser::Notifier>,
    /// Aborted regions whose changes the kernel has not yet been told to forget.
    invalidate: Vec<intactfs::Aborted>,
}

/// Sends the invalidations of [`State::take_invalidations`] (without the lock held).
pub fn invalidate(pending: Option<(fuser::Notifier, Vec<intactfs::Aborted>)>) {
    let Some((n, list)) = pending else { return };
    for undone in list {
        for i in undone.inodes {
            let _ = n.inval_inode(INodeNo(i), 0, 0);
        }
        for (p, name) in undone.entries {
            let _ = n.inval_entry(INodeNo(p), OsStr::from_bytes(&name));
        }
    }
}

/// The process that began a region, and the stream it had before.
struct RegionOwner {
    tgid: u32,
    start: u64,
    prev: Option<crate::procs::Explicit>,
}

pub struct IntactFuse {
    pub state: Arc<RwLock<State>>,
    pub commits: Committer<State>,
    fsync: FsyncMode,
    /// Serve extended attributes. Off, the daemon answers ENOSYS once and the kernel stops
    /// asking: without FUSE_HANDLE_KILLPRIV_V2 (not in fuser 0.18) the kernel otherwise
    /// asks for `security.capability` before every write, one more round trip each.
    xattr: bool,
    /// Ask for FUSE_HANDLE_KILLPRIV_V2 (and clear set-user-id ourselves).
    caps: Caps,
}

pub(crate) fn errno(e: &FsError) -> Errno {
    // A failed device write or a broken invariant (which poisons the mount): the log
    // says why, since the caller sees only EIO. Later calls' EIO (Corrupt) name it again.
    if matches!(
        e,
        FsError::Internal(_) | FsError::Device(_) | FsError::Pmem(_)
    ) {
        eprintln!("intactfs: {e}");
    }
    Errno::from_i32(e.errno())
}

fn to_system(t: Time) -> SystemTime {
    system_time(t.sec, t.nsec)
}

/// Seconds and nanoseconds since the epoch (seconds may be negative) as a `SystemTime`
/// (the shape of `intactfs_types::Time`).
pub(crate) fn system_time(sec: i64, nsec: u32) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

/// The inverse of [`system_time`]: nanoseconds always in 0..1e9.
pub(crate) fn split_system(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            (sec, nsec)
        }
    }
}

pub(crate) fn kind(k: FileType) -> FType {
    match k {
        FileType::File => FType::RegularFile,
        FileType::Dir => FType::Directory,
        FileType::Symlink => FType::Symlink,
        FileType::Fifo => FType::NamedPipe,
        FileType::Socket => FType::Socket,
        FileType::CharDev => FType::CharDevice,
        FileType::BlockDev => FType::BlockDevice,
    }
}

pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.ctime),
        kind: kind(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLOCK as u32,
        flags: 0,
    }
}

/// Answers statfs with an engine's figures (both servers).
pub(crate) fn reply_statfs(reply: ReplyStatfs, r: Result<StatFs, Errno>) {
    match r {
        Ok(s) => reply.statfs(
            s.blocks,
            s.free_blocks,
            s.free_blocks,
            s.files,
            s.free_files,
            s.block_size as u32,
            s.name_max as u32,
            s.block_size as u32,
        ),
        Err(e) => reply.error(e),
    }
}

/// The attributes of a negative entry: only node id 0 matters to the kernel.
pub fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLOCK as u32,
        flags: 0,
    }
}

const S_IFMT: u32 = 0o170000;
const S_ISGID: u32 = 0o2000;

impl State {
    fn new_handle(&self, stream: StreamId, writable: bool) -> FileHandle {
        let fh = self
            .next_fh
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, Handle { stream, writable });
        FileHandle(fh)
    }

    fn handle_stream(&self, fh: u64) -> Option<StreamId> {
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh)
            .map(|h| h.stream)
    }

    /// Whether handle `fh` was opened for writing. Every open and create records its
    /// handle, so an unknown one (a directory's, or one already released) is not: control
    /// calls that can undo writes need the right to make them (docs/fs-api.md, "Who may
    /// call what").
    fn handle_writable(&self, fh: u64) -> bool {
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh)
            .is_some_and(|h| h.writable)
    }

    fn procs(&self) -> std::sync::MutexGuard<'_, ProcTable> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether closing handle `fh` of `ino` ends an F2FS atomic write, or aborted regions
    /// wait for invalidation: only then does a flush or release need the write lock.
    fn close_has_work(&self, ino: Ino, fh: u64, closer: Option<u32>) -> bool {
        self.f2fs
            .get(&ino)
            .is_some_and(|f| f.1 == fh && crate::procs::closer_ends(closer, f.2))
            || !self.invalidate.is_empty()
    }

    fn fs(&mut self) -> Result<&mut Fs<ImageDevice>, Errno> {
        self.fs.as_mut().ok_or(Errno::EIO)
    }

    fn fs_ref(&self) -> Result<&Fs<ImageDevice>, Errno> {
        self.fs.as_ref().ok_or(Errno::EIO)
    }

    /// One more kernel reference to an inode it already holds (under the read lock);
    /// false if it holds none (the engine must open it: [`Self::remember`]).
    fn remember_known(&self, ino: Ino) -> bool {
        if ino == ROOT {
            return true;
        }
        let mut l = self.lookups.lock().unwrap_or_else(|p| p.into_inner());
        match l.get_mut(&ino) {
            Some(c) if *c > 0 => {
                *c += 1;
                true
            }
            _ => false,
        }
    }

    /// After anything that may have written or flushed commits: start the durability
    /// clock at the first unflushed commit, and answer the DURABLE waiters whose ticket
    /// is now durable.
    pub fn notify(&mut self) {
        let Some(fs) = self.fs.as_ref() else { return };
        let (durable, unflushed) = (fs.durable_ticket(), fs.has_unflushed());
        if !unflushed {
            self.unflushed_since = None;
        } else if self.unflushed_since.is_none() {
            self.unflushed_since = Some(std::time::Instant::now());
        }
        if self.waiters.iter().any(|w| w.0 <= durable) {
            let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
                .into_iter()
                .partition(|w| w.0 <= durable);
            self.waiters = wait;
            for (_, reply) in ready {
                reply.ioctl(
                    0,
                    &DurableArg {
                        ticket: durable,
                        flags: 0,
                    }
                    .encode(),
                );
            }
        }
    }

    /// Regions whose process exited without committing are aborted (CFS: a region ends
    /// with its commit; a program that dies in one never made its changes).
    pub fn reap_regions(&mut self) {
        let gone: Vec<StreamId> = self
            .regions
            .iter()
            .filter(|(_, o)| !crate::procs::alive(o.tgid, o.start))
            .map(|(r, _)| *r)
            .collect();
        for r in gone {
            let o = self.regions.remove(&r).expect("listed above");
            self.procs().leave(o.tgid, o.start, o.prev);
            if self.fs.is_some() {
                if let Err(e) = self.abort_region(r) {
                    eprintln!(
                        "intactfs: aborting the region of exited process {}: {e:?}",
                        o.tgid
                    );
                }
            }
        }
    }

    /// Aborts region `r` and has the kernel forget what it cached of the region's changes
    /// (from another thread: a notification sent while a request of the same inode is in
    /// the kernel could wait for that request).
    fn abort_region(&mut self, r: StreamId) -> Result<(), Errno> {
        let undone = self.fs()?.region_abort(r).map_err(|e| errno(&e))?;
        self.invalidate.push(undone);
        Ok(())
    }

    /// What the kernel must forget of aborted regions, with the notifier to tell it:
    /// sent by the request that aborted before it answers (so that the caller sees the old
    /// state as soon as the call returns), but after the engine's lock is released (the
    /// kernel may wait for a request of the same inode, which needs the lock).
    pub fn take_invalidations(&mut self) -> Option<(fuser::Notifier, Vec<intactfs::Aborted>)> {
        if self.invalidate.is_empty() {
            return None;
        }
        let list = std::mem::take(&mut self.invalidate);
        self.notifier.clone().map(|n| (n, list))
    }

    /// Aborts the F2FS atomic write that handle `fh` started on `ino`, if any.
    fn end_f2fs_on_close(&mut self, ino: Ino, fh: u64, closer: Option<u32>) {
        if self
            .f2fs
            .get(&ino)
            .is_some_and(|f| f.1 == fh && crate::procs::closer_ends(closer, f.2))
        {
            let (r, ..) = self.f2fs.remove(&ino).expect("checked");
            if let Err(e) = self.abort_region(r) {
                eprintln!("intactfs: aborting the atomic write of inode {ino}: {e:?}");
            }
        }
    }

    /// The region the caller is in, with its owner's entry.
    fn caller_region(&mut self, s: StreamId) -> Result<StreamId, Errno> {
        if self.regions.contains_key(&s) {
            Ok(s)
        } else {
            // "no atomic region is open" (libintact/Python say so for EINVAL here).
            Err(Errno::EINVAL)
        }
    }

    /// Ends the caller's process-group region: commit or abort. Only the process that
    /// began it and its descendants may (EPERM): the stream lookup already says so, and
    /// this checks it again against the process tree, since a cached answer could outlive
    /// a reused thread id.
    fn end_region(&mut self, tid: u32, s: StreamId, commit: bool) -> Result<(), Errno> {
        let r = self.caller_region(s)?;
        let o = self.regions.get(&r).expect("checked");
        if !crate::procs::descends_from(tid, o.tgid, o.start) {
            eprintln!(
                "intactfs: {} of the region of process {} by thread {tid}, not that process or its descendant (EPERM)",
                if commit { "COMMIT" } else { "ABORT" },
                o.tgid
            );
            return Err(Errno::EPERM);
        }
        let o = self.regions.remove(&r).expect("checked");
        self.procs().leave(o.tgid, o.start, o.prev);
        if commit {
            self.fs()?.region_commit(r).map_err(|e| errno(&e))
        } else {
            self.abort_region(r)
        }
    }

    /// Whether handle `fh` may issue F2FS `cmd` on `ino`; Ok(true) if the file's atomic
    /// write was started through it, Ok(false) if the file has none.
    fn f2fs_owner_check(&self, ino: Ino, fh: u64, cmd: u32) -> Result<bool, Errno> {
        // A read-only descriptor also sends no FUSE_FLUSH at close (`open_flags`), which
        // is where an unfinished atomic write is aborted.
        if !self.handle_writable(fh) {
            return Err(Errno::EBADF);
        }
        match self.f2fs.get(&ino) {
            Some(&(_, h, _)) if h != fh => {
                eprintln!("intactfs: F2FS ioctl {cmd:#x} on inode {ino} through handle {fh}: its atomic write was started through handle {h} (START: EBUSY, else EINVAL)");
                Err(if cmd == control::F2FS_IOC_START_ATOMIC_WRITE {
                    Errno::EBUSY
                } else {
                    Errno::EINVAL
                })
            }
            f => Ok(f.is_some()),
        }
    }

    /// Handles the F2FS atomic-write ioctls on `ino` (a regular file) through handle `fh`.
    /// START, COMMIT and ABORT need a writable descriptor (EBADF), and COMMIT and ABORT act
    /// only on the atomic write started through the same handle (EINVAL for another
    /// handle's): the handle is the atomic write's owner (docs/fs-api.md, "Who may call
    /// what").
    fn f2fs_ioctl(
        &mut self,
        (s, tgid): (StreamId, u32),
        ino: Ino,
        fh: u64,
        cmd: u32,
    ) -> Result<Vec<u8>, Errno> {
        let fs = self.fs()?;
        if fs.getattr(ino).map_err(|e| errno(&e))?.kind != FileType::File {
            return Err(Errno::EINVAL);
        }
        if cmd == control::F2FS_IOC_GET_FEATURES {
            return Ok(control::F2FS_FEATURE_ATOMIC_WRITE.to_ne_bytes().to_vec());
        }
        let started_here = self.f2fs_owner_check(ino, fh, cmd)?;
        match cmd {
            control::F2FS_IOC_START_ATOMIC_WRITE => {
                if started_here {
                    return Ok(Vec::new()); // already atomic, as on F2FS
                }
                if self.regions.contains_key(&s) {
                    // Inside a process-group region: regions do not nest.
                    return Err(Errno::EBUSY);
                }
                let fs = self.fs()?;
                let r = fs.region_begin().map_err(|e| errno(&e))?;
                if let Err(e) = fs.region_add(r, ino) {
                    let _ = self.abort_region(r);
                    return Err(errno(&e));
                }
                self.f2fs.insert(ino, (r, fh, tgid));
                Ok(Vec::new())
            }
            control::F2FS_IOC_COMMIT_ATOMIC_WRITE => match self.f2fs.remove(&ino) {
                Some((r, h, _)) => {
                    assert_eq!(h, fh, "f2fs_owner_check: only the starting handle ends it");
                    self.fs()?
                        .region_commit(r)
                        .map(|_| Vec::new())
                        .map_err(|e| errno(&e))
                }
                // Not atomic: F2FS syncs the file.
                None => self
                    .fs()?
                    .fsync(s, ino, false)
                    .map(|_| Vec::new())
                    .map_err(|e| errno(&e)),
            },
            control::F2FS_IOC_ABORT_VOLATILE_WRITE => match self.f2fs.remove(&ino) {
                Some((r, h, _)) => {
                    assert_eq!(h, fh, "f2fs_owner_check: only the starting handle ends it");
                    self.abort_region(r).map(|_| Vec::new())
                }
                None => Ok(Vec::new()),
            },
            _ => Err(Errno::ENOTTY),
        }
    }

    /// Waiters left when the engine is gone get an error rather than hanging.
    pub fn fail_waiters(&mut self) {
        for (_, reply) in self.waiters.drain(..) {
            reply.error(Errno::EIO);
        }
    }

    /// The kernel now holds one more reference to `ino`.
    fn remember(&mut self, ino: Ino) {
        if ino == ROOT {
            return;
        }
        let first = {
            let mut l = self.lookups.lock().unwrap_or_else(|p| p.into_inner());
            let c = l.entry(ino).or_insert(0);
            *c += 1;
            *c == 1
        };
        if first {
            if let Some(fs) = self.fs.as_mut() {
                // Cannot fail: the inode was just returned by the engine.
                let _ = fs.open(ino);
            }
        }
    }

    /// The kernel's first reference to an inode the engine has opened for it already.
    fn remember_opened(&mut self, ino: Ino) {
        let mut l = self.lookups.lock().unwrap_or_else(|p| p.into_inner());
        let c = l.entry(ino).or_insert(0);
        *c += 1;
        if *c > 1 {
            drop(l);
            // Not the first after all: the engine's open was one too many.
            if let Some(fs) = self.fs.as_mut() {
                let _ = fs.release(intactfs::INIT_STREAM, ino);
            }
        }
    }

    fn forget(&mut self, ino: Ino, n: u64) {
        let gone = {
            let mut l = self.lookups.lock().unwrap_or_else(|p| p.into_inner());
            let Some(c) = l.get_mut(&ino) else { return };
            *c = c.saturating_sub(n);
            *c == 0 && l.remove(&ino).is_some()
        };
        if gone {
            if let Some(fs) = self.fs.as_mut() {
                if let Err(e) = fs.release(intactfs::INIT_STREAM, ino) {
                    self.failure
                        .get_or_insert(format!("freeing inode {ino}: {e}"));
                }
            }
        }
    }
}

impl CommitState for State {
    fn engine(&self) -> Option<&Fs<ImageDevice>> {
        self.fs.as_ref()
    }
    fn engine_mut(&mut self) -> Option<&mut Fs<ImageDevice>> {
        self.fs.as_mut()
    }
    fn has_failed(&self) -> bool {
        self.failure.is_some()
    }
    fn fail(&mut self, why: String) {
        self.failure.get_or_insert(why);
        self.fail_waiters();
    }
    fn notify(&mut self) {
        State::notify(self)
    }
}

impl IntactFuse {
    /// `locked_commit`: commits write and flush under the engine lock (the behaviour before
    /// commits moved out of it; kept for comparison).
    pub fn new(
        mut fs: Fs<ImageDevice>,
        fsync: FsyncMode,
        xattr: bool,
        locked_commit: bool,
        caps: Caps,
    ) -> Result<IntactFuse, FsError> {
        let io = if locked_commit { None } else { fs.shared_io() };
        if io.is_some() {
            fs.set_deferred_io(true)?;
        }
        let state = State {
            fs: Some(fs),
            lookups: Mutex::new(HashMap::new()),
            procs: Mutex::new(ProcTable::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: std::sync::atomic::AtomicU64::new(1),
            failure: None,
            waiters: Vec::new(),
            unflushed_since: None,
            regions: HashMap::new(),
            f2fs: HashMap::new(),
            notifier: None,
            invalidate: Vec::new(),
        };
        let state = Arc::new(RwLock::new(state));
        Ok(IntactFuse {
            commits: Committer::new(state.clone(), io),
            state,
            fsync,
            xattr,
            caps,
        })
    }

    fn lock(&self) -> Result<RwLockWriteGuard<'_, State>, Errno> {
        self.commits.lock()
    }

    /// For calls that only look: several at once, none waiting for another's read.
    fn read(&self) -> Result<RwLockReadGuard<'_, State>, Errno> {
        self.commits.read()
    }

    /// Locks the engine and finds the caller's stream.
    fn begin(&self, req: &Request) -> Result<(RwLockWriteGuard<'_, State>, StreamId), Errno> {
        let st = self.lock()?;
        let s = st.procs().stream_of(req.pid());
        Ok((st, s))
    }

    /// A close (FLUSH) or the handle's end (RELEASE, `forget_handle`): ends an F2FS atomic
    /// write the handle started and tells the kernel what aborted regions undid; the write
    /// lock only when there is such work.
    /// What an open (or create) answers: keep the page cache (writes go through to the
    /// engine, no writeback cache, so the kernel's cache is coherent); and for a read-only
    /// descriptor no FUSE_FLUSH at close, since closing it has nothing to write or abort
    /// (the F2FS atomic write a close aborts needs a writable descriptor).
    fn open_flags(&self, writable: bool) -> FopenFlags {
        if !writable && self.caps.noflush_readonly {
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// `closer`: the process whose FLUSH this is, None at the release (the last close).
    fn closed(&self, ino: Ino, fh: u64, forget_handle: bool, closer: Option<u32>) {
        let work = self.read().map(|st| {
            if forget_handle {
                st.handles
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&fh);
            }
            st.close_has_work(ino, fh, closer)
        });
        if work.unwrap_or(true) {
            invalidate(self.lock().ok().and_then(|mut st| {
                st.end_f2fs_on_close(ino, fh, closer);
                st.take_invalidations()
            }));
        }
    }

    fn owner(st: &mut State, req: &Request, parent: Ino) -> Result<(Owner, bool), Errno> {
        // A directory with the set-group-id bit gives new entries its group (and new
        // directories the bit itself), as Linux file systems do.
        let p = st.fs()?.getattr(parent).map_err(|e| errno(&e))?;
        let sgid = p.mode & S_ISGID != 0;
        Ok((
            Owner {
                uid: req.uid(),
                gid: if sgid { p.gid } else { req.gid() },
            },
            sgid,
        ))
    }

    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        k: NewKind,
        mode: u32,
    ) -> Result<Attr, Errno> {
        let (mut st, s) = self.begin(req)?;
        Self::make_locked(&mut st, s, req, parent, name, k, mode)
    }

    fn make_locked(
        st: &mut State,
        s: StreamId,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        k: NewKind,
        mode: u32,
    ) -> Result<Attr, Errno> {
        let (owner, sgid) = Self::owner(st, req, parent.0)?;
        let is_dir = matches!(k, NewKind::Dir);
        let mut mode = mode & 0o7777;
        if is_dir && sgid {
            mode |= S_ISGID;
        }
        let a = st
            .fs()?
            .create(s, parent.0, name.as_bytes(), k, mode, owner)
            .map_err(|e| errno(&e))?;
        st.remember(a.ino);
        Ok(a)
    }

    fn reply_entry(r: Result<Attr, Errno>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn empty(r: Result<(), Errno>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// A listed entry: inode, the offset after it, type, name.
type Listed = (Ino, u64, FType, Vec<u8>);

/// A directory's entries from `offset` on (at most 512 of the engine's): (inode, the offset
/// after it, type, name). Offsets: 1 after ".", 2 after "..", and an entry's cookie + 2
/// after it (the block engine's name hash, the pmem engine's slot + 1: stable while the
/// entry exists, so a listing that spans calls skips and repeats nothing).
pub(crate) fn dir_entries<E: Engine>(
    fs: &E,
    ino: Ino,
    parent: Ino,
    offset: u64,
) -> Result<Vec<Listed>, Errno> {
    let me = Engine::getattr(fs, ino).map_err(|e| errno(&e))?;
    if me.kind != FileType::Dir {
        return Err(Errno::ENOTDIR);
    }
    let mut out = Vec::new();
    if offset == 0 {
        out.push((ino, 1, FType::Directory, b".".to_vec()));
    }
    if offset <= 1 {
        out.push((parent, 2, FType::Directory, b"..".to_vec()));
    }
    let cookie = offset.saturating_sub(2);
    for e in Engine::readdir(fs, ino, cookie, 512).map_err(|e| errno(&e))? {
        assert!(
            e.cookie > cookie,
            "readdir: cookie {} after {cookie}",
            e.cookie
        );
        out.push((e.ino, e.cookie + 2, kind(e.kind), e.name));
    }
    Ok(out)
}

/// The block engine's parent of directory `ino` (itself for the root).
fn block_parent(fs: &Fs<ImageDevice>, ino: Ino) -> Ino {
    match fs.live_meta().get(ino).map(|n| &n.body) {
        Some(Body::Dir { parent, .. }) => *parent,
        _ => ino,
    }
}

/// Clears set-user-id, and set-group-id if the file is group-executable or the caller is
/// neither in the file's group nor root (the kernel's `setattr_should_drop_sgid`), as a
/// write, truncate or chown does.
fn kill_suid(st: &mut State, s: StreamId, ino: Ino, req: &Request) -> Result<Attr, Errno> {
    let a = st.fs()?.getattr(ino).map_err(|e| errno(&e))?;
    let mut kill = 0o4000;
    if a.mode & 0o010 != 0
        || (req.uid() != 0 && !crate::procs::in_group(req.pid(), req.gid(), a.gid))
    {
        kill |= S_ISGID;
    }
    if a.mode & kill == 0 {
        return Ok(a);
    }
    let set = SetAttr {
        mode: Some(a.mode & 0o7777 & !kill),
        ..SetAttr::default()
    };
    st.fs()?.setattr(s, ino, set).map_err(|e| errno(&e))
}

fn xattr_name(name: &OsStr) -> Result<&[u8], Errno> {
    let b = name.as_bytes();
    if b.starts_with(b"system.") {
        return Err(Errno::from_i32(libc::EOPNOTSUPP));
    }
    Ok(b)
}

/// getxattr/listxattr: size 0 asks for the length; a smaller buffer is ERANGE.
fn sized(r: Result<Vec<u8>, Errno>, size: u32, reply: ReplyXattr) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}

pub(crate) fn time_arg(t: Option<TimeOrNow>) -> Option<Time> {
    t.map(|t| match t {
        TimeOrNow::SpecificTime(t) => from_fuser(t),
        TimeOrNow::Now => intactfs::engine::now_wall(),
    })
}

/// A time fuser decoded from the kernel's (seconds, nanoseconds). For times before 1970,
/// fuser 0.18 subtracts `Duration::new(-sec, nsec)` from the epoch, one second too early
/// whenever nsec > 0 (its src/time.rs); the kernel's pair is recovered exactly from it.
#[cfg(test)]
fn from_system(t: SystemTime) -> Time {
    let (sec, nsec) = split_system(t);
    Time { sec, nsec }
}

fn from_fuser(t: SystemTime) -> Time {
    let (sec, nsec) = split_fuser(t);
    Time { sec, nsec }
}

/// [`from_fuser`] as (seconds, nanoseconds), for both engines' time types.
pub(crate) fn split_fuser(t: SystemTime) -> (i64, u32) {
    match UNIX_EPOCH.duration_since(t) {
        Ok(d) if !d.is_zero() => (-(d.as_secs() as i64), d.subsec_nanos()),
        _ => split_system(t),
    }
}

/// Optional FUSE capabilities the mount asks the kernel for; each can be turned off to
/// measure what it saves (mount options `nokillpriv`, `noreaddirplus`, `flushall`).
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// FUSE_HANDLE_KILLPRIV_V2: we clear set-user-id on writes ourselves.
    pub killpriv: bool,
    /// FUSE_DO_READDIRPLUS (+AUTO): listings carry their entries' attributes.
    pub readdirplus: bool,
    /// FOPEN_NOFLUSH on read-only opens: closing them sends no FUSE_FLUSH (a round trip
    /// the closing process waits for) since there is nothing to flush or abort.
    pub noflush_readonly: bool,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            killpriv: true,
            readdirplus: true,
            noflush_readonly: true,
        }
    }
}

/// An open file handle.
#[derive(Clone, Copy, Debug)]
struct Handle {
    stream: StreamId,
    writable: bool,
}

impl fuser::Filesystem for IntactFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_readahead(MAX_WRITE);
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
        let r = (|| {
            {
                let st = self.read()?;
                let a = st
                    .fs_ref()?
                    .lookup(parent.0, name.as_bytes())
                    .map_err(|e| errno(&e))?;
                if st.remember_known(a.ino) {
                    return Ok(a);
                }
            }
            // The kernel's first reference: the engine keeps the inode open (looked up again:
            // the name may have changed between the locks).
            let mut st = self.lock()?;
            let a = st
                .fs()?
                .lookup(parent.0, name.as_bytes())
                .map_err(|e| errno(&e))?;
            st.remember(a.ino);
            Ok(a)
        })();
        match r {
            // A negative entry (node 0) the kernel may cache for TTL: every create goes
            // through the kernel, which replaces it, and repeated stats of a missing file
            // (SQLite's journal, git's lock files) stop costing a round trip each.
            Err(e) if e == Errno::ENOENT => reply.entry(&TTL, &negative_attr(), Generation(0)),
            r => Self::reply_entry(r, reply),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if let Ok(mut st) = self.lock() {
            st.forget(ino.0, nlookup);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = (|| self.read()?.fs_ref()?.getattr(ino.0).map_err(|e| errno(&e)))();
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
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
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let mut a = SetAttr {
                mode: mode.map(|m| m & 0o7777),
                uid,
                gid,
                size,
                atime: time_arg(atime),
                mtime: time_arg(mtime),
            };
            let bare = a == SetAttr::default();
            if bare {
                // chown(f, -1, -1) reaches us with no field set (the kernel sends ctime only
                // with a writeback cache); POSIX still wants ctime marked: set the owner to
                // itself, which the engine logs with a new ctime.
                a.uid = Some(st.fs()?.getattr(ino.0).map_err(|e| errno(&e))?.uid);
            }
            let r = st.fs()?.setattr(s, ino.0, a).map_err(|e| errno(&e))?;
            // With FUSE_HANDLE_KILLPRIV_V2 the kernel leaves clearing set-user-id and
            // set-group-id on truncate and chown to us (it flags them with FATTR_KILL_SUIDGID,
            // which fuser 0.18 does not pass on): chown of a non-directory always clears
            // them; a truncate does when the caller lacks CAP_FSETID (uid 0 stands for it).
            let chown = (uid.is_some() || gid.is_some() || bare) && r.kind != FileType::Dir;
            if mode.is_none() && (chown || (size.is_some() && req.uid() != 0)) {
                return kill_suid(&mut st, s, ino.0, req);
            }
            Ok(r)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match (|| {
            self.read()?
                .fs_ref()?
                .readlink(ino.0)
                .map_err(|e| errno(&e))
        })() {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
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
        let k = match mode & S_IFMT {
            0o100000 | 0 => Some(NewKind::File),
            0o010000 => Some(NewKind::Fifo),
            0o140000 => Some(NewKind::Socket),
            0o020000 => Some(NewKind::CharDev(rdev)),
            0o060000 => Some(NewKind::BlockDev(rdev)),
            _ => None,
        };
        match k {
            Some(k) => Self::reply_entry(self.make(req, parent, name, k, mode), reply),
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
        Self::reply_entry(self.make(req, parent, name, NewKind::Dir, mode), reply)
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            st.fs()?
                .unlink(s, parent.0, name.as_bytes())
                .map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            st.fs()?
                .rmdir(s, parent.0, name.as_bytes())
                .map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let (owner, _) = Self::owner(&mut st, req, parent.0)?;
            let a = st
                .fs()?
                .symlink(
                    s,
                    parent.0,
                    link_name.as_bytes(),
                    target.as_os_str().as_bytes(),
                    owner,
                )
                .map_err(|e| errno(&e))?;
            st.remember(a.ino);
            Ok(a)
        })();
        Self::reply_entry(r, reply)
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
        let r = (|| {
            if flags.contains(FRename::RENAME_WHITEOUT) {
                return Err(Errno::EINVAL);
            }
            let f = RenameFlags {
                noreplace: flags.contains(FRename::RENAME_NOREPLACE),
                exchange: flags.contains(FRename::RENAME_EXCHANGE),
            };
            let (mut st, s) = self.begin(req)?;
            st.fs()?
                .rename(
                    s,
                    parent.0,
                    name.as_bytes(),
                    newparent.0,
                    newname.as_bytes(),
                    f,
                )
                .map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let a = st
                .fs()?
                .link(s, ino.0, newparent.0, newname.as_bytes())
                .map_err(|e| errno(&e))?;
            st.remember(a.ino);
            Ok(a)
        })();
        Self::reply_entry(r, reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let r = (|| {
            let st = self.read()?;
            let s = st.procs().stream_of(req.pid());
            st.fs_ref()?.getattr(ino.0).map_err(|e| errno(&e))?;
            Ok(st.new_handle(s, writable))
        })();
        match r {
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
        let r = (|| {
            {
                let st = self.read()?;
                let fs = st.fs_ref()?;
                if fs.can_read_shared() {
                    return fs
                        .read_shared(ino.0, offset, size as usize)
                        .map_err(|e| errno(&e));
                }
            }
            self.lock()?
                .fs()?
                .read(ino.0, offset, size as usize)
                .map_err(|e| errno(&e))
        })();
        match r {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
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
        let mut pending = Vec::new();
        let r = (|| {
            let (mut st, mut s) = self.begin(req)?;
            if req.pid() == 0 {
                // Write-back of a shared mapping: the kernel writes for some process that
                // opened the file writable; the opener's stream is the best we know.
                s = st.handle_stream(fh.0).unwrap_or(s);
            }
            let n = st
                .fs()?
                .write(s, ino.0, offset, data)
                .map_err(|e| errno(&e))?;
            if wf.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                kill_suid(&mut st, s, ino.0, req)?;
            }
            let fs = st.fs()?;
            pending = fs.take_io();
            if !pending.is_empty() && fs.inflight_bytes() > fs.dirty_limit() {
                // Writers outpace the device: this one writes before it returns.
                drop(st);
                self.commits.write_out(&std::mem::take(&mut pending))?;
            }
            Ok(n)
        })();
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
        // A commit the dirty limit forced: written after the answer, without the lock (its
        // flush comes with the next fsync or the durability timeout).
        let _ = self.commits.write_out(&pending);
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) of the descriptor that started an F2FS atomic write: F2FS drops it at
        // the file's release, which the kernel sends after close returns; abort here, while
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
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let r = match self.fsync {
                FsyncMode::Ignore => {
                    return st.fs()?.getattr(ino.0).map(|_| ()).map_err(|e| errno(&e))
                }
                FsyncMode::Osync if !st.fs()?.stream_flags(s).ignore_fsync => {
                    st.fs()?.osync(s, ino.0).map(|_| ())
                }
                _ => st.fs()?.fsync(s, ino.0, datasync),
            };
            st.notify();
            r.map_err(|e| errno(&e))?;
            // Written and flushed without the lock; concurrent fsyncs share the flush.
            self.commits.finish(st)
        })();
        Self::empty(r, reply)
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
        let r = (|| {
            let st = self.read()?;
            let fs = st.fs_ref()?;
            dir_entries(fs, ino.0, block_parent(fs, ino.0), offset)
        })();
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
        let r = (|| {
            // The write lock: every entry sent is one more kernel reference (`remember`).
            let mut st = self.lock()?;
            let fs = st.fs_ref()?;
            let entries = dir_entries(fs, ino.0, block_parent(fs, ino.0), offset)?;
            for (i, off, _, name) in entries {
                let a = match st.fs_ref()?.getattr(i) {
                    Ok(a) => a,
                    // Gone since the listing (cannot happen under the lock); skip it.
                    Err(_) => continue,
                };
                if reply.add(
                    INodeNo(i),
                    off,
                    OsStr::from_bytes(&name),
                    &TTL,
                    &file_attr(&a),
                    Generation(0),
                ) {
                    break;
                }
                // The kernel counts a lookup for every entry it received but "." and "..".
                if name != b"." && name != b".." {
                    st.remember(i);
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply_statfs(reply, (|| Ok(self.read()?.fs_ref()?.statfs()))())
    }

    // Extended attributes in the user, trusted and security namespaces (the kernel checks
    // who may touch which). system.* holds POSIX ACLs, which the kernel would expect us
    // to enforce: refused, so that no one believes an ACL protects a file.
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
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let name = xattr_name(name)?;
            let (mut st, s) = self.begin(req)?;
            st.fs()?
                .setxattr(
                    s,
                    ino.0,
                    name,
                    value,
                    flags & libc::XATTR_CREATE != 0,
                    flags & libc::XATTR_REPLACE != 0,
                )
                .map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let name = xattr_name(name)?;
            self.read()?
                .fs_ref()?
                .getxattr(ino.0, name)
                .map_err(|e| errno(&e))
        })();
        sized(r, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let names = self
                .read()?
                .fs_ref()?
                .listxattr(ino.0)
                .map_err(|e| errno(&e))?;
            Ok(names
                .into_iter()
                .flat_map(|mut n| {
                    n.push(0);
                    n
                })
                .collect())
        })();
        sized(r, size, reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let name = xattr_name(name)?;
            let (mut st, s) = self.begin(req)?;
            st.fs()?.removexattr(s, ino.0, name).map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
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
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let a = Self::make_locked(&mut st, s, req, parent, name, NewKind::File, mode)?;
            Ok((a, st.new_handle(s, writable)))
        })();
        match r {
            Ok((a, fh)) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                fh,
                self.open_flags(writable),
            ),
            Err(e) => reply.error(e),
        }
    }

    /// O_TMPFILE (FUSE_TMPFILE: the vendored fuser's patch, vendor/fuser/PATCHES.md).
    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let (owner, _) = Self::owner(&mut st, req, parent.0)?;
            let a = st
                .fs()?
                .create_tmpfile(s, parent.0, mode & 0o7777, owner)
                .map_err(|e| errno(&e))?;
            // The engine opened it already: that open is the kernel's first reference.
            st.remember_opened(a.ino);
            // O_TMPFILE needs O_WRONLY or O_RDWR.
            Ok((a, st.new_handle(s, true)))
        })();
        match r {
            Ok((a, fh)) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                fh,
                self.open_flags(true),
            ),
            Err(e) => reply.error(e),
        }
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
        let r: Result<Vec<u8>, Errno> = (|| {
            let (mut st, s) = self.begin(req)?;
            if let Some(e) = control::refusal(cmd, Engine::capabilities(st.fs_ref()?)) {
                return Err(Errno::from_i32(e));
            }
            let r = match cmd {
                control::IOC_SETSTREAM => {
                    let a = StreamArg::decode(in_data).ok_or(Errno::EINVAL)?;
                    // The init stream is every other program's: nobody may turn off its
                    // fsync or make it optimistic. IGNORE_FSYNC already says what an
                    // fsync does; both at once is a mistake.
                    if a.flags & !FLAGS_ALL != 0
                        || a.flags == FLAGS_ALL
                        || (a.id == intactfs::INIT_STREAM && a.flags != 0)
                        || a.id >= intactfs::REGION_BASE
                    {
                        return Err(Errno::EINVAL);
                    }
                    // Leaving a region is its commit or abort.
                    if st.regions.contains_key(&s) {
                        return Err(Errno::EBUSY);
                    }
                    st.procs().set(req.pid(), a.id).map_err(|_| Errno::ESRCH)?;
                    st.fs()?.set_stream_flags(
                        a.id,
                        StreamFlags {
                            ignore_fsync: a.flags & FLAG_IGNORE_FSYNC != 0,
                            fsync_as_osync: a.flags & FLAG_FSYNC_AS_OSYNC != 0,
                        },
                    );
                    Ok(Vec::new())
                }
                control::IOC_GETSTREAM => {
                    let f = st.fs()?.stream_flags(s);
                    let flags = if f.ignore_fsync { FLAG_IGNORE_FSYNC } else { 0 }
                        | if f.fsync_as_osync {
                            FLAG_FSYNC_AS_OSYNC
                        } else {
                            0
                        };
                    Ok(StreamArg { id: s, flags }.encode().to_vec())
                }
                control::IOC_STREAMSYNC => {
                    let fs = st.fs()?;
                    fs.getattr(ino.0).map_err(|e| errno(&e))?;
                    fs.streamsync(s).map_err(|e| errno(&e)).map(|_| Vec::new())
                }
                control::IOC_OSYNC => st
                    .fs()?
                    .osync(s, ino.0)
                    .map(|t| t.to_ne_bytes().to_vec())
                    .map_err(|e| errno(&e)),
                control::IOC_DSYNC => st
                    .fs()?
                    .dsync(s, ino.0)
                    .map(|_| Vec::new())
                    .map_err(|e| errno(&e)),
                control::IOC_DURABLE => {
                    let a = DurableArg::decode(in_data).ok_or(Errno::EINVAL)?;
                    let fs = st.fs()?;
                    fs.getattr(ino.0).map_err(|e| errno(&e))?;
                    // A ticket never issued would never become durable.
                    if a.flags & !DURABLE_WAIT != 0 || a.ticket > fs.written_ticket() {
                        return Err(Errno::EINVAL);
                    }
                    let durable = fs.durable_ticket();
                    if a.flags & DURABLE_WAIT != 0 && a.ticket > durable {
                        // Answered by `notify` after the flush that makes it durable (at the
                        // latest when the durability timeout expires).
                        st.waiters
                            .push((a.ticket, reply.take().expect("not yet answered")));
                        return Ok(Vec::new());
                    }
                    Ok(DurableArg {
                        ticket: durable,
                        flags: 0,
                    }
                    .encode()
                    .to_vec())
                }
                control::IOC_BEGIN => {
                    st.fs()?.getattr(ino.0).map_err(|e| errno(&e))?;
                    if st.fs()?.is_region(s) {
                        return Err(Errno::EALREADY);
                    }
                    let r = st.fs()?.region_begin().map_err(|e| errno(&e))?;
                    let entered = st.procs().enter(req.pid(), r);
                    match entered {
                        Ok((tgid, start, prev)) => {
                            st.regions.insert(r, RegionOwner { tgid, start, prev });
                            Ok(Vec::new())
                        }
                        Err(_) => {
                            let _ = st.abort_region(r);
                            Err(Errno::ESRCH)
                        }
                    }
                }
                control::IOC_COMMIT => st.end_region(req.pid(), s, true).map(|_| Vec::new()),
                control::IOC_ABORT => st.end_region(req.pid(), s, false).map(|_| Vec::new()),
                control::IOC_ADD => {
                    // A region of this process group on this mount ("another mount": EXDEV).
                    let r = st.caller_region(s).map_err(|_| Errno::EXDEV)?;
                    if st.fs()?.getattr(ino.0).map_err(|e| errno(&e))?.kind != FileType::File {
                        return Err(Errno::EINVAL);
                    }
                    // The region's abort would undo other processes' writes to the file:
                    // only a caller that may write it may add it.
                    if !st.handle_writable(fh.0) {
                        return Err(Errno::EBADF);
                    }
                    st.fs()?
                        .region_add(r, ino.0)
                        .map(|_| Vec::new())
                        .map_err(|e| errno(&e))
                }
                // AD-transactions (pmem only) were refused by `control::refusal` above.
                control::F2FS_IOC_GET_FEATURES
                | control::F2FS_IOC_START_ATOMIC_WRITE
                | control::F2FS_IOC_COMMIT_ATOMIC_WRITE
                | control::F2FS_IOC_ABORT_VOLATILE_WRITE => {
                    st.f2fs_ioctl((s, crate::procs::tgid_of(req.pid())), ino.0, fh.0, cmd)
                }
                _ => Err(Errno::ENOTTY),
            };
            st.notify();
            let out = r?;
            self.commits.finish(st)?;
            Ok(out)
        })();
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
        // The kernel handles SEEK_SET/CUR/END itself; only holes need the file system.
        let r = (|| {
            let data = match whence {
                libc::SEEK_DATA => true,
                libc::SEEK_HOLE => false,
                _ => return Err(Errno::EINVAL),
            };
            let off = u64::try_from(offset).map_err(|_| Errno::ENXIO)?;
            self.read()?
                .fs_ref()?
                .seek_data(ino.0, off, data)
                .map_err(|e| errno(&e))
        })();
        match r {
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
        let r = (|| {
            let (mut st, s) = self.begin(req)?;
            let r = match mode {
                0 => st.fs()?.fallocate(s, ino.0, offset, length, false),
                libc::FALLOC_FL_KEEP_SIZE => st.fs()?.fallocate(s, ino.0, offset, length, true),
                // Linux requires KEEP_SIZE with PUNCH_HOLE (the kernel refuses it alone).
                m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                    st.fs()?.punch_hole(s, ino.0, offset, length)
                }
                _ => return Err(Errno::from_i32(libc::EOPNOTSUPP)),
            };
            r.map_err(|e| errno(&e))
        })();
        Self::empty(r, reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_1970_survive_fusers_decoding() {
        // What fuser 0.18 hands us for the kernel's (-2 s, 500,000,000 ns), i.e. -1.5 s.
        let from_fuser_lib = UNIX_EPOCH - Duration::new(2, 500_000_000);
        assert_eq!(
            from_fuser(from_fuser_lib),
            Time {
                sec: -2,
                nsec: 500_000_000
            }
        );
        assert_eq!(
            to_system(Time {
                sec: -2,
                nsec: 500_000_000
            }),
            UNIX_EPOCH - Duration::from_millis(1500)
        );
        let t = Time {
            sec: 1_700_000_000,
            nsec: 123,
        };
        assert_eq!(from_fuser(to_system(t)), t);
        assert_eq!(
            from_system(to_system(Time { sec: -5, nsec: 7 })),
            Time { sec: -5, nsec: 7 }
        );
    }
}
