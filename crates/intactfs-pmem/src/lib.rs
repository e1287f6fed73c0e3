//! intactfs-pmem: an FCFS-style file-system engine on byte-addressable persistent memory
//! (seed paper 002, "FCFS"), with AD-transactions over several files (atomicity and
//! durability, no isolation: 002 §III-A/B), and its crash simulation ([`sim`]).
//!
//! The design, in brief (docs/fs-pmem.md has the layout, the entry format and the fence
//! points):
//! * **Hybrid fine-grained logging** (002 §III-D). Metadata is changed in place during the
//!   transaction, each changed word's old value logged first in an undo entry (byte ranges,
//!   widened to aligned words). Data goes to *pending blocks*, new blocks nothing durable
//!   names, cacheline by cacheline; at commit one redo entry per pending block records which
//!   lines it holds, then the commit record.
//! * **Two-level volatile index** ([`index`], 002 §III-D): reads find the newest version of
//!   each line.
//! * **Concurrently selective checkpointing** ([`checkpoint`], 002 §III-E, Algorithm 1): the
//!   committed versions of a block are merged into the one holding most of the newest lines,
//!   which an 8-byte atomic pointer store installs; log entries are freed respecting the two
//!   ordering properties.
//! * **Recovery** ([`recovery`], 002 §III-F): undo uncommitted metadata, index committed
//!   redo entries, rebuild the volatile maps; idempotent.
//! * **Legacy calls** (002 §III-G): a call without a transaction is one, committed before
//!   it returns (data-journaling semantics).
//!
//! Transactions do not isolate each other; an object (inode) changed by an open transaction
//! belongs to it until it ends, and another transaction's or a legacy call's change to it is
//! refused with EBUSY (see [`PmemFs::owner_of`]). That rule is also what makes in-place undo
//! safe: two live transactions never hold undo entries for the same word.

pub mod background;
pub mod checkpoint;
mod data;
pub mod error;
mod falloc;
pub mod index;
mod invariants;
pub mod layout;
pub mod log;
pub mod mutation;
mod namespace;
mod orphan;
pub mod recovery;
pub mod sim;
mod tx;
pub mod xattr;

pub use error::{PmemFsError, Result};
// The API types live in intactfs-types (one vocabulary for every engine).
pub use intactfs_types::{
    prelude, Attr, DirEntry, FileType, Ino, MknodKind, Owner, RenameFlags, SetAttr, StatFs, Time,
    XattrMode,
};
pub use layout::{Geometry, BLOCK, MAX_FILE_SIZE, NAME_MAX, ROOT};
pub use recovery::MountReport;

use index::{Committed, Index};
use intactfs_device::{PmemCounters, PmemDevice};
use intactfs_types::{Capabilities, EngineBase};
use layout::*;
use log::LogSpace;
use mutation::Mutation;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A transaction's id, from [`PmemFs::tx_begin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u64);

impl std::fmt::Display for TxId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tx {}", self.0)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct MkfsOptions {
    /// Inode slots (including the unused slot 0 and the root).
    pub inodes: u64,
    /// Log entries (64 bytes each).
    pub log_entries: u64,
}

impl MkfsOptions {
    /// One inode per 4 data blocks (at least 16), a log of 1/64 of the device (at least 256
    /// entries, at most 65536).
    pub fn for_len(len: u64) -> MkfsOptions {
        let blocks = len / BLOCK;
        MkfsOptions {
            inodes: (blocks / 4).clamp(16, 1 << 20),
            log_entries: (len / 64 / LOG_ENTRY).clamp(256, 65536),
        }
    }
}

/// When the engine checkpoints by itself (it also does when a call runs short of log
/// entries or blocks, and on [`PmemFs::checkpoint`]), and where: inline at the end of the
/// commit that makes the work due, or in background units ([`PmemFs::checkpoint_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// After a commit, checkpoint everything when more than this percentage of the log is in
    /// use.
    pub log_fill_pct: u64,
    /// After a commit, checkpoint everything when fewer than this percentage of the data
    /// blocks are free (002 §III-E: `CHECKPOINT_THRESH`, 10 %).
    pub free_blocks_pct: u64,
    /// After a commit, checkpoint a block whose pending list is longer than this (002
    /// §III-D: five by default).
    pub max_pending: usize,
    /// Commit leaves the work the three rules above make due to [`PmemFs::checkpoint_step`]
    /// (a background checkpointer: [`background::Checkpointer`]) instead of doing it before
    /// it returns. Commit (like any call) still checkpoints inline, blocking, when the log or
    /// the free blocks are exhausted.
    pub background_checkpoints: bool,
    /// Blocks one [`PmemFs::checkpoint_step`] installs at most (its fences cover them all;
    /// a smaller unit lets open transactions in sooner, a larger one keeps up with them on
    /// a busy machine: with 16, txbench's checkpointer fell behind at a load of 9 on 2
    /// cores and commits found the log or the blocks exhausted; with 256 it kept up).
    pub checkpoint_unit: usize,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            log_fill_pct: 50,
            free_blocks_pct: 10,
            max_pending: 5,
            background_checkpoints: false,
            checkpoint_unit: 256,
        }
    }
}

intactfs_device::counters! {
    /// Work the engine did, for the simulation and the benchmark.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Stats {
        /// Transactions committed (legacy calls included) and aborted.
        pub committed: u64,
        pub aborted: u64,
        pub legacy_commits: u64,
        pub undo_entries: u64,
        pub redo_entries: u64,
        pub checkpoints: u64,
        /// Blocks whose committed versions a checkpoint merged.
        pub blocks_checkpointed: u64,
        /// Atomic 8-byte pointer stores installing a pending block as the home block.
        pub pointer_swaps: u64,
        /// Cachelines copied by checkpoints (Algorithm 1 step 2).
        pub lines_copied: u64,
        pub indirect_allocs: u64,
        /// Redo entries of dropped inodes invalidated at their drop's commit (never installed).
        pub entries_retired: u64,
        /// Background checkpoint units that installed blocks ([`PmemFs::checkpoint_step`]).
        pub background_units: u64,
        /// Checkpoints of everything a call ran, blocking, because it found the log or the
        /// free blocks exhausted.
        pub exhausted_checkpoints: u64,
    }
}

/// What a transaction cost on the device, summed over its calls (and its commit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    pub calls: u64,
    pub undo_entries: u64,
    pub redo_entries: u64,
    pub device: PmemCounters,
}

/// A directory's volatile index, rebuilt from its blocks at mount (and after an abort):
/// names for lookups, and the same entries by slot for paged readdir (a page costs
/// O(log n + page), not a sort of the directory: issue 26, directories of 10^6 entries).
#[derive(Clone, Debug, Default)]
pub(crate) struct DirIndex {
    names: HashMap<Vec<u8>, (u64, Ino)>,
    by_slot: BTreeMap<u64, Vec<u8>>,
    pub free: BTreeSet<u64>,
    /// Slots in its blocks (15 per block).
    pub nslots: u64,
}

impl DirIndex {
    /// Adds `name` in `slot`; false (and no change) when the name is there already.
    pub fn insert(&mut self, name: &[u8], slot: u64, ino: Ino) -> bool {
        if self.names.contains_key(name) {
            return false;
        }
        let old = self.by_slot.insert(slot, name.to_vec());
        assert!(old.is_none(), "slot {slot} holds two names");
        self.names.insert(name.to_vec(), (slot, ino));
        true
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<(u64, Ino)> {
        let (slot, ino) = self.names.remove(name)?;
        let old = self.by_slot.remove(&slot);
        assert!(
            old.as_deref() == Some(name),
            "slot {slot} named another entry"
        );
        Some((slot, ino))
    }

    /// The entry `name` now names `ino` (same slot: exchange, rename over a name).
    pub fn set_ino(&mut self, name: &[u8], ino: Ino) {
        let e = self.names.get_mut(name).expect("the entry exists");
        e.1 = ino;
    }

    pub fn get(&self, name: &[u8]) -> Option<(u64, Ino)> {
        self.names.get(name).copied()
    }

    pub fn is_empty(&self) -> bool {
        assert_eq!(self.names.len(), self.by_slot.len());
        self.names.is_empty()
    }

    /// Entries in slot order from `slot` on: (slot, name, ino).
    pub fn entries_from(&self, slot: u64) -> impl Iterator<Item = (u64, &Vec<u8>, Ino)> + '_ {
        self.by_slot
            .range(slot..)
            .map(|(&s, n)| (s, n, self.names[n].1))
    }

    /// The same entries in the same slots (free slots may differ: a slot an open
    /// transaction freed is reused only after its commit).
    pub fn same_entries(&self, other: &DirIndex) -> bool {
        self.names == other.names && self.by_slot == other.by_slot
    }

    pub fn inos(&self) -> impl Iterator<Item = Ino> + '_ {
        self.names.values().map(|&(_, i)| i)
    }
}

/// An open transaction.
#[derive(Debug, Default)]
pub(crate) struct Tx {
    pub legacy: bool,
    /// Undo entries in logging order: slot, target, old bytes.
    pub undo: Vec<(u64, u64, Vec<u8>)>,
    /// Words already logged (their first old value is in the log; later changes need none).
    pub logged: HashSet<u64>,
    /// Lines of metadata changed in place (persisted at commit).
    pub dirty_lines: BTreeSet<u64>,
    /// Blocks holding an open version of this transaction.
    pub data: BTreeSet<(Ino, u64)>,
    /// Log entries promised to it (its commit record and one redo entry per open version).
    pub reserved: u64,
    pub new_blocks: Vec<u64>,
    pub new_inodes: Vec<Ino>,
    /// Freed by it: reusable once its commit is durable.
    pub freed_blocks: Vec<u64>,
    pub freed_inodes: Vec<Ino>,
    /// Committed versions of the inodes it drops, out of the index: their redo entries are
    /// invalidated once its commit is durable (before the inode can be reused), or go back
    /// into the index if it aborts. (ino, lbn, version)
    pub retired: Vec<(Ino, u64, Committed)>,
    pub freed_slots: Vec<(Ino, u64)>,
    pub dirs: BTreeSet<Ino>,
    pub owned: BTreeSet<Ino>,
    pub stats: TxStats,
}

/// A committed transaction whose commit record is still in the log (its redo entries are
/// not all checkpointed: 002 §III-E ordering property 2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LiveCommit {
    pub slot: u64,
    pub remaining: u64,
}

/// Staged metadata word changes of one call: applied with undo logging in one batch.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Word offset → (new value, fresh). A fresh word belongs to an object that was free
    /// (its old value means nothing), so it is not logged; the object's header word is
    /// always staged as not fresh, and restoring it frees the object again.
    pub words: BTreeMap<u64, (u64, bool)>,
}

impl Batch {
    pub fn read<P: PmemDevice>(&self, dev: &P, off: u64) -> Result<u64> {
        match self.words.get(&off) {
            Some(&(v, _)) => Ok(v),
            None => Ok(dev.load_u64(off)?),
        }
    }
    pub fn put(&mut self, off: u64, v: u64) {
        self.words.insert(off, (v, false));
    }
    pub fn put_fresh(&mut self, off: u64, v: u64) {
        self.words.insert(off, (v, true));
    }
}

/// The file system: see the crate documentation.
pub struct PmemFs<P: PmemDevice> {
    pub(crate) dev: P,
    pub(crate) g: Geometry,
    pub(crate) log: LogSpace,
    pub(crate) free_blocks: BTreeSet<u64>,
    pub(crate) free_inodes: BTreeSet<Ino>,
    pub(crate) dirs: HashMap<Ino, DirIndex>,
    pub(crate) index: Index,
    pub(crate) txs: BTreeMap<u64, Tx>,
    pub(crate) owner: HashMap<Ino, u64>,
    /// Ids of ended transactions (true: committed), the newest few thousand, for messages.
    pub(crate) finished: BTreeMap<u64, bool>,
    pub(crate) live: HashMap<u64, LiveCommit>,
    /// Commit records whose transaction has no entry left: freed at the next fence.
    pub(crate) dead_commits: Vec<(u64, u64)>,
    /// Background mode: blocks whose pending list grew past `max_pending` at a commit, not
    /// yet checkpointed (some may have been since, by another checkpoint: re-checked).
    pub(crate) long_lists: BTreeSet<(Ino, u64)>,
    /// Background mode, log or free blocks low: every block with committed versions when
    /// the shortage was seen, shortest pending list first (units pop the longest).
    pub(crate) drain_queue: Vec<(Ino, u64)>,
    /// The transaction between its first commit store and its commit fence: none of its
    /// versions may be installed yet (its commit is not durable).
    pub(crate) committing: Option<u64>,
    pub(crate) next_tx: u64,
    pub(crate) next_seq: u64,
    pub(crate) next_cseq: u64,
    pub(crate) stats: Stats,
    pub(crate) tun: Tunables,
    pub(crate) clock: fn() -> Time,
    pub(crate) last_call: PmemCounters,
    /// Open counts ([`FileData::open`](intactfs_types::FileData::open)); an inode is absent when not open. Volatile: a crash
    /// closes everything, and mount reclaims the unlinked inodes ([`orphan`]).
    pub(crate) opens: HashMap<Ino, u32>,
    /// Unlinked inodes whose last release came while an open transaction owned them: freed
    /// when no transaction owns them any more (that transaction may still abort the unlink).
    pub(crate) zombies: BTreeSet<Ino>,
    /// Files made by [`PmemFs::tmpfile`] (O_TMPFILE) and not yet linked: the only inodes
    /// without links that [`Namespace::link`](intactfs_types::Namespace::link) accepts (the kernel asks only for those).
    pub(crate) tmpfiles: BTreeSet<Ino>,
}

impl<P: PmemDevice> std::fmt::Debug for PmemFs<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmemFs")
            .field("geometry", &self.g)
            .field("open_txs", &self.txs.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<P: PmemDevice> PmemFs<P> {
    /// Formats `dev`: superblock, an empty log, an inode table holding the root directory.
    pub fn mkfs(dev: &mut P, opts: &MkfsOptions) -> Result<Geometry> {
        let g = Geometry::new(dev.len(), opts.inodes, opts.log_entries)?;
        // The superblock is written last (after everything else is persistent): an image
        // whose mkfs was interrupted has no valid superblock and is refused.
        dev.write(0, &[0u8; SB_BYTES])?;
        dev.persist(0, SB_BYTES as u64)?;
        let zeros = vec![0u8; BLOCK as usize];
        for b in g.log_start..g.data_start {
            dev.write(b * BLOCK, &zeros)?;
        }
        let now = Time::now();
        let root = InodeRec {
            kind: FileType::Dir,
            mode: 0o755,
            nlink: 2,
            uid: 0,
            gid: 0,
            parent: ROOT as u32,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
        };
        for (i, w) in root.words().iter().enumerate() {
            dev.store_u64(g.inode_off(ROOT) + INODE_WORD_OFFS[i], *w)?;
        }
        dev.clwb(g.log_start * BLOCK, (g.data_start - g.log_start) * BLOCK)?;
        dev.fence()?;
        dev.write(0, &g.encode())?;
        dev.persist(0, SB_BYTES as u64)?;
        Ok(g)
    }

    pub fn geometry(&self) -> Geometry {
        self.g
    }
    pub fn device(&self) -> &P {
        &self.dev
    }
    /// The device, e.g. to take a crash image in a test. Writing to it behind the engine's
    /// back breaks the engine's invariants.
    pub fn device_mut(&mut self) -> &mut P {
        &mut self.dev
    }
    /// The device without unmounting: what a crash leaves is on it (tests).
    pub fn into_device(self) -> P {
        self.dev
    }
    pub fn stats(&self) -> Stats {
        self.stats
    }
    pub fn device_counters(&self) -> PmemCounters {
        self.dev.counters()
    }
    /// What the last mutating call cost on the device (its commit included for a legacy
    /// call).
    pub fn last_call_counters(&self) -> PmemCounters {
        self.last_call
    }
    pub fn tunables(&self) -> Tunables {
        self.tun
    }
    pub fn set_tunables(&mut self, t: Tunables) {
        self.tun = t;
    }
    /// The clock for time stamps (the simulation uses a fixed one for reproducible images).
    pub fn set_clock(&mut self, clock: fn() -> Time) {
        self.clock = clock;
    }
    /// The open transaction that owns `ino` (changed it or named it in `tx_begin`/`tx_add`):
    /// calls changing `ino` must pass it (a FUSE layer routes a file's calls there).
    pub fn owner_of(&self, ino: Ino) -> Option<TxId> {
        self.owner.get(&ino).map(|&t| TxId(t))
    }
    pub fn open_transactions(&self) -> Vec<TxId> {
        self.txs.keys().map(|&t| TxId(t)).collect()
    }
    /// Committed data not yet checkpointed: (redo entries, log entries in use).
    pub fn log_usage(&self) -> (usize, u64) {
        (self.index.committed_count(), self.log.used())
    }

    /// Unmounts cleanly: aborts the open transactions, checkpoints everything, and returns
    /// the device. The log is then empty.
    pub fn unmount(mut self) -> Result<P> {
        let open: Vec<u64> = self.txs.keys().copied().collect();
        for t in open {
            self.abort_tx(t)?;
        }
        self.checkpoint_where(|_, _| true)?;
        self.flush_dead_commits()?;
        self.dev.fence()?;
        Ok(self.dev)
    }

    // ---- inode access --------------------------------------------------------------

    pub(crate) fn check_ino(&self, ino: Ino) -> Result<()> {
        if ino == 0 || ino >= self.g.inodes {
            return Err(PmemFsError::NotFound(format!(
                "inode {ino} is outside the inode table (1..{})",
                self.g.inodes
            )));
        }
        Ok(())
    }

    /// The inode as the batch sees it (staged words first).
    pub(crate) fn inode_in(&self, b: &Batch, ino: Ino) -> Result<InodeRec> {
        self.check_ino(ino)?;
        let base = self.g.inode_off(ino);
        let mut w = [0u64; INODE_WORDS];
        for (i, x) in w.iter_mut().enumerate() {
            *x = b.read(&self.dev, base + INODE_WORD_OFFS[i])?;
        }
        match InodeRec::from_words(&w) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(PmemFsError::NotFound(format!("inode {ino} is not in use"))),
            Err(e) => Err(PmemFsError::Corrupt(format!("inode {ino}: {e}"))),
        }
    }

    pub(crate) fn inode(&self, ino: Ino) -> Result<InodeRec> {
        self.inode_in(&Batch::default(), ino)
    }

    /// Stages the changed fixed words of an inode.
    pub(crate) fn stage_inode(&self, b: &mut Batch, ino: Ino, rec: &InodeRec) -> Result<()> {
        let base = self.g.inode_off(ino);
        for (i, w) in rec.words().iter().enumerate() {
            let off = base + INODE_WORD_OFFS[i];
            if b.read(&self.dev, off)? != *w {
                b.put(off, *w);
            }
        }
        Ok(())
    }

    pub(crate) fn now(&self) -> Time {
        (self.clock)()
    }

    // ---- ownership -----------------------------------------------------------------

    /// Refuses a change of `ino` by transaction `tx` when another open transaction owns it.
    pub(crate) fn check_owner(&self, tx: u64, ino: Ino) -> Result<()> {
        match self.owner.get(&ino) {
            Some(&o) if o != tx => Err(PmemFsError::Busy(format!(
                "inode {ino} belongs to open transaction {o} until it commits or aborts{}",
                if self.txs.get(&tx).is_some_and(|t| t.legacy) {
                    " (pass that transaction to the call)"
                } else {
                    ""
                }
            ))),
            _ => Ok(()),
        }
    }

    pub(crate) fn claim(&mut self, tx: u64, inos: &[Ino]) {
        for &i in inos {
            self.owner.insert(i, tx);
            if let Some(t) = self.txs.get_mut(&tx) {
                t.owned.insert(i);
            }
        }
    }

    // ---- metadata batches with undo logging (002 §III-D) -----------------------------

    /// Applies a batch of metadata word changes for transaction `tx`: the old value of each
    /// changed word not yet logged by `tx` goes to undo entries (persisted, flags last), then
    /// the words are stored in place (persisted at commit). Fails with ENOSPC before changing
    /// anything when the log has no room even after a checkpoint.
    pub(crate) fn apply_meta(&mut self, tx: u64, b: Batch) -> Result<()> {
        if !self.txs.contains_key(&tx) {
            return Err(PmemFsError::Internal(format!(
                "apply_meta for unknown transaction {tx}"
            )));
        }
        let (mut changed, mut runs) = self.plan_meta(tx, &b)?;
        if changed.is_empty() {
            return Ok(());
        }
        let checkpoints = self.stats.checkpoints;
        self.ensure_log(runs.len() as u64, "undo entries of this call")?;
        if self.stats.checkpoints != checkpoints {
            // A checkpoint ran: read the old values again (it only changes pointer words of
            // blocks with committed versions, which no batch stages, but be exact).
            (changed, runs) = self.plan_meta(tx, &b)?;
            self.ensure_log(runs.len() as u64, "undo entries of this call")?;
        }
        let mut items = Vec::with_capacity(runs.len());
        for (target, old) in &runs {
            let slot = self
                .log
                .take()
                .ok_or_else(|| PmemFsError::Internal("log slot vanished".into()))?;
            let seq = self.next_seq;
            self.next_seq += 1;
            items.push((
                slot,
                log::Entry {
                    tx,
                    seq,
                    body: log::Body::Undo {
                        target: *target,
                        old: old.clone(),
                    },
                },
            ));
        }
        // ensure_log left `runs` slots beyond the promised ones: taking them keeps promises.
        assert!(
            self.log.free.len() as u64 >= self.log.reserved,
            "undo entries took log slots promised to open transactions"
        );
        // One fence per call (format 6; two before): the entries are stored whole, and only
        // after this fence may the words they cover change in place.
        log::write_whole(&mut self.dev, &self.g, &items)?;
        if !mutation::active(Mutation::SkipUndoFence) {
            self.dev.fence()?;
        }
        let t = self.txs.get_mut(&tx).expect("checked above");
        for ((slot, _), (target, old)) in items.iter().zip(runs) {
            for k in 0..old.len() as u64 / 8 {
                t.logged.insert(target + k * 8);
            }
            t.undo.push((*slot, target, old));
            t.stats.undo_entries += 1;
        }
        self.stats.undo_entries += items.len() as u64;
        for (off, v, _, _) in changed {
            self.dev.store_u64(off, v)?;
            t.dirty_lines.insert(off / LINE);
        }
        Ok(())
    }

    /// The words of a batch that change (offset, new, fresh, current), and the runs of old
    /// values to log.
    #[allow(clippy::type_complexity)]
    fn plan_meta(
        &self,
        tx: u64,
        b: &Batch,
    ) -> Result<(Vec<(u64, u64, bool, u64)>, Vec<(u64, Vec<u8>)>)> {
        let t = &self.txs[&tx];
        let mut changed = Vec::new();
        for (&off, &(v, fresh)) in &b.words {
            let cur = self.dev.load_u64(off)?;
            // A fresh word is stored (and persisted at commit) even when it reads as the new
            // value already: an aborted transaction may have left that value volatile only.
            if cur != v || fresh {
                changed.push((off, v, fresh, cur));
            }
        }
        // Runs of up to three consecutive words to log.
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        for &(off, _, fresh, cur) in &changed {
            if fresh || t.logged.contains(&off) {
                continue;
            }
            match runs.last_mut() {
                Some((start, old))
                    if *start + old.len() as u64 == off && old.len() < log::UNDO_PAYLOAD =>
                {
                    old.extend_from_slice(&cur.to_le_bytes())
                }
                _ => runs.push((off, cur.to_le_bytes().to_vec())),
            }
        }
        Ok((changed, runs))
    }

    /// Makes sure `n` log entries are available (checkpointing if not).
    pub(crate) fn ensure_log(&mut self, n: u64, what: &str) -> Result<()> {
        if self.log.available() >= n {
            return Ok(());
        }
        self.checkpoint_exhausted()?;
        if self.log.available() >= n {
            return Ok(());
        }
        Err(PmemFsError::NoSpace(format!(
            "the log has {} free entries not promised to open transactions (of {}), {n} needed for {what}; commit or abort open transactions, or mkfs a larger log",
            self.log.available(),
            self.g.log_entries
        )))
    }

    /// A call found the log or the free blocks exhausted: it checkpoints everything before
    /// it goes on (blocking, in background mode too: the checkpointer fell behind).
    fn checkpoint_exhausted(&mut self) -> Result<()> {
        self.stats.exhausted_checkpoints += 1;
        self.checkpoint_where(|_, _| true)?;
        self.flush_dead_commits()
    }

    /// Takes `n` free data blocks (checkpointing first if short).
    pub(crate) fn take_blocks(&mut self, n: u64, what: &str) -> Result<Vec<u64>> {
        if (self.free_blocks.len() as u64) < n {
            self.checkpoint_exhausted()?;
        }
        if (self.free_blocks.len() as u64) < n {
            return Err(PmemFsError::NoSpace(format!(
                "{n} blocks needed for {what}, {} free",
                self.free_blocks.len()
            )));
        }
        Ok((0..n)
            .map(|_| self.free_blocks.pop_first().expect("counted"))
            .collect())
    }

    pub(crate) fn give_back_blocks(&mut self, blocks: &[u64]) {
        self.free_blocks.extend(blocks.iter().copied());
    }

    /// Stores zeros in a whole block and persists them (a block about to be named by a
    /// pointer must not show stale content).
    pub(crate) fn zero_block(&mut self, b: u64) -> Result<()> {
        self.dev.write(b * BLOCK, &[0u8; BLOCK as usize])?;
        self.dev.persist(b * BLOCK, BLOCK)?;
        Ok(())
    }
}

/// The caller's context is its open AD-transaction (None: a legacy call, committed before
/// it returns); every call of the interface is the engine's own (the last, extended
/// attributes, came with format 4).
impl<P: PmemDevice> EngineBase for PmemFs<P> {
    type Ctx = Option<TxId>;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ad_transactions: true,
            ..Capabilities::default()
        }
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        let r = self.inode(ino)?;
        Ok(Attr {
            ino,
            kind: r.kind,
            mode: r.mode,
            nlink: r.nlink,
            uid: r.uid,
            gid: r.gid,
            size: r.size,
            blocks: self.count_blocks(ino)? * (BLOCK / 512),
            atime: r.atime,
            mtime: r.mtime,
            ctime: r.ctime,
            rdev: r.rdev,
        })
    }

    fn statfs(&self) -> StatFs {
        StatFs {
            block_size: BLOCK,
            blocks: self.g.data_blocks(),
            free_blocks: self.free_blocks.len() as u64,
            files: self.g.inodes - 1,
            free_files: self.free_inodes.len() as u64,
            name_max: NAME_MAX as u64,
        }
    }
}
