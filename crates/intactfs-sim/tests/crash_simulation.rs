//! The engine's main proof, at CI size: at least 10,000 crash images over seeded
//! multi-stream workloads, each recovered, fsck'd and checked against the prefix oracle
//! (see the crate docs). Configurations vary the journal size (4 blocks: transactions
//! that overflow the journal commit by checkpoint; 24 blocks: frequent checkpoints) and
//! the number of streams. Longer runs: `INTACTFS_SIM_IMAGES=1000000 cargo test --release
//! -p intactfs-sim --test crash_simulation -- --nocapture`, or the `intactfs-sim` binary.

use intactfs_sim::{mixed, run};

#[test]
fn crash_simulation() {
    let target: u64 = std::env::var("INTACTFS_SIM_IMAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let (mut images, mut points, mut commits, mut merges, mut checkpoints, mut older, mut exhaustive) = (0, 0, 0, 0, 0, 0, 0);
    let mut seed = 0u64;
    while images < target {
        match run(&mixed(seed)) {
            Ok(r) => {
                images += r.images;
                points += r.crash_points;
                commits += r.commits;
                merges += r.merges;
                checkpoints += r.checkpoints;
                older += r.older;
                exhaustive += r.exhaustive_points;
            }
            Err(f) => panic!("crash simulation failed: {f}\nreproduce: cargo run --release -p intactfs-sim -- --first-seed {} --seeds 1", f.seed),
        }
        seed += 1;
    }
    eprintln!(
        "crash simulation: {seed} workloads, {points} crash points ({exhaustive} checked exhaustively), {images} crash images, {commits} commits, {checkpoints} checkpoints, {merges} stream merges, {older} images recovered to an older allowed commit"
    );
    assert!(merges > 0 && checkpoints > 0 && older > 0, "the workloads must exercise merges, checkpoints and lost volatile commits");
}
