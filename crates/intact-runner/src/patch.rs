//! Patching a worker's crash directory from one state to the next instead of writing each
//! state whole (issue 29), and knowing when that is sound: the checker may modify its crash
//! directory, so after each run the directory is compared with what was written
//! ([`Snapshot`]) and any difference makes the next state a full rebuild.
//!
//! A [`Snapshot`] records, for the crash directory and every entry below it (symlinks not
//! followed), its path, inode number, type and mode, owner, size, link count and status
//! change time (`st_ctime`, which no unprivileged process can set back: writing, truncating,
//! chmod, chown, linking, renaming into or out of a directory, adding or removing its
//! entries all move it). Equal snapshots before and after the checker mean the checker left
//! the directory as written, provided a change cannot get the ctime the entry already had:
//!
//! * On a file system with fine-grained timestamps after a query (Linux ≥ 6.13's
//!   multigrain timestamps on tmpfs, ext4, xfs, btrfs: once a ctime was read, the next
//!   change gets a strictly later one), that holds by itself. Each worker checks it in its
//!   scratch directory at start ([`ctime_is_fine`]).
//! * Otherwise a change within the same clock tick as the write would keep the ctime, so
//!   the worker waits, before starting the checker, until the coarse clock has passed the
//!   newest ctime recorded ([`wait_past`]): at most one tick (1–10 ms).
//!
//! What this does not cover (as the process-group kill does not): a process the checker
//! started outside its process group that modifies the directory later; and a system clock
//! set back while a check runs.

use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A crash state that can turn a directory holding another state of its kind into itself
/// ([`crate::Job::patch`]).
pub trait PatchState: Send + Sync {
    /// Turns `dir`, which holds exactly `prev` as its job wrote it (whole or patched), into
    /// this state. `Ok(false)`: this state cannot be patched from `prev` (another kind of
    /// state, a change too large to patch); the runner then writes it whole. An error or
    /// `Ok(false)` may leave `dir` half patched: the runner rebuilds it.
    fn patch_from(&self, prev: &dyn PatchState, dir: &Path) -> Result<bool, String>;
    /// For downcasting `prev` in [`PatchState::patch_from`].
    fn as_any(&self) -> &dyn std::any::Any;
}

/// One entry as [`Snapshot`] records it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    ino: u64,
    dev: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    nlink: u64,
    ctime: (i64, i64),
}

/// The crash directory's entries right after they were written; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    entries: Vec<Entry>,
}

impl Snapshot {
    /// Records `dir` and everything below it, in name order, never following symlinks.
    pub(crate) fn take(dir: &Path) -> io::Result<Snapshot> {
        let mut entries = Vec::new();
        let meta = fs::symlink_metadata(dir)?;
        entries.push(entry(PathBuf::new(), &meta));
        if meta.is_dir() {
            walk(dir, Path::new(""), &mut entries)?;
        }
        Ok(Snapshot { entries })
    }

    /// The newest status change time recorded.
    pub(crate) fn newest_ctime(&self) -> (i64, i64) {
        self.entries.iter().map(|e| e.ctime).max().unwrap_or((0, 0))
    }
}

fn entry(path: PathBuf, m: &fs::Metadata) -> Entry {
    Entry {
        path,
        ino: m.ino(),
        dev: m.dev(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        size: m.size(),
        nlink: m.nlink(),
        ctime: (m.ctime(), m.ctime_nsec()),
    }
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<Entry>) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(root.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let p = rel.join(&name);
        let meta = fs::symlink_metadata(root.join(&p))?;
        let is_dir = meta.is_dir();
        out.push(entry(p.clone(), &meta));
        if is_dir {
            walk(root, &p, out)?;
        }
    }
    Ok(())
}

fn coarse_now() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain system call writing into `ts`.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if r != 0 {
        return (i64::MAX, 0); // cannot tell: the caller's wait ends at once (see wait_past)
    }
    #[allow(clippy::unnecessary_cast)] // i64 already on 64-bit targets, not on all
    (ts.tv_sec as i64, ts.tv_nsec as i64)
}

/// Waits until the coarse real-time clock (the one file timestamps come from when they are
/// not fine-grained) is past `t`, so that a change from now on gets a later ctime. Gives up
/// after a second (a clock that does not move), which the caller treats as unsound.
pub(crate) fn wait_past(t: (i64, i64)) -> bool {
    for _ in 0..1000 {
        if coarse_now() > t {
            return true;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    false
}

/// Whether a file in `dir` gets a strictly later ctime at each change after its ctime was
/// read, even within one tick of the coarse clock (multigrain timestamps). Tries a few
/// times to fit the test inside one tick; `false` when it cannot tell.
pub(crate) fn ctime_is_fine(dir: &Path) -> bool {
    let p = dir.join("ctime-probe");
    let result = (|| -> io::Result<bool> {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)?;
        for _ in 0..20 {
            let tick = coarse_now();
            let mut last = None;
            let mut increasing = true;
            for i in 0..8u8 {
                f.write_all_at(&[i], 0)?;
                let m = f.metadata()?;
                let c = (m.ctime(), m.ctime_nsec());
                if last.is_some_and(|l| c <= l) {
                    increasing = false;
                }
                last = Some(c);
            }
            if coarse_now() != tick {
                continue; // crossed a tick: inconclusive
            }
            return Ok(increasing);
        }
        Ok(false)
    })();
    let _ = fs::remove_file(&p);
    result.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn snapshot_sees_every_kind_of_change() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("crash");
        let build = || {
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(root.join("sub")).unwrap();
            fs::write(root.join("a"), b"0123").unwrap();
            fs::write(root.join("sub/b"), b"xy").unwrap();
            std::os::unix::fs::symlink("a", root.join("l")).unwrap();
            let s = Snapshot::take(&root).unwrap();
            assert!(wait_past(s.newest_ctime()));
            s
        };
        type Change = Box<dyn Fn(&Path)>;
        let changes: Vec<(&str, Change)> = vec![
            (
                "same-size overwrite",
                Box::new(|r| fs::write(r.join("a"), b"9999").unwrap()),
            ),
            (
                "append",
                Box::new(|r| {
                    fs::OpenOptions::new()
                        .append(true)
                        .open(r.join("sub/b"))
                        .unwrap()
                        .write_all_at(b"z", 2)
                        .unwrap()
                }),
            ),
            (
                "chmod",
                Box::new(|r| {
                    fs::set_permissions(r.join("a"), fs::Permissions::from_mode(0o400)).unwrap()
                }),
            ),
            (
                "new file",
                Box::new(|r| fs::write(r.join("sub/new"), b"").unwrap()),
            ),
            (
                "removed file",
                Box::new(|r| fs::remove_file(r.join("sub/b")).unwrap()),
            ),
            (
                "hard link elsewhere",
                Box::new(|r| fs::hard_link(r.join("a"), r.parent().unwrap().join("out")).unwrap()),
            ),
            (
                "symlink replaced",
                Box::new(|r| {
                    fs::remove_file(r.join("l")).unwrap();
                    std::os::unix::fs::symlink("sub", r.join("l")).unwrap();
                }),
            ),
            (
                "chmod of the root",
                Box::new(|r| fs::set_permissions(r, fs::Permissions::from_mode(0o500)).unwrap()),
            ),
        ];
        for (what, change) in changes {
            let before = build();
            assert_eq!(
                before,
                Snapshot::take(&root).unwrap(),
                "nothing changed yet"
            );
            change(&root);
            assert_ne!(before, Snapshot::take(&root).unwrap(), "{what} not seen");
            let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o755));
            let _ = fs::remove_file(d.path().join("out"));
        }
    }

    #[test]
    fn fine_ctime_probe_answers() {
        let d = tempfile::tempdir().unwrap();
        // Either answer is possible; it must not fail or leave its file behind.
        let _ = ctime_is_fine(d.path());
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
