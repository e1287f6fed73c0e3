//! Checked counter arithmetic for the engines above (issue 25 item 5): here because it is
//! the lowest crate both engines depend on, so the rule is written once.

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
}
