//! A mutation fuzz driver for every reader of the explorer and the validator: strace traces
//! (parser, converter and replay oracle), APM files, bundles, JSON reports and block logs
//! (issue 25, finding 4). cargo-fuzz needs nightly; this runs on stable: seeds (real
//! recordings in `seeds/`, the built-in APMs, a block log written by the real writer) are
//! mutated ([`mutate`]) and each input runs in-process under `catch_unwind`. An input may be
//! rejected with an error; a panic is a bug. `cargo test -p intact-fuzz` runs a sample; the
//! `intact-fuzz` binary runs the long runs recorded in docs/robustness.md.

pub mod mutate;
pub mod targets;

use mutate::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use targets::{Fixture, Target};

/// What a run did.
#[derive(Debug, Default)]
pub struct Stats {
    pub inputs: u64,
    /// Inputs the reader accepted.
    pub accepted: u64,
    /// Inputs the reader rejected with an error.
    pub rejected: u64,
    /// Inputs that panicked: (input number, panic message), the first few.
    pub panics: Vec<(u64, String)>,
    pub panic_count: u64,
}

/// Silences the default panic hook (a panic is counted, not printed) and keeps the last
/// message for the report.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        LAST_PANIC.with(|p| *p.borrow_mut() = info.to_string());
    }));
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs `inputs` mutated inputs of `target`, input `i` from the generator seeded with
/// `seed ^ i` (so input `i` can be replayed alone with `--first i --inputs 1`).
pub fn run(fx: &Fixture, target: Target, seed: u64, first: u64, inputs: u64, loud: bool) -> Stats {
    if !loud {
        quiet_panics();
    }
    let mut st = Stats::default();
    for i in first..first + inputs {
        let mut rng = Rng::new(seed ^ i.wrapping_mul(0x1000_0000_01b3));
        match catch_unwind(AssertUnwindSafe(|| fx.run_one(target, &mut rng))) {
            Ok(Ok(())) => st.accepted += 1,
            Ok(Err(_)) => st.rejected += 1,
            Err(_) => {
                st.panic_count += 1;
                if st.panics.len() < 10 {
                    st.panics.push((i, LAST_PANIC.with(|p| p.borrow().clone())));
                }
            }
        }
        st.inputs += 1;
    }
    assert_eq!(st.inputs, st.accepted + st.rejected + st.panic_count);
    if !loud {
        let _ = std::panic::take_hook();
    }
    st
}
