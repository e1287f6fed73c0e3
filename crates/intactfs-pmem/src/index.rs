//! The Two-Level Volatile Index (002 §III-D, Figure 4): per file and logical block, the
//! pending list of committed versions in commit order (each a pending block and the bitmap of
//! the cachelines it holds), plus at most one uncommitted version of the one open
//! transaction that owns the file. A line's newest data is in the newest version whose bitmap
//! has its bit, else in the home block the file's pointers name (a hole reads as zeros).
//!
//! The first level is a hash map by inode, the second one by block, rather than a radix
//! tree per inode; whatever walks it gets blocks in (ino, lbn) order (sorted on the way
//! out), so checkpoints are deterministic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// A multiplicative (Fibonacci) hash for the index's keys, inode and block numbers: they
/// are the engine's own, not chosen by an attacker, and SipHash's cost would show in a
/// transaction's profile. Deterministic, so the simulation's runs repeat.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(29) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        // The high bits are the well-mixed ones; fold them into the low ones that pick the
        // bucket.
        self.0 ^ self.0 >> 32
    }
}

type Fast = BuildHasherDefault<WordHasher>;

/// Blocks of one file with a version, by block number.
type FileVersions = HashMap<u64, Versions, Fast>;

/// The index: per inode, per block (two hash lookups, where the ordered map this replaced
/// took a tree descent of cold nodes per lookup and per insert). Everything that walks it
/// returns blocks in (ino, lbn) order, as the ordered map did, so checkpoints and checks
/// stay deterministic.
#[derive(Debug, Default)]
pub struct Index {
    files: HashMap<u64, FileVersions, Fast>,
}

impl Index {
    pub fn get(&self, ino: u64, lbn: u64) -> Option<&Versions> {
        self.files.get(&ino)?.get(&lbn)
    }
    pub fn entry(&mut self, ino: u64, lbn: u64) -> &mut Versions {
        self.files.entry(ino).or_default().entry(lbn).or_default()
    }
    /// Drops the entry of a block once it holds no version.
    pub fn tidy(&mut self, ino: u64, lbn: u64) {
        let Some(f) = self.files.get_mut(&ino) else {
            return;
        };
        if f.get(&lbn).is_some_and(|v| v.is_empty()) {
            f.remove(&lbn);
            if f.is_empty() {
                self.files.remove(&ino);
            }
        }
    }
    /// The blocks of `ino` with at least one version, and their versions, by block.
    pub fn file(&self, ino: u64) -> impl Iterator<Item = (u64, &Versions)> {
        let mut v: Vec<(u64, &Versions)> = match self.files.get(&ino) {
            Some(f) => f.iter().map(|(&l, v)| (l, v)).collect(),
            None => Vec::new(),
        };
        v.sort_unstable_by_key(|e| e.0);
        v.into_iter()
    }
    /// Takes every committed version of `ino` out of the index (a file being dropped: its
    /// versions are retired when the drop commits), in (lbn, commit) order.
    pub fn take_committed(&mut self, ino: u64) -> Vec<(u64, Committed)> {
        let Some(f) = self.files.get_mut(&ino) else {
            return Vec::new();
        };
        let mut lbns: Vec<u64> = f.keys().copied().collect();
        lbns.sort_unstable();
        let mut out = Vec::new();
        for lbn in lbns {
            let v = f.get_mut(&lbn).expect("listed above");
            out.extend(v.committed.drain(..).map(|c| (lbn, c)));
        }
        f.retain(|_, v| !v.is_empty());
        if f.is_empty() {
            self.files.remove(&ino);
        }
        out
    }
    /// Takes the committed versions of every block `sel` selects out of the index (a
    /// checkpoint's, in (ino, lbn) order) without copying them; a block left with no
    /// version leaves the index.
    pub fn take_committed_where(
        &mut self,
        sel: impl Fn(u64, u64) -> bool,
    ) -> Vec<(u64, u64, Vec<Committed>)> {
        let mut out = Vec::new();
        self.files.retain(|&ino, f| {
            f.retain(|&lbn, v| {
                if !v.committed.is_empty() && sel(ino, lbn) {
                    out.push((ino, lbn, std::mem::take(&mut v.committed)));
                }
                !v.is_empty()
            });
            !f.is_empty()
        });
        out.sort_unstable_by_key(|e| (e.0, e.1));
        out
    }
    /// Takes the committed versions of `blocks` out of the index (a background unit's, in
    /// (ino, lbn) order; blocks without committed versions are skipped).
    pub fn take_committed_of(&mut self, blocks: &[(u64, u64)]) -> Vec<(u64, u64, Vec<Committed>)> {
        let mut sorted = blocks.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out = Vec::with_capacity(sorted.len());
        for (ino, lbn) in sorted {
            let Some(v) = self.files.get_mut(&ino).and_then(|f| f.get_mut(&lbn)) else {
                continue;
            };
            if !v.committed.is_empty() {
                out.push((ino, lbn, std::mem::take(&mut v.committed)));
                self.tidy(ino, lbn);
            }
        }
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
        let mut out: Vec<(u64, u64)> = self
            .all()
            .into_iter()
            .filter(|(_, v)| !v.committed.is_empty())
            .map(|(k, _)| k)
            .collect();
        out.sort_unstable();
        out
    }
    /// Every block with a version, in (ino, lbn) order.
    pub fn all(&self) -> Vec<((u64, u64), &Versions)> {
        let mut out: Vec<((u64, u64), &Versions)> = self
            .files
            .iter()
            .flat_map(|(&i, f)| f.iter().map(move |(&l, v)| ((i, l), v)))
            .collect();
        out.sort_unstable_by_key(|e| e.0);
        out
    }
    /// Committed versions in the index (redo entries not yet checkpointed).
    pub fn committed_count(&self) -> usize {
        self.files
            .values()
            .flat_map(|f| f.values())
            .map(|v| v.committed.len())
            .sum()
    }
}
