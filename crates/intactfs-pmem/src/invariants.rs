//! The engine's invariants, checked as a whole (issue 25 item 5): what must hold between
//! calls, for the crash simulation to call after every step and for tests.
//!
//! [`PmemFs::check_invariants`] is [`PmemFs::check`] (pmem metadata well formed, every data
//! block named, pending or free exactly once, free-inode map and directory indexes as pmem
//! says) plus the volatile bookkeeping that `check` does not see:
//! * **log space**: every slot in use is accounted for exactly once (an open transaction's
//!   undo entry, a committed version's redo entry, a live or dead commit record), none of
//!   them free; the reservation counter is the sum of the open transactions' promises and
//!   no larger than the free slots (a promise the log cannot keep is how a commit would
//!   fail after its point of no return);
//! * **index**: every open version belongs to the open transaction that lists it; committed
//!   versions are in commit order and below the next commit ticket; a live commit's
//!   remaining count equals its versions still in the index;
//! * **ownership and undo state**: the owner map and the transactions' owned sets agree;
//!   undo entries and dirty lines lie in the metadata area, each undo entry's words are
//!   marked logged.
//!
//! Every check returns the first violation as [`PmemFsError::Internal`], never panics: a
//! violation is a bug of the engine, reported with what broke. The cost is a scan of the
//! metadata (as `check`) plus one pass over the index and the open transactions.
//!
//! [`release`] (from intactfs-device) is the checked form of `counter -= n` for in-memory
//! counters whose underflow can only be a bug (reservations, remaining counts): it asserts.

use crate::error::{PmemFsError, Result};
use crate::layout::{BLOCK, LINE, MAX_BLOCKS, ROOT};
use crate::log::UNDO_PAYLOAD;
use crate::PmemFs;
use intactfs_device::PmemDevice;
use std::collections::{HashMap, HashSet};

pub(crate) use intactfs_device::counter::release;

fn violation(s: String) -> PmemFsError {
    PmemFsError::Internal(format!("invariant violated: {s}"))
}

impl<P: PmemDevice> PmemFs<P> {
    /// Checks every invariant between calls (see the module documentation); the first
    /// violation is returned as [`PmemFsError::Internal`].
    pub fn check_invariants(&self) -> Result<()> {
        self.check()?;
        self.check_bounds()?;
        self.check_log_space()?;
        self.check_index()?;
        self.check_ownership()?;
        self.check_undo_state()
    }

    /// Free blocks in the data area, free inodes in the table (never the root or slot 0).
    fn check_bounds(&self) -> Result<()> {
        if let Some(b) = self.free_blocks.iter().find(|&&b| !self.g.is_data_block(b)) {
            return Err(violation(format!(
                "free block {b} is outside the data area {}..{}",
                self.g.data_start, self.g.total_blocks
            )));
        }
        if let Some(i) = self
            .free_inodes
            .iter()
            .find(|&&i| i < 2 || i >= self.g.inodes)
        {
            return Err(violation(format!(
                "free inode {i} is outside 2..{}",
                self.g.inodes
            )));
        }
        Ok(())
    }

    /// Every log slot in use accounted for exactly once; reservations summed and keepable.
    fn check_log_space(&self) -> Result<()> {
        let log = &self.log;
        if log.total != self.g.log_entries {
            return Err(violation(format!(
                "log total {} differs from the geometry's {} entries",
                log.total, self.g.log_entries
            )));
        }
        if let Some(s) = log.free.last().filter(|&&s| s >= log.total) {
            return Err(violation(format!(
                "free log slot {s} is beyond the log ({} entries)",
                log.total
            )));
        }
        let promised: u64 = self.txs.values().map(|t| t.reserved).sum();
        if log.reserved != promised {
            return Err(violation(format!(
                "log.reserved is {} but the open transactions hold {promised}",
                log.reserved
            )));
        }
        if log.reserved > log.free.len() as u64 {
            return Err(violation(format!(
                "{} log entries promised, only {} free: a commit could run out of log",
                log.reserved,
                log.free.len()
            )));
        }
        let used = self.slots_in_use()?;
        if used.len() as u64 != log.used() {
            return Err(violation(format!(
                "{} log slots are in use ({} total, {} free) but {} are accounted for (undo, redo, commit records)",
                log.used(),
                log.total,
                log.free.len(),
                used.len()
            )));
        }
        Ok(())
    }

    /// The log slots the volatile state says are in use, each once and none free.
    fn slots_in_use(&self) -> Result<HashSet<u64>> {
        let undo = self.txs.iter().flat_map(|(&id, t)| {
            t.undo
                .iter()
                .map(move |u| (u.0, format!("undo of tx {id}")))
        });
        let redo = self.index.all().into_iter().flat_map(|(k, v)| {
            v.committed
                .iter()
                .map(move |c| (c.slot, format!("redo of {k:?}")))
        });
        let retired = self.txs.iter().flat_map(|(&id, t)| {
            t.retired.iter().map(move |r| {
                (
                    r.2.slot,
                    format!("redo of {:?} retired by tx {id}", (r.0, r.1)),
                )
            })
        });
        let live = self
            .live
            .iter()
            .map(|(tx, l)| (l.slot, format!("commit record of tx {tx}")));
        let dead = self
            .dead_commits
            .iter()
            .map(|&(tx, s)| (s, format!("dead commit record of tx {tx}")));
        let mut seen: HashMap<u64, String> = HashMap::new();
        for (slot, what) in undo.chain(redo).chain(retired).chain(live).chain(dead) {
            if slot >= self.log.total || self.log.free.contains(&slot) {
                return Err(violation(format!(
                    "log slot {slot} ({what}) is free or beyond the log"
                )));
            }
            if let Some(prev) = seen.insert(slot, what.clone()) {
                return Err(violation(format!(
                    "log slot {slot} is both {prev} and {what}"
                )));
            }
        }
        Ok(seen.into_keys().collect())
    }

    /// Open versions belong to their transaction; committed ones in ticket order, counted by
    /// their live commit.
    fn check_index(&self) -> Result<()> {
        let mut versions: HashMap<u64, u64> = HashMap::new();
        for ((ino, lbn), v) in self.index.all() {
            if ino <= ROOT || ino >= self.g.inodes || lbn >= MAX_BLOCKS {
                return Err(violation(format!(
                    "the index holds block {lbn} of inode {ino}: no file can have it (inodes 2..{}, {MAX_BLOCKS} blocks)",
                    self.g.inodes
                )));
            }
            if let Some(o) = &v.open {
                let listed = self
                    .txs
                    .get(&o.tx)
                    .is_some_and(|t| t.data.contains(&(ino, lbn)));
                if !listed {
                    return Err(violation(format!(
                        "block {lbn} of inode {ino} holds an open version of tx {} that does not list it",
                        o.tx
                    )));
                }
            }
            for w in v.committed.windows(2) {
                if w[0].cseq >= w[1].cseq {
                    return Err(violation(format!(
                        "block {lbn} of inode {ino}: committed versions out of commit order ({} then {})",
                        w[0].cseq, w[1].cseq
                    )));
                }
            }
            for c in &v.committed {
                if c.cseq >= self.next_cseq {
                    return Err(violation(format!(
                        "block {lbn} of inode {ino}: commit ticket {} not below the next one {}",
                        c.cseq, self.next_cseq
                    )));
                }
                *versions.entry(c.tx).or_default() += 1;
            }
        }
        // A retired version still counts for its commit record until the drop commits.
        for t in self.txs.values() {
            for (ino, lbn, c) in &t.retired {
                if self.index.get(*ino, *lbn).is_some() {
                    return Err(violation(format!(
                        "block {lbn} of inode {ino} is retired by a transaction but still in the index"
                    )));
                }
                *versions.entry(c.tx).or_default() += 1;
            }
        }
        self.check_live_counts(&versions)
    }

    /// A live commit's remaining count equals its versions in the index (and retired by open
    /// transactions); a transaction with versions there has a live commit record.
    fn check_live_counts(&self, versions: &HashMap<u64, u64>) -> Result<()> {
        for (tx, l) in &self.live {
            let n = versions.get(tx).copied().unwrap_or(0);
            if l.remaining != n || n == 0 {
                return Err(violation(format!(
                    "live commit of tx {tx} counts {} remaining redo entries, the index holds {n}",
                    l.remaining
                )));
            }
        }
        if let Some(tx) = versions.keys().find(|tx| !self.live.contains_key(tx)) {
            return Err(violation(format!(
                "the index holds committed versions of tx {tx}, which has no live commit record"
            )));
        }
        Ok(())
    }

    /// The owner map and the transactions' owned sets agree; an open transaction's
    /// reservation is its commit record plus one redo entry per open version.
    fn check_ownership(&self) -> Result<()> {
        for (&ino, &tx) in &self.owner {
            if !self.txs.get(&tx).is_some_and(|t| t.owned.contains(&ino)) {
                return Err(violation(format!(
                    "inode {ino} is owned by tx {tx}, which is not open or does not list it"
                )));
            }
        }
        for (&id, t) in &self.txs {
            if let Some(i) = t.owned.iter().find(|i| self.owner.get(i) != Some(&id)) {
                return Err(violation(format!(
                    "tx {id} lists inode {i} as owned, the owner map says {:?}",
                    self.owner.get(i)
                )));
            }
            let open = t
                .data
                .iter()
                .filter(|&&(i, l)| {
                    self.index
                        .get(i, l)
                        .and_then(|v| v.open)
                        .is_some_and(|o| o.tx == id)
                })
                .count() as u64;
            if open != t.data.len() as u64 || t.reserved != 1 + open {
                return Err(violation(format!(
                    "tx {id} reserves {} log entries, lists {} blocks, holds {open} open versions (1 + versions expected)",
                    t.reserved,
                    t.data.len()
                )));
            }
        }
        Ok(())
    }

    /// Open transactions' undo entries and dirty lines lie in the metadata area (inode table
    /// onwards: directory and pointer blocks are metadata too), whole words, logged.
    fn check_undo_state(&self) -> Result<()> {
        let (lo, hi) = (self.g.inode_start * BLOCK, self.g.total_blocks * BLOCK);
        for (&id, t) in &self.txs {
            for (slot, target, old) in &t.undo {
                let len = old.len() as u64;
                let bad = *target < lo
                    || target.saturating_add(len) > hi
                    || !target.is_multiple_of(8)
                    || len == 0
                    || old.len() > UNDO_PAYLOAD
                    || !len.is_multiple_of(8);
                if bad {
                    return Err(violation(format!(
                        "tx {id}: undo entry in slot {slot} covers {len} bytes at {target}, outside the metadata area {lo}..{hi} or not whole words"
                    )));
                }
                if let Some(w) = (0..len / 8)
                    .map(|k| target + k * 8)
                    .find(|w| !t.logged.contains(w))
                {
                    return Err(violation(format!(
                        "tx {id}: word {w} has an undo entry but is not marked logged"
                    )));
                }
            }
            if let Some(l) = t
                .dirty_lines
                .iter()
                .find(|&&l| l < lo / LINE || l >= hi / LINE)
            {
                return Err(violation(format!(
                    "tx {id}: dirty line {l} is outside the metadata area"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::{MkfsOptions, Owner, Tunables};
    use intactfs_device::PmemSim;

    fn fresh() -> PmemFs<PmemSim> {
        let mut dev = PmemSim::new(512 << 10).expect("device");
        PmemFs::mkfs(&mut dev, &MkfsOptions::for_len(512 << 10)).expect("mkfs");
        let (mut fs, _) = PmemFs::mount(dev).expect("mount");
        fs.set_tunables(Tunables::default());
        fs
    }

    #[test]
    fn a_fresh_and_a_busy_engine_hold_them() {
        let mut fs = fresh();
        fs.check_invariants().expect("fresh");
        let tx = fs.tx_begin(&[]).expect("begin");
        let a = fs
            .create(Some(tx), ROOT, b"a", 0o644, Owner::default())
            .expect("create")
            .ino;
        fs.write(Some(tx), a, 100, &[7u8; 9000]).expect("write");
        fs.check_invariants().expect("open transaction");
        fs.tx_commit(tx).expect("commit");
        fs.check_invariants().expect("committed");
    }

    #[test]
    fn a_leaked_reservation_is_reported() {
        let mut fs = fresh();
        let _tx = fs.tx_begin(&[]).expect("begin");
        fs.log.reserved += 1;
        let e = fs.check_invariants().expect_err("a leak must be seen");
        assert!(e.to_string().contains("log.reserved"), "{e}");
    }

    #[test]
    fn a_free_slot_still_in_use_is_reported() {
        let mut fs = fresh();
        let tx = fs.tx_begin(&[]).expect("begin");
        fs.create(Some(tx), ROOT, b"a", 0o644, Owner::default())
            .expect("create");
        let slot = fs.txs.values().next().expect("open").undo[0].0;
        fs.log.free.insert(slot);
        let e = fs
            .check_invariants()
            .expect_err("a double use must be seen");
        assert!(e.to_string().contains(&format!("log slot {slot}")), "{e}");
    }

    #[test]
    fn a_wrong_live_count_is_reported() {
        let mut fs = fresh();
        let a = fs
            .create(None, ROOT, b"a", 0o644, Owner::default())
            .expect("create")
            .ino;
        fs.write(None, a, 0, &[1u8; 100]).expect("write");
        let l = fs.live.values_mut().next().expect("a live commit");
        l.remaining += 1;
        let e = fs
            .check_invariants()
            .expect_err("a wrong count must be seen");
        assert!(e.to_string().contains("remaining"), "{e}");
    }
}
