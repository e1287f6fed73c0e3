//! The readers under test, each with its seeds and what one input exercises. An input may
//! be rejected with an error (that is the point); it must never panic.

use crate::mutate::{mutate_bytes, mutate_text, Rng};
use intact_blk::log::{BlockLog, LogWriter};
use intact_model::State;
use std::path::{Path, PathBuf};

/// Where the seed strace traces were recorded (`intact record --dir` of the seeds).
const SEED_ROOT: &str = "/tmp/intact-seed/work";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `intact_trace::parse_trace`, then `intact_convert::convert` and the replay oracle.
    Strace,
    /// `Apm::parse` of a TOML file, then `Program::build` over the seed bundle's operations.
    Apm,
    /// `Bundle::open`, its operations, states, unsupported list and the replay oracle.
    Bundle,
    /// A JSON report rendered as HTML, SARIF and JUnit (what `intact report` does).
    Report,
    /// `BlockLog::parse` of a block log and every accessor over its records.
    BlkLog,
}

pub const ALL: [Target; 5] = [
    Target::Strace,
    Target::Apm,
    Target::Bundle,
    Target::Report,
    Target::BlkLog,
];

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Strace => "strace",
            Target::Apm => "apm",
            Target::Bundle => "bundle",
            Target::Report => "report",
            Target::BlkLog => "blklog",
        }
    }
    pub fn parse(s: &str) -> Option<Target> {
        ALL.into_iter().find(|t| t.name() == s)
    }
}

pub fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds")
}

/// The seeds of every target and the scratch space the file-based readers need.
pub struct Fixture {
    traces: Vec<Vec<u8>>,
    apms: Vec<&'static str>,
    /// The seed bundle's files: (relative path, contents).
    bundle: Vec<(&'static str, Vec<u8>)>,
    report: Vec<u8>,
    blklog: Vec<u8>,
    /// Built once: compiling the frame filter's patterns costs more than converting.
    opts: intact_convert::ConvertOptions,
    /// A writable copy of the seed bundle, mutated one file at a time.
    scratch: tempfile::TempDir,
}

const BUNDLE_FILES: [&str; 9] = [
    "bundle.json",
    "ops.jsonl",
    "data.bin",
    "unsupported.json",
    "initial/manifest.json",
    "initial/contents.bin",
    "final/manifest.json",
    "final/contents.bin",
    "stdout",
];

fn read(p: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("seed {}: {e}", p.display()))
}

impl Fixture {
    pub fn load() -> Result<Fixture, String> {
        let dir = seeds_dir();
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("strace"))
            .map_err(|e| format!("seeds {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        names.sort();
        let traces = names
            .iter()
            .map(|p| read(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut bundle = Vec::new();
        for f in BUNDLE_FILES {
            bundle.push((f, read(&dir.join("bundle").join(f))?));
        }
        let scratch = tempfile::tempdir().map_err(|e| format!("scratch dir: {e}"))?;
        for (f, bytes) in &bundle {
            write_file(&scratch.path().join(f), bytes)?;
        }
        Ok(Fixture {
            traces,
            apms: intact_apm::BUILTINS.iter().map(|(_, t)| *t).collect(),
            bundle,
            report: read(&dir.join("report/report.json"))?,
            blklog: seed_blklog(scratch.path())?,
            opts: convert_options()?,
            scratch,
        })
    }

    /// One mutated input for `target`, run: `Ok` or `Err` (rejected) are both fine.
    pub fn run_one(&self, target: Target, rng: &mut Rng) -> Result<(), String> {
        match target {
            Target::Strace => {
                let seed = &self.traces[rng.below(self.traces.len())];
                strace_with(&mutate_text(seed, rng), &self.opts)
            }
            Target::Apm => {
                let seed = self.apms[rng.below(self.apms.len())];
                self.apm(&mutate_text(seed.as_bytes(), rng))
            }
            Target::Bundle => self.bundle(rng),
            Target::Report => report(&mutate_text(&self.report, rng)),
            // Half damaged bytes (stopped by the checksums), half well-formed logs of
            // records at boundary offsets and sizes (past the checksums, into the bounds).
            Target::BlkLog if rng.below(2) == 0 => blklog(&mutate_bytes(&self.blklog, rng)),
            Target::BlkLog => blklog(&generated_blklog(self.scratch.path(), rng)?),
        }
    }

    fn apm(&self, text: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
        let apm = intact_apm::Apm::parse(text, "fuzz").map_err(|e| e.to_string())?;
        let b = intact_bundle::Bundle::open(self.scratch.path()).map_err(|e| e.to_string())?;
        let ops = b.ops().map_err(|e| e.to_string())?;
        let initial = b.initial().map_err(|e| e.to_string())?;
        intact_apm::Program::build(&apm, &ops, &initial, 1 << 20).map_err(|e| e.to_string())?;
        Ok(())
    }

    fn bundle(&self, rng: &mut Rng) -> Result<(), String> {
        let (name, seed) = &self.bundle[rng.below(self.bundle.len())];
        let input = if name.ends_with(".bin") || *name == "stdout" {
            mutate_bytes(seed, rng)
        } else {
            mutate_text(seed, rng)
        };
        let path = self.scratch.path().join(name);
        write_file(&path, &input)?;
        // Put the seed back even when the reader panics: later inputs start from it.
        let _restore = Restore { path, bytes: seed };
        open_bundle(self.scratch.path())
    }
}

struct Restore<'a> {
    path: PathBuf,
    bytes: &'a [u8],
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        // A seed that cannot be put back spoils the rest of the run: stop it.
        if let Err(e) = write_file(&self.path, self.bytes) {
            eprintln!("intact-fuzz: restoring the seed bundle: {e}");
            std::process::exit(2);
        }
    }
}

fn write_file(p: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(p, bytes).map_err(|e| format!("{}: {e}", p.display()))
}

fn convert_options() -> Result<intact_convert::ConvertOptions, String> {
    Ok(intact_convert::ConvertOptions {
        root_abs: SEED_ROOT.into(),
        cwd: SEED_ROOT.into(),
        ignore: intact_model::IgnoreSet::new(&[]).map_err(|e| e.to_string())?,
        filter: intact_symbol::FrameFilter::new(&[]).map_err(|e| e.to_string())?,
        symbolize: false,
        stdout: None,
    })
}

/// Parse, convert, and replay the operations on the initial state (the oracle).
pub fn strace(raw: &[u8]) -> Result<(), String> {
    strace_with(raw, &convert_options()?)
}

fn strace_with(raw: &[u8], opts: &intact_convert::ConvertOptions) -> Result<(), String> {
    let trace = intact_trace::parse_trace(raw).map_err(|e| e.to_string())?;
    let conv = intact_convert::convert(&trace, State::empty(), opts).map_err(|e| e.to_string())?;
    let mut replay = State::empty();
    for op in &conv.ops {
        replay
            .apply(&op.op, &conv.blob)
            .map_err(|e| e.to_string())?;
    }
    match replay.diff(&conv.state) {
        None => Ok(()),
        Some(d) => Err(format!("replay differs: {d}")),
    }
}

fn open_bundle(dir: &Path) -> Result<(), String> {
    let b = intact_bundle::Bundle::open(dir).map_err(|e| e.to_string())?;
    b.unsupported().map_err(|e| e.to_string())?;
    b.final_state().map_err(|e| e.to_string())?;
    b.verify().map_err(|e| e.to_string())?;
    Ok(())
}

pub fn report(text: &[u8]) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if v["schema"] != intact_report::SCHEMA {
        return Err("not a report".into());
    }
    let source = |_: &str| Some("int main(void) {\n    return 0;\n}\n".to_string());
    let ctx = intact_report::Context {
        report: &v,
        ops: None,
        source: &source,
        source_root: None,
    };
    intact_report::html::render(&ctx)?;
    intact_report::sarif::render(&ctx)?;
    intact_report::junit::render(&ctx)?;
    Ok(())
}

pub fn blklog(bytes: &[u8]) -> Result<(), String> {
    let log = BlockLog::parse(Path::new("fuzz.log"), bytes.to_vec()).map_err(|e| e.to_string())?;
    for i in 0..log.records.len() {
        log.data(i);
        log.flush_ending(i);
        log.output_before(i);
    }
    log.output_before(log.records.len());
    log.epochs();
    log.counts();
    Ok(())
}

/// A small block log with every kind of record, written by the real writer.
fn seed_blklog(dir: &Path) -> Result<Vec<u8>, String> {
    let p = dir.join("seed.log");
    let e = |e: intact_blk::log::LogError| e.to_string();
    let mut w = LogWriter::create(&p, 1 << 20).map_err(e)?;
    w.write(0, &[1u8; 4096], false).map_err(e)?;
    w.output(b"step 1\n").map_err(e)?;
    w.flush().map_err(e)?;
    w.write(8192, &[2u8; 1024], true).map_err(e)?;
    w.discard(4096, 4096).map_err(e)?;
    w.write(512, b"tail", false).map_err(e)?;
    w.flush().map_err(e)?;
    w.finish([7u8; 32]).map_err(e)?;
    read(&p)
}

/// A log written by the real writer from random records at boundary offsets and lengths.
fn generated_blklog(dir: &Path, rng: &mut Rng) -> Result<Vec<u8>, String> {
    const EDGES: [u64; 8] = [0, 1, 511, 512, 4096, 1 << 20, u64::MAX / 2, u64::MAX - 511];
    let pick = |rng: &mut Rng| match rng.below(3) {
        0 => EDGES[rng.below(EDGES.len())],
        _ => (rng.below(4096) as u64) * 512,
    };
    let p = dir.join("generated.log");
    let e = |e: intact_blk::log::LogError| e.to_string();
    let device = [0, 512, 1 << 20, u64::MAX][rng.below(4)];
    let mut w = LogWriter::create(&p, device).map_err(e)?;
    for _ in 0..rng.below(12) {
        match rng.below(5) {
            0 => w.flush().map_err(e)?,
            1 => w.discard(pick(rng), pick(rng)).map_err(e)?,
            2 => w.output(b"out").map_err(e)?,
            _ => {
                let len = [0usize, 1, 512, 4096][rng.below(4)];
                w.write(pick(rng), &vec![0xA5; len], rng.below(2) == 0)
                    .map_err(e)?
            }
        }
    }
    w.finish([1u8; 32]).map_err(e)?;
    read(&p)
}
