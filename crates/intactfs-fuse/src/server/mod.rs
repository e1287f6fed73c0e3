//! One FUSE server for every engine: `fuser::Filesystem` over any [`intactfs_types::Engine`].
//!
//! The server does what every engine needs the same way: the kernel's references to
//! inodes (each one an engine open, so an unlinked file lives until the kernel forgets
//! it), file handles, owners and set-group-id directories, clearing set-user-id, names,
//! data, extended attributes, readdir with cookies, statfs, and the refusal of control
//! calls an engine lacks ([`crate::control::refusal`], from [`Engine::capabilities`]).
//! What differs per engine is behind [`Served`], implemented by the block engine
//! ([`crate::block`]: ccfs streams, OptFS osync/dsync, CFS regions, commits outside the
//! lock) and the pmem engine ([`crate::pmem`]: FCFS AD-transactions and their routing).
//!
//! * [`attr`]: the kernel's view of attributes and times.
//! * [`files`]: kernel references and open file handles.
//! * [`namespace`]: lookup, forget, create, link, unlink, rename, readdir.
//! * [`data`]: setattr, open/close, read, write, fsync, and the block engine's extras.
//! * [`xattr`]: extended attributes.
//! * [`filesystem`]: the `fuser::Filesystem` implementation, one line per request.

pub mod attr;
mod data;
pub mod files;
mod filesystem;
mod namespace;
mod xattr;

use crate::procs::ProcTable;
use files::{Handles, Refs};
use fuser::{Errno, INodeNo, ReplyIoctl, Request};
use intactfs_types::{Attr, Engine, FsError, Ino, Owner, Result as FsResult};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use attr::{negative_attr, TTL};

/// The inode number of the root directory on every engine.
pub const ROOT: Ino = 1;

/// Who issued a request: its thread and credentials.
#[derive(Clone, Copy, Debug)]
pub struct Who {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Who {
    pub fn of(req: &Request) -> Who {
        Who {
            pid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

/// A control call (ioctl) as the engine's hook sees it.
pub struct IoctlCall<'a> {
    pub who: Who,
    pub ino: Ino,
    pub fh: u64,
    pub cmd: u32,
    pub in_data: &'a [u8],
}

/// What the kernel must forget of an aborted change: inodes, then (parent, name) entries.
pub type Forget = (Vec<Ino>, Vec<(Ino, Vec<u8>)>);

/// The write lock on the server's state.
pub type Locked<'a, E> = RwLockWriteGuard<'a, State<E>>;

/// What differs between engines behind the one server: where a change goes ([`Engine`]'s
/// `Ctx`), the engine's own control calls, and its commit and flush policy.
pub trait Served: Engine + Sized + Send + Sync + 'static {
    /// Server state of the engine's own interfaces, under the engine's lock.
    type Ext: Send + Sync;
    /// What the server keeps beside the lock (the block engine's committer).
    type Driver: Send + Sync;
    /// Work a write leaves for after its answer (the block engine's commits to write).
    type Pending: Default;

    /// Largest write request.
    const MAX_WRITE: u32;
    /// Keep the kernel's page cache across opens (FOPEN_KEEP_CACHE).
    const KEEP_CACHE: bool;

    /// Where a change by `who` of the objects `objs` goes (0 in `objs`: none); `fh` is the
    /// handle a write comes through. May refuse the change.
    fn ctx(st: &State<Self>, who: &Who, fh: Option<u64>, objs: &[Ino]) -> Result<Self::Ctx, Errno>;
    /// The context of the server's own calls (the release at the kernel's forget).
    fn idle_ctx() -> Self::Ctx;
    /// After a change in `c` of `inos` and of the entries `(parent, name)`.
    fn changed(_st: &mut State<Self>, _c: Self::Ctx, _inos: &[Ino], _entries: &[(Ino, &[u8])]) {}
    /// A read without the write lock, when the engine can do one.
    fn read_shared(&self, ino: Ino, off: u64, len: usize) -> Option<FsResult<Vec<u8>>>;
    /// The errno of a write in `c` that failed with `e`.
    fn write_errno(_st: &State<Self>, _c: Self::Ctx, e: &FsError) -> Errno {
        errno(e)
    }
    /// After a write, still under the lock: commit work, done now or left for later.
    fn write_done(d: &Self::Driver, st: Locked<'_, Self>) -> Result<Self::Pending, Errno>;
    /// The work `write_done` left, after the answer.
    fn write_pending(d: &Self::Driver, p: Self::Pending);
    /// fsync/fdatasync of `ino` in `c`.
    fn sync_file(
        d: &Self::Driver,
        st: Locked<'_, Self>,
        c: Self::Ctx,
        ino: Ino,
        datasync: bool,
    ) -> Result<(), Errno>;
    /// A control call the engine has ([`crate::control::refusal`] refused the others);
    /// may keep `reply` to answer later (it then returns Ok with nothing).
    fn ioctl(
        d: &Self::Driver,
        st: &mut State<Self>,
        call: &IoctlCall,
        reply: &mut Option<ReplyIoctl>,
    ) -> Result<Vec<u8>, Errno>;
    /// After a control call: commits written and flushed (without the lock).
    fn finish(d: &Self::Driver, st: Locked<'_, Self>) -> Result<(), Errno>;
    /// Whether closing handle `fh` of `ino` ends something (then [`Served::closed`] runs
    /// under the write lock). `closer`: the process whose FLUSH this is, None at release.
    fn close_has_work(st: &State<Self>, ino: Ino, fh: u64, closer: Option<u32>) -> bool;
    fn closed(st: &mut State<Self>, ino: Ino, fh: u64, closer: Option<u32>);
    /// At unmount, under the lock, before the engine is taken out of the server: answer
    /// whatever still waits (the connection is gone).
    fn unmounting(_st: &mut State<Self>) {}

    /// O_TMPFILE: a file with no name, opened by the engine for the kernel.
    fn tmpfile(&mut self, _c: Self::Ctx, _parent: Ino, _mode: u32, _o: Owner) -> FsResult<Attr> {
        Err(FsError::Unsupported("O_TMPFILE".into()))
    }
    /// SEEK_DATA (`data`) or SEEK_HOLE from `off`.
    fn seek_data(&self, _ino: Ino, _off: u64, _data: bool) -> FsResult<u64> {
        Err(FsError::Unsupported("SEEK_DATA and SEEK_HOLE".into()))
    }
    /// fallocate mode 0 or KEEP_SIZE (`keep_size`: without growing the file).
    fn allocate(
        &mut self,
        _c: Self::Ctx,
        _ino: Ino,
        _off: u64,
        _len: u64,
        _keep_size: bool,
    ) -> FsResult<()> {
        Err(FsError::Unsupported("fallocate".into()))
    }
    /// fallocate PUNCH_HOLE | KEEP_SIZE: the range reads as zeros, the size stays.
    fn punch_hole(&mut self, _c: Self::Ctx, _ino: Ino, _off: u64, _len: u64) -> FsResult<()> {
        Err(FsError::Unsupported("fallocate".into()))
    }
}

/// The engine and the server's bookkeeping, behind one lock.
pub struct State<E: Served> {
    pub fs: Option<E>,
    /// Kernel references to inodes (each held open in the engine).
    pub(crate) refs: Refs,
    /// Open file handles.
    pub(crate) handles: Handles,
    /// Which stream each process is in (streams only).
    procs: Mutex<ProcTable>,
    /// First failure that makes further changes unsafe, for the log.
    pub failure: Option<String>,
    /// Tells the kernel to drop what an aborted change left in its caches.
    pub notifier: Option<fuser::Notifier>,
    /// Aborted changes the kernel has not yet been told to forget.
    pub invalidate: Vec<Forget>,
    pub ext: E::Ext,
}

impl<E: Served> State<E> {
    pub fn new(fs: E, ext: E::Ext) -> State<E> {
        State {
            fs: Some(fs),
            refs: Refs::default(),
            handles: Handles::default(),
            procs: Mutex::new(ProcTable::default()),
            failure: None,
            notifier: None,
            invalidate: Vec::new(),
            ext,
        }
    }

    pub fn fs(&mut self) -> Result<&mut E, Errno> {
        self.fs.as_mut().ok_or(Errno::EIO)
    }

    pub fn fs_ref(&self) -> Result<&E, Errno> {
        self.fs.as_ref().ok_or(Errno::EIO)
    }

    pub fn procs(&self) -> MutexGuard<'_, ProcTable> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the kernel must forget of aborted changes, with the notifier to tell it: sent
    /// by the request that aborted before it answers, but after the lock is released (the
    /// kernel may wait for a request of the same inode, which needs the lock).
    pub fn take_invalidations(&mut self) -> Option<(fuser::Notifier, Vec<Forget>)> {
        if self.invalidate.is_empty() {
            return None;
        }
        let list = std::mem::take(&mut self.invalidate);
        self.notifier.clone().map(|n| (n, list))
    }
}

/// Sends the invalidations of [`State::take_invalidations`] (without the lock held).
pub fn invalidate(pending: Option<(fuser::Notifier, Vec<Forget>)>) {
    let Some((n, list)) = pending else { return };
    for (inodes, entries) in list {
        for i in inodes {
            let _ = n.inval_inode(INodeNo(i), 0, 0);
        }
        for (p, name) in entries {
            let _ = n.inval_entry(INodeNo(p), OsStr::from_bytes(&name));
        }
    }
}

/// The errno of an engine error. A failed device write or a broken invariant (which
/// poisons the mount) is also logged, since the caller sees only EIO.
pub(crate) fn errno(e: &FsError) -> Errno {
    if matches!(
        e,
        FsError::Internal(_) | FsError::Device(_) | FsError::Pmem(_)
    ) {
        eprintln!("intactfs: {e}");
    }
    Errno::from_i32(e.errno())
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

/// The one server: the engine's state behind a lock, and the engine's driver.
pub struct Server<E: Served> {
    pub state: Arc<RwLock<State<E>>>,
    pub driver: E::Driver,
    /// Serve extended attributes. Off, the daemon answers ENOSYS once and the kernel stops
    /// asking: without FUSE_HANDLE_KILLPRIV_V2 the kernel otherwise asks for
    /// `security.capability` before every write, one more round trip each.
    xattr: bool,
    caps: Caps,
}

impl<E: Served> Server<E> {
    pub fn new(state: Arc<RwLock<State<E>>>, driver: E::Driver, xattr: bool, caps: Caps) -> Self {
        Server {
            state,
            driver,
            xattr,
            caps,
        }
    }

    /// The engine to change. A panic while holding the lock left the engine in an unknown
    /// state: refuse.
    fn lock(&self) -> Result<Locked<'_, E>, Errno> {
        self.state.write().map_err(|_| Errno::EIO)
    }

    /// For calls that only look: several at once.
    fn read(&self) -> Result<RwLockReadGuard<'_, State<E>>, Errno> {
        self.state.read().map_err(|_| Errno::EIO)
    }

    /// Locks the engine and finds where a change of `objs` by `who` goes.
    fn begin(&self, who: &Who, objs: &[Ino]) -> Result<(Locked<'_, E>, E::Ctx), Errno> {
        let st = self.lock()?;
        let c = E::ctx(&st, who, None, objs)?;
        Ok((st, c))
    }
}
