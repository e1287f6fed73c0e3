//! `intact blk check`: build every crash image the log allows (see [`crate::images`]),
//! and for each: mount it (the file system's own recovery, as after a reboot), run the
//! application's checker on the mounted tree (the ALICE contract of `intact check`),
//! unmount, and run the file system's read-only fsck.
//!
//! Images are copies of the initial image (reflinks where the scratch file system shares
//! blocks, sparse copies otherwise) with the image's sectors written over them: the cost
//! is what the file system allocated plus what the log changed, not the device size.

use crate::fskind::{Attached, FsKind, FsckResult, Tools};
use crate::images::{write_pieces, GenConfig, Generator, ImageKind, ImageSpec, Piece};
use crate::logdir::LogDir;
use crate::sys::clone_file;
use intact_runner::{Job, Runner, RunnerConfig, Verdict};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SCHEMA: &str = "intact-blk-report/1";

pub struct CheckConfig {
    pub gen: GenConfig,
    /// Empty: no application checker (only mount and fsck).
    pub checker: Vec<String>,
    /// One checker process per image, or one warm checker server per worker.
    pub protocol: intact_runner::Protocol,
    pub jobs: usize,
    pub timeout: Option<Duration>,
    pub fsck: bool,
    pub scratch: Option<PathBuf>,
    /// Replaces the recorded mount options.
    pub mount_options: Option<String>,
    /// Build every image as a full byte copy of the device (the baseline the benchmark
    /// compares copy-on-write materialisation with).
    pub full_copy: bool,
    pub tools: Tools,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "verdict")]
pub enum CheckerVerdict {
    Pass,
    Fail {
        code: Option<i32>,
        signal: Option<i32>,
        stderr: String,
    },
    Timeout {
        seconds: f64,
    },
    /// Not run: the image did not mount, or building it failed.
    Skipped,
    Error {
        message: String,
    },
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ImageResult {
    #[serde(flatten)]
    pub spec: ImageSpec,
    /// Why the file system refused to mount the image (its recovery failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsck: Option<FsckResult>,
    pub checker: CheckerVerdict,
    pub consistent: bool,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Distinct images the log allows under the generation bounds.
    pub distinct: usize,
    pub checked: usize,
    pub consistent: usize,
    pub unmountable: usize,
    pub fsck_errors: usize,
    pub checker_failures: usize,
    pub timeouts: usize,
    pub errors: usize,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckReport {
    pub schema: &'static str,
    pub log: PathBuf,
    pub fs: FsKind,
    pub command: Vec<String>,
    pub checker: Vec<String>,
    pub fsck: bool,
    pub seed: u64,
    pub summary: Summary,
    pub seconds: f64,
    pub images: Vec<ImageResult>,
}

impl CheckReport {
    /// 0 every image consistent (timeouts aside), 1 some are not, 3 internal errors.
    pub fn exit_code(&self) -> u8 {
        let s = &self.summary;
        if s.errors > 0 {
            3
        } else if s.unmountable + s.fsck_errors + s.checker_failures > 0 {
            1
        } else {
            0
        }
    }
}

#[derive(Debug)]
pub enum CheckError {
    Input(String),
    Failed(String),
    Interrupted,
}

/// What one image's job learned outside the checker's verdict (filled by its closures).
#[derive(Default)]
struct Slot {
    attached: Option<Attached>,
    mount_error: Option<String>,
    fsck: Option<FsckResult>,
}

type Slots = Vec<Arc<Mutex<Slot>>>;

/// Builds, mounts and checks every crash image the log allows: generate the specs, start
/// the checker runner, submit one job per image, collect the verdicts, summarize.
pub fn check(
    ld: &LogDir,
    cfg: &CheckConfig,
    interrupted: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, usize, usize),
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    let fs = ld.meta.fs;
    fs.check_tools().map_err(CheckError::Input)?;
    let gen = Generator::new(&ld.log)
        .map_err(|e| CheckError::Input(format!("{}: {e}", ld.dir.display())))?;
    let (specs, distinct) = gen.generate(&cfg.gen);
    let runner = start_runner(cfg)?;
    let mut images = Images::new(&runner, ld, cfg)?;
    let options = mount_options(ld, cfg);
    let slots: Slots = specs.iter().map(|_| Arc::default()).collect();
    let mut collected = Collected::new(specs.len());
    for spec in specs.iter() {
        if interrupted() {
            return Err(cancel(&runner));
        }
        let (base, pieces) = images.base_and_pieces(&gen, ld, spec)?;
        let cx = JobContext {
            ld,
            cfg,
            images_dir: &images.dir,
            options: &options,
            slots: &slots,
        };
        let job = image_job(&cx, spec, base, pieces);
        if runner.submit(job).is_err() {
            return Err(CheckError::Interrupted);
        }
        collected.take(runner.drain(), progress);
    }
    collected.wait(runner, interrupted, progress)?;
    let (summary, results) = summarize(specs, collected.outcomes, &slots, distinct);
    Ok(CheckReport {
        schema: SCHEMA,
        log: ld.dir.clone(),
        fs,
        command: ld.meta.command.clone(),
        checker: cfg.checker.clone(),
        fsck: cfg.fsck,
        seed: cfg.gen.seed,
        summary,
        seconds: started.elapsed().as_secs_f64(),
        images: results,
    })
}

fn cancel(runner: &Runner) -> CheckError {
    runner.cancel_handle().cancel();
    CheckError::Interrupted
}

/// The checker runner (no checker given: `true`, so only mount and fsck judge).
fn start_runner(cfg: &CheckConfig) -> Result<Runner, CheckError> {
    let checker = if cfg.checker.is_empty() {
        vec!["true".to_string()]
    } else {
        cfg.checker.clone()
    };
    Runner::start(RunnerConfig {
        checker,
        jobs: cfg.jobs,
        timeout: cfg.timeout,
        scratch_parent: cfg.scratch.clone(),
        keep_output_bytes: 4096,
        protocol: cfg.protocol,
    })
    .map_err(|e| CheckError::Input(e.to_string()))
}

/// The recorded (or given) mount options, plus what mounting a cloned image needs.
fn mount_options(ld: &LogDir, cfg: &CheckConfig) -> String {
    let options = cfg
        .mount_options
        .clone()
        .unwrap_or_else(|| ld.meta.mount_options.clone());
    let extra = ld.meta.fs.clone_mount_options();
    if extra.is_empty() || options.split(',').any(|o| o == extra) {
        options
    } else if options.is_empty() {
        extra.to_string()
    } else {
        format!("{options},{extra}")
    }
}

/// Where images are built, and the base images they are cloned from.
struct Images {
    dir: PathBuf,
    /// Where the scratch directory shares blocks (--scratch on xfs or btrfs), each epoch
    /// gets a base image (a reflink of the previous one plus that epoch's writes) and an
    /// image is a reflink of its base plus its own few sectors. Elsewhere (the default,
    /// tmpfs) an image is a sparse copy of the initial image plus every sector changed
    /// since: on tmpfs that is faster than reflinks through an xfs made for the purpose
    /// (docs/benchmarks.md).
    reflink: bool,
    /// bases[j]: the image with every epoch before j on media (bases[0]: the initial one).
    bases: Vec<PathBuf>,
}

impl Images {
    fn new(runner: &Runner, ld: &LogDir, cfg: &CheckConfig) -> Result<Images, CheckError> {
        let root = runner
            .scratch_root()
            .ok_or_else(|| CheckError::Failed("the checker runner has no scratch space".into()))?;
        // The runner removes its scratch root when it finishes; images live in a directory
        // of their own beside the crash directories.
        let dir = root.join("images");
        std::fs::create_dir(&dir)
            .map_err(|e| CheckError::Failed(format!("{}: {e}", dir.display())))?;
        let reflink = !cfg.full_copy && crate::sys::supports_reflink(&dir);
        let base0 = dir.join("base-0.img");
        clone_file(&ld.initial(), &base0).map_err(|e| {
            CheckError::Failed(format!(
                "copying {} into {}: {e}",
                ld.initial().display(),
                dir.display()
            ))
        })?;
        Ok(Images {
            dir,
            reflink,
            bases: vec![base0],
        })
    }

    /// The base image `spec` is cloned from, and the pieces written over it.
    fn base_and_pieces(
        &mut self,
        gen: &Generator,
        ld: &LogDir,
        spec: &ImageSpec,
    ) -> Result<(PathBuf, Vec<Piece>), CheckError> {
        if !self.reflink {
            return Ok((self.bases[0].clone(), gen.pieces(&gen.sector_map(spec))));
        }
        while self.bases.len() <= spec.epoch {
            self.push_base(gen, ld)?;
        }
        Ok((
            self.bases[spec.epoch].clone(),
            gen.pieces(&gen.overlay_map(spec)),
        ))
    }

    /// Base j: base j-1 plus epoch j-1's writes.
    fn push_base(&mut self, gen: &Generator, ld: &LogDir) -> Result<(), CheckError> {
        let j = self.bases.len();
        assert!(j >= 1, "base 0 is made in Images::new");
        let next = self.dir.join(format!("base-{j}.img"));
        clone_file(&self.bases[j - 1], &next)
            .and_then(|_| std::fs::OpenOptions::new().write(true).open(&next))
            .and_then(|f| write_pieces(&ld.log, &f, &gen.pieces(&gen.epoch_map(j - 1))))
            .map_err(|e| {
                CheckError::Failed(format!(
                    "building the base image of epoch {j} in {}: {e}",
                    self.dir.display()
                ))
            })?;
        self.bases.push(next);
        Ok(())
    }
}

/// What every image's job shares.
struct JobContext<'a> {
    ld: &'a LogDir,
    cfg: &'a CheckConfig,
    images_dir: &'a Path,
    options: &'a str,
    slots: &'a Slots,
}

/// One image's job: materialise (copy the base, write the pieces, mount: the file
/// system's own recovery), the checker on the mounted tree, release (unmount, fsck).
fn image_job(cx: &JobContext, spec: &ImageSpec, base: PathBuf, pieces: Vec<Piece>) -> Job {
    let JobContext {
        ld,
        cfg,
        images_dir,
        options,
        slots,
    } = *cx;
    let fs = ld.meta.fs;
    let id = spec.id;
    let img = images_dir.join(format!("img-{id}.img"));
    let daemon_log = images_dir.join(format!("img-{id}.daemon.log"));
    let (slot, tools, log) = (slots[id].clone(), cfg.tools.clone(), ld.log.clone());
    let (img2, opts, full_copy) = (img.clone(), options.to_string(), cfg.full_copy);
    let materialise = move |crash: &Path| -> Result<(), String> {
        let copied = if full_copy {
            full_copy_file(&base, &img2)
        } else {
            clone_file(&base, &img2).map(|_| ())
        };
        copied.map_err(|e| format!("copying the initial image to {}: {e}", img2.display()))?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&img2)
            .map_err(|e| format!("{}: {e}", img2.display()))?;
        write_pieces(&log, &f, &pieces)
            .map_err(|e| format!("writing the crash image {}: {e}", img2.display()))?;
        drop(f);
        let mounted = fs.mount(&img2, crash, &opts, false, &tools, &daemon_log);
        record_mount(&slot, fs, mounted, &daemon_log)
    };
    let (slot, tools, do_fsck) = (slots[id].clone(), cfg.tools.clone(), cfg.fsck);
    let release = move || {
        let mut s = lock(&slot);
        let mounted = s.attached.is_some();
        if let Some(a) = s.attached.take() {
            if let Err(e) = a.unmount() {
                s.mount_error = Some(format!("unmounting after the checker: {e}"));
            }
        }
        if do_fsck && mounted && s.mount_error.is_none() {
            s.fsck = Some(fs.fsck(&img, &tools).unwrap_or_else(|e| FsckResult {
                clean: false,
                code: None,
                output: e,
            }));
        }
        let _ = std::fs::remove_file(&img);
    };
    Job {
        id: id as u64,
        state_id: format!("image-{id}"),
        stdout: printed_before(ld, spec).unwrap_or_else(|| ld.stdout.clone()),
        materialise: Box::new(materialise),
        release: Some(Box::new(release)),
        patch: None,
    }
}

/// What had been printed when this crash happened: everything before the flush that ends
/// the image's epoch (a crash after that flush would leave the whole epoch).
fn printed_before(ld: &LogDir, spec: &ImageSpec) -> Option<Vec<u8>> {
    match spec.kind {
        ImageKind::Final => ld.log.output_before(usize::MAX),
        _ => ld
            .log
            .output_before(ld.log.flush_ending(spec.epoch).unwrap_or(usize::MAX)),
    }
}

/// Keeps the mounted image for release, or why it did not mount (with intactfs's daemon
/// log, which says why its recovery refused).
fn record_mount(
    slot: &Mutex<Slot>,
    fs: FsKind,
    mounted: Result<Attached, String>,
    daemon_log: &Path,
) -> Result<(), String> {
    match mounted {
        Ok(a) => {
            lock(slot).attached = Some(a);
            Ok(())
        }
        Err(e) => {
            let e = if fs == FsKind::Intactfs {
                let daemon = std::fs::read_to_string(daemon_log).unwrap_or_default();
                format!("{e} {}", daemon.trim())
            } else {
                e
            };
            lock(slot).mount_error = Some(e.clone());
            Err(e)
        }
    }
}

/// The runner's outcomes as they arrive, with the progress they report.
struct Collected {
    outcomes: Vec<intact_runner::Outcome>,
    failing: usize,
    total: usize,
}

impl Collected {
    fn new(total: usize) -> Collected {
        Collected {
            outcomes: Vec::with_capacity(total),
            failing: 0,
            total,
        }
    }

    fn take(
        &mut self,
        new: Vec<intact_runner::Outcome>,
        progress: &mut dyn FnMut(usize, usize, usize),
    ) {
        if new.is_empty() {
            return;
        }
        for o in new {
            self.failing += usize::from(!matches!(o.verdict, Verdict::Pass));
            self.outcomes.push(o);
        }
        assert!(self.outcomes.len() <= self.total, "more outcomes than jobs");
        progress(self.outcomes.len(), self.total, self.failing);
    }

    /// Waits for every job with progress (`Runner::finish` blocks without reporting).
    fn wait(
        &mut self,
        runner: Runner,
        interrupted: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(usize, usize, usize),
    ) -> Result<(), CheckError> {
        if interrupted() {
            return Err(cancel(&runner));
        }
        while self.outcomes.len() < self.total {
            let new = runner.drain();
            if new.is_empty() {
                if interrupted() {
                    return Err(cancel(&runner));
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            self.take(new, progress);
        }
        self.outcomes.extend(runner.finish());
        assert_eq!(self.outcomes.len(), self.total, "one outcome per job");
        Ok(())
    }
}

/// Each image's result (verdict, mount error, fsck) and the counts over all of them.
fn summarize(
    specs: Vec<ImageSpec>,
    mut outcomes: Vec<intact_runner::Outcome>,
    slots: &Slots,
    distinct: usize,
) -> (Summary, Vec<ImageResult>) {
    let mut summary = Summary {
        distinct,
        checked: specs.len(),
        ..Summary::default()
    };
    let mut results = Vec::with_capacity(specs.len());
    outcomes.sort_by_key(|o| o.id);
    assert_eq!(outcomes.len(), specs.len(), "one outcome per image");
    for (spec, o) in specs.into_iter().zip(outcomes) {
        assert_eq!(o.id, spec.id as u64, "outcomes sorted like the specs");
        let slot = std::mem::take(&mut *lock(&slots[spec.id]));
        let checker = checker_verdict(o.verdict, slot.mount_error.is_some());
        let unmountable = slot.mount_error.is_some();
        let fsck_bad = slot.fsck.as_ref().is_some_and(|f| !f.clean);
        match &checker {
            CheckerVerdict::Fail { .. } => summary.checker_failures += 1,
            CheckerVerdict::Timeout { .. } => summary.timeouts += 1,
            CheckerVerdict::Error { .. } => summary.errors += 1,
            _ => {}
        }
        summary.unmountable += usize::from(unmountable);
        summary.fsck_errors += usize::from(fsck_bad);
        let consistent = !unmountable && !fsck_bad && matches!(checker, CheckerVerdict::Pass);
        summary.consistent += usize::from(consistent);
        results.push(ImageResult {
            spec,
            mount_error: slot.mount_error,
            fsck: slot.fsck,
            checker,
            consistent,
        });
    }
    assert!(summary.consistent <= summary.checked);
    (summary, results)
}

/// The runner's verdict as the report shows it: an image that did not mount was not
/// checked (its materialise step failed on purpose).
fn checker_verdict(v: Verdict, unmountable: bool) -> CheckerVerdict {
    match v {
        Verdict::Pass => CheckerVerdict::Pass,
        Verdict::Fail {
            code,
            signal,
            stderr,
            ..
        } => CheckerVerdict::Fail {
            code,
            signal,
            stderr,
        },
        Verdict::Timeout { after } => CheckerVerdict::Timeout {
            seconds: after.as_secs_f64(),
        },
        Verdict::Error(_) if unmountable => CheckerVerdict::Skipped,
        Verdict::Error(message) => CheckerVerdict::Error { message },
    }
}

/// Every byte, holes included.
fn full_copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    let src = std::fs::File::open(from)?;
    let dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    crate::sys::copy_range(&src, &dst, 0, src.metadata()?.len())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
