//! `intact blk record`: make the file system, mount it on a loop device whose backing file
//! is served by the recorder, run the workload there, unmount, write the log directory.
//!
//! Everything is staged in a hidden sibling of the output directory and renamed into place
//! only when complete; every mount, loop device and temporary file is undone on every
//! path out (guards), including Ctrl-C.

use crate::fskind::{FsKind, Tools};
use crate::logdir::{hex, Meta, Workload, SCHEMA};
use crate::recorder::Recorder;
use crate::sys::clone_file;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct RecordConfig {
    pub fs: FsKind,
    pub size: u64,
    pub mkfs_options: Vec<String>,
    pub mount_options: String,
    pub out: PathBuf,
    pub command: Vec<String>,
    /// Run with `sh -c` in the fresh file system before recording starts (its effects are
    /// part of the initial image, unmounted cleanly): e.g. `mkdir w` or loading a database.
    pub setup: Option<String>,
    /// Where the working image lives while recording (default: the temp dir).
    pub scratch: Option<PathBuf>,
    pub tools: Tools,
}

#[derive(Debug)]
pub enum RecordError {
    /// Bad arguments, a missing tool, an image too small: nothing was written.
    Input(String),
    /// A step failed; nothing was written.
    Failed(String),
    Interrupted,
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Records; returns the metadata written (its `workload.ok` says whether CMD succeeded).
pub fn record(cfg: &RecordConfig, interrupted: &dyn Fn() -> bool) -> Result<Meta, RecordError> {
    use RecordError::{Failed, Input};
    if cfg.command.is_empty() {
        return Err(Input(
            "no workload given: `intact blk record --fs ext4 --out LOG -- CMD ARGS`".into(),
        ));
    }
    if cfg.out.exists() {
        return Err(Input(format!(
            "{} already exists: choose a new output directory (the log is never written over)",
            cfg.out.display()
        )));
    }
    cfg.fs.check_tools().map_err(Input)?;
    if cfg.size < (16 << 20) {
        return Err(Input(format!(
            "--size {} bytes is too small for a file system image: use at least 16M (xfs: 300M)",
            cfg.size
        )));
    }
    let parent = match cfg.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = cfg
        .out
        .file_name()
        .ok_or_else(|| Input(format!("{}: not a usable output path", cfg.out.display())))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}.partial-", name.to_string_lossy()))
        .tempdir_in(&parent)
        .map_err(|e| {
            Input(format!(
                "cannot create the output next to {}: {e}",
                cfg.out.display()
            ))
        })?;
    let scratch = cfg.scratch.clone().unwrap_or_else(std::env::temp_dir);
    let work = tempfile::Builder::new()
        .prefix("intact-blk-record.")
        .tempdir_in(&scratch)
        .map_err(|e| {
            Input(format!(
                "cannot create scratch space in {}: {e}",
                scratch.display()
            ))
        })?;
    let backing = work.path().join("backing.img");
    let rec_dir = work.path().join("rec");
    let mnt = work.path().join("mnt");
    for d in [&rec_dir, &mnt] {
        std::fs::create_dir(d).map_err(|e| Failed(format!("{}: {e}", d.display())))?;
    }
    std::fs::File::create(&backing)
        .and_then(|f| f.set_len(cfg.size))
        .map_err(|e| {
            Failed(format!(
                "cannot create the {}-byte image {}: {e}",
                cfg.size,
                backing.display()
            ))
        })?;
    // A file system that refuses the size is an input problem (e.g. xfs under 300 MiB).
    let mkfs = cfg
        .fs
        .mkfs(&backing, &cfg.mkfs_options, &cfg.tools)
        .map_err(Input)?;
    if let Some(setup) = &cfg.setup {
        let daemon_log = work.path().join("setup-intactfs.log");
        let attached = cfg
            .fs
            .mount(
                &backing,
                &mnt,
                &cfg.mount_options,
                false,
                &cfg.tools,
                &daemon_log,
            )
            .map_err(Failed)?;
        let st = Command::new("sh")
            .arg("-c")
            .arg(setup)
            .current_dir(&mnt)
            .env("INTACT_MNT", &mnt)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Failed(format!("running the setup command: {e}")))?;
        attached.unmount().map_err(Failed)?;
        if !st.success() {
            return Err(Input(format!(
                "the setup command {setup:?} failed ({st}); nothing was recorded"
            )));
        }
    }
    clone_file(&backing, &staging.path().join("initial.img"))
        .map_err(|e| Failed(format!("saving the initial image: {e}")))?;
    if interrupted() {
        return Err(RecordError::Interrupted);
    }

    let recorder =
        Recorder::start(&backing, &rec_dir, &staging.path().join("blocks.log")).map_err(Failed)?;
    let daemon_log = work.path().join("intactfs.log");
    let attached = cfg
        .fs
        .mount(
            &recorder.file(),
            &mnt,
            &cfg.mount_options,
            true,
            &cfg.tools,
            &daemon_log,
        )
        .map_err(|e| {
            if cfg.fs == FsKind::Intactfs {
                Failed(format!(
                    "{e}\n{}",
                    std::fs::read_to_string(&daemon_log).unwrap_or_default()
                ))
            } else {
                Failed(e)
            }
        })?;

    let stdout_path = staging.path().join("stdout");
    let mut stdout = std::fs::File::create(&stdout_path)
        .map_err(|e| Failed(format!("{}: {e}", stdout_path.display())))?;
    let start = Instant::now();
    let mut child = Command::new(&cfg.command[0])
        .args(&cfg.command[1..])
        .current_dir(&mnt)
        .env("INTACT_MNT", &mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            Input(format!(
                "cannot run the workload {:?}: {e} (it runs in the new file system, mounted at {}; give a program on your PATH, an absolute path, or one relative to your directory)",
                cfg.command[0],
                mnt.display()
            ))
        })?;
    // What the workload prints goes into the log as it arrives, between the device
    // requests around it (a checker's durability test needs to know what was printed
    // before each crash point), and into `stdout`. Read late, a chunk is logged after
    // requests that really followed it: a crash image then sees less output, never more.
    let pipe = child
        .stdout
        .take()
        .ok_or_else(|| Failed("the workload's stdout".into()))?;
    let sink = recorder.output_sink();
    let reader = std::thread::spawn(move || -> Result<(), String> {
        use std::io::{Read, Write};
        let mut pipe = pipe;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading the workload's output: {e}")),
            };
            sink.output(&buf[..n])?;
            stdout
                .write_all(&buf[..n])
                .map_err(|e| format!("saving the workload's output: {e}"))?;
        }
    });
    let pgid = child.id() as i32;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(Failed(format!("waiting for the workload: {e}"))),
        }
        if interrupted() {
            stop_group(pgid, &mut child);
            return Err(RecordError::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let seconds = start.elapsed().as_secs_f64();
    // Helpers it left running would keep the mount busy (and the output pipe open).
    // SAFETY: signalling a process group we created.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    // The group is gone; a process that left it (setsid) may still hold the output open.
    let waited = Instant::now();
    while !reader.is_finished() && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !reader.is_finished() {
        return Err(Failed("a process the workload started (outside its process group) still holds its standard output open; stop it and record again".into()));
    }
    reader
        .join()
        .map_err(|_| Failed("the output reader failed".into()))?
        .map_err(Failed)?;

    attached.unmount().map_err(|e| {
        Failed(format!(
            "{e} (the workload may have left a process using the mount)"
        ))
    })?;
    let counts = recorder.finish().map_err(Failed)?;
    let log = crate::log::BlockLog::open(&staging.path().join("blocks.log"))
        .map_err(|e| Failed(e.to_string()))?;
    let meta = Meta {
        schema: SCHEMA.into(),
        fs: cfg.fs,
        size: cfg.size,
        mkfs,
        mount_options: cfg.mount_options.clone(),
        command: cfg.command.clone(),
        workload: Workload {
            exit_code: status.code(),
            signal: status.signal(),
            ok: status.success(),
            seconds,
        },
        counts,
        epochs: log.epochs().len(),
        final_hash: hex(&log.final_hash),
        intact_version: env!("CARGO_PKG_VERSION").into(),
        kernel: kernel(),
        created_unix: now_unix(),
    };
    let text = serde_json::to_string_pretty(&meta).map_err(|e| Failed(e.to_string()))?;
    std::fs::write(staging.path().join("meta.json"), text + "\n")
        .map_err(|e| Failed(format!("writing meta.json: {e}")))?;
    if interrupted() {
        return Err(RecordError::Interrupted);
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &cfg.out) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(Failed(format!(
            "moving the log into {}: {e}",
            cfg.out.display()
        )));
    }
    Ok(meta)
}

/// SIGTERM to the workload's group, SIGKILL after 5 s; reaps the leader.
fn stop_group(pgid: i32, child: &mut std::process::Child) {
    // SAFETY: signalling a process group we created.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// One line about a recorded log, for messages.
pub fn describe(meta: &Meta) -> String {
    format!(
        "{} on {} ({} MiB): {} writes ({} KiB), {} flushes, {} discards, {} epochs",
        meta.command.join(" "),
        meta.fs.name(),
        meta.size >> 20,
        meta.counts.writes,
        meta.counts.bytes >> 10,
        meta.counts.flushes,
        meta.counts.discards,
        meta.epochs
    )
}
