//! `intactfs-pmem-sim`: runs the crash simulation of the persistent-memory engine over a
//! range of seeds (see `intactfs_pmem::sim`).
//!
//! `cargo run --release -p intactfs-pmem --bin intactfs-pmem-sim -- --seeds 40` (CI size is
//! the test `crash_simulation`); `--min-images 1000000` keeps adding seeds until that many
//! crash images were checked; `--images N` draws N images per crash point where there are
//! too many to check them all.

use clap::Parser;
use intactfs_pmem::sim::{mixed, run};
use intactfs_types::longrun::{Failed, LongRun};
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
    let long = LongRun {
        tool: "intactfs-pmem-sim",
        first_seed: a.first_seed,
        seeds: a.seeds,
        min_images: a.min_images,
        every: 25,
        save: &a.save,
        inspect: "",
    };
    long.run(|seed| {
        let mut cfg = mixed(seed);
        cfg.images_per_point = a.images;
        if let Some(e) = a.exhaustive {
            cfg.exhaustive_up_to = e;
        }
        if let Some(c) = a.calls {
            cfg.calls = c;
        }
        run(&cfg).map_err(|f| Failed {
            message: f.to_string(),
            reproduce: Some(format!(
                "--first-seed {} --seeds 1 --images {}",
                f.seed, a.images
            )),
            image: f.bytes,
        })
    })
}
