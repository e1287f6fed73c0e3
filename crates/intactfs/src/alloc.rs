//! Free space: derived from the metadata at mount, never journaled (design brief).
//!
//! Blocks freed by a commit wait in `pending`, tagged with the commit's sequence number,
//! until the engine knows that commit is durable (and recovery will no longer check the
//! checksums of the blocks' older contents), so a crash can never leave durable metadata
//! pointing at a block that was reused (OptFS "reuse after notification", ccfs order-less
//! space reuse).

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct Allocator {
    /// start → length of each free run.
    free: BTreeMap<u64, u64>,
    free_blocks: u64,
    /// Freed by commits that are not yet known durable: (commit sequence, start, length).
    pending: Vec<(u64, u64, u64)>,
    /// Next-fit cursor: consecutive allocations continue where the last one ended, so a
    /// file appended over several commits stays contiguous.
    cursor: u64,
}

impl Allocator {
    /// Everything in [start, end) is free.
    pub fn new(start: u64, end: u64) -> Allocator {
        let mut a = Allocator::default();
        if end > start {
            a.free.insert(start, end - start);
            a.free_blocks = end - start;
        }
        a.cursor = start;
        a
    }

    pub fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// The free runs (start, length), by start: what `free_blocks` counts (invariants).
    pub fn free_runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.free.iter().map(|(&s, &l)| (s, l))
    }

    /// Runs freed by commits not yet durable: (commit sequence, start, length).
    pub fn pending_runs(&self) -> &[(u64, u64, u64)] {
        &self.pending
    }

    /// Marks [start, start+len) used; false if any of it was not free (a double use).
    pub fn take(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let Some((&fs, &fl)) = self.free.range(..=start).next_back() else {
            return false;
        };
        if fs + fl < start + len {
            return false;
        }
        self.free.remove(&fs);
        if fs < start {
            self.free.insert(fs, start - fs);
        }
        if start + len < fs + fl {
            self.free.insert(start + len, fs + fl - start - len);
        }
        intactfs_device::counter::release(
            &mut self.free_blocks,
            len,
            "Allocator::free_blocks (take)",
        );
        true
    }

    /// How many runs the free space is split into.
    pub fn free_run_count(&self) -> u64 {
        self.free.len() as u64
    }

    /// Up to `want` blocks as runs, next-fit from the cursor; fewer only if space runs out.
    pub fn alloc(&mut self, want: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut left = want;
        while left > 0 && self.free_blocks > 0 {
            let pick = self
                .free
                .range(self.cursor..)
                .next()
                .or_else(|| self.free.iter().next())
                .map(|(s, l)| (*s, *l));
            let Some((s, l)) = pick else { break };
            let n = l.min(left);
            self.take(s, n);
            out.push((s, n));
            self.cursor = s + n;
            left -= n;
        }
        out
    }

    /// Returns a run to the free set now (the caller knows nothing durable refers to it).
    pub fn release(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            assert!(
                ps + pl <= start,
                "double free of block {start}: free run {ps}+{pl}"
            );
            if ps + pl == start {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some((&ns, &nl)) = self.free.range(start..).next() {
            assert!(
                ns >= start + len,
                "double free of block {ns}: free run {ns}+{nl} inside {start}+{len}"
            );
        }
        if let Some(&nl) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            l += nl;
        }
        self.free.insert(s, l);
        self.free_blocks += len;
    }

    /// Frees a run once commit `seq`, which freed it, is durable.
    pub fn defer(&mut self, seq: u64, start: u64, len: u64) {
        if len > 0 {
            self.pending.push((seq, start, len));
        }
    }

    /// Everything deferred by commits up to `seq` may be reused now.
    pub fn durable_upto(&mut self, seq: u64) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.0 <= seq);
        self.pending = later;
        for (_, s, l) in now {
            self.release(s, l);
        }
    }

    /// Everything deferred so far may be reused now.
    pub fn durable(&mut self) {
        self.durable_upto(u64::MAX);
    }

    /// Blocks freed by commits but not yet reusable.
    pub fn pending_blocks(&self) -> u64 {
        self.pending.iter().map(|p| p.2).sum()
    }

    pub fn is_free(&self, block: u64) -> bool {
        self.free
            .range(..=block)
            .next_back()
            .is_some_and(|(s, l)| block < s + l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_alloc_release_round_trip() {
        let mut a = Allocator::new(10, 100);
        assert!(a.take(20, 5));
        assert!(!a.take(22, 1), "already used");
        let got = a.alloc(15);
        assert_eq!(got, vec![(10, 10), (25, 5)]);
        assert_eq!(a.free_blocks(), 90 - 5 - 15);
        a.defer(7, 10, 10);
        a.defer(8, 20, 0);
        assert!(!a.is_free(12));
        a.durable_upto(6);
        assert!(
            !a.is_free(12),
            "freed by commit 7, which is not durable yet"
        );
        assert_eq!(a.pending_blocks(), 10);
        a.durable_upto(7);
        assert!(a.is_free(12));
        for (s, l) in got.into_iter().skip(1) {
            a.release(s, l);
        }
        a.release(20, 5);
        assert_eq!(a.free_blocks(), 90);
        assert_eq!(a.free.len(), 1, "runs coalesce: {:?}", a.free);
    }
}
