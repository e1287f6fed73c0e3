//! The distinct crash states of a run, numbered in the order they are first seen, with
//! their verdicts: what deduplication looks states up in, and what the report names
//! states by (`s<number>`).
//!
//! Kept for every distinct state of the run, so laid out for size (issue 29: a million
//! states at 10,000 appends). A state's hash and verdict sit in vectors indexed by its
//! number (33 bytes a state); the lookup by hash is a table of 4-byte numbers whose
//! equality reads the hash vector. A map from hashes to entries (48 bytes a bucket) was
//! 103 MB at a million states, and 154 MB while its table doubled; here the table is a
//! tenth of that, and the vectors grow by `realloc`, which moves a large block by
//! remapping its pages rather than holding two copies.

use hashbrown::HashTable;
use intact_explore::StateHash;

pub use intact_report::StateNo;

/// A verdict without its message (a failure's message is kept apart: most states pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    Pass,
    Fail,
    Timeout,
}

#[derive(Default)]
pub struct Seen {
    /// By state number.
    hashes: Vec<StateHash>,
    /// By state number; None until the checker's verdict is in.
    verdicts: Vec<Option<Judged>>,
    /// The state numbers, found by their hash's first 8 bytes and compared in `hashes`.
    index: HashTable<StateNo>,
}

/// The table's hash of a state: its content hash is already uniform (blake3).
fn bucket_hash(h: &StateHash) -> u64 {
    let mut head = [0u8; 8];
    head.copy_from_slice(&h[..8]);
    u64::from_le_bytes(head)
}

impl Seen {
    /// The number of distinct states seen.
    pub fn len(&self) -> usize {
        assert_eq!(
            self.hashes.len(),
            self.verdicts.len(),
            "one verdict a state"
        );
        self.hashes.len()
    }

    /// The number of a state, if it was seen.
    pub fn get(&self, h: &StateHash) -> Option<StateNo> {
        let hashes = &self.hashes;
        let no = self
            .index
            .find(bucket_hash(h), |&n| hashes[n as usize] == *h)
            .copied();
        assert!(
            no.is_none_or(|n| (n as usize) < hashes.len()),
            "a known number"
        );
        no
    }

    /// The number of a state, and whether it is new (numbered now, without a verdict).
    /// Fails only when the run has more distinct states than numbers.
    pub fn insert(&mut self, h: StateHash) -> Result<(StateNo, bool), String> {
        if let Some(n) = self.get(&h) {
            return Ok((n, false));
        }
        let n = StateNo::try_from(self.hashes.len()).map_err(|_| {
            format!(
                "more than {} distinct crash states: split the workload or use --max-states",
                StateNo::MAX
            )
        })?;
        self.hashes.push(h);
        self.verdicts.push(None);
        let hashes = &self.hashes;
        self.index
            .insert_unique(bucket_hash(&h), n, |&m| bucket_hash(&hashes[m as usize]));
        assert_eq!(
            self.get(&h),
            Some(n),
            "a state is found by its hash once numbered"
        );
        Ok((n, true))
    }

    /// The verdict of state `n`, once known.
    pub fn verdict(&self, n: StateNo) -> Option<Judged> {
        self.verdicts.get(n as usize).copied().flatten()
    }

    /// Records the verdict of state `n`; a state is judged once.
    pub fn judge(&mut self, n: StateNo, judged: Judged) {
        let slot = self
            .verdicts
            .get_mut(n as usize)
            .expect("only a numbered state is judged");
        assert!(slot.is_none(), "state s{n} is judged once");
        *slot = Some(judged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u32) -> StateHash {
        let mut h = [0u8; 32];
        // Equal first 8 bytes for pairs of states: the table must compare whole hashes.
        h[..4].copy_from_slice(&(i / 2).to_le_bytes());
        h[28..].copy_from_slice(&i.to_le_bytes());
        h
    }

    #[test]
    fn states_are_numbered_in_order_and_found_by_hash() {
        let mut seen = Seen::default();
        for i in 0..10_000u32 {
            assert_eq!(seen.insert(hash(i)), Ok((i, true)));
        }
        for i in (0..10_000u32).rev() {
            assert_eq!(seen.insert(hash(i)), Ok((i, false)));
            assert_eq!(seen.get(&hash(i)), Some(i));
        }
        assert_eq!(seen.len(), 10_000);
        assert_eq!(seen.get(&hash(10_000)), None);
    }

    #[test]
    fn a_verdict_is_kept_by_number() {
        let mut seen = Seen::default();
        let (a, _) = seen.insert(hash(1)).unwrap();
        let (b, _) = seen.insert(hash(2)).unwrap();
        assert_eq!(seen.verdict(a), None);
        seen.judge(b, Judged::Fail);
        seen.judge(a, Judged::Pass);
        assert_eq!(
            (seen.verdict(a), seen.verdict(b)),
            (Some(Judged::Pass), Some(Judged::Fail))
        );
        assert_eq!(seen.verdict(7), None, "an unknown number has no verdict");
    }
}
