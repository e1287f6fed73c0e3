//! Runs the application's checker on crash states, in parallel, with time limits.
//!
//! # Checker contract (ALICE-compatible)
//!
//! The checker is invoked as `CHECKER... <crash_dir> <stdout_file>`:
//! `crash_dir` holds the crash state (a directory tree the checker may modify,
//! even make read-only), `stdout_file` holds what the workload printed before
//! the crash. Both are absolute paths. Exit status 0 means the state is
//! consistent; anything else (including death by a signal) means inconsistent,
//! and the checker's stderr is the reason. The environment additionally has
//! `INTACT_WORKER` (`0..jobs`, for per-worker resources such as ports) and
//! `INTACT_STATE` (the state id). stdin is `/dev/null`; the working directory
//! is the caller's.
//!
//! # How it runs
//!
//! [`Runner::start`] creates one scratch root `intact-check.*` (by default in
//! `/dev/shm`, so crash states live in memory) and `jobs` worker threads.
//! Worker N uses `<root>/wN/crash` (recreated empty for each job),
//! `<root>/wN/stdout`, and capture files for the checker's own stdout/stderr
//! (kept outside the crash dir so the checker cannot confuse them with state).
//! [`Runner::submit`] blocks while about `2 * jobs` jobs are queued, which
//! throttles the crash-state constructor to the checkers' pace.
//!
//! Each checker runs in its own process group. When it exits — or hits the
//! time limit, or the run is cancelled — the whole group gets SIGKILL, so
//! helpers it left in the background (a server, a `sleep`) do not outlive it.
//! **Limitation:** a process that left the group (`setsid`, `setpgid`) or was
//! started through a service manager cannot be found this way and survives.
//!
//! After each job the crash dir is removed completely (directories are made
//! u+rwx first, symlinks are never followed); [`Runner::finish`] and `Drop`
//! remove the whole scratch root. Except: a job with a [`Job::patch`] under the
//! per-process protocol leaves its crash dir for the worker's next job to patch, when
//! its checker exited (pass or fail) and the dir is exactly as written (see
//! `patch.rs`: inode, type, mode, owner, size, links and ctime of every entry); any
//! difference, a time-out, an error or a cancellation removes it, and the next state
//! is written whole. `INTACT_FULL_REBUILD=1` in the environment turns patching off.
//!
//! # Cancellation
//!
//! [`CancelHandle::cancel`] kills running checkers (within ~50 ms), drops
//! queued jobs and makes `submit` fail. Jobs that were dropped or whose
//! checker was killed produce **no** [`Outcome`]: every outcome reported is a
//! real verdict. Dropping a [`Runner`] without `finish` cancels it.
//!
//! # Process-wide side effect
//!
//! Waiting with a time limit uses the `wait-timeout` crate, which installs a
//! SIGCHLD handler (SA_RESTART) for the whole process on first use; it chains
//! to a handler installed before it. If something replaces it later, waits
//! still work but notice a checker's exit only at the next ~50 ms poll.

mod fsutil;
mod patch;
mod resolve;
mod server;

pub use patch::PatchState;
use patch::Snapshot;

use server::{Answer, Request, Server, ServerSpec};
pub use server::{Protocol, PROTOCOL_VERSION};

use std::collections::VecDeque;
use std::fs::{self, File};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

/// How long a worker waits for its checker before looking at the cancel flag
/// again; bounds the latency of [`CancelHandle::cancel`]. A checker that exits
/// is still noticed immediately (SIGCHLD wakes the wait).
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Configuration for [`Runner::start`].
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Program and fixed leading arguments; the runner appends <crash_dir> <stdout_file>.
    pub checker: Vec<String>,
    /// Number of checkers run at the same time; must be >= 1.
    pub jobs: usize,
    /// Wall-clock limit per checker run; `None` = unlimited.
    pub timeout: Option<Duration>,
    /// Parent directory for scratch space; None = /dev/shm if it is a writable directory (tmpfs), else std::env::temp_dir().
    pub scratch_parent: Option<PathBuf>,
    /// Max bytes of checker stderr (and stdout) kept per failing run (keep the tail if longer); e.g. 8192.
    pub keep_output_bytes: usize,
    /// One process per state (ALICE's contract, the default) or one warm server per worker.
    pub protocol: Protocol,
}

/// Writes a crash state into the given (existing, empty) directory. A warm checker server
/// that dies on a state gets it again, rebuilt by a second call, when the job has no
/// [`Release`].
pub type Materialise = Box<dyn FnMut(&Path) -> Result<(), String> + Send>;

/// Runs after the checker (or after a failed materialisation, or a cancellation), before
/// the crash dir is removed: e.g. unmounts a file system that `materialise` mounted there.
pub type Release = Box<dyn FnOnce() + Send>;

/// One crash state to check.
pub struct Job {
    /// Caller's identifier, copied to the [`Outcome`].
    pub id: u64,
    /// Value of `INTACT_STATE`.
    pub state_id: String,
    /// What the workload printed before the crash: written to the stdout_file.
    pub stdout: Vec<u8>,
    /// Writes the crash state into the given (existing, empty) directory.
    pub materialise: Materialise,
    /// Undoes what `materialise` set up outside the crash dir; always run once.
    pub release: Option<Release>,
    /// The same state, able to patch the directory a previous state of its kind left:
    /// when given, the worker patches its previous job's crash dir into this state (if
    /// that dir is provably as written) instead of writing the state whole with
    /// `materialise`. Only under [`Protocol::PerProcess`] and without `release`.
    pub patch: Option<Box<dyn PatchState>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("state_id", &self.state_id)
            .field("stdout_len", &self.stdout.len())
            .finish_non_exhaustive()
    }
}

/// What the checker said about one crash state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exit status 0: consistent.
    Pass,
    /// Non-zero exit or killed by a signal: inconsistent. `stderr`/`stdout`
    /// are the tails (at most `keep_output_bytes` each) of the checker's output.
    Fail {
        code: Option<i32>,
        signal: Option<i32>,
        stderr: String,
        stdout: String,
    },
    /// The checker ran longer than the configured limit (`after`) and was killed.
    Timeout { after: Duration },
    /// Materialisation or spawn failed: not a checker verdict.
    Error(String),
}

/// The result of one [`Job`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub id: u64,
    pub verdict: Verdict,
    /// Checker wall time (zero if the checker never started).
    pub elapsed: Duration,
    /// Which worker ran it (the `INTACT_WORKER` value).
    pub worker: usize,
}

/// Why [`Runner::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("no checker command given: expected a program and optional arguments")]
    EmptyChecker,
    #[error("checker argument {index} contains a NUL byte, which cannot be passed to a program")]
    NulInChecker { index: usize },
    #[error("checker `{program}` not found: {hint}")]
    CheckerNotFound { program: String, hint: String },
    #[error("checker {} cannot be executed: {why}", path.display())]
    CheckerNotExecutable { path: PathBuf, why: String },
    #[error("the number of parallel jobs must be at least 1")]
    ZeroJobs,
    #[error("cannot create scratch space under {}: {source}; choose a writable directory with enough space", path.display())]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start a worker thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Returned by [`Runner::submit`] once the run has been cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the checker run was cancelled")]
pub struct Cancelled;

struct Queue {
    jobs: VecDeque<Job>,
    /// No more submissions: workers exit once `jobs` is empty.
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
    cancelled: AtomicBool,
    outcomes: Mutex<Vec<Outcome>>,
    /// Signalled when an outcome is pushed (for `drain_wait`).
    outcome_ready: Condvar,
}

/// Locks ignoring poisoning: the protected data stays consistent (every
/// critical section is a push/pop), and the runner must never panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Next job for a worker; `None` = stop (cancelled, or closed and empty).
    fn next_job(&self) -> Option<Job> {
        let mut q = lock(&self.queue);
        loop {
            if self.is_cancelled() {
                return None;
            }
            if let Some(job) = q.jobs.pop_front() {
                self.not_full.notify_one();
                return Some(job);
            }
            if q.closed {
                return None;
            }
            q = self.not_empty.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        lock(&self.queue).closed = true;
        self.not_empty.notify_all();
    }
}

/// Stops a [`Runner`] from another thread (e.g. a Ctrl-C handler).
#[derive(Clone)]
pub struct CancelHandle {
    shared: Arc<Shared>,
}

impl CancelHandle {
    /// Stop soon: running checkers are killed, queued jobs dropped, `submit` fails.
    pub fn cancel(&self) {
        self.shared.cancelled.store(true, Ordering::SeqCst);
        let dropped = std::mem::take(&mut lock(&self.shared.queue).jobs);
        self.shared.not_empty.notify_all();
        self.shared.not_full.notify_all();
        // Outside the lock: a job's closure may own things with slow destructors.
        drop(dropped);
    }

    pub fn is_cancelled(&self) -> bool {
        self.shared.is_cancelled()
    }
}

impl std::fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelHandle")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A pool of workers running the checker; see the crate docs.
pub struct Runner {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Scratch root; `None` once removed.
    root: Option<PathBuf>,
}

impl Runner {
    pub fn start(cfg: RunnerConfig) -> Result<Runner, RunnerError> {
        Runner::start_numbered(cfg, 0)
    }

    /// As [`Runner::start`], with `INTACT_WORKER` numbered from `first` (`first..first+jobs`):
    /// for one of several runners on a host, e.g. `intact check-unit --worker N`.
    pub fn start_numbered(cfg: RunnerConfig, first: usize) -> Result<Runner, RunnerError> {
        let Some(program) = cfg.checker.first() else {
            return Err(RunnerError::EmptyChecker);
        };
        if let Some(index) = cfg.checker.iter().position(|a| a.contains('\0')) {
            return Err(RunnerError::NulInChecker { index });
        }
        if cfg.jobs == 0 {
            return Err(RunnerError::ZeroJobs);
        }
        let resolved = resolve::resolve_program(program)?;
        // The checker runs in our cwd, so a relative program path stays valid,
        // but make it absolute anyway so the command line in messages is unambiguous.
        let resolved = std::path::absolute(&resolved).unwrap_or(resolved);

        let root = create_scratch_root(cfg.scratch_parent.as_deref())?;
        let patching = cfg.protocol == Protocol::PerProcess
            && std::env::var_os("INTACT_FULL_REBUILD").is_none_or(|v| v.is_empty() || v == "0");
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                closed: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity: cfg.jobs.saturating_mul(2),
            cancelled: AtomicBool::new(false),
            outcomes: Mutex::new(Vec::new()),
            outcome_ready: Condvar::new(),
        });
        // Built before the workers so that an error below drops it, which
        // cancels and cleans up whatever was already started.
        let mut runner = Runner {
            shared: shared.clone(),
            workers: Vec::new(),
            root: Some(root.clone()),
        };

        for index in 0..cfg.jobs {
            let dir = root.join(format!("w{index}"));
            fs::create_dir(&dir).map_err(|source| RunnerError::Scratch {
                path: dir.clone(),
                source,
            })?;
            let worker = Worker {
                index: first + index,
                crash: dir.join("crash"),
                stdout_file: dir.join("stdout"),
                out_capture: dir.join("checker.out"),
                err_capture: dir.join("checker.err"),
                server_err: dir.join("server.err"),
                dir,
                program: resolved.clone(),
                arg0: program.clone(),
                args: cfg.checker[1..].to_vec(),
                timeout: cfg.timeout,
                keep: cfg.keep_output_bytes,
                shared: shared.clone(),
                protocol: cfg.protocol,
                server: None,
                server_ever_answered: false,
                patching,
                fine_ctime: false,
                last: None,
            };
            let handle = std::thread::Builder::new()
                .name(format!("intact-check-w{index}"))
                .spawn(move || worker.main())
                .map_err(RunnerError::Thread)?;
            runner.workers.push(handle);
        }
        Ok(runner)
    }

    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            shared: self.shared.clone(),
        }
    }

    /// Blocks while the queue is full (bounded, ~2*jobs) — backpressure for the constructor. Err if cancelled.
    pub fn submit(&self, job: Job) -> Result<(), Cancelled> {
        let s = &self.shared;
        let mut q = lock(&s.queue);
        loop {
            if s.is_cancelled() {
                return Err(Cancelled);
            }
            if q.jobs.len() < s.capacity {
                q.jobs.push_back(job);
                s.not_empty.notify_one();
                return Ok(());
            }
            q = s.not_full.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Outcomes finished so far (non-blocking).
    pub fn drain(&self) -> Vec<Outcome> {
        std::mem::take(&mut *lock(&self.shared.outcomes))
    }

    /// As [`Runner::drain`], but if nothing has finished yet, waits up to `limit` for the
    /// first outcome: a caller with one job in flight gets it as soon as it is pushed
    /// instead of at its next poll. May return empty early (spurious wake-up); the caller
    /// loops.
    pub fn drain_wait(&self, limit: Duration) -> Vec<Outcome> {
        let mut done = lock(&self.shared.outcomes);
        if done.is_empty() {
            done = match self.shared.outcome_ready.wait_timeout(done, limit) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        std::mem::take(&mut *done)
    }

    /// Waits for all submitted jobs and returns the remaining outcomes; joins workers and removes all scratch space.
    pub fn finish(mut self) -> Vec<Outcome> {
        self.shutdown();
        self.drain()
    }

    /// Where the scratch space lives (useful for diagnostics and tests).
    pub fn scratch_root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    fn shutdown(&mut self) {
        self.shared.close();
        for w in self.workers.drain(..) {
            // A worker panic is already reported by the panic hook; the
            // scratch removal below covers whatever it left behind.
            let _ = w.join();
        }
        if let Some(root) = self.root.take() {
            if let Err(e) = fsutil::force_remove(&root) {
                // No error channel in finish/drop; leaving litter silently would be worse.
                eprintln!(
                    "intact-check: warning: cannot remove scratch space {}: {e}",
                    root.display()
                );
            }
        }
    }
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("workers", &self.workers.len())
            .field("scratch_root", &self.root)
            .field("cancelled", &self.shared.is_cancelled())
            .finish()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if !self.workers.is_empty() || self.root.is_some() {
            self.cancel_handle().cancel();
            self.shutdown();
        }
    }
}

fn create_scratch_root(parent: Option<&Path>) -> Result<PathBuf, RunnerError> {
    let candidates: Vec<PathBuf> = match parent {
        Some(p) => vec![p.to_path_buf()],
        None => {
            let shm = Path::new("/dev/shm");
            let mut v = Vec::new();
            if shm.is_dir() && is_writable(shm) {
                v.push(shm.to_path_buf());
            }
            v.push(std::env::temp_dir());
            v
        }
    };
    let mut last_err = None;
    for parent in candidates {
        match tempfile::Builder::new()
            .prefix("intact-check.")
            .tempdir_in(&parent)
        {
            // keep(): we remove it ourselves with force_remove, because the
            // checker may leave read-only directories that TempDir's drop
            // cannot delete (for non-root users).
            Ok(dir) => {
                let p = dir.keep();
                return Ok(std::path::absolute(&p).unwrap_or(p));
            }
            Err(source) => {
                last_err = Some(RunnerError::Scratch {
                    path: parent,
                    source,
                })
            }
        }
    }
    Err(last_err.unwrap_or_else(|| RunnerError::Scratch {
        path: std::env::temp_dir(),
        source: std::io::Error::other("no candidate directory"),
    }))
}

fn is_writable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// SIGKILL to every process in group `pgid`. Errors (ESRCH: group already
/// empty) are expected and ignored.
pub(crate) fn kill_group(pgid: i32) {
    // pgid 0 or 1 would address our own group or (with -1) every process we
    // may signal: never let a bogus id get that far.
    if pgid > 1 {
        // SAFETY: plain system call, no memory involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

struct ReleaseGuard(Option<Release>);

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r();
        }
    }
}

/// Owns a running checker: on drop (normal, timeout, cancel, or unwinding)
/// kills its process group and reaps it, so no path leaks a process.
pub(crate) struct ChildGuard {
    pub(crate) child: Child,
    pub(crate) pgid: i32,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        kill_group(self.pgid);
        // Returns the cached status if wait_timeout already reaped it.
        let _ = self.child.wait();
    }
}

enum End {
    Exited(ExitStatus),
    TimedOut(Duration),
    Cancelled,
    WaitFailed(std::io::Error),
}

struct Worker {
    index: usize,
    dir: PathBuf,
    crash: PathBuf,
    stdout_file: PathBuf,
    out_capture: PathBuf,
    err_capture: PathBuf,
    program: PathBuf,
    arg0: String,
    args: Vec<String>,
    timeout: Option<Duration>,
    keep: usize,
    shared: Arc<Shared>,
    protocol: Protocol,
    /// Where the warm server's stderr goes (kept across its requests).
    server_err: PathBuf,
    /// The warm server, started at the first state and after one ended.
    server: Option<Server>,
    /// Whether any server of this worker has judged a state: a server that dies before
    /// ever answering cannot be run, which is not a verdict on a state.
    server_ever_answered: bool,
    /// Whether jobs with a [`Job::patch`] may patch the previous crash dir.
    patching: bool,
    /// Whether the scratch file system gives a change after a ctime query a later ctime
    /// even within a clock tick (else the worker waits a tick: `patch.rs`).
    fine_ctime: bool,
    /// The state the crash dir holds exactly, and its snapshot as written; `None` when
    /// the dir must be rebuilt.
    last: Option<(Box<dyn PatchState>, Snapshot)>,
}

impl Worker {
    fn main(mut self) {
        if self.patching {
            self.fine_ctime = patch::ctime_is_fine(&self.dir);
        }
        while let Some(job) = self.shared.next_job() {
            let id = job.id;
            // Belt and braces: run_job does not panic on its own, but a panic
            // must not kill the worker and leave the queue without a consumer.
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| self.run_job(job)))
                .unwrap_or_else(|p| {
                    Some(self.error(
                        id,
                        format!("internal error in checker worker: {}", panic_text(&*p)),
                    ))
                });
            // Kept for the next job only when the checker exited and left it as written;
            // else removed now (the next job recreates it anyway; this frees tmpfs memory).
            let exited = outcome.as_ref().is_some_and(|o| {
                matches!(o.verdict, Verdict::Pass | Verdict::Fail { .. })
                    && self.protocol == Protocol::PerProcess
            });
            if !(exited && self.still_as_written()) {
                self.last = None;
                let _ = fsutil::force_remove(&self.crash);
            }
            if let Some(o) = outcome {
                lock(&self.shared.outcomes).push(o);
                self.shared.outcome_ready.notify_all();
            }
        }
        let _ = fsutil::force_remove(&self.dir);
    }

    fn error(&self, id: u64, msg: String) -> Outcome {
        Outcome {
            id,
            verdict: Verdict::Error(msg),
            elapsed: Duration::ZERO,
            worker: self.index,
        }
    }

    /// Whether the crash dir is exactly what the last job wrote (see `patch.rs`).
    fn still_as_written(&self) -> bool {
        let Some((_, before)) = &self.last else {
            return false;
        };
        Snapshot::take(&self.crash).is_ok_and(|now| now == *before)
    }

    /// `None` when the job was cancelled before it produced a verdict.
    fn run_job(&mut self, job: Job) -> Option<Outcome> {
        let Job {
            id,
            state_id,
            stdout,
            mut materialise,
            release,
            patch,
        } = job;
        let rebuildable = release.is_none();
        let patch = patch.filter(|_| self.patching && rebuildable);
        // Dropped last, on every path out of here (and on unwinding).
        let _release = ReleaseGuard(release);
        let built = match patch {
            Some(p) => self.patch_state(&stdout, &mut materialise, p),
            None => {
                self.last = None;
                self.build_state(&stdout, &mut materialise)
            }
        };
        if let Err(e) = built {
            return Some(self.error(id, e));
        }
        if self.shared.is_cancelled() {
            return None;
        }
        match self.protocol {
            Protocol::PerProcess => self.run_process(id, &state_id),
            Protocol::Server => {
                let rebuild = rebuildable.then_some((&stdout[..], &mut materialise));
                self.run_server(id, &state_id, rebuild)
            }
        }
    }

    /// A fresh crash dir holding the state, and the stdout file.
    fn build_state(&self, stdout: &[u8], materialise: &mut Materialise) -> Result<(), String> {
        self.prepare(stdout)?;
        match panic::catch_unwind(AssertUnwindSafe(|| materialise(&self.crash))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("materialising the crash state failed: {e}")),
            Err(p) => Err(format!(
                "materialising the crash state panicked: {}",
                panic_text(&*p)
            )),
        }
    }

    /// The crash dir holding `p`'s state: the previous state's dir patched when it is
    /// known to be as written (`self.last`), else written whole. Either way the dir is
    /// then recorded (`self.last`) for the next job, and the worker waits, if the file
    /// system needs it, until a change by the checker would show in the ctimes.
    fn patch_state(
        &mut self,
        stdout: &[u8],
        materialise: &mut Materialise,
        p: Box<dyn PatchState>,
    ) -> Result<(), String> {
        let patched = match self.last.take() {
            Some((prev, _)) => {
                let r = panic::catch_unwind(AssertUnwindSafe(|| {
                    p.patch_from(prev.as_ref(), &self.crash)
                }));
                matches!(r, Ok(Ok(true))) && self.write_stdout(stdout).is_ok()
            }
            None => false,
        };
        if !patched {
            self.build_state(stdout, materialise)?;
        }
        // Without a snapshot (or a clock past its ctimes) the next state is written whole.
        if let Ok(snap) = Snapshot::take(&self.crash) {
            if self.fine_ctime || patch::wait_past(snap.newest_ctime()) {
                self.last = Some((p, snap));
            }
        }
        Ok(())
    }

    /// ALICE's contract: one checker process for this state.
    fn run_process(&self, id: u64, state_id: &str) -> Option<Outcome> {
        let (out, err) = match (
            File::create(&self.out_capture),
            File::create(&self.err_capture),
        ) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => {
                return Some(self.error(
                    id,
                    format!("cannot create checker output capture file: {e}"),
                ))
            }
        };

        let mut cmd = Command::new(&self.program);
        cmd.arg0(&self.arg0)
            .args(&self.args)
            .arg(&self.crash)
            .arg(&self.stdout_file)
            .stdin(Stdio::null())
            // Files, not pipes: a background process inheriting a pipe would
            // keep it open and make reading it hang.
            .stdout(out)
            .stderr(err)
            .env("INTACT_WORKER", self.index.to_string())
            .env("INTACT_STATE", state_id)
            // Own group, so the whole tree can be killed with one kill(-pgid).
            .process_group(0);

        let start = Instant::now();
        let child = match spawn_retrying(&mut cmd) {
            Ok(c) => c,
            Err(e) => {
                return Some(self.error(id, spawn_failure(&self.program, &e)));
            }
        };
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        let mut guard = ChildGuard { child, pgid };
        let end = self.wait(&mut guard.child, start);
        let elapsed = start.elapsed();
        // Kill leftovers (also after a normal exit) before reading the output.
        drop(guard);

        let verdict = match end {
            End::Exited(status) if status.success() => Verdict::Pass,
            End::Exited(status) => Verdict::Fail {
                code: status.code(),
                signal: status.signal(),
                stderr: fsutil::read_tail(&self.err_capture, self.keep),
                stdout: fsutil::read_tail(&self.out_capture, self.keep),
            },
            End::TimedOut(after) => Verdict::Timeout { after },
            End::Cancelled => return None,
            End::WaitFailed(e) => Verdict::Error(format!("waiting for the checker failed: {e}")),
        };
        Some(Outcome {
            id,
            verdict,
            elapsed,
            worker: self.index,
        })
    }

    /// The warm server judges this state; a server that dies on it is replaced and judges it
    /// again once, from a rebuilt crash dir (`rebuild`: the workload's stdout and the job's
    /// materialiser; `None` for a job that cannot be rebuilt, which is not retried).
    fn run_server(
        &mut self,
        id: u64,
        state_id: &str,
        mut rebuild: Option<(&[u8], &mut Materialise)>,
    ) -> Option<Outcome> {
        let start = Instant::now();
        let mut deaths = 0u32;
        let verdict = loop {
            let why = match self.ask_server(state_id) {
                Ok(Answer::Died(why)) => why,
                Ok(Answer::Cancelled) => {
                    self.server = None;
                    return None;
                }
                Ok(Answer::Pass) => break Verdict::Pass,
                Ok(Answer::Fail(message)) => {
                    break Verdict::Fail {
                        code: Some(1),
                        signal: None,
                        stderr: message,
                        stdout: String::new(),
                    }
                }
                // A server that overran or garbled its reply is replaced before the next state.
                Ok(Answer::TimedOut(after)) => {
                    self.server = None;
                    break Verdict::Timeout { after };
                }
                Ok(Answer::Garbled(why)) => {
                    self.server = None;
                    break Verdict::Error(why);
                }
                Err(e) => break Verdict::Error(e),
            };
            self.server = None;
            deaths += 1;
            assert!(deaths <= 2, "a state is judged by at most two servers");
            if !self.server_ever_answered && deaths == 2 {
                break Verdict::Error(format!(
                    "the checker server could not be run: it ended twice before answering any request ({why})"
                ));
            }
            let Some((stdout, materialise)) = rebuild.as_mut().filter(|_| deaths == 1) else {
                break self.death_verdict(&why, deaths);
            };
            if let Err(e) = self.build_state(stdout, materialise) {
                break Verdict::Error(format!("rebuilding the state after the server died: {e}"));
            }
        };
        Some(Outcome {
            id,
            verdict,
            elapsed: start.elapsed(),
            worker: self.index,
        })
    }

    /// Starts the server if there is none, then asks it about the state in the crash dir.
    fn ask_server(&mut self, state_id: &str) -> Result<Answer, String> {
        if self.server.is_none() {
            self.server = Some(Server::start(&ServerSpec {
                program: &self.program,
                arg0: &self.arg0,
                args: &self.args,
                worker: self.index,
                err_capture: &self.server_err,
                keep_bytes: self.keep,
            })?);
        }
        let server = self.server.as_mut().expect("started above");
        let request = Request {
            crash_dir: &self.crash,
            stdout_file: &self.stdout_file,
            state: state_id,
            worker: self.index,
        };
        let answer = server.ask(&request, self.timeout, &self.shared.cancelled);
        self.server_ever_answered |= server.has_answered();
        Ok(answer)
    }

    /// A server died judging this state and it is not judged again: inconsistent, as a
    /// per-process checker killed by a signal is, or an error if no server ever answered.
    fn death_verdict(&self, why: &str, deaths: u32) -> Verdict {
        if !self.server_ever_answered {
            return Verdict::Error(format!(
                "the checker server could not be run: it ended before answering any request ({why})"
            ));
        }
        let times = if deaths == 2 { "twice, " } else { "" };
        Verdict::Fail {
            code: None,
            signal: None,
            stderr: format!("the checker server died {times}while judging this state: {why}"),
            stdout: String::new(),
        }
    }

    /// Fresh, empty crash dir and the stdout file.
    fn prepare(&self, stdout: &[u8]) -> Result<(), String> {
        fsutil::force_remove(&self.crash)
            .map_err(|e| format!("cannot clear crash directory {}: {e}", self.crash.display()))?;
        fs::create_dir(&self.crash).map_err(|e| {
            format!(
                "cannot create crash directory {}: {e}",
                self.crash.display()
            )
        })?;
        self.write_stdout(stdout)
    }

    /// The stdout file, new.
    fn write_stdout(&self, stdout: &[u8]) -> Result<(), String> {
        // force_remove, not overwrite: the previous checker may have made it
        // read-only or replaced it with a symlink.
        fsutil::force_remove(&self.stdout_file)
            .and_then(|()| fs::write(&self.stdout_file, stdout))
            .map_err(|e| {
                format!(
                    "cannot write stdout file {}: {e}",
                    self.stdout_file.display()
                )
            })
    }

    fn wait(&self, child: &mut Child, start: Instant) -> End {
        loop {
            if self.shared.is_cancelled() {
                return End::Cancelled;
            }
            let slice = match self.timeout {
                Some(limit) => {
                    let spent = start.elapsed();
                    if spent >= limit {
                        return End::TimedOut(limit);
                    }
                    (limit - spent).min(CANCEL_POLL)
                }
                None => CANCEL_POLL,
            };
            match child.wait_timeout(slice) {
                Ok(Some(status)) => return End::Exited(status),
                Ok(None) => {}
                Err(e) => return End::WaitFailed(e),
            }
        }
    }
}

/// `spawn`, retried briefly on ETXTBSY. That error is transient when the
/// checker file was just written: another thread's fork can briefly inherit
/// the writer's descriptor until its exec closes it (see rust-lang/rust#114554).
/// `Some(explanation)` when `program` is a script whose `#!` line ends in a carriage
/// return (saved with CRLF line endings): the kernel, or `env`, then looks for an
/// interpreter whose name ends in `\r`, and the checker never starts.
pub fn crlf_shebang(program: &Path) -> Option<String> {
    let line = fsutil::first_line(program)?;
    let interp = line.strip_prefix(b"#!")?;
    if interp.last() != Some(&b'\r') {
        return None;
    }
    let shown = program.display();
    Some(format!(
        "its first line ends in a carriage return (CRLF line endings), so the interpreter it names is looked for as {:?}; convert the file with `sed -i 's/\\r$//' {shown}` (or dos2unix)",
        String::from_utf8_lossy(interp).trim_start()
    ))
}

/// Why the checker did not start, in the user's terms. A script whose `#!` line names a
/// missing interpreter fails with ENOENT like a missing script does; the commonest cause
/// is a file saved with CRLF line endings (the kernel then looks for `python3\r`).
pub(crate) fn spawn_failure(program: &Path, e: &std::io::Error) -> String {
    let shown = program.display();
    if e.kind() != std::io::ErrorKind::NotFound || !program.is_file() {
        return format!("cannot start checker {shown}: {e}");
    }
    let Some(line) = fsutil::first_line(program) else {
        return format!("cannot start checker {shown}: {e}");
    };
    let Some(interp) = line.strip_prefix(b"#!") else {
        return format!("cannot start checker {shown}: {e}");
    };
    let interp = String::from_utf8_lossy(interp).trim_start().to_string();
    if let Some(why) = crlf_shebang(program) {
        return format!("cannot start checker {shown}: {why}");
    }
    format!(
        "cannot start checker {shown}: its interpreter `{}` (first line) was not found; install it or fix the #! line",
        interp.trim_end()
    )
}

pub(crate) fn spawn_retrying(cmd: &mut Command) -> std::io::Result<Child> {
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10 * attempt));
            }
            other => return other,
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}
