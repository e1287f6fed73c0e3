//! The CI sample of the fuzz driver: a few thousand mutated inputs per reader, none may
//! panic (the long runs and their figures: docs/robustness.md).

use intact_fuzz::targets::{Fixture, Target, ALL};

fn sample(target: Target, inputs: u64) {
    let fx = Fixture::load().expect("the seeds in crates/intact-fuzz/seeds");
    let st = intact_fuzz::run(&fx, target, 25, 0, inputs, false);
    assert_eq!(st.inputs, inputs);
    assert!(
        st.panics.is_empty(),
        "{} of {inputs} {} inputs panicked (replay: cargo run -p intact-fuzz -- --target {} --seed 25 --first I --inputs 1 --loud): {:?}",
        st.panic_count,
        target.name(),
        target.name(),
        st.panics
    );
    // The sample must exercise the readers, not only their first rejection.
    assert!(
        st.accepted > 0 || target == Target::Strace,
        "{target:?}: nothing accepted"
    );
    assert!(st.rejected > 0, "{target:?}: no mutation was rejected");
}

#[test]
fn strace_sample() {
    sample(Target::Strace, 400);
}

#[test]
fn apm_sample() {
    sample(Target::Apm, 1000);
}

#[test]
fn bundle_sample() {
    sample(Target::Bundle, 1000);
}

#[test]
fn report_sample() {
    sample(Target::Report, 1000);
}

#[test]
fn blklog_sample() {
    sample(Target::BlkLog, 3000);
}

#[test]
fn every_target_has_a_sample() {
    assert_eq!(ALL.len(), 5);
}

/// The seeds are real recordings: the argument checks must accept every line of them.
#[test]
fn every_seed_trace_converts() {
    let dir = intact_fuzz::targets::seeds_dir().join("strace");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let raw = std::fs::read(&p).unwrap();
        if let Err(e) = intact_fuzz::targets::strace(&raw) {
            panic!("{}: {e}", p.display());
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} seed traces in {}", dir.display());
}
