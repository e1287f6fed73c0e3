//! `intact blk check`: build every crash image the log allows (see [`crate::images`]),
//! and for each: mount it (the file system's own recovery, as after a reboot), run the
//! application's checker on the mounted tree (the ALICE contract of `intact check`),
//! unmount, and run the file system's read-only fsck.
//!
//! Images are copies of the initial image (reflinks where the scratch file system shares
//! blocks, sparse copies otherwise) with the image's sectors written over them: the cost
//! is what the file system allocated plus what the log changed, not the device size.

use crate::fskind::{Attached, FsKind, FsckResult, Tools};
use crate::images::{write_pieces, GenConfig, Generator, ImageKind, ImageSpec};
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

#[derive(Default)]
struct Slot {
    attached: Option<Attached>,
    mount_error: Option<String>,
    fsck: Option<FsckResult>,
}

pub fn check(
    ld: &LogDir,
    cfg: &CheckConfig,
    interrupted: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, usize, usize),
) -> Result<CheckReport, CheckError> {
    use CheckError::{Failed, Input};
    let started = Instant::now();
    let fs = ld.meta.fs;
    fs.check_tools().map_err(Input)?;
    let gen = Generator::new(&ld.log).map_err(|e| Input(format!("{}: {e}", ld.dir.display())))?;
    let (specs, distinct) = gen.generate(&cfg.gen);

    let checker = if cfg.checker.is_empty() {
        vec!["true".to_string()]
    } else {
        cfg.checker.clone()
    };
    let runner = Runner::start(RunnerConfig {
        checker,
        jobs: cfg.jobs,
        timeout: cfg.timeout,
        scratch_parent: cfg.scratch.clone(),
        keep_output_bytes: 4096,
        protocol: cfg.protocol,
    })
    .map_err(|e| Input(e.to_string()))?;
    let root = runner
        .scratch_root()
        .ok_or_else(|| Failed("the checker runner has no scratch space".into()))?
        .to_path_buf();
    // The runner removes its scratch root when it finishes; images live in a directory of
    // their own beside the crash directories.
    let images = root.join("images");
    std::fs::create_dir(&images).map_err(|e| Failed(format!("{}: {e}", images.display())))?;
    // Where the scratch directory shares blocks (--scratch on xfs or btrfs), each epoch gets
    // a base image (a reflink of the previous one plus that epoch's writes) and an image is
    // a reflink of its base plus its own few sectors. Elsewhere (the default, tmpfs) an
    // image is a sparse copy of the initial image plus every sector changed since: on
    // tmpfs that is faster than reflinks through an xfs made for the purpose
    // (docs/benchmarks.md).
    let reflink = !cfg.full_copy && crate::sys::supports_reflink(&images);
    let base0 = images.join("base-0.img");
    clone_file(&ld.initial(), &base0).map_err(|e| {
        Failed(format!(
            "copying {} into {}: {e}",
            ld.initial().display(),
            images.display()
        ))
    })?;
    let mut bases: Vec<PathBuf> = vec![base0];

    let mut options = cfg
        .mount_options
        .clone()
        .unwrap_or_else(|| ld.meta.mount_options.clone());
    let extra = fs.clone_mount_options();
    if !extra.is_empty() && !options.split(',').any(|o| o == extra) {
        options = if options.is_empty() {
            extra.to_string()
        } else {
            format!("{options},{extra}")
        };
    }
    let log = ld.log.clone();
    let slots: Vec<Arc<Mutex<Slot>>> = specs.iter().map(|_| Arc::default()).collect();
    let total = specs.len();
    let mut outcomes = Vec::new();
    let mut failing = 0;
    for spec in specs.iter() {
        if interrupted() {
            runner.cancel_handle().cancel();
            return Err(CheckError::Interrupted);
        }
        let (base, pieces) = if reflink {
            while bases.len() <= spec.epoch {
                let j = bases.len();
                let next = images.join(format!("base-{j}.img"));
                clone_file(&bases[j - 1], &next)
                    .and_then(|_| std::fs::OpenOptions::new().write(true).open(&next))
                    .and_then(|f| write_pieces(&ld.log, &f, &gen.pieces(&gen.epoch_map(j - 1))))
                    .map_err(|e| {
                        Failed(format!(
                            "building the base image of epoch {j} in {}: {e}",
                            images.display()
                        ))
                    })?;
                bases.push(next);
            }
            (
                bases[spec.epoch].clone(),
                gen.pieces(&gen.overlay_map(spec)),
            )
        } else {
            (bases[0].clone(), gen.pieces(&gen.sector_map(spec)))
        };
        let id = spec.id;
        let img = images.join(format!("img-{id}.img"));
        let (slot, slot2) = (slots[id].clone(), slots[id].clone());
        let (img2, base2, opts, tools, tools2, log2) = (
            img.clone(),
            base,
            options.clone(),
            cfg.tools.clone(),
            cfg.tools.clone(),
            log.clone(),
        );
        let daemon_log = images.join(format!("img-{id}.daemon.log"));
        let do_fsck = cfg.fsck;
        let full_copy = cfg.full_copy;
        // What had been printed when this crash happened: everything before the flush that
        // ends the image's epoch (a crash after that flush would leave the whole epoch).
        let printed = match spec.kind {
            ImageKind::Final => ld.log.output_before(usize::MAX),
            _ => ld
                .log
                .output_before(ld.log.flush_ending(spec.epoch).unwrap_or(usize::MAX)),
        };
        let job = Job {
            id: id as u64,
            state_id: format!("image-{id}"),
            stdout: printed.unwrap_or_else(|| ld.stdout.clone()),
            materialise: Box::new(move |crash: &Path| {
                let copied = if full_copy {
                    full_copy_file(&base2, &img2)
                } else {
                    clone_file(&base2, &img2).map(|_| ())
                };
                copied
                    .map_err(|e| format!("copying the initial image to {}: {e}", img2.display()))?;
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&img2)
                    .map_err(|e| format!("{}: {e}", img2.display()))?;
                write_pieces(&log2, &f, &pieces)
                    .map_err(|e| format!("writing the crash image {}: {e}", img2.display()))?;
                drop(f);
                match fs.mount(&img2, crash, &opts, false, &tools, &daemon_log) {
                    Ok(a) => {
                        lock(&slot).attached = Some(a);
                        Ok(())
                    }
                    Err(e) => {
                        let e = if fs == FsKind::Intactfs {
                            format!(
                                "{e} {}",
                                std::fs::read_to_string(&daemon_log)
                                    .unwrap_or_default()
                                    .trim()
                            )
                        } else {
                            e
                        };
                        lock(&slot).mount_error = Some(e.clone());
                        Err(e)
                    }
                }
            }),
            release: Some(Box::new(move || {
                let mut s = lock(&slot2);
                let mounted = s.attached.is_some();
                if let Some(a) = s.attached.take() {
                    if let Err(e) = a.unmount() {
                        s.mount_error = Some(format!("unmounting after the checker: {e}"));
                    }
                }
                if do_fsck && mounted && s.mount_error.is_none() {
                    s.fsck = Some(fs.fsck(&img, &tools2).unwrap_or_else(|e| FsckResult {
                        clean: false,
                        code: None,
                        output: e,
                    }));
                }
                let _ = std::fs::remove_file(&img);
            })),
            patch: None,
        };
        if runner.submit(job).is_err() {
            return Err(CheckError::Interrupted);
        }
        for o in runner.drain() {
            failing += usize::from(!matches!(o.verdict, Verdict::Pass));
            outcomes.push(o);
        }
        progress(outcomes.len(), total, failing);
    }
    if interrupted() {
        runner.cancel_handle().cancel();
        return Err(CheckError::Interrupted);
    }
    // Wait with progress: finish() blocks without reporting.
    while outcomes.len() < total {
        let new = runner.drain();
        if new.is_empty() {
            if interrupted() {
                runner.cancel_handle().cancel();
                return Err(CheckError::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        for o in new {
            failing += usize::from(!matches!(o.verdict, Verdict::Pass));
            outcomes.push(o);
        }
        progress(outcomes.len(), total, failing);
    }
    outcomes.extend(runner.finish());

    let mut summary = Summary {
        distinct,
        checked: total,
        ..Summary::default()
    };
    let mut results = Vec::with_capacity(total);
    outcomes.sort_by_key(|o| o.id);
    for (spec, o) in specs.into_iter().zip(outcomes) {
        let slot = std::mem::take(&mut *lock(&slots[spec.id]));
        let checker = match o.verdict {
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
            Verdict::Error(_) if slot.mount_error.is_some() => CheckerVerdict::Skipped,
            Verdict::Error(message) => CheckerVerdict::Error { message },
        };
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
