//! The FUSE mount of a persistent-memory image: `fuser::Filesystem` over
//! [`intactfs_pmem::PmemFs`] on a [`PmemFile`], with FCFS AD-transactions (`002` §III-B)
//! through the TX_* ioctls of [`crate::control`] (docs/fs-api.md, "AD-transactions on
//! persistent memory").
//!
//! * The engine sits behind one mutex: it is single-threaded (`&mut self`), and every
//!   call is durable when it returns, so there is nothing to do outside the lock.
//! * **Routing** (002 §III-G relates an fd to its transaction): a call that changes a file
//!   or directory an open transaction owns ([`PmemFs::owner_of`]: named in TX_BEGIN/TX_ADD,
//!   or changed in it) goes into that transaction, whoever issues it; every other call is
//!   a legacy call, its own transaction, committed before it returns. For a name operation
//!   the owner of the parent directory (then of the entry's inode) decides.
//! * **Ownership**: a transaction belongs to the process (thread group) that began it; the
//!   daemon aborts it when that process is gone (checked every [`REAP_INTERVAL`]), as it
//!   does for atomic regions. Only that process and its descendants may add to, commit or
//!   abort it (EPERM), whatever id they pass; TX_BEGIN and TX_ADD also need the right to
//!   change the file: a descriptor open for writing (EBADF), or for a directory the
//!   permission to write it (EACCES). docs/fs-api.md, "Who may call what".
//! * **Ids** are 48 bits from the OS's random source (getrandom) under a per-mount tag in bits 48..62,
//!   so that an id used on another mount is recognised (TX_ADD: EXDEV) instead of naming a
//!   stranger there, and an id cannot be guessed from another (the owner check, not the
//!   id, is what keeps other processes out).
//! * **Inodes**: the engine reuses an inode number once its file is gone; each create
//!   gives the number a new FUSE generation so that the kernel never confuses the two.
//!   The kernel's page cache is dropped at every open (no FOPEN_KEEP_CACHE) and told to
//!   forget what an aborted transaction changed.

use crate::control;
use crate::mount::{
    check_mountpoint, detach_on_signals, lock_image, session_config, MountConfig, MountError,
};
use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, IoctlFlags, KernelConfig, LockOwner,
    OpenAccMode, OpenFlags, RenameFlags as FRename, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, Session, TimeOrNow, WriteFlags,
};
use intactfs_device::PmemFile;
use intactfs_pmem::{
    Attr, FileType, Ino, MountReport, PmemFs, PmemFsError, SetAttr, Stats, TxId, ROOT,
};
use intactfs_types::Engine;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The superblock magic of a pmem image (the first 8 bytes).
pub const PMEM_MAGIC: &[u8; 8] = b"INTPMEM1";
/// How long the kernel may cache attributes and entries.
pub const TTL: Duration = Duration::from_secs(1);
/// Largest write request: one legacy write is one transaction, which needs a log entry per
/// 4 KiB block it writes; 128 KiB (32 entries) fits the smallest log mkfs makes.
pub const MAX_WRITE: u32 = 128 << 10;
/// How often the daemon looks for transactions whose process is gone.
pub const REAP_INTERVAL: Duration = Duration::from_millis(200);

/// Whether `path` holds a pmem image (its superblock magic `INTPMEM1`).
pub fn is_pmem_image(path: &Path) -> bool {
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut b = [0u8; 8];
    f.read_exact(&mut b).is_ok() && &b == PMEM_MAGIC
}

/// The process that began a transaction, and what the transaction changed that the kernel
/// may have cached (told to forget it when the transaction aborts).
struct TxOwner {
    /// The id programs name it by ([`PmemState::ids`] maps it back).
    id: u64,
    tgid: u32,
    start: u64,
    /// The beginner's user and group: what the transaction may claim by changing it.
    uid: u32,
    gid: u32,
    inodes: BTreeSet<Ino>,
    entries: Vec<(Ino, Vec<u8>)>,
}

/// Who issued a request: its thread and credentials.
#[derive(Clone, Copy)]
struct Caller {
    tid: u32,
    uid: u32,
    gid: u32,
}

impl Caller {
    fn of(req: &Request) -> Caller {
        Caller {
            tid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

/// What the kernel must forget of an aborted transaction: inodes, then (parent, name).
type Forget = (Vec<Ino>, Vec<(Ino, Vec<u8>)>);

/// The engine and the daemon's bookkeeping, behind one mutex.
pub struct PmemState {
    pub fs: Option<PmemFs<PmemFile>>,
    /// Open transactions (engine ids) → their owner.
    txs: HashMap<u64, TxOwner>,
    /// The ids programs hold (random, see the module comment) → the engine's.
    ids: HashMap<u64, TxId>,
    /// File handles opened for writing (TX_BEGIN, TX_ADD and the F2FS ioctls need one).
    writable: HashSet<u64>,
    /// FUSE generation of each inode number created during this mount.
    gens: HashMap<Ino, u64>,
    next_gen: u64,
    /// Directory → its parent, as far as seen (for "..").
    parents: HashMap<Ino, Ino>,
    pub notifier: Option<fuser::Notifier>,
    invalidate: Vec<Forget>,
    /// This mount's tag in transaction ids (bits 48..62).
    tag: u64,
    /// F2FS atomic writes: file → (its transaction, the handle that started it, the
    /// process that started it: only its FLUSH of the handle ends it, see
    /// [`crate::procs::closer_ends`]).
    f2fs: HashMap<Ino, (TxId, u64, u32)>,
    /// The next file handle (each open gets its own, for the F2FS atomic writes).
    next_fh: u64,
}

use crate::fs::errno;

/// The errno of an engine error; refusals a program may not expect (ENOSPC, EBUSY, EIO,
/// EINVAL, EFBIG) are also written to the daemon's log with the engine's message.
fn fail(what: &str, e: PmemFsError) -> Errno {
    if !matches!(
        e,
        PmemFsError::NotFound(_)
            | PmemFsError::Exists(_)
            | PmemFsError::NotDir(_)
            | PmemFsError::IsDir(_)
            | PmemFsError::NotEmpty(_)
            | PmemFsError::NameTooLong(_)
    ) {
        eprintln!("intactfs-pmem: {what}: {e}");
    }
    errno(&e)
}

use crate::fs::{file_attr, reply_statfs, time_arg};

/// Bits of a transaction id below the mount tag: random.
const ID_RANDOM_BITS: u32 = 48;

/// 64 bits from the OS's random source (a transaction id must not be guessable):
/// getrandom(2), the source of /dev/urandom without opening it for every transaction.
fn random_u64() -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: the kernel writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if n as usize != b.len() {
        return Err(std::io::Error::other(format!(
            "getrandom gave {n} of 8 bytes"
        )));
    }
    Ok(u64::from_ne_bytes(b))
}

/// A tag for this mount's transaction ids: 15 bits, never 0.
fn mount_tag() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in t
        .to_le_bytes()
        .iter()
        .chain(std::process::id().to_le_bytes().iter())
    {
        h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
    ((h ^ (h >> 31)) & 0x7fff).max(1)
}

impl PmemState {
    fn fs(&mut self) -> Result<&mut PmemFs<PmemFile>, Errno> {
        self.fs.as_mut().ok_or(Errno::EIO)
    }

    fn fs_ref(&self) -> Result<&PmemFs<PmemFile>, Errno> {
        self.fs.as_ref().ok_or(Errno::EIO)
    }

    fn generation(&self, ino: Ino) -> Generation {
        Generation(self.gens.get(&ino).copied().unwrap_or(0))
    }

    /// `ino` was just created: a new generation (the number may have been used before).
    fn created(&mut self, ino: Ino) -> Generation {
        self.next_gen += 1;
        self.gens.insert(ino, self.next_gen);
        Generation(self.next_gen)
    }

    /// The open transaction a change of these objects belongs to (the first one owned).
    fn route(&self, inos: &[Ino]) -> Option<TxId> {
        let fs = self.fs.as_ref()?;
        inos.iter().find_map(|&i| fs.owner_of(i))
    }

    /// Remembers what a call in `tx` changed, for the kernel to forget at an abort.
    fn note(&mut self, tx: Option<TxId>, inos: &[Ino], entries: &[(Ino, &[u8])]) {
        let Some(t) = tx.and_then(|t| self.txs.get_mut(&t.0)) else {
            return;
        };
        t.inodes.extend(inos.iter().copied());
        t.entries
            .extend(entries.iter().map(|(p, n)| (*p, n.to_vec())));
    }

    /// The id programs know open transaction `t` by (0: not open).
    fn user_id(&self, t: TxId) -> u64 {
        self.txs.get(&t.0).map_or(0, |o| o.id)
    }

    /// Whether a transaction id a program passed carries this mount's tag.
    fn of_this_mount(&self, id: u64) -> bool {
        id >> ID_RANDOM_BITS == self.tag
    }

    /// The engine's id of an open transaction's id a program passed.
    fn engine_id(&self, id: u64) -> Option<TxId> {
        let t = self.ids.get(&id).copied()?;
        assert_eq!(self.user_id(t), id, "ids and txs name each other");
        Some(t)
    }

    /// Records the engine's new transaction `t`, begun by thread `tid` over `ino`, under
    /// a fresh random id (returned). The transaction is aborted if the caller is gone or
    /// the random source fails.
    fn register(&mut self, t: TxId, caller: Caller, ino: Ino) -> Result<u64, Errno> {
        let Caller { tid, uid, gid } = caller;
        assert!(
            !self.txs.contains_key(&t.0),
            "transaction {t} registered twice"
        );
        let owner = crate::procs::process_of(tid);
        let id = self.fresh_id();
        let (Some((tgid, start)), Ok(id)) = (owner, id.as_ref()) else {
            let _ = self.fs()?.tx_abort(t);
            if let Err(e) = id {
                eprintln!("intactfs-pmem: drawing a random transaction id (getrandom): {e}");
                return Err(Errno::EIO);
            }
            return Err(Errno::ESRCH);
        };
        assert!((*id as i64) > 0, "ids are positive as a C long");
        self.ids.insert(*id, t);
        self.txs.insert(
            t.0,
            TxOwner {
                id: *id,
                tgid,
                start,
                uid,
                gid,
                inodes: BTreeSet::from([ino]),
                entries: Vec::new(),
            },
        );
        Ok(*id)
    }

    /// An id no open transaction has: this mount's tag over 48 random bits, not all 0.
    fn fresh_id(&self) -> std::io::Result<u64> {
        const RANDOM_MASK: u64 = (1 << ID_RANDOM_BITS) - 1;
        // Bounded: with fewer than 2^20 open transactions a draw collides with a chance
        // below 2^-28, so 8 draws all colliding means the random source is broken.
        for _ in 0..8 {
            let r = random_u64()? & RANDOM_MASK;
            let id = self.tag << ID_RANDOM_BITS | r;
            if r != 0 && !self.ids.contains_key(&id) {
                return Ok(id);
            }
        }
        Err(std::io::Error::other(
            "8 random ids in a row were taken or 0",
        ))
    }

    /// Whether thread `tid` may add to, commit or abort open transaction `t`: its owner
    /// process or a descendant (EPERM otherwise, whoever the caller is, root too).
    fn check_owner(&self, t: TxId, tid: u32, what: &str) -> Result<(), Errno> {
        let o = self
            .txs
            .get(&t.0)
            .expect("an open transaction has an owner");
        if crate::procs::descends_from(tid, o.tgid, o.start) {
            return Ok(());
        }
        eprintln!(
            "intactfs-pmem: {what} of transaction {} by thread {tid}: it belongs to process {}, and the caller is neither that process nor its descendant (EPERM)",
            o.id, o.tgid
        );
        Err(Errno::EPERM)
    }

    /// The open transaction a program's id names (EINVAL: unknown, finished, or another
    /// mount's; the daemon's log says which).
    fn open_tx_of(&self, id: u64, what: &str) -> Result<TxId, Errno> {
        self.engine_id(id).ok_or_else(|| {
            let whose = if self.of_this_mount(id) {
                "not an open transaction (unknown, committed or aborted)"
            } else {
                "not a transaction of this mount"
            };
            eprintln!("intactfs-pmem: {what} of transaction {id}: {whose} (EINVAL)");
            Errno::EINVAL
        })
    }

    /// Whether a call routed into `tx` may claim the objects `inos` it changes: those the
    /// transaction does not own yet must be ones its beginner could have added (a file
    /// it may write, a directory as in [`Self::check_may_change`]), else EACCES. Without
    /// this, a transaction could claim a shared sticky directory by renaming an entry
    /// into it, and its abort would then undo other users' entries made there.
    fn check_claims(&self, tx: Option<TxId>, inos: &[Ino]) -> Result<(), Errno> {
        let Some(t) = tx else { return Ok(()) };
        let o = self.txs.get(&t.0).expect("a routed transaction is open");
        let fs = self.fs_ref()?;
        for &i in inos
            .iter()
            .filter(|&&i| i != 0 && fs.owner_of(i) != Some(t))
        {
            let a = fs.getattr(i).map_err(|e| errno(&e))?;
            let (uid, gid, pid) = (o.uid, o.gid, o.tgid);
            let ok = match a.kind {
                FileType::Dir => crate::procs::may_claim_dir(uid, gid, pid, a.mode, a.uid, a.gid),
                _ => crate::procs::may_write(uid, gid, pid, a.mode, a.uid, a.gid),
            };
            if !ok {
                eprintln!("intactfs-pmem: a change in transaction {} would make inode {i} part of it, which its process {pid} (uid {uid}) may not change (EACCES)", o.id);
                return Err(Errno::EACCES);
            }
        }
        Ok(())
    }

    /// Whether the caller may put `ino` in a transaction, whose abort would undo other
    /// processes' changes to it: a file through a handle open for writing (EBADF), a
    /// directory if the caller may write it, and a sticky one only its owner (EACCES; a
    /// directory is never open for writing).
    fn check_may_change(&self, req: &Request, ino: Ino, fh: u64) -> Result<(), Errno> {
        let a = self.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?;
        match a.kind {
            FileType::Dir => {
                let w = crate::procs::may_claim_dir(
                    req.uid(),
                    req.gid(),
                    req.pid(),
                    a.mode,
                    a.uid,
                    a.gid,
                );
                w.then_some(()).ok_or(Errno::EACCES)
            }
            _ if self.writable.contains(&fh) => Ok(()),
            _ => Err(Errno::EBADF),
        }
    }

    /// Aborts `t` (open, ours) and queues what the kernel must forget.
    fn abort_tx(&mut self, t: TxId) -> Result<(), PmemFsError> {
        let r = match self.fs.as_mut() {
            Some(fs) => fs.tx_abort(t),
            None => return Ok(()),
        };
        if let Some(o) = self.txs.remove(&t.0) {
            self.ids.remove(&o.id);
            self.invalidate
                .push((o.inodes.into_iter().collect(), o.entries));
        }
        self.f2fs.retain(|_, f| f.0 != t);
        r
    }

    /// Commits `t` (open, ours); once committed it is forgotten.
    fn commit_tx(&mut self, t: TxId) -> Result<(), PmemFsError> {
        self.fs
            .as_mut()
            .ok_or_else(|| PmemFsError::Internal("no engine".into()))?
            .tx_commit(t)?;
        if let Some(o) = self.txs.remove(&t.0) {
            self.ids.remove(&o.id);
        }
        self.f2fs.retain(|_, f| f.0 != t);
        Ok(())
    }

    /// A new file handle for an open, for reading only or also for writing.
    fn new_handle(&mut self, writable: bool) -> FileHandle {
        self.next_fh += 1;
        if writable {
            self.writable.insert(self.next_fh);
        }
        FileHandle(self.next_fh)
    }

    /// Whether `t` is an F2FS atomic write (started by F2FS_IOC_START_ATOMIC_WRITE).
    fn is_f2fs(&self, t: TxId) -> bool {
        self.f2fs.values().any(|f| f.0 == t)
    }

    /// Aborts the F2FS atomic write that handle `fh` started on `ino`, if still open (the
    /// close of the starting descriptor, as on F2FS).
    fn end_f2fs_on_close(&mut self, ino: Ino, fh: u64, closer: Option<u32>) {
        let Some(&(t, h, starter)) = self.f2fs.get(&ino) else {
            return;
        };
        if h != fh || !crate::procs::closer_ends(closer, starter) {
            return;
        }
        let id = self.user_id(t);
        match self.abort_tx(t) {
            Ok(()) => eprintln!("intactfs-pmem: F2FS atomic write of inode {ino} (transaction {id}) aborted: its descriptor was closed before COMMIT_ATOMIC_WRITE"),
            Err(e) => eprintln!("intactfs-pmem: aborting the F2FS atomic write of inode {ino} (transaction {id}) at close: {e}"),
        }
    }

    /// The F2FS atomic-write ioctls on `ino` through handle `fh`: one AD-transaction per
    /// atomic write (docs/fs-api.md, "F2FS atomic writes on a pmem mount"). START, COMMIT
    /// and ABORT need a handle open for writing (EBADF); COMMIT and ABORT act only on the
    /// atomic write started through the same handle (EINVAL for another handle's).
    fn f2fs_ioctl(&mut self, req: &Request, ino: Ino, fh: u64, cmd: u32) -> Result<Vec<u8>, Errno> {
        if self.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?.kind != FileType::File {
            return Err(Errno::EINVAL);
        }
        if cmd == control::F2FS_IOC_GET_FEATURES {
            return Ok(control::F2FS_FEATURE_ATOMIC_WRITE.to_ne_bytes().to_vec());
        }
        if !self.writable.contains(&fh) {
            return Err(Errno::EBADF);
        }
        let started = self.f2fs.get(&ino).copied();
        if let Some((t, h, _)) = started {
            if h != fh && cmd != control::F2FS_IOC_START_ATOMIC_WRITE {
                eprintln!("intactfs-pmem: F2FS ioctl {cmd:#x} on inode {ino} through handle {fh}: its atomic write (transaction {}) was started through handle {h} (EINVAL)", self.user_id(t));
                return Err(Errno::EINVAL);
            }
        }
        match cmd {
            control::F2FS_IOC_START_ATOMIC_WRITE => {
                if let Some((t, ..)) = started {
                    eprintln!("intactfs-pmem: START_ATOMIC_WRITE on inode {ino}: its atomic write (transaction {}) is still open (EBUSY)", self.user_id(t));
                    return Err(Errno::EBUSY);
                }
                let t = self
                    .fs()?
                    .tx_begin(&[ino])
                    .map_err(|e| fail(&format!("START_ATOMIC_WRITE on inode {ino}"), e))?;
                self.register(t, Caller::of(req), ino)?;
                let starter = crate::procs::tgid_of(req.pid());
                self.f2fs.insert(ino, (t, fh, starter));
                Ok(Vec::new())
            }
            control::F2FS_IOC_COMMIT_ATOMIC_WRITE => match started {
                // Kept on failure: the caller's ABORT_VOLATILE_WRITE then undoes it.
                Some((t, ..)) => self.commit_tx(t).map(|_| Vec::new()).map_err(|e| {
                    fail(
                        &format!(
                            "COMMIT_ATOMIC_WRITE of inode {ino} (transaction {})",
                            self.user_id(t)
                        ),
                        e,
                    )
                }),
                // Not atomic: F2FS syncs the file (here every call is already durable).
                None => self
                    .fs_ref()?
                    .fsync(ino)
                    .map(|_| Vec::new())
                    .map_err(|e| errno(&e)),
            },
            control::F2FS_IOC_ABORT_VOLATILE_WRITE => match started {
                Some((t, ..)) => self.abort_tx(t).map(|_| Vec::new()).map_err(|e| {
                    fail(
                        &format!(
                            "ABORT_VOLATILE_WRITE of inode {ino} (transaction {})",
                            self.user_id(t)
                        ),
                        e,
                    )
                }),
                None => Ok(Vec::new()),
            },
            _ => Err(Errno::ENOTTY),
        }
    }

    /// Transactions whose process exited (or was killed) are aborted.
    pub fn reap(&mut self) {
        let gone: Vec<(u64, u32)> = self
            .txs
            .iter()
            .filter(|(_, o)| !crate::procs::alive(o.tgid, o.start))
            .map(|(t, o)| (*t, o.tgid))
            .collect();
        for (t, pid) in gone {
            let id = self.user_id(TxId(t));
            match self.abort_tx(TxId(t)) {
                Ok(()) => eprintln!("intactfs-pmem: transaction {id} aborted: process {pid}, which began it, exited with it open"),
                Err(e) => eprintln!("intactfs-pmem: aborting transaction {id} of exited process {pid}: {e}"),
            }
        }
    }

    /// What the kernel must forget, with the notifier to tell it (sent without the lock).
    pub fn take_invalidations(&mut self) -> Option<(fuser::Notifier, Vec<Forget>)> {
        if self.invalidate.is_empty() {
            return None;
        }
        let list = std::mem::take(&mut self.invalidate);
        self.notifier.clone().map(|n| (n, list))
    }
}

/// Sends the invalidations of [`PmemState::take_invalidations`].
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

pub struct PmemFuse {
    pub state: Arc<Mutex<PmemState>>,
}

impl PmemFuse {
    pub fn new(fs: PmemFs<PmemFile>) -> PmemFuse {
        let state = PmemState {
            fs: Some(fs),
            txs: HashMap::new(),
            gens: HashMap::new(),
            next_gen: 0,
            parents: HashMap::new(),
            notifier: None,
            invalidate: Vec::new(),
            tag: mount_tag(),
            ids: HashMap::new(),
            writable: HashSet::new(),
            f2fs: HashMap::new(),
            next_fh: 0,
        };
        PmemFuse {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, PmemState>, Errno> {
        // A panic in a handler poisons the lock: the engine's memory is then not trusted.
        self.state.lock().map_err(|_| Errno::EIO)
    }

    /// A close (FLUSH) or the handle's end (RELEASE): aborts an F2FS atomic write the handle
    /// started and still has open, and tells the kernel to forget what it wrote.
    /// `closer`: the process whose FLUSH this is, None at the release (the last close).
    fn closed(&self, ino: Ino, fh: u64, closer: Option<u32>) {
        invalidate(self.lock().ok().and_then(|mut st| {
            st.end_f2fs_on_close(ino, fh, closer);
            st.take_invalidations()
        }));
    }

    fn entry(reply: ReplyEntry, r: Result<(Attr, Generation), Errno>) {
        match r {
            Ok((a, g)) => reply.entry(&TTL, &file_attr(&a), g),
            Err(e) => reply.error(e),
        }
    }

    fn empty(reply: ReplyEmpty, r: Result<(), Errno>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn make(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        dir: bool,
    ) -> Result<(Attr, Generation), Errno> {
        let mut st = self.lock()?;
        let name = name.as_bytes();
        let tx = st.route(&[parent]);
        let (uid, gid) = (req.uid(), req.gid());
        let fs = st.fs()?;
        let r = if dir {
            fs.mkdir(tx, parent, name, mode & 0o7777, uid, gid)
        } else {
            fs.create(tx, parent, name, mode & 0o7777, uid, gid)
        };
        let a = r.map_err(|e| {
            fail(
                &format!(
                    "creating {:?} in directory {parent}",
                    String::from_utf8_lossy(name)
                ),
                e,
            )
        })?;
        st.note(tx, &[a.ino, parent], &[(parent, name)]);
        if dir {
            st.parents.insert(a.ino, parent);
        }
        let g = st.created(a.ino);
        Ok((a, g))
    }

    fn remove(&self, parent: Ino, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let mut st = self.lock()?;
        let name = name.as_bytes();
        let target = st.fs_ref()?.lookup(parent, name).ok().map(|a| a.ino);
        let tx = st.route(&[parent, target.unwrap_or(0)]);
        st.check_claims(tx, &[parent, target.unwrap_or(0)])?;
        let fs = st.fs()?;
        let r = if dir {
            fs.rmdir(tx, parent, name)
        } else {
            fs.unlink(tx, parent, name)
        };
        r.map_err(|e| {
            fail(
                &format!(
                    "removing {:?} from directory {parent}",
                    String::from_utf8_lossy(name)
                ),
                e,
            )
        })?;
        st.note(tx, &[parent], &[(parent, name)]);
        if let Some(t) = target {
            st.note(tx, &[t], &[]);
        }
        Ok(())
    }

    fn ioctl_tx(
        &self,
        req: &Request,
        ino: Ino,
        fh: u64,
        cmd: u32,
        in_data: &[u8],
    ) -> Result<Vec<u8>, Errno> {
        let mut st = self.lock()?;
        if let Some(e) = control::refusal(cmd, Engine::capabilities(st.fs_ref()?)) {
            return Err(Errno::from_i32(e));
        }
        let arg = || {
            in_data
                .get(..8)
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                .ok_or(Errno::EINVAL)
        };
        match cmd {
            control::IOC_TX_BEGIN => {
                st.check_may_change(req, ino, fh)?;
                let t = st
                    .fs()?
                    .tx_begin(&[ino])
                    .map_err(|e| fail(&format!("TX_BEGIN on inode {ino}"), e))?;
                let id = st.register(t, Caller::of(req), ino)?;
                Ok(id.to_ne_bytes().to_vec())
            }
            control::IOC_TX_ADD => {
                let id = arg()?;
                if !st.of_this_mount(id) {
                    eprintln!("intactfs-pmem: TX_ADD of inode {ino} to transaction {id}: that transaction is not of this mount (EXDEV)");
                    return Err(Errno::EXDEV);
                }
                let t = st.open_tx_of(id, "TX_ADD")?;
                st.check_owner(t, req.pid(), "TX_ADD")?;
                st.check_may_change(req, ino, fh)?;
                st.fs()?
                    .tx_add(t, ino)
                    .map_err(|e| fail(&format!("TX_ADD of inode {ino} to transaction {id}"), e))?;
                st.note(Some(t), &[ino], &[]);
                Ok(Vec::new())
            }
            control::IOC_TX_COMMIT | control::IOC_TX_ABORT => {
                let commit = cmd == control::IOC_TX_COMMIT;
                let what = if commit { "TX_COMMIT" } else { "TX_ABORT" };
                let id = arg()?;
                let t = st.open_tx_of(id, what)?;
                st.check_owner(t, req.pid(), what)?;
                let r = if commit {
                    st.commit_tx(t)
                } else {
                    st.abort_tx(t)
                };
                r.map(|_| Vec::new())
                    .map_err(|e| fail(&format!("{what} of transaction {id}"), e))
            }
            control::F2FS_IOC_GET_FEATURES
            | control::F2FS_IOC_START_ATOMIC_WRITE
            | control::F2FS_IOC_COMMIT_ATOMIC_WRITE
            | control::F2FS_IOC_ABORT_VOLATILE_WRITE => st.f2fs_ioctl(req, ino, fh, cmd),
            // The block engine's stream, osync and region ioctls were refused by
            // `control::refusal` above.
            _ => Err(Errno::ENOTTY),
        }
    }
}

impl fuser::Filesystem for PmemFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_readahead(MAX_WRITE);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let mut st = self.lock()?;
            let a = st
                .fs_ref()?
                .lookup(parent.0, name.as_bytes())
                .map_err(|e| errno(&e))?;
            if a.kind == FileType::Dir {
                st.parents.insert(a.ino, parent.0);
            }
            Ok((a, st.generation(a.ino)))
        })();
        Self::entry(reply, r)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match (|| self.lock()?.fs_ref()?.getattr(ino.0).map_err(|e| errno(&e)))() {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
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
            let mut st = self.lock()?;
            let sa = SetAttr {
                mode: mode.map(|m| m & 0o7777),
                uid,
                gid,
                size,
                atime: time_arg(atime),
                mtime: time_arg(mtime),
            };
            let tx = st.route(&[ino.0]);
            let a = st
                .fs()?
                .setattr(tx, ino.0, &sa)
                .map_err(|e| fail(&format!("setattr of inode {}", ino.0), e))?;
            st.note(tx, &[ino.0], &[]);
            Ok(a)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
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
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if !matches!(mode & 0o170000, 0o100000 | 0) {
            // Regular files and directories only (docs/fs-pmem.md, "Limits").
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        Self::entry(reply, self.make(req, parent.0, name, mode, false))
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
        Self::entry(reply, self.make(req, parent.0, name, mode, true))
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
        match self.make(req, parent.0, name, mode, false) {
            Ok((a, g)) => match self.lock() {
                Ok(mut st) => reply.created(
                    &TTL,
                    &file_attr(&a),
                    g,
                    st.new_handle(writable),
                    FopenFlags::empty(),
                ),
                Err(e) => reply.error(e),
            },
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(reply, self.remove(parent.0, name, false))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(reply, self.remove(parent.0, name, true))
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP))
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP))
    }

    fn rename(
        &self,
        _req: &Request,
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
            // Not in the engine yet: "not here", not "wrong argument".
            if flags.contains(FRename::RENAME_EXCHANGE) {
                return Err(Errno::from_i32(libc::EOPNOTSUPP));
            }
            let mut st = self.lock()?;
            let (sn, dn) = (name.as_bytes(), newname.as_bytes());
            let src = st.fs_ref()?.lookup(parent.0, sn).map_err(|e| errno(&e))?;
            let dst = st.fs_ref()?.lookup(newparent.0, dn).ok();
            if dst.is_some() && flags.contains(FRename::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            let changed = [parent.0, newparent.0, src.ino, dst.map_or(0, |d| d.ino)];
            let tx = st.route(&changed);
            st.check_claims(tx, &changed)?;
            st.fs()?
                .rename(tx, parent.0, sn, newparent.0, dn)
                .map_err(|e| {
                    fail(
                        &format!(
                            "renaming {:?} to {:?}",
                            String::from_utf8_lossy(sn),
                            String::from_utf8_lossy(dn)
                        ),
                        e,
                    )
                })?;
            st.note(
                tx,
                &[parent.0, newparent.0, src.ino],
                &[(parent.0, sn), (newparent.0, dn)],
            );
            if let Some(d) = dst {
                st.note(tx, &[d.ino], &[]);
            }
            if src.kind == FileType::Dir {
                st.parents.insert(src.ino, newparent.0);
            }
            Ok(())
        })();
        Self::empty(reply, r)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        match (|| {
            let mut st = self.lock()?;
            st.fs_ref()?.getattr(ino.0).map_err(|e| errno(&e))?;
            Ok::<_, Errno>(st.new_handle(writable))
        })() {
            // No FOPEN_KEEP_CACHE: an open drops the kernel's cached pages, so that what an
            // aborted transaction wrote is never read from a stale cache.
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
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
        self.closed(ino.0, fh.0, None);
        if let Ok(mut st) = self.lock() {
            st.writable.remove(&fh.0);
        }
        reply.ok()
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
        self.closed(ino.0, fh.0, Some(crate::procs::tgid_of(req.pid())));
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
        match (|| {
            self.lock()?
                .fs_ref()?
                .read(ino.0, offset, size as u64)
                .map_err(|e| fail(&format!("reading inode {}", ino.0), e))
        })() {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = (|| {
            let mut st = self.lock()?;
            let tx = st.route(&[ino.0]);
            let id = tx.map(|t| st.user_id(t));
            let what = || match id {
                Some(id) => format!(
                    "writing {} bytes at {offset} of inode {} in transaction {id}",
                    data.len(),
                    ino.0
                ),
                None => format!(
                    "writing {} bytes at {offset} of inode {}",
                    data.len(),
                    ino.0
                ),
            };
            let n = match st.fs()?.write(tx, ino.0, offset, data) {
                Ok(n) => n,
                // An F2FS atomic write too large for the log (or the free blocks): EFBIG, not
                // ENOSPC, so that SQLite aborts it and commits through its rollback journal
                // (ENOSPC would be SQLITE_FULL, an error, with no fallback).
                Err(e @ PmemFsError::NoSpace(_)) if tx.is_some_and(|t| st.is_f2fs(t)) => {
                    eprintln!("intactfs-pmem: {}: {e}; the F2FS atomic write does not fit (EFBIG: abort it, or write without START_ATOMIC_WRITE)", what());
                    return Err(Errno::EFBIG);
                }
                Err(e) => return Err(fail(&what(), e)),
            };
            st.note(tx, &[ino.0], &[]);
            Ok(n)
        })();
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every call is durable when it returns (a transaction's changes at its commit).
        Self::empty(
            reply,
            (|| self.lock()?.fs_ref()?.fsync(ino.0).map_err(|e| errno(&e)))(),
        )
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
            let st = self.lock()?;
            let parent = if ino.0 == ROOT {
                ROOT
            } else {
                st.parents.get(&ino.0).copied().unwrap_or(ROOT)
            };
            crate::fs::dir_entries(st.fs_ref()?, ino.0, parent, offset)
        })();
        match r {
            Ok(all) => {
                for (n, off, k, name) in all {
                    if reply.add(INodeNo(n), off, k, OsStr::from_bytes(&name)) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply_statfs(reply, (|| Ok(self.lock()?.fs_ref()?.statfs()))())
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
        let r = self.ioctl_tx(req, ino.0, fh.0, cmd, in_data);
        // After the lock, before the answer: the caller sees the old state once TX_ABORT
        // returns.
        invalidate(self.lock().ok().and_then(|mut st| st.take_invalidations()));
        match r {
            Ok(d) => reply.ioctl(0, &d),
            Err(e) => reply.error(e),
        }
    }
}

/// What a pmem mount ended with.
#[derive(Debug)]
pub struct PmemUnmounted {
    pub recovery: MountReport,
    pub stats: Stats,
    /// Transactions still open at unmount (aborted).
    pub aborted_at_unmount: usize,
}

/// Mounts the pmem image `cfg.image` and serves it until unmounted (the same signals and
/// unmount paths as [`crate::mount::run`]). `ready` runs once the mount is visible.
pub fn run(
    cfg: &MountConfig,
    ready: impl FnOnce(&MountReport),
) -> Result<PmemUnmounted, MountError> {
    check_mountpoint(&cfg.mountpoint)?;
    let lock = lock_image(&cfg.image)?;
    let mut dev = PmemFile::open(&cfg.image)
        .map_err(|e| MountError::Input(format!("{}: {e}", cfg.image.display())))?;
    dev.set_sync_on_fence(cfg.pmem_sync);
    let (fs, recovery) = PmemFs::mount(dev).map_err(|e| {
        MountError::Input(format!(
            "{}: cannot mount the pmem image: {e} (run `intact fs fsck {}` for a report)",
            cfg.image.display(),
            cfg.image.display()
        ))
    })?;
    let fuse = PmemFuse::new(fs);
    let state = fuse.state.clone();
    let config = session_config(cfg, "intactfs-pmem");
    let session = Session::new(fuse, &cfg.mountpoint, &config).map_err(|e| {
        MountError::Failed(format!("mounting on {}: {e}", cfg.mountpoint.display()))
    })?;
    if let Ok(mut st) = state.lock() {
        st.notifier = Some(session.notifier());
    }
    let (sig_handle, sig_thread) = detach_on_signals(&cfg.mountpoint)?;
    let (stop, stopped) = mpsc::channel::<()>();
    let reaper = {
        let state = state.clone();
        std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(REAP_INTERVAL) {
                let Ok(mut st) = state.lock() else { return };
                st.reap();
                if let Some(p) = st.take_invalidations() {
                    // Not under the lock: the kernel may wait for a request that needs it.
                    std::thread::spawn(move || invalidate(Some(p)));
                }
            }
        })
    };

    ready(&recovery);
    let served = session.run();
    sig_handle.close();
    let _ = sig_thread.join();
    drop(stop);
    let _ = reaper.join();

    let fs = state.lock().ok().and_then(|mut st| st.fs.take());
    let Some(fs) = fs else {
        return Err(MountError::Failed(format!(
            "a request handler failed ({}); nothing more was written: {} holds every transaction committed before (mount it again to recover)",
            served.err().map(|e| e.to_string()).unwrap_or_else(|| "internal error".into()),
            cfg.image.display()
        )));
    };
    let stats = fs.stats();
    let open = fs.open_transactions().len();
    if open > 0 {
        eprintln!("intactfs-pmem: {open} transaction(s) still open at unmount: aborted");
    }
    let mut dev = fs
        .unmount()
        .map_err(|e| MountError::Failed(format!("unmounting {}: {e}", cfg.image.display())))?;
    dev.sync_all()
        .map_err(|e| MountError::Failed(format!("writing back {}: {e}", cfg.image.display())))?;
    drop(dev);
    drop(lock);
    if let Err(e) = served {
        return Err(MountError::Failed(format!(
            "the FUSE session ended with an error: {e} (everything was written back)"
        )));
    }
    Ok(PmemUnmounted {
        recovery,
        stats,
        aborted_at_unmount: open,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_under_the_mount_tag_and_owned_by_their_process() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let mut dev = PmemFile::create(&p, 1 << 20).unwrap();
        PmemFs::mkfs(&mut dev, &intactfs_pmem::MkfsOptions::for_len(1 << 20)).unwrap();
        drop(dev);
        assert!(is_pmem_image(&p));
        assert!(!is_pmem_image(dir.path()));
        let (fs, _) = PmemFs::mount(PmemFile::open(&p).unwrap()).unwrap();
        let f = PmemFuse::new(fs);
        let mut st = f.state.lock().unwrap();
        assert!(st.tag > 0 && st.tag < 1 << 15);
        let me = std::process::id();
        let t1 = st.fs().unwrap().tx_begin(&[]).unwrap();
        let t2 = st.fs().unwrap().tx_begin(&[]).unwrap();
        let caller = Caller {
            tid: me,
            uid: 0,
            gid: 0,
        };
        let id1 = st.register(t1, caller, ROOT).unwrap();
        let id2 = st.register(t2, caller, ROOT).unwrap();
        for id in [id1, id2] {
            assert!((id as i64) > 0, "ids are positive as a C long");
            assert!(st.of_this_mount(id));
        }
        assert_eq!((st.engine_id(id1), st.engine_id(id2)), (Some(t1), Some(t2)));
        // Consecutive transactions' ids are not neighbours (a chance of 2^-47 to fail).
        assert!(id1.abs_diff(id2) > 1, "{id1:#x} {id2:#x}");
        assert_eq!(st.engine_id(id1 ^ 1), None, "a guessed neighbour");
        assert!(!st.of_this_mount(id1 ^ (1 << 50)), "another mount's id");
        assert_eq!(st.check_owner(t1, me, "TX_COMMIT"), Ok(()));
        let parent = std::os::unix::process::parent_id();
        assert_eq!(
            st.check_owner(t1, parent, "TX_COMMIT"),
            Err(Errno::EPERM),
            "the owner's parent is not its owner"
        );
        st.commit_tx(t1).unwrap();
        assert_eq!(
            st.engine_id(id1),
            None,
            "a committed transaction's id is gone"
        );
    }
}
