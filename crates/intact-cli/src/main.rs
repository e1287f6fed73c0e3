//! `intact`: application crash-consistency tools.
//!
//! Exit codes (linter convention): 0 success / no vulnerability, 1 vulnerabilities found
//! (check, run) or the workload failed (record: bundle written and marked), 2 usage or
//! input error (nothing written), 3 internal error, 130 interrupted.

mod apm_cmd;
mod blk_cmd;
mod check_cmd;
mod doctor;
mod fs_cmd;
mod fs_mount;
mod ops_view;
mod progress;
mod record_cmd;
mod report_cmd;
mod size;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Once;

static HANDLER: Once = Once::new();

/// Ctrl-C goes to the whole foreground group: workloads and checkers stop by themselves or
/// are killed by their runner; intact must survive to clean up, so it only sets the
/// pipeline's stop flag.
pub fn install_interrupt_handler() {
    HANDLER.call_once(|| {
        let _ = ctrlc::set_handler(intact_pipeline::interrupt);
    });
}

pub fn interrupted() -> bool {
    intact_pipeline::interrupted()
}

#[derive(Parser)]
#[command(name = "intact", version, about = "Find and fix application crash vulnerabilities", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload under the tracer and write a bundle: snapshot, trace, logical operations.
    Record(record_cmd::RecordArgs),
    /// Print the update protocol (the logical operations) of a bundle.
    Ops(OpsArgs),
    /// Re-run the replay oracle on a bundle: all operations applied to the initial
    /// snapshot must reproduce the final directory.
    Verify {
        /// The bundle directory written by `intact record`.
        bundle: PathBuf,
    },
    /// Derive the logical operations again from a bundle's raw trace (e.g. after upgrading
    /// intact), rerun the replay oracle, and print the conversion rate.
    Reconvert {
        /// The bundle directory written by `intact record`.
        bundle: PathBuf,
    },
    /// Explore the crash states of a bundle under one or more APMs, run the checker on each
    /// distinct state, and report the vulnerabilities by source line.
    Check(check_cmd::CheckArgs),
    /// Record a workload and check it in one step.
    Run(check_cmd::RunArgs),
    /// Check one work unit written by `intact check --emit-states` (on a worker; see
    /// docs/distributed.md): rebuild its crash state, run the checker, write the verdict.
    CheckUnit(check_cmd::CheckUnitArgs),
    /// Render a saved JSON report (`intact check --json`) as HTML, SARIF or JUnit XML.
    Report(report_cmd::ReportArgs),
    /// Abstract persistence models: list the built-ins, show one.
    Apm {
        #[command(subcommand)]
        cmd: apm_cmd::ApmCmd,
    },
    /// intactfs, the crash-consistent file system: make, check and inspect images.
    Fs {
        #[command(subcommand)]
        cmd: fs_cmd::FsCmd,
    },
    /// The block-level validator: record what a real file system writes and flushes, build
    /// the crash images a device may leave, check file systems and applications on them.
    Blk {
        #[command(subcommand)]
        cmd: blk_cmd::BlkCmd,
    },
    /// Check that this machine has what intact needs (strace with stack traces, FUSE,
    /// loop devices, mkfs tools, Python, Dask), and say what to install.
    Doctor(doctor::DoctorArgs),
    /// Print a shell completion script for intact (bash, zsh, fish, elvish, powershell).
    /// bash: `intact completions bash > ~/.local/share/bash-completion/completions/intact`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
pub struct OpsArgs {
    /// The bundle directory written by `intact record`.
    pub bundle: PathBuf,
    /// One JSON object per line, with the full data of each operation (hex) instead of a preview.
    #[arg(long)]
    pub json: bool,
    /// Re-select each operation's source location, skipping frames that match REGEX
    /// (in addition to the defaults; matched against "binary|function|file").
    #[arg(long = "frame-skip", value_name = "REGEX")]
    pub frame_skip: Vec<String>,
    /// Never skip frames matching REGEX (e.g. to study a library as the application).
    #[arg(long = "frame-keep", value_name = "REGEX")]
    pub frame_keep: Vec<String>,
    /// Print the whole stack of every operation.
    #[arg(long)]
    pub stacks: bool,
}

/// An error with the exit code it maps to.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> Failure {
        Failure {
            code: 3,
            message: message.into(),
        }
    }
}

/// The exit code table (module comment) applied to the pipeline's errors.
impl From<intact_pipeline::Error> for Failure {
    fn from(e: intact_pipeline::Error) -> Failure {
        let code = match e.kind {
            intact_pipeline::Kind::Input => 2,
            intact_pipeline::Kind::Internal => 3,
            intact_pipeline::Kind::Interrupted => 130,
        };
        Failure {
            code,
            message: e.message,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => exit_usage(e),
    };
    let r = match cli.command {
        Cmd::Record(a) => record_cmd::record(a),
        Cmd::Ops(a) => ops_view::ops(a),
        Cmd::Verify { bundle } => verify(bundle),
        Cmd::Reconvert { bundle } => record_cmd::reconvert(&bundle),
        Cmd::Check(a) => {
            install_interrupt_handler();
            check_cmd::check(a)
        }
        Cmd::Run(a) => check_cmd::run(a),
        Cmd::CheckUnit(a) => {
            install_interrupt_handler();
            check_cmd::check_unit(a)
        }
        Cmd::Report(a) => report_cmd::report(a),
        Cmd::Apm { cmd } => apm_cmd::apm(cmd),
        Cmd::Fs { cmd } => fs_cmd::fs(cmd),
        Cmd::Blk { cmd } => blk_cmd::blk(cmd),
        Cmd::Doctor(a) => doctor::doctor(a),
        Cmd::Completions { shell } => completions(shell),
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("intact: error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// Commands that run a workload take it after `--`; without it clap rejects the
/// workload's first word as an unknown argument. Say how to write it instead.
const WORKLOAD_COMMANDS: [&[&str]; 3] = [&["record"], &["run"], &["blk", "record"]];

fn exit_usage(e: clap::Error) -> ! {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let argv: Vec<String> = std::env::args().collect();
    let workload = WORKLOAD_COMMANDS
        .iter()
        .any(|c| argv.len() > c.len() && c.iter().zip(&argv[1..]).all(|(w, a)| w == a));
    let bad = match e.get(ContextKind::InvalidArg) {
        // An unknown `--option` is more likely a typo of intact's own than a workload.
        Some(ContextValue::String(s))
            if e.kind() == ErrorKind::UnknownArgument && !s.starts_with('-') =>
        {
            Some(s.clone())
        }
        _ => None,
    };
    let at = bad.and_then(|b| argv.iter().skip(2).position(|a| *a == b).map(|i| i + 2));
    match at {
        Some(at) if workload => {
            let mut fixed = argv.clone();
            fixed[0] = "intact".into();
            fixed.insert(at, "--".into());
            let _ = e.print();
            eprintln!(
                "\nhint: the workload goes after `--`, so that its arguments are not read as intact's:\n  {}",
                fixed.join(" ")
            );
            std::process::exit(2);
        }
        _ => e.exit(),
    }
}

/// Generated into memory first: clap_complete panics on a failed write (e.g. `| head`).
fn completions(shell: clap_complete::Shell) -> Result<u8, Failure> {
    use clap::CommandFactory;
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "intact", &mut script);
    match std::io::stdout().write_all(&script) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::input(format!(
            "writing the completion script: {e}"
        ))),
    }
}

fn verify(bundle: PathBuf) -> Result<u8, Failure> {
    let b = intact_bundle::Bundle::open(&bundle).map_err(|e| Failure::input(e.to_string()))?;
    match b.verify().map_err(|e| Failure::input(e.to_string()))? {
        None => {
            println!("replay oracle: all {} operations applied to the initial snapshot reproduce the final directory", b.meta.counts.ops);
            Ok(0)
        }
        Some(d) => Err(Failure::internal(format!("replay oracle FAILED: {d}"))),
    }
}
