//! Finding the checker program the way a shell would, so that a mistake is
//! reported once at start instead of as a spawn error on every crash state.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::RunnerError;

/// What `sh` uses when PATH is unset (close enough to Debian's dash/bash).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Resolves `program`: a name containing '/' is taken as a path (relative to
/// the cwd); otherwise each PATH entry is tried in order (an empty entry means
/// the cwd, as in POSIX shells). Returns the path to spawn.
pub fn resolve_program(program: &str) -> Result<PathBuf, RunnerError> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match check_executable(&p) {
            Exec::Yes => Ok(p),
            Exec::Missing => Err(RunnerError::CheckerNotFound {
                program: program.to_string(),
                hint: "no such file; check the path (relative paths are taken from the current directory)".into(),
            }),
            Exec::NotExecutable(why) => Err(RunnerError::CheckerNotExecutable {
                path: p,
                why,
            }),
        };
    }
    let path_var = std::env::var_os("PATH");
    let path_var = path_var.as_deref().unwrap_or(OsStr::new(DEFAULT_PATH));
    // Remember the first non-executable match: if nothing executable is found
    // it is a better diagnosis than "not found".
    let mut first_bad: Option<(PathBuf, String)> = None;
    for dir in std::env::split_paths(path_var) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let cand = dir.join(program);
        // A PATH entry we cannot search (EACCES, ENOTDIR) is skipped, as execvp does.
        if std::fs::metadata(&cand).is_err() {
            continue;
        }
        match check_executable(&cand) {
            Exec::Yes => return Ok(cand),
            Exec::Missing => {}
            Exec::NotExecutable(why) => {
                if first_bad.is_none() {
                    first_bad = Some((cand, why));
                }
            }
        }
    }
    match first_bad {
        Some((path, why)) => Err(RunnerError::CheckerNotExecutable { path, why }),
        None => Err(RunnerError::CheckerNotFound {
            program: program.to_string(),
            hint: "not found in PATH; give a path containing '/' (e.g. ./check.sh) or install it"
                .into(),
        }),
    }
}

enum Exec {
    Yes,
    Missing,
    NotExecutable(String),
}

fn check_executable(p: &Path) -> Exec {
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Exec::Missing,
        Err(e) => return Exec::NotExecutable(format!("cannot inspect it: {e}")),
    };
    if meta.is_dir() {
        return Exec::NotExecutable("it is a directory".into());
    }
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return Exec::NotExecutable("path contains a NUL byte".into());
    };
    // access(X_OK) rather than mode bits: it applies owner/group/other and
    // ACLs for our uid the way exec will.
    // SAFETY: c is a valid NUL-terminated string.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Exec::NotExecutable(
            "no execute permission; run `chmod +x` on it or name an interpreter first (e.g. `sh script`)".into(),
        );
    }
    Exec::Yes
}
