//! Mounting: lock the image, recover it, serve FUSE requests until unmounted (by
//! `umount`, `intact fs umount`, or SIGINT/SIGTERM/SIGHUP), then write everything back.

use crate::block::{BlockState, FsyncMode};
use crate::commit::Committer;
use crate::server::{Caps, Served, Server, State};
use fuser::{Config, MountOption, Session, SessionACL};
use intactfs::{Fs, MountOptions, MountReport, BLOCK};
use intactfs_device::ImageDevice;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, RwLock};
use std::time::Duration;

/// The default of `MountConfig::commit_interval` (ext4's and ccfs's journal commit interval).
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
/// The default of `MountConfig::durability_timeout`: OptFS's T_D (`001` §5, 30 s).
pub const DEFAULT_DURABILITY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Failed(String),
}

pub struct MountConfig {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    pub fsync: FsyncMode,
    /// Serve extended attributes (see [`crate::server::Server`]).
    pub xattr: bool,
    /// Commit a stream group once this many bytes of dirty data wait
    /// ([`default_dirty_limit`] if None).
    pub dirty_limit: Option<u64>,
    /// Refuse writes in atomic regions (ENOSPC) once this many bytes of dirty data wait
    /// (the engine's default, 1 GiB, if None): a region's data stays in memory until its end.
    pub region_limit: Option<u64>,
    /// Commit everything uncommitted this often (None: only on fsync, streamsync, sync, the
    /// dirty limit and unmount). Bounds what a crash can lose, as ext4's `commit=`.
    pub commit_interval: Option<Duration>,
    /// An osync'd commit is flushed at the latest this long after it was written (OptFS's
    /// durability timeout; earlier with any dsync, fsync, sync or periodic commit).
    pub durability_timeout: Duration,
    /// Request-handling threads.
    pub threads: usize,
    /// Let every user reach the mount (root only; permissions are then checked by the
    /// kernel from the files' modes, `default_permissions`).
    pub allow_other: bool,
    /// Write and flush every commit under the engine lock (the behaviour before commits
    /// moved out of it), for comparison.
    pub locked_commit: bool,
    /// Optional capabilities asked of the kernel (each off only for comparison).
    pub caps: Caps,
    /// A pmem image only: every fence also `msync`s the lines it persists, so that a
    /// committed transaction survives a power loss, not only the daemon's death (mount
    /// option `pmem_nosync` turns it off).
    pub pmem_sync: bool,
    /// A pmem image only: checkpoints run in a background thread, in units between
    /// requests, instead of inline at the commit that makes them due (mount option
    /// `pmem_ckpt=inline` turns it off; a commit that finds the log or the free blocks
    /// exhausted still checkpoints inline).
    pub pmem_background: bool,
    /// Serve requests through FUSE over io_uring (mount option `uring`; needs the kernel's
    /// `/sys/module/fuse/parameters/enable_uring`): mounting fails if the kernel does not
    /// offer it, and on a build without the `uring` feature ([`URING_BUILT`]).
    pub uring: bool,
    /// Mount read-only (mount option `ro`): recovery in memory only, no checkpoint, nothing
    /// written; every call that would change something fails with EROFS.
    pub read_only: bool,
}

/// What a mount ended with.
#[derive(Debug)]
pub struct Unmounted {
    pub recovery: MountReport,
    pub stats: intactfs::Stats,
}

/// An exclusive lock on an image: one mount, fsck, dump or embedded program at a time
/// (intactfs_device::lock_image).
pub use intactfs_device::ImageLock;

pub fn lock_image(image: &Path) -> Result<ImageLock, MountError> {
    intactfs_device::lock_image(image).map_err(|e| MountError::Input(e.to_string()))
}

/// The dirty limit when none is given: a tenth of the machine's memory (the kernel's
/// default background write-back threshold for its page cache), between 64 MiB and 2 GiB.
/// Dirty data lives in the daemon's memory until its commit; the periodic commit bounds
/// how long. The engine's own default (256 MiB) if the memory size cannot be read.
pub fn default_dirty_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    match total {
        Some(t) => (t / 10).clamp(64 << 20, 2 << 30),
        None => MountOptions::default().dirty_limit,
    }
}

/// Whether `p` is a mount whose FUSE daemon is gone ("Transport endpoint is not connected").
pub fn is_stale_mount(p: &Path) -> bool {
    matches!(std::fs::metadata(p), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN))
}

pub fn check_mountpoint(p: &Path) -> Result<(), MountError> {
    if is_stale_mount(p) {
        return Err(MountError::Input(format!(
            "{} is a stale mount: the file-system daemon that served it is gone (crashed or killed). Its image is recoverable: run `intact fs umount {}` to remove the stale mount, then mount the image again (mount replays the journal)",
            p.display(),
            p.display()
        )));
    }
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(MountError::Input(format!(
            "{}: not a directory (the mount point must be an existing directory)",
            p.display()
        ))),
        Err(e) => Err(MountError::Input(format!(
            "{}: {e} (the mount point must be an existing directory)",
            p.display()
        ))),
    }
}

/// The FUSE session's options for a mount of `cfg` (file-system subtype `subtype`).
pub fn session_config(cfg: &MountConfig, subtype: &str) -> Config {
    let source = std::path::absolute(&cfg.image)
        .unwrap_or_else(|_| cfg.image.clone())
        .display()
        .to_string();
    let mut options = vec![
        MountOption::FSName(source),
        MountOption::Subtype(subtype.into()),
        MountOption::DefaultPermissions,
        if cfg.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    if cfg.allow_other {
        // Shared with every user (as root): device files and set-user-id work as on disk.
        options.extend([MountOption::Dev, MountOption::Suid]);
    }
    let mut config = Config::default();
    config.mount_options = options;
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = true;
    #[cfg(feature = "uring")]
    {
        config.uring = cfg.uring;
    }
    config
}

/// Whether this build can serve FUSE over io_uring (the `uring` cargo feature, off by
/// default: the default build carries no io_uring code).
pub const URING_BUILT: bool = cfg!(feature = "uring");

/// Refuses `uring` (asked for FUSE over io_uring) on a build without the `uring` feature,
/// naming how to get it.
pub fn check_uring_built(uring: bool) -> Result<(), MountError> {
    if uring && !URING_BUILT {
        return Err(MountError::Input(
            "mount option uring: this build has no FUSE over io_uring; build with the \
             `uring` cargo feature (`cargo build -p intact-cli --features uring`)"
                .into(),
        ));
    }
    Ok(())
}

/// Signals detach the mount (lazily, so open files keep working until closed); the
/// request loop then ends and everything is written back. Close the handle and join the
/// thread once the session has ended.
pub fn detach_on_signals(
    mnt: &Path,
) -> Result<(signal_hook::iterator::Handle, std::thread::JoinHandle<()>), MountError> {
    let mnt = mnt.to_path_buf();
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
            .map_err(|e| MountError::Failed(format!("signal handlers: {e}")))?;
    let sig_handle = signals.handle();
    let sig_thread = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            if let Err(e) = detach(&mnt) {
                eprintln!("intactfs: unmounting {} on signal: {e}", mnt.display());
            }
        }
    });
    Ok((sig_handle, sig_thread))
}

/// Serves `server` on `cfg.mountpoint` until it is unmounted (every engine's mount): the
/// session mounted with `config`, the kernel's notifier handed to the server, signals
/// detaching the mount, and `background` (the engine's periodic work: the block engine's
/// commits, the pmem engine's reaper) running until the session ends; it must end when
/// its receiver's sender is dropped. `ready` runs once the mount is visible.
pub fn serve_until_unmounted<E: Served>(
    server: Server<E>,
    cfg: &MountConfig,
    config: &Config,
    background: impl FnOnce(mpsc::Receiver<()>) -> std::thread::JoinHandle<()>,
    ready: impl FnOnce(),
) -> Result<std::io::Result<()>, MountError> {
    let state = server.state.clone();
    let session = Session::new(server, &cfg.mountpoint, config).map_err(|e| {
        MountError::Failed(format!("mounting on {}: {e}", cfg.mountpoint.display()))
    })?;
    if let Ok(mut st) = state.write() {
        st.notifier = Some(session.notifier());
    }
    let (sig_handle, sig_thread) = detach_on_signals(&cfg.mountpoint)?;
    let (stop, stopped) = mpsc::channel::<()>();
    let worker = background(stopped);
    ready();
    let served = session.run();
    sig_handle.close();
    let _ = sig_thread.join();
    drop(stop);
    let _ = worker.join();
    Ok(served)
}

/// The engine out of the server after its session. A panic in a request handler poisons
/// the lock: the engine's memory is then not to be trusted, nothing more is written, and
/// the image `holds` what the message says (the last commit).
pub fn take_engine<E: Served>(
    state: &RwLock<State<E>>,
    served: &std::io::Result<()>,
    cfg: &MountConfig,
    holds: &str,
) -> Result<E, MountError> {
    let fs = match state.write() {
        Ok(mut st) => {
            E::unmounting(&mut st);
            st.fs.take()
        }
        Err(_) => None,
    };
    fs.ok_or_else(|| {
        let why = served.as_ref().err().map(|e| e.to_string());
        MountError::Failed(format!(
            "a request handler failed ({}); nothing more was written: {} holds {holds}",
            why.unwrap_or_else(|| "internal error".into()),
            cfg.image.display()
        ))
    })
}

/// The session's own error, reported after the engine was written back.
pub fn session_ended(served: std::io::Result<()>) -> Result<(), MountError> {
    served.map_err(|e| {
        MountError::Failed(format!(
            "the FUSE session ended with an error: {e} (everything was written back)"
        ))
    })
}

/// Opens and recovers a block (or txflash) image (its lock is held).
fn recover(cfg: &MountConfig) -> Result<(Fs<ImageDevice>, MountReport), MountError> {
    let dev = ImageDevice::open(&cfg.image, BLOCK)
        .map_err(|e| MountError::Input(format!("{}: {e}", cfg.image.display())))?;
    let opts = MountOptions {
        dirty_limit: cfg.dirty_limit.unwrap_or_else(default_dirty_limit),
        region_limit: cfg
            .region_limit
            .unwrap_or(MountOptions::default().region_limit),
        read_only: cfg.read_only,
        ..MountOptions::default()
    };
    Fs::mount(dev, opts).map_err(|e| {
        MountError::Input(format!(
            "{}: cannot mount: {e} (run `intact fs fsck {}` for a full report)",
            cfg.image.display(),
            cfg.image.display()
        ))
    })
}

/// Mounts a block (or txflash) image and serves it until unmounted. `ready` runs once the
/// mount is visible.
pub fn run(cfg: &MountConfig, ready: impl FnOnce(&MountReport)) -> Result<Unmounted, MountError> {
    check_mountpoint(&cfg.mountpoint)?;
    let lock = lock_image(&cfg.image)?;
    let (fs, recovery) = recover(cfg)?;
    let fuse = crate::block::server(fs, cfg.fsync, cfg.xattr, cfg.locked_commit, cfg.caps)
        .map_err(|e| MountError::Failed(format!("{}: {e}", cfg.image.display())))?;
    let state = fuse.state.clone();
    let commits = fuse.driver.commits.clone();
    let mut config = session_config(cfg, "intactfs");
    if recovery.read_only.is_some() {
        // The engine fell back to read-only (no room for the mount's checkpoint): the
        // kernel refuses changes too, so programs see EROFS at once.
        for o in &mut config.mount_options {
            if *o == MountOption::RW {
                *o = MountOption::RO;
            }
        }
    }
    let (every, td) = (cfg.commit_interval, cfg.durability_timeout);
    let committer = |stopped| spawn_committer(commits, every, td, stopped);
    let served = serve_until_unmounted(fuse, cfg, &config, committer, || ready(&recovery))?;

    let holds = "everything committed before (check it with `intact fs fsck`)";
    let fs = take_engine(&state, &served, cfg, holds)?;
    let stats = fs.stats();
    fs.unmount().map_err(|e| {
        MountError::Failed(format!(
            "writing back {} at unmount: {e}",
            cfg.image.display()
        ))
    })?;
    drop(lock);
    session_ended(served)?;
    Ok(Unmounted { recovery, stats })
}

/// Periodic commits (every `every`) and the durability timeout (`td`): the thread ends
/// when `stopped`'s sender is dropped (after the session), or when a commit fails.
fn spawn_committer(
    commits: Committer<BlockState>,
    every: Option<Duration>,
    td: Duration,
    stopped: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    // Wake often enough for both clocks (and for DURABLE waiters whose ticket a write's
    // dirty-limit commit made durable), at most once a second.
    let tick = every
        .map_or(td, |e| e.min(td))
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    std::thread::spawn(move || {
        let mut last_commit = std::time::Instant::now();
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
            let due = every.is_some_and(|e| last_commit.elapsed() >= e);
            if due {
                last_commit = std::time::Instant::now();
            }
            if commit_tick(&commits, due, td).is_err() {
                return;
            }
        }
    })
}

/// One tick of the committer: the periodic commit if `due`, regions of exited processes
/// aborted, DURABLE waiters answered, commits written, and a flush once the oldest
/// unflushed commit is `td` old. Err: the engine failed (logged); the thread stops.
fn commit_tick(commits: &Committer<BlockState>, due: bool, td: Duration) -> Result<(), ()> {
    let failure = || {
        (commits.lock().ok())
            .and_then(|st| st.failure.clone())
            .unwrap_or_default()
    };
    let mut guard = commits.lock().map_err(drop)?;
    let st = &mut *guard;
    let fs = st.fs.as_mut().ok_or(())?;
    if due && fs.has_uncommitted() {
        // Prepared here; written and flushed below, without the lock.
        if let Err(e) = fs.commit_all() {
            // The engine refuses further changes now; requests report EIO.
            eprintln!("intactfs: periodic commit failed: {e}");
            st.failure.get_or_insert(format!("periodic commit: {e}"));
            st.fail_waiters();
            return Err(());
        }
    }
    st.reap_regions();
    // Not waited for by anyone: told to the kernel from another thread (this one holds
    // the lock).
    if let Some(p) = st.take_invalidations() {
        std::thread::spawn(move || crate::server::invalidate(Some(p)));
    }
    st.notify();
    let flush = st.ext.unflushed_since.is_some_and(|t| t.elapsed() >= td);
    let ticket = st.fs.as_ref().map_or(0, |fs| fs.written_ticket());
    if commits.finish(guard).is_err() {
        eprintln!("intactfs: periodic commit failed: {}", failure());
        return Err(());
    }
    if flush && commits.wait_durable(ticket).is_err() {
        eprintln!("intactfs: durability flush failed: {}", failure());
        return Err(());
    }
    Ok(())
}

/// Lazy unmount (MNT_DETACH): the name disappears now, the file system when unused.
pub fn detach(mnt: &Path) -> std::io::Result<()> {
    umount(mnt, libc::MNT_DETACH)
}

pub fn umount(mnt: &Path, flags: i32) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mnt.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
