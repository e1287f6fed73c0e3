//! `intactfs-pmem-sim`: runs the crash simulation of the persistent-memory engine over a
//! range of seeds (see `intactfs_pmem::sim`).
//!
//! `cargo run --release -p intactfs-pmem --bin intactfs-pmem-sim -- --seeds 40` (CI size is
//! the test `crash_simulation`); `--min-images 1000000` keeps adding seeds until that many
//! crash images were checked; `--images N` draws N images per crash point where there are
//! too many to check them all.

use clap::Parser;
use intactfs_pmem::sim::{mixed, run};
use intactfs_types::longrun::{LongRun, Seed, SeedArgs};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Deterministic crash simulation of the intactfs persistent-memory engine")]
struct Args {
    #[command(flatten)]
    seeds: SeedArgs,
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
    if a.seeds.images == 0 {
        eprintln!("intactfs-pmem-sim: --images must be at least 1");
        return ExitCode::from(2);
    }
    let mut flags = format!(" --images {}", a.seeds.images);
    if let Some(e) = a.exhaustive {
        flags += &format!(" --exhaustive {e}");
    }
    if let Some(c) = a.calls {
        flags += &format!(" --calls {c}");
    }
    let long = LongRun {
        tool: "intactfs-pmem-sim",
        seeds: a.seeds,
        every: 25,
        flags: &flags,
        save: &a.save,
        inspect: "",
    };
    long.run(|seed| {
        let mut cfg = mixed(seed);
        cfg.images_per_point = a.seeds.images;
        if let Some(e) = a.exhaustive {
            cfg.exhaustive_up_to = e;
        }
        if let Some(c) = a.calls {
            cfg.calls = c;
        }
        run(&cfg).map(Seed::from)
    })
}
