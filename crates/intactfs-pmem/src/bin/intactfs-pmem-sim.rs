//! `intactfs-pmem-sim`: runs the crash simulation of the persistent-memory engine over a
//! range of seeds (see `intactfs_pmem::sim`).
//!
//! `cargo run --release -p intactfs-pmem --bin intactfs-pmem-sim -- --seeds 40` (CI size is
//! the test `crash_simulation`); `--min-images 1000000` keeps adding seeds until that many
//! crash images were checked; `--images N` draws N images per crash point where there are
//! too many to check them all.

use clap::Parser;
use intactfs_pmem::sim::{mixed, run, SimReport};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Deterministic crash simulation of the intactfs persistent-memory engine")]
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
    /// Crash images drawn per crash point (where there are more than --exhaustive).
    #[arg(long, default_value_t = 3)]
    images: u64,
    /// Check every image of a crash point that allows at most this many (default: the
    /// configuration's).
    #[arg(long)]
    exhaustive: Option<usize>,
    /// Calls per workload (default: the configuration's).
    #[arg(long)]
    calls: Option<usize>,
    /// Where to save the crash image of a failure.
    #[arg(long, default_value = "intactfs-pmem-sim-failure.img")]
    save: PathBuf,
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.images == 0 {
        eprintln!("intactfs-pmem-sim: --images must be at least 1");
        return ExitCode::from(2);
    }
    let start = std::time::Instant::now();
    let mut total = SimReport::default();
    let mut seeds = 0u64;
    let mut seed = a.first_seed;
    while seeds < a.seeds || total.images < a.min_images {
        let mut cfg = mixed(seed);
        cfg.images_per_point = a.images;
        if let Some(e) = a.exhaustive {
            cfg.exhaustive_up_to = e;
        }
        if let Some(c) = a.calls {
            cfg.calls = c;
        }
        match run(&cfg) {
            Ok(r) => total += r,
            Err(f) => {
                eprintln!("intactfs-pmem-sim: FAILED: {f}");
                eprintln!(
                    "intactfs-pmem-sim: reproduce with --first-seed {} --seeds 1 --images {}",
                    f.seed, a.images
                );
                if let Some(b) = &f.bytes {
                    match std::fs::write(&a.save, b) {
                        Ok(()) => eprintln!(
                            "intactfs-pmem-sim: the crash image is saved in {}",
                            a.save.display()
                        ),
                        Err(e) => eprintln!(
                            "intactfs-pmem-sim: could not save the image to {}: {e}",
                            a.save.display()
                        ),
                    }
                }
                return ExitCode::from(1);
            }
        }
        seeds += 1;
        seed += 1;
        if seeds.is_multiple_of(25) {
            eprintln!(
                "intactfs-pmem-sim: {seeds} seeds, {} images, {:.0} s",
                total.images,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "intactfs-pmem-sim: seeds {}..{}: {total}; all passed in {:.1} s",
        a.first_seed,
        seed,
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
