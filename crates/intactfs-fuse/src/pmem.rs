//! The persistent-memory engine behind the one server ([`crate::server`]):
//! [`intactfs_pmem::PmemFs`] on a [`PmemFile`], with FCFS AD-transactions (`002` §III-B)
//! through the TX_* ioctls of [`crate::control`] (docs/fs-api.md, "AD-transactions on
//! persistent memory"), and the mount of a pmem image ([`run`]).
//!
//! * Every call is durable when it returns, so there is nothing to do outside the lock.
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
//! * **Cache**: the kernel's page cache is dropped at every open (no FOPEN_KEEP_CACHE)
//!   and told to forget what an aborted transaction changed.

use crate::control;
use crate::mount::{
    check_mountpoint, lock_image, serve_until_unmounted, session_config, session_ended,
    take_engine, MountConfig, MountError,
};
use crate::server::{errno, invalidate, Caps, IoctlCall, Locked, Served, Server, State, Who};
use fuser::{Errno, ReplyIoctl};
use intactfs_device::{PmemCounters, PmemFile};
use intactfs_pmem::background::{Checkpointer, Poker};
use intactfs_pmem::{FileType, Ino, MountReport, PmemFs, PmemFsError, Stats, Tunables, TxId};
use intactfs_types::prelude::*;
use intactfs_types::{Attr, Owner, Result as FsResult};
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::{mpsc, Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The superblock magic of a pmem image (the first 8 bytes).
pub const PMEM_MAGIC: &[u8; 8] = b"INTPMEM1";
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

/// The pmem engine as served.
pub type PmemEngine = PmemFs<PmemFile>;
pub type PmemState = State<PmemEngine>;
pub type PmemServer = Server<PmemEngine>;

/// The pmem engine's own server state (AD-transactions), under the engine's lock.
pub struct PmemExt {
    /// Open transactions (engine ids) → their owner.
    txs: HashMap<u64, TxOwner>,
    /// The ids programs hold (random, see the module comment) → the engine's.
    ids: HashMap<u64, TxId>,
    /// This mount's tag in transaction ids (bits 48..62).
    tag: u64,
    /// F2FS atomic writes: file → (its transaction, the handle that started it, the
    /// process that started it: only its FLUSH of the handle ends it, see
    /// [`crate::procs::closer_ends`]).
    f2fs: HashMap<Ino, (TxId, u64, u32)>,
    /// Wakes the background checkpointer (None: checkpoints run inline at commit).
    poker: Option<Poker>,
}

impl PmemExt {
    fn new() -> PmemExt {
        PmemExt {
            txs: HashMap::new(),
            ids: HashMap::new(),
            tag: mount_tag(),
            f2fs: HashMap::new(),
            poker: None,
        }
    }
}

/// The server of a mounted pmem image.
pub fn server(fs: PmemEngine, xattr: bool, caps: Caps) -> PmemServer {
    let state = Arc::new(RwLock::new(State::new(fs, PmemExt::new())));
    Server::new(state, (), xattr, caps)
}

/// The errno of an engine error; refusals a program may not expect (ENOSPC, EBUSY, EIO,
/// EINVAL, EFBIG) are also written to the daemon's log with the engine's message.
fn fail(what: &str, e: PmemFsError) -> Errno {
    log_unexpected(what, &e)
}

/// [`fail`] of a borrowed error.
fn log_unexpected(what: &str, e: &PmemFsError) -> Errno {
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
    errno(e)
}

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
    /// The open transaction a change of these objects belongs to (the first one owned).
    fn route(&self, inos: &[Ino]) -> Option<TxId> {
        let fs = self.fs.as_ref()?;
        inos.iter().find_map(|&i| fs.owner_of(i))
    }

    /// Remembers what a call in `tx` changed, for the kernel to forget at an abort.
    fn note(&mut self, tx: Option<TxId>, inos: &[Ino], entries: &[(Ino, &[u8])]) {
        let Some(t) = tx.and_then(|t| self.ext.txs.get_mut(&t.0)) else {
            return;
        };
        t.inodes.extend(inos.iter().copied());
        t.entries
            .extend(entries.iter().map(|(p, n)| (*p, n.to_vec())));
    }

    /// The id programs know open transaction `t` by (0: not open).
    fn user_id(&self, t: TxId) -> u64 {
        self.ext.txs.get(&t.0).map_or(0, |o| o.id)
    }

    /// Whether a transaction id a program passed carries this mount's tag.
    fn of_this_mount(&self, id: u64) -> bool {
        id >> ID_RANDOM_BITS == self.ext.tag
    }

    /// The engine's id of an open transaction's id a program passed.
    fn engine_id(&self, id: u64) -> Option<TxId> {
        let t = self.ext.ids.get(&id).copied()?;
        assert_eq!(self.user_id(t), id, "ids and txs name each other");
        Some(t)
    }

    /// Records the engine's new transaction `t`, begun by thread `tid` over `ino`, under
    /// a fresh random id (returned). The transaction is aborted if the caller is gone or
    /// the random source fails.
    fn register(&mut self, t: TxId, caller: Who, ino: Ino) -> Result<u64, Errno> {
        let Who { pid: tid, uid, gid } = caller;
        assert!(
            !self.ext.txs.contains_key(&t.0),
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
        self.ext.ids.insert(*id, t);
        self.ext.txs.insert(
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
            let id = self.ext.tag << ID_RANDOM_BITS | r;
            if r != 0 && !self.ext.ids.contains_key(&id) {
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
            .ext
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
        let o = self
            .ext
            .txs
            .get(&t.0)
            .expect("a routed transaction is open");
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
    fn check_may_change(&self, who: &Who, ino: Ino, fh: u64) -> Result<(), Errno> {
        let a = self.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?;
        match a.kind {
            FileType::Dir => {
                let w =
                    crate::procs::may_claim_dir(who.uid, who.gid, who.pid, a.mode, a.uid, a.gid);
                w.then_some(()).ok_or(Errno::EACCES)
            }
            _ if self.handles.writable(fh) => Ok(()),
            _ => Err(Errno::EBADF),
        }
    }

    /// Aborts `t` (open, ours) and queues what the kernel must forget.
    fn abort_tx(&mut self, t: TxId) -> Result<(), PmemFsError> {
        let r = match self.fs.as_mut() {
            Some(fs) => fs.tx_abort(t),
            None => return Ok(()),
        };
        if let Some(o) = self.ext.txs.remove(&t.0) {
            self.ext.ids.remove(&o.id);
            self.invalidate
                .push((o.inodes.into_iter().collect(), o.entries));
        }
        self.ext.f2fs.retain(|_, f| f.0 != t);
        r
    }

    /// Commits `t` (open, ours); once committed it is forgotten.
    fn commit_tx(&mut self, t: TxId) -> Result<(), PmemFsError> {
        self.fs
            .as_mut()
            .ok_or_else(|| PmemFsError::Internal("no engine".into()))?
            .tx_commit(t)?;
        if let Some(o) = self.ext.txs.remove(&t.0) {
            self.ext.ids.remove(&o.id);
        }
        self.ext.f2fs.retain(|_, f| f.0 != t);
        Ok(())
    }

    /// Whether `t` is an F2FS atomic write (started by F2FS_IOC_START_ATOMIC_WRITE).
    fn is_f2fs(&self, t: TxId) -> bool {
        self.ext.f2fs.values().any(|f| f.0 == t)
    }

    /// Aborts the F2FS atomic write that handle `fh` started on `ino`, if still open (the
    /// close of the starting descriptor, as on F2FS).
    fn end_f2fs_on_close(&mut self, ino: Ino, fh: u64, closer: Option<u32>) {
        let Some(&(t, h, starter)) = self.ext.f2fs.get(&ino) else {
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
    fn f2fs_ioctl(&mut self, who: &Who, ino: Ino, fh: u64, cmd: u32) -> Result<Vec<u8>, Errno> {
        if self.fs_ref()?.getattr(ino).map_err(|e| errno(&e))?.kind != FileType::File {
            return Err(Errno::EINVAL);
        }
        if cmd == control::F2FS_IOC_GET_FEATURES {
            return Ok(control::F2FS_FEATURE_ATOMIC_WRITE.to_ne_bytes().to_vec());
        }
        if !self.handles.writable(fh) {
            return Err(Errno::EBADF);
        }
        let started = self.ext.f2fs.get(&ino).copied();
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
                self.register(t, *who, ino)?;
                let starter = crate::procs::tgid_of(who.pid);
                self.ext.f2fs.insert(ino, (t, fh, starter));
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
                None => FileData::fsync(self.fs()?, None, ino, false)
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

    /// Wakes the background checkpointer when a commit left it work (cheap: a few
    /// comparisons, and a notify only when due).
    fn poke_if_due(&self) {
        if let (Some(p), Some(fs)) = (&self.ext.poker, &self.fs) {
            if fs.checkpoint_due() {
                p.poke();
            }
        }
    }

    /// Transactions whose process exited (or was killed) are aborted.
    pub fn reap(&mut self) {
        let gone: Vec<(u64, u32)> = self
            .ext
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
}

/// The TX_* ioctls and the F2FS atomic writes (the others were refused by
/// `control::refusal`).
fn tx_ioctl(st: &mut PmemState, call: &IoctlCall) -> Result<Vec<u8>, Errno> {
    let (who, ino, fh, cmd, in_data) = (&call.who, call.ino, call.fh, call.cmd, call.in_data);
    let arg = || {
        in_data
            .get(..8)
            .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .ok_or(Errno::EINVAL)
    };
    match cmd {
        control::IOC_TX_BEGIN => {
            st.check_may_change(who, ino, fh)?;
            let t = st
                .fs()?
                .tx_begin(&[ino])
                .map_err(|e| fail(&format!("TX_BEGIN on inode {ino}"), e))?;
            let id = st.register(t, *who, ino)?;
            Ok(id.to_ne_bytes().to_vec())
        }
        control::IOC_TX_ADD => {
            let id = arg()?;
            if !st.of_this_mount(id) {
                eprintln!("intactfs-pmem: TX_ADD of inode {ino} to transaction {id}: that transaction is not of this mount (EXDEV)");
                return Err(Errno::EXDEV);
            }
            let t = st.open_tx_of(id, "TX_ADD")?;
            st.check_owner(t, who.pid, "TX_ADD")?;
            st.check_may_change(who, ino, fh)?;
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
            st.check_owner(t, who.pid, what)?;
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
        | control::F2FS_IOC_ABORT_VOLATILE_WRITE => st.f2fs_ioctl(who, ino, fh, cmd),
        // The block engine's stream, osync and region ioctls were refused by
        // `control::refusal` above.
        _ => Err(Errno::ENOTTY),
    }
}

impl Served for PmemEngine {
    type Ext = PmemExt;
    type Driver = ();
    type Pending = ();
    const MAX_WRITE: u32 = MAX_WRITE;
    // No FOPEN_KEEP_CACHE: an open drops the kernel's cached pages, so that what an
    // aborted transaction wrote is never read from a stale cache.
    const KEEP_CACHE: bool = false;

    /// The open transaction that owns one of `objs` (the first owned), or None (a legacy
    /// call); a transaction may claim the others only as its beginner could.
    fn ctx(
        st: &PmemState,
        _who: &Who,
        _fh: Option<u64>,
        objs: &[Ino],
    ) -> Result<Option<TxId>, Errno> {
        let tx = st.route(objs);
        st.check_claims(tx, objs)?;
        Ok(tx)
    }
    fn idle_ctx() -> Option<TxId> {
        None
    }
    /// A legacy call committed when it returned: its checkpoint work may be due.
    fn changed(st: &mut PmemState, tx: Option<TxId>, inos: &[Ino], entries: &[(Ino, &[u8])]) {
        st.note(tx, inos, entries);
        st.poke_if_due();
    }
    fn read_shared(&self, ino: Ino, off: u64, len: usize) -> Option<FsResult<Vec<u8>>> {
        Some(PmemFs::read_shared(self, ino, off, len))
    }
    /// An F2FS atomic write too large for the log (or the free blocks): EFBIG, not ENOSPC,
    /// so that SQLite aborts it and commits through its rollback journal (ENOSPC would be
    /// SQLITE_FULL, an error, with no fallback).
    fn write_errno(st: &PmemState, tx: Option<TxId>, e: &PmemFsError) -> Errno {
        let id = tx.map_or(0, |t| st.user_id(t));
        if matches!(e, PmemFsError::NoSpace(_)) && tx.is_some_and(|t| st.is_f2fs(t)) {
            eprintln!("intactfs-pmem: a write in transaction {id}: {e}; the F2FS atomic write does not fit (EFBIG: abort it, or write without START_ATOMIC_WRITE)");
            return Errno::EFBIG;
        }
        log_unexpected(&format!("a write (transaction {id}; 0: none)"), e)
    }
    fn write_done(_: &(), _st: Locked<'_, Self>) -> Result<(), Errno> {
        Ok(())
    }
    fn write_pending(_: &(), _: ()) {}
    /// Every call is durable when it returns (a transaction's changes at its commit).
    fn sync_file(
        _: &(),
        mut st: Locked<'_, Self>,
        tx: Option<TxId>,
        ino: Ino,
        datasync: bool,
    ) -> Result<(), Errno> {
        FileData::fsync(st.fs()?, tx, ino, datasync).map_err(|e| errno(&e))
    }
    fn ioctl(
        _: &(),
        st: &mut PmemState,
        call: &IoctlCall,
        _reply: &mut Option<ReplyIoctl>,
    ) -> Result<Vec<u8>, Errno> {
        tx_ioctl(st, call)
    }
    /// After TX_COMMIT (and every other control call).
    fn finish(_: &(), st: Locked<'_, Self>) -> Result<(), Errno> {
        st.poke_if_due();
        Ok(())
    }
    fn tmpfile(&mut self, tx: Option<TxId>, parent: Ino, mode: u32, o: Owner) -> FsResult<Attr> {
        PmemFs::tmpfile(self, tx, parent, mode, o)
    }
    fn seek_data(&self, ino: Ino, off: u64, data: bool) -> FsResult<u64> {
        PmemFs::seek_data(self, ino, off, data)
    }
    fn allocate(
        &mut self,
        tx: Option<TxId>,
        ino: Ino,
        off: u64,
        len: u64,
        keep_size: bool,
    ) -> FsResult<()> {
        PmemFs::fallocate(self, tx, ino, off, len, keep_size)
    }
    fn punch_hole(&mut self, tx: Option<TxId>, ino: Ino, off: u64, len: u64) -> FsResult<()> {
        PmemFs::punch_hole(self, tx, ino, off, len)
    }
    fn close_has_work(st: &PmemState, ino: Ino, fh: u64, closer: Option<u32>) -> bool {
        (st.ext.f2fs.get(&ino)).is_some_and(|f| f.1 == fh && crate::procs::closer_ends(closer, f.2))
    }
    fn closed(st: &mut PmemState, ino: Ino, fh: u64, closer: Option<u32>) {
        st.end_f2fs_on_close(ino, fh, closer);
        st.poke_if_due();
    }
}

/// What a pmem mount ended with.
#[derive(Debug)]
pub struct PmemUnmounted {
    pub recovery: MountReport,
    pub stats: Stats,
    /// The device's work while mounted (before the unmount's own checkpoint): what the
    /// served calls cost, for per-transaction figures (issue 28 item 5).
    pub device: PmemCounters,
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
    let (mut fs, recovery) = recover(cfg)?;
    let background = cfg.pmem_background && !cfg.read_only;
    fs.set_tunables(Tunables {
        background_checkpoints: background,
        ..fs.tunables()
    });
    let fuse = server(fs, cfg.xattr, cfg.caps);
    let state = fuse.state.clone();
    let checkpointer = background.then(|| spawn_checkpointer(&state)).transpose()?;
    let config = session_config(cfg, "intactfs-pmem");
    let reaper = |stopped| spawn_reaper(state.clone(), stopped);
    let served = serve_until_unmounted(fuse, cfg, &config, reaper, || ready(&recovery))?;

    if let Some(c) = checkpointer {
        // Its failure left the checkpoints to commits (inline): logged, not fatal.
        if let Err(e) = c.stop() {
            eprintln!("intactfs-pmem: the background checkpointer stopped early: {e} (commits checkpointed inline after it)");
        }
    }
    let holds = "every transaction committed before (mount it again to recover)";
    let fs = take_engine(&state, &served, cfg, holds)?;
    let device = fs.device_counters();
    let (stats, open) = write_back(cfg, fs)?;
    drop(lock);
    session_ended(served)?;
    Ok(PmemUnmounted {
        recovery,
        stats,
        device,
        aborted_at_unmount: open,
    })
}

/// Opens and recovers the image (its lock is held).
fn recover(cfg: &MountConfig) -> Result<(PmemEngine, MountReport), MountError> {
    let mut dev = PmemFile::open(&cfg.image)
        .map_err(|e| MountError::Input(format!("{}: {e}", cfg.image.display())))?;
    dev.set_sync_on_fence(cfg.pmem_sync);
    PmemFs::mount(dev).map_err(|e| {
        MountError::Input(format!(
            "{}: cannot mount the pmem image: {e} (run `intact fs fsck {}` for a report)",
            cfg.image.display(),
            cfg.image.display()
        ))
    })
}

/// The background checkpointer (002 §III-E): one unit per take of the state's lock, woken
/// by the commits that leave work ([`PmemState::poke_if_due`]). Between units every request
/// goes on; open transactions stay open across units.
fn spawn_checkpointer(state: &Arc<RwLock<PmemState>>) -> Result<Checkpointer, MountError> {
    let st = Arc::clone(state);
    let c = Checkpointer::spawn("intactfs-ckpt", move || {
        let Ok(mut guard) = st.write() else {
            return Ok(false);
        };
        let Some(fs) = guard.fs.as_mut() else {
            return Ok(false); // unmounting: the engine was taken out
        };
        fs.background_unit().inspect_err(|e| {
            eprintln!("intactfs-pmem: a background checkpoint unit failed: {e}");
        })
    })
    .map_err(|e| MountError::Failed(e.to_string()))?;
    state
        .write()
        .map_err(|_| MountError::Failed("the server's state lock is poisoned".into()))?
        .ext
        .poker = Some(c.poker());
    Ok(c)
}

/// Aborts the transactions of exited processes every [`REAP_INTERVAL`] until `stopped`.
fn spawn_reaper(
    state: Arc<RwLock<PmemState>>,
    stopped: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(REAP_INTERVAL) {
            let Ok(mut st) = state.write() else { return };
            st.reap();
            if let Some(p) = st.take_invalidations() {
                // Not under the lock: the kernel may wait for a request that needs it.
                std::thread::spawn(move || invalidate(Some(p)));
            }
        }
    })
}

/// Unmounts the engine (open transactions aborted, everything checkpointed) and syncs
/// the image: its stats and how many transactions were still open.
fn write_back(cfg: &MountConfig, fs: PmemEngine) -> Result<(Stats, usize), MountError> {
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
    Ok((stats, open))
}

#[cfg(test)]
mod tests {
    use super::*;
    use intactfs_pmem::ROOT;
    use intactfs_types::Owner;

    fn pmem(dir: &std::path::Path) -> PmemEngine {
        let p = dir.join("img");
        let mut dev = PmemFile::create(&p, 1 << 20).unwrap();
        PmemFs::mkfs(&mut dev, &intactfs_pmem::MkfsOptions::for_len(1 << 20)).unwrap();
        drop(dev);
        PmemFs::mount(PmemFile::open(&p).unwrap()).unwrap().0
    }

    /// The kernel's references keep an unlinked file alive; its last FORGET frees it, and
    /// a created inode gets a generation no earlier one had.
    #[test]
    fn the_last_forget_frees_an_unlinked_file() {
        let dir = tempfile::tempdir().unwrap();
        let srv = server(pmem(dir.path()), false, Caps::default());
        let mut st = srv.state.write().unwrap();
        let o = Owner::default();
        let a = Namespace::create(st.fs().unwrap(), None, ROOT, b"f", 0o644, o).unwrap();
        let g1 = st.remember_created(a.ino);
        st.remember(a.ino);
        assert!(
            st.refs.remember_known(a.ino),
            "held: counted under the read lock"
        );
        assert_eq!(st.refs.generation(a.ino), g1);
        Namespace::unlink(st.fs().unwrap(), None, ROOT, b"f").unwrap();
        st.forget(a.ino, 2);
        assert_eq!(
            st.fs_ref().unwrap().getattr(a.ino).unwrap().nlink,
            0,
            "one reference left"
        );
        st.forget(a.ino, 1);
        let gone = st.fs_ref().unwrap().getattr(a.ino).unwrap_err();
        assert_eq!(gone.errno(), libc::ENOENT, "freed at the last forget");
        assert_eq!(st.refs.held(), 0);
        assert!(
            !st.refs.remember_known(a.ino),
            "forgotten: not held any more"
        );
        let b = Namespace::create(st.fs().unwrap(), None, ROOT, b"g", 0o644, o).unwrap();
        assert!(st.remember_created(b.ino).0 > g1.0, "generations only grow");
    }

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
        let f = server(fs, false, Caps::default());
        let mut st = f.state.write().unwrap();
        assert!(st.ext.tag > 0 && st.ext.tag < 1 << 15);
        let me = std::process::id();
        let t1 = st.fs().unwrap().tx_begin(&[]).unwrap();
        let t2 = st.fs().unwrap().tx_begin(&[]).unwrap();
        let caller = Who {
            pid: me,
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
