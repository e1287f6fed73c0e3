//! `intactfs-sim`: runs the crash simulation over a range of seeds.
//!
//! `cargo run --release -p intactfs-sim -- --seeds 40 --images 3` (CI size is in the
//! test `crash_simulation`); `--min-images 1000000` keeps adding seeds until that many
//! crash images were checked; `--mixed` rotates through the CI test's configurations;
//! `--regions`, `--txflash` and `--concurrent` (deferred commit I/O) select the others;
//! `--faults` runs the fault-injection simulation instead (`intactfs_sim::faults`).

use clap::Parser;
use intactfs_sim::faults::{faulty, run_faulty, FaultConfig, FaultReport};
use intactfs_sim::{concurrent, mixed, on_txflash, run, with_regions, SimConfig, SimReport};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Deterministic crash simulation of the intactfs engine")]
struct Args {
    /// First seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Number of seeds (workloads).
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// Keep going with more seeds until this many crash images were checked.
    #[arg(long, default_value_t = 0)]
    min_images: u64,
    /// Crash images per crash point.
    #[arg(long, default_value_t = 3)]
    images: u64,
    /// Calls per workload.
    #[arg(long, default_value_t = 70)]
    calls: usize,
    /// Streams per workload.
    #[arg(long, default_value_t = 3)]
    streams: u64,
    /// Rotate through the CI test's configurations (journal size, 1/3/5 streams) instead
    /// of --streams/--calls.
    #[arg(long)]
    mixed: bool,
    /// The --mixed configurations with atomic regions (begin, commit, abort) among the
    /// calls.
    #[arg(long, conflicts_with = "mixed")]
    regions: bool,
    /// The --regions configurations on the transactional-flash device's twin.
    #[arg(long, conflicts_with_all = ["mixed", "regions"])]
    txflash: bool,
    /// Concurrent commits: the --mixed configurations (every other ten seeds with atomic
    /// regions) with deferred commit I/O, the workload writing prepared commits out of
    /// order and acknowledging durability calls by group flushes.
    #[arg(long, conflicts_with_all = ["mixed", "regions", "txflash"])]
    concurrent: bool,
    /// Fault injection (issue 25): ENOSPC or EIO at one device write or flush of a commit
    /// or checkpoint per workload; `--images` crash images after every call.
    #[arg(long, conflicts_with_all = ["mixed", "regions", "txflash", "concurrent"])]
    faults: bool,
    /// Where to save the image of a failure.
    #[arg(long, default_value = "intactfs-sim-failure.img")]
    save: PathBuf,
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.streams == 0 || a.images == 0 {
        eprintln!("intactfs-sim: --streams and --images must be at least 1");
        return ExitCode::from(2);
    }
    if a.faults {
        return run_faults(&a);
    }
    let start = std::time::Instant::now();
    let mut total = SimReport::default();
    let mut seeds = 0u64;
    let mut seed = a.first_seed;
    while seeds < a.seeds || total.images < a.min_images {
        let cfg = if a.concurrent {
            concurrent(seed)
        } else if a.txflash {
            on_txflash(seed)
        } else if a.regions {
            with_regions(seed)
        } else if a.mixed {
            mixed(seed)
        } else {
            SimConfig {
                seed,
                streams: a.streams,
                calls: a.calls,
                images_per_point: a.images,
                ..Default::default()
            }
        };
        match run(&cfg) {
            Ok(r) => total += r,
            Err(f) => {
                eprintln!("intactfs-sim: FAILED: {f}");
                if let Some(b) = &f.bytes {
                    match std::fs::write(&a.save, b) {
                        Ok(()) => eprintln!("intactfs-sim: the crash image is saved in {} (inspect with `intact fs fsck` / `intact fs dump --journal`)", a.save.display()),
                        Err(e) => eprintln!("intactfs-sim: could not save the image to {}: {e}", a.save.display()),
                    }
                }
                return ExitCode::from(1);
            }
        }
        seeds += 1;
        seed += 1;
        if seeds.is_multiple_of(50) {
            eprintln!(
                "intactfs-sim: {seeds} seeds, {} images, {:.0} s",
                total.images,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "intactfs-sim: seeds {}..{}: {total}; all passed in {:.1} s",
        a.first_seed,
        seed,
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

/// `--faults`: fault-injection runs until `--seeds` and `--min-images` are both reached.
fn run_faults(a: &Args) -> ExitCode {
    let start = std::time::Instant::now();
    let mut total = FaultReport::default();
    let mut seed = a.first_seed;
    while total.runs < a.seeds || total.images < a.min_images {
        let cfg = FaultConfig {
            images_per_call: a.images,
            ..faulty(seed)
        };
        match run_faulty(&cfg) {
            Ok(r) => total += r,
            Err(f) => {
                eprintln!("intactfs-sim: FAILED: {f}");
                return ExitCode::from(1);
            }
        }
        seed += 1;
        if total.runs.is_multiple_of(1000) {
            eprintln!(
                "intactfs-sim: {} runs, {} images, {:.0} s",
                total.runs,
                total.images,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "intactfs-sim --faults: seeds {}..{seed}: {total}; all passed in {:.1} s",
        a.first_seed,
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
