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

/// What one seed's run reports, summed over a long run.
pub trait Tally: AddAssign + Default + Display {
    /// Crash images checked.
    fn images(&self) -> u64;
}

/// A seed that failed: what to say, and the crash image to save (if any).
#[derive(Debug)]
pub struct Failed {
    pub message: String,
    /// The program's arguments that run the failing seed again, if it can say.
    pub reproduce: Option<String>,
    pub image: Option<Vec<u8>>,
}

/// A long run: which seeds, how many, and where it reports.
#[derive(Clone, Copy, Debug)]
pub struct LongRun<'a> {
    /// The program's name: the head of every line it prints.
    pub tool: &'a str,
    pub first_seed: u64,
    /// Seeds to run at least; crash images to check at least (seeds run until both are
    /// reached).
    pub seeds: u64,
    pub min_images: u64,
    /// A progress line on stderr every this many seeds (at least 1).
    pub every: u64,
    /// Where a failure's crash image is saved, and a hint appended to the line that says
    /// so (how to inspect it; may be empty).
    pub save: &'a Path,
    pub inspect: &'a str,
}

impl LongRun<'_> {
    /// Runs `one(seed)` from `first_seed` on and prints the summary: success when every
    /// seed passed, exit code 1 at the first failure (said, with its image saved).
    pub fn run<T: Tally>(&self, mut one: impl FnMut(u64) -> Result<T, Failed>) -> ExitCode {
        assert!(
            self.every > 0,
            "{}: a progress line every 0 seeds",
            self.tool
        );
        let start = Instant::now();
        let (mut total, mut ran, mut seed) = (T::default(), 0u64, self.first_seed);
        while ran < self.seeds || total.images() < self.min_images {
            match one(seed) {
                Ok(r) => total += r,
                Err(f) => return self.failed(f),
            }
            ran += 1;
            seed += 1;
            if ran.is_multiple_of(self.every) {
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "{}: {ran} seeds, {} images, {secs:.0} s",
                    self.tool,
                    total.images()
                );
            }
        }
        println!(
            "{}: seeds {}..{seed}: {total}; all passed in {:.1} s",
            self.tool,
            self.first_seed,
            start.elapsed().as_secs_f64()
        );
        ExitCode::SUCCESS
    }

    fn failed(&self, f: Failed) -> ExitCode {
        let (tool, save) = (self.tool, self.save.display());
        eprintln!("{tool}: FAILED: {}", f.message);
        if let Some(r) = &f.reproduce {
            eprintln!("{tool}: reproduce with {r}");
        }
        if let Some(b) = &f.image {
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

    impl Tally for Images {
        fn images(&self) -> u64 {
            self.0
        }
    }

    fn long(save: &Path) -> LongRun<'_> {
        LongRun {
            tool: "test",
            first_seed: 10,
            seeds: 2,
            min_images: 7,
            every: 1,
            save,
            inspect: "",
        }
    }

    #[test]
    fn seeds_run_until_both_bounds_are_reached() {
        let mut seen = Vec::new();
        let code = long(Path::new("unused")).run(|seed| {
            seen.push(seed);
            Ok(Images(2))
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
                let image = Some(b"crash".to_vec());
                let (message, reproduce) = ("seed 11: wrong".into(), None);
                return Err(Failed {
                    message,
                    reproduce,
                    image,
                });
            }
            Ok(Images(1))
        });
        assert_eq!((code, ran), (ExitCode::from(1), 2));
        assert_eq!(std::fs::read(&save).unwrap(), b"crash");
        std::fs::remove_file(&save).unwrap();
    }
}
