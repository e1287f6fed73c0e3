//! The argument signatures of the system calls the converter interprets, checked before a
//! call is replayed: a trace line with missing or mistyped arguments (an edited or damaged
//! trace; strace itself always prints every argument) is an input error naming the line,
//! never an index out of bounds. Also the bounds of offsets and sizes: Linux files end
//! before 2^63 (MAX_LFS_FILESIZE), so any offset or size past that is malformed input.

use intact_trace::{Arg, Call};

/// The largest file size or offset Linux allows (`MAX_LFS_FILESIZE`, 2^63 - 1).
pub const MAX_FILE_SIZE_BYTES: u64 = i64::MAX as u64;

/// What a positional argument must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A file descriptor: a number, with or without strace's `-y` path.
    Fd,
    /// A directory fd of an *at call: an fd or `AT_FDCWD`.
    DirFd,
    /// A quoted path.
    Path,
    /// A quoted path or `NULL`.
    PathOrNull,
    /// A number (offset, size, length).
    Num,
    /// Anything (flags, buffers, structures, pointers).
    Any,
}

use Kind::*;

/// The positional arguments a call must have, or `None` for calls the converter does
/// not look into.
pub fn signature(name: &str) -> Option<&'static [Kind]> {
    let s: &'static [Kind] = match name {
        "open" => &[Path, Any],
        "openat" | "openat2" => &[DirFd, Path, Any],
        "creat" => &[Path, Any],
        "close" | "fsync" | "fdatasync" | "syncfs" | "fchdir" | "dup" => &[Fd],
        "close_range" => &[Num],
        "dup2" => &[Fd, Num],
        "dup3" => &[Fd, Num, Any],
        "fcntl" => &[Fd, Any],
        "lseek" => &[Fd, Num, Any],
        "read" | "readv" | "write" | "writev" => &[Fd, Any, Num],
        "pwrite64" | "pwritev" => &[Fd, Any, Num, Num],
        "pwritev2" => &[Fd, Any, Num, Num, Any],
        "truncate" => &[Path, Num],
        "ftruncate" => &[Fd, Num],
        "fallocate" => &[Fd, Any, Num, Num],
        "copy_file_range" => &[Fd, Any, Fd, Any, Num, Any],
        "sendfile" => &[Fd, Fd, Any, Num],
        "splice" => &[Fd, Any, Fd, Any, Num, Any],
        "rename" | "link" | "symlink" => &[Path, Path],
        "renameat" => &[DirFd, Path, DirFd, Path],
        "renameat2" => &[DirFd, Path, DirFd, Path, Any],
        "linkat" => &[DirFd, Path, DirFd, Path, Any],
        "symlinkat" => &[Path, DirFd, Path],
        "unlink" | "rmdir" | "chdir" => &[Path],
        "unlinkat" => &[DirFd, Path, Any],
        "mkdir" => &[Path, Any],
        "mkdirat" => &[DirFd, Path, Any],
        // The device number is printed for device nodes only.
        "mknod" => &[Path, Any],
        "mknodat" => &[DirFd, Path, Any],
        "sync_file_range" => &[Fd, Num, Num, Any],
        "msync" => &[Num, Num, Any],
        "mmap" => &[Any, Num, Any, Any, Any, Num],
        "munmap" => &[Num, Num],
        "mremap" => &[Num, Num, Num, Any],
        "execve" => &[Path, Any, Any],
        "execveat" => &[DirFd, Path, Any, Any, Any],
        "ioctl" => &[Fd, Any],
        "chmod" | "removexattr" | "lremovexattr" | "utime" | "utimes" => &[Path, Any],
        "fchmod" | "fremovexattr" => &[Fd, Any],
        "chown" | "lchown" => &[Path, Any, Any],
        "fchown" => &[Fd, Any, Any],
        "fchmodat" | "futimesat" => &[DirFd, PathOrNull, Any],
        "fchownat" => &[DirFd, PathOrNull, Any, Any, Any],
        "utimensat" => &[DirFd, PathOrNull, Any, Any],
        "setxattr" | "lsetxattr" => &[Path, Any, Any, Any, Any],
        "fsetxattr" => &[Fd, Any, Any, Any, Any],
        _ => return None,
    };
    Some(s)
}

fn fits(kind: Kind, a: &Arg) -> bool {
    match kind {
        Fd => matches!(a, Arg::Int(_) | Arg::Fd { .. }),
        DirFd => matches!(a, Arg::Int(_) | Arg::Fd { .. }) || a.as_int() == Some(-100),
        Path => matches!(a, Arg::Str { .. }),
        PathOrNull => matches!(a, Arg::Str { .. }) || a.is_null(),
        // `[0] => [5]` style values and NULL print as numbers for offsets.
        Num => a.as_int().is_some(),
        Any => true,
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Fd => "a file descriptor",
        DirFd => "a directory file descriptor or AT_FDCWD",
        Path => "a quoted path",
        PathOrNull => "a quoted path or NULL",
        Num => "a number",
        Any => "an argument",
    }
}

fn found(a: &Arg) -> &'static str {
    match a {
        Arg::Int(_) => "a number",
        Arg::Str { .. } => "a string",
        Arg::Fd { .. } => "a file descriptor",
        Arg::Sym(_) => "a symbol",
        Arg::Struct(_) => "a structure",
        Arg::Array(_) => "an array",
        Arg::Changed(..) => "a changed value",
    }
}

/// Checks the count and kinds of `call`'s arguments against its signature.
pub fn check(call: &Call) -> Result<(), String> {
    let Some(sig) = signature(&call.name) else {
        return Ok(());
    };
    if call.args.len() < sig.len() {
        return Err(format!(
            "{} takes {} arguments; the line has {}",
            call.name,
            sig.len(),
            call.args.len()
        ));
    }
    for (i, (kind, a)) in sig.iter().zip(&call.args).enumerate() {
        if !fits(*kind, a) {
            return Err(format!(
                "argument {} of {}: expected {}, found {}",
                i + 1,
                call.name,
                kind_name(*kind),
                found(a)
            ));
        }
    }
    Ok(())
}

/// An offset or size argument, checked to lie in `0..=MAX_FILE_SIZE_BYTES`.
pub fn size_arg(call: &Call, i: usize, what: &str) -> Result<u64, String> {
    let v = call
        .args
        .get(i)
        .and_then(|a| a.as_int())
        .ok_or_else(|| format!("argument {}: expected {what} (a number)", i + 1))?;
    u64::try_from(v).map_err(|_| {
        format!(
            "argument {}: {what} is out of range (negative, or past 2^63 - 1: {v} as a signed 64-bit number)",
            i + 1
        )
    })
}

/// `offset + len`, the end of a byte range in a file, bounded by the largest file size.
pub fn range_end(offset: u64, len: u64) -> Result<u64, String> {
    offset
        .checked_add(len)
        .filter(|&end| end <= MAX_FILE_SIZE_BYTES)
        .ok_or_else(|| {
            format!(
                "offset {offset} + length {len} is past the largest file size ({MAX_FILE_SIZE_BYTES} bytes)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(text: &str) -> Call {
        intact_trace::parse::parse_call(1, text, 1).expect("parses")
    }

    #[test]
    fn missing_and_mistyped_arguments_are_named() {
        let e = check(&call("fsync() = 0")).unwrap_err();
        assert!(e.contains("fsync takes 1 arguments; the line has 0"), "{e}");
        let e = check(&call(r#"lseek("a", 0, SEEK_SET) = 0"#)).unwrap_err();
        assert!(e.contains("argument 1 of lseek"), "{e}");
        check(&call("fsync(3</d/a>) = 0")).expect("well-formed");
        check(&call("utimensat(AT_FDCWD</d>, NULL, NULL, 0) = 0")).expect("well-formed");
        check(&call("no_such_call() = 0")).expect("not interpreted");
    }

    #[test]
    fn ranges_are_bounded() {
        assert_eq!(range_end(1, 2), Ok(3));
        assert!(range_end(u64::MAX - 1, 5).is_err());
        assert!(range_end(MAX_FILE_SIZE_BYTES, 1).is_err());
        assert_eq!(range_end(MAX_FILE_SIZE_BYTES, 0), Ok(MAX_FILE_SIZE_BYTES));
    }
}
