//! `intact record`: snapshot, trace, convert, self-check, write the bundle.

use crate::Failure;
use intact_bundle as bundle;
use intact_convert::{ConvertOptions, TaskExit};
use intact_model::{capture, IgnoreSet};
use intact_trace::tracer::{self, TraceConfig, TraceError};
use std::path::{Path, PathBuf};
use std::time::Instant;

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
    /// Set by `intact run` when --out is a temporary directory it removes: then the
    /// bundle's path is not worth printing.
    #[arg(skip)]
    pub temporary: bool,
    /// The workload: a command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
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

pub fn record(a: RecordArgs) -> Result<u8, Failure> {
    let started = Instant::now();
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::input(format!("cannot read the current directory: {e}")))?;
    // --- validate everything before running anything
    let dir = cwd.join(&a.dir);
    let root_abs = std::fs::canonicalize(&dir).map_err(|e| {
        Failure::input(format!(
            "--dir {}: {e} (give an existing directory)",
            a.dir.display()
        ))
    })?;
    if !root_abs.is_dir() {
        return Err(Failure::input(format!(
            "--dir {}: not a directory",
            a.dir.display()
        )));
    }
    let strace_version =
        tracer::strace_version(&a.strace).map_err(|e| Failure::input(e.to_string()))?;
    let program =
        tracer::find_command(&a.cmd[0], &cwd).map_err(|e| Failure::input(e.to_string()))?;
    if let Some(shell) = shell_wrapper(&program) {
        eprintln!(
            "intact: note: {} is a {shell} script: every step it runs is traced{}, which is slow. If it only execs the real program (a pyenv, asdf or rbenv shim), record that directly, e.g. `intact record -- /usr/bin/python3 app.py`{}",
            program.display(),
            if a.no_stacks { "" } else { " with stacks" },
            if a.no_stacks { "." } else { ", or add --no-stacks." }
        );
    }
    let out = cwd.join(&a.out);
    let out_name = out
        .file_name()
        .ok_or_else(|| Failure::input(format!("--out {}: not a file name", a.out.display())))?
        .to_owned();
    let out_parent = out.parent().unwrap_or(Path::new("/")).to_path_buf();
    let out_parent = std::fs::canonicalize(&out_parent).map_err(|e| {
        Failure::input(format!(
            "--out {}: the parent directory {}: {e}",
            a.out.display(),
            out_parent.display()
        ))
    })?;
    let out = out_parent.join(&out_name);
    if out.exists() && !a.force {
        return Err(Failure::input(format!(
            "--out {}: already exists (use --force to replace it, or choose another path)",
            out.display()
        )));
    }
    if out == root_abs {
        return Err(Failure::input(
            "--out must not be the recorded directory itself",
        ));
    }
    let staging_path = out_parent.join(format!(
        ".{}.partial-{}",
        out_name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::create_dir(&staging_path).map_err(|e| {
        Failure::input(format!(
            "--out {}: cannot write in {}: {e}",
            a.out.display(),
            out_parent.display()
        ))
    })?;
    let mut staging = Staging {
        path: staging_path,
        keep: false,
    };
    // The shim's directory (in $TMPDIR, which may lie inside the recorded directory).
    let shim_dir = tempfile::Builder::new()
        .prefix("intact-shim-")
        .tempdir()
        .map_err(|e| Failure::internal(format!("creating a temporary directory: {e}")))?;
    let shim_path = std::fs::canonicalize(shim_dir.path())
        .map_err(|e| Failure::internal(format!("{}: {e}", shim_dir.path().display())))?;
    // The bundle must not record itself, nor intact's own shim.
    let mut ignore = a.ignore.clone();
    for p in [&out, &staging.path, &shim_path] {
        if let Some(r) = rel_inside(&root_abs, p) {
            ignore.push(r);
        }
    }
    let ignore_set = IgnoreSet::new(&ignore).map_err(|e| Failure::input(e.to_string()))?;
    let filter = crate::ops_view::frame_filter(&a.frame_skip, &a.frame_keep)?;

    // --- snapshot
    let initial = capture(&root_abs, &ignore_set)
        .map_err(|e| Failure::input(format!("snapshot of {}: {e}", root_abs.display())))?;

    // --- trace
    let shim =
        tracer::install_shim(shim_dir.path()).map_err(|e| Failure::internal(e.to_string()))?;
    let raw = staging.path.join(bundle::RAW_TRACE);
    let cfg = TraceConfig {
        strace: a.strace.clone(),
        stacks: !a.no_stacks,
        max_string: a.max_write,
    };
    // Ctrl-C goes to the whole foreground group: the workload and strace stop by
    // themselves; intact must survive to clean up.
    crate::install_interrupt_handler();
    eprintln!(
        "intact: recording `{}` in {}",
        a.cmd.join(" "),
        root_abs.display()
    );
    let watch = crate::progress::TraceWatch::start(raw.clone());
    let status = tracer::run(&cfg, &a.cmd, &cwd, &raw, Some(&shim)).map_err(|e| match e {
        TraceError::Io { .. } => Failure::internal(e.to_string()),
        other => Failure::input(other.to_string()),
    });
    drop(watch);
    let status = status?;
    drop(shim_dir);
    if crate::interrupted() {
        return Err(Failure {
            code: 130,
            message: "interrupted: nothing written".into(),
        });
    }
    let raw_bytes = std::fs::read(&raw)
        .map_err(|e| Failure::internal(format!("reading the raw trace {}: {e}", raw.display())))?;
    let trace = intact_trace::parse_trace(&raw_bytes)
        .map_err(|e| Failure::internal(format!("parsing the raw trace: {e}")))?;
    if !trace.complete_last_line || (raw_bytes.is_empty() && status.code() != Some(0)) {
        return Err(Failure::input(format!(
            "the trace is cut short (strace ended with {status}); nothing written. Was strace killed, or the disk full?"
        )));
    }

    // --- convert
    let opts = ConvertOptions {
        root_abs: root_abs.clone(),
        cwd: cwd.clone(),
        ignore: ignore_set.clone(),
        filter,
        symbolize: !a.no_stacks,
        stdout: stdout_identity(),
    };
    let stdout_id = opts.stdout.clone();
    let conv = intact_convert::convert(&trace, initial.clone(), &opts)
        .map_err(|e| convert_failure(e, &raw_bytes, &raw))?;

    // --- final snapshot and bundle
    let final_state = capture(&root_abs, &ignore_set)
        .map_err(|e| Failure::internal(format!("final snapshot of {}: {e}", root_abs.display())))?;
    let b = |e: bundle::BundleError| Failure::internal(format!("writing the bundle: {e}"));
    bundle::write_state(&staging.path.join(bundle::INITIAL), &initial).map_err(b)?;
    bundle::write_state(&staging.path.join(bundle::FINAL), &final_state).map_err(b)?;
    bundle::write_ops(&staging.path.join(bundle::OPS), &conv.ops).map_err(b)?;
    std::fs::write(staging.path.join(bundle::DATA), &conv.blob)
        .map_err(|e| Failure::internal(format!("writing the bundle: {e}")))?;
    std::fs::write(staging.path.join(bundle::STDOUT), &conv.stdout)
        .map_err(|e| Failure::internal(format!("writing the bundle: {e}")))?;
    bundle::write_json(&staging.path.join(bundle::UNSUPPORTED), &conv.unsupported).map_err(b)?;
    let mut meta = bundle::Meta {
        format: bundle::FORMAT.into(),
        version: bundle::FORMAT_VERSION,
        intact_version: env!("CARGO_PKG_VERSION").into(),
        recorded_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        command: a.cmd.clone(),
        dir: root_abs.display().to_string(),
        cwd: cwd.display().to_string(),
        ignore,
        strace: strace_version,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        stacks: !a.no_stacks,
        frame_skip: a.frame_skip.clone(),
        frame_keep: a.frame_keep.clone(),
        stdout: stdout_id,
        workload: conv.root_exit.clone(),
        duration_secs: started.elapsed().as_secs_f64(),
        counts: counts(&conv),
        oracle_mismatch: None,
    };
    bundle::write_json(&staging.path.join(bundle::META), &meta).map_err(b)?;
    // The oracle reads the bundle back, so it checks the files as written.
    let opened = bundle::Bundle::open(&staging.path)
        .map_err(|e| Failure::internal(format!("reading back the bundle: {e}")))?;
    let mismatch = opened
        .verify()
        .map_err(|e| Failure::internal(format!("reading back the bundle: {e}")))?;
    if mismatch.is_some() {
        meta.oracle_mismatch = mismatch.clone();
        bundle::write_json(&staging.path.join(bundle::META), &meta).map_err(b)?;
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)
            .map_err(|e| Failure::internal(format!("--force: removing {}: {e}", out.display())))?;
    }
    std::fs::rename(&staging.path, &out).map_err(|e| {
        Failure::internal(format!(
            "moving the bundle into place at {}: {e}",
            out.display()
        ))
    })?;
    staging.keep = true;

    // --- report
    let hist = bundle::op_histogram(&conv.ops);
    let hist: Vec<String> = hist.iter().map(|(k, v)| format!("{v} {k}")).collect();
    eprintln!(
        "intact: {} system calls in {} tasks -> {} logical operations ({}){}",
        conv.calls,
        conv.tasks,
        conv.ops.len(),
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
    );
    for u in &conv.unsupported {
        let at = opts
            .filter
            .select(&u.first_stack)
            .map(|f| f.display())
            .unwrap_or_default();
        eprintln!(
            "intact: warning: {} × {} not modelled: {}{}{}",
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
        );
    }
    if !a.temporary {
        eprintln!("intact: bundle written to {}", out.display());
    }
    if let Some(d) = mismatch {
        return Err(Failure::internal(format!(
            "replay oracle FAILED: applying the logical operations to the snapshot does not reproduce the final directory: {d}. \
             The bundle is kept (marked) for diagnosis; please report this with the bundle."
        )));
    }
    match &conv.root_exit {
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

/// The bundle's counts of a conversion.
fn counts(conv: &intact_convert::Conversion) -> bundle::Counts {
    bundle::Counts {
        calls: conv.calls,
        tasks: conv.tasks,
        ops: conv.ops.len(),
        unsupported: conv.unsupported.len(),
    }
}

/// Our standard output as strace's `-y` prints it: the workload inherits it.
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
fn convert_failure(e: intact_convert::ConvertError, raw: &[u8], raw_path: &Path) -> Failure {
    if !e.is_malformed_input() {
        return Failure::internal(format!("converting the trace: {e}"));
    }
    let text = raw
        .split(|&b| b == b'\n')
        .nth(e.line().saturating_sub(1))
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .unwrap_or_default();
    Failure::input(format!(
        "{}:{}: {e}\n  the line: {text}\n  strace never writes such a line: the trace was edited or damaged; fix or delete the line and run again, or record again (nothing was changed)",
        raw_path.display(),
        e.line(),
    ))
}

/// `intact reconvert`: derive the logical operations again from a bundle's raw trace (for
/// example after upgrading intact), rerun the oracle, and report the conversion rate.
pub fn reconvert(path: &Path) -> Result<u8, Failure> {
    let b = bundle::Bundle::open(path).map_err(|e| Failure::input(e.to_string()))?;
    let m = &b.meta;
    let raw_path = path.join(bundle::RAW_TRACE);
    let raw = std::fs::read(&raw_path)
        .map_err(|e| Failure::input(format!("{}: {e}", raw_path.display())))?;
    let initial = b.initial().map_err(|e| Failure::input(e.to_string()))?;
    let ignore = IgnoreSet::new(&m.ignore).map_err(|e| Failure::input(e.to_string()))?;
    let filter = crate::ops_view::frame_filter(&m.frame_skip, &m.frame_keep)
        .map_err(|e| Failure::input(format!("the bundle's frame patterns: {}", e.message)))?;
    let opts = ConvertOptions {
        root_abs: m.dir.clone().into(),
        cwd: m.cwd.clone().into(),
        ignore,
        filter,
        symbolize: m.stacks,
        stdout: m.stdout.clone(),
    };
    let t0 = Instant::now();
    let trace = intact_trace::parse_trace(&raw)
        .map_err(|e| Failure::input(format!("parsing {}: {e}", raw_path.display())))?;
    let t1 = Instant::now();
    let conv = intact_convert::convert(&trace, initial, &opts)
        .map_err(|e| convert_failure(e, &raw, &raw_path))?;
    let t2 = Instant::now();
    let events = trace.events.len();
    let w = |e: bundle::BundleError| Failure::internal(format!("writing the bundle: {e}"));
    // Write next to the old files, then swap, so a failure leaves the bundle as it was.
    let ops_new = path.join(".ops.jsonl.new");
    let data_new = path.join(".data.bin.new");
    bundle::write_ops(&ops_new, &conv.ops).map_err(w)?;
    std::fs::write(&data_new, &conv.blob)
        .map_err(|e| Failure::internal(format!("writing {}: {e}", data_new.display())))?;
    std::fs::rename(&ops_new, path.join(bundle::OPS))
        .map_err(|e| Failure::internal(e.to_string()))?;
    std::fs::rename(&data_new, path.join(bundle::DATA))
        .map_err(|e| Failure::internal(e.to_string()))?;
    bundle::write_json(&path.join(bundle::UNSUPPORTED), &conv.unsupported).map_err(w)?;
    let mut meta = m.clone();
    meta.counts = counts(&conv);
    let reopened = bundle::Bundle::open(path).map_err(|e| Failure::internal(e.to_string()))?;
    let mismatch = reopened
        .verify()
        .map_err(|e| Failure::internal(e.to_string()))?;
    meta.oracle_mismatch = mismatch.clone();
    bundle::write_json(&path.join(bundle::META), &meta).map_err(w)?;
    let secs = (t2 - t0).as_secs_f64();
    println!(
        "{} trace lines, {events} events -> {} logical operations; parse {:.3} s, convert {:.3} s; {:.0} events/s",
        raw.iter().filter(|&&b| b == b'\n').count(),
        conv.ops.len(),
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        events as f64 / secs.max(1e-9)
    );
    match mismatch {
        None => Ok(0),
        Some(d) => Err(Failure::internal(format!(
            "replay oracle FAILED after reconversion: {d}"
        ))),
    }
}
