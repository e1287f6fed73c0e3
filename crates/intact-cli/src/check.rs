//! `intact check`: explore a bundle's crash states under one or more APMs, run the
//! checker on each distinct state, report vulnerabilities. `intact run`: record, then check.

use crate::{interrupted, ops_view, Failure};
use intact_apm::{Apm, Program};
use intact_bundle::Bundle;
use intact_check::{Job, Runner, RunnerConfig, Verdict as RVerdict};
use intact_explore::{CrashFs, CrashFsError, Explorer, Provenance, StateHash};
use intact_model::op::Op;
use intact_report::{ApmRun, ApmStats, Example, Probe, Report, Verdict};
use intact_symbol::FrameFilter;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a state whose checker could not run at all (as opposed to timing out) is described.
const NOT_CHECKED: &str = "not checked:";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Explore {
    /// ALICE's strategy (thesis §3.3): prefixes, per-call atomicity, pairwise reordering.
    Alice,
    /// Every set of micro-operations the APM allows, up to --max-states distinct states.
    Exhaustive,
    /// --samples random allowed sets, reproducible with --seed.
    Random,
}

impl Explore {
    fn name(&self) -> &'static str {
        match self {
            Explore::Alice => "alice",
            Explore::Exhaustive => "exhaustive",
            Explore::Random => "random",
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct CheckOpts {
    /// The application's checker, run as CHECKER <crash_dir> <stdout_file> on every distinct
    /// crash state; exit 0 = consistent. May include fixed arguments ("python3 check.py").
    /// Environment: INTACT_WORKER (0..jobs-1), INTACT_STATE (state id).
    #[arg(long, value_name = "CMD")]
    pub checker: String,
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
    #[arg(long, value_enum, default_value = "alice")]
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
    pub dist: crate::units::Distributed,
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
    #[command(flatten)]
    pub opts: CheckOpts,
    /// The workload, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
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
    let checker = parse_checker(&a.opts.checker)?;
    let rec = crate::record::RecordArgs {
        dir: a.dir.clone(),
        out: out.clone(),
        ignore: a.ignore.clone(),
        frame_skip: a.opts.frame_skip.clone(),
        frame_keep: a.opts.frame_keep.clone(),
        no_stacks: a.no_stacks,
        max_write: 64 << 20,
        force: false,
        strace: PathBuf::from("strace"),
        temporary: a.out.is_none(),
        cmd: a.cmd.clone(),
    };
    match crate::record::record(rec)? {
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
    if let Some(s) = &a.opts.dist.dask {
        return crate::units::exec_dask(s);
    }
    let apms = resolve_apms(&a.opts.apm)?;
    let checker = parse_checker(&a.opts.checker)?;
    check_bundle(&a.bundle, &a.opts, apms, checker)
}

fn resolve_apms(names: &[String]) -> Result<Vec<Apm>, Failure> {
    let mut out: Vec<Apm> = Vec::new();
    for n in names {
        let a = Apm::resolve(n.trim()).map_err(|e| Failure::input(format!("--apm: {e}")))?;
        if out.iter().any(|b| b.name == a.name) {
            return Err(Failure::input(format!("--apm: {} is given twice", a.name)));
        }
        out.push(a);
    }
    if out.is_empty() {
        return Err(Failure::input("--apm: name at least one APM"));
    }
    Ok(out)
}

fn parse_checker(s: &str) -> Result<Vec<String>, Failure> {
    let v = shlex::split(s)
        .ok_or_else(|| Failure::input(format!("--checker {s:?}: unbalanced quotes")))?;
    if v.is_empty() {
        return Err(Failure::input("--checker: empty command"));
    }
    // Refused before any work: a CRLF script fails on every state alike.
    if let Some(why) = intact_check::crlf_shebang(Path::new(&v[0])) {
        return Err(Failure::input(format!(
            "--checker {}: the checker could not be run: {why}",
            v[0]
        )));
    }
    Ok(v)
}

/// Location of an op for grouping: the representative frame, or the call and path.
fn locator(filter: Option<FrameFilter>) -> impl Fn(&Op) -> String {
    move |op: &Op| match ops_view::location(filter.as_ref(), op) {
        Some(f) => f.display(),
        None => format!(
            "{}({}) [no stack]",
            op.syscall,
            op.path.as_deref().unwrap_or("")
        ),
    }
}

/// A distinct state: its id (INTACT_STATE), how it was first built, its verdict once known.
struct Seen {
    id: String,
    desc: String,
    verdict: Option<Verdict>,
}

struct Pending {
    hash: StateHash,
    apm: usize,
    /// Kept only with --keep-failing or --keep-examples, to save the state if it fails.
    state: Option<CrashFs>,
}

struct Driver<'a> {
    /// Taken by `finish` once exploration is over.
    runner: Option<Runner>,
    /// Instead of the runner: verdicts from files, units for the others (--emit-states, --from-verdicts).
    units: Option<crate::units::Store>,
    seen: HashMap<StateHash, Seen>,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    hash_cache: HashMap<u64, [u8; 32]>,
    keep: Option<PathBuf>,
    /// With --keep-examples: every failing state, by id, until the report picks examples.
    failing: Option<HashMap<String, CrashFs>>,
    checker: &'a [String],
    stats: Vec<ApmStats>,
    errors: Vec<String>,
    timeouts: Vec<Example>,
    progress: crate::progress::Progress,
}

impl Driver<'_> {
    /// Hash, deduplicate, submit. Returns false when the run was interrupted.
    fn submit(
        &mut self,
        apm: usize,
        probes: &mut Vec<Probe>,
        prov: Provenance,
        fs: CrashFs,
        desc: String,
    ) -> Result<bool, CrashFsError> {
        if interrupted() {
            return Ok(false);
        }
        let hash = fs.hash(&mut self.hash_cache);
        if self.hash_cache.len() > 200_000 {
            self.hash_cache.clear();
        }
        self.stats[apm].constructed += 1;
        if !self.seen.contains_key(&hash) {
            let id = self.next_id;
            self.next_id += 1;
            let sid = format!("s{id}");
            self.seen.insert(
                hash,
                Seen {
                    id: sid.clone(),
                    desc: desc.clone(),
                    verdict: None,
                },
            );
            self.stats[apm].checked += 1;
            let keep_copy = (self.keep.is_some() || self.failing.is_some()).then(|| fs.clone());
            self.pending.insert(
                id,
                Pending {
                    hash,
                    apm,
                    state: keep_copy,
                },
            );
            if let Some(u) = &mut self.units {
                u.submit(id, &sid, hash, &prov, &fs)?;
            } else {
                let stdout = fs.stdout.to_vec();
                let job = Job {
                    id,
                    state_id: sid,
                    stdout,
                    materialise: Box::new(move |d: &Path| {
                        fs.materialise(d).map_err(|e| e.to_string())
                    }),
                    release: None,
                };
                if self.runner().submit(job).is_err() {
                    return Ok(false);
                }
            }
        }
        probes.push(Probe { prov, hash, desc });
        self.collect();
        Ok(true)
    }

    fn runner(&self) -> &Runner {
        self.runner
            .as_ref()
            .expect("the runner lives until the report")
    }

    fn collect(&mut self) {
        let done = match &mut self.units {
            Some(u) => u.drain(),
            None => self.runner().drain(),
        };
        for o in done {
            self.record(o);
        }
        let failed: usize = self.stats.iter().map(|s| s.failed).sum();
        let built: usize = self.stats.iter().map(|s| s.constructed).sum();
        let (distinct, pending) = (self.seen.len(), self.pending.len());
        self.progress
            .update(built, distinct, distinct - pending.min(distinct), failed);
    }

    fn record(&mut self, o: intact_check::Outcome) {
        let Some(p) = self.pending.remove(&o.id) else {
            return;
        };
        let verdict = match o.verdict {
            RVerdict::Pass => Verdict {
                pass: true,
                timeout: false,
                message: String::new(),
            },
            RVerdict::Fail {
                code,
                signal,
                stderr,
                stdout,
            } => {
                let mut message = if stderr.trim().is_empty() {
                    stdout.trim().to_string()
                } else {
                    stderr.trim().to_string()
                };
                if message.is_empty() {
                    message = match (code, signal) {
                        (Some(c), _) => format!("(exit status {c}, no output)"),
                        (_, Some(s)) => format!("(killed by signal {s}, no output)"),
                        _ => "(failed, no output)".into(),
                    };
                }
                Verdict {
                    pass: false,
                    timeout: false,
                    message,
                }
            }
            RVerdict::Timeout { after } => Verdict {
                pass: false,
                timeout: true,
                message: format!("timed out after {:.1} s", after.as_secs_f64()),
            },
            RVerdict::Error(e) => {
                self.errors.push(e.clone());
                Verdict {
                    pass: false,
                    timeout: true,
                    message: format!("{NOT_CHECKED} {e}"),
                }
            }
        };
        let Some(seen) = self.seen.get_mut(&p.hash) else {
            return;
        };
        if verdict.timeout {
            self.stats[p.apm].timeouts += 1;
            self.timeouts.push(Example {
                state: seen.id.clone(),
                description: seen.desc.clone(),
                checker_message: verdict.message.clone(),
            });
        } else if !verdict.pass {
            self.stats[p.apm].failed += 1;
            if let (Some(dir), Some(state)) = (&self.keep, &p.state) {
                if let Err(e) = save_failing(
                    dir,
                    &seen.id,
                    state,
                    self.checker,
                    &verdict.message,
                    &seen.desc,
                ) {
                    self.errors
                        .push(format!("--keep-failing: saving {}: {e}", seen.id));
                }
            }
            if let (Some(f), Some(state)) = (&mut self.failing, p.state) {
                f.insert(seen.id.clone(), state);
            }
        }
        seen.verdict = Some(verdict);
    }

    /// Waits until every submitted state has a verdict.
    fn settle(&mut self) -> bool {
        if self.units.is_some() {
            // Verdicts from files are there at once; the missing ones stay missing.
            self.collect();
            return !interrupted();
        }
        while !self.pending.is_empty() {
            if interrupted() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
            self.collect();
        }
        true
    }

    fn verdict(&self, h: &StateHash) -> Option<Verdict> {
        self.seen.get(h).and_then(|s| s.verdict.clone())
    }
}

fn save_failing(
    dir: &Path,
    id: &str,
    state: &CrashFs,
    checker: &[String],
    message: &str,
    desc: &str,
) -> Result<(), String> {
    save_state(&dir.join(id), id, state, checker, message, desc, "")
}

/// `d/{crash,stdout,README}`: the state, what the workload had printed, and how to rerun
/// the checker on a copy.
fn save_state(
    d: &Path,
    id: &str,
    state: &CrashFs,
    checker: &[String],
    message: &str,
    desc: &str,
    title: &str,
) -> Result<(), String> {
    let crash = d.join("crash");
    std::fs::create_dir_all(&crash).map_err(|e| format!("{}: {e}", crash.display()))?;
    state.materialise(&crash).map_err(|e| e.to_string())?;
    std::fs::write(d.join("stdout"), &state.stdout[..]).map_err(|e| e.to_string())?;
    let quoted: Vec<String> = checker
        .iter()
        .map(|a| {
            shlex::try_quote(a)
                .map(|c| c.into_owned())
                .unwrap_or_else(|_| a.clone())
        })
        .collect();
    let info = format!(
        "{title}state {id}: {desc}\nchecker said: {message}\n\nreproduce (the checker may modify the copy):\n  cp -a {crash} /tmp/{id} && INTACT_WORKER=0 INTACT_STATE={id} {} /tmp/{id} {}\n",
        quoted.join(" "),
        d.join("stdout").display(),
        crash = crash.display()
    );
    std::fs::write(d.join("README"), info).map_err(|e| e.to_string())?;
    Ok(())
}

pub fn check_bundle(
    bundle_path: &Path,
    o: &CheckOpts,
    apms: Vec<Apm>,
    checker: Vec<String>,
) -> Result<u8, Failure> {
    let started = Instant::now();
    // --emit-states writes no report: leave its outputs alone.
    let emit_opts = crate::units::emit_view(o);
    let o = emit_opts.as_ref().unwrap_or(o);
    let b = Bundle::open(bundle_path).map_err(|e| Failure::input(e.to_string()))?;
    let ops = b.ops().map_err(|e| Failure::input(e.to_string()))?;
    let blob = b.data().map_err(|e| Failure::input(e.to_string()))?;
    let initial = b.initial().map_err(|e| Failure::input(e.to_string()))?;
    let final_state = b.final_state().map_err(|e| Failure::input(e.to_string()))?;
    if !o.timeout.is_finite() || o.timeout <= 0.0 {
        return Err(Failure::input(
            "--timeout must be a positive number of seconds",
        ));
    }
    if o.jobs == Some(0) {
        return Err(Failure::input("--jobs must be at least 1"));
    }
    let filter = ops_view::refilter(&b, &o.frame_skip, &o.frame_keep)?;
    o.outputs.check_writable()?;
    for (flag, k) in [
        ("--keep-failing", &o.keep_failing),
        ("--keep-examples", &o.keep_examples),
    ] {
        let Some(k) = k else { continue };
        if k.exists()
            && std::fs::read_dir(k)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(Failure::input(format!(
                "{flag} {}: exists and is not empty (choose a new directory)",
                k.display()
            )));
        }
        std::fs::create_dir_all(k)
            .map_err(|e| Failure::input(format!("{flag} {}: {e}", k.display())))?;
    }
    let universe = CrashFs::universe(&initial, &ops)
        .map_err(|e| Failure::input(format!("bundle {}: {e}", bundle_path.display())))?;
    let mut programs = Vec::new();
    for a in &apms {
        let p = Program::build(a, &ops, &initial, blob.len() as u64).map_err(|e| {
            Failure::input(format!(
                "bundle {} under APM {}: {e}",
                bundle_path.display(),
                a.name
            ))
        })?;
        programs.push(p);
    }
    let jobs = o.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let units = crate::units::Store::open(o, bundle_path, &apms, &checker)?;
    let runner = if units.is_some() {
        None
    } else {
        Some(
            Runner::start(RunnerConfig {
                checker: checker.clone(),
                jobs,
                timeout: Some(Duration::from_secs_f64(o.timeout)),
                scratch_parent: o.scratch.clone(),
                keep_output_bytes: 4096,
            })
            .map_err(|e| Failure::input(format!("--checker: {e}")))?,
        )
    };
    let progress = crate::progress::Progress::new(o.quiet);
    let mut d = Driver {
        runner,
        units,
        seen: HashMap::new(),
        pending: HashMap::new(),
        next_id: 0,
        hash_cache: HashMap::new(),
        keep: o.keep_failing.clone(),
        failing: o.keep_examples.as_ref().map(|_| HashMap::new()),
        checker: &checker,
        stats: apms
            .iter()
            .zip(&programs)
            .map(|(a, p)| ApmStats {
                apm: a.name.clone(),
                models: a.description.clone(),
                explore: o.explore.name().into(),
                micro_ops: p.micros.len(),
                units: p.units.len(),
                calls: p.calls.len(),
                complete: true,
                ..Default::default()
            })
            .collect(),
        errors: Vec::new(),
        timeouts: Vec::new(),
        progress,
    };
    let internal = |e: CrashFsError| Failure::internal(format!("building crash states: {e}"));
    let mut all_probes: Vec<Vec<Probe>> = Vec::new();
    for (ai, prog) in programs.iter().enumerate() {
        let t0 = Instant::now();
        d.progress.set_prefix(format!("APM {}", prog.apm));
        let exp = Explorer::new(prog, &ops, &blob, universe.clone()).map_err(internal)?;
        if let Some(u) = &mut d.units {
            u.begin_apm(ai, &exp);
        }
        // The replay oracle, on micro-operations: all of them give the final directory.
        if let Some(diff) = exp.full().to_state().diff(&final_state) {
            return Err(Failure::internal(format!("APM {}: applying every micro-operation does not reproduce the recorded final directory: {diff}", prog.apm)));
        }
        let mut probes: Vec<Probe> = Vec::new();
        let n = prog.calls.len();
        let mut go = true;
        // Sanity first: the state before the workload and the one it left must pass.
        {
            let mut emit =
                |p: Provenance, s: CrashFs, desc: String| d.submit(ai, &mut probes, p, s, desc);
            emit(
                Provenance::Prefix { calls: 0 },
                exp.prefix_state(0),
                "before the workload ran".into(),
            )
            .map_err(internal)?;
            emit(
                Provenance::Prefix { calls: n },
                exp.full().clone(),
                "after the workload finished (no crash)".into(),
            )
            .map_err(internal)?;
        }
        if !d.settle() {
            go = false;
        }
        if go && ai == 0 {
            for (k, what) in [(0usize, "initial"), (n, "final")] {
                let p = probes
                    .iter()
                    .find(|p| p.prov == Provenance::Prefix { calls: k })
                    .expect("sanity probe");
                if let Some(v) = d.verdict(&p.hash) {
                    if let Some(why) = v.message.strip_prefix(NOT_CHECKED) {
                        drop(d);
                        return Err(Failure::input(format!(
                            "the checker could not be run on the workload's {what} state:{why}"
                        )));
                    }
                    if v.timeout {
                        drop(d);
                        return Err(Failure::input(format!(
                            "the checker did not finish on the workload's {what} state, where no crash happened ({}): raise --timeout or fix the checker",
                            v.message
                        )));
                    }
                    if !v.pass {
                        drop(d);
                        return Err(Failure::input(format!(
                            "the checker rejects the workload's {what} state, where no crash happened: fix the checker (or the workload) first.\n  checker said: {}",
                            v.message
                        )));
                    }
                }
            }
        }
        if go {
            let r = match o.explore {
                Explore::Alice => {
                    let mut emit = |p: Provenance, s: CrashFs, desc: String| {
                        d.submit(ai, &mut probes, p, s, desc)
                    };
                    exp.prefixes(&mut emit).map_err(internal)?;
                    // Work units: the prefix verdicts come in a later round.
                    if !d.settle() || d.units.as_ref().is_some_and(|u| u.blocked()) {
                        go = false;
                    }
                    // Calls in atomic groups take no part in the later phases.
                    let mut excluded = vec![false; n];
                    let prefix = intact_report::prefix_verdicts(&probes, &|h| d.verdict(h));
                    for (a, z, _) in intact_report::atomic_groups(&prefix) {
                        for e in excluded.iter_mut().take(z + 1).skip(a) {
                            *e = true;
                        }
                    }
                    let mut complete = true;
                    if go {
                        let mut emit = |p: Provenance, s: CrashFs, desc: String| {
                            d.submit(ai, &mut probes, p, s, desc)
                        };
                        exp.atomicity(&excluded, &mut emit).map_err(internal)?;
                        exp.reorderings(&excluded, &mut emit).map_err(internal)?;
                        complete = exp
                            .micro_reorderings(&excluded, o.max_states, &mut emit)
                            .map_err(internal)?;
                    }
                    complete
                }
                Explore::Exhaustive => {
                    let max = o.max_states;
                    let start_distinct = d.seen.len();
                    let mut emit =
                        |p: Provenance, s: CrashFs, desc: String| -> Result<bool, CrashFsError> {
                            if d.seen.len() - start_distinct >= max {
                                return Ok(false);
                            }
                            d.submit(ai, &mut probes, p, s, desc)
                        };
                    exp.exhaustive(&mut emit).map_err(internal)?
                }
                Explore::Random => {
                    let mut emit = |p: Provenance, s: CrashFs, desc: String| {
                        d.submit(ai, &mut probes, p, s, desc)
                    };
                    exp.random(o.samples, o.seed, &mut emit).map_err(internal)?;
                    true
                }
            };
            d.stats[ai].complete = r;
        }
        if !d.settle() || interrupted() {
            go = false;
        }
        d.stats[ai].distinct = {
            let mut hs: Vec<&StateHash> = probes.iter().map(|p| &p.hash).collect();
            hs.sort();
            hs.dedup();
            hs.len()
        };
        d.stats[ai].seconds = t0.elapsed().as_secs_f64();
        all_probes.push(probes);
        if !go {
            break;
        }
    }
    let interrupted_run = interrupted();
    if let Some(runner) = d.runner.take() {
        if interrupted_run {
            runner.cancel_handle().cancel();
        }
        let rest = runner.finish();
        for out in rest {
            d.record(out);
        }
    }
    d.progress.finish();
    if let Some(u) = d.units.take().filter(|_| !interrupted_run) {
        if let Some(code) = u.finish()? {
            return Ok(code);
        }
    }
    if interrupted_run {
        return Err(Failure {
            code: 130,
            message: "interrupted: no report written (scratch space removed)".into(),
        });
    }
    // Report.
    let loc = locator(filter);
    let summary = |op: &Op| ops_view::describe(op, &blob);
    let state_ids: HashMap<StateHash, String> =
        d.seen.iter().map(|(h, s)| (*h, s.id.clone())).collect();
    let mut dynamic = Vec::new();
    for (ai, prog) in programs.iter().enumerate() {
        let Some(probes) = all_probes.get(ai) else {
            continue;
        };
        let run = ApmRun {
            prog,
            ops: &ops,
            probes,
            state_ids: &state_ids,
        };
        dynamic.extend(run.dynamics(&|h| d.verdict(h), &loc, &summary));
    }
    let statics = intact_report::statics_grouped(&dynamic, o.group);
    let report = Report {
        schema: intact_report::SCHEMA,
        bundle: bundle_path.display().to_string(),
        checker: checker.clone(),
        apms: d.stats.clone(),
        statics,
        dynamic,
        timeouts: d.timeouts.clone(),
        seconds: started.elapsed().as_secs_f64(),
    };
    if let (Some(dir), Some(failing)) = (&o.keep_examples, &d.failing) {
        for s in &report.statics {
            let ex = &s.example;
            let Some(state) = failing.get(&ex.state) else {
                continue;
            };
            let title = format!(
                "static vulnerability #{} [{}] {}\n",
                s.id,
                s.categories_label(),
                s.title()
            );
            if let Err(e) = save_state(
                &dir.join(format!("v{}", s.id)),
                &ex.state,
                state,
                &checker,
                &ex.checker_message,
                &ex.description,
                &title,
            ) {
                d.errors.push(format!(
                    "--keep-examples: saving the example of #{}: {e}",
                    s.id
                ));
            }
        }
    }
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
    if !d.errors.is_empty() {
        return Err(Failure::internal(format!(
            "{} state(s) could not be checked; first: {}",
            d.errors.len(),
            d.errors[0]
        )));
    }
    Ok(if report.statics.is_empty() { 0 } else { 1 })
}

fn parse_group(s: &str) -> Result<intact_report::Grouping, String> {
    intact_report::Grouping::parse(s).ok_or_else(|| format!("`{s}`: expected sync or per-call"))
}
