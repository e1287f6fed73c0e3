//! AD-transactions (002 §III-A/B): begin, add, commit, abort, and the wrapper that makes a
//! call without a transaction its own one (002 §III-G).
//!
//! Commit protocol (the fence points the crash simulation crashes at; format 6):
//! 1. store the redo entries whole (one per open version: body and valid word, one line
//!    each) and the commit record's body; schedule the write-back of those, of every
//!    cacheline the versions hold, and of every metadata line the transaction changed in
//!    place — **fence A**;
//! 2. store the commit record's valid word — **fence B**: the transaction is committed;
//! 3. free its undo entries (valid words 0) — **fence C**; only then is anything it freed
//!    reused.
//!
//! Format 5 wrote the redo entries' valid words in a phase of their own (a fence more, and
//! each redo entry's line flushed twice).

use crate::error::{PmemFsError, Result};
use crate::index::Committed;
use crate::layout::LINE;
use crate::log::{self, Body, Entry};
use crate::mutation::{self, Mutation};
use crate::{Ino, LiveCommit, PmemFs, Tx, TxId, TxStats};
use intactfs_device::PmemDevice;

impl<P: PmemDevice> PmemFs<P> {
    /// Starts a transaction over `files` (each is claimed: EBUSY if another open transaction
    /// owns it). More files join with [`PmemFs::tx_add`] or by being changed in it.
    pub fn tx_begin(&mut self, files: &[Ino]) -> Result<TxId> {
        for &f in files {
            self.inode(f)?;
            if let Some(&o) = self.owner.get(&f) {
                return Err(PmemFsError::Busy(format!(
                    "inode {f} belongs to open transaction {o}"
                )));
            }
        }
        let id = self.begin_internal(false)?;
        self.claim(id, files);
        Ok(TxId(id))
    }

    /// Relates `ino` to the open transaction `tx` (claims it).
    pub fn tx_add(&mut self, tx: TxId, ino: Ino) -> Result<()> {
        self.open_tx(tx)?;
        self.inode(ino)?;
        self.check_owner(tx.0, ino)?;
        self.claim(tx.0, &[ino]);
        Ok(())
    }

    /// Commits `tx`: when it returns, every change made in it is durable, atomically with
    /// the others. Unknown, committed or aborted ids: EINVAL.
    pub fn tx_commit(&mut self, tx: TxId) -> Result<TxStats> {
        self.open_tx(tx)?;
        let before = self.dev.counters();
        let mut st = self.commit_tx(tx.0)?;
        st.device += self.dev.counters().since(&before);
        self.reap_zombies()?;
        Ok(st)
    }

    /// Aborts `tx`: its metadata changes are undone (in reverse order), its pending blocks
    /// and log entries freed. Unknown, committed or aborted ids: EINVAL.
    pub fn tx_abort(&mut self, tx: TxId) -> Result<()> {
        self.open_tx(tx)?;
        self.abort_tx(tx.0)?;
        self.reap_zombies()
    }

    pub(crate) fn open_tx(&self, tx: TxId) -> Result<()> {
        if self.txs.get(&tx.0).is_some_and(|t| !t.legacy) {
            return Ok(());
        }
        Err(PmemFsError::Invalid(match self.finished.get(&tx.0) {
            Some(true) => format!("{tx} already committed"),
            Some(false) => format!("{tx} was aborted"),
            None => format!("{tx} is not an open transaction"),
        }))
    }

    pub(crate) fn begin_internal(&mut self, legacy: bool) -> Result<u64> {
        // Its commit record is promised now, so that commit never runs out of log.
        self.ensure_log(1, "a transaction's commit record")?;
        self.log.reserved += 1;
        let id = self.next_tx;
        self.next_tx += 1;
        self.txs.insert(
            id,
            Tx {
                legacy,
                reserved: 1,
                ..Default::default()
            },
        );
        Ok(id)
    }

    /// Runs a mutating call in `tx`, or (None) in a transaction of its own committed before
    /// returning (aborted if the call fails). A failing call leaves no effect in `tx`.
    pub(crate) fn mutate<R>(
        &mut self,
        tx: Option<TxId>,
        f: impl FnOnce(&mut Self, u64) -> Result<R>,
    ) -> Result<R> {
        let before = self.dev.counters();
        let (id, legacy) = match tx {
            Some(t) => {
                self.open_tx(t)?;
                (t.0, false)
            }
            None => (self.begin_internal(true)?, true),
        };
        let r = f(self, id);
        if legacy {
            match &r {
                Ok(_) => {
                    self.commit_tx(id)?;
                    self.stats.legacy_commits += 1;
                }
                Err(_) => self.abort_tx(id)?,
            }
        }
        self.last_call = self.dev.counters().since(&before);
        if let Some(t) = self.txs.get_mut(&id) {
            t.stats.calls += 1;
            t.stats.device += self.last_call;
        }
        r
    }

    fn finish(&mut self, id: u64, committed: bool) {
        self.finished.insert(id, committed);
        while self.finished.len() > 4096 {
            self.finished.pop_first();
        }
    }

    pub(crate) fn commit_tx(&mut self, id: u64) -> Result<TxStats> {
        let t = self
            .txs
            .remove(&id)
            .ok_or_else(|| PmemFsError::Internal(format!("commit of unknown transaction {id}")))?;
        for o in &t.owned {
            self.owner.remove(o);
        }
        if t.undo.is_empty() && t.data.is_empty() {
            // A drop stages its inode's type word, so one that retires versions has undo.
            assert!(
                t.retired.is_empty(),
                "transaction {id} retires versions but changed nothing"
            );
            // Nothing changed: nothing to make durable.
            crate::invariants::release(
                &mut self.log.reserved,
                t.reserved,
                "log.reserved (empty commit)",
            );
            self.finish(id, true);
            self.release_freed(&t);
            return Ok(t.stats);
        }
        // Redo entries for the open versions, and the commit record.
        let mut items = Vec::with_capacity(t.data.len());
        let mut redo = 0u64;
        // From the first version entering the pending lists until fence B, no checkpoint may
        // install them (checked in the checkpoint).
        self.committing = Some(id);
        let cseq = self.next_cseq;
        self.next_cseq += 1;
        // Blocks whose pending list grows past max_pending (checkpointed below).
        let mut long = Vec::new();
        for &(ino, lbn) in &t.data {
            // One lookup per block: the open version out, committed in (volatile: nothing
            // reads the index before this commit returns, and a device error leaves the
            // engine unusable anyway).
            let v = self.index.entry(ino, lbn);
            let Some(o) = v.open.take() else {
                return Err(PmemFsError::Internal(format!(
                    "transaction {id} lists block {lbn} of inode {ino} but holds no version of it"
                )));
            };
            let slot = self
                .log
                .take()
                .ok_or_else(|| PmemFsError::Internal("reserved log slot missing".into()))?;
            assert!(
                v.committed.last().is_none_or(|c| c.cseq < cseq),
                "inode {ino} block {lbn}: a committed version newer than commit {cseq}"
            );
            v.committed.push(Committed {
                tx: id,
                cseq,
                pblk: o.pblk,
                bitmap: o.bitmap,
                slot,
            });
            if v.committed.len() > self.tun.max_pending {
                long.push((ino, lbn));
            }
            for (l0, l1) in bit_runs(o.bitmap) {
                self.dev
                    .clwb(o.pblk * crate::BLOCK + l0 * LINE, (l1 - l0) * LINE)?;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            items.push((
                slot,
                Entry {
                    tx: id,
                    seq,
                    body: Body::Redo {
                        ino,
                        lbn,
                        pblk: o.pblk,
                        bitmap: o.bitmap,
                    },
                },
            ));
            redo += 1;
        }
        let cslot = self
            .log
            .take()
            .ok_or_else(|| PmemFsError::Internal("reserved commit slot missing".into()))?;
        crate::invariants::release(&mut self.log.reserved, t.reserved, "log.reserved (commit)");
        let seq = self.next_seq;
        self.next_seq += 1;
        let commit = (
            cslot,
            Entry {
                tx: id,
                seq,
                body: Body::Commit { cseq, redo },
            },
        );
        for &l in &t.dirty_lines {
            self.dev.clwb(l * LINE, LINE)?;
        }
        // Commit records of finished transactions go out with this batch (they are only
        // dead once the fences before this one made their entries' freeing durable).
        let dead: Vec<(u64, u64)> = std::mem::take(&mut self.dead_commits);
        log::invalidate(
            &mut self.dev,
            &self.g,
            &dead.iter().map(|d| d.1).collect::<Vec<_>>(),
        )?;
        // Redo entries whole (format 6: one store and one flush each; a crash before fence A
        // tears at most entries of this uncommitted transaction, which mount frees).
        log::write_whole(&mut self.dev, &self.g, &items)?;
        let commit_flag = log::write_bodies(&mut self.dev, &self.g, std::slice::from_ref(&commit))?;
        if !mutation::active(Mutation::SkipFence) {
            self.dev.fence()?; // A
        }
        self.log.free.extend(dead.iter().map(|d| d.1));
        let n = if mutation::active(Mutation::CheckpointBeforeCommit) {
            self.checkpoint_uncommitted(id, &t)?
        } else {
            redo
        };
        log::set_valid(&mut self.dev, &self.g, &commit_flag)?;
        self.dev.fence()?; // B: committed
        self.committing = None;
        let undo: Vec<u64> = t.undo.iter().map(|u| u.0).collect();
        if !undo.is_empty() {
            log::invalidate(&mut self.dev, &self.g, &undo)?;
            self.dev.fence()?; // C
            self.log.free.extend(undo);
        }
        // Before anything it freed is reused (release_freed): no redo entry of a dropped
        // inode may survive into a new file of the same number.
        self.retire_versions(&t.retired)?;
        if n == 0 {
            self.dead_commits.push((id, cslot));
        } else {
            self.live.insert(
                id,
                LiveCommit {
                    slot: cslot,
                    remaining: n,
                },
            );
        }
        self.stats.redo_entries += n;
        self.stats.committed += 1;
        self.release_freed(&t);
        self.finish(id, true);
        let mut st = t.stats;
        st.redo_entries = n;
        self.checkpoint_after_commit(long)?;
        Ok(st)
    }

    /// The checkpoint work this commit makes due (002 §III-E): long pending lists, or
    /// everything when the log or the free space runs low. Inline, or left to the background
    /// checkpointer ([`PmemFs::checkpoint_step`]); a call that finds the log or the free
    /// blocks exhausted still checkpoints inline (ensure_log, take_blocks).
    fn checkpoint_after_commit(&mut self, long: Vec<(Ino, u64)>) -> Result<()> {
        if self.tun.background_checkpoints {
            self.long_lists.extend(long);
        } else if self.checkpoint_pressure() {
            self.checkpoint_where(|_, _| true)?;
        } else if !long.is_empty() {
            self.checkpoint_blocks(&long)?;
        }
        Ok(())
    }

    /// Mutation [`Mutation::CheckpointBeforeCommit`]: installs `t`'s blocks before its commit
    /// record is valid; returns how many of its redo entries are left (the bookkeeping stays
    /// consistent, so only crash images can show the bug).
    fn checkpoint_uncommitted(&mut self, id: u64, t: &Tx) -> Result<u64> {
        let blocks: Vec<(Ino, u64)> = t.data.iter().copied().collect();
        self.checkpoint_blocks(&blocks)?;
        let mine = |v: &crate::index::Versions| v.committed.iter().any(|c| c.tx == id);
        Ok(blocks
            .iter()
            .filter(|&&(i, l)| self.index.get(i, l).is_some_and(mine))
            .count() as u64)
    }

    /// What a committed transaction freed becomes reusable (its commit is durable).
    fn release_freed(&mut self, t: &Tx) {
        self.free_blocks.extend(t.freed_blocks.iter().copied());
        self.free_inodes.extend(t.freed_inodes.iter().copied());
        for &(d, s) in &t.freed_slots {
            if let Some(di) = self.dirs.get_mut(&d) {
                di.free.insert(s);
            }
        }
    }

    pub(crate) fn abort_tx(&mut self, id: u64) -> Result<()> {
        let t = self
            .txs
            .remove(&id)
            .ok_or_else(|| PmemFsError::Internal(format!("abort of unknown transaction {id}")))?;
        for o in &t.owned {
            self.owner.remove(o);
        }
        if !t.undo.is_empty() || !t.dirty_lines.is_empty() {
            // Everything it stored in place is written back with the restored values, so
            // that what is persistent is again what reads see (a fresh word it set, e.g. a
            // zeroed pointer of an inode it created, is not restored but must not stay
            // volatile: a later transaction storing the same value would not flush it).
            for &l in &t.dirty_lines {
                self.dev.clwb(l * LINE, LINE)?;
            }
            // Newest first, so the oldest value of each word is what remains (each word is
            // logged once per transaction anyway).
            for (_, target, old) in t.undo.iter().rev() {
                self.dev.write(*target, old)?;
                self.dev.clwb(*target, old.len() as u64)?;
            }
            self.dev.fence()?;
            let slots: Vec<u64> = t.undo.iter().map(|u| u.0).collect();
            if !slots.is_empty() {
                log::invalidate(&mut self.dev, &self.g, &slots)?;
                self.dev.fence()?;
                self.log.free.extend(slots);
            }
        }
        for &(ino, lbn) in &t.data {
            if let Some(o) = self.index.entry(ino, lbn).open.take() {
                self.free_blocks.insert(o.pblk);
            }
            self.index.tidy(ino, lbn);
        }
        self.unretire_versions(&t.retired);
        crate::invariants::release(&mut self.log.reserved, t.reserved, "log.reserved (abort)");
        self.free_blocks.extend(t.new_blocks.iter().copied());
        self.free_inodes.extend(t.new_inodes.iter().copied());
        for i in &t.new_inodes {
            // Its create is undone: an open of it is stale (its release does nothing).
            self.opens.remove(i);
            self.tmpfiles.remove(i);
        }
        for &d in &t.dirs {
            // Directories the transaction created are gone; the others are as they were.
            if t.new_inodes.contains(&d) {
                self.dirs.remove(&d);
            } else {
                self.rescan_dir(d)?;
            }
        }
        if !t.legacy {
            self.stats.aborted += 1;
        }
        self.finish(id, false);
        Ok(())
    }
}

/// The runs of set bits of `bitmap` as half-open ranges [start, end), lowest first.
pub(crate) fn bit_runs(bitmap: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut rest = bitmap;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let start = rest.trailing_zeros() as u64;
        let ones = (rest >> start).trailing_ones() as u64;
        let end = start + ones;
        rest &= if end >= 64 { 0 } else { !0u64 << end };
        Some((start, end))
    })
}

#[cfg(test)]
mod tests {
    use super::bit_runs;

    #[test]
    fn bit_runs_cover_exactly_the_set_bits() {
        for bitmap in [
            0u64,
            1,
            0b1011_0110,
            u64::MAX,
            1 << 63,
            0xF0F0_0000_0000_000F,
        ] {
            let mut back = 0u64;
            let mut prev_end = 0;
            for (s, e) in bit_runs(bitmap) {
                assert!(s < e && e <= 64 && (s == 0 || s > prev_end || prev_end == 0));
                for b in s..e {
                    back |= 1 << b;
                }
                prev_end = e;
            }
            assert_eq!(back, bitmap, "{bitmap:#x}");
        }
    }
}
