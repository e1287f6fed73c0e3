//! `intact check`'s pipeline: explore a bundle's crash states under one or more APMs, run
//! the checker on each distinct state (here, or through work units: [`crate::units`]),
//! build the report. In stages: [`Session::open`] reads and validates, [`Session::check`]
//! builds the programs, explores each APM, settles the verdicts and reports.

pub use crate::options::checker_flag;
use crate::options::{CheckOptions, Explore};
use crate::seen::{Judged, Seen, StateNo};
use crate::units::Store;
use crate::{interrupted, view, Error, Progress};
use intact_apm::{Apm, Program};
use intact_bundle::Bundle;
use intact_explore::{CrashFs, CrashFsError, Explorer, HashCache, Provenance};
use intact_model::{Op, State};
use intact_report::{ApmRun, ApmStats, Example, Probe, Report, Verdict};
use intact_runner::{Job, Outcome, PatchState, Runner, RunnerConfig, Verdict as RVerdict};
use intact_symbol::FrameFilter;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a state whose checker could not run at all (as opposed to timing out) is described.
const NOT_CHECKED: &str = "not checked:";

/// APMs by name (built-in) or path (.toml), each once, at least one.
pub fn resolve_apms(names: &[String]) -> Result<Vec<Apm>, Error> {
    let mut out: Vec<Apm> = Vec::new();
    for n in names {
        let a = Apm::resolve(n.trim()).map_err(|e| Error::input(format!("--apm: {e}")))?;
        if out.iter().any(|b| b.name == a.name) {
            return Err(Error::input(format!("--apm: {} is given twice", a.name)));
        }
        out.push(a);
    }
    if out.is_empty() {
        return Err(Error::input("--apm: name at least one APM"));
    }
    Ok(out)
}

/// The checker command of `flag` (`--checker` or `--checker-server`), split as a shell would.
pub fn parse_checker(flag: &str, s: &str) -> Result<Vec<String>, Error> {
    let v =
        shlex::split(s).ok_or_else(|| Error::input(format!("{flag} {s:?}: unbalanced quotes")))?;
    if v.is_empty() {
        return Err(Error::input(format!("{flag}: empty command")));
    }
    // Refused before any work: a CRLF script fails on every state alike.
    if let Some(why) = intact_runner::crlf_shebang(Path::new(&v[0])) {
        return Err(Error::input(format!(
            "{flag} {}: the checker could not be run: {why}",
            v[0]
        )));
    }
    Ok(v)
}

/// Location of an op for grouping: the representative frame, or the call and path.
fn locator(filter: Option<FrameFilter>) -> impl Fn(&Op) -> String {
    move |op: &Op| match view::location(filter.as_ref(), op) {
        Some(f) => f.display(),
        None => format!(
            "{}({}) [no stack]",
            op.syscall,
            op.path.as_deref().unwrap_or("")
        ),
    }
}

/// The id a distinct state's checker run and the report give it.
fn sid(n: StateNo) -> String {
    format!("s{n}")
}

struct Pending {
    state: StateNo,
    apm: usize,
    /// How the state was first built.
    desc: String,
    /// Kept only with --keep-failing or --keep-examples, to save the state if it fails.
    state_copy: Option<CrashFs>,
}

struct Driver<'a> {
    /// Taken by `finish` once exploration is over.
    runner: Option<Runner>,
    /// Instead of the runner: verdicts from files, units for the others (--emit-states, --from-verdicts).
    units: Option<crate::units::Store>,
    seen: Seen,
    /// The checker's message for each distinct state that did not pass, by its number.
    messages: HashMap<StateNo, Box<str>>,
    /// Probes before this index in the current APM's list have no description to drop
    /// (see `Driver::drop_passing_descs`).
    described: usize,
    pending: HashMap<u64, Pending>,
    hash_cache: HashCache,
    keep: Option<PathBuf>,
    /// With --keep-examples: every failing state, by id, until the report picks examples.
    failing: Option<HashMap<String, CrashFs>>,
    checker: &'a [String],
    stats: Vec<ApmStats>,
    errors: Vec<String>,
    timeouts: Vec<Example>,
    progress: &'a mut dyn Progress,
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
        self.stats[apm].constructed += 1;
        let (state, new) = self.seen.insert(hash).map_err(CrashFsError::Limit)?;
        if new {
            let id = u64::from(state);
            let sid = sid(state);
            self.stats[apm].checked += 1;
            let keep_copy = (self.keep.is_some() || self.failing.is_some()).then(|| fs.clone());
            let before = self.pending.insert(
                id,
                Pending {
                    state,
                    apm,
                    desc: desc.clone(),
                    state_copy: keep_copy,
                },
            );
            assert!(before.is_none(), "a state is submitted once");
            if let Some(u) = &mut self.units {
                u.submit(id, &sid, hash, &prov, &fs)?;
            } else {
                let stdout = fs.stdout.to_vec();
                let fs = Arc::new(fs);
                let whole = fs.clone();
                let job = Job {
                    id,
                    state_id: sid,
                    stdout,
                    materialise: Box::new(move |d: &Path| {
                        whole.materialise(d).map_err(|e| e.to_string())
                    }),
                    release: None,
                    patch: Some(Box::new(Patchable(fs))),
                };
                if self.runner().submit(job).is_err() {
                    return Ok(false);
                }
            }
        }
        probes.push(Probe {
            prov,
            state,
            desc: desc.into_boxed_str(),
        });
        self.collect();
        if probes.len().is_multiple_of(4096) {
            self.drop_passing_descs(probes);
        }
        Ok(true)
    }

    /// Drops the descriptions of probes whose state passed: the report describes failing
    /// states only, and a run keeps a probe per state it builds (issue 29: about 80 bytes
    /// each). Looks at each probe until its verdict is known, so costs O(1) per probe.
    fn drop_passing_descs(&mut self, probes: &mut [Probe]) {
        let from = self.described.min(probes.len());
        let mut open = probes.len();
        for (i, p) in probes.iter_mut().enumerate().skip(from) {
            match self.seen.verdict(p.state) {
                Some(Judged::Pass) => p.desc = Box::default(),
                Some(_) => {}
                None => open = open.min(i),
            }
        }
        self.described = open;
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

    fn record(&mut self, o: Outcome) {
        let Some(p) = self.pending.remove(&o.id) else {
            return;
        };
        if let RVerdict::Error(e) = &o.verdict {
            self.errors.push(e.clone());
        }
        let verdict = verdict_of(o.verdict);
        let sid = sid(p.state);
        if verdict.timeout {
            self.stats[p.apm].timeouts += 1;
            self.timeouts.push(Example {
                state: sid.clone(),
                description: p.desc.clone(),
                checker_message: verdict.message.clone(),
            });
        } else if !verdict.pass {
            self.stats[p.apm].failed += 1;
            if let (Some(dir), Some(state)) = (&self.keep, &p.state_copy) {
                if let Err(e) =
                    save_failing(dir, &sid, state, self.checker, &verdict.message, &p.desc)
                {
                    self.errors
                        .push(format!("--keep-failing: saving {sid}: {e}"));
                }
            }
            if let (Some(f), Some(state)) = (&mut self.failing, p.state_copy) {
                f.insert(sid, state);
            }
        }
        let judged = match (verdict.pass, verdict.timeout) {
            (true, _) => Judged::Pass,
            (false, true) => Judged::Timeout,
            (false, false) => Judged::Fail,
        };
        if judged != Judged::Pass {
            self.messages
                .insert(p.state, verdict.message.into_boxed_str());
        }
        self.seen.judge(p.state, judged);
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

    fn verdict(&self, state: StateNo) -> Option<Verdict> {
        let message = || {
            self.messages
                .get(&state)
                .map(|m| m.to_string())
                .unwrap_or_default()
        };
        Some(match self.seen.verdict(state)? {
            Judged::Pass => Verdict {
                pass: true,
                timeout: false,
                message: String::new(),
            },
            Judged::Fail => Verdict {
                pass: false,
                timeout: false,
                message: message(),
            },
            Judged::Timeout => Verdict {
                pass: false,
                timeout: true,
                message: message(),
            },
        })
    }
}

/// A crash state the runner may write by patching the directory of the state its worker
/// checked before ([`CrashFs::patch_dir`]; issue 29).
struct Patchable(Arc<CrashFs>);

impl PatchState for Patchable {
    fn patch_from(&self, prev: &dyn PatchState, dir: &Path) -> Result<bool, String> {
        let Some(prev) = prev.as_any().downcast_ref::<Patchable>() else {
            return Ok(false);
        };
        self.0.patch_dir(&prev.0, dir).map_err(|e| e.to_string())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The runner's verdict as the report's: a failure's message is the checker's stderr (its
/// stdout when stderr is empty); a checker that could not run counts as not checked.
fn verdict_of(v: RVerdict) -> Verdict {
    match v {
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
        RVerdict::Error(e) => Verdict {
            pass: false,
            timeout: true,
            message: format!("{NOT_CHECKED} {e}"),
        },
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

/// What a check produced.
pub enum Checked {
    /// With `emit_states`: the units are written; what is left to do (for the user).
    Emitted(String),
    /// The report, and the states that could not be checked (the report is still valid
    /// for the others; the caller decides what that means for the exit status).
    Report { report: Report, errors: Vec<String> },
}

/// A bundle opened for checking: everything read and the options validated, before any
/// work is done (so a caller can validate its own outputs between the two stages).
pub struct Session<'p> {
    path: &'p Path,
    o: CheckOptions,
    ops: Vec<Op>,
    blob: Vec<u8>,
    initial: State,
    /// The recorded final directory, until the replay oracle has compared every APM's
    /// replay with it (then dropped: as large as the workload's files).
    final_state: Option<State>,
    filter: Option<FrameFilter>,
    started: Instant,
}

impl<'p> Session<'p> {
    /// Reads the bundle and refuses bad options (exit-2 errors only).
    pub fn open(bundle_path: &'p Path, o: &CheckOptions) -> Result<Session<'p>, Error> {
        let started = Instant::now();
        // --emit-states writes no report: leave its outputs alone.
        let o = o.emit_view().unwrap_or_else(|| o.clone());
        let b = Bundle::open(bundle_path).map_err(|e| Error::input(e.to_string()))?;
        let ops = b.ops().map_err(|e| Error::input(e.to_string()))?;
        let blob = b.data().map_err(|e| Error::input(e.to_string()))?;
        let initial = b.initial().map_err(|e| Error::input(e.to_string()))?;
        let final_state = b.final_state().map_err(|e| Error::input(e.to_string()))?;
        if !o.timeout_secs.is_finite() || o.timeout_secs <= 0.0 {
            return Err(Error::input(
                "--timeout must be a positive number of seconds",
            ));
        }
        if o.jobs == Some(0) {
            return Err(Error::input("--jobs must be at least 1"));
        }
        let filter = view::refilter(&b, &o.frame_skip, &o.frame_keep)?;
        Ok(Session {
            path: bundle_path,
            o,
            ops,
            blob,
            initial,
            final_state: Some(final_state),
            filter,
            started,
        })
    }

    /// Explores every APM, runs the checker on each distinct state, reports.
    pub fn check(
        mut self,
        apms: Vec<Apm>,
        checker: Vec<String>,
        progress: &mut dyn Progress,
    ) -> Result<Checked, Error> {
        prepare_keep_dirs(&self.o)?;
        let universe = CrashFs::universe(&self.initial, &self.ops)
            .map_err(|e| Error::input(format!("bundle {}: {e}", self.path.display())))?;
        let programs = self.programs(&apms)?;
        self.replay_oracle(&programs, &universe)?;
        let mut d = self.driver(&apms, &programs, &checker, progress)?;
        let mut all_probes: Vec<Vec<Probe>> = Vec::new();
        for (ai, prog) in programs.iter().enumerate() {
            let (probes, go) = self.explore_apm(&mut d, ai, prog, universe.clone())?;
            all_probes.push(probes);
            if !go {
                break;
            }
        }
        if let Some(message) = settle_all(&mut d)? {
            return Ok(Checked::Emitted(message));
        }
        let report = self.report(&d, &programs, &all_probes, &checker);
        self.save_examples(&mut d, &report, &checker);
        Ok(Checked::Report {
            report,
            errors: d.errors,
        })
    }

    /// One program per APM: the bundle's operations as micro-operations and orderings.
    fn programs(&self, apms: &[Apm]) -> Result<Vec<Program>, Error> {
        let mut programs = Vec::new();
        for a in apms {
            let p = Program::build(a, &self.ops, &self.initial, self.blob.len() as u64).map_err(
                |e| {
                    Error::input(format!(
                        "bundle {} under APM {}: {e}",
                        self.path.display(),
                        a.name
                    ))
                },
            )?;
            programs.push(p);
        }
        assert_eq!(programs.len(), apms.len(), "one program per APM");
        Ok(programs)
    }

    /// The replay oracle, on micro-operations: under every APM, all of them applied to the
    /// initial state give the recorded final directory. Run before any exploration, so the
    /// final directory and the replays are freed before the explorer's states are built
    /// (issue 29: at 10,000 appends each is 41 MB; the heap they leave is reused).
    fn replay_oracle(&mut self, programs: &[Program], universe: &CrashFs) -> Result<(), Error> {
        let final_state = self
            .final_state
            .take()
            .expect("the oracle runs once, with the recorded final directory");
        for prog in programs {
            let mut replay = universe.clone();
            // As the explorer builds its full state: call group by call group.
            for i in prog.calls.iter().flat_map(|c| c.micros.clone()) {
                replay
                    .apply(&prog.micros[i].micro, &self.blob)
                    .map_err(internal)?;
            }
            if let Some(diff) = replay.to_state().diff(&final_state) {
                return Err(Error::internal(format!("APM {}: applying every micro-operation does not reproduce the recorded final directory: {diff}", prog.apm)));
            }
        }
        Ok(())
    }

    /// The driver: a local checker runner, or the work-unit store in its place.
    fn driver<'a>(
        &self,
        apms: &[Apm],
        programs: &[Program],
        checker: &'a [String],
        progress: &'a mut dyn Progress,
    ) -> Result<Driver<'a>, Error> {
        let o = &self.o;
        let jobs = o.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        let units = Store::open(o, self.path, apms, checker)?;
        let runner = if units.is_some() {
            None
        } else {
            Some(
                Runner::start(RunnerConfig {
                    checker: checker.to_vec(),
                    jobs,
                    timeout: Some(Duration::from_secs_f64(o.timeout_secs)),
                    scratch_parent: o.scratch.clone(),
                    keep_output_bytes: 4096,
                    protocol: o.protocol,
                })
                .map_err(|e| Error::input(format!("{}: {e}", checker_flag(o.protocol))))?,
            )
        };
        assert!(
            runner.is_some() != units.is_some(),
            "one source of verdicts"
        );
        Ok(Driver {
            runner,
            units,
            seen: Seen::default(),
            messages: HashMap::new(),
            described: 0,
            pending: HashMap::new(),
            hash_cache: HashCache::default(),
            keep: o.keep_failing.clone(),
            failing: o.keep_examples.as_ref().map(|_| HashMap::new()),
            checker,
            stats: apms
                .iter()
                .zip(programs)
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
        })
    }

    /// Explores one APM: the replay oracle, the sanity states, the strategy. Returns the
    /// probes and whether to go on with the next APM.
    fn explore_apm(
        &self,
        d: &mut Driver,
        ai: usize,
        prog: &Program,
        universe: CrashFs,
    ) -> Result<(Vec<Probe>, bool), Error> {
        let t0 = Instant::now();
        d.progress.apm_started(&format!("APM {}", prog.apm));
        d.described = 0; // a new list of probes
        let exp = Explorer::new(prog, &self.ops, &self.blob, universe).map_err(internal)?;
        if let Some(u) = &mut d.units {
            u.begin_apm(ai, &exp).map_err(internal)?;
        }
        assert!(
            self.final_state.is_none(),
            "the replay oracle ran before exploring"
        );
        let mut probes: Vec<Probe> = Vec::new();
        let mut go = sanity(d, ai, &exp, &mut probes)?;
        if go {
            d.stats[ai].complete = self.strategy(d, ai, &exp, &mut probes, &mut go)?;
        }
        if !d.settle() || interrupted() {
            go = false;
        }
        d.stats[ai].distinct = {
            let mut hs: Vec<StateNo> = probes.iter().map(|p| p.state).collect();
            hs.sort();
            hs.dedup();
            hs.len()
        };
        d.stats[ai].seconds = t0.elapsed().as_secs_f64();
        Ok((probes, go))
    }

    /// The exploration strategy's states. Returns whether it built all it meant to.
    fn strategy(
        &self,
        d: &mut Driver,
        ai: usize,
        exp: &Explorer,
        probes: &mut Vec<Probe>,
        go: &mut bool,
    ) -> Result<bool, Error> {
        let n = exp.prog.calls.len();
        match self.o.explore {
            Explore::Alice => {
                let mut emit =
                    |p: Provenance, s: CrashFs, desc: String| d.submit(ai, probes, p, s, desc);
                exp.prefixes(&mut emit).map_err(internal)?;
                // Work units: the prefix verdicts come in a later round.
                if !d.settle() || d.units.as_ref().is_some_and(|u| u.blocked()) {
                    *go = false;
                }
                // Calls in atomic groups take no part in the later phases.
                let mut excluded = vec![false; n];
                let prefix = intact_report::prefix_verdicts(probes, &|n| d.verdict(n));
                for (a, z, _) in intact_report::atomic_groups(&prefix) {
                    for e in excluded.iter_mut().take(z + 1).skip(a) {
                        *e = true;
                    }
                }
                if *go {
                    let mut emit =
                        |p: Provenance, s: CrashFs, desc: String| d.submit(ai, probes, p, s, desc);
                    exp.atomicity(&excluded, &mut emit).map_err(internal)?;
                    exp.reorderings(&excluded, &mut emit).map_err(internal)?;
                    // False when --max-states cut the micro-operation reorderings short.
                    return exp
                        .micro_reorderings(&excluded, self.o.max_states, &mut emit)
                        .map_err(internal);
                }
                Ok(true)
            }
            Explore::Exhaustive => {
                let max = self.o.max_states;
                let start_distinct = d.seen.len();
                let mut emit =
                    |p: Provenance, s: CrashFs, desc: String| -> Result<bool, CrashFsError> {
                        if d.seen.len() - start_distinct >= max {
                            return Ok(false);
                        }
                        d.submit(ai, probes, p, s, desc)
                    };
                exp.exhaustive(&mut emit).map_err(internal)
            }
            Explore::Random => {
                let mut emit =
                    |p: Provenance, s: CrashFs, desc: String| d.submit(ai, probes, p, s, desc);
                exp.random(self.o.samples, self.o.seed, &mut emit)
                    .map_err(internal)?;
                Ok(true)
            }
        }
    }

    /// Dynamic and static vulnerabilities from every verdict.
    fn report(
        &self,
        d: &Driver,
        programs: &[Program],
        all_probes: &[Vec<Probe>],
        checker: &[String],
    ) -> Report {
        let loc = locator(self.filter.clone());
        let summary = |op: &Op| view::describe(op, &self.blob);
        // Looked up, not collected: a map of every distinct state's id would double the
        // memory the run holds per state at its end.
        let state_ids = |n: StateNo| (d.seen.len() > n as usize).then(|| sid(n));
        let mut dynamic = Vec::new();
        for (prog, probes) in programs.iter().zip(all_probes) {
            let run = ApmRun {
                prog,
                ops: &self.ops,
                probes,
                state_ids: &state_ids,
            };
            dynamic.extend(run.dynamics(&|n| d.verdict(n), &loc, &summary));
        }
        let statics = intact_report::statics_grouped(&dynamic, self.o.group);
        Report {
            schema: intact_report::SCHEMA,
            bundle: self.path.display().to_string(),
            checker: checker.to_vec(),
            apms: d.stats.clone(),
            statics,
            dynamic,
            timeouts: d.timeouts.clone(),
            seconds: self.started.elapsed().as_secs_f64(),
        }
    }

    /// With `keep_examples`: each static vulnerability's example state, as DIR/v<N>/.
    fn save_examples(&self, d: &mut Driver, report: &Report, checker: &[String]) {
        let (Some(dir), Some(failing)) = (&self.o.keep_examples, &d.failing) else {
            return;
        };
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
                checker,
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
}

fn internal(e: CrashFsError) -> Error {
    Error::internal(format!("building crash states: {e}"))
}

/// `keep_failing` and `keep_examples` must be new or empty directories; creates them.
fn prepare_keep_dirs(o: &CheckOptions) -> Result<(), Error> {
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
            return Err(Error::input(format!(
                "{flag} {}: exists and is not empty (choose a new directory)",
                k.display()
            )));
        }
        std::fs::create_dir_all(k)
            .map_err(|e| Error::input(format!("{flag} {}: {e}", k.display())))?;
    }
    Ok(())
}

/// The state before the workload and the one it left must pass; under the first APM a
/// checker that rejects (or cannot judge) them is an input error. Returns whether to go on.
fn sanity(
    d: &mut Driver,
    ai: usize,
    exp: &Explorer,
    probes: &mut Vec<Probe>,
) -> Result<bool, Error> {
    let n = exp.prog.calls.len();
    {
        let mut emit = |p: Provenance, s: CrashFs, desc: String| d.submit(ai, probes, p, s, desc);
        emit(
            Provenance::Prefix { calls: 0 },
            exp.prefix_state(0).map_err(internal)?,
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
        return Ok(false);
    }
    if ai != 0 {
        return Ok(true);
    }
    for (k, what) in [(0usize, "initial"), (n, "final")] {
        let p = probes
            .iter()
            .find(|p| p.prov == Provenance::Prefix { calls: k })
            .expect("sanity probe");
        if let Some(v) = d.verdict(p.state) {
            sane(&v, what)?;
        }
    }
    Ok(true)
}

/// A sanity state's verdict as an input error, if it is not a pass.
fn sane(v: &Verdict, what: &str) -> Result<(), Error> {
    if let Some(why) = v.message.strip_prefix(NOT_CHECKED) {
        return Err(Error::input(format!(
            "the checker could not be run on the workload's {what} state:{why}"
        )));
    }
    if v.timeout {
        return Err(Error::input(format!(
            "the checker did not finish on the workload's {what} state, where no crash happened ({}): raise --timeout or fix the checker",
            v.message
        )));
    }
    if !v.pass {
        return Err(Error::input(format!(
            "the checker rejects the workload's {what} state, where no crash happened: fix the checker (or the workload) first.\n  checker said: {}",
            v.message
        )));
    }
    Ok(())
}

/// The last verdicts: the runner's rest, or the work units' manifest. `Some(message)` when
/// units were emitted instead of a report.
fn settle_all(d: &mut Driver) -> Result<Option<String>, Error> {
    let interrupted_run = interrupted();
    if let Some(runner) = d.runner.take() {
        if interrupted_run {
            runner.cancel_handle().cancel();
        }
        for out in runner.finish() {
            d.record(out);
        }
    }
    d.progress.finish();
    if let Some(u) = d.units.take().filter(|_| !interrupted_run) {
        if let Some(message) = u.finish()? {
            return Ok(Some(message));
        }
    }
    if interrupted_run {
        return Err(Error::interrupted(
            "interrupted: no report written (scratch space removed)",
        ));
    }
    Ok(None)
}
