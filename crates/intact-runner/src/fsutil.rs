//! File-system helpers: forced removal of trees a checker may have made
//! read-only, and reading the tail of a capture file.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// Removes `path` (file, symlink or directory tree) completely.
///
/// A checker may `chmod -R a-w` the crash directory, which makes a plain
/// `remove_dir_all` fail for non-root users, so every directory gets u+rwx
/// before it is read and emptied. Symlinks are never followed (a checker
/// could replace a directory by a link to somewhere precious).
///
/// A missing `path` is success. Retries a few times because processes we
/// just SIGKILLed may still be finishing a system call that creates files.
pub fn force_remove(path: &Path) -> io::Result<()> {
    let mut last = Ok(());
    for attempt in 0..4 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(20 * attempt));
        }
        last = remove_once(path);
        match &last {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(_) => {}
        }
    }
    last
}

fn remove_once(path: &Path) -> io::Result<()> {
    // Fast path: std's remove_dir_all works with directory fds and d_type (no stat per
    // entry, never follows symlinks); it fails only on directories the checker made
    // read-only (for non-root users), which the slow path below handles.
    if fs::remove_dir_all(path).is_ok() {
        return Ok(());
    }
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    make_owner_rwx(path, meta.permissions().mode())?;
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        remove_once(&entry.path())?;
    }
    match fs::remove_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn make_owner_rwx(path: &Path, mode: u32) -> io::Result<()> {
    if mode & 0o700 == 0o700 {
        return Ok(());
    }
    // set_permissions follows symlinks; the caller checked this is a real
    // directory with symlink_metadata just before.
    fs::set_permissions(path, fs::Permissions::from_mode((mode & 0o7777) | 0o700))
}

/// The last `max` bytes of the file at `path`, as (lossy) UTF-8.
/// A missing or unreadable file gives an empty string: the captured output is
/// only a diagnostic and must not turn a verdict into an error.
pub fn read_tail(path: &Path, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let Ok(mut f) = fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max as u64);
    if start > 0 && f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::with_capacity(max.min(len as usize));
    // take(): the checker's leftovers are dead, but be safe against growth.
    let _ = f.take(max as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last `max` bytes of `text` (cut at a character boundary).
pub fn tail_of(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// The first line of a file (without its `\n`, keeping any `\r`), read from at most its
/// first 4 KiB; `None` when it cannot be read.
pub fn first_line(path: &Path) -> Option<Vec<u8>> {
    let mut head = vec![0u8; 4096];
    let mut f = fs::File::open(path).ok()?;
    let n = f.read(&mut head).ok()?;
    head.truncate(n);
    let end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    head.truncate(end);
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_end() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_tail(&p, 4), "6789");
        assert_eq!(read_tail(&p, 100), "0123456789");
        assert_eq!(read_tail(&p, 0), "");
        assert_eq!(read_tail(&d.path().join("missing"), 10), "");
    }

    #[test]
    fn force_remove_read_only_tree_and_symlink() {
        let d = tempfile::tempdir().unwrap();
        let keep = d.path().join("keep");
        fs::create_dir(&keep).unwrap();
        fs::write(keep.join("precious"), b"x").unwrap();

        let root = d.path().join("root");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&keep, root.join("a/link")).unwrap();
        for p in [root.join("a/b"), root.join("a"), root.clone()] {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o500)).unwrap();
        }
        force_remove(&root).unwrap();
        assert!(!root.exists());
        assert!(
            keep.join("precious").exists(),
            "symlink target must survive"
        );
        force_remove(&root).unwrap(); // missing is fine
    }
}
