//! Checking beyond one machine (docs/distributed.md): exploration and checking split into
//! work units.
//!
//! - `intact check BUNDLE ... --emit-states DIR` explores as usual but, instead of running
//!   the checker, writes every distinct state that has no verdict in `DIR/verdicts/` yet as
//!   `DIR/units/<state>.json` and lists them in `DIR/manifest.json`. ALICE's strategy needs
//!   the prefix states' verdicts before it builds the rest, so exploration stops there when
//!   they are missing: run the units, put the verdicts in `DIR/verdicts/`, emit again, until
//!   the manifest says `"complete": true` (2 rounds for one APM; at most 1 + the number of
//!   APMs). State ids are assigned in exploration order, so they are the local run's.
//! - `intact check-unit --bundle B --unit U --out V` (on a worker) rebuilds the state of one
//!   unit — a prefix state of the program (APM + bundle) plus a [`Delta`] — checks its
//!   content hash, runs the checker on it exactly as `intact check` does (intact-runner's
//!   runner, one job, per process or as a warm server as the unit says), and writes the
//!   verdict. `intact check-unit --serve` ([`crate::serve`]) does the same for many units
//!   through one [`UnitChecker`], which keeps the bundle and the runner between them.
//! - `intact check BUNDLE ... --from-verdicts DIR` explores again, takes every verdict from
//!   `DIR/verdicts/` and prints the report a local run would have printed.
//! - `intact check ... --dask SCHEDULER` runs `python3 -m intact.dask_run`, which drives the
//!   three steps on a Dask cluster.

use crate::options::CheckOptions;
use crate::view::hex;
use crate::Error;
use intact_apm::{Apm, Program};
use intact_bundle::Bundle;
use intact_explore::{
    CrashFs, CrashFsError, Delta, DirDelta, Explorer, FileDelta, HashCache, Provenance, StateHash,
};
use intact_runner::{Job, Outcome, Protocol, Runner, RunnerConfig, Verdict as RVerdict};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const UNITS_FORMAT: &str = "intact-units";
const UNIT_FORMAT: &str = "intact-unit";
const VERDICT_FORMAT: &str = "intact-verdict";
/// Of the manifest and the verdict files.
const VERSION: u32 = 1;
/// Of the work units: 2 added "protocol" (version 1 units are read as "process").
const UNIT_VERSION: u32 = 2;
/// As `intact check`: the tail of the checker's output kept per failing run.
const KEEP_OUTPUT: usize = 4096;

// ---------------------------------------------------------------------------------------
// Files.

/// What must be equal between the emitting run, the workers and the report step.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct RunId {
    bundle_hash: String,
    checker: Vec<String>,
    /// Absent in manifests written before it existed: those ran per process.
    #[serde(default)]
    protocol: CheckerProtocol,
    timeout: f64,
    apms: Vec<ApmText>,
    explore: String,
    max_states: usize,
    samples: u64,
    seed: u64,
}

/// How the checker runs: the unit's (and manifest's) spelling of [`Protocol`].
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default)]
#[serde(rename_all = "lowercase")]
enum CheckerProtocol {
    /// `CHECKER <crash_dir> <stdout_file>` per state (`--checker`).
    #[default]
    Process,
    /// One warm server per worker (`--checker-server`).
    Server,
}

impl CheckerProtocol {
    fn of(p: Protocol) -> CheckerProtocol {
        match p {
            Protocol::PerProcess => CheckerProtocol::Process,
            Protocol::Server => CheckerProtocol::Server,
        }
    }
    fn runner(self) -> Protocol {
        match self {
            CheckerProtocol::Process => Protocol::PerProcess,
            CheckerProtocol::Server => Protocol::Server,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct ApmText {
    name: String,
    /// The APM's TOML text, so that workers need not have its file.
    source: String,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    format: String,
    version: u32,
    intact_version: String,
    /// The bundle path as given to `intact check`, and absolute.
    bundle: String,
    bundle_abs: String,
    #[serde(flatten)]
    run: RunId,
    /// How many times --emit-states ran on this directory.
    round: u32,
    /// Every state of the run has a verdict: --from-verdicts can report.
    complete: bool,
    /// States whose verdict was found in verdicts/ in this round.
    verdicts: usize,
    /// Every unit written so far (all rounds).
    units: Vec<UnitRef>,
    /// The states that need a verdict now (their units are in `units`).
    pending: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone)]
struct UnitRef {
    state: String,
    hash: String,
    apm: String,
    /// Relative to the manifest's directory.
    file: String,
}

#[derive(Serialize, Deserialize)]
struct Unit {
    format: String,
    version: u32,
    /// The INTACT_STATE value.
    state: String,
    /// Content hash of the state (blake3, as intact deduplicates states), hex.
    hash: String,
    bundle_hash: String,
    checker: Vec<String>,
    /// How to run `checker` (version 2; version 1 units are "process").
    #[serde(default)]
    protocol: CheckerProtocol,
    timeout: f64,
    apm: UnitApm,
    /// The state = the state after the first `base` call groups of the APM's program …
    base: usize,
    /// … with this applied.
    delta: DeltaJson,
}

/// A built-in APM by name (when the text is the built-in's), any other with its text.
#[derive(Serialize, Deserialize)]
struct UnitApm {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct DeltaJson {
    files: Vec<FileJson>,
    dirs: Vec<DirJson>,
    /// Base64.
    stdout: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct FileJson {
    inode: u64,
    size: u64,
    /// (offset, base64 bytes)
    runs: Vec<(u64, String)>,
}

#[derive(Serialize, Deserialize)]
struct DirJson {
    inode: u64,
    set: Vec<(String, u64)>,
    remove: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct VerdictFile {
    format: String,
    version: u32,
    state: String,
    hash: String,
    verdict: VerdictJson,
    /// Checker wall time, seconds.
    elapsed: f64,
    host: String,
    worker: usize,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum VerdictJson {
    Pass,
    Fail {
        code: Option<i32>,
        signal: Option<i32>,
        stderr: String,
        stdout: String,
    },
    Timeout {
        after: f64,
    },
    Error {
        message: String,
    },
}

impl VerdictJson {
    fn of(v: &RVerdict) -> VerdictJson {
        match v {
            RVerdict::Pass => VerdictJson::Pass,
            RVerdict::Fail {
                code,
                signal,
                stderr,
                stdout,
            } => VerdictJson::Fail {
                code: *code,
                signal: *signal,
                stderr: stderr.clone(),
                stdout: stdout.clone(),
            },
            RVerdict::Timeout { after } => VerdictJson::Timeout {
                after: after.as_secs_f64(),
            },
            RVerdict::Error(m) => VerdictJson::Error { message: m.clone() },
        }
    }
    fn verdict(&self) -> RVerdict {
        match self {
            VerdictJson::Pass => RVerdict::Pass,
            VerdictJson::Fail {
                code,
                signal,
                stderr,
                stdout,
            } => RVerdict::Fail {
                code: *code,
                signal: *signal,
                stderr: stderr.clone(),
                stdout: stdout.clone(),
            },
            VerdictJson::Timeout { after } => RVerdict::Timeout {
                after: Duration::from_secs_f64(after.max(0.0)),
            },
            VerdictJson::Error { message } => RVerdict::Error(message.clone()),
        }
    }
}

fn delta_json(d: &Delta) -> DeltaJson {
    DeltaJson {
        files: d
            .files
            .iter()
            .map(|f| FileJson {
                inode: f.inode,
                size: f.size,
                runs: f.runs.iter().map(|(o, b)| (*o, b64_encode(b))).collect(),
            })
            .collect(),
        dirs: d
            .dirs
            .iter()
            .map(|x| DirJson {
                inode: x.inode,
                set: x.set.clone(),
                remove: x.remove.clone(),
            })
            .collect(),
        stdout: d.stdout.as_ref().map(|s| b64_encode(s)),
    }
}

fn delta_of(j: &DeltaJson) -> Result<Delta, String> {
    let mut files = Vec::new();
    for f in &j.files {
        let mut runs = Vec::new();
        for (o, b) in &f.runs {
            runs.push((
                *o,
                b64_decode(b)
                    .ok_or_else(|| format!("inode {}: a run at {o} is not base64", f.inode))?,
            ));
        }
        files.push(FileDelta {
            inode: f.inode,
            size: f.size,
            runs,
        });
    }
    let stdout = match &j.stdout {
        Some(s) => Some(b64_decode(s).ok_or("stdout is not base64")?),
        None => None,
    };
    Ok(Delta {
        files,
        dirs: j
            .dirs
            .iter()
            .map(|x| DirDelta {
                inode: x.inode,
                set: x.set.clone(),
                remove: x.remove.clone(),
            })
            .collect(),
        stdout,
    })
}

fn write_whole(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

fn apm_text(a: &Apm) -> ApmText {
    ApmText {
        name: a.name.clone(),
        source: a.source.clone(),
    }
}

fn run_id(bundle_hash: String, o: &CheckOptions, apms: &[Apm], checker: &[String]) -> RunId {
    RunId {
        bundle_hash,
        checker: checker.to_vec(),
        protocol: CheckerProtocol::of(o.protocol),
        timeout: o.timeout_secs,
        apms: apms.iter().map(apm_text).collect(),
        explore: o.explore.name().to_string(),
        max_states: o.max_states,
        samples: o.samples,
        seed: o.seed,
    }
}

/// What differs between two runs, for the message.
fn run_id_diff(a: &RunId, b: &RunId) -> String {
    let mut d = Vec::new();
    if a.bundle_hash != b.bundle_hash {
        d.push("the bundle's contents");
    }
    if a.checker != b.checker {
        d.push("--checker");
    }
    if a.protocol != b.protocol {
        d.push("--checker or --checker-server");
    }
    if a.timeout != b.timeout {
        d.push("--timeout");
    }
    if a.apms != b.apms {
        d.push("--apm");
    }
    if a.explore != b.explore
        || a.max_states != b.max_states
        || a.samples != b.samples
        || a.seed != b.seed
    {
        d.push("--explore/--max-states/--samples/--seed");
    }
    d.join(", ")
}

// ---------------------------------------------------------------------------------------
// The bundle's content hash.

/// The bundle files `intact check` reads (and a worker needs), in hash order.
pub const BUNDLE_FILES: [&str; 7] = [
    "bundle.json",
    "ops.jsonl",
    "data.bin",
    "initial/manifest.json",
    "initial/contents.bin",
    "final/manifest.json",
    "final/contents.bin",
];

/// blake3 (as intact hashes states) over, for each of [`BUNDLE_FILES`]: its name, a NUL
/// byte, its length as 8 little-endian bytes, its contents. (The raw trace is not part of
/// it: it is not needed to build states and is not shipped to workers.)
pub fn bundle_hash(bundle: &Path) -> Result<String, String> {
    let mut h = blake3::Hasher::new();
    for f in BUNDLE_FILES {
        let p = bundle.join(f);
        let data = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        h.update(f.as_bytes());
        h.update(&[0]);
        h.update(&(data.len() as u64).to_le_bytes());
        h.update(&data);
    }
    Ok(h.finalize().to_hex().to_string())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (ci, c) in s.chunks(4).enumerate() {
        let last = ci == s.len() / 4 - 1;
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &ch) in c.iter().enumerate() {
            let v = match ch {
                b'=' if last && i >= 2 => {
                    pad += 1;
                    0
                }
                _ if pad > 0 => return None,
                _ => B64.iter().position(|&x| x == ch)? as u32,
            };
            n = n << 6 | v;
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------
// The store: `intact check`'s source of verdicts with --emit-states / --from-verdicts.

enum Mode {
    Emit,
    Assemble,
}

/// Stands in for the checker runner: verdicts come from `DIR/verdicts/`; states without
/// one are written as units (--emit-states) or counted as missing (--from-verdicts).
pub struct Store {
    mode: Mode,
    dir: PathBuf,
    bundle: String,
    bundle_abs: String,
    run: RunId,
    round: u32,
    verdicts: HashMap<StateHash, VerdictJson>,
    used: usize,
    ready: Vec<Outcome>,
    /// States without a verdict: (id, hash).
    missing: Vec<(String, StateHash)>,
    units: Vec<UnitRef>,
    /// Per APM of the exploration: the prefix states, bases of the units' deltas.
    bases: Vec<CrashFs>,
    apm: usize,
}

impl Store {
    /// `None` for a local run (the checker runs here).
    pub fn open(
        o: &CheckOptions,
        bundle: &Path,
        apms: &[Apm],
        checker: &[String],
    ) -> Result<Option<Store>, Error> {
        let (mode, dir, flag) = match (&o.emit_states, &o.from_verdicts) {
            (Some(d), _) => (Mode::Emit, d.clone(), "--emit-states"),
            (None, Some(d)) => (Mode::Assemble, d.clone(), "--from-verdicts"),
            (None, None) => return Ok(None),
        };
        let hash = bundle_hash(bundle)
            .map_err(|e| Error::input(format!("bundle {}: {e}", bundle.display())))?;
        let run = run_id(hash, o, apms, checker);
        let previous = previous_manifest(&dir, flag, &run)?;
        match (&mode, &previous) {
            (Mode::Assemble, None) => return Err(Error::input(format!("--from-verdicts {}: no manifest.json here (write the units with --emit-states first)", dir.display()))),
            (Mode::Emit, None) if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) => {
                return Err(Error::input(format!("--emit-states {}: exists, is not empty and holds no manifest.json (choose a new directory)", dir.display())));
            }
            _ => {}
        }
        if let Mode::Emit = mode {
            for sub in ["units", "verdicts"] {
                std::fs::create_dir_all(dir.join(sub)).map_err(|e| {
                    Error::input(format!("--emit-states {}: {e}", dir.join(sub).display()))
                })?;
            }
        }
        let verdicts = load_verdicts(&dir.join("verdicts"), flag)?;
        Ok(Some(Store {
            mode,
            bundle: bundle.display().to_string(),
            bundle_abs: std::path::absolute(bundle)
                .unwrap_or_else(|_| bundle.to_path_buf())
                .display()
                .to_string(),
            run,
            round: previous.as_ref().map(|m| m.round + 1).unwrap_or(1),
            verdicts,
            used: 0,
            ready: Vec::new(),
            missing: Vec::new(),
            units: previous.map(|m| m.units).unwrap_or_default(),
            bases: Vec::new(),
            apm: 0,
            dir,
        }))
    }

    /// The exploration of APM `apm` starts.
    pub fn begin_apm(&mut self, apm: usize, exp: &Explorer) -> Result<(), CrashFsError> {
        self.apm = apm;
        if let Mode::Emit = self.mode {
            self.bases = exp.prefix_states()?;
        }
        Ok(())
    }

    /// A new distinct state: its verdict if known, else a unit (or a missing verdict).
    pub fn submit(
        &mut self,
        id: u64,
        state: &str,
        hash: StateHash,
        prov: &Provenance,
        fs: &CrashFs,
    ) -> Result<(), CrashFsError> {
        if let Some(v) = self.verdicts.get(&hash) {
            self.used += 1;
            self.ready.push(Outcome {
                id,
                verdict: v.verdict(),
                elapsed: Duration::ZERO,
                worker: 0,
            });
            return Ok(());
        }
        self.missing.push((state.to_string(), hash));
        if let Mode::Assemble = self.mode {
            return Ok(());
        }
        let base = self.base_of(prov);
        let delta = self
            .bases
            .get(base)
            .and_then(|b| fs.delta_from(b))
            .ok_or_else(|| {
                CrashFsError::Data(format!("state {state}: no delta against its base state"))
            })?;
        let apm = self
            .run
            .apms
            .get(self.apm)
            .cloned()
            .ok_or_else(|| CrashFsError::Data("APM index out of range".into()))?;
        let unit = Unit {
            format: UNIT_FORMAT.into(),
            version: UNIT_VERSION,
            state: state.to_string(),
            hash: hex(&hash),
            bundle_hash: self.run.bundle_hash.clone(),
            checker: self.run.checker.clone(),
            protocol: self.run.protocol,
            timeout: self.run.timeout,
            apm: unit_apm_text(&apm),
            base,
            delta: delta_json(&delta),
        };
        let file = format!("units/{state}.json");
        let path = self.dir.join(&file);
        let text = serde_json::to_vec(&unit).map_err(|e| CrashFsError::Data(e.to_string()))?;
        write_whole(&path, &text).map_err(|err| CrashFsError::Io {
            path: path.display().to_string(),
            err,
        })?;
        if !self.units.iter().any(|u| u.state == state) {
            self.units.push(UnitRef {
                state: state.to_string(),
                hash: hex(&hash),
                apm: apm.name,
                file,
            });
        }
        Ok(())
    }

    /// The prefix state a unit's delta is taken against: the one its exploration started
    /// from, so deltas stay small.
    fn base_of(&self, prov: &Provenance) -> usize {
        let n = self.bases.len().saturating_sub(1);
        match prov {
            Provenance::Prefix { calls } => *calls,
            Provenance::Atomicity { group } => *group,
            Provenance::Reorder { b, .. } => b + 1,
        }
        .min(n)
    }

    /// Verdicts found since the last call.
    pub fn drain(&mut self) -> Vec<Outcome> {
        std::mem::take(&mut self.ready)
    }

    /// Some state has no verdict: the exploration cannot go past a point that needs them.
    pub fn blocked(&self) -> bool {
        !self.missing.is_empty()
    }

    /// End of the exploration. --emit-states: writes the manifest and says what is left
    /// (`Some(message)`). --from-verdicts: `None` (go on and report) when every state had a
    /// verdict.
    pub fn finish(self) -> Result<Option<String>, Error> {
        match self.mode {
            Mode::Assemble => {
                if let Some((first, _)) = self.missing.first() {
                    return Err(Error::input(format!(
                        "--from-verdicts {}: {} state(s) have no verdict (first: {first}); no report written. Emit and check their units (`intact check ... --emit-states {}`, `intact check-unit`) first",
                        self.dir.display(),
                        self.missing.len(),
                        self.dir.display()
                    )));
                }
                Ok(None)
            }
            Mode::Emit => {
                let complete = self.missing.is_empty();
                let m = Manifest {
                    format: UNITS_FORMAT.into(),
                    version: VERSION,
                    intact_version: env!("CARGO_PKG_VERSION").into(),
                    bundle: self.bundle,
                    bundle_abs: self.bundle_abs,
                    run: self.run,
                    round: self.round,
                    complete,
                    verdicts: self.used,
                    units: self.units,
                    pending: self.missing.iter().map(|(s, _)| s.clone()).collect(),
                };
                let path = self.dir.join("manifest.json");
                let text =
                    serde_json::to_vec_pretty(&m).map_err(|e| Error::internal(e.to_string()))?;
                write_whole(&path, &text)
                    .map_err(|e| Error::input(format!("--emit-states {}: {e}", path.display())))?;
                Ok(Some(if complete {
                    format!(
                        "every state has a verdict ({} states); report with --from-verdicts {}",
                        self.used,
                        self.dir.display()
                    )
                } else {
                    format!(
                        "round {}: {} unit(s) to check (\"pending\" in {}), {} state(s) with verdicts",
                        self.round,
                        self.missing.len(),
                        path.display(),
                        self.used
                    )
                }))
            }
        }
    }
}

/// A unit's APM: the name, and the text unless it is an unchanged built-in (a worker has
/// the built-ins).
fn unit_apm_text(apm: &ApmText) -> UnitApm {
    let builtin = !apm.name.contains('/') && !apm.name.ends_with(".toml");
    let source = match Apm::resolve(&apm.name) {
        Ok(b) if builtin && b.source == apm.source => None,
        _ => Some(apm.source.clone()),
    };
    UnitApm {
        name: apm.name.clone(),
        source,
    }
}

/// The manifest of an earlier round in `dir`, if any; refused when it is not a manifest of
/// this version or belongs to another run.
fn previous_manifest(dir: &Path, flag: &str, run: &RunId) -> Result<Option<Manifest>, Error> {
    let mpath = dir.join("manifest.json");
    if !mpath.exists() {
        return Ok(None);
    }
    let text = std::fs::read(&mpath)
        .map_err(|e| Error::input(format!("{flag} {}: {e}", mpath.display())))?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| {
        Error::input(format!(
            "{flag} {}: not a work-unit manifest: {e}",
            mpath.display()
        ))
    })?;
    if m.format != UNITS_FORMAT || m.version != VERSION {
        return Err(Error::input(format!(
            "{flag} {}: not a version {VERSION} {UNITS_FORMAT} manifest",
            mpath.display()
        )));
    }
    if m.run != *run {
        return Err(Error::input(format!(
            "{flag} {}: its units belong to another run ({} differ); use a new directory",
            dir.display(),
            run_id_diff(&m.run, run)
        )));
    }
    Ok(Some(m))
}

fn load_verdicts(dir: &Path, flag: &str) -> Result<HashMap<StateHash, VerdictJson>, Error> {
    let mut out = HashMap::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::input(format!("{flag} {}: {e}", dir.display()))),
    };
    for e in rd {
        let e = e.map_err(|e| Error::input(format!("{flag} {}: {e}", dir.display())))?;
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let bad = |m: String| Error::input(format!("{flag}: verdict {}: {m}", p.display()));
        let text = std::fs::read(&p).map_err(|e| bad(e.to_string()))?;
        let v: VerdictFile =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not a verdict: {e}")))?;
        if v.format != VERDICT_FORMAT || v.version != VERSION {
            return Err(bad(format!(
                "not a version {VERSION} {VERDICT_FORMAT} file"
            )));
        }
        let h = parse_hash(&v.hash).ok_or_else(|| bad("\"hash\" is not 64 hex digits".into()))?;
        out.insert(h, v.verdict);
    }
    Ok(out)
}

fn parse_hash(s: &str) -> Option<StateHash> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut h = [0u8; 32];
    for (i, b) in h.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(h)
}

// ---------------------------------------------------------------------------------------
// `intact check-unit`: units on a worker, one per process or many through one (--serve).

/// One work unit to check on this machine (`intact check-unit`).
pub struct UnitJob {
    /// The bundle the unit was emitted from; its content hash must match the unit's.
    pub bundle: PathBuf,
    /// The work unit: DIR/units/<state>.json.
    pub unit: PathBuf,
    /// Where to write the verdict (whole or not at all).
    pub out: PathBuf,
    /// INTACT_WORKER for the checker.
    pub worker: usize,
    /// Where to build the crash state.
    pub scratch: Option<PathBuf>,
    /// Stop (as on an interrupt) when the parent process dies.
    pub exit_with_parent: bool,
}

/// SIGTERM when the parent dies (the interrupt handler turns it into a clean stop).
pub(crate) fn exit_with_parent() {
    // SAFETY: plain system calls without pointers.
    unsafe {
        let parent = libc::getppid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
        // The parent may have died before prctl: then we were reparented already.
        if libc::getppid() != parent {
            libc::raise(libc::SIGTERM);
        }
    }
}

/// Checks one unit and writes its verdict (`intact check-unit --unit U --out V`).
pub fn check_unit(a: UnitJob) -> Result<(), Error> {
    if a.exit_with_parent {
        exit_with_parent();
    }
    let mut checker = UnitChecker::new(a.bundle, a.worker, a.scratch);
    let r = checker.check(&a.unit, &a.out);
    checker.finish();
    r
}

/// What a check-unit process keeps from one unit to the next: the bundle, hashed once and
/// parsed once; per APM the prefix states (the bases of the units' deltas); the checker
/// runner, so that a warm checker server stays up between units.
pub struct UnitChecker {
    bundle: PathBuf,
    worker: usize,
    scratch: Option<PathBuf>,
    host: String,
    /// Read at the first unit; kept once its hash is known (a bundle that is not there yet
    /// is looked for again at the next unit).
    loaded: Option<Loaded>,
    runner: Option<(RunnerKey, Runner)>,
    /// Job ids given to the runner, to pair each outcome with its job.
    jobs: u64,
}

/// The bundle as read by a worker.
struct Loaded {
    hash: String,
    /// Parsed when the first unit that matches `hash` needs it.
    parsed: Option<Parsed>,
    /// Prefix states per APM (name, text): what a unit's `base` indexes.
    prefixes: HashMap<(String, String), Vec<CrashFs>>,
}

struct Parsed {
    ops: Vec<intact_model::Op>,
    blob: Vec<u8>,
    initial: intact_model::State,
}

/// What a runner was started for: a unit that differs in any of these gets a new runner.
#[derive(PartialEq)]
struct RunnerKey {
    checker: Vec<String>,
    protocol: CheckerProtocol,
    timeout_bits: u64,
}

impl RunnerKey {
    fn of(u: &Unit) -> RunnerKey {
        RunnerKey {
            checker: u.checker.clone(),
            protocol: u.protocol,
            timeout_bits: u.timeout.to_bits(),
        }
    }
}

impl UnitChecker {
    pub fn new(bundle: PathBuf, worker: usize, scratch: Option<PathBuf>) -> UnitChecker {
        UnitChecker {
            bundle,
            worker,
            scratch,
            host: hostname(),
            loaded: None,
            runner: None,
            jobs: 0,
        }
    }

    /// Checks the unit in the file `unit` and writes its verdict to `out`, whole or not
    /// at all. Errors are the unit's (bad unit, bundle, checker: input) or intact's.
    pub fn check(&mut self, unit: &Path, out: &Path) -> Result<(), Error> {
        let (u, want, delta) = read_unit(unit)?;
        let state = self.rebuild(unit, &u, want, &delta)?;
        // Nothing written unless the verdict is: check the output path first.
        if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !d.is_dir() {
                return Err(Error::input(format!(
                    "--out {}: the directory {} does not exist",
                    out.display(),
                    d.display()
                )));
            }
        }
        let o = self.run_checker(&u, state)?;
        let v = VerdictFile {
            format: VERDICT_FORMAT.into(),
            version: VERSION,
            state: u.state,
            hash: u.hash,
            verdict: VerdictJson::of(&o.verdict),
            elapsed: o.elapsed.as_secs_f64(),
            host: self.host.clone(),
            worker: o.worker,
        };
        let text = serde_json::to_vec_pretty(&v).map_err(|e| Error::internal(e.to_string()))?;
        write_whole(out, &text)
            .map_err(|e| Error::input(format!("--out {}: {e}", out.display())))?;
        Ok(())
    }

    /// Stops the runner (and its checker server), removing its scratch space.
    pub fn finish(mut self) {
        if let Some((_, r)) = self.runner.take() {
            drop(r.finish());
        }
    }

    /// The unit's crash state, from the bundle checked to be the unit's.
    fn rebuild(
        &mut self,
        unit: &Path,
        u: &Unit,
        want: StateHash,
        delta: &Delta,
    ) -> Result<CrashFs, Error> {
        if self.loaded.is_none() {
            let hash = bundle_hash(&self.bundle)
                .map_err(|e| Error::input(format!("bundle {}: {e}", self.bundle.display())))?;
            self.loaded = Some(Loaded {
                hash,
                parsed: None,
                prefixes: HashMap::new(),
            });
        }
        let l = self.loaded.as_mut().expect("loaded above");
        if l.hash != u.bundle_hash {
            return Err(Error::input(format!(
                "bundle {} on {} is not the bundle unit {} was emitted from (content hash {}, expected {})",
                self.bundle.display(),
                self.host,
                unit.display(),
                l.hash,
                u.bundle_hash
            )));
        }
        l.state(&self.bundle, unit, u, want, delta)
    }
}

impl Loaded {
    /// The unit's state: its base prefix state plus its delta, with the content hash the
    /// emitting run computed.
    fn state(
        &mut self,
        bundle: &Path,
        unit: &Path,
        u: &Unit,
        want: StateHash,
        delta: &Delta,
    ) -> Result<CrashFs, Error> {
        let apm = unit_apm(unit, u)?;
        let key = (apm.name.clone(), apm.source.clone());
        if !self.prefixes.contains_key(&key) {
            let parsed = match self.parsed.take() {
                Some(p) => p,
                None => parse_bundle(bundle)?,
            };
            let built = prefix_states(bundle, &parsed, &apm);
            self.parsed = Some(parsed);
            self.prefixes.insert(key.clone(), built?);
        }
        let prefixes = &self.prefixes[&key];
        assert!(!prefixes.is_empty(), "prefix state 0 always exists");
        let Some(base) = prefixes.get(u.base) else {
            return Err(bad_unit(
                unit,
                format!(
                    "base state {} does not exist (the program has {} calls)",
                    u.base,
                    prefixes.len() - 1
                ),
            ));
        };
        let mut state = base.clone();
        state.patch(delta).map_err(|e| {
            bad_unit(
                unit,
                format!("its delta does not apply (corrupt unit): {e}"),
            )
        })?;
        let got = state.hash(&mut HashCache::default());
        if got != want {
            return Err(bad_unit(
                unit,
                format!(
                    "the rebuilt state {} has content hash {}, not {} (corrupt unit)",
                    u.state,
                    hex(&got),
                    u.hash
                ),
            ));
        }
        Ok(state)
    }
}

fn parse_bundle(bundle: &Path) -> Result<Parsed, Error> {
    let b = Bundle::open(bundle).map_err(|e| Error::input(e.to_string()))?;
    Ok(Parsed {
        ops: b.ops().map_err(|e| Error::input(e.to_string()))?,
        blob: b.data().map_err(|e| Error::input(e.to_string()))?,
        initial: b.initial().map_err(|e| Error::input(e.to_string()))?,
    })
}

/// The states after the first 0..=N call groups of the APM's program.
fn prefix_states(bundle: &Path, p: &Parsed, apm: &Apm) -> Result<Vec<CrashFs>, Error> {
    let prog = Program::build(apm, &p.ops, &p.initial, p.blob.len() as u64).map_err(|e| {
        Error::input(format!(
            "bundle {} under APM {}: {e}",
            bundle.display(),
            apm.name
        ))
    })?;
    let universe = CrashFs::universe(&p.initial, &p.ops)
        .map_err(|e| Error::input(format!("bundle {}: {e}", bundle.display())))?;
    let exp = Explorer::new(&prog, &p.ops, &p.blob, universe)
        .map_err(|e| Error::internal(format!("building crash states: {e}")))?;
    exp.prefix_states()
        .map_err(|e| Error::internal(format!("building crash states: {e}")))
}

fn bad_unit(unit: &Path, m: String) -> Error {
    Error::input(format!("unit {}: {m}", unit.display()))
}

/// The unit file, checked: its state's hash and its delta.
fn read_unit(unit: &Path) -> Result<(Unit, StateHash, Delta), Error> {
    let bad_unit = |m: String| bad_unit(unit, m);
    let text = std::fs::read(unit).map_err(|e| bad_unit(e.to_string()))?;
    let u: Unit = serde_json::from_slice(&text).map_err(|e| {
        bad_unit(format!(
            "not a valid work unit (corrupt or truncated?): {e}"
        ))
    })?;
    if u.format != UNIT_FORMAT || !(1..=UNIT_VERSION).contains(&u.version) {
        return Err(bad_unit(format!(
            "not a version 1..={UNIT_VERSION} {UNIT_FORMAT} file (version {}: written by another intact?)",
            u.version
        )));
    }
    if u.version == 1 && u.protocol != CheckerProtocol::Process {
        return Err(bad_unit(
            "a version 1 unit has no \"protocol\" (corrupt unit)".into(),
        ));
    }
    let want =
        parse_hash(&u.hash).ok_or_else(|| bad_unit("\"hash\" is not 64 hex digits".into()))?;
    let delta = delta_of(&u.delta).map_err(|e| bad_unit(format!("corrupt delta: {e}")))?;
    if !u.timeout.is_finite() || u.timeout <= 0.0 {
        return Err(bad_unit(
            "\"timeout\" must be a positive number of seconds".into(),
        ));
    }
    Ok((u, want, delta))
}

/// The unit's APM: its text, or the built-in of its name.
fn unit_apm(unit: &Path, u: &Unit) -> Result<Apm, Error> {
    let apm = match &u.apm.source {
        Some(text) => Apm::parse(
            text,
            &format!("APM {} of unit {}", u.apm.name, unit.display()),
        ),
        None if u.apm.name.contains('/') || u.apm.name.ends_with(".toml") => {
            return Err(bad_unit(unit, format!("APM {:?} has no text", u.apm.name)))
        }
        None => Apm::resolve(&u.apm.name),
    }
    .map_err(|e| bad_unit(unit, e.to_string()))?;
    if apm.name != u.apm.name {
        return Err(bad_unit(
            unit,
            format!("APM text names {}, not {}", apm.name, u.apm.name),
        ));
    }
    Ok(apm)
}

impl UnitChecker {
    /// The runner for the unit's checker: the running one if it was started for the same
    /// checker, protocol and time limit, else a new one (the old one, and its server, end).
    fn runner_for(&mut self, u: &Unit) -> Result<&Runner, Error> {
        let key = RunnerKey::of(u);
        if self.runner.as_ref().is_some_and(|(k, _)| *k != key) {
            if let Some((_, old)) = self.runner.take() {
                drop(old.finish());
            }
        }
        if self.runner.is_none() {
            let runner = Runner::start_numbered(
                RunnerConfig {
                    checker: u.checker.clone(),
                    jobs: 1,
                    timeout: Some(Duration::from_secs_f64(u.timeout)),
                    scratch_parent: self.scratch.clone(),
                    keep_output_bytes: KEEP_OUTPUT,
                    protocol: u.protocol.runner(),
                },
                self.worker,
            )
            .map_err(|e| {
                let flag = crate::options::checker_flag(u.protocol.runner());
                Error::input(format!("{flag} on {}: {e}", self.host))
            })?;
            self.runner = Some((key, runner));
        }
        Ok(&self.runner.as_ref().expect("started above").1)
    }

    /// Runs the unit's checker on `state` (one job, as `intact check` runs it); stops on an
    /// interrupt.
    fn run_checker(&mut self, u: &Unit, state: CrashFs) -> Result<Outcome, Error> {
        self.jobs += 1;
        let id = self.jobs;
        let runner = self.runner_for(u)?;
        let job = Job {
            id,
            state_id: u.state.clone(),
            stdout: state.stdout.to_vec(),
            materialise: Box::new(move |d: &Path| state.materialise(d).map_err(|e| e.to_string())),
            release: None,
            patch: None,
        };
        if runner.submit(job).is_err() {
            self.runner = None;
            return Err(Error::internal("the checker runner stopped"));
        }
        loop {
            let runner = &self.runner.as_ref().expect("submitted to it").1;
            if crate::interrupted() {
                runner.cancel_handle().cancel();
                self.runner = None;
                return Err(Error::interrupted("interrupted: no verdict written"));
            }
            // Woken when the outcome is pushed; the limit only bounds how long an
            // interrupt waits to be seen.
            let mut done = runner.drain_wait(Duration::from_millis(50));
            assert!(done.len() <= 1, "one job at a time");
            if let Some(o) = done.pop() {
                assert_eq!(o.id, id, "the outcome of the job just submitted");
                return Ok(o);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// `intact check --dask`: the Python driver.

/// Replaces this process by `python3 -m intact.dask_run --scheduler S --intact THIS -- ARGS`,
/// ARGS being this `intact check`'s arguments without --dask.
pub fn exec_dask(scheduler: &str) -> Result<(), Error> {
    use std::os::unix::process::CommandExt;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(at) = argv.iter().position(|a| a == "check") else {
        return Err(Error::input("--dask: only `intact check` runs on Dask"));
    };
    let mut rest = Vec::new();
    let mut it = argv[at + 1..].iter();
    while let Some(a) = it.next() {
        if a == "--dask" {
            it.next();
        } else if !a.to_string_lossy().starts_with("--dask=") {
            rest.push(a.clone());
        }
    }
    let python = std::env::var_os("INTACT_PYTHON").unwrap_or_else(|| "python3".into());
    let me = std::env::current_exe()
        .map_err(|e| Error::internal(format!("--dask: where is intact? {e}")))?;
    // A development build finds the package in its source tree; an installed one needs
    // `pip install ./python`.
    let mut pypath = std::env::var_os("PYTHONPATH").unwrap_or_default();
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    if tree.join("intact/dask_run.py").is_file() {
        let mut p = tree.into_os_string();
        if !pypath.is_empty() {
            p.push(":");
            p.push(&pypath);
        }
        pypath = p;
    }
    let probe = std::process::Command::new(&python)
        .args(["-c", "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('intact.dask_run') else 3)"])
        .env("PYTHONPATH", &pypath)
        .stdout(std::process::Stdio::null())
        .status();
    match probe {
        Ok(s) if s.success() => {}
        Ok(_) => return Err(Error::input(format!("--dask: {} cannot import intact.dask_run: `pip install ./python` (and \"dask[distributed]\") or set PYTHONPATH", python.to_string_lossy()))),
        Err(e) => return Err(Error::input(format!("--dask: cannot run {} (set INTACT_PYTHON): {e}", python.to_string_lossy()))),
    }
    // Options of the driver itself (--env, --retries, --cluster-opt, ...).
    let extra = match std::env::var("INTACT_DASK_OPTS") {
        Ok(s) => {
            shlex::split(&s).ok_or_else(|| Error::input("INTACT_DASK_OPTS: unbalanced quotes"))?
        }
        Err(_) => Vec::new(),
    };
    let err = std::process::Command::new(&python)
        .args([
            "-m",
            "intact.dask_run",
            "--scheduler",
            scheduler,
            "--intact",
        ])
        .arg(&me)
        .args(&extra)
        .arg("--")
        .args(&rest)
        .env("PYTHONPATH", &pypath)
        .exec();
    Err(Error::input(format!(
        "--dask: cannot run {}: {err}",
        python.to_string_lossy()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for n in 0..20 {
            let d: Vec<u8> = (0..n).map(|i| (i * 37 + 5) as u8).collect();
            assert_eq!(b64_decode(&b64_encode(&d)).unwrap(), d);
        }
        assert_eq!(b64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(b64_encode(b"fo"), "Zm8=");
        assert!(b64_decode("Zm8").is_none());
        assert!(b64_decode("Z=8=").is_none());
    }
}
