//! Counters for the engines above, here because this is the lowest crate both engines
//! depend on, so each rule is written once: checked release of in-memory counters (issue 25
//! item 5), and [`counters!`](crate::counters), which defines a struct of counters that only
//! grow (devices' and engines' statistics, the simulations' reports) with its sum (`+=`, for
//! totals over runs) and its difference from an earlier reading (`since`), so a new field
//! cannot be left out of either and a reading that went backwards is caught where it is
//! taken instead of wrapping into a huge count.

/// `*counter -= n`, asserting that the counter holds at least `n`. For in-memory counters
/// whose underflow can only be a bug of the caller (reservations, dirty-block counts,
/// remaining entries): releasing more than was taken must stop the program with `what`
/// (the invariant's name) in the message, not wrap to a count near 2^64 that later promises
/// space that does not exist. Values read from a device are not counters of this kind:
/// check those and return an error.
#[track_caller]
pub fn release(counter: &mut u64, n: u64, what: &str) {
    assert!(
        n <= *counter,
        "{what}: releasing {n} of {} (more than was taken)",
        *counter
    );
    *counter -= n;
}

/// Defines a struct whose fields are all counters (any unsigned integer type), with
/// `impl AddAssign` (field by field) and `fn since(&self, earlier: &Self) -> Self` (field by
/// field, asserting that no counter decreased). Attributes and doc comments on the struct
/// and its fields are kept.
#[macro_export]
macro_rules! counters {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty ),*
        }

        impl ::std::ops::AddAssign for $name {
            fn add_assign(&mut self, other: $name) {
                $( self.$field += other.$field; )*
            }
        }

        impl $name {
            /// What was counted from `earlier` (a reading of the same counters) to `self`.
            /// Counters only grow: a smaller reading now is a bug where it was taken.
            pub fn since(&self, earlier: &$name) -> $name {
                $name {
                    $( $field: self.$field.checked_sub(earlier.$field).unwrap_or_else(|| {
                        panic!(
                            "{}::{} went backwards: {} now, {} earlier",
                            stringify!($name),
                            stringify!($field),
                            self.$field,
                            earlier.$field
                        )
                    }), )*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_subtracts_down_to_zero() {
        let mut c = 5;
        release(&mut c, 2, "c");
        release(&mut c, 3, "c");
        assert_eq!(c, 0);
    }

    #[test]
    #[should_panic(expected = "reserved: releasing 1 of 0")]
    fn release_below_zero_asserts() {
        let mut c = 0;
        release(&mut c, 1, "reserved");
    }

    crate::counters! {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        struct Two {
            /// A doc comment is an attribute: kept.
            a: u64,
            b: usize,
        }
    }

    #[test]
    fn sums_and_differences_are_field_by_field() {
        let mut t = Two { a: 1, b: 2 };
        t += Two { a: 10, b: 20 };
        assert_eq!(t, Two { a: 11, b: 22 });
        assert_eq!(t.since(&Two { a: 1, b: 2 }), Two { a: 10, b: 20 });
        assert_eq!(t.since(&t), Two::default());
    }

    #[test]
    #[should_panic(expected = "Two::b went backwards: 2 now, 3 earlier")]
    fn a_counter_that_went_backwards_is_caught() {
        let _ = Two { a: 5, b: 2 }.since(&Two { a: 1, b: 3 });
    }
}
