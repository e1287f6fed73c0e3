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
/// Stages: check the input, make the image (and run the setup), save the initial image,
/// mount it through the recorder, run the workload, unmount, write meta.json, publish.
pub fn record(cfg: &RecordConfig, interrupted: &dyn Fn() -> bool) -> Result<Meta, RecordError> {
    check_input(cfg)?;
    let dirs = Dirs::new(cfg)?;
    let mkfs = make_image(cfg, &dirs)?;
    if let Some(setup) = &cfg.setup {
        run_setup(cfg, &dirs, setup)?;
    }
    clone_file(&dirs.backing, &dirs.staged("initial.img"))
        .map_err(|e| RecordError::Failed(format!("saving the initial image: {e}")))?;
    if interrupted() {
        return Err(RecordError::Interrupted);
    }
    // Declared in this order so that on every path out the mount goes before the recorder.
    let recorder = Recorder::start(&dirs.backing, &dirs.rec_dir, &dirs.staged("blocks.log"))
        .map_err(RecordError::Failed)?;
    let attached = mount_recorded(cfg, &dirs, &recorder)?;
    let (status, seconds) = run_workload(cfg, &dirs, &recorder, interrupted)?;
    attached.unmount().map_err(|e| {
        RecordError::Failed(format!(
            "{e} (the workload may have left a process using the mount)"
        ))
    })?;
    let counts = recorder.finish().map_err(RecordError::Failed)?;
    let meta = write_meta(cfg, &dirs, mkfs, status, seconds, counts)?;
    if interrupted() {
        return Err(RecordError::Interrupted);
    }
    dirs.publish(&cfg.out)?;
    Ok(meta)
}

/// Refuses what cannot work before anything is made.
fn check_input(cfg: &RecordConfig) -> Result<(), RecordError> {
    use RecordError::Input;
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
    Ok(())
}

/// The staging directory (a hidden sibling of the output, renamed into place when
/// complete) and the scratch directory (image, recorder files, mount point).
struct Dirs {
    work: tempfile::TempDir,
    staging: tempfile::TempDir,
    backing: PathBuf,
    rec_dir: PathBuf,
    mnt: PathBuf,
}

impl Dirs {
    fn new(cfg: &RecordConfig) -> Result<Dirs, RecordError> {
        use RecordError::{Failed, Input};
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
        let dirs = Dirs {
            backing: work.path().join("backing.img"),
            rec_dir: work.path().join("rec"),
            mnt: work.path().join("mnt"),
            work,
            staging,
        };
        for d in [&dirs.rec_dir, &dirs.mnt] {
            std::fs::create_dir(d).map_err(|e| Failed(format!("{}: {e}", d.display())))?;
        }
        Ok(dirs)
    }

    /// A file of the log directory being written.
    fn staged(&self, name: &str) -> PathBuf {
        self.staging.path().join(name)
    }

    /// A file of the scratch directory.
    fn scratch(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// Renames the complete log directory into place (removing it if that fails).
    fn publish(self, out: &std::path::Path) -> Result<(), RecordError> {
        let staged = self.staging.keep();
        if let Err(e) = std::fs::rename(&staged, out) {
            let _ = std::fs::remove_dir_all(&staged);
            return Err(RecordError::Failed(format!(
                "moving the log into {}: {e}",
                out.display()
            )));
        }
        Ok(())
    }
}

/// The backing image of `--size` bytes with a fresh file system; returns the mkfs command.
fn make_image(cfg: &RecordConfig, dirs: &Dirs) -> Result<Vec<String>, RecordError> {
    std::fs::File::create(&dirs.backing)
        .and_then(|f| f.set_len(cfg.size))
        .map_err(|e| {
            RecordError::Failed(format!(
                "cannot create the {}-byte image {}: {e}",
                cfg.size,
                dirs.backing.display()
            ))
        })?;
    // A file system that refuses the size is an input problem (e.g. xfs under 300 MiB).
    cfg.fs
        .mkfs(&dirs.backing, &cfg.mkfs_options, &cfg.tools)
        .map_err(RecordError::Input)
}

/// Runs `sh -c SETUP` in the fresh file system, mounted without recording, then unmounts
/// it cleanly: its effects are part of the initial image.
fn run_setup(cfg: &RecordConfig, dirs: &Dirs, setup: &str) -> Result<(), RecordError> {
    use RecordError::Failed;
    let daemon_log = dirs.scratch("setup-intactfs.log");
    let attached = cfg
        .fs
        .mount(
            &dirs.backing,
            &dirs.mnt,
            &cfg.mount_options,
            false,
            &cfg.tools,
            &daemon_log,
        )
        .map_err(Failed)?;
    let st = Command::new("sh")
        .arg("-c")
        .arg(setup)
        .current_dir(&dirs.mnt)
        .env("INTACT_MNT", &dirs.mnt)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| Failed(format!("running the setup command: {e}")))?;
    attached.unmount().map_err(Failed)?;
    if !st.success() {
        return Err(RecordError::Input(format!(
            "the setup command {setup:?} failed ({st}); nothing was recorded"
        )));
    }
    Ok(())
}

/// Mounts the file system on the recorder's device (intactfs: its daemon's log says why a
/// mount failed).
fn mount_recorded(
    cfg: &RecordConfig,
    dirs: &Dirs,
    recorder: &Recorder,
) -> Result<crate::fskind::Attached, RecordError> {
    let daemon_log = dirs.scratch("intactfs.log");
    cfg.fs
        .mount(
            &recorder.file(),
            &dirs.mnt,
            &cfg.mount_options,
            true,
            &cfg.tools,
            &daemon_log,
        )
        .map_err(|e| {
            if cfg.fs == FsKind::Intactfs {
                let daemon = std::fs::read_to_string(&daemon_log).unwrap_or_default();
                RecordError::Failed(format!("{e}\n{daemon}"))
            } else {
                RecordError::Failed(e)
            }
        })
}

/// Runs the workload in the mounted file system in a process group of its own, its output
/// logged as it arrives; returns its status and wall time in seconds.
fn run_workload(
    cfg: &RecordConfig,
    dirs: &Dirs,
    recorder: &Recorder,
    interrupted: &dyn Fn() -> bool,
) -> Result<(std::process::ExitStatus, f64), RecordError> {
    use RecordError::Failed;
    let stdout_path = dirs.staged("stdout");
    let stdout = std::fs::File::create(&stdout_path)
        .map_err(|e| Failed(format!("{}: {e}", stdout_path.display())))?;
    let start = Instant::now();
    let mut child = Command::new(&cfg.command[0])
        .args(&cfg.command[1..])
        .current_dir(&dirs.mnt)
        .env("INTACT_MNT", &dirs.mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            RecordError::Input(format!(
                "cannot run the workload {:?}: {e} (it runs in the new file system, mounted at {}; give a program on your PATH, an absolute path, or one relative to your directory)",
                cfg.command[0],
                dirs.mnt.display()
            ))
        })?;
    let pipe = child
        .stdout
        .take()
        .ok_or_else(|| Failed("the workload's stdout".into()))?;
    let reader = spawn_output_reader(pipe, recorder.output_sink(), stdout);
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
    join_output_reader(reader)?;
    Ok((status, seconds))
}

/// What the workload prints goes into the log as it arrives, between the device requests
/// around it (a checker's durability test needs to know what was printed before each crash
/// point), and into `stdout`. Read late, a chunk is logged after requests that really
/// followed it: a crash image then sees less output, never more.
fn spawn_output_reader(
    mut pipe: std::process::ChildStdout,
    sink: crate::recorder::OutputSink,
    mut stdout: std::fs::File,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || -> Result<(), String> {
        use std::io::{Read, Write};
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
    })
}

/// Waits for the output to end: the group is gone, but a process that left it (setsid)
/// may still hold the output open.
fn join_output_reader(
    reader: std::thread::JoinHandle<Result<(), String>>,
) -> Result<(), RecordError> {
    use RecordError::Failed;
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
        .map_err(Failed)
}

/// Writes meta.json into the staging directory.
fn write_meta(
    cfg: &RecordConfig,
    dirs: &Dirs,
    mkfs: Vec<String>,
    status: std::process::ExitStatus,
    seconds: f64,
    counts: crate::log::Counts,
) -> Result<Meta, RecordError> {
    use RecordError::Failed;
    let log = crate::log::BlockLog::open(&dirs.staged("blocks.log"))
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
    std::fs::write(dirs.staged("meta.json"), text + "\n")
        .map_err(|e| Failed(format!("writing meta.json: {e}")))?;
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
