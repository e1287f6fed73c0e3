//! The engine's main proof, at CI size: at least 10,000 crash images over seeded
//! multi-stream workloads, each recovered, fsck'd and checked against the prefix oracle
//! (see the crate docs). Configurations vary the journal size (4 blocks: transactions
//! that overflow the journal commit by checkpoint; 24 blocks: frequent checkpoints), the
//! number of streams, osync (an osync stream, osync/dsync/flush calls) and space pressure
//! (a small device where freed blocks are reused). Longer runs: `INTACTFS_SIM_IMAGES=1000000 cargo test --release
//! -p intactfs-sim --test crash_simulation -- --nocapture`, or the `intactfs-sim` binary.

use intactfs_sim::{concurrent, mixed, on_txflash, run, with_regions, SimConfig, SimReport};
use intactfs_types::longrun::{env_count, Seed, SeedArgs};

/// Runs seeds 0, 1, ... of `config` until `default_images` crash images were checked (or
/// as many as the environment variable `env` says), failing with the seed and the
/// `intactfs-sim` command (`flag` selects the configurations) that reproduces a failure.
fn simulate(
    what: &str,
    config: fn(u64) -> SimConfig,
    env: &str,
    default_images: u64,
    flag: &str,
) -> SimReport {
    let target: u64 = env_count(env, default_images);
    let one = |seed| run(&config(seed)).map(Seed::from);
    let (total, seed) = match SeedArgs::until_images(target).sum(one, |_| ()) {
        Ok(t) => (t.report, t.next_seed),
        Err(f) => panic!("{what} failed: {f}\nreproduce: cargo run --release -p intactfs-sim -- {flag}--first-seed {} --seeds 1", f.seed),
    };
    eprintln!("{what}: {seed} workloads, {total}");
    total
}

#[test]
fn crash_simulation() {
    let total = simulate("crash simulation", mixed, "INTACTFS_SIM_IMAGES", 10_000, "");
    assert!(
        total.merges > 0 && total.checkpoints > 0 && total.older > 0,
        "the workloads must exercise merges, checkpoints and lost volatile commits"
    );
    // Optimistic commit (OptFS): osync commits were written without a flush, crashes lost
    // some of them, dsync and the durability-timeout flush ran, and freed blocks were reused
    // (the space-pressure configuration), so the reuse rule was under test.
    assert!(
        total.osyncs > 0 && total.optimistic_commits > 0 && total.lost_osync > 0 && total.dsyncs > 0 && total.flushes > 0 && total.reused_blocks > 0,
        "the workloads must exercise osync, dsync, flush, lost optimistic commits and block reuse: {total}"
    );
    assert!(
        total.punches > 0,
        "the workloads must punch holes (fallocate PUNCH_HOLE | KEEP_SIZE): {total}"
    );
    // Incremental checkpoints: chains of deltas, and new bases after them.
    assert!(
        total.delta_checkpoints > 0 && total.checkpoints > total.delta_checkpoints,
        "the workloads must checkpoint both as deltas and as new bases: {total}"
    );
}

/// Atomic regions (CFS, issue 13): the same configurations with regions that begin,
/// commit and abort among the other streams' calls. The oracle also requires every region
/// all or nothing in every image, and its calls durable once its commit returned. Longer:
/// `intactfs-sim --regions --min-images 1000000`.
#[test]
fn crash_simulation_with_atomic_regions() {
    let total = simulate(
        "crash simulation with regions",
        with_regions,
        "INTACTFS_SIM_REGION_IMAGES",
        5_000,
        "--regions ",
    );
    assert!(
        total.regions_committed > 0 && total.regions_aborted > 0 && total.region_calls > 0 && total.added_writes > 0,
        "the workloads must commit and abort regions with calls inside, and other streams' writes to an added file: {total}"
    );
}

/// The transactional-flash device (issue 13 item 1): the region configurations on its
/// simulated twin, where a durable commit is one device transaction that rewrites blocks
/// in place; images also come from crashes inside a device commit. Longer:
/// `intactfs-sim --txflash --min-images N`.
#[test]
fn crash_simulation_on_transactional_flash() {
    let total = simulate(
        "crash simulation on txflash",
        on_txflash,
        "INTACTFS_SIM_TXFLASH_IMAGES",
        3_000,
        "--txflash ",
    );
    assert!(
        total.tx_commits > 0 && total.inplace_blocks > 0 && total.regions_committed > 0,
        "device transactions and in-place rewrites must be exercised: {total}"
    );
}

/// Concurrent commits (issue 17 item 6): deferred commit I/O as the FUSE daemon runs it.
/// Prepared commits wait in a pool while other streams' calls go on; the workload writes
/// them in an order of its choosing (often the newest first), flushes for the written
/// prefix at random moments (group commit), and acknowledges a durability call only when
/// a flush made it durable. Crash points are every device write and flush, so images
/// include later commits' writes on the media before earlier ones'. Longer:
/// `intactfs-sim --concurrent --min-images N`.
#[test]
fn crash_simulation_with_concurrent_commits() {
    let total = simulate(
        "crash simulation with concurrent commits",
        concurrent,
        "INTACTFS_SIM_CONCURRENT_IMAGES",
        5_000,
        "--concurrent ",
    );
    assert!(
        total.commits_performed > 0 && total.out_of_order > 0 && total.inflight_flushes > 0 && total.waited_calls > 0 && total.multi_flushes > 0,
        "the workloads must write commits out of order, flush while commits are unwritten, and acknowledge several durability calls with one flush: {total}"
    );
}
