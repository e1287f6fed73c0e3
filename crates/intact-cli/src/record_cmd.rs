//! `intact record` and `intact reconvert`: their arguments, progress and messages; the
//! pipeline library (intact-pipeline) does the work.

use crate::progress::TraceWatch;
use crate::Failure;
use intact_model::TaskExit;
use intact_pipeline::record::{Observer, RecordOptions};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 recorded; 1 recorded, but the workload exited non-zero or was killed \
(the bundle says how); 2 bad input, nothing written; 3 internal error (e.g. the replay oracle failed; \
the bundle is kept for diagnosis and marked)."
)]
pub struct RecordArgs {
    /// Directory whose crash consistency matters (snapshotted before the run; calls on
    /// paths outside it are ignored).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Where to write the bundle (a directory; must not exist unless --force).
    #[arg(long, default_value = "intact.bundle")]
    pub out: PathBuf,
    /// Leave out paths matching GLOB (relative to --dir; a pattern without '/' matches a
    /// name at any depth). Repeatable.
    #[arg(long = "ignore", value_name = "GLOB")]
    pub ignore: Vec<String>,
    /// Skip stack frames matching REGEX when choosing an operation's source location
    /// (in addition to the defaults for libc, the loader, and language runtimes). Repeatable.
    #[arg(long = "frame-skip", value_name = "REGEX")]
    pub frame_skip: Vec<String>,
    /// Never skip frames matching REGEX, whatever the skip patterns say (e.g. `/dbm/` to
    /// attribute calls to a standard-library module under study). Repeatable.
    #[arg(long = "frame-keep", value_name = "REGEX")]
    pub frame_keep: Vec<String>,
    /// Do not capture native stacks (much faster; Python locations still come from the shim).
    #[arg(long)]
    pub no_stacks: bool,
    /// Largest single write captured exactly, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_write: usize,
    /// Replace an existing bundle at --out.
    #[arg(long)]
    pub force: bool,
    /// The strace binary to use.
    #[arg(long, default_value = "strace")]
    pub strace: PathBuf,
    /// Give the workload intact's own stdout, with the buffering the program chooses for it
    /// (a pipe or file: usually full buffering, so printed lines are written at a later
    /// flush or at exit). Default: a pseudo-terminal, on which programs buffer by line, so an
    /// output operation stands where the program printed it; the bundle says which.
    #[arg(long)]
    pub keep_buffering: bool,
    /// Set by `intact run` when --out is a temporary directory it removes: then the
    /// bundle's path is not worth printing.
    #[arg(skip)]
    pub temporary: bool,
    /// The workload: a command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

impl RecordArgs {
    fn options(&self) -> RecordOptions {
        RecordOptions {
            dir: self.dir.clone(),
            out: self.out.clone(),
            ignore: self.ignore.clone(),
            frame_skip: self.frame_skip.clone(),
            frame_keep: self.frame_keep.clone(),
            stacks: !self.no_stacks,
            max_write_bytes: self.max_write,
            force: self.force,
            strace: self.strace.clone(),
            stdout_terminal: !self.keep_buffering,
            cmd: self.cmd.clone(),
        }
    }
}

/// Messages on stderr; the count of traced calls while the workload runs.
#[derive(Default)]
struct Console {
    watch: Option<TraceWatch>,
}

impl Observer for Console {
    fn note(&mut self, line: &str) {
        eprintln!("intact: {line}");
    }
    fn trace_started(&mut self, raw: &Path) {
        crate::install_interrupt_handler();
        self.watch = Some(TraceWatch::start(raw.to_path_buf()));
    }
    fn trace_ended(&mut self) {
        self.watch = None;
    }
}

pub fn record(a: RecordArgs) -> Result<u8, Failure> {
    let recorded = intact_pipeline::record::record(&a.options(), &mut Console::default())?;
    if !a.temporary {
        eprintln!("intact: bundle written to {}", recorded.out.display());
    }
    if let Some(d) = recorded.oracle_mismatch {
        return Err(Failure::internal(format!(
            "replay oracle FAILED: applying the logical operations to the snapshot does not reproduce the final directory: {d}. \
             The bundle is kept (marked) for diagnosis; please report this with the bundle."
        )));
    }
    match &recorded.workload {
        Some(TaskExit::Exited { code: 0 }) => Ok(0),
        Some(TaskExit::Exited { code }) => {
            eprintln!("intact: the workload exited with status {code} (recorded anyway; the bundle says so)");
            Ok(1)
        }
        Some(TaskExit::Killed { signal }) => {
            eprintln!("intact: the workload was killed by {signal} (recorded up to that point; the bundle says so)");
            Ok(1)
        }
        None => {
            eprintln!("intact: the trace does not say how the workload ended");
            Ok(1)
        }
    }
}

/// `intact reconvert`: prints the conversion rate; the oracle's failure is an error.
pub fn reconvert(path: &Path) -> Result<u8, Failure> {
    let (rate, mismatch) = intact_pipeline::record::reconvert(path)?;
    println!("{rate}");
    match mismatch {
        None => Ok(0),
        Some(d) => Err(Failure::internal(format!(
            "replay oracle FAILED after reconversion: {d}"
        ))),
    }
}
