//! `intact record`'s pipeline, in stages: validate the request ([`Plan::new`]), snapshot
//! the directory, trace the workload, convert the trace, write the bundle and check it
//! against the replay oracle.

use crate::Error;
use intact_bundle as bundle;
use intact_convert::{Conversion, ConvertError, ConvertOptions, RawTraceFile, TraceInput};
use intact_model::{capture, IgnoreSet, State, TaskExit};
use intact_trace::tracer::{self, TraceConfig, TraceError};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to record (the `intact record` flags of the same names).
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Directory whose crash consistency matters (relative to the working directory).
    pub dir: PathBuf,
    /// Where to write the bundle.
    pub out: PathBuf,
    /// Paths left out (globs relative to `dir`).
    pub ignore: Vec<String>,
    pub frame_skip: Vec<String>,
    pub frame_keep: Vec<String>,
    /// Capture native stacks.
    pub stacks: bool,
    /// Largest single write captured exactly.
    pub max_write_bytes: usize,
    /// Replace an existing bundle at `out`.
    pub force: bool,
    /// The strace binary.
    pub strace: PathBuf,
    /// Give the workload a pseudo-terminal as stdout (`false`: `--keep-buffering`).
    pub stdout_terminal: bool,
    /// The workload: a command and its arguments.
    pub cmd: Vec<String>,
}

/// What the caller shows while recording.
pub trait Observer {
    /// A line for the user (a note, a warning, the summary).
    fn note(&mut self, _line: &str) {}
    /// The workload starts under the tracer, writing its raw trace to `raw`. From here
    /// until the trace ends an interrupt must not kill intact (it cleans up).
    fn trace_started(&mut self, _raw: &Path) {}
    /// The workload and the tracer have ended.
    fn trace_ended(&mut self) {}
}

/// A bundle written.
pub struct Recorded {
    /// Where it is.
    pub out: PathBuf,
    /// How the workload ended, if the trace says.
    pub workload: Option<TaskExit>,
    /// The replay oracle's first difference when it failed (the bundle is kept, marked).
    pub oracle_mismatch: Option<String>,
}

/// The staging directory: removed on every failure path unless kept on purpose.
struct Staging {
    path: PathBuf,
    keep: bool,
}
impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn rel_inside(root: &Path, p: &Path) -> Option<String> {
    p.strip_prefix(root)
        .ok()
        .map(|r| r.to_string_lossy().into_owned())
        .filter(|r| !r.is_empty())
}

/// A validated request: absolute paths, the tracer's version, where the bundle goes.
struct Plan {
    cwd: PathBuf,
    root_abs: PathBuf,
    strace_version: String,
    out: PathBuf,
    out_parent: PathBuf,
    out_name: std::ffi::OsString,
}

impl Plan {
    /// Validates everything before running anything.
    fn new(a: &RecordOptions, observer: &mut dyn Observer) -> Result<Plan, Error> {
        let cwd = std::env::current_dir()
            .map_err(|e| Error::input(format!("cannot read the current directory: {e}")))?;
        let dir = cwd.join(&a.dir);
        let root_abs = std::fs::canonicalize(&dir).map_err(|e| {
            Error::input(format!(
                "--dir {}: {e} (give an existing directory)",
                a.dir.display()
            ))
        })?;
        if !root_abs.is_dir() {
            return Err(Error::input(format!(
                "--dir {}: not a directory",
                a.dir.display()
            )));
        }
        let strace_version =
            tracer::strace_version(&a.strace).map_err(|e| Error::input(e.to_string()))?;
        let program =
            tracer::find_command(&a.cmd[0], &cwd).map_err(|e| Error::input(e.to_string()))?;
        if let Some(shell) = shell_wrapper(&program) {
            observer.note(&format!(
                "note: {} is a {shell} script: every step it runs is traced{}, which is slow. If it only execs the real program (a pyenv, asdf or rbenv shim), record that directly, e.g. `intact record -- /usr/bin/python3 app.py`{}",
                program.display(),
                if a.stacks { " with stacks" } else { "" },
                if a.stacks { ", or add --no-stacks." } else { "." }
            ));
        }
        let (out, out_parent, out_name) = out_path(a, &cwd)?;
        if out == root_abs {
            return Err(Error::input(
                "--out must not be the recorded directory itself",
            ));
        }
        Ok(Plan {
            cwd,
            root_abs,
            strace_version,
            out,
            out_parent,
            out_name,
        })
    }

    /// The staging directory next to the bundle's place.
    fn staging(&self, a: &RecordOptions) -> Result<Staging, Error> {
        let path = self.out_parent.join(format!(
            ".{}.partial-{}",
            self.out_name.to_string_lossy(),
            std::process::id()
        ));
        std::fs::create_dir(&path).map_err(|e| {
            Error::input(format!(
                "--out {}: cannot write in {}: {e}",
                a.out.display(),
                self.out_parent.display()
            ))
        })?;
        Ok(Staging { path, keep: false })
    }
}

/// `--out` made absolute (its parent canonical); refused when it exists without `force`.
fn out_path(
    a: &RecordOptions,
    cwd: &Path,
) -> Result<(PathBuf, PathBuf, std::ffi::OsString), Error> {
    let out = cwd.join(&a.out);
    let out_name = out
        .file_name()
        .ok_or_else(|| Error::input(format!("--out {}: not a file name", a.out.display())))?
        .to_owned();
    let out_parent = out.parent().unwrap_or(Path::new("/")).to_path_buf();
    let out_parent = std::fs::canonicalize(&out_parent).map_err(|e| {
        Error::input(format!(
            "--out {}: the parent directory {}: {e}",
            a.out.display(),
            out_parent.display()
        ))
    })?;
    let out = out_parent.join(&out_name);
    if out.exists() && !a.force {
        return Err(Error::input(format!(
            "--out {}: already exists (use --force to replace it, or choose another path)",
            out.display()
        )));
    }
    Ok((out, out_parent, out_name))
}

/// Records `a.cmd` into a bundle at `a.out`.
pub fn record(a: &RecordOptions, observer: &mut dyn Observer) -> Result<Recorded, Error> {
    let started = Instant::now();
    assert!(!a.cmd.is_empty(), "the workload is a command");
    let plan = Plan::new(a, observer)?;
    let mut staging = plan.staging(a)?;
    // The shim's directory (in $TMPDIR, which may lie inside the recorded directory).
    let shim_dir = tempfile::Builder::new()
        .prefix("intact-shim-")
        .tempdir()
        .map_err(|e| Error::internal(format!("creating a temporary directory: {e}")))?;
    let shim_path = std::fs::canonicalize(shim_dir.path())
        .map_err(|e| Error::internal(format!("{}: {e}", shim_dir.path().display())))?;
    // The bundle must not record itself, nor intact's own shim.
    let mut ignore = a.ignore.clone();
    for p in [&plan.out, &staging.path, &shim_path] {
        if let Some(r) = rel_inside(&plan.root_abs, p) {
            ignore.push(r);
        }
    }
    let ignore_set = IgnoreSet::new(&ignore).map_err(|e| Error::input(e.to_string()))?;
    let filter = crate::view::frame_filter(&a.frame_skip, &a.frame_keep)?;
    let initial = capture(&plan.root_abs, &ignore_set)
        .map_err(|e| Error::input(format!("snapshot of {}: {e}", plan.root_abs.display())))?;
    let (raw, status, terminal) = trace(a, &plan, &staging, shim_dir, observer)?;
    let opts = ConvertOptions {
        root_abs: plan.root_abs.clone(),
        cwd: plan.cwd.clone(),
        ignore: ignore_set.clone(),
        filter,
        symbolize: a.stacks,
        stdout: terminal.or_else(stdout_identity),
    };
    let conv = convert_to(
        &RawTraceFile::new(&raw),
        initial.clone(),
        &opts,
        &staging.path.join(bundle::OPS),
    );
    let conv = whole_trace(conv, &raw, status)?;
    let final_state = capture(&plan.root_abs, &ignore_set).map_err(|e| {
        Error::internal(format!(
            "final snapshot of {}: {e}",
            plan.root_abs.display()
        ))
    })?;
    let meta = meta(a, &plan, ignore, &opts, &conv, started);
    let mismatch = write_bundle(&staging.path, &initial, &final_state, &conv, meta)?;
    move_into_place(&mut staging, &plan.out)?;
    summary(&conv, &opts, observer);
    Ok(Recorded {
        out: plan.out,
        workload: conv.root_exit,
        oracle_mismatch: mismatch,
    })
}

/// Converts `trace`, writing its operations to `ops_path` as they are made (none are kept
/// in memory; issue 29).
fn convert_to(
    trace: &dyn TraceInput,
    initial: State,
    opts: &ConvertOptions,
    ops_path: &Path,
) -> Result<Conversion, ConvertFailure> {
    let mut w = bundle::OpWriter::create(ops_path).map_err(ConvertFailure::Bundle)?;
    let mut sink = |op: intact_model::Op| w.write(&op).map_err(|e| e.to_string());
    let conv = intact_convert::convert_into(trace, initial, opts, &mut sink)
        .map_err(ConvertFailure::Convert)?;
    assert_eq!(w.written(), conv.op_count, "every operation written");
    w.finish().map_err(ConvertFailure::Bundle)?;
    Ok(conv)
}

/// Why [`convert_to`] failed: the trace, or writing the operations.
enum ConvertFailure {
    Convert(intact_convert::ConvertError),
    Bundle(bundle::BundleError),
}

/// Runs the workload under the tracer; returns the raw trace's path, how the tracer ended
/// and the terminal the workload had as stdout. The trace is parsed as the conversion reads
/// it: a million-call trace is hundreds of MB of text.
fn trace(
    a: &RecordOptions,
    plan: &Plan,
    staging: &Staging,
    shim_dir: tempfile::TempDir,
    observer: &mut dyn Observer,
) -> Result<(PathBuf, std::process::ExitStatus, Option<String>), Error> {
    let shim = tracer::install_shim(shim_dir.path()).map_err(|e| Error::internal(e.to_string()))?;
    let raw = staging.path.join(bundle::RAW_TRACE);
    let cfg = TraceConfig {
        strace: a.strace.clone(),
        stacks: a.stacks,
        max_string: a.max_write_bytes,
        stdout_terminal: a.stdout_terminal,
    };
    observer.note(&format!(
        "recording `{}` in {}",
        a.cmd.join(" "),
        plan.root_abs.display()
    ));
    // Ctrl-C goes to the whole foreground group: the workload and strace stop by
    // themselves; intact must survive to clean up (the observer arranges that).
    observer.trace_started(&raw);
    let traced = tracer::run(&cfg, &a.cmd, &plan.cwd, &raw, Some(&shim)).map_err(|e| match e {
        TraceError::Io { .. } => Error::internal(e.to_string()),
        other => Error::input(other.to_string()),
    });
    observer.trace_ended();
    let traced = traced?;
    let status = traced.status;
    drop(shim_dir);
    if crate::interrupted() {
        return Err(Error::interrupted("interrupted: nothing written"));
    }
    Ok((raw, status, traced.stdout_terminal))
}

/// The conversion of a whole trace, or why not: a trace cut short (strace killed, disk
/// full) is an input error, whatever the conversion made of its last line; a line the
/// parser does not know is intact's fault (strace wrote it).
fn whole_trace(
    conv: Result<Conversion, ConvertFailure>,
    raw: &Path,
    status: std::process::ExitStatus,
) -> Result<Conversion, Error> {
    let cut_short = || {
        Error::input(format!(
            "the trace is cut short (strace ended with {status}); nothing written. Was strace killed, or the disk full?"
        ))
    };
    let len_bytes = std::fs::metadata(raw).map(|m| m.len()).unwrap_or(0);
    if len_bytes == 0 && status.code() != Some(0) {
        return Err(cut_short());
    }
    match conv {
        Ok(c) if c.trace_end.complete_last_line => Ok(c),
        Ok(_) => Err(cut_short()),
        Err(_) if !ends_with_newline(raw) => Err(cut_short()),
        Err(ConvertFailure::Convert(ConvertError::Parse(e))) => {
            Err(Error::internal(format!("parsing the raw trace: {e}")))
        }
        Err(e) => Err(convert_failure(e, raw)),
    }
}

/// Whether a non-empty file's last byte is a newline (an empty file: true).
fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut last = [0u8; 1];
    match f.seek(SeekFrom::End(-1)) {
        Ok(_) => f.read_exact(&mut last).is_ok() && last[0] == b'\n',
        Err(_) => true,
    }
}

/// The bundle's metadata (docs/bundle.md).
fn meta(
    a: &RecordOptions,
    plan: &Plan,
    ignore: Vec<String>,
    opts: &ConvertOptions,
    conv: &Conversion,
    started: Instant,
) -> bundle::Meta {
    bundle::Meta {
        format: bundle::FORMAT.into(),
        version: bundle::FORMAT_VERSION,
        intact_version: env!("CARGO_PKG_VERSION").into(),
        recorded_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        command: a.cmd.clone(),
        dir: plan.root_abs.display().to_string(),
        cwd: plan.cwd.display().to_string(),
        ignore,
        strace: plan.strace_version.clone(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        stacks: a.stacks,
        frame_skip: a.frame_skip.clone(),
        frame_keep: a.frame_keep.clone(),
        stdout: opts.stdout.clone(),
        stdout_mode: Some(if a.stdout_terminal {
            bundle::StdoutMode::Terminal
        } else {
            bundle::StdoutMode::Inherited
        }),
        workload: conv.root_exit.clone(),
        duration_secs: started.elapsed().as_secs_f64(),
        counts: counts(conv),
        oracle_mismatch: None,
    }
}

/// Writes the bundle's files into `dir`, reads them back and runs the replay oracle;
/// returns its first difference (also marked in the metadata) when it fails.
fn write_bundle(
    dir: &Path,
    initial: &State,
    final_state: &State,
    conv: &Conversion,
    mut meta: bundle::Meta,
) -> Result<Option<String>, Error> {
    let b = |e: bundle::BundleError| Error::internal(format!("writing the bundle: {e}"));
    let io = |e: std::io::Error| Error::internal(format!("writing the bundle: {e}"));
    bundle::write_state(&dir.join(bundle::INITIAL), initial).map_err(b)?;
    bundle::write_state(&dir.join(bundle::FINAL), final_state).map_err(b)?;
    // ops.jsonl is already there: written during the conversion (convert_to).
    std::fs::write(dir.join(bundle::DATA), &conv.blob).map_err(io)?;
    std::fs::write(dir.join(bundle::STDOUT), &conv.stdout).map_err(io)?;
    bundle::write_json(&dir.join(bundle::UNSUPPORTED), &conv.unsupported).map_err(b)?;
    bundle::write_json(&dir.join(bundle::META), &meta).map_err(b)?;
    // The oracle reads the bundle back, so it checks the files as written.
    let opened = bundle::Bundle::open(dir)
        .map_err(|e| Error::internal(format!("reading back the bundle: {e}")))?;
    let mismatch = opened
        .verify()
        .map_err(|e| Error::internal(format!("reading back the bundle: {e}")))?;
    if mismatch.is_some() {
        meta.oracle_mismatch = mismatch.clone();
        bundle::write_json(&dir.join(bundle::META), &meta).map_err(b)?;
    }
    Ok(mismatch)
}

/// Replaces whatever is at `out` (only there with --force) by the staged bundle.
fn move_into_place(staging: &mut Staging, out: &Path) -> Result<(), Error> {
    if out.exists() {
        std::fs::remove_dir_all(out)
            .map_err(|e| Error::internal(format!("--force: removing {}: {e}", out.display())))?;
    }
    std::fs::rename(&staging.path, out).map_err(|e| {
        Error::internal(format!(
            "moving the bundle into place at {}: {e}",
            out.display()
        ))
    })?;
    staging.keep = true;
    Ok(())
}

/// What was recorded, for the user: calls, operations by kind, calls not modelled.
fn summary(conv: &Conversion, opts: &ConvertOptions, observer: &mut dyn Observer) {
    let hist: Vec<String> = conv
        .op_names
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    observer.note(&format!(
        "{} system calls in {} tasks -> {} logical operations ({}){}",
        conv.calls,
        conv.tasks,
        conv.op_count,
        if hist.is_empty() {
            "none".to_string()
        } else {
            hist.join(", ")
        },
        if conv.ignored_calls > 0 {
            format!("; {} calls on ignored paths left out", conv.ignored_calls)
        } else {
            String::new()
        }
    ));
    for u in &conv.unsupported {
        let at = opts
            .filter
            .select(&u.first_stack)
            .map(|f| f.display())
            .unwrap_or_default();
        observer.note(&format!(
            "warning: {} × {} not modelled: {}{}{}",
            u.count,
            u.syscall,
            u.reason,
            u.first_path
                .as_ref()
                .map(|p| format!(" (first on {p})"))
                .unwrap_or_default(),
            if at.is_empty() {
                String::new()
            } else {
                format!(" at {at}")
            }
        ));
    }
}

/// The bundle's counts of a conversion.
fn counts(conv: &intact_convert::Conversion) -> bundle::Counts {
    bundle::Counts {
        calls: conv.calls,
        tasks: conv.tasks,
        ops: conv.op_count,
        unsupported: conv.unsupported.len(),
    }
}

/// The shell a program is a script of (`#!/bin/bash`, `#!/usr/bin/env sh`), if it is one:
/// such wrappers (version-manager shims) run many traced steps before the real program.
fn shell_wrapper(program: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..n].split(|&b| b == b'\n').next()?;
    let words = String::from_utf8_lossy(line.strip_prefix(b"#!")?).into_owned();
    let mut words = words.split_whitespace();
    let mut interp = words.next()?.rsplit('/').next()?.to_string();
    if interp == "env" {
        interp = words.find(|w| !w.starts_with('-'))?.to_string();
    }
    ["sh", "bash", "dash", "zsh", "ksh"]
        .contains(&interp.as_str())
        .then_some(interp)
}

/// Our standard output as strace's `-y` prints it: the workload inherits it.
fn stdout_identity() -> Option<String> {
    let p = std::fs::read_link("/proc/self/fd/1").ok()?;
    Some(
        p.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    )
}

/// A conversion error as the user sees it: a malformed line (exit 2) is named by file,
/// line and text, with what to do; anything else is the converter's failure (exit 3).
fn convert_failure(f: ConvertFailure, raw_path: &Path) -> Error {
    let e = match f {
        ConvertFailure::Bundle(e) => return Error::internal(format!("writing the bundle: {e}")),
        ConvertFailure::Convert(e) if !e.is_malformed_input() => {
            return Error::internal(format!("converting the trace: {e}"))
        }
        ConvertFailure::Convert(e) => e,
    };
    // The line, read again from the file (the raw text is not kept in memory).
    let text = std::fs::File::open(raw_path)
        .ok()
        .and_then(|f| {
            use std::io::BufRead;
            std::io::BufReader::new(f)
                .split(b'\n')
                .nth(e.line().saturating_sub(1))
                .and_then(|l| l.ok())
                .map(|l| String::from_utf8_lossy(&l).into_owned())
        })
        .unwrap_or_default();
    Error::input(format!(
        "{}:{}: {e}\n  the line: {text}\n  strace never writes such a line: the trace was edited or damaged; fix or delete the line and run again, or record again (nothing was changed)",
        raw_path.display(),
        e.line(),
    ))
}

/// `intact reconvert`: derive the logical operations again from a bundle's raw trace (for
/// example after upgrading intact), rerun the oracle, and report the conversion rate.
///
/// Returns the conversion rate (a line for the user) and the oracle's first difference, if
/// it failed (the bundle then holds the new operations, marked).
pub fn reconvert(path: &Path) -> Result<(String, Option<String>), Error> {
    let b = bundle::Bundle::open(path).map_err(|e| Error::input(e.to_string()))?;
    let raw_path = path.join(bundle::RAW_TRACE);
    std::fs::metadata(&raw_path)
        .map_err(|e| Error::input(format!("{}: {e}", raw_path.display())))?;
    let initial = b.initial().map_err(|e| Error::input(e.to_string()))?;
    let opts = recorded_options(&b.meta)?;
    let started = Instant::now();
    // Write next to the old files, then swap, so a failure leaves the bundle as it was.
    let ops_new = path.join(".ops.jsonl.new");
    let conv =
        convert_to(&RawTraceFile::new(&raw_path), initial, &opts, &ops_new).map_err(|e| {
            let _ = std::fs::remove_file(&ops_new);
            match e {
                ConvertFailure::Convert(ConvertError::Parse(e)) => {
                    Error::input(format!("parsing {}: {e}", raw_path.display()))
                }
                e => convert_failure(e, &raw_path),
            }
        })?;
    let secs = started.elapsed().as_secs_f64();
    let mismatch = swap_in(path, &b.meta, &conv, &ops_new)?;
    let rate = format!(
        "{} trace lines, {} events -> {} logical operations; parsed and converted in {secs:.3} s; {:.0} events/s",
        conv.trace_end.newlines,
        conv.events,
        conv.op_count,
        conv.events as f64 / secs.max(1e-9)
    );
    Ok((rate, mismatch))
}

/// The conversion options a bundle was recorded with.
fn recorded_options(m: &bundle::Meta) -> Result<ConvertOptions, Error> {
    let ignore = IgnoreSet::new(&m.ignore).map_err(|e| Error::input(e.to_string()))?;
    let filter = crate::view::frame_filter(&m.frame_skip, &m.frame_keep)
        .map_err(|e| Error::input(format!("the bundle's frame patterns: {}", e.message)))?;
    Ok(ConvertOptions {
        root_abs: m.dir.clone().into(),
        cwd: m.cwd.clone().into(),
        ignore,
        filter,
        symbolize: m.stacks,
        stdout: m.stdout.clone(),
    })
}

/// Puts a new conversion in place of the bundle's (operations already at `ops_new`),
/// reruns the replay oracle and returns its first difference, if any.
fn swap_in(
    path: &Path,
    m: &bundle::Meta,
    conv: &Conversion,
    ops_new: &Path,
) -> Result<Option<String>, Error> {
    let data_new = path.join(".data.bin.new");
    let w = |e: bundle::BundleError| Error::internal(format!("writing the bundle: {e}"));
    std::fs::write(&data_new, &conv.blob)
        .map_err(|e| Error::internal(format!("writing {}: {e}", data_new.display())))?;
    std::fs::rename(ops_new, path.join(bundle::OPS)).map_err(|e| Error::internal(e.to_string()))?;
    std::fs::rename(&data_new, path.join(bundle::DATA))
        .map_err(|e| Error::internal(e.to_string()))?;
    bundle::write_json(&path.join(bundle::UNSUPPORTED), &conv.unsupported).map_err(w)?;
    let mut meta = m.clone();
    meta.counts = counts(conv);
    let reopened = bundle::Bundle::open(path).map_err(|e| Error::internal(e.to_string()))?;
    let mismatch = reopened
        .verify()
        .map_err(|e| Error::internal(e.to_string()))?;
    meta.oracle_mismatch = mismatch.clone();
    bundle::write_json(&path.join(bundle::META), &meta).map_err(w)?;
    Ok(mismatch)
}
