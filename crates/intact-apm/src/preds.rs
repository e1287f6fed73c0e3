//! The units one unit must follow ([`crate::Program::preds`]), stored as their longest run
//! of consecutive units and bit sets below and above it.
//!
//! A unit's predecessor set is transitively closed, so once a sync orders everything before
//! it, every later unit's set holds almost *all* units below some point (all but those no
//! sync covers, such as a new file's directory entry under ALICE's default APM): at 100,000
//! appends with an fsync every 100 (301,002 units) plain bit sets as wide as their unit (`v`
//! bits for unit `v`) took 5.7 GB, quadratic in the trace (issue 29). Here a set is the run
//! `[lo, hi)`, a bit set over `[0, lo)` and one over `[hi, v)`, which for such workloads are
//! a few bits and a few hundred: memory grows with the units times the width of the window
//! a sync leaves open. A set with no long run costs what a plain bit set did.
//!
//! The form is canonical (the run is the longest, the lowest of equally long ones; neither
//! bit set has trailing room), so two sets are equal exactly when their members are, and
//! `==` compares members.

use fixedbitset::FixedBitSet;

/// A set of units: `[lo, hi)`, the members of `low` (all below `lo`), and `hi + i` for each
/// `i` in `high`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preds {
    lo: usize,
    hi: usize,
    low: FixedBitSet,
    high: FixedBitSet,
}

/// The longest run of members of `set` (the lowest of equally long ones), as `[lo, hi)`;
/// `(0, 0)` for an empty set. Whole words of ones or zeros are taken at once.
fn longest_run(set: &FixedBitSet) -> (usize, usize) {
    const W: usize = usize::BITS as usize;
    let mut best = (0, 0);
    let mut start: Option<usize> = None;
    let mut close = |start: &mut Option<usize>, at: usize| {
        if let Some(s) = start.take() {
            if at - s > best.1 - best.0 {
                best = (s, at);
            }
        }
    };
    for (i, &word) in set.as_slice().iter().enumerate() {
        let base = i * W;
        if word == usize::MAX {
            start.get_or_insert(base);
        } else if word == 0 {
            close(&mut start, base);
        } else {
            for b in 0..W {
                if word >> b & 1 == 1 {
                    start.get_or_insert(base + b);
                } else {
                    close(&mut start, base + b);
                }
            }
        }
    }
    // Bits past the width are zero, so a run open here ends at the width at the latest.
    close(&mut start, set.as_slice().len() * W);
    (best.0, best.1.min(set.len()))
}

impl Preds {
    /// The set holding the members of `set` (any width). Takes time in the words of `set`
    /// and the bits outside its longest run, not the members of the run one by one.
    pub fn from_bits(set: &FixedBitSet) -> Preds {
        let (lo, hi) = longest_run(set);
        let mut low = FixedBitSet::with_capacity(
            set.ones()
                .take_while(|&u| u < lo)
                .last()
                .map_or(0, |u| u + 1),
        );
        for u in set.ones().take_while(|&u| u < lo) {
            low.insert(u);
        }
        let end = set.maximum().map_or(hi, |m| (m + 1).max(hi));
        let mut high = FixedBitSet::with_capacity(end - hi);
        for u in hi..end {
            if set.contains(u) {
                high.insert(u - hi);
            }
        }
        assert!(
            lo <= hi && hi <= set.len(),
            "the run lies inside the set's width"
        );
        assert!(lo == 0 || !set.contains(lo - 1), "the run is maximal below");
        assert!(!high.contains(0), "the run is maximal above");
        Preds { lo, hi, low, high }
    }

    /// Whether unit `u` is a member.
    pub fn contains(&self, u: usize) -> bool {
        if u < self.lo {
            self.low.contains(u)
        } else {
            u < self.hi || self.high.contains(u - self.hi)
        }
    }

    /// The longest run of members, `[lo, hi)`: every unit in it is implied.
    pub fn run(&self) -> (usize, usize) {
        (self.lo, self.hi)
    }

    /// The members, in increasing order.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.low
            .ones()
            .chain(self.lo..self.hi)
            .chain(self.high.ones().map(move |i| i + self.hi))
    }

    /// Whether the set is empty.
    pub fn is_clear(&self) -> bool {
        self.lo == self.hi && self.low.is_clear() && self.high.is_clear()
    }

    /// Whether every member is in `other`.
    pub fn is_subset(&self, other: &FixedBitSet) -> bool {
        if self.hi > other.len() {
            return self.lo == self.hi && self.ones().all(|u| other.contains(u));
        }
        other.contains_all_in_range(self.lo..self.hi)
            && self.low.ones().all(|u| other.contains(u))
            && self.high.ones().all(|i| other.contains(i + self.hi))
    }

    /// Whether no member is in `other`.
    pub fn is_disjoint(&self, other: &FixedBitSet) -> bool {
        let run_end = self.hi.min(other.len());
        (self.lo >= run_end || !other.contains_any_in_range(self.lo..run_end))
            && self.low.ones().all(|u| !other.contains(u))
            && self.high.ones().all(|i| !other.contains(i + self.hi))
    }

    /// Adds every member to `set` (which must be wide enough for them).
    pub fn add_to(&self, set: &mut FixedBitSet) {
        assert!(self.hi <= set.len(), "a set too narrow for the run");
        set.union_with(&self.low);
        set.insert_range(self.lo..self.hi);
        for i in self.high.ones() {
            set.insert(i + self.hi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(width: usize, ones: &[usize]) -> FixedBitSet {
        let mut s = FixedBitSet::with_capacity(width);
        for &u in ones {
            s.insert(u);
        }
        s
    }

    #[test]
    fn members_survive_the_compact_form() {
        for ones in [
            vec![],
            vec![0],
            vec![0, 1, 2],
            vec![0, 1, 2, 5, 9],
            vec![3, 4],
            vec![0, 2, 63, 64, 65, 130],
            vec![1, 5, 6, 7, 8, 20],
            vec![0, 1, 5, 6],
            (1..150).chain([152, 190]).collect(),
        ] {
            let set = bits(200, &ones);
            let p = Preds::from_bits(&set);
            assert_eq!(p.ones().collect::<Vec<_>>(), ones);
            assert_eq!(p.is_clear(), ones.is_empty());
            for u in 0..200 {
                assert_eq!(p.contains(u), ones.contains(&u), "unit {u} of {ones:?}");
            }
            // Canonical: the same members at another width give an equal set.
            assert_eq!(p, Preds::from_bits(&bits(400, &ones)));
            let mut back = FixedBitSet::with_capacity(200);
            p.add_to(&mut back);
            assert_eq!(back, set);
        }
        assert_eq!(
            Preds::from_bits(&bits(10, &[0, 1, 5, 6])).run(),
            (0, 2),
            "the lowest longest run"
        );
        assert_eq!(
            Preds::from_bits(&bits(200, &(1..150).collect::<Vec<_>>())).run(),
            (1, 150)
        );
        assert_ne!(
            Preds::from_bits(&bits(10, &[0, 1])),
            Preds::from_bits(&bits(10, &[0, 1, 2]))
        );
    }

    #[test]
    fn subset_and_disjoint_as_bit_sets() {
        let cases: [&[usize]; 7] = [
            &[],
            &[0, 1, 2],
            &[0, 1, 2, 7],
            &[5],
            &[0, 1, 2, 3, 4, 5, 6, 7],
            &[1, 3, 4, 5, 9],
            &[2, 3, 4],
        ];
        for a in cases {
            for b in cases {
                for width in [0, 3, 8, 100] {
                    let p = Preds::from_bits(&bits(100, a));
                    let other = bits(width.max(b.iter().max().map_or(0, |m| m + 1)), b);
                    let sa = bits(100, a);
                    let mut wide = other.clone();
                    wide.grow(100);
                    assert_eq!(
                        p.is_subset(&other),
                        sa.is_subset(&wide),
                        "{a:?} ⊆ {b:?} ({width})"
                    );
                    assert_eq!(
                        p.is_disjoint(&other),
                        sa.is_disjoint(&wide),
                        "{a:?} ∩ {b:?} ({width})"
                    );
                }
            }
        }
    }
}
