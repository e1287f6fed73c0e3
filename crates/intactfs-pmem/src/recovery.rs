//! Mount: recovery (002 §III-F) and the rebuilding of every volatile structure.
//!
//! 1. Superblock: magic, checksum, version, geometry.
//! 2. Scan the log; index the committed transaction ids (valid commit records). A
//!    whole-written (undo or redo) entry whose checksum fails is torn: freed in step 3.
//! 3. Undo: the undo entries of uncommitted transactions are applied newest first (by
//!    sequence number) and persisted — **fence**; then every undo entry and every
//!    uncommitted redo entry is freed — **fence**.
//! 4. Check the metadata (every pointer in the data area and named once, directories well
//!    formed, link counts, every inode reachable) and rebuild the free-block and free-inode
//!    maps from it (002 §III-C: allocators are volatile) and the directories' indexes.
//! 5. Redo: committed redo entries, in commit order per block, go into the volatile index
//!    (their data is checkpointed later, lazily). An entry whose pending block is already
//!    the block's home block was installed by a checkpoint that crashed before freeing it:
//!    it and the older entries of that block are freed in commit order — **fence per
//!    round** — then commit records with no entry left — **fence**.
//! 6. Orphans (files unlinked and directories removed while open, [`crate::orphan`]) are
//!    freed, each in a transaction of its own (the commit protocol's fences).
//!
//! Recovery writes only old values (step 3) and zeros to valid words, each step persisted
//! before the next: a crash during recovery leaves an image whose recovery gives the same
//! state. An image no crash can produce (a valid flag over a body that does not match its
//! checksum, a pointer out of range or shared, a malformed directory) is refused with
//! [`PmemFsError::Corrupt`], never a panic.

use crate::error::{PmemFsError, Result};
use crate::index::{Committed, Index};
use crate::layout::*;
use crate::log::{self, Body, Entry, LogSpace};
use crate::{DirIndex, Ino, LiveCommit, PmemFs, Stats, Tunables};
use intactfs_device::PmemDevice;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What mount found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MountReport {
    pub valid_entries: u64,
    pub committed_txs: u64,
    pub uncommitted_txs: u64,
    pub undo_applied: u64,
    /// Undo entries of committed transactions, entries of uncommitted ones and torn
    /// entries, freed.
    pub entries_discarded: u64,
    /// Whole-written entries a crash tore before their fence (format 6), freed.
    pub torn_entries: u64,
    /// Committed redo entries now in the volatile index (checkpointed later).
    pub redo_indexed: u64,
    /// Committed redo entries found already installed by a checkpoint, freed.
    pub redo_installed: u64,
    /// Committed redo entries of inodes no longer in use (their drop committed, its
    /// retirement of them did not reach pmem), freed.
    pub redo_retired: u64,
    pub commit_records_freed: u64,
    /// Files unlinked and directories removed while open before the crash, freed (step 6).
    pub orphans_freed: u64,
    pub free_blocks: u64,
    pub free_inodes: u64,
    pub fences: u64,
}

/// A symbolic link holds its target (1 to SYMLINK_MAX bytes) in block 0; a special file
/// holds nothing. Called after the inode's blocks are in `homes`.
fn check_kind_shape(ino: Ino, r: &InodeRec, homes: &HashMap<(Ino, u64), u64>) -> Result<()> {
    match r.kind {
        FileType::Symlink if r.size == 0 || r.size > SYMLINK_MAX as u64 => Err(corrupt(format!(
            "symbolic link {ino} has size {} (1 to {SYMLINK_MAX} expected)",
            r.size
        ))),
        FileType::Symlink if !homes.contains_key(&(ino, 0)) => {
            Err(corrupt(format!("symbolic link {ino} has no target block")))
        }
        FileType::Fifo | FileType::Socket | FileType::CharDev | FileType::BlockDev
            if r.size != 0 =>
        {
            Err(corrupt(format!(
                "special file {ino} ({:?}) has size {}",
                r.kind, r.size
            )))
        }
        _ => Ok(()),
    }
}

fn corrupt(s: String) -> PmemFsError {
    PmemFsError::Corrupt(s)
}

/// Step 1: the superblock's geometry (magic, checksum, version checked by `decode`).
fn read_superblock<P: PmemDevice>(dev: &mut P) -> Result<Geometry> {
    if dev.len() < BLOCK {
        return Err(corrupt(format!(
            "a device of {} bytes cannot hold a file system",
            dev.len()
        )));
    }
    let mut sb = [0u8; SB_BYTES];
    dev.read(0, &mut sb)?;
    Geometry::decode(&sb, dev.len())
}

/// Step 2: every slot of the log, and the committed transactions (one commit record
/// each, commit sequences unique).
fn scan_log<P: PmemDevice>(dev: &mut P, g: &Geometry, rep: &mut MountReport) -> Result<LogScan> {
    let mut entries: Vec<(u64, Entry)> = Vec::new();
    let mut torn = Vec::new();
    let mut slot_buf = [0u8; LOG_ENTRY as usize];
    for slot in 0..g.log_entries {
        dev.read(g.log_off(slot), &mut slot_buf)?;
        match Entry::decode(&slot_buf) {
            Ok(log::Slot::Entry(e)) => entries.push((slot, e)),
            Ok(log::Slot::Free) => {}
            // Freed with the uncommitted entries in step 3 (log.rs: nothing depends on it).
            Ok(log::Slot::Torn) => torn.push(slot),
            Err(e) => return Err(corrupt(format!("log entry {slot}: {e}"))),
        }
    }
    rep.torn_entries = torn.len() as u64;
    rep.valid_entries = entries.len() as u64;
    let mut log = LogScan {
        entries,
        torn,
        commits: HashMap::new(),
        max_tx: 0,
        max_seq: 0,
        max_cseq: 0,
    };
    let mut cseqs = HashSet::new();
    for (slot, e) in &log.entries {
        log.max_tx = log.max_tx.max(e.tx);
        log.max_seq = log.max_seq.max(e.seq);
        let Body::Commit { cseq, .. } = e.body else {
            continue;
        };
        log.max_cseq = log.max_cseq.max(cseq);
        if log.commits.insert(e.tx, (cseq, *slot)).is_some() {
            let tx = e.tx;
            return Err(corrupt(format!("two commit records for transaction {tx}")));
        }
        if !cseqs.insert(cseq) {
            return Err(corrupt(format!(
                "two commit records with commit sequence {cseq}"
            )));
        }
    }
    rep.committed_txs = log.commits.len() as u64;
    Ok(log)
}

/// Step 3: applies the undo entries of uncommitted transactions, newest first, and frees
/// every undo entry, every uncommitted redo entry and every torn entry (a fence after
/// each); returns the freed slots.
fn undo_uncommitted<P: PmemDevice>(
    dev: &mut P,
    g: &Geometry,
    log: &LogScan,
    rep: &mut MountReport,
) -> Result<HashSet<u64>> {
    let (meta_lo, meta_hi) = (g.inode_start * BLOCK, g.total_blocks * BLOCK);
    let mut undo: Vec<(u64, u64, &Vec<u8>)> = Vec::new();
    let mut discard = log.torn.clone();
    let mut uncommitted = BTreeSet::new();
    for (slot, e) in &log.entries {
        let committed = log.commits.contains_key(&e.tx);
        match &e.body {
            Body::Undo { target, old } => {
                if !target.is_multiple_of(8)
                    || *target < meta_lo
                    || target
                        .checked_add(old.len() as u64)
                        .is_none_or(|end| end > meta_hi)
                {
                    return Err(corrupt(format!("log entry {slot}: undo target {target:#x} (+{}) is not word-aligned metadata or data", old.len())));
                }
                if !committed {
                    undo.push((e.seq, *target, old));
                    uncommitted.insert(e.tx);
                }
                discard.push(*slot);
            }
            Body::Redo { .. } if !committed => {
                uncommitted.insert(e.tx);
                discard.push(*slot);
            }
            _ => {}
        }
    }
    rep.uncommitted_txs = uncommitted.len() as u64;
    undo.sort_by_key(|u| std::cmp::Reverse(u.0));
    for (_, target, old) in &undo {
        dev.write(*target, old)?;
        dev.clwb(*target, old.len() as u64)?;
    }
    if !undo.is_empty() {
        dev.fence()?;
    }
    rep.undo_applied = undo.len() as u64;
    if !discard.is_empty() {
        log::invalidate(dev, g, &discard)?;
        dev.fence()?;
    }
    rep.entries_discarded = discard.len() as u64;
    Ok(discard.into_iter().collect())
}

/// Step 5's checks: each committed redo entry's pending block in the data area and named
/// once, its inode a file that still exists and reaches the block; entries of dropped
/// inodes go to `retired`. Returns the others by block.
fn committed_redo_by_block(
    g: &Geometry,
    log: &LogScan,
    scan: &MetaScan,
    retired: &mut Vec<u64>,
) -> Result<BTreeMap<(Ino, u64), Vec<Committed>>> {
    let mut groups: BTreeMap<(Ino, u64), Vec<Committed>> = BTreeMap::new();
    let mut pending_seen = HashSet::new();
    for (slot, e) in &log.entries {
        let Body::Redo {
            ino,
            lbn,
            pblk,
            bitmap,
        } = e.body
        else {
            continue;
        };
        let Some(&(cseq, _)) = log.commits.get(&e.tx) else {
            continue;
        };
        if !g.is_data_block(pblk) || !pending_seen.insert(pblk) {
            return Err(corrupt(format!("log entry {slot}: pending block {pblk} is outside the data area or named by two redo entries")));
        }
        let Some(rec) = scan.inodes.get(&ino) else {
            // Its inode's drop committed after it; the drop's commit retires such
            // entries before the inode or the block can be reused, so the block is free.
            if let Some(&(o, l)) = scan.used.get(&pblk) {
                return Err(corrupt(format!("log entry {slot}: pending block {pblk} of dropped inode {ino} is also block {l:?} of inode {o}")));
            }
            retired.push(*slot);
            continue;
        };
        if rec.kind != FileType::File {
            return Err(corrupt(format!(
                "log entry {slot}: committed redo entry for inode {ino}, which is not a file"
            )));
        }
        if lbn >= rec.size.div_ceil(BLOCK) {
            return Err(corrupt(format!("log entry {slot}: committed redo entry for block {lbn} of inode {ino}, beyond its size {}", rec.size)));
        }
        if let Some(&(o, l)) = scan.used.get(&pblk) {
            if scan.homes.get(&(ino, lbn)) != Some(&pblk) {
                return Err(corrupt(format!("log entry {slot}: pending block {pblk} of inode {ino} block {lbn} is also block {l:?} of inode {o}")));
            }
        }
        groups.entry((ino, lbn)).or_default().push(Committed {
            tx: e.tx,
            cseq,
            pblk,
            bitmap,
            slot: *slot,
        });
    }
    Ok(groups)
}

/// What the metadata names: used blocks and home blocks.
pub(crate) struct MetaScan {
    pub used: HashMap<u64, (Ino, Option<u64>)>,
    pub homes: HashMap<(Ino, u64), u64>,
    pub inodes: BTreeMap<Ino, InodeRec>,
    pub dirs: HashMap<Ino, DirIndex>,
    /// Files in use with link count 0 and no name (unlinked while open), by number.
    pub orphans: Vec<Ino>,
}

/// Step 2's findings: the log's entries and what they say about the transactions.
struct LogScan {
    /// Valid entries by slot.
    entries: Vec<(u64, Entry)>,
    /// Whole-written entries a crash tore (freed in step 3).
    torn: Vec<u64>,
    /// Committed transactions: id → (commit sequence, the commit record's slot).
    commits: HashMap<u64, (u64, u64)>,
    /// The largest transaction id, entry sequence and commit sequence seen.
    max_tx: u64,
    max_seq: u64,
    max_cseq: u64,
}

/// Step 5's plan: the committed redo entries by block, split into those a checkpoint
/// already installed and those the index takes.
#[derive(Default)]
struct RedoPlan {
    /// Per block, the slots of the installed entries, oldest commit first.
    installed: Vec<Vec<u64>>,
    /// Entries of dropped inodes, retired by their drop's commit.
    retired: Vec<u64>,
    /// Per committed transaction, its entries still pending.
    remaining: HashMap<u64, u64>,
    /// Pending blocks the index names.
    in_use: HashSet<u64>,
}

impl<P: PmemDevice> PmemFs<P> {
    /// Mounts `dev`, recovering from a crash if needed (steps 1–6 of the module's doc).
    pub fn mount(mut dev: P) -> Result<(Self, MountReport)> {
        let before = dev.counters();
        let g = read_superblock(&mut dev)?;
        let mut rep = MountReport::default();
        let log = scan_log(&mut dev, &g, &mut rep)?;
        let discard = undo_uncommitted(&mut dev, &g, &log, &mut rep)?;
        let mut fs = PmemFs::empty(dev, g, &log);
        let scan = fs.scan_metadata()?;
        let plan = fs.plan_redo(&log, &scan, &mut rep)?;
        let freed = fs.free_installed(&log, &plan, discard, &mut rep)?;
        fs.rebuild_maps(&log, &freed, &plan.in_use, &scan);
        fs.dirs = scan.dirs;
        // Step 6: orphans (crate::orphan), each freed in a transaction of its own.
        if !crate::mutation::active(crate::mutation::Mutation::KeepOrphansAtMount) {
            fs.reclaim_orphans(&scan.orphans)?;
        }
        rep.orphans_freed = scan.orphans.len() as u64;
        rep.free_blocks = fs.free_blocks.len() as u64;
        rep.free_inodes = fs.free_inodes.len() as u64;
        rep.fences = fs.dev.counters().since(&before).fences;
        Ok((fs, rep))
    }

    /// The file system over `dev` before step 4: empty volatile maps, counters past the
    /// log's largest ids.
    fn empty(dev: P, g: Geometry, log: &LogScan) -> Self {
        PmemFs {
            dev,
            g,
            log: LogSpace {
                total: g.log_entries,
                ..Default::default()
            },
            free_blocks: BTreeSet::new(),
            free_inodes: BTreeSet::new(),
            dirs: HashMap::new(),
            index: Index::default(),
            txs: BTreeMap::new(),
            owner: HashMap::new(),
            finished: BTreeMap::new(),
            live: HashMap::new(),
            dead_commits: Vec::new(),
            long_lists: BTreeSet::new(),
            drain_queue: Vec::new(),
            committing: None,
            next_tx: log.max_tx + 1,
            next_seq: log.max_seq + 1,
            next_cseq: log.max_cseq + 1,
            stats: Stats::default(),
            tun: Tunables::default(),
            clock: Time::now,
            last_call: Default::default(),
            opens: HashMap::new(),
            zombies: BTreeSet::new(),
            tmpfiles: BTreeSet::new(),
        }
    }

    /// Step 5, first half: checks each committed redo entry against the metadata and sorts
    /// it into installed (a checkpoint made its block the home block), pending (into the
    /// index) or retired (its inode's drop committed after it).
    fn plan_redo(
        &mut self,
        log: &LogScan,
        scan: &MetaScan,
        rep: &mut MountReport,
    ) -> Result<RedoPlan> {
        let mut plan = RedoPlan::default();
        let groups = committed_redo_by_block(&self.g, log, scan, &mut plan.retired)?;
        for ((ino, lbn), mut vers) in groups {
            vers.sort_by_key(|c| c.cseq);
            let home = scan.homes.get(&(ino, lbn)).copied().unwrap_or(0);
            let cut = vers
                .iter()
                .rposition(|c| c.pblk == home)
                .map_or(0, |k| k + 1);
            let done: Vec<Committed> = vers.drain(..cut).collect();
            if !done.is_empty() {
                plan.installed.push(done.iter().map(|c| c.slot).collect());
            }
            for c in vers {
                *plan.remaining.entry(c.tx).or_default() += 1;
                plan.in_use.insert(c.pblk);
                self.index.entry(ino, lbn).committed.push(c);
                rep.redo_indexed += 1;
            }
            rep.redo_installed += done.len() as u64;
        }
        rep.redo_retired = plan.retired.len() as u64;
        Ok(plan)
    }

    /// Step 5, second half: frees the retired entries, the installed ones in commit order
    /// (a fence a round), then the commit records with no entry left; returns every slot
    /// freed since step 3 (`discard` included).
    fn free_installed(
        &mut self,
        log: &LogScan,
        plan: &RedoPlan,
        discard: HashSet<u64>,
        rep: &mut MountReport,
    ) -> Result<HashSet<u64>> {
        let g = self.g;
        let mut freed = discard;
        if !plan.retired.is_empty() {
            // Before the commit records below (ordering property 2).
            log::invalidate(&mut self.dev, &g, &plan.retired)?;
            self.dev.fence()?;
            freed.extend(plan.retired.iter().copied());
        }
        let rounds = plan.installed.iter().map(|v| v.len()).max().unwrap_or(0);
        for r in 0..rounds {
            let slots: Vec<u64> = plan
                .installed
                .iter()
                .filter_map(|v| v.get(r).copied())
                .collect();
            assert!(!slots.is_empty(), "round {r} of {rounds} frees an entry");
            log::invalidate(&mut self.dev, &g, &slots)?;
            self.dev.fence()?;
            freed.extend(slots);
        }
        let mut dead = Vec::new();
        for (&tx, &(_, slot)) in &log.commits {
            match plan.remaining.get(&tx) {
                Some(&n) => {
                    assert!(n > 0, "transaction {tx}: a live commit has pending entries");
                    self.live.insert(tx, LiveCommit { slot, remaining: n });
                }
                None => dead.push(slot),
            }
        }
        dead.sort_unstable();
        if !dead.is_empty() {
            log::invalidate(&mut self.dev, &g, &dead)?;
            self.dev.fence()?;
        }
        rep.commit_records_freed = dead.len() as u64;
        freed.extend(dead);
        Ok(freed)
    }

    /// The volatile maps from what recovery kept: free log slots (every slot but the valid
    /// entries not freed), free blocks (neither named by the metadata nor pending in the
    /// index) and free inodes.
    fn rebuild_maps(
        &mut self,
        log: &LogScan,
        freed: &HashSet<u64>,
        pending: &HashSet<u64>,
        scan: &MetaScan,
    ) {
        let g = self.g;
        let valid: HashSet<u64> = log
            .entries
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| !freed.contains(s))
            .collect();
        self.log.free = (0..g.log_entries).filter(|s| !valid.contains(s)).collect();
        self.free_blocks = (g.data_start..g.total_blocks)
            .filter(|b| !scan.used.contains_key(b) && !pending.contains(b))
            .collect();
        self.free_inodes = (2..g.inodes)
            .filter(|i| !scan.inodes.contains_key(i))
            .collect();
    }

    /// Reads and checks all metadata: inodes, block maps, directories.
    pub(crate) fn scan_metadata(&self) -> Result<MetaScan> {
        let g = self.g;
        let mut inodes = BTreeMap::new();
        for ino in 1..g.inodes {
            let base = g.inode_off(ino);
            let mut w = [0u64; INODE_WORDS];
            for (i, x) in w.iter_mut().enumerate() {
                *x = self.dev.load_u64(base + INODE_WORD_OFFS[i])?;
            }
            match InodeRec::from_words(&w) {
                Ok(Some(r)) => {
                    inodes.insert(ino, r);
                }
                Ok(None) => {}
                Err(e) => return Err(corrupt(format!("inode {ino}: {e}"))),
            }
        }
        match inodes.get(&ROOT) {
            Some(r) if r.kind == FileType::Dir && r.parent as u64 == ROOT => {}
            _ => return Err(corrupt("inode 1 is not the root directory".into())),
        }
        let mut used: HashMap<u64, (Ino, Option<u64>)> = HashMap::new();
        let mut homes = HashMap::new();
        for (&ino, r) in &inodes {
            // A size no file can have (reads would allocate it) is damage.
            if r.size > MAX_FILE_SIZE {
                return Err(corrupt(format!(
                    "inode {ino}: size {} is beyond the largest file ({MAX_FILE_SIZE} bytes)",
                    r.size
                )));
            }
            let limit = r.size.div_ceil(BLOCK);
            for (lbn, b) in self.mapped_blocks(ino)? {
                if let Some(prev) = used.insert(b, (ino, lbn)) {
                    return Err(corrupt(format!(
                        "block {b} is named twice: by inode {} ({:?}) and inode {ino} ({lbn:?})",
                        prev.0, prev.1
                    )));
                }
                if let Some(l) = lbn {
                    // A regular file may hold blocks past its size (fallocate KEEP_SIZE,
                    // crate::falloc); they read as zeros. Nothing else may.
                    if l >= limit && r.kind != FileType::File {
                        return Err(corrupt(format!(
                            "inode {ino} maps block {l}, beyond its size {}",
                            r.size
                        )));
                    }
                    homes.insert((ino, l), b);
                }
            }
            // A damaged attribute block is refused here, not at the first getxattr.
            self.read_xattrs(ino)?;
            check_kind_shape(ino, r, &homes)?;
            if r.kind == FileType::Dir {
                for l in 0..limit {
                    if !homes.contains_key(&(ino, l)) {
                        return Err(corrupt(format!(
                            "directory {ino} has no block {l} within its size {}",
                            r.size
                        )));
                    }
                }
            }
        }
        // Directories: entries, link counts, parents, reachability.
        let mut refs: HashMap<Ino, u32> = HashMap::new();
        let mut subdirs: HashMap<Ino, u32> = HashMap::new();
        let mut dirs = HashMap::new();
        for (&ino, r) in inodes.iter().filter(|(_, r)| r.kind == FileType::Dir) {
            let (used_slots, free) = self.read_dir_slots(ino, r.size)?;
            let mut di = DirIndex {
                nslots: r.size / BLOCK * DIRENTS_PER_BLOCK,
                free: free.into_iter().collect(),
                ..Default::default()
            };
            for (slot, name, child, kind) in used_slots {
                let c = inodes.get(&child).ok_or_else(|| {
                    corrupt(format!(
                        "directory {ino} slot {slot} names inode {child}, which is not in use"
                    ))
                })?;
                if c.kind.code() != kind {
                    return Err(corrupt(format!("directory {ino} slot {slot}: entry type {kind} but inode {child} is a {:?}", c.kind)));
                }
                if child == ROOT {
                    return Err(corrupt(format!(
                        "directory {ino} slot {slot} names the root"
                    )));
                }
                *refs.entry(child).or_default() += 1;
                if c.kind == FileType::Dir {
                    *subdirs.entry(ino).or_default() += 1;
                    if c.parent as u64 != ino {
                        return Err(corrupt(format!(
                            "directory {child} is in directory {ino} but says its parent is {}",
                            c.parent
                        )));
                    }
                }
                if !di.insert(&name, slot, child) {
                    return Err(corrupt(format!(
                        "directory {ino} holds {:?} twice",
                        String::from_utf8_lossy(&name)
                    )));
                }
            }
            dirs.insert(ino, di);
        }
        let mut orphans = Vec::new();
        for (&ino, r) in &inodes {
            let n = refs.get(&ino).copied().unwrap_or(0);
            if n == 0 && r.nlink == 0 {
                // Unlinked or removed while open (crate::orphan): mount frees it. A
                // directory is removed only empty, so an orphan one with entries is damage.
                if dirs.get(&ino).is_some_and(|d: &DirIndex| !d.is_empty()) {
                    return Err(corrupt(format!(
                        "directory {ino} has link count 0 and no name but holds entries"
                    )));
                }
                orphans.push(ino);
                continue;
            }
            if ino != ROOT && (n == 0 || r.kind == FileType::Dir && n != 1) {
                return Err(corrupt(format!(
                    "inode {ino} is named by {n} directory entries (a directory exactly 1, a file at least 1 or, with link count 0, none)"
                )));
            }
            let want = match r.kind {
                FileType::Dir => 2 + subdirs.get(&ino).copied().unwrap_or(0),
                _ => n,
            };
            if r.nlink != want {
                return Err(corrupt(format!(
                    "inode {ino} has link count {}, {want} expected",
                    r.nlink
                )));
            }
        }
        // Every inode reachable from the root (no detached directory cycles).
        let mut seen = HashSet::from([ROOT]);
        let mut todo = vec![ROOT];
        while let Some(d) = todo.pop() {
            for c in dirs
                .get(&d)
                .map(|di: &DirIndex| di.inos().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                if seen.insert(c) && inodes.get(&c).is_some_and(|r| r.kind == FileType::Dir) {
                    todo.push(c);
                }
            }
        }
        assert!(
            orphans.iter().all(|o| !seen.contains(o)),
            "an orphan is named"
        );
        if seen.len() + orphans.len() != inodes.len() {
            return Err(corrupt(format!(
                "{} inodes in use are neither reachable from the root nor orphans",
                inodes.len() - seen.len() - orphans.len()
            )));
        }
        Ok(MetaScan {
            used,
            homes,
            inodes,
            dirs,
            orphans,
        })
    }

    /// Checks the invariants between pmem and the volatile structures (for tests and the
    /// simulation): metadata well formed (as mount checks it), every block either named by
    /// the metadata, a pending block of a version, or free — exactly one of those — and the
    /// free-inode map and directory indexes as pmem says.
    pub fn check(&self) -> Result<()> {
        let scan = self.scan_metadata()?;
        let mut owners: HashMap<u64, String> = HashMap::new();
        for (&b, &(ino, lbn)) in &scan.used {
            owners.insert(b, format!("block {lbn:?} of inode {ino}"));
        }
        for ((ino, lbn), v) in self.index.all() {
            for p in v
                .committed
                .iter()
                .map(|c| c.pblk)
                .chain(v.open.map(|o| o.pblk))
            {
                if let Some(prev) =
                    owners.insert(p, format!("a pending block of inode {ino} block {lbn}"))
                {
                    return Err(PmemFsError::Internal(format!(
                        "block {p} is both {prev} and a pending block of inode {ino} block {lbn}"
                    )));
                }
            }
        }
        for t in self.txs.values() {
            for &(ino, lbn, c) in &t.retired {
                let what = format!("a retired pending block of inode {ino} block {lbn}");
                if let Some(prev) = owners.insert(c.pblk, what.clone()) {
                    return Err(PmemFsError::Internal(format!(
                        "block {} is both {prev} and {what}",
                        c.pblk
                    )));
                }
            }
        }
        for &b in &self.free_blocks {
            if let Some(o) = owners.get(&b) {
                return Err(PmemFsError::Internal(format!(
                    "block {b} is free but is {o}"
                )));
            }
        }
        let mut deferred: HashSet<u64> = HashSet::new();
        let mut deferred_inodes: BTreeSet<Ino> = BTreeSet::new();
        for t in self.txs.values() {
            deferred.extend(t.freed_blocks.iter().copied());
            deferred_inodes.extend(t.freed_inodes.iter().copied());
        }
        for b in &deferred {
            if let Some(o) = owners.get(b) {
                return Err(PmemFsError::Internal(format!(
                    "block {b} waits to be freed at commit but is {o}"
                )));
            }
        }
        let accounted = owners.len() + self.free_blocks.len() + deferred.len();
        if accounted != self.g.data_blocks() as usize {
            // Name the first blocks nobody accounts for: where to look in the image.
            let lost: Vec<u64> = (self.g.data_start..self.g.total_blocks)
                .filter(|b| {
                    !owners.contains_key(b)
                        && !self.free_blocks.contains(b)
                        && !deferred.contains(b)
                })
                .take(8)
                .collect();
            return Err(PmemFsError::Internal(format!(
                "{} blocks named or pending + {} free + {} freed by open transactions = {accounted}, the data area has {} (a block leaked or is counted twice; unaccounted: {lost:?})",
                owners.len(),
                self.free_blocks.len(),
                deferred.len(),
                self.g.data_blocks()
            )));
        }
        let free: BTreeSet<Ino> = (2..self.g.inodes)
            .filter(|i| !scan.inodes.contains_key(i))
            .collect();
        let mine: BTreeSet<Ino> = self.free_inodes.union(&deferred_inodes).copied().collect();
        if free != mine {
            return Err(PmemFsError::Internal(format!(
                "the free-inode map differs from the inode table: {:?} vs {:?}",
                free.symmetric_difference(&mine).take(8).collect::<Vec<_>>(),
                ()
            )));
        }
        for o in &scan.orphans {
            if !self.is_open(*o) && !self.zombies.contains(o) {
                return Err(PmemFsError::Internal(format!(
                    "inode {o} is an orphan (link count 0, no name) but is not open and not waiting to be freed"
                )));
            }
        }
        for z in &self.zombies {
            // Unowned, it is one a transaction end could not free for want of log room.
            if self.is_open(*z) || !self.owner.contains_key(z) && !scan.orphans.contains(z) {
                return Err(PmemFsError::Internal(format!(
                    "inode {z} waits to be freed as an orphan but is open, or neither owned by a transaction nor an orphan"
                )));
            }
        }
        for (d, di) in &scan.dirs {
            let mine = self.dirs.get(d).ok_or_else(|| {
                PmemFsError::Internal(format!("directory {d} has no volatile index"))
            })?;
            if !mine.same_entries(di) {
                return Err(PmemFsError::Internal(format!(
                    "directory {d}'s volatile index differs from its blocks"
                )));
            }
        }
        Ok(())
    }
}
