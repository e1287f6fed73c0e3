//! `intact check`, `intact run` and `intact check-unit`: their arguments, and the wiring of
//! the pipeline library (intact-pipeline) they call: it explores and checks; this prints the
//! report, writes the outputs and maps the outcome to an exit code.

use crate::Failure;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use intact_pipeline::check::{checker_flag, parse_checker, resolve_apms, Checked, Session};
use intact_pipeline::options::{CheckOptions, Explore};
use intact_pipeline::serve::{self, ServeJob};
use intact_pipeline::units::{self, UnitJob};
use intact_runner::Protocol;
use std::path::{Path, PathBuf};

/// `--explore`: the library's strategies by name, with their help.
fn explore_parser() -> impl TypedValueParser<Value = Explore> {
    PossibleValuesParser::new([
        PossibleValue::new("alice").help(
            "ALICE's strategy (thesis §3.3): prefixes, per-call atomicity, pairwise reordering",
        ),
        PossibleValue::new("exhaustive").help(
            "Every set of micro-operations the APM allows, up to --max-states distinct states",
        ),
        PossibleValue::new("random")
            .help("--samples random allowed sets, reproducible with --seed"),
    ])
    .map(|s| match s.as_str() {
        "exhaustive" => Explore::Exhaustive,
        "random" => Explore::Random,
        _ => Explore::Alice,
    })
}

#[derive(clap::Args, Clone)]
pub struct CheckOpts {
    /// The application's checker, run as CHECKER <crash_dir> <stdout_file> on every distinct
    /// crash state; exit 0 = consistent. May include fixed arguments ("python3 check.py").
    /// Environment: INTACT_WORKER (0..jobs-1), INTACT_STATE (state id).
    #[arg(
        long,
        value_name = "CMD",
        required_unless_present = "checker_server",
        conflicts_with = "checker_server"
    )]
    pub checker: Option<String>,
    /// The application's checker as a warm server: started once per worker, it judges every
    /// state it is sent as one JSON line on stdin and answers one JSON line on stdout
    /// (docs/checkers.md). For checkers with a costly start (Python, a JVM).
    #[arg(long, value_name = "CMD")]
    pub checker_server: Option<String>,
    /// APMs to explore: built-in names (see `intact apm list`) or .toml files; comma-separated
    /// or repeated. The report says which APMs expose each vulnerability.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default",
        value_name = "APM"
    )]
    pub apm: Vec<String>,
    /// Exploration strategy.
    #[arg(long, default_value = "alice", value_parser = explore_parser())]
    pub explore: Explore,
    /// Bound on distinct states per APM for --explore exhaustive, and on alice's
    /// micro-operation reordering states.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub max_states: usize,
    /// Durability vulnerabilities: one per missing sync (`sync`: every call lost before an
    /// output since the last sync, named by the call after which the sync is needed), or
    /// one per call site (`per-call`).
    #[arg(long, default_value = "sync", value_name = "sync|per-call", value_parser = parse_group)]
    pub group: intact_report::Grouping,
    /// Number of sampled states per APM for --explore random.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub samples: u64,
    /// Seed for --explore random.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Checkers run in parallel (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Per-run time limit in seconds; the checker's whole process group is killed and the
    /// state counted as timed out (not as a failure).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Save every failing state (crash directory + stdout file + how to rerun the checker)
    /// under DIR/<state id>/.
    #[arg(long, value_name = "DIR")]
    pub keep_failing: Option<PathBuf>,
    /// Save the example crash state of each static vulnerability as DIR/v<N>/{crash,stdout,README}
    /// (N = the vulnerability's number in the report; DIR must be new or empty).
    #[arg(long, value_name = "DIR")]
    pub keep_examples: Option<PathBuf>,
    /// Also write the report as JSON (schema: docs/report.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Skip stack frames matching REGEX when choosing the representative source line
    /// (for wrapper libraries). Repeatable.
    #[arg(long = "frame-skip", value_name = "REGEX")]
    pub frame_skip: Vec<String>,
    /// Never skip frames matching REGEX (e.g. `/dbm/` or `libsqlite3` to study a library
    /// as the application). Repeatable.
    #[arg(long = "frame-keep", value_name = "REGEX")]
    pub frame_keep: Vec<String>,
    /// Where to build crash states (default: /dev/shm when writable, else the temp dir).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub outputs: crate::report_cmd::Outputs,
    /// --emit-states, --from-verdicts, --dask (docs/distributed.md).
    #[command(flatten)]
    pub dist: Distributed,
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 no vulnerability; 1 vulnerabilities found; 2 usage or input error \
(bad bundle, APM or checker; or the checker rejects the workload's own initial or final state); 3 internal error; \
130 interrupted (no report)."
)]
pub struct CheckArgs {
    /// The bundle written by `intact record`.
    pub bundle: PathBuf,
    #[command(flatten)]
    pub opts: CheckOpts,
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status as for `intact check`; a workload that fails while recorded is an input error (2)."
)]
pub struct RunArgs {
    /// Directory whose crash consistency matters.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Keep the bundle here (default: a temporary directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Leave out paths matching GLOB (as for `intact record`). Repeatable.
    #[arg(long = "ignore", value_name = "GLOB")]
    pub ignore: Vec<String>,
    /// Do not capture native stacks.
    #[arg(long)]
    pub no_stacks: bool,
    /// Keep the program's own buffering of stdout (as for `intact record`).
    #[arg(long)]
    pub keep_buffering: bool,
    #[command(flatten)]
    pub opts: CheckOpts,
    /// The workload, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// `intact check` options for distributed runs (flattened into its options).
#[derive(clap::Args, Clone, Default)]
pub struct Distributed {
    /// Do not run the checker: write each distinct state without a verdict in DIR/verdicts/ as
    /// a work unit DIR/units/<state>.json, listed in DIR/manifest.json ("pending"). Repeat after
    /// adding verdicts (`intact check-unit`) until the manifest says "complete", then
    /// --from-verdicts DIR. See docs/distributed.md.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["from_verdicts", "dask"])]
    pub emit_states: Option<PathBuf>,
    /// Do not run the checker: take every verdict from DIR/verdicts/ (after --emit-states DIR)
    /// and report as a local run would. A state without a verdict is an error (exit 2, no report).
    #[arg(long, value_name = "DIR", conflicts_with = "dask")]
    pub from_verdicts: Option<PathBuf>,
    /// Run the checkers on a Dask cluster: a scheduler address (tcp://HOST:8786), local:N (a
    /// cluster of N worker processes here), slurm:N or pbs:N (dask-jobqueue). Runs
    /// `python3 -m intact.dask_run` (the intact Python package and dask.distributed; its own
    /// options, e.g. --env NAME, from $INTACT_DASK_OPTS; the interpreter from $INTACT_PYTHON).
    #[arg(long, value_name = "SCHEDULER")]
    pub dask: Option<String>,
}

impl Distributed {
    /// `intact run` keeps its bundle in a temporary directory: these flags need a kept one.
    pub fn refuse_in_run(&self) -> Result<(), Failure> {
        if self.emit_states.is_some() || self.from_verdicts.is_some() || self.dask.is_some() {
            return Err(Failure::input("--emit-states, --from-verdicts and --dask work on a recorded bundle: `intact record`, then `intact check`"));
        }
        Ok(())
    }
}

impl CheckOpts {
    /// The library's options.
    /// The checker's command line and how it runs (clap makes exactly one flag present).
    fn checker_command(&self) -> (&str, Protocol) {
        match (&self.checker, &self.checker_server) {
            (_, Some(s)) => (s, Protocol::Server),
            (Some(s), None) => (s, Protocol::PerProcess),
            (None, None) => unreachable!("clap requires --checker or --checker-server"),
        }
    }

    /// The checker's command line, split, checked before any work.
    fn parse_checker(&self) -> Result<Vec<String>, Failure> {
        let (command, protocol) = self.checker_command();
        Ok(parse_checker(checker_flag(protocol), command)?)
    }

    fn options(&self) -> CheckOptions {
        CheckOptions {
            explore: self.explore,
            max_states: self.max_states,
            group: self.group,
            samples: self.samples,
            seed: self.seed,
            jobs: self.jobs,
            protocol: self.checker_command().1,
            timeout_secs: self.timeout,
            keep_failing: self.keep_failing.clone(),
            keep_examples: self.keep_examples.clone(),
            frame_skip: self.frame_skip.clone(),
            frame_keep: self.frame_keep.clone(),
            scratch: self.scratch.clone(),
            emit_states: self.dist.emit_states.clone(),
            from_verdicts: self.dist.from_verdicts.clone(),
        }
    }
}

pub fn run(a: RunArgs) -> Result<u8, Failure> {
    let tmp;
    let out = match &a.out {
        Some(p) => p.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("intact-run-")
                .tempdir()
                .map_err(|e| Failure::internal(format!("creating a temporary directory: {e}")))?;
            tmp.path().join("bundle")
        }
    };
    // Validate the check options before spending time on the workload.
    a.opts.dist.refuse_in_run()?;
    let apms = resolve_apms(&a.opts.apm)?;
    let checker = a.opts.parse_checker()?;
    let rec = crate::record_cmd::RecordArgs {
        dir: a.dir.clone(),
        out: out.clone(),
        ignore: a.ignore.clone(),
        frame_skip: a.opts.frame_skip.clone(),
        frame_keep: a.opts.frame_keep.clone(),
        no_stacks: a.no_stacks,
        max_write: 64 << 20,
        force: false,
        strace: PathBuf::from("strace"),
        keep_buffering: a.keep_buffering,
        temporary: a.out.is_none(),
        cmd: a.cmd.clone(),
    };
    match crate::record_cmd::record(rec)? {
        0 => {}
        _ => {
            return Err(Failure::input(format!(
                "the workload failed while recorded, so its crash states mean little; fix it and rerun{}",
                if a.out.is_some() { format!(" (bundle kept at {})", out.display()) } else { String::new() }
            )))
        }
    }
    check_bundle(&out, &a.opts, apms, checker)
}

pub fn check(a: CheckArgs) -> Result<u8, Failure> {
    // Before anything runs, here or on a cluster.
    let checker = a.opts.parse_checker()?;
    if let Some(s) = &a.opts.dist.dask {
        units::exec_dask(s)?;
        return Ok(0);
    }
    let apms = resolve_apms(&a.opts.apm)?;
    check_bundle(&a.bundle, &a.opts, apms, checker)
}

/// Checks a bundle, prints the report, writes the outputs; 1 when vulnerable.
fn check_bundle(
    bundle_path: &Path,
    o: &CheckOpts,
    apms: Vec<intact_apm::Apm>,
    checker: Vec<String>,
) -> Result<u8, Failure> {
    let session = Session::open(bundle_path, &o.options())?;
    // --emit-states writes no report: its outputs are left alone.
    let emitting = o.dist.emit_states.is_some();
    if !emitting {
        o.outputs.check_writable()?;
    }
    let mut progress = crate::progress::Progress::new(o.quiet);
    let (report, errors) = match session.check(apms, checker, &mut progress)? {
        Checked::Emitted(message) => {
            eprintln!("intact: {message}");
            return Ok(0);
        }
        Checked::Report { report, errors } => (report, errors),
    };
    print!(
        "{}",
        intact_report::render_text(&report, o.keep_failing.as_ref().and_then(|p| p.to_str()))
    );
    if let Some(j) = &o.json {
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| Failure::internal(e.to_string()))?;
        let tmp = j.with_extension("json.partial");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, j))
            .map_err(|e| Failure::input(format!("--json {}: {e}", j.display())))?;
    }
    if !o.outputs.is_empty() {
        let v = serde_json::to_value(&report).map_err(|e| Failure::internal(e.to_string()))?;
        o.outputs.write(&v)?;
    }
    if let Some(first) = errors.first() {
        return Err(Failure::internal(format!(
            "{} state(s) could not be checked; first: {first}",
            errors.len()
        )));
    }
    Ok(if report.statics.is_empty() { 0 } else { 1 })
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 verdict written (whatever the checker said); 2 bad unit, bundle or checker \
(nothing written); 3 internal error; 130 interrupted (nothing written). With --serve: 0 at the end of \
stdin, each unit's status in its reply."
)]
pub struct CheckUnitArgs {
    /// The bundle the unit was emitted from (a copy: bundle.json, ops.jsonl, data.bin,
    /// initial/, final/ suffice); its content hash must match the unit's.
    #[arg(long, value_name = "DIR")]
    pub bundle: PathBuf,
    /// The work unit: DIR/units/<state>.json from `intact check --emit-states DIR`.
    #[arg(long, value_name = "FILE", required_unless_present = "serve")]
    pub unit: Option<PathBuf>,
    /// Where to write the verdict (JSON, written whole or not at all; put it in
    /// DIR/verdicts/ for --from-verdicts).
    #[arg(long, value_name = "FILE", required_unless_present = "serve")]
    pub out: Option<PathBuf>,
    /// Check many units through this one process: read one request per line on stdin,
    /// {"unit": FILE, "out": FILE}, answer one line on stdout, {"ok": true} or {"ok":
    /// false, "code": 2|3, "error": MESSAGE}, until EOF. The bundle is hashed once and
    /// the checker runner (with --checker-server units, the warm server) kept between units.
    #[arg(long, conflicts_with_all = ["unit", "out"])]
    pub serve: bool,
    /// INTACT_WORKER for the checker: make it distinct among checkers running at the same
    /// time on this host.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub worker: usize,
    /// Where to build the crash state (default: /dev/shm when writable, else the temp dir).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Stop (as on Ctrl-C: the checker killed, nothing written, exit 130) when the process
    /// that started this one dies, e.g. a Dask worker killed while it waits for us.
    #[arg(long)]
    pub exit_with_parent: bool,
}

pub fn check_unit(a: CheckUnitArgs) -> Result<u8, Failure> {
    let (unit, out) = match (a.serve, a.unit, a.out) {
        (true, _, _) => {
            serve::serve_units(
                ServeJob {
                    bundle: a.bundle,
                    worker: a.worker,
                    scratch: a.scratch,
                    exit_with_parent: a.exit_with_parent,
                },
                &mut std::io::stdin().lock(),
                &mut std::io::stdout().lock(),
            )?;
            return Ok(0);
        }
        (false, Some(unit), Some(out)) => (unit, out),
        _ => unreachable!("clap requires --unit and --out without --serve"),
    };
    units::check_unit(UnitJob {
        bundle: a.bundle,
        unit,
        out,
        worker: a.worker,
        scratch: a.scratch,
        exit_with_parent: a.exit_with_parent,
    })?;
    Ok(0)
}

fn parse_group(s: &str) -> Result<intact_report::Grouping, String> {
    intact_report::Grouping::parse(s).ok_or_else(|| format!("`{s}`: expected sync or per-call"))
}
