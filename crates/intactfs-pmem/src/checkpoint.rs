//! Concurrently selective checkpointing (002 §III-E, Algorithm 1): the committed versions
//! of each block are merged into the block that already holds most of the newest lines (the
//! home block or one of the pending blocks), which one atomic 8-byte pointer store then
//! installs. Open transactions' versions are left alone (they may be open on the same files).
//!
//! Fence points, for all selected blocks together:
//! 1. copy the newest lines into each block's selected block — **fence**;
//! 2. atomic pointer stores (selected ≠ home) — **fence**;
//! 3. free the redo entries in commit order: round r frees the r-th oldest entry of every
//!    block — **fence per round** (ordering property 1: an older entry never outlives a newer
//!    one of the same block, which recovery would replay over the merged block);
//! 4. free the commit records of transactions with no entry left — **fence** (property 2).
//!
//! Only then are the blocks no longer named (unselected pending blocks, replaced home
//! blocks) and the log slots reused. Recovery reads an entry whose pending block is the
//! home block as "installed" (it and all older ones of that block are dropped).
//!
//! "Concurrently" in the paper means checkpoint threads running alongside transactions.
//! Here a checkpoint runs either inline, at the end of the commit that makes it due, or in
//! background units ([`PmemFs::checkpoint_step`], driven by [`crate::background`]): each
//! unit is the algorithm above over a few blocks (one fence per step for all of them), run
//! under the engine's lock between calls of open transactions. A unit never installs a
//! version whose commit is not durable (asserted): versions enter the pending lists at
//! commit, and commit holds the engine until its commit fence.

use crate::error::{PmemFsError, Result};
use crate::index::Committed;
use crate::invariants::release;
use crate::layout::{BLOCK, LINE, LINES_PER_BLOCK};
use crate::log;
use crate::mutation::{self, Mutation};
use crate::tx::bit_runs;
use crate::{Ino, PmemFs};
use intactfs_device::PmemDevice;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    pub blocks: u64,
    pub pointer_swaps: u64,
    pub lines_copied: u64,
    pub entries_freed: u64,
}

struct Group {
    vers: Vec<Committed>,
    origin: u64,
    /// The block that becomes (or stays) the home block.
    new: u64,
    /// The pointer word to swap (when `new != origin`).
    ptr: u64,
}

impl<P: PmemDevice> PmemFs<P> {
    /// Checkpoints every committed version now (002 §III-E: normally the engine does it by
    /// itself when the log or the free space runs low).
    pub fn checkpoint(&mut self) -> Result<CheckpointReport> {
        let r = self.checkpoint_where(|_, _| true)?;
        self.flush_dead_commits()?;
        Ok(r)
    }

    /// Algorithm 1 over the blocks with committed versions that `sel` selects.
    pub(crate) fn checkpoint_where(
        &mut self,
        sel: impl Fn(u64, u64) -> bool,
    ) -> Result<CheckpointReport> {
        // Out of the index in one pass (a lookup, a copy of the list and a lookup to tidy
        // per block were a third of the checkpoint's CPU time). A device error below leaves
        // the engine unusable, so nothing puts them back on that path.
        let taken = self.index.take_committed_where(sel);
        self.install(taken)
    }

    /// Algorithm 1 over `blocks` (those with committed versions): a lookup per block, where
    /// [`PmemFs::checkpoint_where`] walks the whole index.
    pub(crate) fn checkpoint_blocks(&mut self, blocks: &[(Ino, u64)]) -> Result<CheckpointReport> {
        let taken = self.index.take_committed_of(blocks);
        self.install(taken)
    }

    /// Whether the log or the free blocks run low: then everything is due (002 §III-E).
    pub(crate) fn checkpoint_pressure(&self) -> bool {
        let log_full = self.log.used() * 100 > self.g.log_entries * self.tun.log_fill_pct;
        let space_low =
            (self.free_blocks.len() as u64) * 100 < self.g.data_blocks() * self.tun.free_blocks_pct;
        log_full || space_low
    }

    /// Whether background checkpoint work is due (cheap: the test a committer makes before
    /// waking the checkpointer).
    pub fn checkpoint_due(&self) -> bool {
        !self.long_lists.is_empty()
            || !self.drain_queue.is_empty()
            || (self.checkpoint_pressure() && !self.live.is_empty())
    }

    /// One background unit (002 §III-E, selective): up to `checkpoint_unit` blocks, the
    /// longest pending lists first; when the log or the free space runs low, every block
    /// with committed versions is queued and the units drain the queue. Returns what the
    /// unit did (`blocks == 0`: nothing was due). Open transactions are untouched (their
    /// versions are not in the pending lists) and may run between units.
    pub fn checkpoint_step(&mut self) -> Result<CheckpointReport> {
        let unit = self.next_unit();
        let r = self.checkpoint_blocks(&unit)?;
        self.stats.background_units += u64::from(r.blocks > 0);
        Ok(r)
    }

    /// One background unit ([`PmemFs::checkpoint_step`]), and whether the checkpointer
    /// should run another at once: the unit installed something and work is still due
    /// (the step every [`crate::background::Checkpointer`] runs).
    pub fn background_unit(&mut self) -> Result<bool> {
        Ok(self.checkpoint_step()?.blocks > 0 && self.checkpoint_due())
    }

    /// The blocks of the next background unit, longest pending list first.
    fn next_unit(&mut self) -> Vec<(Ino, u64)> {
        let n = self.tun.checkpoint_unit.max(1);
        if self.drain_queue.is_empty() && self.checkpoint_pressure() {
            self.drain_queue = self.by_pending_len(self.index.committed_blocks());
        }
        let mut unit = Vec::with_capacity(n);
        // Entries checkpointed meanwhile by a full checkpoint have no versions: skipped.
        while unit.len() < n {
            match self.drain_queue.pop() {
                Some(b) if self.pending_len(b) > 0 => unit.push(b),
                Some(_) => continue,
                None => break,
            }
        }
        if !unit.is_empty() {
            return unit;
        }
        let long = std::mem::take(&mut self.long_lists).into_iter().collect();
        let mut long = self.by_pending_len(long);
        unit = long.split_off(long.len().saturating_sub(n));
        self.long_lists.extend(long);
        unit
    }

    fn pending_len(&self, (ino, lbn): (Ino, u64)) -> usize {
        self.index.get(ino, lbn).map_or(0, |v| v.committed.len())
    }

    /// `blocks` with committed versions, shortest pending list first (ties in (ino, lbn)
    /// order, so the simulation's runs repeat).
    fn by_pending_len(&self, mut blocks: Vec<(Ino, u64)>) -> Vec<(Ino, u64)> {
        blocks.retain(|&b| self.pending_len(b) > 0);
        blocks.sort_by_key(|&b| (self.pending_len(b), b));
        blocks
    }

    /// Algorithm 1 over versions taken out of the index.
    fn install(&mut self, taken: Vec<(Ino, u64, Vec<Committed>)>) -> Result<CheckpointReport> {
        let mut rep = CheckpointReport::default();
        if taken.is_empty() {
            return Ok(rep);
        }
        self.stats.checkpoints += 1;
        let mut groups = Vec::with_capacity(taken.len());
        for (ino, lbn, vers) in taken {
            assert!(
                !vers.is_empty(),
                "inode {ino} block {lbn} taken without versions"
            );
            // The order a background checkpointer must keep: installed only once durable.
            assert!(
                vers.iter().all(|c| Some(c.tx) != self.committing)
                    || mutation::active(Mutation::CheckpointBeforeCommit),
                "inode {ino} block {lbn}: a version of transaction {:?} installed before its commit is durable",
                self.committing
            );
            let at = self.ptr_off(ino, lbn)?;
            let origin = match at {
                Some(off) => self.ptr(off, || format!("block map of inode {ino} (block {lbn})"))?,
                None => 0,
            };
            // Step 1: the block holding most of the newest lines (origin first, a pending
            // block only if it holds strictly more; a hole cannot be selected).
            // Among pending blocks holding as many, the oldest (newest_lines goes newest
            // first, hence >=), as the per-line scan this replaced chose.
            let (mut new, mut best) = (origin, -1i64);
            for (pblk, mine) in newest_lines(&vers) {
                if i64::from(mine.count_ones()) >= best {
                    best = i64::from(mine.count_ones());
                    new = pblk;
                }
            }
            if origin != 0 && i64::from(origin_lines(&vers).count_ones()) >= best {
                new = origin;
            }
            let mut ptr = 0;
            if new != origin {
                // The pointer word is where the walk above ended, unless a level is missing.
                match at.map_or_else(|| self.ptr_off_alloc(ino, lbn), |off| Ok(Some(off)))? {
                    Some(off) => ptr = off,
                    // No block for an indirect level: merge into the home block instead, or
                    // leave this block for a later checkpoint.
                    None if origin != 0 => new = origin,
                    None => {
                        self.index.put_back_committed(ino, lbn, vers);
                        continue;
                    }
                }
            }
            groups.push(Group {
                vers,
                origin,
                new,
                ptr,
            });
        }
        if groups.is_empty() {
            return Ok(rep);
        }
        // Step 2: copy the newest lines the selected block lacks.
        for g in &groups {
            rep.lines_copied += self.merge_lines(g)?;
        }
        self.dev.fence()?;
        // Step 3: install by atomic pointer stores.
        for g in groups.iter().filter(|g| g.new != g.origin) {
            self.dev.store_u64(g.ptr, g.new)?;
            self.dev.clwb(g.ptr, 8)?;
            rep.pointer_swaps += 1;
        }
        if rep.pointer_swaps > 0 {
            self.dev.fence()?;
        }
        // Free the redo entries, oldest first per block (ordering property 1).
        let rounds = groups.iter().map(|g| g.vers.len()).max().unwrap_or(0);
        for r in 0..rounds {
            let slots: Vec<u64> = groups
                .iter()
                .filter_map(|g| g.vers.get(r).map(|c| c.slot))
                .collect();
            log::invalidate(&mut self.dev, &self.g, &slots)?;
            self.dev.fence()?;
        }
        // Step 4: deallocate.
        for g in &groups {
            for c in &g.vers {
                self.log.free.insert(c.slot);
                if c.pblk != g.new {
                    self.free_blocks.insert(c.pblk);
                }
                rep.entries_freed += 1;
                self.release_live(c.tx, "LiveCommit::remaining (checkpoint)");
            }
            if g.origin != 0 && g.origin != g.new {
                self.free_blocks.insert(g.origin);
            }
        }
        rep.blocks = groups.len() as u64;
        self.stats.blocks_checkpointed += rep.blocks;
        self.stats.pointer_swaps += rep.pointer_swaps;
        self.stats.lines_copied += rep.lines_copied;
        // Ordering property 2: commit records once all their entries are freed.
        self.flush_dead_commits()?;
        Ok(rep)
    }

    /// Copies into `g.new` the newest lines it lacks, a run of neighbouring lines from the
    /// same source in one copy and one flush; returns the lines copied.
    fn merge_lines(&mut self, g: &Group) -> Result<u64> {
        let sources = newest_lines(&g.vers).chain([(g.origin, origin_lines(&g.vers))]);
        let mut copied = 0;
        let mut buf = [0u8; BLOCK as usize];
        for (src, mine) in sources {
            if src == g.new {
                continue;
            }
            for (l0, l1) in bit_runs(mine) {
                let (off, len) = (l0 * LINE, (l1 - l0) * LINE);
                let run = &mut buf[..len as usize];
                match src {
                    0 => run.fill(0),
                    _ => self.dev.read(src * BLOCK + off, run)?,
                }
                self.dev.write(g.new * BLOCK + off, run)?;
                self.dev.clwb(g.new * BLOCK + off, len)?;
                copied += l1 - l0;
            }
        }
        assert!(
            copied <= LINES_PER_BLOCK,
            "copied {copied} lines into one block"
        );
        Ok(copied)
    }

    /// Checkpoints every committed version of `ino` in `lbns` (a truncation, hole punch or
    /// allocation that must not leave a redo entry naming a block it changes). A version
    /// whose missing indirect blocks find no free block is retried after a checkpoint of
    /// everything (which frees replaced blocks); if it still cannot be installed, ENOSPC
    /// before the caller changed anything.
    pub(crate) fn checkpoint_file_range(
        &mut self,
        ino: Ino,
        lbns: std::ops::Range<u64>,
        what: &str,
    ) -> Result<()> {
        let left = |fs: &Self| {
            (fs.index.file(ino))
                .filter(|(l, v)| lbns.contains(l) && !v.committed.is_empty())
                .count()
        };
        if left(self) == 0 {
            return Ok(());
        }
        self.checkpoint_where(|i, l| i == ino && lbns.contains(&l))?;
        if left(self) > 0 {
            self.checkpoint_where(|_, _| true)?;
            self.checkpoint_where(|i, l| i == ino && lbns.contains(&l))?;
        }
        match left(self) {
            0 => Ok(()),
            n => Err(PmemFsError::NoSpace(format!(
                "{what} of inode {ino}: {n} blocks written since the last checkpoint need indirect blocks to be installed first, and none is free"
            ))),
        }
    }

    /// Retires the committed versions of inodes a transaction dropped, once its commit is
    /// durable: their redo entries are invalidated (one fence: every entry of a dropped
    /// inode is dead, so their order does not matter, and recovery discards a committed
    /// redo entry of an inode not in use), then their log slots and pending blocks are free.
    pub(crate) fn retire_versions(&mut self, retired: &[(Ino, u64, Committed)]) -> Result<()> {
        if retired.is_empty() {
            return Ok(());
        }
        let slots: Vec<u64> = retired.iter().map(|r| r.2.slot).collect();
        log::invalidate(&mut self.dev, &self.g, &slots)?;
        // Defensive: any reuse of the blocks or the inode goes through a later fence anyway
        // (a mutation leaving this one out was not caught in 30 seeds), but the retirement
        // should not depend on what the next call does.
        self.dev.fence()?;
        for &(ino, lbn, c) in retired {
            assert!(
                self.index.get(ino, lbn).is_none(),
                "inode {ino} block {lbn} is retired but still in the index"
            );
            self.log.free.insert(c.slot);
            assert!(
                self.free_blocks.insert(c.pblk),
                "retired block {} is free",
                c.pblk
            );
            self.release_live(c.tx, "LiveCommit::remaining (retired)");
        }
        self.stats.entries_retired += retired.len() as u64;
        Ok(())
    }

    /// An aborted drop's versions go back into the index, in commit order (the dropping
    /// transaction owned the inode, so no version of it was added meanwhile).
    pub(crate) fn unretire_versions(&mut self, retired: &[(Ino, u64, Committed)]) {
        for &(ino, lbn, c) in retired {
            let v = self.index.entry(ino, lbn);
            assert!(
                v.committed.last().is_none_or(|l| l.cseq < c.cseq),
                "inode {ino} block {lbn}: a version newer than a retired one"
            );
            v.committed.push(c);
        }
    }

    /// One of transaction `tx`'s redo entries is gone: its commit record dies with the last.
    fn release_live(&mut self, tx: u64, what: &str) {
        if let Some(l) = self.live.get_mut(&tx) {
            release(&mut l.remaining, 1, what);
            if l.remaining == 0 {
                let slot = l.slot;
                self.live.remove(&tx);
                self.dead_commits.push((tx, slot));
            }
        }
    }

    /// Frees the commit records of transactions with no entry left (their entries' freeing
    /// is already persistent).
    pub(crate) fn flush_dead_commits(&mut self) -> Result<()> {
        if self.dead_commits.is_empty() {
            return Ok(());
        }
        let slots: Vec<u64> = self.dead_commits.drain(..).map(|d| d.1).collect();
        log::invalidate(&mut self.dev, &self.g, &slots)?;
        self.dev.fence()?;
        self.log.free.extend(slots);
        Ok(())
    }
}

/// Each version's pending block with the lines it holds the newest content of (newest
/// version first; `vers` is oldest first): bit arithmetic, where a scan per line cost 64
/// steps per version.
fn newest_lines(vers: &[Committed]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut covered = 0u64;
    vers.iter().rev().map(move |c| {
        let mine = c.bitmap & !covered;
        covered |= c.bitmap;
        (c.pblk, mine)
    })
}

/// The lines no version holds: their newest content is the home block's.
fn origin_lines(vers: &[Committed]) -> u64 {
    !vers.iter().fold(0u64, |a, c| a | c.bitmap)
}
