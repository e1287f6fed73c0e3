//! `intact blk record | check | validate-apm`: the block-level validator.

use crate::size::parse_size;
use crate::{install_interrupt_handler, interrupted, Failure};
use intact_blk::check::{check, CheckConfig, CheckError, CheckReport, CheckerVerdict, ImageResult};
use intact_blk::fskind::{FsKind, Tools};
use intact_blk::images::GenConfig;
use intact_blk::images::{ImageKind, ImageSpec};
use intact_blk::logdir::LogDir;
use intact_blk::record::{describe, record, RecordConfig, RecordError};
use intact_runner::Protocol;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum BlkCmd {
    /// Make a file system image, mount it through the block recorder, run CMD in it
    /// ($INTACT_MNT, also its working directory), unmount, and write the block log.
    #[command(
        after_help = "Exit status: 0 recorded; 1 recorded, but the workload failed (the log says so); \
2 usage or input error (nothing written); 3 a step failed (nothing written); 130 interrupted (nothing written)."
    )]
    Record(RecordArgs),
    /// Build every crash image the log allows, mount each (the file system's recovery), run
    /// the checker on it and the file system's fsck, and report.
    #[command(
        after_help = "Exit status: 0 every image consistent; 1 some image did not mount, failed fsck or \
failed the checker; 2 usage or input error; 3 internal error; 130 interrupted (no report)."
    )]
    Check(CheckArgs),
    /// Check built-in APMs against real file systems: run workloads (the explorer's and
    /// generated ones) under `intact record` inside `intact blk record`, and verify that every
    /// crash image the device allows recovers to a state the file system's APM allows.
    #[command(
        name = "validate-apm",
        after_help = "Exit status: 0 every image is allowed; 1 findings (printed, and in --json); \
2 usage or input error; 3 internal error; 130 interrupted."
    )]
    ValidateApm(ValidateArgs),
    /// (Internal: the checker validate-apm runs on each image.)
    #[command(hide = true)]
    Snapshot {
        #[arg(long)]
        sub: String,
        outdir: PathBuf,
        crash: PathBuf,
        stdout: PathBuf,
    },
}

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// File systems, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "ext4,xfs,btrfs,intactfs")]
    pub fs: Vec<String>,
    /// Use APM for file system FS instead of its default, today's kernel model (ext4: ext4,
    /// or ext4-dioread_lock when mounted so; xfs: xfs; btrfs: btrfs-linux6; intactfs:
    /// intactfs), e.g. --apm ext4=ext4-o for the thesis' model. Repeatable.
    #[arg(long, value_name = "FS=APM")]
    pub apm: Vec<String>,
    /// Mount options for file system FS, e.g. --mount-opts ext4=dioread_lock. Repeatable.
    #[arg(long, value_name = "FS=OPTS")]
    pub mount_opts: Vec<String>,
    /// A workload command (run from the mount's root; the directory that matters is `w`,
    /// created before recording). Repeatable.
    #[arg(long, value_name = "CMD")]
    pub workload: Vec<String>,
    /// Also this many generated workloads (small random sequences of file operations and syncs).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub generated: usize,
    /// Seed for the generated workloads and the image sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Bound on the allowed states enumerated per workload.
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    pub max_states: usize,
    /// At most N crash images per workload and file system.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub max_images: usize,
    /// Torn-write granularity in bytes (as for `intact blk check`).
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    pub tear: u64,
    /// Images checked in parallel (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Where images and recordings are built (default: the temp dir).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Write every result (with findings) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print at most N findings per workload.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub show: usize,
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
    #[arg(
        long,
        value_name = "OPTS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub mount_opts: String,
    /// The log directory to write (must not exist).
    #[arg(long, value_name = "LOG")]
    pub out: PathBuf,
    /// A shell command run in the new file system before recording starts (e.g. to load
    /// data); what it leaves is part of the initial image.
    #[arg(long, value_name = "SH")]
    pub setup: Option<String>,
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
    #[arg(long, value_name = "CMD", conflicts_with = "checker_server")]
    pub checker: Option<String>,
    /// The application's checker as a warm server: started once per worker, judges every
    /// image it is sent as one JSON line on stdin (docs/checkers.md).
    #[arg(long, value_name = "CMD")]
    pub checker_server: Option<String>,
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
    /// Torn writes keep or lose units of this many bytes: 4096 (the physical sector of
    /// today's disks and SSDs) or 512 (a legacy 512-byte-sector disk: then ext4's
    /// superblock can tear, and such images do not mount).
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    pub tear: u64,
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
    /// (Benchmark baseline: build each image as a full copy instead of copy-on-write.)
    #[arg(long, hide = true)]
    pub full_copy: bool,
}

pub fn tools() -> Result<Tools, Failure> {
    let intact = std::env::current_exe()
        .map_err(|e| Failure::internal(format!("cannot find the intact binary: {e}")))?;
    Ok(Tools { intact })
}

pub fn blk(cmd: BlkCmd) -> Result<u8, Failure> {
    install_interrupt_handler();
    match cmd {
        BlkCmd::Record(a) => record_cmd(a),
        BlkCmd::Check(a) => check_cmd(a),
        BlkCmd::ValidateApm(a) => validate_cmd(a),
        BlkCmd::Snapshot {
            sub,
            outdir,
            crash,
            stdout: _,
        } => match intact_blk::validate::snapshot(&sub, &outdir, &crash) {
            Ok(()) => Ok(0),
            Err(e) => Err(Failure {
                code: 1,
                message: e,
            }),
        },
    }
}

fn need_root() -> Result<(), Failure> {
    // SAFETY: getuid has no failure mode.
    if unsafe { libc::getuid() } != 0 {
        return Err(Failure::input(
            "intact blk needs root: it attaches loop devices and mounts file systems",
        ));
    }
    Ok(())
}

/// The workload runs with the new file system as its working directory, where `./save`
/// means nothing the user meant: a relative program path that names an executable in the
/// caller's directory is made absolute. One that does not is left for the mount (a
/// `--setup` may have put it there).
fn caller_relative(cmd: &[String]) -> Result<Vec<String>, Failure> {
    let mut cmd = cmd.to_vec();
    let program = Path::new(&cmd[0]);
    if !cmd[0].contains('/') || program.is_absolute() {
        return Ok(cmd);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::input(format!("cannot read the current directory: {e}")))?;
    if let Ok(found) = intact_trace::tracer::find_command(&cmd[0], &cwd) {
        cmd[0] = found.to_string_lossy().into_owned();
    }
    Ok(cmd)
}

fn record_cmd(a: RecordArgs) -> Result<u8, Failure> {
    let fs = FsKind::parse(&a.fs).map_err(|e| Failure::input(format!("--fs: {e}")))?;
    let size = match &a.size {
        Some(s) => parse_size(s).map_err(|e| Failure::input(format!("--size: {e}")))?,
        None => fs.default_size(),
    };
    let mkfs_options = match &a.mkfs_opts {
        Some(s) => shlex::split(s)
            .ok_or_else(|| Failure::input(format!("--mkfs-opts {s:?}: unbalanced quotes")))?,
        None => Vec::new(),
    };
    need_root()?;
    let cfg = RecordConfig {
        fs,
        size,
        mkfs_options,
        mount_options: a.mount_opts.clone(),
        out: a.out.clone(),
        command: caller_relative(&a.cmd)?,
        setup: a.setup.clone(),
        scratch: a.scratch.clone(),
        tools: tools()?,
    };
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
        Err(RecordError::Interrupted) => Err(Failure {
            code: 130,
            message: "interrupted; nothing was written and everything mounted was removed".into(),
        }),
    }
}

fn check_cmd(a: CheckArgs) -> Result<u8, Failure> {
    let (flag, command, protocol) = match (&a.checker, &a.checker_server) {
        (_, Some(s)) => ("--checker-server", Some(s), Protocol::Server),
        (c, None) => ("--checker", c.as_ref(), Protocol::PerProcess),
    };
    let checker = match command {
        Some(s) => {
            let v = shlex::split(s)
                .ok_or_else(|| Failure::input(format!("{flag} {s:?}: unbalanced quotes")))?;
            if v.is_empty() {
                return Err(Failure::input(format!("{flag}: empty command")));
            }
            v
        }
        None => Vec::new(),
    };
    if a.jobs == Some(0) {
        return Err(Failure::input("--jobs must be at least 1"));
    }
    if !(a.timeout > 0.0 && a.timeout.is_finite()) {
        return Err(Failure::input(
            "--timeout must be a positive number of seconds",
        ));
    }
    if a.max_images == 0 {
        return Err(Failure::input("--max-images must be at least 1"));
    }
    check_tear(a.tear)?;
    if a.exhaustive > 16 {
        return Err(Failure::input(
            "--exhaustive: at most 16 (2^16 subsets per epoch)",
        ));
    }
    let ld = LogDir::open(&a.log).map_err(Failure::input)?;
    if !ld.meta.workload.ok {
        return Err(Failure::input(format!("{}: the recorded workload failed, so its crash images mean little; fix the workload and record again", a.log.display())));
    }
    need_root()?;
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let cfg = CheckConfig {
        gen: GenConfig {
            exhaustive: a.exhaustive,
            samples: a.samples,
            torn: a.torn,
            seed: a.seed,
            max_images: a.max_images,
            tear: a.tear,
        },
        checker,
        protocol,
        jobs,
        timeout: Some(Duration::from_secs_f64(a.timeout)),
        fsck: !a.no_fsck,
        scratch: a.scratch.clone(),
        mount_options: a.mount_opts.clone(),
        full_copy: a.full_copy,
        tools: tools()?,
    };
    // Refuse an unwritable --json before the run, not after it.
    if let Some(j) = &a.json {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(j)
            .map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} images {msg} [{elapsed}<{eta}, {per_sec}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
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
        Err(CheckError::Interrupted) => {
            return Err(Failure {
                code: 130,
                message: "interrupted; no report".into(),
            })
        }
    };
    print!("{}", render(&report, &ld));
    if let Some(j) = &a.json {
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| Failure::internal(e.to_string()))?;
        std::fs::write(j, text + "\n")
            .map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    Ok(report.exit_code())
}

/// Groups listed on screen at most (all are in --json).
const MAX_GROUPS_SHOWN: usize = 20;

/// The inconsistent images, grouped by what went wrong: one line per distinct message
/// with its count and one example image (one bug often fails many images alike).
fn render_problems(o: &mut String, r: &CheckReport) {
    use std::fmt::Write;
    let mut groups: Vec<(String, Vec<&ImageResult>)> = Vec::new();
    for i in r.images.iter().filter(|i| !i.consistent) {
        let what = problem(i);
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, v)) => v.push(i),
            None => groups.push((what, vec![i])),
        }
    }
    for (what, images) in groups.iter().take(MAX_GROUPS_SHOWN) {
        let example = images[0];
        let _ = writeln!(o, "  {} image(s): {what}", images.len());
        let _ = writeln!(
            o,
            "    e.g. image {}: {}",
            example.spec.id,
            image_words(&example.spec)
        );
    }
    if groups.len() > MAX_GROUPS_SHOWN {
        let more = groups.len() - MAX_GROUPS_SHOWN;
        let _ = writeln!(o, "  ... and {more} more kinds of failure (see --json)");
    }
}

/// What an inconsistent image shows, on one line.
fn problem(i: &ImageResult) -> String {
    if let Some(e) = &i.mount_error {
        return format!("did not mount: {}", first_line(e));
    }
    if let Some(f) = i.fsck.as_ref().filter(|f| !f.clean) {
        return format!("fsck: {}", first_line(&f.output));
    }
    match &i.checker {
        CheckerVerdict::Fail { stderr, code, .. } => format!(
            "checker failed (exit {}): {}",
            code.map(|c| c.to_string()).unwrap_or("signal".into()),
            first_line(stderr)
        ),
        CheckerVerdict::Timeout { seconds } => format!("checker timed out after {seconds:.0} s"),
        CheckerVerdict::Error { message } => format!("error: {}", first_line(message)),
        _ => String::new(),
    }
}

/// How an image was built, in words (kind names as in the JSON and docs/blk.md).
fn image_words(spec: &ImageSpec) -> String {
    let kind = serde_json::to_value(spec.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let next = match spec.kind {
        ImageKind::Subset => "a subset of",
        _ => "the first",
    };
    let torn = spec
        .torn
        .as_ref()
        .map(|t| {
            format!(
                "; write record {} torn, {} sector(s) on media",
                t.record,
                t.sectors.len()
            )
        })
        .unwrap_or_default();
    format!(
        "{kind}: every write of the first {} flush epoch(s), and {next} {} write(s) of the next{torn}",
        spec.epoch,
        spec.members.len()
    )
}

fn render(r: &CheckReport, ld: &LogDir) -> String {
    use std::fmt::Write;
    let s = &r.summary;
    let mut o = String::new();
    let _ = writeln!(o, "block log: {}", describe(&ld.meta));
    let sampled = if s.distinct > s.checked {
        format!(" (sampled from {} distinct)", s.distinct)
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "crash images: {} checked{sampled} in {:.1} s",
        s.checked, r.seconds
    );
    let _ = writeln!(o, "consistent: {}/{}", s.consistent, s.checked);
    let _ = writeln!(
        o,
        "  did not mount: {}   fsck errors: {}   checker failed: {}   timed out: {}   errors: {}",
        s.unmountable, s.fsck_errors, s.checker_failures, s.timeouts, s.errors
    );
    render_problems(&mut o, r);
    o
}

fn first_line(s: &str) -> String {
    let l = s
        .trim()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    l.chars().take(200).collect()
}

fn validate_cmd(a: ValidateArgs) -> Result<u8, Failure> {
    use intact_blk::validate::{generated, validate_workload, ValidateConfig, WorkloadSpec};
    let mut fses = Vec::new();
    for f in &a.fs {
        fses.push(FsKind::parse(f.trim()).map_err(|e| Failure::input(format!("--fs: {e}")))?);
    }
    let mut mopts: std::collections::HashMap<FsKind, String> = std::collections::HashMap::new();
    for o in &a.mount_opts {
        let (f, m) = o.split_once('=').ok_or_else(|| {
            Failure::input(format!(
                "--mount-opts {o:?}: expected FS=OPTS, e.g. ext4=dioread_lock"
            ))
        })?;
        let f =
            FsKind::parse(f.trim()).map_err(|e| Failure::input(format!("--mount-opts: {e}")))?;
        mopts.insert(f, m.trim().to_string());
    }
    let mut apms: std::collections::HashMap<FsKind, String> = fses
        .iter()
        .map(|f| {
            let mo = mopts.get(f).map(String::as_str).unwrap_or("");
            (*f, f.apm(mo).to_string())
        })
        .collect();
    for o in &a.apm {
        let (f, m) = o.split_once('=').ok_or_else(|| {
            Failure::input(format!("--apm {o:?}: expected FS=APM, e.g. xfs=ext4-o"))
        })?;
        let f = FsKind::parse(f.trim()).map_err(|e| Failure::input(format!("--apm: {e}")))?;
        intact_apm::Apm::resolve(m.trim())
            .map_err(|e| Failure::input(format!("--apm {o}: {e}")))?;
        apms.insert(f, m.trim().to_string());
    }
    for f in &fses {
        intact_apm::Apm::resolve(&apms[f]).map_err(|e| {
            Failure::input(format!(
                "APM {} for {}: {e} (choose one with --apm {}=NAME)",
                apms[f],
                f.name(),
                f.name()
            ))
        })?;
        f.check_tools().map_err(Failure::input)?;
    }
    if a.jobs == Some(0) {
        return Err(Failure::input("--jobs must be at least 1"));
    }
    check_tear(a.tear)?;
    let mut workloads = Vec::new();
    for (i, w) in a.workload.iter().enumerate() {
        let argv = shlex::split(w).filter(|v| !v.is_empty()).ok_or_else(|| {
            Failure::input(format!("--workload {w:?}: empty or unbalanced quotes"))
        })?;
        let name = std::path::Path::new(&argv[0])
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("workload-{i}"));
        workloads.push(WorkloadSpec { name, argv });
    }
    if workloads.is_empty() && a.generated == 0 {
        return Err(Failure::input(
            "no workloads: give --workload CMD or --generated N",
        ));
    }
    if let Some(j) = &a.json {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(j)
            .map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    need_root()?;
    let gen_dir = tempfile::Builder::new()
        .prefix("intact-blk-workloads.")
        .tempdir()
        .map_err(|e| Failure::internal(format!("temp dir: {e}")))?;
    workloads.extend(generated(a.seed, a.generated, gen_dir.path()).map_err(Failure::internal)?);
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let tools = tools()?;
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for fs in &fses {
        let cfg = ValidateConfig {
            fs: *fs,
            apm: apms[fs].clone(),
            mount_options: mopts.get(fs).cloned().unwrap_or_default(),
            gen: GenConfig {
                seed: a.seed,
                max_images: a.max_images,
                tear: a.tear,
                ..GenConfig::default()
            },
            jobs,
            max_states: a.max_states,
            scratch: a.scratch.clone(),
            tools: tools.clone(),
        };
        for w in &workloads {
            if interrupted() {
                return Err(Failure {
                    code: 130,
                    message: "interrupted; no report".into(),
                });
            }
            match validate_workload(w, &cfg, &interrupted) {
                Ok(r) => {
                    eprintln!(
                        "intact: {} {} under {}: {} images, {} allowed, {} forbidden, {} unmountable, {} fsck errors ({} allowed states{}, {:.1} s)",
                        fs.name(),
                        w.name,
                        r.apm,
                        r.images,
                        r.allowed,
                        r.forbidden,
                        r.unmountable,
                        r.fsck_errors,
                        r.allowed_states,
                        if r.enumeration_complete { "" } else { ", enumeration INCOMPLETE" },
                        r.seconds
                    );
                    results.push(r);
                }
                Err(e) if e == "interrupted" => {
                    return Err(Failure {
                        code: 130,
                        message: "interrupted; no report".into(),
                    })
                }
                Err(e) => {
                    eprintln!("intact: {} {}: {e}", fs.name(), w.name);
                    failed.push(format!("{} {}: {e}", fs.name(), w.name));
                }
            }
        }
    }
    print!("{}", render_validation(&results, a.show));
    if let Some(j) = &a.json {
        let v = serde_json::json!({ "schema": "intact-blk-validate/1", "seed": a.seed, "results": results, "failed_workloads": failed });
        std::fs::write(
            j,
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
        )
        .map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    if !failed.is_empty() {
        return Err(Failure::internal(format!(
            "{} workload runs could not be validated:\n  {}",
            failed.len(),
            failed.join("\n  ")
        )));
    }
    Ok(u8::from(results.iter().any(|r| !r.findings.is_empty())))
}

fn render_validation(results: &[intact_blk::validate::WorkloadResult], show: usize) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "| file system | APM | workloads | crash images | allowed | forbidden | did not mount | fsck errors | workloads with findings |");
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut order: Vec<(FsKind, &str, &str)> = Vec::new();
    for r in results {
        if !order
            .iter()
            .any(|(f, a, m)| *f == r.fs && *a == r.apm && *m == r.mount_options)
        {
            order.push((r.fs, &r.apm, &r.mount_options));
        }
    }
    for (fs, apm, mo) in order {
        let rs: Vec<_> = results
            .iter()
            .filter(|r| r.fs == fs && r.apm == apm && r.mount_options == mo)
            .collect();
        let sum = |f: &dyn Fn(&&intact_blk::validate::WorkloadResult) -> usize| {
            rs.iter().map(f).sum::<usize>()
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if mo.is_empty() {
                fs.name().to_string()
            } else {
                format!("{} -o {mo}", fs.name())
            },
            apm,
            rs.len(),
            sum(&|r| r.images),
            sum(&|r| r.allowed),
            sum(&|r| r.forbidden),
            sum(&|r| r.unmountable),
            sum(&|r| r.fsck_errors),
            rs.iter().filter(|r| !r.findings.is_empty()).count()
        );
    }
    for r in results.iter().filter(|r| !r.findings.is_empty()) {
        let _ = writeln!(
            o,
            "\nfindings: {} on {} under {} ({} findings)",
            r.workload.name,
            r.fs.name(),
            r.apm,
            r.findings.len()
        );
        let _ = writeln!(o, "  workload: {}", r.workload.argv.join(" "));
        let _ = writeln!(o, "  operations:");
        for op in &r.ops {
            let _ = writeln!(o, "    {op}");
        }
        for f in r.findings.iter().take(show) {
            let torn = f
                .torn
                .as_ref()
                .map(|t| format!(", record {} torn", t.record))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  image {} ({:?}: epochs < {} + records {:?}{torn}): {}",
                f.image, f.kind, f.epoch, f.members, f.what
            );
            for l in &f.recovered {
                let _ = writeln!(o, "      recovered: {l}");
            }
            for l in f.detail.iter().take(8) {
                let _ = writeln!(o, "      {}", first_line(l));
            }
        }
    }
    o
}

fn check_tear(t: u64) -> Result<(), Failure> {
    if t == 0 || !t.is_multiple_of(512) || t > 1 << 20 {
        return Err(Failure::input(format!(
            "--tear {t}: a multiple of 512 bytes, at most 1 MiB (512 or 4096 are usual)"
        )));
    }
    Ok(())
}
