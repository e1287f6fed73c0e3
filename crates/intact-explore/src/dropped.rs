//! The units a reorder state leaves out among those of its horizon, stored from the first
//! unit it drops on: a state costs the span of units it drops, not one bit per unit of the
//! program (issue 29: a reorder state drops the units of a few calls, but a bit set as
//! long as the program made the report's probes O(N²) bits for N calls, 3.75 GB at
//! 10,000 appends).
//!
//! The set's value is its members only: two sets with the same members are equal and
//! hash alike whatever their history (the span is kept trimmed to its first member).

use fixedbitset::FixedBitSet;

#[derive(Clone, Debug, Default)]
pub struct Dropped {
    /// The unit of bit 0: the smallest member (0 when empty).
    from: usize,
    bits: FixedBitSet,
}

impl Dropped {
    pub fn new() -> Dropped {
        Dropped::default()
    }

    pub fn contains(&self, unit: usize) -> bool {
        unit >= self.from && self.bits.contains(unit - self.from)
    }

    pub fn insert(&mut self, unit: usize) {
        if self.bits.is_clear() {
            self.from = unit;
            self.bits.clear();
        } else if unit < self.from {
            self.rebase(unit);
        }
        let bit = unit - self.from;
        self.bits.grow(bit + 1);
        self.bits.insert(bit);
        assert!(self.contains(unit), "unit {unit} inserted");
    }

    /// Removes a member (no-op for a non-member).
    pub fn remove(&mut self, unit: usize) {
        if self.contains(unit) {
            self.bits.set(unit - self.from, false);
            self.trim();
        }
        assert!(!self.contains(unit), "unit {unit} removed");
    }

    pub fn extend(&mut self, units: impl IntoIterator<Item = usize>) {
        for u in units {
            self.insert(u);
        }
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.bits.count_ones(..)
    }
    pub fn is_empty(&self) -> bool {
        self.bits.is_clear()
    }

    /// The members in increasing order.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.ones().map(move |b| b + self.from)
    }

    /// Whether every member of `self` is one of `other`.
    pub fn is_subset(&self, other: &Dropped) -> bool {
        self.ones().all(|u| other.contains(u))
    }

    /// Starts the bits at `unit` (below the smallest member).
    fn rebase(&mut self, unit: usize) {
        assert!(unit < self.from, "rebase only lowers the start");
        let shift = self.from - unit;
        let mut bits = FixedBitSet::with_capacity(self.bits.len() + shift);
        bits.extend(self.bits.ones().map(|b| b + shift));
        (self.from, self.bits) = (unit, bits);
    }

    /// Starts the bits at the smallest member again after a removal, and ends them near
    /// the largest once they are more than twice the span (removing the largest member of
    /// a wide set would otherwise keep its width).
    fn trim(&mut self) {
        let (Some(first), Some(last)) = (self.bits.minimum(), self.bits.maximum()) else {
            *self = Dropped::default();
            return;
        };
        let span = last - first + 1;
        if first == 0 && self.bits.len() <= span * 2 + 64 {
            return;
        }
        let mut bits = FixedBitSet::with_capacity(span);
        bits.extend(self.bits.ones().map(|b| b - first));
        (self.from, self.bits) = (self.from + first, bits);
        assert!(
            self.bits.len() == span,
            "trimmed to {} bits for a span of {span}",
            self.bits.len()
        );
    }
}

impl PartialEq for Dropped {
    fn eq(&self, other: &Dropped) -> bool {
        self.len() == other.len() && self.ones().eq(other.ones())
    }
}
impl Eq for Dropped {}

impl std::hash::Hash for Dropped {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for u in self.ones() {
            h.write_usize(u);
        }
        h.write_usize(usize::MAX);
    }
}

impl FromIterator<usize> for Dropped {
    fn from_iter<I: IntoIterator<Item = usize>>(units: I) -> Dropped {
        let mut d = Dropped::new();
        d.extend(units);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Inserts and removes in any order behave as a set of integers; the storage spans
        /// from the smallest member to the largest only.
        #[test]
        fn behaves_as_a_set(steps in proptest::collection::vec((any::<bool>(), 0usize..5_000), 0..60)) {
            let (mut d, mut model) = (Dropped::new(), BTreeSet::new());
            for (add, u) in steps {
                if add { d.insert(u); model.insert(u); } else { d.remove(u); model.remove(&u); }
                prop_assert_eq!(d.ones().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(d.len(), model.len());
                let span = match (model.first(), model.last()) {
                    (Some(a), Some(b)) => b - a + 1,
                    _ => 0,
                };
                prop_assert!(d.bits.len() <= span.max(1) * 2 + 64, "bits {} for span {}", d.bits.len(), span);
                let rebuilt: Dropped = model.iter().copied().collect();
                prop_assert_eq!(&d, &rebuilt);
            }
        }

        #[test]
        fn subset_matches_the_model(a in proptest::collection::btree_set(0usize..300, 0..20),
                                    b in proptest::collection::btree_set(0usize..300, 0..20)) {
            let (da, db): (Dropped, Dropped) = (a.iter().copied().collect(), b.iter().copied().collect());
            prop_assert_eq!(da.is_subset(&db), a.is_subset(&b));
            let union: Dropped = a.union(&b).copied().collect();
            prop_assert!(da.is_subset(&union) && db.is_subset(&union));
        }
    }

    #[test]
    fn a_set_far_into_the_program_stays_small() {
        let d: Dropped = (1_000_000..1_000_300).collect();
        assert_eq!(d.len(), 300);
        assert!(d.bits.len() <= 300 + 64);
        assert!(d.contains(1_000_000) && !d.contains(999_999) && !d.contains(1_000_300));
    }
}
