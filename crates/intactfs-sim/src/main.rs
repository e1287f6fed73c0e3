//! `intactfs-sim`: runs the crash simulation over a range of seeds.
//!
//! `cargo run --release -p intactfs-sim -- --seeds 40 --images 3` (CI size is in the
//! test `crash_simulation`); `--min-images 1000000` keeps adding seeds until that many
//! crash images were checked; `--mixed` rotates through the CI test's configurations;
//! `--regions`, `--txflash` and `--concurrent` (deferred commit I/O) select the others;
//! `--faults` runs the fault-injection simulation instead (`intactfs_sim::faults`).

use clap::Parser;
use intactfs_sim::faults::{faulty, run_faulty, FaultConfig};
use intactfs_sim::{concurrent, mixed, on_txflash, run, with_regions, SimConfig};
use intactfs_types::longrun::{LongRun, Seed, SeedArgs, SimFailure};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Deterministic crash simulation of the intactfs engine")]
struct Args {
    #[command(flatten)]
    seeds: SeedArgs,
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
    if a.streams == 0 || a.seeds.images == 0 {
        eprintln!("intactfs-sim: --streams and --images must be at least 1");
        return ExitCode::from(2);
    }
    if a.faults {
        return run_faults(&a);
    }
    let named = named_mode(&a);
    let flags = match named {
        Some((flag, _)) => flag.to_string(),
        None => format!(
            " --calls {} --streams {} --images {}",
            a.calls, a.streams, a.seeds.images
        ),
    };
    long_run(&a, "intactfs-sim", &flags, 50).run(|seed| {
        let cfg = match named {
            Some((_, config)) => config(seed),
            None => SimConfig {
                seed,
                streams: a.streams,
                calls: a.calls,
                images_per_point: a.seeds.images,
                ..Default::default()
            },
        };
        run(&cfg).map(Seed::from)
    })
}

/// A named set of configurations: its option, and the configuration of each seed.
type Mode = (&'static str, fn(u64) -> SimConfig);

/// The named configurations `a` selects (at most one: clap refuses two), with its option,
/// which also runs a failing seed again; None for --streams/--calls.
fn named_mode(a: &Args) -> Option<Mode> {
    let modes: [(bool, Mode); 4] = [
        (a.concurrent, (" --concurrent", concurrent)),
        (a.txflash, (" --txflash", on_txflash)),
        (a.regions, (" --regions", with_regions)),
        (a.mixed, (" --mixed", mixed)),
    ];
    modes.into_iter().find(|(on, _)| *on).map(|(_, mode)| mode)
}

/// The long run of `a`'s seeds, named `tool`, with a progress line every `every` seeds.
fn long_run<'a>(a: &'a Args, tool: &'a str, flags: &'a str, every: u64) -> LongRun<'a> {
    LongRun {
        tool,
        seeds: a.seeds,
        every,
        flags,
        save: &a.save,
        inspect: " (inspect with `intact fs fsck` / `intact fs dump --journal`)",
    }
}

/// `--faults`: fault-injection runs (one a seed) until `--seeds` and `--min-images` are
/// both reached.
fn run_faults(a: &Args) -> ExitCode {
    let flags = format!(" --faults --images {}", a.seeds.images);
    long_run(a, "intactfs-sim --faults", &flags, 1000).run(|seed| {
        let cfg = FaultConfig {
            images_per_call: a.seeds.images,
            ..faulty(seed)
        };
        run_faulty(&cfg)
            .map(Seed::from)
            .map_err(|m| SimFailure::new(seed, m))
    })
}
