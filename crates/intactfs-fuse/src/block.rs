//! The block engine behind the one server ([`crate::server`]): where its changes go (the
//! caller's ccfs stream), its control calls (streams, OptFS osync/dsync and durability
//! tickets, CFS atomic regions and the F2FS atomic writes over them), and its commit
//! policy: a request prepares its commit under the lock and writes and flushes it without
//! it ([`crate::commit`]).

use crate::commit::{CommitState, Committer};
use crate::control::{
    self, DurableArg, StreamArg, DURABLE_WAIT, FLAGS_ALL, FLAG_FSYNC_AS_OSYNC, FLAG_IGNORE_FSYNC,
};
use crate::server::{errno, Caps, IoctlCall, Locked, Served, Server, State, Who};
use fuser::{Errno, ReplyIoctl};
use intactfs::{CommitIo, Fs, FsError, StreamFlags, StreamId};
use intactfs_device::ImageDevice;
use intactfs_types::prelude::*;
use intactfs_types::{Attr, FileType, Ino, Owner, Result as FsResult};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Largest write request (the kernel's default page limit is 256 pages).
pub const MAX_WRITE: u32 = 1 << 20;

/// The block engine as served.
pub type BlockFs = Fs<ImageDevice>;
pub type BlockState = State<BlockFs>;
pub type BlockServer = Server<BlockFs>;

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

/// The process that began a region, and the stream it had before.
struct RegionOwner {
    tgid: u32,
    start: u64,
    prev: Option<crate::procs::Explicit>,
}

/// The block engine's own server state, under the engine's lock.
#[derive(Default)]
pub struct BlockExt {
    /// DURABLE ioctls waiting for their ticket (answered by [`BlockState::notify`]).
    waiters: Vec<(u64, ReplyIoctl)>,
    /// When the oldest commit not yet flushed was written (the durability timeout runs
    /// from here).
    pub unflushed_since: Option<std::time::Instant>,
    /// Open atomic regions of process groups: region → who opened it.
    regions: HashMap<StreamId, RegionOwner>,
    /// F2FS atomic writes: file → (its region, the handle that started it, the process
    /// that started it: only its FLUSH of the handle ends it, see [`crate::procs::closer_ends`]).
    f2fs: HashMap<Ino, (StreamId, u64, u32)>,
}

/// What the block server keeps beside the lock.
pub struct BlockDriver {
    pub commits: Committer<BlockState>,
    fsync: FsyncMode,
}

/// The server of a mounted block image. `locked_commit`: commits write and flush under the
/// engine lock (the behaviour before commits moved out of it; kept for comparison).
pub fn server(
    mut fs: BlockFs,
    fsync: FsyncMode,
    xattr: bool,
    locked_commit: bool,
    caps: Caps,
) -> Result<BlockServer, FsError> {
    let io = if locked_commit { None } else { fs.shared_io() };
    if io.is_some() {
        fs.set_deferred_io(true)?;
    }
    let state = Arc::new(RwLock::new(State::new(fs, BlockExt::default())));
    let driver = BlockDriver {
        commits: Committer::new(state.clone(), io),
        fsync,
    };
    Ok(Server::new(state, driver, xattr, caps))
}

impl BlockState {
    /// After anything that may have written or flushed commits: start the durability
    /// clock at the first unflushed commit, and answer the DURABLE waiters whose ticket
    /// is now durable.
    pub fn notify(&mut self) {
        let Some(fs) = self.fs.as_ref() else { return };
        let (durable, unflushed) = (fs.durable_ticket(), fs.has_unflushed());
        let x = &mut self.ext;
        if !unflushed {
            x.unflushed_since = None;
        } else if x.unflushed_since.is_none() {
            x.unflushed_since = Some(std::time::Instant::now());
        }
        if !x.waiters.iter().any(|w| w.0 <= durable) {
            return;
        }
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut x.waiters)
            .into_iter()
            .partition(|w| w.0 <= durable);
        x.waiters = wait;
        for (_, reply) in ready {
            let arg = DurableArg {
                ticket: durable,
                flags: 0,
            };
            reply.ioctl(0, &arg.encode());
        }
    }

    /// Waiters left when the engine is gone get an error rather than hanging.
    pub fn fail_waiters(&mut self) {
        for (_, reply) in self.ext.waiters.drain(..) {
            reply.error(Errno::EIO);
        }
    }

    /// Regions whose process exited without committing are aborted (CFS: a region ends
    /// with its commit; a program that dies in one never made its changes).
    pub fn reap_regions(&mut self) {
        let gone: Vec<StreamId> = (self.ext.regions.iter())
            .filter(|(_, o)| !crate::procs::alive(o.tgid, o.start))
            .map(|(r, _)| *r)
            .collect();
        for r in gone {
            let o = self.ext.regions.remove(&r).expect("listed above");
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

    /// Aborts region `r` and queues what the kernel must forget of its changes.
    fn abort_region(&mut self, r: StreamId) -> Result<(), Errno> {
        let undone = self.fs()?.region_abort(r).map_err(|e| errno(&e))?;
        self.invalidate.push((undone.inodes, undone.entries));
        Ok(())
    }

    /// Whether closing handle `fh` of `ino` ends the F2FS atomic write it started.
    fn f2fs_ends_at(&self, ino: Ino, fh: u64, closer: Option<u32>) -> bool {
        (self.ext.f2fs.get(&ino))
            .is_some_and(|f| f.1 == fh && crate::procs::closer_ends(closer, f.2))
    }

    /// The region the caller is in ("no atomic region is open": EINVAL, which
    /// libintact/Python name).
    fn caller_region(&self, s: StreamId) -> Result<StreamId, Errno> {
        if self.ext.regions.contains_key(&s) {
            Ok(s)
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// Ends the caller's process-group region: commit or abort. Only the process that
    /// began it and its descendants may (EPERM): the stream lookup already says so, and
    /// this checks it again against the process tree, since a cached answer could outlive
    /// a reused thread id.
    fn end_region(&mut self, tid: u32, s: StreamId, commit: bool) -> Result<(), Errno> {
        let r = self.caller_region(s)?;
        let o = self.ext.regions.get(&r).expect("checked");
        if !crate::procs::descends_from(tid, o.tgid, o.start) {
            eprintln!(
                "intactfs: {} of the region of process {} by thread {tid}, not that process or its descendant (EPERM)",
                if commit { "COMMIT" } else { "ABORT" },
                o.tgid
            );
            return Err(Errno::EPERM);
        }
        let o = self.ext.regions.remove(&r).expect("checked");
        self.procs().leave(o.tgid, o.start, o.prev);
        if commit {
            self.fs()?.region_commit(r).map_err(|e| errno(&e))
        } else {
            self.abort_region(r)
        }
    }
}

impl CommitState for BlockState {
    fn engine(&self) -> Option<&BlockFs> {
        self.fs.as_ref()
    }
    fn engine_mut(&mut self) -> Option<&mut BlockFs> {
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
        BlockState::notify(self)
    }
}

impl Served for BlockFs {
    type Ext = BlockExt;
    type Driver = BlockDriver;
    type Pending = Vec<Arc<CommitIo>>;
    const MAX_WRITE: u32 = MAX_WRITE;
    // Writes go through to the engine (no writeback cache), so the kernel's cache is
    // coherent; an aborted region's pages are invalidated.
    const KEEP_CACHE: bool = true;

    /// The caller's stream; a write the kernel sends on its own behalf (pid 0: write-back
    /// of a shared mapping) goes in the stream of the handle's opener, the best we know.
    fn ctx(st: &BlockState, who: &Who, fh: Option<u64>, _objs: &[Ino]) -> Result<StreamId, Errno> {
        let s = st.procs().stream_of(who.pid);
        Ok(match fh {
            Some(fh) if who.pid == 0 => st.handles.stream(fh).unwrap_or(s),
            _ => s,
        })
    }
    fn idle_ctx() -> StreamId {
        intactfs::INIT_STREAM
    }
    fn read_shared(&self, ino: Ino, off: u64, len: usize) -> Option<FsResult<Vec<u8>>> {
        self.can_read_shared()
            .then(|| Fs::read_shared(self, ino, off, len))
    }
    fn write_done(d: &BlockDriver, mut st: Locked<'_, Self>) -> Result<Self::Pending, Errno> {
        let fs = st.fs()?;
        let pending = fs.take_io();
        if !pending.is_empty() && fs.inflight_bytes() > fs.dirty_limit() {
            // Writers outpace the device: this one writes before it returns.
            drop(st);
            d.commits.write_out(&pending)?;
            return Ok(Vec::new());
        }
        Ok(pending)
    }
    /// A commit the dirty limit forced: written without the lock (its flush comes with the
    /// next fsync or the durability timeout).
    fn write_pending(d: &BlockDriver, p: Self::Pending) {
        let _ = d.commits.write_out(&p);
    }
    fn sync_file(
        d: &BlockDriver,
        mut st: Locked<'_, Self>,
        s: StreamId,
        ino: Ino,
        datasync: bool,
    ) -> Result<(), Errno> {
        let fs = st.fs()?;
        let r = match d.fsync {
            FsyncMode::Ignore => return fs.getattr(ino).map(|_| ()).map_err(|e| errno(&e)),
            FsyncMode::Osync if !fs.stream_flags(s).ignore_fsync => fs.osync(s, ino).map(|_| ()),
            _ => fs.fsync(s, ino, datasync),
        };
        st.notify();
        r.map_err(|e| errno(&e))?;
        // Written and flushed without the lock; concurrent fsyncs share the flush.
        d.commits.finish(st)
    }
    fn ioctl(
        _d: &BlockDriver,
        st: &mut BlockState,
        call: &IoctlCall,
        reply: &mut Option<ReplyIoctl>,
    ) -> Result<Vec<u8>, Errno> {
        let s = Self::ctx(st, &call.who, None, &[])?;
        let r = match call.cmd {
            control::IOC_SETSTREAM | control::IOC_GETSTREAM | control::IOC_STREAMSYNC => {
                stream_ioctl(st, call, s)
            }
            control::IOC_OSYNC | control::IOC_DSYNC | control::IOC_DURABLE => {
                durability_ioctl(st, call, s, reply)
            }
            control::IOC_BEGIN | control::IOC_COMMIT | control::IOC_ABORT | control::IOC_ADD => {
                region_ioctl(st, call, s)
            }
            control::F2FS_IOC_GET_FEATURES
            | control::F2FS_IOC_START_ATOMIC_WRITE
            | control::F2FS_IOC_COMMIT_ATOMIC_WRITE
            | control::F2FS_IOC_ABORT_VOLATILE_WRITE => f2fs_ioctl(st, call, s),
            // AD-transactions (pmem only) were refused by `control::refusal`.
            _ => Err(Errno::ENOTTY),
        };
        st.notify();
        r
    }
    fn finish(d: &BlockDriver, st: Locked<'_, Self>) -> Result<(), Errno> {
        d.commits.finish(st)
    }
    fn close_has_work(st: &BlockState, ino: Ino, fh: u64, closer: Option<u32>) -> bool {
        st.f2fs_ends_at(ino, fh, closer)
    }
    /// Aborts the F2FS atomic write that handle `fh` started on `ino`, if any.
    fn closed(st: &mut BlockState, ino: Ino, fh: u64, closer: Option<u32>) {
        if !st.f2fs_ends_at(ino, fh, closer) {
            return;
        }
        let (r, ..) = st.ext.f2fs.remove(&ino).expect("checked");
        if let Err(e) = st.abort_region(r) {
            eprintln!("intactfs: aborting the atomic write of inode {ino}: {e:?}");
        }
    }
    fn unmounting(st: &mut State<Self>) {
        st.fail_waiters();
    }
    fn tmpfile(&mut self, s: StreamId, parent: Ino, mode: u32, o: Owner) -> FsResult<Attr> {
        self.create_tmpfile(s, parent, mode, o)
    }
    fn seek_data(&self, ino: Ino, off: u64, data: bool) -> FsResult<u64> {
        Fs::seek_data(self, ino, off, data)
    }
    fn allocate(
        &mut self,
        s: StreamId,
        ino: Ino,
        off: u64,
        len: u64,
        keep_size: bool,
    ) -> FsResult<()> {
        Fs::fallocate(self, s, ino, off, len, keep_size)
    }
    fn punch_hole(&mut self, s: StreamId, ino: Ino, off: u64, len: u64) -> FsResult<()> {
        Fs::punch_hole(self, s, ino, off, len)
    }
}

/// SETSTREAM, GETSTREAM, STREAMSYNC (ccfs).
fn stream_ioctl(st: &mut BlockState, call: &IoctlCall, s: StreamId) -> Result<Vec<u8>, Errno> {
    match call.cmd {
        control::IOC_SETSTREAM => {
            let a = StreamArg::decode(call.in_data).ok_or(Errno::EINVAL)?;
            // The init stream is every other program's: nobody may turn off its fsync or
            // make it optimistic. IGNORE_FSYNC already says what an fsync does; both at
            // once is a mistake.
            if a.flags & !FLAGS_ALL != 0
                || a.flags == FLAGS_ALL
                || (a.id == intactfs::INIT_STREAM && a.flags != 0)
                || a.id >= intactfs::REGION_BASE
            {
                return Err(Errno::EINVAL);
            }
            // Leaving a region is its commit or abort.
            if st.ext.regions.contains_key(&s) {
                return Err(Errno::EBUSY);
            }
            st.procs()
                .set(call.who.pid, a.id)
                .map_err(|_| Errno::ESRCH)?;
            let flags = StreamFlags {
                ignore_fsync: a.flags & FLAG_IGNORE_FSYNC != 0,
                fsync_as_osync: a.flags & FLAG_FSYNC_AS_OSYNC != 0,
            };
            st.fs()?.set_stream_flags(a.id, flags);
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
            fs.getattr(call.ino).map_err(|e| errno(&e))?;
            fs.streamsync(s).map_err(|e| errno(&e)).map(|_| Vec::new())
        }
        _ => unreachable!("stream_ioctl: dispatched by command"),
    }
}

/// OSYNC, DSYNC, DURABLE (OptFS). A DURABLE that waits keeps `reply`, answered by
/// [`BlockState::notify`] after the flush that makes its ticket durable.
fn durability_ioctl(
    st: &mut BlockState,
    call: &IoctlCall,
    s: StreamId,
    reply: &mut Option<ReplyIoctl>,
) -> Result<Vec<u8>, Errno> {
    let fs = st.fs()?;
    match call.cmd {
        control::IOC_OSYNC => fs
            .osync(s, call.ino)
            .map(|t| t.to_ne_bytes().to_vec())
            .map_err(|e| errno(&e)),
        control::IOC_DSYNC => fs
            .dsync(s, call.ino)
            .map(|_| Vec::new())
            .map_err(|e| errno(&e)),
        control::IOC_DURABLE => {
            let a = DurableArg::decode(call.in_data).ok_or(Errno::EINVAL)?;
            fs.getattr(call.ino).map_err(|e| errno(&e))?;
            // A ticket never issued would never become durable.
            if a.flags & !DURABLE_WAIT != 0 || a.ticket > fs.written_ticket() {
                return Err(Errno::EINVAL);
            }
            let durable = fs.durable_ticket();
            if a.flags & DURABLE_WAIT != 0 && a.ticket > durable {
                // At the latest when the durability timeout expires.
                let r = reply.take().expect("not yet answered");
                st.ext.waiters.push((a.ticket, r));
                return Ok(Vec::new());
            }
            Ok(DurableArg {
                ticket: durable,
                flags: 0,
            }
            .encode()
            .to_vec())
        }
        _ => unreachable!("durability_ioctl: dispatched by command"),
    }
}

/// BEGIN, COMMIT, ABORT, ADD (CFS atomic regions of a process group).
fn region_ioctl(st: &mut BlockState, call: &IoctlCall, s: StreamId) -> Result<Vec<u8>, Errno> {
    let (pid, ino) = (call.who.pid, call.ino);
    match call.cmd {
        control::IOC_BEGIN => {
            st.fs()?.getattr(ino).map_err(|e| errno(&e))?;
            if st.fs()?.is_region(s) {
                return Err(Errno::EALREADY);
            }
            let r = st.fs()?.region_begin().map_err(|e| errno(&e))?;
            let entered = st.procs().enter(pid, r);
            let Ok((tgid, start, prev)) = entered else {
                let _ = st.abort_region(r);
                return Err(Errno::ESRCH);
            };
            st.ext.regions.insert(r, RegionOwner { tgid, start, prev });
            Ok(Vec::new())
        }
        control::IOC_COMMIT => st.end_region(pid, s, true).map(|_| Vec::new()),
        control::IOC_ABORT => st.end_region(pid, s, false).map(|_| Vec::new()),
        control::IOC_ADD => {
            // A region of this process group on this mount ("another mount": EXDEV).
            let r = st.caller_region(s).map_err(|_| Errno::EXDEV)?;
            if st.fs()?.getattr(ino).map_err(|e| errno(&e))?.kind != FileType::File {
                return Err(Errno::EINVAL);
            }
            // The region's abort would undo other processes' writes to the file: only a
            // caller that may write it may add it.
            if !st.handles.writable(call.fh) {
                return Err(Errno::EBADF);
            }
            st.fs()?
                .region_add(r, ino)
                .map(|_| Vec::new())
                .map_err(|e| errno(&e))
        }
        _ => unreachable!("region_ioctl: dispatched by command"),
    }
}

/// Whether handle `fh` may issue F2FS `cmd` on `ino`; Ok(true) if the file's atomic write
/// was started through it, Ok(false) if the file has none.
fn f2fs_owner_check(st: &BlockState, ino: Ino, fh: u64, cmd: u32) -> Result<bool, Errno> {
    // A read-only descriptor also sends no FUSE_FLUSH at close (`open_flags`), which is
    // where an unfinished atomic write is aborted.
    if !st.handles.writable(fh) {
        return Err(Errno::EBADF);
    }
    match st.ext.f2fs.get(&ino) {
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

/// The F2FS atomic-write ioctls on a regular file, over regions. START, COMMIT and ABORT
/// need a writable descriptor (EBADF), and COMMIT and ABORT act only on the atomic write
/// started through the same handle (EINVAL for another handle's): the handle is the atomic
/// write's owner (docs/fs-api.md, "Who may call what").
fn f2fs_ioctl(st: &mut BlockState, call: &IoctlCall, s: StreamId) -> Result<Vec<u8>, Errno> {
    let (ino, fh, cmd) = (call.ino, call.fh, call.cmd);
    if st.fs()?.getattr(ino).map_err(|e| errno(&e))?.kind != FileType::File {
        return Err(Errno::EINVAL);
    }
    if cmd == control::F2FS_IOC_GET_FEATURES {
        return Ok(control::F2FS_FEATURE_ATOMIC_WRITE.to_ne_bytes().to_vec());
    }
    let started_here = f2fs_owner_check(st, ino, fh, cmd)?;
    match cmd {
        control::F2FS_IOC_START_ATOMIC_WRITE => {
            if started_here {
                return Ok(Vec::new()); // already atomic, as on F2FS
            }
            if st.ext.regions.contains_key(&s) {
                // Inside a process-group region: regions do not nest.
                return Err(Errno::EBUSY);
            }
            let r = st.fs()?.region_begin().map_err(|e| errno(&e))?;
            if let Err(e) = st.fs()?.region_add(r, ino) {
                let _ = st.abort_region(r);
                return Err(errno(&e));
            }
            let tgid = crate::procs::tgid_of(call.who.pid);
            st.ext.f2fs.insert(ino, (r, fh, tgid));
            Ok(Vec::new())
        }
        control::F2FS_IOC_COMMIT_ATOMIC_WRITE => match st.ext.f2fs.remove(&ino) {
            Some((r, h, _)) => {
                assert_eq!(h, fh, "f2fs_owner_check: only the starting handle ends it");
                st.fs()?
                    .region_commit(r)
                    .map(|_| Vec::new())
                    .map_err(|e| errno(&e))
            }
            // Not atomic: F2FS syncs the file.
            None => st
                .fs()?
                .fsync(s, ino, false)
                .map(|_| Vec::new())
                .map_err(|e| errno(&e)),
        },
        control::F2FS_IOC_ABORT_VOLATILE_WRITE => match st.ext.f2fs.remove(&ino) {
            Some((r, h, _)) => {
                assert_eq!(h, fh, "f2fs_owner_check: only the starting handle ends it");
                st.abort_region(r).map(|_| Vec::new())
            }
            None => Ok(Vec::new()),
        },
        _ => Err(Errno::ENOTTY),
    }
}
