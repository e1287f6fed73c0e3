//! Reading a real directory into a logical [`State`] (the snapshot of `record`).

use crate::sparse::Sparse;
use crate::state::{Inode, InodeId, Node, State};
use globset::{GlobSet, GlobSetBuilder};
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: file names that are not UTF-8 are not supported")]
    NonUtf8 { path: PathBuf },
    #[error(
        "{path}: {kind} files are not supported (only regular files, directories and symlinks)"
    )]
    Special { path: PathBuf, kind: &'static str },
    #[error("bad --ignore pattern {pattern:?}: {message}")]
    Pattern { pattern: String, message: String },
}

/// Paths (relative to the recorded directory) left out of snapshots and operations.
#[derive(Clone, Debug, Default)]
pub struct IgnoreSet {
    set: Option<GlobSet>,
    patterns: Vec<String>,
}

impl IgnoreSet {
    /// Patterns are globs over the path relative to the recorded directory; `*` does not
    /// cross `/`, `**` does. A pattern without `/` matches the file name at any depth.
    pub fn new(patterns: &[String]) -> Result<IgnoreSet, SnapshotError> {
        if patterns.is_empty() {
            return Ok(IgnoreSet::default());
        }
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let full = if p.contains('/') {
                p.clone()
            } else {
                format!("**/{p}")
            };
            let g = globset::GlobBuilder::new(&full)
                .literal_separator(true)
                .build()
                .map_err(|e| SnapshotError::Pattern {
                    pattern: p.clone(),
                    message: e.to_string(),
                })?;
            b.add(g);
        }
        let set = b.build().map_err(|e| SnapshotError::Pattern {
            pattern: patterns.join(","),
            message: e.to_string(),
        })?;
        Ok(IgnoreSet {
            set: Some(set),
            patterns: patterns.to_vec(),
        })
    }
    pub fn is_empty(&self) -> bool {
        self.set.is_none()
    }
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
    /// Whether `rel` (or a directory above it) is ignored.
    pub fn is_ignored(&self, rel: &str) -> bool {
        let Some(set) = &self.set else { return false };
        if rel.is_empty() {
            return false;
        }
        let mut prefix = String::new();
        for comp in rel.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(comp);
            if set.is_match(&prefix) {
                return true;
            }
        }
        false
    }
}

/// Reads `dir` (not following symlinks) into a state. Hard links share one inode.
/// The root is inode 1; other ids are assigned in sorted path order, so two snapshots of
/// the same tree get the same ids.
pub fn capture(dir: &Path, ignore: &IgnoreSet) -> Result<State, SnapshotError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SnapshotError::Io { path, source }
    };
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() {
        return Err(SnapshotError::Io {
            path: dir.into(),
            source: std::io::Error::other("not a directory"),
        });
    }
    let mut state = State::empty();
    state.inodes.get_mut(&1).unwrap().mode = meta.mode();
    let mut by_devino: HashMap<(u64, u64), InodeId> = HashMap::new();
    // Depth-first in sorted order for deterministic ids.
    let mut stack: Vec<(PathBuf, String, InodeId)> = vec![(dir.to_path_buf(), String::new(), 1)];
    while let Some((abs, rel, id)) = stack.pop() {
        let mut names = Vec::new();
        for ent in std::fs::read_dir(&abs).map_err(io(&abs))? {
            let ent = ent.map_err(io(&abs))?;
            let name = ent
                .file_name()
                .into_string()
                .map_err(|_| SnapshotError::NonUtf8 { path: ent.path() })?;
            names.push(name);
        }
        names.sort();
        let mut entries = BTreeMap::new();
        let mut subdirs = Vec::new();
        for name in names {
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if ignore.is_ignored(&child_rel) {
                continue;
            }
            let child_abs = abs.join(&name);
            let m = std::fs::symlink_metadata(&child_abs).map_err(io(&child_abs))?;
            let ft = m.file_type();
            let child_id =
                if ft.is_file() {
                    if let Some(&existing) = by_devino.get(&(m.dev(), m.ino())) {
                        state.inodes.get_mut(&existing).unwrap().nlink += 1;
                        entries.insert(name, existing);
                        continue;
                    }
                    let data = read_sparse(&child_abs, m.len()).map_err(io(&child_abs))?;
                    let cid = state.alloc_id();
                    by_devino.insert((m.dev(), m.ino()), cid);
                    state.inodes.insert(
                        cid,
                        Inode {
                            id: cid,
                            mode: m.mode(),
                            nlink: 1,
                            node: Node::File { data },
                        },
                    );
                    cid
                } else if ft.is_dir() {
                    let cid = state.alloc_id();
                    state.inodes.insert(
                        cid,
                        Inode {
                            id: cid,
                            mode: m.mode(),
                            nlink: 1,
                            node: Node::Dir {
                                entries: BTreeMap::new(),
                                parent: id,
                            },
                        },
                    );
                    subdirs.push((child_abs, child_rel, cid));
                    cid
                } else if ft.is_symlink() {
                    if let Some(&existing) = by_devino.get(&(m.dev(), m.ino())) {
                        state.inodes.get_mut(&existing).unwrap().nlink += 1;
                        entries.insert(name, existing);
                        continue;
                    }
                    let target = std::fs::read_link(&child_abs).map_err(io(&child_abs))?;
                    let target = target.into_os_string().into_string().map_err(|_| {
                        SnapshotError::NonUtf8 {
                            path: child_abs.clone(),
                        }
                    })?;
                    let cid = state.alloc_id();
                    by_devino.insert((m.dev(), m.ino()), cid);
                    state.inodes.insert(
                        cid,
                        Inode {
                            id: cid,
                            mode: m.mode(),
                            nlink: 1,
                            node: Node::Symlink { target },
                        },
                    );
                    cid
                } else {
                    use std::os::unix::fs::FileTypeExt;
                    let kind = if ft.is_fifo() {
                        "FIFO"
                    } else if ft.is_socket() {
                        "socket"
                    } else {
                        "device"
                    };
                    return Err(SnapshotError::Special {
                        path: child_abs,
                        kind,
                    });
                };
            entries.insert(name, child_id);
        }
        if let Some(Inode {
            node: Node::Dir { entries: e, .. },
            ..
        }) = state.inodes.get_mut(&id)
        {
            *e = entries;
        }
        // Reverse so that pop() visits in sorted order.
        for sd in subdirs.into_iter().rev() {
            stack.push(sd);
        }
    }
    Ok(state)
}

/// A regular file's contents, its holes kept as holes (SEEK_DATA/SEEK_HOLE), so a sparse
/// file of 1 TiB costs what it has allocated. A file system without SEEK_DATA reports the
/// whole file as data, which is read as it is.
fn read_sparse(path: &Path, size_bytes: u64) -> std::io::Result<Sparse> {
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path)?;
    let fd = f.as_raw_fd();
    let mut data = Sparse::new();
    let mut pos: u64 = 0;
    while pos < size_bytes {
        let (start, end) = match seek(fd, pos, libc::SEEK_DATA) {
            Ok(None) => break, // only a hole remains
            Ok(Some(start)) => {
                let hole = seek(fd, start, libc::SEEK_HOLE)?.unwrap_or(size_bytes);
                (start, hole.min(size_bytes))
            }
            // No SEEK_DATA here: all of it is data.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => {
                (pos, size_bytes)
            }
            Err(e) => return Err(e),
        };
        if start >= end {
            break; // data only past the size we read (the file grew meanwhile)
        }
        assert!(start >= pos, "SEEK_DATA went backwards");
        let mut at = start;
        let mut buf = vec![0u8; (end - start).min(1 << 20) as usize];
        while at < end {
            let n = (end - at).min(buf.len() as u64) as usize;
            let got = f.read_at(&mut buf[..n], at)?;
            if got == 0 {
                break; // the file shrank while we read it
            }
            data.write(at, &buf[..got]).map_err(std::io::Error::other)?;
            at += got as u64;
        }
        pos = end.max(pos + 1);
    }
    data.set_len(size_bytes);
    Ok(data)
}

/// lseek(2) with SEEK_DATA or SEEK_HOLE: `None` at ENXIO (no more data past `pos`).
fn seek(fd: i32, pos: u64, whence: i32) -> std::io::Result<Option<u64>> {
    let pos = i64::try_from(pos).map_err(std::io::Error::other)?;
    // SAFETY: lseek on a descriptor we own for the duration of the call; no memory is passed.
    let r = unsafe { libc::lseek(fd, pos, whence) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(r as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_symlinks_and_ignore() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/a"), b"abc").unwrap();
        std::fs::hard_link(d.join("sub/a"), d.join("b")).unwrap();
        std::os::unix::fs::symlink("sub/a", d.join("s")).unwrap();
        std::fs::write(d.join("x.lock"), b"").unwrap();
        let ig = IgnoreSet::new(&["*.lock".to_string()]).unwrap();
        let s = capture(d, &ig).unwrap();
        let paths: Vec<_> = s.reachable().into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, vec!["b", "s", "sub", "sub/a"]);
        let r: HashMap<_, _> = s.reachable().into_iter().collect();
        assert_eq!(r["b"], r["sub/a"]);
        assert_eq!(s.get(r["b"]).unwrap().nlink, 2);
        assert!(
            matches!(&s.get(r["s"]).unwrap().node, Node::Symlink { target } if target == "sub/a")
        );
        // Same tree, same ids.
        let s2 = capture(d, &ig).unwrap();
        assert_eq!(s.reachable(), s2.reachable());
        assert_eq!(s.diff(&s2), None);
        std::fs::write(d.join("sub/a"), b"abd").unwrap();
        let s3 = capture(d, &ig).unwrap();
        assert_eq!(
            s.diff(&s3).unwrap(),
            "b: contents differ at offset 2 (0x63 vs 0x64)"
        );
    }

    #[test]
    fn ignore_dir_prefix() {
        let ig = IgnoreSet::new(&["cache/**".to_string(), "tmp".to_string()]).unwrap();
        assert!(ig.is_ignored("cache/x"));
        assert!(ig.is_ignored("a/tmp/b"));
        assert!(!ig.is_ignored("a/tmpx"));
    }
}
