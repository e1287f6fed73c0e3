//! `intact blk record | check | validate-apm`: the block-level validator.

use crate::fs_cmd::parse_size;
use crate::{install_interrupt_handler, interrupted, Failure};
use intact_blk::check::{check, CheckConfig, CheckError, CheckReport, CheckerVerdict};
use intact_blk::fskind::{FsKind, Tools};
use intact_blk::images::GenConfig;
use intact_blk::logdir::LogDir;
use intact_blk::record::{describe, record, RecordConfig, RecordError};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum BlkCmd {
    /// Make a file system image, mount it through the block recorder, run CMD in it
    /// ($INTACT_MNT, also its working directory), unmount, and write the block log.
    #[command(after_help = "Exit status: 0 recorded; 1 recorded, but the workload failed (the log says so); \
2 usage or input error (nothing written); 3 a step failed (nothing written); 130 interrupted (nothing written).")]
    Record(RecordArgs),
    /// Build every crash image the log allows, mount each (the file system's recovery), run
    /// the checker on it and the file system's fsck, and report.
    #[command(after_help = "Exit status: 0 every image consistent; 1 some image did not mount, failed fsck or \
failed the checker; 2 usage or input error; 3 internal error; 130 interrupted (no report).")]
    Check(CheckArgs),
}

#[derive(clap::Args)]
pub struct RecordArgs {
    /// ext4, xfs, btrfs or intactfs.
    #[arg(long)]
    pub fs: String,
    /// Device size (suffixes K, M, G); default 256M (xfs: 320M, its minimum is 300M).
    #[arg(long)]
    pub size: Option<String>,
    /// Extra mkfs arguments, shell-quoted ("-O ^has_journal").
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub mkfs_opts: Option<String>,
    /// Mount options, comma-separated (e.g. data=writeback).
    #[arg(long, value_name = "OPTS", default_value = "", allow_hyphen_values = true)]
    pub mount_opts: String,
    /// The log directory to write (must not exist).
    #[arg(long, value_name = "LOG")]
    pub out: PathBuf,
    /// Where the working image lives while recording (default: the temp dir).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// The workload, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The log directory written by `intact blk record`.
    pub log: PathBuf,
    /// The application's checker, run as CHECKER <mounted_image> <stdout_file> (the ALICE
    /// contract of `intact check`); default: none (mount and fsck only).
    #[arg(long, value_name = "CMD")]
    pub checker: Option<String>,
    /// Images checked in parallel (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Per-image checker time limit in seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Skip the file system's read-only fsck after each image.
    #[arg(long)]
    pub no_fsck: bool,
    /// Epochs with at most N writes get every subset of them; larger ones are sampled.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub exhaustive: usize,
    /// Random subsets per large epoch.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub samples: usize,
    /// Torn-write images per epoch (a sector subset of one multi-sector write).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub torn: usize,
    /// Seed for sampling (same seed, same images).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// At most N images (prefixes and the final image are always kept; the rest sampled).
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub max_images: usize,
    /// Mount options for the images (default: those recorded).
    #[arg(long, value_name = "OPTS", allow_hyphen_values = true)]
    pub mount_opts: Option<String>,
    /// Where images are built (default: /dev/shm when writable, else the temp dir).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Also write the report as JSON (schema intact-blk-report/1, docs/blk.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn tools() -> Result<Tools, Failure> {
    let intact = std::env::current_exe().map_err(|e| Failure::internal(format!("cannot find the intact binary: {e}")))?;
    Ok(Tools { intact })
}

pub fn blk(cmd: BlkCmd) -> Result<u8, Failure> {
    install_interrupt_handler();
    match cmd {
        BlkCmd::Record(a) => record_cmd(a),
        BlkCmd::Check(a) => check_cmd(a),
    }
}

fn need_root() -> Result<(), Failure> {
    // SAFETY: getuid has no failure mode.
    if unsafe { libc::getuid() } != 0 {
        return Err(Failure::input("intact blk needs root: it attaches loop devices and mounts file systems"));
    }
    Ok(())
}

fn record_cmd(a: RecordArgs) -> Result<u8, Failure> {
    let fs = FsKind::parse(&a.fs).map_err(|e| Failure::input(format!("--fs: {e}")))?;
    let size = match &a.size {
        Some(s) => parse_size(s).map_err(|e| Failure::input(format!("--size: {e}")))?,
        None => fs.default_size(),
    };
    let mkfs_options = match &a.mkfs_opts {
        Some(s) => shlex::split(s).ok_or_else(|| Failure::input(format!("--mkfs-opts {s:?}: unbalanced quotes")))?,
        None => Vec::new(),
    };
    need_root()?;
    let cfg = RecordConfig { fs, size, mkfs_options, mount_options: a.mount_opts.clone(), out: a.out.clone(), command: a.cmd.clone(), scratch: a.scratch.clone(), tools: tools()? };
    match record(&cfg, &interrupted) {
        Ok(meta) => {
            eprintln!("intact: recorded {}", describe(&meta));
            eprintln!("intact: block log in {}", a.out.display());
            if meta.workload.ok {
                Ok(0)
            } else {
                eprintln!(
                    "intact: the workload failed ({}); the log is kept and marked, but its crash images mean little",
                    match (meta.workload.exit_code, meta.workload.signal) {
                        (Some(c), _) => format!("exit status {c}"),
                        (_, Some(s)) => format!("killed by signal {s}"),
                        _ => "unknown status".into(),
                    }
                );
                Ok(1)
            }
        }
        Err(RecordError::Input(m)) => Err(Failure::input(m)),
        Err(RecordError::Failed(m)) => Err(Failure::internal(format!("{m}; nothing was written"))),
        Err(RecordError::Interrupted) => Err(Failure { code: 130, message: "interrupted; nothing was written and everything mounted was removed".into() }),
    }
}

fn check_cmd(a: CheckArgs) -> Result<u8, Failure> {
    let checker = match &a.checker {
        Some(s) => {
            let v = shlex::split(s).ok_or_else(|| Failure::input(format!("--checker {s:?}: unbalanced quotes")))?;
            if v.is_empty() {
                return Err(Failure::input("--checker: empty command"));
            }
            v
        }
        None => Vec::new(),
    };
    if a.jobs == Some(0) {
        return Err(Failure::input("--jobs must be at least 1"));
    }
    if !(a.timeout > 0.0 && a.timeout.is_finite()) {
        return Err(Failure::input("--timeout must be a positive number of seconds"));
    }
    if a.max_images == 0 {
        return Err(Failure::input("--max-images must be at least 1"));
    }
    if a.exhaustive > 16 {
        return Err(Failure::input("--exhaustive: at most 16 (2^16 subsets per epoch)"));
    }
    let ld = LogDir::open(&a.log).map_err(Failure::input)?;
    if !ld.meta.workload.ok {
        return Err(Failure::input(format!("{}: the recorded workload failed, so its crash images mean little; fix the workload and record again", a.log.display())));
    }
    need_root()?;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let cfg = CheckConfig {
        gen: GenConfig { exhaustive: a.exhaustive, samples: a.samples, torn: a.torn, seed: a.seed, max_images: a.max_images },
        checker,
        jobs,
        timeout: Some(Duration::from_secs_f64(a.timeout)),
        fsck: !a.no_fsck,
        scratch: a.scratch.clone(),
        mount_options: a.mount_opts.clone(),
        tools: tools()?,
    };
    // Refuse an unwritable --json before the run, not after it.
    if let Some(j) = &a.json {
        std::fs::OpenOptions::new().create(true).append(true).open(j).map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} images {msg} [{elapsed}<{eta}, {per_sec}]").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
        b
    });
    let mut last_line = std::time::Instant::now();
    let quiet = a.quiet;
    let mut progress = |done: usize, total: usize, failing: usize| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(format!("{failing} failing"));
        } else if !quiet && (last_line.elapsed() > Duration::from_secs(10) || done == total) {
            last_line = std::time::Instant::now();
            eprintln!("intact: {done}/{total} images checked, {failing} failing");
        }
    };
    let r = check(&ld, &cfg, &interrupted, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = match r {
        Ok(r) => r,
        Err(CheckError::Input(m)) => return Err(Failure::input(m)),
        Err(CheckError::Failed(m)) => return Err(Failure::internal(m)),
        Err(CheckError::Interrupted) => return Err(Failure { code: 130, message: "interrupted; no report".into() }),
    };
    print!("{}", render(&report, &ld));
    if let Some(j) = &a.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Failure::internal(e.to_string()))?;
        std::fs::write(j, text + "\n").map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    Ok(report.exit_code())
}

fn render(r: &CheckReport, ld: &LogDir) -> String {
    use std::fmt::Write;
    let s = &r.summary;
    let mut o = String::new();
    let _ = writeln!(o, "block log: {}", describe(&ld.meta));
    let sampled = if s.distinct > s.checked { format!(" (sampled from {} distinct)", s.distinct) } else { String::new() };
    let _ = writeln!(o, "crash images: {} checked{sampled} in {:.1} s", s.checked, r.seconds);
    let _ = writeln!(o, "consistent: {}/{}", s.consistent, s.checked);
    let _ = writeln!(
        o,
        "  did not mount: {}   fsck errors: {}   checker failed: {}   timed out: {}   errors: {}",
        s.unmountable, s.fsck_errors, s.checker_failures, s.timeouts, s.errors
    );
    let bad: Vec<_> = r.images.iter().filter(|i| !i.consistent).collect();
    for i in bad.iter().take(20) {
        let what = if let Some(e) = &i.mount_error {
            format!("did not mount: {}", first_line(e))
        } else if let Some(f) = i.fsck.as_ref().filter(|f| !f.clean) {
            format!("fsck: {}", first_line(&f.output))
        } else {
            match &i.checker {
                CheckerVerdict::Fail { stderr, code, .. } => format!("checker failed (exit {}): {}", code.map(|c| c.to_string()).unwrap_or("signal".into()), first_line(stderr)),
                CheckerVerdict::Timeout { seconds } => format!("checker timed out after {seconds:.0} s"),
                CheckerVerdict::Error { message } => format!("error: {}", first_line(message)),
                _ => String::new(),
            }
        };
        let torn = i.spec.torn.as_ref().map(|t| format!(", record {} torn to {} sectors", t.record, t.sectors.len())).unwrap_or_default();
        let _ = writeln!(o, "  image {} ({:?}, epochs < {} + {} writes of the next{torn}): {what}", i.spec.id, i.spec.kind, i.spec.epoch, i.spec.members.len());
    }
    if bad.len() > 20 {
        let _ = writeln!(o, "  ... and {} more (see --json)", bad.len() - 20);
    }
    o
}

fn first_line(s: &str) -> String {
    let l = s.trim().lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    l.chars().take(200).collect()
}
