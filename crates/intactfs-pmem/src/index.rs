//! The Two-Level Volatile Index (002 §III-D, Figure 4): per file and logical block, the
//! pending list of committed versions in commit order (each a pending block and the bitmap of
//! the cachelines it holds), plus at most one uncommitted version of the one open
//! transaction that owns the file. A line's newest data is in the newest version whose bitmap
//! has its bit, else in the home block the file's pointers name (a hole reads as zeros).
//!
//! The first level is a `BTreeMap` keyed by (ino, lbn) rather than a radix tree per inode:
//! ordered iteration gives the checkpoint a deterministic order, and one file's blocks are
//! one range of it.

use std::collections::BTreeMap;

/// A committed, not yet checkpointed version: its redo entry sits in log slot `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub tx: u64,
    pub cseq: u64,
    pub pblk: u64,
    pub bitmap: u64,
    pub slot: u64,
}

/// An open transaction's version: nothing durable names its pending block until commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    pub tx: u64,
    pub pblk: u64,
    pub bitmap: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Versions {
    /// Oldest first (commit order).
    pub committed: Vec<Committed>,
    pub open: Option<Open>,
}

impl Versions {
    /// The pending block holding the newest content of `line`, if any version has it.
    pub fn line_source(&self, line: u64, with_open: bool) -> Option<u64> {
        if with_open {
            if let Some(o) = &self.open {
                if o.bitmap >> line & 1 == 1 {
                    return Some(o.pblk);
                }
            }
        }
        self.committed
            .iter()
            .rev()
            .find(|c| c.bitmap >> line & 1 == 1)
            .map(|c| c.pblk)
    }
    fn is_empty(&self) -> bool {
        self.committed.is_empty() && self.open.is_none()
    }
}

#[derive(Debug, Default)]
pub struct Index {
    map: BTreeMap<(u64, u64), Versions>,
}

impl Index {
    pub fn get(&self, ino: u64, lbn: u64) -> Option<&Versions> {
        self.map.get(&(ino, lbn))
    }
    pub fn entry(&mut self, ino: u64, lbn: u64) -> &mut Versions {
        self.map.entry((ino, lbn)).or_default()
    }
    /// Drops the entry of a block once it holds no version.
    pub fn tidy(&mut self, ino: u64, lbn: u64) {
        if self.map.get(&(ino, lbn)).is_some_and(|v| v.is_empty()) {
            self.map.remove(&(ino, lbn));
        }
    }
    /// The blocks of `ino` with at least one version, and their versions.
    pub fn file(&self, ino: u64) -> impl Iterator<Item = (u64, &Versions)> {
        self.map
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(&(_, l), v)| (l, v))
    }
    /// Takes every committed version of `ino` out of the index (a file being dropped: its
    /// versions are retired when the drop commits), in (lbn, commit) order.
    pub fn take_committed(&mut self, ino: u64) -> Vec<(u64, Committed)> {
        let mut out = Vec::new();
        for (&(_, lbn), v) in self.map.range_mut((ino, 0)..=(ino, u64::MAX)) {
            out.extend(v.committed.drain(..).map(|c| (lbn, c)));
        }
        self.map.retain(|&(i, _), v| i != ino || !v.is_empty());
        out
    }
    /// Takes the committed versions of every block `sel` selects out of the index (a
    /// checkpoint's, in (ino, lbn) order), in one pass and without copying them; a block
    /// left with no version leaves the index.
    pub fn take_committed_where(
        &mut self,
        sel: impl Fn(u64, u64) -> bool,
    ) -> Vec<(u64, u64, Vec<Committed>)> {
        let mut out = Vec::new();
        self.map.retain(|&(ino, lbn), v| {
            if !v.committed.is_empty() && sel(ino, lbn) {
                out.push((ino, lbn, std::mem::take(&mut v.committed)));
            }
            !v.is_empty()
        });
        out
    }
    /// Puts back the versions [`Index::take_committed_where`] took from a block that a
    /// checkpoint could not install (no block for an indirect level).
    pub fn put_back_committed(&mut self, ino: u64, lbn: u64, vers: Vec<Committed>) {
        let v = self.entry(ino, lbn);
        assert!(
            v.committed.is_empty(),
            "inode {ino} block {lbn} got committed versions during a checkpoint"
        );
        v.committed = vers;
    }
    /// Every block with committed versions, in (ino, lbn) order.
    pub fn committed_blocks(&self) -> Vec<(u64, u64)> {
        self.map
            .iter()
            .filter(|(_, v)| !v.committed.is_empty())
            .map(|(&k, _)| k)
            .collect()
    }
    pub fn all(&self) -> impl Iterator<Item = (&(u64, u64), &Versions)> {
        self.map.iter()
    }
    /// Committed versions in the index (redo entries not yet checkpointed).
    pub fn committed_count(&self) -> usize {
        self.map.values().map(|v| v.committed.len()).sum()
    }
}
