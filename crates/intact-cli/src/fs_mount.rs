//! `intact fs mount | umount | exec`: the FUSE mount and putting programs in streams.

use crate::Failure;
use intactfs_fuse::control;
use intactfs_fuse::mount::{self, MountConfig, MountError};
use intactfs_fuse::serve;
use intactfs_fuse::{Caps, FsyncMode};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct MountArgs {
    /// The image (file or block device) written by `intact fs mkfs`.
    pub image: PathBuf,
    /// An existing directory.
    pub mountpoint: PathBuf,
    /// Run in the background once mounted (the command returns when the mount is ready).
    #[arg(long)]
    pub daemon: bool,
    /// Write the serving process's pid here.
    #[arg(long)]
    pub pid_file: Option<PathBuf>,
    /// Where a --daemon's messages go (default: a file in the runtime directory, printed).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Mount options, comma-separated: ro (read-only: recover in memory, write nothing, no
    /// checkpoint; every change fails with EROFS; block images only); fsync=durable (default: fsync and fdatasync commit
    /// the caller's stream), fsync=ignore (they return at once in every stream;
    /// streamsync and sync stay durable) or fsync=osync (they are OptFS osync in every
    /// stream: ordered at once, durable within the durability timeout; dsync, streamsync
    /// and sync stay durable); durability=SECONDS (an osync'd commit is flushed at the
    /// latest this long after it was written; default 30, OptFS's T_D); private (only the mounting user may enter);
    /// noxattr (no extended attributes: saves the kernel's extended-attribute request
    /// before every write; default xattr); dirty_limit=SIZE (commit a stream once this
    /// much written data waits in memory; default a tenth of the machine's memory, between
    /// 64M and 2G); region_limit=SIZE (writes inside atomic regions fail with ENOSPC once
    /// this much uncommitted data waits in memory; default 1G); commit=SECONDS (commit everything uncommitted this often, bounding what
    /// a crash loses; default 5; 0: only on fsync, streamsync, sync, the dirty limit and
    /// unmount); locked_commit (write and flush every commit while holding the engine
    /// lock, as before commits moved out of it: only for comparison); nokillpriv (let the
    /// kernel clear set-user-id, asking for `security.capability` before every write: only
    /// for comparison); noreaddirplus (plain readdir: the kernel looks up each listed entry
    /// on its own: only for comparison); flushall (closing a read-only descriptor sends
    /// FUSE_FLUSH too, a round trip the closing process waits for: only for comparison);
    /// uring (serve requests through FUSE over io_uring, one ring per CPU; needs Linux
    /// 6.14+ with `/sys/module/fuse/parameters/enable_uring` set to Y by root, else the
    /// mount fails). A pmem image (`mkfs --device pmem`) is served by
    /// the persistent-memory engine with AD-transactions; of these only private applies to
    /// it (the others are ignored with a note), pmem_nosync (fences do not msync the
    /// image file: transactions survive the daemon's death, not a power loss; faster) and
    /// pmem_ckpt=background|inline (checkpoints in a background thread, the default, or
    /// at the commit that makes them due).
    #[arg(short = 'o', value_delimiter = ',')]
    pub options: Vec<String>,
    /// Request-handling threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    #[arg(long, hide = true)]
    pub daemon_child: bool,
}

#[derive(clap::Args)]
pub struct UmountArgs {
    pub mountpoint: PathBuf,
    /// Detach now even if files are open there; the image is written back when they close.
    #[arg(long)]
    pub lazy: bool,
    /// Seconds to wait for the write-back.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncAs {
    Fsync,
    Osync,
    Ignore,
}

#[derive(clap::Args)]
pub struct ExecArgs {
    /// Any directory of an intactfs mount.
    #[arg(long)]
    pub mount: PathBuf,
    /// Stream name (same name, same stream, in any program; "init" is the init stream).
    /// Default: a stream of this command's own ("exec-PID").
    #[arg(long)]
    pub stream: Option<String>,
    /// What fsync and fdatasync do in this stream: fsync (commit durably), osync (OptFS:
    /// ordered at once, durable within the mount's durability timeout; the way to run an
    /// unmodified program with osync) or ignore (return at once). dsync and `streamsync`
    /// stay durable.
    #[arg(long, value_enum, default_value_t = FsyncAs::Fsync)]
    pub fsync_as: FsyncAs,
    /// The same as --fsync-as ignore.
    #[arg(long, conflicts_with = "fsync_as")]
    pub ignore_fsync: bool,
    /// Run the whole command as one atomic region (CFS): everything it and its children
    /// change on the mount is committed, durably and all at once, when it exits with
    /// status 0, and aborted (none of it stays) when it fails or is killed.
    #[arg(long, conflicts_with_all = ["stream", "fsync_as", "ignore_fsync"])]
    pub atomic: bool,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

fn failure(e: MountError) -> Failure {
    match e {
        MountError::Input(m) => Failure::input(m),
        MountError::Failed(m) => Failure {
            code: 1,
            message: m,
        },
    }
}

/// Where mounts leave their pid and log: /run/intact as root, else a per-user directory.
fn runtime_dir() -> PathBuf {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if uid == 0 {
        return PathBuf::from("/run/intact");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("intact"),
        None => PathBuf::from(format!("/tmp/intact-{uid}")),
    }
}

/// The state file of a mount point: "pid\nimage\nlog\n".
fn state_file(mnt: &Path) -> PathBuf {
    let abs = std::path::absolute(mnt).unwrap_or_else(|_| mnt.to_path_buf());
    runtime_dir().join(format!(
        "mount-{:016x}",
        control::stream_id(&abs.display().to_string())
    ))
}

struct MountState {
    pid: i32,
    image: String,
}

fn read_state(mnt: &Path) -> Option<MountState> {
    let s = std::fs::read_to_string(state_file(mnt)).ok()?;
    let mut l = s.lines();
    Some(MountState {
        pid: l.next()?.parse().ok()?,
        image: l.next()?.to_string(),
    })
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    u32::try_from(pid)
        .ok()
        .and_then(intactfs_fuse::procs::stat_fields)
        .is_some_and(|f| f.first().is_some_and(|st| st != "Z" && st != "X"))
}

struct Options {
    fsync: FsyncMode,
    private: bool,
    xattr: bool,
    dirty_limit: Option<u64>,
    region_limit: Option<u64>,
    commit_interval: Option<Duration>,
    durability_timeout: Duration,
    locked_commit: bool,
    caps: Caps,
    pmem_sync: bool,
    pmem_background: bool,
    uring: bool,
    /// Options given that only the block engine uses (noted when a pmem image is mounted).
    block_only: Vec<String>,
    read_only: bool,
}

fn parse_options(opts: &[String]) -> Result<Options, Failure> {
    let mut fsync = FsyncMode::Durable;
    let mut private = false;
    let mut xattr = true;
    let mut dirty_limit = None;
    let mut region_limit = None;
    let mut commit_interval = Some(mount::DEFAULT_COMMIT_INTERVAL);
    let mut durability_timeout = mount::DEFAULT_DURABILITY_TIMEOUT;
    let mut locked_commit = false;
    let mut caps = Caps::default();
    let mut pmem_sync = true;
    let mut pmem_background = true;
    let mut uring = false;
    let mut block_only = Vec::new();
    let mut read_only = false;
    for o in opts.iter().filter(|o| !o.is_empty()) {
        let both_kinds = ["private", "pmem_nosync", "uring", "ro", "rw"].contains(&o.as_str());
        if !both_kinds && !o.starts_with("pmem_ckpt=") {
            block_only.push(o.clone());
        }
        match o.as_str() {
            "ro" => read_only = true,
            "rw" => read_only = false,
            "pmem_nosync" => pmem_sync = false,
            "pmem_ckpt=background" => pmem_background = true,
            "pmem_ckpt=inline" => pmem_background = false,
            _ if o.starts_with("pmem_ckpt=") => return Err(Failure::input(format!("mount option {o}: expected pmem_ckpt=background or pmem_ckpt=inline"))),
            "uring" => uring = true,
            "fsync=durable" => fsync = FsyncMode::Durable,
            "fsync=ignore" => fsync = FsyncMode::Ignore,
            "fsync=osync" => fsync = FsyncMode::Osync,
            "private" => private = true,
            "xattr" => xattr = true,
            "noxattr" => xattr = false,
            "locked_commit" => locked_commit = true,
            "nokillpriv" => caps.killpriv = false,
            "noreaddirplus" => caps.readdirplus = false,
            "flushall" => caps.noflush_readonly = false,
            _ if o.starts_with("dirty_limit=") => {
                let v = crate::size::parse_size(&o["dirty_limit=".len()..]).map_err(|e| Failure::input(format!("mount option {o}: {e}")))?;
                if v < 1 << 20 {
                    return Err(Failure::input(format!("mount option {o}: at least 1M")));
                }
                dirty_limit = Some(v);
            }
            _ if o.starts_with("region_limit=") => {
                let v = crate::size::parse_size(&o["region_limit=".len()..]).map_err(|e| Failure::input(format!("mount option {o}: {e}")))?;
                if v < 1 << 20 {
                    return Err(Failure::input(format!("mount option {o}: at least 1M")));
                }
                region_limit = Some(v);
            }
            _ if o.starts_with("commit=") => {
                let v: u64 = o["commit=".len()..].parse().map_err(|_| Failure::input(format!("mount option {o}: expected whole seconds, e.g. commit=5 (0: no periodic commits)")))?;
                if v > 86_400 {
                    return Err(Failure::input(format!("mount option {o}: at most 86400 seconds (use commit=0 for no periodic commits)")));
                }
                commit_interval = (v > 0).then(|| Duration::from_secs(v));
            }
            _ if o.starts_with("durability=") => {
                let v: f64 = o["durability=".len()..].parse().map_err(|_| Failure::input(format!("mount option {o}: expected seconds, e.g. durability=30 or durability=0.5")))?;
                if !(0.01..=86_400.0).contains(&v) {
                    return Err(Failure::input(format!("mount option {o}: between 0.01 and 86400 seconds")));
                }
                durability_timeout = Duration::from_secs_f64(v);
            }
            _ if o.starts_with("fsync=") => return Err(Failure::input(format!("mount option {o}: expected fsync=durable, fsync=ignore or fsync=osync"))),
            _ => return Err(Failure::input(format!("unknown mount option {o:?}: expected fsync=durable|ignore|osync, durability=SECONDS, private, xattr, noxattr, dirty_limit=SIZE, region_limit=SIZE, commit=SECONDS, locked_commit, nokillpriv, noreaddirplus, flushall, uring, ro, rw, pmem_nosync or pmem_ckpt=background|inline"))),
        }
    }
    Ok(Options {
        fsync,
        private,
        xattr,
        dirty_limit,
        region_limit,
        commit_interval,
        durability_timeout,
        locked_commit,
        caps,
        pmem_sync,
        pmem_background,
        uring,
        block_only,
        read_only,
    })
}

/// `intact fs mount`: checks what can be checked in the foreground, starts the daemon (or
/// serves here), announces the mount, and on unmount leaves its outcome for `fs umount`.
pub fn mount(a: MountArgs) -> Result<u8, Failure> {
    let o = parse_options(&a.options)?;
    check_mount_input(&a, &o)?;
    if a.daemon && !a.daemon_child {
        // Fail early, in the foreground, on what can be checked here.
        drop(mount::lock_image(&a.image).map_err(failure)?);
        return spawn_daemon(&a);
    }
    let cfg = mount_config(&a, &o);
    check_pmem_options(&a, &o)?;
    let state = state_file(&a.mountpoint);
    let result = result_file(&state);
    let served = std::cell::Cell::new(false);
    let r = serve::serve(&cfg, |rec| {
        served.set(true);
        announce_mounted(&a, &cfg, &rec, &state, &result);
    });
    // Read by `intact fs umount`, which waits for this process and cannot see its status
    // (and asked for it by creating the file).
    if served.get() && result.exists() {
        let _ = std::fs::write(&result, outcome(&r, &cfg));
    }
    let _ = std::fs::remove_file(&state);
    if let Some(p) = &a.pid_file {
        let _ = std::fs::remove_file(p);
    }
    let u = r.map_err(failure)?;
    if a.daemon_child && a.log.is_none() {
        // A clean unmount: the default log has nothing worth keeping.
        let mut log = state.clone().into_os_string();
        log.push(".log");
        let _ = std::fs::remove_file(log);
    }
    #[cfg(feature = "uring")]
    if o.uring {
        // Shows that the rings carried the requests (the tests check this line).
        eprintln!(
            "intactfs: {} requests were served through FUSE over io_uring",
            intactfs_fuse::uring_requests_served()
        );
    }
    eprintln!("{}", unmounted_message(&a, &cfg, &u));
    Ok(0)
}

/// The image exists, the mount point is a directory nothing is mounted on, and the
/// io_uring transport is built when asked for (before the daemon forks: the message
/// reaches the terminal).
fn check_mount_input(a: &MountArgs, o: &Options) -> Result<(), Failure> {
    mount::check_uring_built(o.uring).map_err(failure)?;
    if !a.image.exists() {
        return Err(Failure::input(format!(
            "{}: no such file (create one with `intact fs mkfs {} --size 1G`)",
            a.image.display(),
            a.image.display()
        )));
    }
    mount::check_mountpoint(&a.mountpoint).map_err(failure)?;
    if let Some(what) = mounted_on(&a.mountpoint) {
        return Err(Failure::input(format!(
            "{} is already a mount point ({what}): a second mount would hide the first; unmount it first (`intact fs umount {}`), or choose another directory",
            a.mountpoint.display(),
            a.mountpoint.display()
        )));
    }
    Ok(())
}

fn mount_config(a: &MountArgs, o: &Options) -> MountConfig {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    MountConfig {
        image: a.image.clone(),
        mountpoint: a.mountpoint.clone(),
        fsync: o.fsync,
        xattr: o.xattr,
        dirty_limit: o.dirty_limit,
        region_limit: o.region_limit,
        commit_interval: o.commit_interval,
        durability_timeout: o.durability_timeout,
        threads: a.threads,
        allow_other: root && !o.private,
        locked_commit: o.locked_commit,
        caps: o.caps,
        pmem_sync: o.pmem_sync,
        pmem_background: o.pmem_background,
        uring: o.uring,
        read_only: o.read_only,
    }
}

/// A pmem image refuses `ro` (its engine recovers in place) and ignores, with a word,
/// the options only block images have.
fn check_pmem_options(a: &MountArgs, o: &Options) -> Result<(), Failure> {
    if !intactfs_fuse::pmem::is_pmem_image(&a.image) {
        return Ok(());
    }
    if o.read_only {
        return Err(Failure::input(format!(
            "{}: a pmem image: mount option ro applies to block images only (the pmem engine recovers in place at mount)",
            a.image.display()
        )));
    }
    if !o.block_only.is_empty() {
        eprintln!(
            "intactfs: {} is a pmem image: mount option(s) {} apply to block images only; ignored",
            a.image.display(),
            o.block_only.join(",")
        );
    }
    Ok(())
}

/// Once mounted: the state and pid files, and the "mounted" line (on stdout for the
/// launcher of a daemon, which then stops reading it; on stderr in the foreground).
fn announce_mounted(
    a: &MountArgs,
    cfg: &MountConfig,
    rec: &serve::Recovered,
    state: &Path,
    result: &Path,
) {
    let pid = std::process::id();
    let _ = std::fs::create_dir_all(runtime_dir());
    // A result left by an earlier mount of this mount point is not this one's.
    let _ = std::fs::remove_file(result);
    let _ = std::fs::write(state, format!("{pid}\n{}\n", a.image.display()));
    if let Some(p) = &a.pid_file {
        let _ = std::fs::write(p, format!("{pid}\n"));
    }
    let msg = format!(
        "intactfs: {} mounted on {} (pid {pid}; {})",
        a.image.display(),
        a.mountpoint.display(),
        recovered_words(rec, cfg)
    );
    if !a.daemon_child {
        eprintln!(
            "{msg}; Ctrl-C or `intact fs umount {}` unmounts",
            a.mountpoint.display()
        );
        return;
    }
    // The launcher waits for this line, then returns; our stdout goes nowhere after.
    println!("ready {msg}");
    let _ = std::io::stdout().flush();
    // SAFETY: replacing fd 1 with /dev/null; the launcher has closed its end.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if fd >= 0 {
            libc::dup2(fd, 1);
            libc::close(fd);
        }
    }
    eprintln!("{msg}");
}

/// What recovery at mount did, in words.
fn recovered_words(rec: &serve::Recovered, cfg: &MountConfig) -> String {
    match rec {
        serve::Recovered::Block(rec) => format!(
            "recovered from checkpoint {} + {} journal records{}",
            rec.checkpoint_generation,
            rec.records_replayed,
            match (&rec.read_only, cfg.read_only) {
                (Some(why), _) => format!("; {why}"),
                (None, true) => "; read-only (-o ro): nothing is written".to_string(),
                (None, false) => String::new(),
            }
        ),
        serve::Recovered::Pmem(rec) => format!(
            "pmem image with AD-transactions; recovered {} committed and {} uncommitted transaction(s): {} redo entries indexed, {} undo entries applied",
            rec.committed_txs, rec.uncommitted_txs, rec.redo_indexed, rec.undo_applied
        ),
    }
}

/// The "unmounted" line: what the engine wrote while mounted.
fn unmounted_message(a: &MountArgs, cfg: &MountConfig, u: &serve::Served) -> String {
    match u {
        serve::Served::Block(u) if cfg.read_only || u.recovery.read_only.is_some() => format!(
            "intactfs: {} unmounted (mounted read-only: nothing was written)",
            a.mountpoint.display()
        ),
        serve::Served::Block(u) => format!(
            "intactfs: {} unmounted and written back ({} commits, {} flushes, {} bytes written)",
            a.mountpoint.display(),
            u.stats.commits,
            u.stats.flushes,
            u.stats.bytes_written()
        ),
        serve::Served::Pmem(u) => format!(
            "intactfs: {} unmounted and checkpointed ({} transactions committed, {} of them legacy calls, {} aborted, {} checkpoints, {} background checkpoint units, {} checkpoints forced by a full log or free space; {} still open at unmount were aborted; device while mounted: {} stores, {} bytes stored, {} lines flushed, {} fences)",
            a.mountpoint.display(),
            u.stats.committed,
            u.stats.legacy_commits,
            u.stats.aborted,
            u.stats.checkpoints,
            u.stats.background_units,
            u.stats.exhausted_checkpoints,
            u.aborted_at_unmount,
            u.device.stores,
            u.device.bytes_stored,
            u.device.lines_flushed,
            u.device.fences
        ),
    }
}

/// Where a mount leaves how it ended, for `intact fs umount`.
fn result_file(state: &Path) -> PathBuf {
    let mut p = state.to_path_buf().into_os_string();
    p.push(".result");
    PathBuf::from(p)
}

/// The result file's text: "written back", "read-only" or "failed", then the message.
fn outcome(r: &Result<serve::Served, MountError>, cfg: &MountConfig) -> String {
    match r {
        Ok(serve::Served::Block(u)) if cfg.read_only || u.recovery.read_only.is_some() => {
            "read-only\nmounted read-only: nothing was written\n".to_string()
        }
        Ok(_) => "written back\n\n".to_string(),
        Err(e) => format!("failed\n{e}\n"),
    }
}

fn spawn_daemon(a: &MountArgs) -> Result<u8, Failure> {
    let log = a.log.clone().unwrap_or_else(|| {
        let mut p = state_file(&a.mountpoint).into_os_string();
        p.push(".log");
        PathBuf::from(p)
    });
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).map_err(|e| Failure::input(format!("{}: {e}", d.display())))?;
    }
    let logf = std::fs::File::create(&log)
        .map_err(|e| Failure::input(format!("log {}: {e}", log.display())))?;
    let exe = std::env::current_exe()
        .map_err(|e| Failure::internal(format!("finding this program: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("fs")
        .arg("mount")
        .arg(&a.image)
        .arg(&a.mountpoint)
        .arg("--daemon")
        .arg("--daemon-child")
        .arg("--threads")
        .arg(a.threads.to_string());
    if !a.options.is_empty() {
        cmd.arg("-o").arg(a.options.join(","));
    }
    if let Some(p) = &a.pid_file {
        cmd.arg("--pid-file").arg(p);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(logf));
    // SAFETY: setsid is async-signal-safe; the daemon leaves the terminal's session so
    // that a Ctrl-C meant for the shell does not unmount it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::internal(format!("starting the mount daemon: {e}")))?;
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
    if let Some(msg) = line.strip_prefix("ready ") {
        println!("{} (log: {})", msg.trim_end(), log.display());
        return Ok(0);
    }
    let status = child.wait().map_err(|e| Failure::internal(e.to_string()))?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    if a.log.is_none() {
        // Shown below in full: nothing left to keep.
        let _ = std::fs::remove_file(&log);
    }
    let code = status.code().unwrap_or(3).clamp(1, 3) as u8;
    Err(Failure {
        code,
        // The daemon's own error lines carry the prefix main() adds to this message.
        message: format!(
            "the mount daemon failed: {}",
            text.trim().trim_start_matches("intact: error: ")
        ),
    })
}

pub fn umount(a: UmountArgs) -> Result<u8, Failure> {
    let mnt = &a.mountpoint;
    let state = read_state(mnt);
    if let Some(st) = state.as_ref().filter(|s| !alive(s.pid)) {
        // The daemon died: only the kernel's side of the mount is left.
        let _ = mount::detach(mnt);
        let _ = std::fs::remove_file(state_file(mnt));
        println!(
            "the intactfs daemon (pid {}) that served {} is gone (crashed or killed); removed the stale mount. {} holds everything committed before: mount it again to recover (`intact fs fsck {}` checks it)",
            st.pid,
            mnt.display(),
            st.image,
            st.image
        );
        return Ok(0);
    }
    if state.is_none() && !is_intactfs_mount(mnt) {
        if mount::is_stale_mount(mnt) {
            mount::detach(mnt).map_err(|e| Failure::input(format!("{}: {e}", mnt.display())))?;
            println!(
                "removed the stale mount {} (its daemon is gone)",
                mnt.display()
            );
            return Ok(0);
        }
        return Err(Failure::input(format!(
            "{} is not an intactfs mount",
            mnt.display()
        )));
    }
    let flags = if a.lazy { libc::MNT_DETACH } else { 0 };
    // Asks the daemon for its outcome (it writes one only when asked, so that unmounts by
    // signal or by plain `umount` leave nothing behind).
    let result = result_file(&state_file(mnt));
    if state.is_some() {
        let _ = std::fs::write(&result, "waiting\n");
    }
    if let Err(e) = mount::umount(mnt, flags) {
        let _ = std::fs::remove_file(&result);
        if e.raw_os_error() == Some(libc::EBUSY) {
            return Err(Failure { code: 1, message: format!("{} is busy (a process has a file open or its working directory there): close them, or pass --lazy to detach now and write back when they close", mnt.display()) });
        }
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(Failure {
                code: 1,
                message: format!("unmounting {}: {e}", mnt.display()),
            });
        }
    }
    if let Some(st) = state {
        let start = Instant::now();
        while alive(st.pid) {
            if start.elapsed() > Duration::from_secs(a.timeout) {
                return Err(Failure { code: 1, message: format!("{} is unmounted but its daemon (pid {}) is still writing back after {} s; it will finish on its own", mnt.display(), st.pid, a.timeout) });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return report_outcome(mnt, &st);
    } else {
        println!("{} unmounted", mnt.display());
    }
    Ok(0)
}

/// What the daemon that served `mnt` said about its write-back: exit 0 only if it wrote
/// everything back (or had nothing to write, read-only).
fn report_outcome(mnt: &Path, st: &MountState) -> Result<u8, Failure> {
    let file = result_file(&state_file(mnt));
    let text = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    let text = text.unwrap_or_default();
    let (status, message) = text.split_once('\n').unwrap_or((text.as_str(), ""));
    match status {
        "written back" => {
            println!("{} unmounted; {} written back", mnt.display(), st.image);
            Ok(0)
        }
        "read-only" => {
            println!("{} unmounted; {} was {}", mnt.display(), st.image, message.trim());
            Ok(0)
        }
        "failed" => Err(Failure {
            code: 1,
            message: format!(
                "{} is unmounted, but writing back {} FAILED: {} (what the last checkpoint and commits hold is still on the image: `intact fs fsck {}` reports what a mount finds)",
                mnt.display(),
                st.image,
                message.trim(),
                st.image
            ),
        }),
        _ => Err(Failure {
            code: 1,
            message: format!(
                "{} is unmounted, but its daemon (pid {}) ended without saying whether it wrote {} back (killed?): see its log; `intact fs fsck {}` checks the image",
                mnt.display(),
                st.pid,
                st.image,
                st.image
            ),
        }),
    }
}

/// What is mounted on `mnt` (its type and source, and the image if intact mounted it), if
/// anything is.
fn mounted_on(mnt: &Path) -> Option<String> {
    let abs = std::fs::canonicalize(mnt).ok()?;
    let (fstype, source) = mounts_at(&abs).pop()?;
    let image = read_state(mnt)
        .map(|st| format!(", image {} served by pid {}", st.image, st.pid))
        .unwrap_or_default();
    Some(format!("{fstype} from {source}{image}"))
}

/// (file-system type, source) of every mount at `abs` in /proc/self/mountinfo, the
/// top-most last.
fn mounts_at(abs: &Path) -> Vec<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            if f.get(4).map(Path::new) != Some(abs) {
                return None;
            }
            let sep = f.iter().position(|x| *x == "-")?;
            let source = f.get(sep + 2).unwrap_or(&"?");
            Some((f.get(sep + 1)?.to_string(), source.to_string()))
        })
        .collect()
}

fn is_intactfs_mount(mnt: &Path) -> bool {
    let Ok(abs) = std::path::absolute(mnt) else {
        return false;
    };
    mounts_at(&abs)
        .iter()
        .any(|(t, _)| t == "fuse" || t == "fuse.intactfs" || t == "fuse.intactfs-pmem")
}

/// Streams, osync/dsync and atomic regions are the block engine's; a persistent-memory
/// mount answers EOPNOTSUPP and offers AD-transactions instead.
const NO_BLOCK_INTERFACE: &str = "this mount offers no streams or atomic regions (a persistent-memory mount?); its atomic updates are AD-transactions: intact.fs.transaction in Python, intact_tx_begin in C (docs/fs-api.md)";

pub fn exec(a: ExecArgs) -> Result<u8, Failure> {
    let dir = std::fs::File::open(&a.mount)
        .map_err(|e| Failure::input(format!("{}: {e}", a.mount.display())))?;
    if a.atomic {
        return exec_atomic(&a, &dir);
    }
    let name = a
        .stream
        .clone()
        .unwrap_or_else(|| format!("exec-{}", std::process::id()));
    let id = control::stream_id(&name);
    let fsync_as = if a.ignore_fsync {
        FsyncAs::Ignore
    } else {
        a.fsync_as
    };
    if id == intactfs::INIT_STREAM && fsync_as != FsyncAs::Fsync {
        return Err(Failure::input("--fsync-as osync|ignore (--ignore-fsync) needs a stream of its own: the init stream is shared by every program that did not choose one"));
    }
    let flags = match fsync_as {
        FsyncAs::Fsync => 0,
        FsyncAs::Osync => control::FLAG_FSYNC_AS_OSYNC,
        FsyncAs::Ignore => control::FLAG_IGNORE_FSYNC,
    };
    use std::os::unix::io::AsRawFd;
    if let Err(e) = control::setstream(dir.as_raw_fd(), id, flags) {
        let why = match e.raw_os_error() {
            Some(libc::ENOTTY) => "not on an intactfs mount".to_string(),
            Some(libc::EOPNOTSUPP) => NO_BLOCK_INTERFACE.to_string(),
            _ => e.to_string(),
        };
        return Err(Failure::input(format!(
            "{}: cannot set the stream: {why}",
            a.mount.display()
        )));
    }
    drop(dir);
    // The stream belongs to this process id, which exec keeps; children inherit it.
    let e = Command::new(&a.command[0]).args(&a.command[1..]).exec();
    Err(Failure {
        code: 127,
        message: format!("{}: {e}", a.command[0]),
    })
}

/// `exec --atomic`: a region around a child process; commit on success, abort otherwise.
fn exec_atomic(a: &ExecArgs, dir: &std::fs::File) -> Result<u8, Failure> {
    use std::os::unix::io::AsRawFd;
    use std::os::unix::process::ExitStatusExt;
    let fd = dir.as_raw_fd();
    let why = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::ENOTTY) => "not on an intactfs mount".to_string(),
        Some(libc::EALREADY) => {
            "this process is already in an atomic region (regions do not nest)".to_string()
        }
        Some(libc::EINVAL) => "no atomic region is open".to_string(),
        Some(libc::EOPNOTSUPP) => NO_BLOCK_INTERFACE.to_string(),
        _ => e.to_string(),
    };
    control::region_begin(fd).map_err(|e| {
        Failure::input(format!(
            "{}: cannot begin an atomic region: {}",
            a.mount.display(),
            why(e)
        ))
    })?;
    let child = Command::new(&a.command[0]).args(&a.command[1..]).spawn();
    let status = match child {
        Ok(mut c) => {
            // Ctrl-C reaches the child (same process group); this process must live on to
            // abort the region.
            // SAFETY: setting a signal disposition to SIG_IGN has no handler to race with.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
            }
            c.wait()
        }
        Err(e) => Err(e),
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let _ = control::region_abort(fd);
            return Err(Failure {
                code: 127,
                message: format!(
                    "{}: {e} (nothing was changed: the region was aborted)",
                    a.command[0]
                ),
            });
        }
    };
    if status.success() {
        control::region_commit(fd).map_err(|e| Failure {
            code: 1,
            message: format!(
                "committing the atomic region of {}: {}",
                a.command[0],
                why(e)
            ),
        })?;
        return Ok(0);
    }
    control::region_abort(fd).map_err(|e| Failure {
        code: 1,
        message: format!("aborting the atomic region of {}: {}", a.command[0], why(e)),
    })?;
    let (code, how) = match (status.code(), status.signal()) {
        (Some(c), _) => (c.clamp(1, 255) as u8, format!("exited with status {c}")),
        (None, Some(sig)) => (
            (128 + sig).min(255) as u8,
            format!("was killed by signal {sig}"),
        ),
        _ => (1, "failed".to_string()),
    };
    eprintln!("intact: {} {how}: its changes were aborted", a.command[0]);
    Ok(code)
}
