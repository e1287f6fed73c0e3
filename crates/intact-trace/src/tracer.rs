//! Running a workload under strace.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The LD_PRELOAD shim, built by build.rs from shim/intact_preload.c.
pub const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libintact_preload.so"));

/// System calls the tracer asks strace for. Everything that can change the recorded
/// directory, move a file offset, create or copy a file descriptor, change the working
/// directory, or create/replace a task; plus the calls the model cannot express, so
/// they are reported rather than missed.
pub const TRACED: &[&str] = &[
    // open / fd table
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    // offsets
    "read",
    "readv",
    "lseek",
    // data
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "truncate",
    "ftruncate",
    "fallocate",
    "copy_file_range",
    "sendfile",
    "splice",
    // namespace
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "symlink",
    "symlinkat",
    "mknod",
    "mknodat",
    // sync
    "fsync",
    "fdatasync",
    "sync_file_range",
    "syncfs",
    "sync",
    "msync",
    // memory maps
    "mmap",
    "munmap",
    "mremap",
    // cwd and tasks
    "chdir",
    "fchdir",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "execve",
    "execveat",
    // attributes and interfaces the model does not express (reported)
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utimensat",
    "utime",
    "utimes",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "io_uring_setup",
    // FIOCLEX/FIONCLEX change close-on-exec; FICLONE copies data unseen
    "ioctl",
];

/// Calls whose buffers strace should not print (only their results matter).
const RAW: &[&str] = &["read", "readv"];

#[derive(Clone, Debug)]
pub struct TraceConfig {
    pub strace: PathBuf,
    /// Capture a stack per call (`strace -k`): slow (~2.4 ms per call here) but gives source lines.
    pub stacks: bool,
    /// Largest buffer captured exactly (`strace -s`).
    pub max_string: usize,
    /// Give the workload a pseudo-terminal as its standard output (copied to ours), so it
    /// buffers its output as on a terminal; `false`: it inherits ours and its own buffering.
    pub stdout_terminal: bool,
}

/// What a traced run left besides the raw trace.
#[derive(Debug)]
pub struct Traced {
    /// strace's exit status (the workload's own is read from the trace).
    pub status: std::process::ExitStatus,
    /// The pseudo-terminal the workload had as its stdout, as strace's `-y` names it.
    pub stdout_terminal: Option<String>,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            strace: PathBuf::from("strace"),
            stacks: true,
            max_string: 64 << 20,
            stdout_terminal: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("strace was not found ({0}); install it: apt-get install -y strace")]
    NoStrace(String),
    #[error("command not found: {0:?} (not a path to an executable and not on PATH)")]
    NoCommand(String),
    #[error("no command given: use `intact record [options] -- CMD [ARGS...]`")]
    EmptyCommand,
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("strace failed (exit status {status}): {stderr}")]
    Strace { status: String, stderr: String },
}

/// The version line of strace, or why it cannot run.
pub fn strace_version(strace: &Path) -> Result<String, TraceError> {
    let out = Command::new(strace)
        .arg("-V")
        .output()
        .map_err(|e| TraceError::NoStrace(format!("{}: {e}", strace.display())))?;
    if !out.status.success() {
        return Err(TraceError::NoStrace(format!(
            "{} -V exited with {}",
            strace.display(),
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Finds `cmd` the way execvp would, so a missing command is reported before tracing.
pub fn find_command(cmd: &str, cwd: &Path) -> Result<PathBuf, TraceError> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.is_file()
            && p.metadata()
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if cmd.contains('/') {
        let p = cwd.join(cmd);
        return if is_exec(&p) {
            Ok(p)
        } else {
            Err(TraceError::NoCommand(cmd.to_string()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join(cmd);
        if is_exec(&p) {
            return Ok(p);
        }
    }
    Err(TraceError::NoCommand(cmd.to_string()))
}

/// Runs `cmd` in `cwd` under strace, writing the raw trace to `raw_out`. The workload's
/// stdin and stderr are the caller's; its stdout too, or a pseudo-terminal copied to the
/// caller's (`cfg.stdout_terminal`). `shim` is the path of the preload library.
pub fn run(
    cfg: &TraceConfig,
    cmd: &[String],
    cwd: &Path,
    raw_out: &Path,
    shim: Option<&Path>,
) -> Result<Traced, TraceError> {
    if cmd.is_empty() {
        return Err(TraceError::EmptyCommand);
    }
    strace_version(&cfg.strace)?;
    find_command(&cmd[0], cwd)?;
    let mut c = Command::new(&cfg.strace);
    c.current_dir(cwd);
    c.args(["-f", "-y", "-q", "--seccomp-bpf"]);
    if cfg.stacks {
        c.arg("-k");
    }
    c.arg("-s").arg(cfg.max_string.to_string());
    c.arg("-e").arg(format!("raw={}", RAW.join(",")));
    c.arg("-e").arg(format!("trace={}", TRACED.join(",")));
    c.arg("-o").arg(raw_out);
    if let Some(shim) = shim {
        let mut pre = shim.display().to_string();
        if let Ok(old) = std::env::var("LD_PRELOAD") {
            if !old.is_empty() {
                pre = format!("{pre}:{old}");
            }
        }
        c.arg("-E").arg(format!("LD_PRELOAD={pre}"));
        c.arg("-E").arg(java_tool_options(shim));
    }
    c.arg("--").args(cmd);
    c.stdin(Stdio::inherit()).stderr(Stdio::inherit());
    let (copy, stdout_terminal) = if cfg.stdout_terminal {
        let pty = crate::pty::Pty::open().map_err(|e| TraceError::Io {
            what: "opening a pseudo-terminal for the workload's stdout".into(),
            source: e,
        })?;
        let name = pty.name.clone();
        let (slave, copy) = pty.copy_out();
        c.stdout(Stdio::from(slave));
        (Some(copy), Some(name))
    } else {
        c.stdout(Stdio::inherit());
        (None, None)
    };
    let child = c.spawn();
    // Our copy of the terminal's slave side goes with the command, so the copy sees the
    // end once the workload and its children are gone.
    drop(c);
    let status = child
        .and_then(|mut ch| ch.wait())
        .map_err(|e| TraceError::Io {
            what: format!("running {}", cfg.strace.display()),
            source: e,
        })?;
    if let Some(copy) = copy {
        copy.finish();
    }
    Ok(Traced {
        status,
        stdout_terminal,
    })
}

/// `JAVA_TOOL_OPTIONS=...` that loads the shim into every JVM of the workload as a JVMTI
/// agent too, so it can name the Java source line of each file-system call (JV markers,
/// shim/README.md). Every JVM reads this variable (and says so on its stderr: "Picked up
/// JAVA_TOOL_OPTIONS"); the workload's own options are kept after ours.
fn java_tool_options(shim: &Path) -> String {
    let ours = format!("-agentpath:{}", shim.display());
    match std::env::var("JAVA_TOOL_OPTIONS") {
        Ok(old) if !old.trim().is_empty() => format!("JAVA_TOOL_OPTIONS={ours} {old}"),
        _ => format!("JAVA_TOOL_OPTIONS={ours}"),
    }
}

/// Writes the embedded shim into `dir` and returns its path.
pub fn install_shim(dir: &Path) -> Result<PathBuf, TraceError> {
    let p = dir.join("libintact_preload.so");
    std::fs::write(&p, SHIM).map_err(|e| TraceError::Io {
        what: format!("writing {}", p.display()),
        source: e,
    })?;
    Ok(p)
}
