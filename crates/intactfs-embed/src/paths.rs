//! Paths inside the image: `/a/b` or `a/b` from the image's root; `.` and empty components
//! are skipped, `..` goes to the parent directory; symbolic links are not followed (ELOOP
//! for one in the middle of a path, as open(2) with O_NOFOLLOW says for the last).

use crate::{Attr, EmbedError, FileType, Image, Ino, Result};
use intactfs_pmem::ROOT;
use intactfs_types::prelude::*;
use intactfs_types::FsError;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The components of `path` that name something (not `.` or empty).
fn components(path: &Path) -> impl Iterator<Item = &[u8]> {
    path.as_os_str()
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
}

impl Image {
    /// The directory that holds the last component of `path`, and that component (None:
    /// `path` is the root).
    pub(crate) fn resolve_parent<'p>(&self, path: &'p Path) -> Result<(Ino, Option<&'p [u8]>)> {
        let parts: Vec<&[u8]> = components(path).collect();
        let Some((last, dirs)) = parts.split_last() else {
            return Ok((ROOT, None));
        };
        let mut dir = ROOT;
        for c in dirs {
            dir = self.step(dir, c, path)?;
        }
        if *last == b".." {
            return Ok((self.step(dir, last, path)?, None));
        }
        Ok((dir, Some(*last)))
    }

    /// The inode `name` names in directory `dir` (a directory, since the walk goes on).
    fn step(&self, dir: Ino, name: &[u8], path: &Path) -> Result<Ino> {
        let fail = |e| EmbedError::fs(format!("resolving {}", path.display()), e);
        let next = if name == b".." {
            if dir == ROOT {
                ROOT
            } else {
                self.fs().parent(dir).map_err(fail)?
            }
        } else {
            self.fs().lookup(dir, name).map_err(fail)?.ino
        };
        let a = self.fs().getattr(next).map_err(fail)?;
        match a.kind {
            FileType::Dir => Ok(next),
            FileType::Symlink => Err(fail(FsError::Unsupported(format!(
                "{} is a symbolic link, which embedded mode does not follow",
                String::from_utf8_lossy(name)
            )))),
            _ => Err(fail(FsError::NotDir(String::from_utf8_lossy(name).into()))),
        }
    }

    /// The attributes of what `path` names.
    pub fn stat(&self, path: &Path) -> Result<Attr> {
        let (dir, name) = self.resolve_parent(path)?;
        let fail = |e| EmbedError::fs(format!("stat of {}", path.display()), e);
        match name {
            None => self.fs().getattr(dir).map_err(fail),
            Some(n) => self.fs().lookup(dir, n).map_err(fail),
        }
    }
}
