//! The long run of a crash simulation, shared by both engines' simulation programs
//! (`intactfs-sim`, `intactfs-pmem-sim`): seeds one after another until enough of them ran
//! and enough crash images were checked, a progress line every so many seeds, one summary
//! line, and at the first failure its message and its crash image saved to a file.
//!
//! Here because both simulations' crates depend on this crate already and this needs only
//! std (what a seed runs is the caller's: no engine is pulled into the other's crate).

use std::fmt::Display;
use std::ops::AddAssign;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// The options every simulation program takes for its seeds (flattened into its own).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct SeedArgs {
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Number of seeds (workloads).
    #[arg(long, default_value_t = 20)]
    pub seeds: u64,
    /// Keep going with more seeds until this many crash images were checked.
    #[arg(long, default_value_t = 0)]
    pub min_images: u64,
    /// Crash images drawn per crash point (where a point allows more).
    #[arg(long, default_value_t = 3)]
    pub images: u64,
}

/// What one seed's run reports (summed over the long run), and the crash images it checked.
pub struct Seed<T> {
    pub report: T,
    pub images: u64,
}

/// A seed's report that counts the crash images it checked: it converts to a [`Seed`]
/// (`run(&cfg).map(Seed::from)`), one conversion for every simulation's report.
pub trait CountsImages {
    fn images(&self) -> u64;
}

impl<T: CountsImages> From<T> for Seed<T> {
    fn from(report: T) -> Self {
        let images = report.images();
        Seed { report, images }
    }
}

/// A failed check of a crash simulation: everything needed to reproduce it.
#[derive(Debug)]
pub struct SimFailure {
    pub seed: u64,
    /// The workload call during (or after) which it failed, where the simulation knows it.
    pub call: Option<usize>,
    pub crash_point: Option<u64>,
    /// The crash image's description, and its bytes (to save and inspect).
    pub image: Option<String>,
    pub message: String,
    pub bytes: Option<Vec<u8>>,
}

impl SimFailure {
    /// A failure of seed `seed` outside any crash image (the workload, a set-up step).
    pub fn new(seed: u64, message: impl Into<String>) -> SimFailure {
        SimFailure {
            seed,
            call: None,
            crash_point: None,
            image: None,
            message: message.into(),
            bytes: None,
        }
    }
}

impl Display for SimFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed {}", self.seed)?;
        if let Some(c) = self.call {
            write!(f, ", call {c}")?;
        }
        if let Some(c) = self.crash_point {
            write!(f, ", crash point {c}")?;
        }
        if let Some(i) = &self.image {
            write!(f, ", image {i}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A long run: which seeds, how many, and where it reports.
#[derive(Clone, Copy, Debug)]
pub struct LongRun<'a> {
    /// The program's name: the head of every line it prints.
    pub tool: &'a str,
    /// The first seed; seeds to run at least; crash images to check at least (seeds run
    /// until both are reached).
    pub seeds: SeedArgs,
    /// A progress line on stderr every this many seeds (at least 1).
    pub every: u64,
    /// The program's options that select the failing seed's configuration, for the line
    /// that says how to run it again (after `--first-seed S --seeds 1`; may be empty).
    pub flags: &'a str,
    /// Where a failure's crash image is saved, and a hint appended to the line that says
    /// so (how to inspect it; may be empty).
    pub save: &'a Path,
    pub inspect: &'a str,
}

/// A count a test's long run takes from the environment variable `var` (e.g. the crash images
/// to check), `default` when it is unset. For tests: a value that is not a whole number stops
/// the test with a message, rather than running the default size as if it were asked for.
pub fn env_count(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("{var}={v:?}: expected a whole number (unset it for the default, {default})")
        }),
        Err(e) => panic!("{var}: {e}"),
    }
}

/// A long run's sum: the reports of the seeds that ran, their crash images, and the seed
/// after the last one run.
pub struct Total<T> {
    pub report: T,
    pub images: u64,
    pub seeds_run: u64,
    pub next_seed: u64,
}

impl SeedArgs {
    /// The seeds of a test: from 0 until `min_images` crash images were checked (at least
    /// one seed).
    pub fn until_images(min_images: u64) -> SeedArgs {
        SeedArgs {
            first_seed: 0,
            seeds: 1,
            min_images,
            images: 3,
        }
    }

    /// Runs `one(seed)` from `first_seed` on until at least `seeds` seeds ran and
    /// `min_images` crash images were checked, calling `after(&total)` after each seed;
    /// stops at the first error.
    pub fn sum<T: AddAssign + Default, E>(
        &self,
        mut one: impl FnMut(u64) -> Result<Seed<T>, E>,
        mut after: impl FnMut(&Total<T>),
    ) -> Result<Total<T>, E> {
        let mut total = Total {
            report: T::default(),
            images: 0,
            seeds_run: 0,
            next_seed: self.first_seed,
        };
        while total.seeds_run < self.seeds || total.images < self.min_images {
            let r = one(total.next_seed)?;
            total.report += r.report;
            total.images += r.images;
            total.seeds_run += 1;
            total.next_seed += 1;
            after(&total);
        }
        Ok(total)
    }
}

impl LongRun<'_> {
    /// Runs `one(seed)` from `first_seed` on and prints the summary: success when every
    /// seed passed, exit code 1 at the first failure (said, with its image saved).
    pub fn run<T: AddAssign + Default + Display>(
        &self,
        one: impl FnMut(u64) -> Result<Seed<T>, SimFailure>,
    ) -> ExitCode {
        assert!(
            self.every > 0,
            "{}: a progress line every 0 seeds",
            self.tool
        );
        let start = Instant::now();
        let progress = |t: &Total<T>| {
            if t.seeds_run.is_multiple_of(self.every) {
                let (ran, images) = (t.seeds_run, t.images);
                let secs = start.elapsed().as_secs_f64();
                eprintln!("{}: {ran} seeds, {images} images, {secs:.0} s", self.tool);
            }
        };
        let total = match self.seeds.sum(one, progress) {
            Ok(t) => t,
            Err(f) => return self.failed(f),
        };
        println!(
            "{}: seeds {}..{}: {}; all passed in {:.1} s",
            self.tool,
            self.seeds.first_seed,
            total.next_seed,
            total.report,
            start.elapsed().as_secs_f64()
        );
        ExitCode::SUCCESS
    }

    fn failed(&self, f: SimFailure) -> ExitCode {
        let (tool, save) = (self.tool, self.save.display());
        eprintln!("{tool}: FAILED: {f}");
        let flags = self.flags;
        eprintln!(
            "{tool}: reproduce with --first-seed {} --seeds 1{flags}",
            f.seed
        );
        if let Some(b) = &f.bytes {
            match std::fs::write(self.save, b) {
                Ok(()) => eprintln!("{tool}: the crash image is saved in {save}{}", self.inspect),
                Err(e) => eprintln!("{tool}: could not save the image to {save}: {e}"),
            }
        }
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Images(u64);

    impl AddAssign for Images {
        fn add_assign(&mut self, o: Images) {
            self.0 += o.0;
        }
    }

    impl Display for Images {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{} images", self.0)
        }
    }

    fn long(save: &Path) -> LongRun<'_> {
        LongRun {
            tool: "test",
            seeds: SeedArgs {
                first_seed: 10,
                seeds: 2,
                min_images: 7,
                images: 1,
            },
            every: 1,
            flags: "",
            save,
            inspect: "",
        }
    }

    #[test]
    fn seeds_run_until_both_bounds_are_reached() {
        let mut seen = Vec::new();
        let code = long(Path::new("unused")).run(|seed| {
            seen.push(seed);
            Ok(Seed {
                report: Images(2),
                images: 2,
            })
        });
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(seen, [10, 11, 12, 13], "2 seeds, then until 7 images");
    }

    #[test]
    fn the_first_failure_stops_the_run_and_saves_its_image() {
        let save = std::env::temp_dir().join(format!("longrun-{}.img", std::process::id()));
        let mut ran = 0;
        let code = long(&save).run(|seed| {
            ran += 1;
            if seed == 11 {
                let bytes = Some(b"crash".to_vec());
                return Err(SimFailure {
                    bytes,
                    ..SimFailure::new(seed, "wrong")
                });
            }
            Ok(Seed {
                report: Images(1),
                images: 1,
            })
        });
        assert_eq!((code, ran), (ExitCode::from(1), 2));
        assert_eq!(std::fs::read(&save).unwrap(), b"crash");
        std::fs::remove_file(&save).unwrap();
    }
}
