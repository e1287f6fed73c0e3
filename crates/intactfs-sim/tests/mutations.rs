//! Mutation checks (issue 12 item 3, issue 13 item 5 and issue 17 items 5 and 6, "proof by simulation"): each deliberate bug of
//! `intactfs::mutation` must make the crash simulation fail within a bounded number of
//! `mixed` seeds. A simulation that passes with the bug on would prove nothing about the
//! protocol the bug breaks.
//!
//! The mutations are process-wide switches, so they run one after the other in this one
//! test (its own test binary: `crash_simulation` runs in another process with none on).
//! `INTACTFS_MUTATION_SEEDS=N` scans all N seeds and lists every seed that catches each
//! mutation instead of stopping at the first (`cargo test --release -p intactfs-sim --test
//! mutations -- --nocapture`); `INTACTFS_MUTATION=FlushBeforeWritten` (a name as printed)
//! checks only that one.

use intactfs::mutation::{self, Mutation};
use intactfs_sim::faults::{faulty, run_faulty};
use intactfs_sim::{concurrent, mixed, on_txflash, run, with_regions, SimConfig};

/// Every mutation must be caught by one of the first this many seeds of `mixed`.
const BOUND: u64 = 200;

/// Turns the mutation off again even if the test panics.
struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        mutation::set(None);
    }
}

/// The seeds in `0..seeds` whose simulation fails with `m` on (stopping at the first
/// unless `all`), with the first failure's message, and how many of them failed on a
/// crash image (the others failed a check of the workload as it ran).
fn catching(m: Mutation, seeds: u64, all: bool) -> (Vec<u64>, Option<String>, usize) {
    // A region mutation needs workloads with regions.
    let config: fn(u64) -> SimConfig = match m {
        Mutation::RegionEarlyPage => with_regions,
        Mutation::InplacePlain => on_txflash,
        // A flush of deferred I/O needs the workload that writes and flushes commits itself.
        Mutation::FlushBeforeWritten => concurrent,
        _ => mixed,
    };
    let _off = Off;
    mutation::set(Some(m));
    let mut caught = Vec::new();
    let mut first = None;
    let mut on_images = 0;
    for seed in 0..seeds {
        // A panic in the engine under the bug counts as caught too (it is reported).
        // A commit that fails needs the fault-injection simulation (its own oracle).
        let r = std::panic::catch_unwind(|| match m {
            Mutation::TakeBeforeRoom => run_faulty(&faulty(seed))
                .map(|_| ())
                .map_err(|f| (f.contains(", image "), f)),
            _ => run(&config(seed))
                .map(|_| ())
                .map_err(|f| (f.crash_point.is_some(), f.to_string())),
        });
        let why = match r {
            Ok(Ok(())) => continue,
            Ok(Err((on_image, f))) => {
                on_images += on_image as usize;
                f
            }
            Err(p) => format!(
                "seed {seed}: panic: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            ),
        };
        caught.push(seed);
        first.get_or_insert(why);
        if !all {
            break;
        }
    }
    (caught, first, on_images)
}

#[test]
fn the_simulation_catches_each_mutation() {
    let scan: Option<u64> = std::env::var("INTACTFS_MUTATION_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok());
    // The simulation itself passes with no mutation on (quick check of a few seeds).
    for seed in 0..4 {
        for cfg in [mixed(seed), concurrent(seed)] {
            if let Err(f) = run(&cfg) {
                panic!("the simulation fails without a mutation: {f}");
            }
        }
    }
    let only = std::env::var("INTACTFS_MUTATION").ok();
    for &m in Mutation::ALL {
        if only.as_ref().is_some_and(|o| *o != format!("{m:?}")) {
            continue;
        }
        let (caught, first, on_images) = catching(m, scan.unwrap_or(BOUND), scan.is_some());
        let upto = scan.unwrap_or(BOUND);
        match scan {
            Some(_) => eprintln!("{m:?}: caught by {} of the seeds 0..{upto} ({on_images} of them on a crash image): {caught:?}", caught.len()),
            None => eprintln!("{m:?}: caught by seed {caught:?} of 0..{upto} (the first that catches it; on a crash image: {})", on_images > 0),
        }
        if let Some(f) = &first {
            eprintln!("{m:?}: first failure: {:.600}", f);
        }
        assert!(
            caught.first().is_some_and(|&s| s < BOUND),
            "the crash simulation did not catch {m:?} in {BOUND} seeds"
        );
    }
    assert!(Mutation::ALL.iter().all(|&m| !mutation::active(m)));
}
