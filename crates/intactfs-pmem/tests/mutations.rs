//! Mutation checks (issue 14 item 4): each deliberate bug of `intactfs_pmem::mutation` must
//! make the crash simulation fail within a bounded number of seeds; a simulation that passed
//! with the bug on would prove nothing about the protocol step the bug breaks.
//!
//! Needs `--features mutations` (without it this file compiles to nothing):
//! `cargo test --release -p intactfs-pmem --features mutations --test mutations -- --nocapture`.
//! The mutations are process-wide switches, so they run one after the other in this test.
#![cfg(feature = "mutations")]

use intactfs_pmem::mutation::{self, Mutation};
use intactfs_pmem::sim::{mixed, run};

/// Every mutation must be caught by one of the first this many seeds.
const BOUND: u64 = 30;

struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        mutation::set(None);
    }
}

#[test]
fn the_simulation_catches_each_mutation() {
    for seed in 0..3 {
        if let Err(f) = run(&mixed(seed)) {
            panic!("the simulation fails without a mutation: {f}");
        }
    }
    for &m in Mutation::ALL {
        // Breaking the open-unlinked rule shows in the lockstep reads of the run, not only
        // in crash images.
        let in_image = m != Mutation::FreeOpenFileAtUnlink;
        let _off = Off;
        mutation::set(Some(m));
        let mut caught = None;
        for seed in 0..BOUND {
            let r = std::panic::catch_unwind(|| run(&mixed(seed)));
            match r {
                Ok(Ok(_)) => continue,
                Ok(Err(f)) => {
                    assert!(
                        f.crash_point.is_some() || !in_image,
                        "{m:?} was caught outside a crash image: {f}"
                    );
                    caught = Some((seed, f.to_string()));
                }
                Err(_) => caught = Some((seed, "panic".into())),
            }
            break;
        }
        mutation::set(None);
        match caught {
            Some((seed, why)) => eprintln!("{m:?}: caught by seed {seed}: {why:.400}"),
            None => panic!("the crash simulation did not catch {m:?} in {BOUND} seeds"),
        }
    }
    assert!(Mutation::ALL.iter().all(|&m| !mutation::active(m)));
}
