//! Name operations by path: unlink, mkdir, rmdir, rename, readdir. Each goes into the
//! open transaction that owns the directory (then the entry's inode), else it is a legacy
//! call: the mount's routing rule.

use crate::{EmbedError, Entry, Image, Ino, Result};
use intactfs_types::prelude::*;
use intactfs_types::{FsError, RenameFlags};
use std::path::Path;

impl Image {
    /// The parent directory and last name of `path`, which must not be the root.
    fn named<'p>(&self, path: &'p Path, what: &str) -> Result<(Ino, &'p [u8])> {
        match self.resolve_parent(path)? {
            (dir, Some(name)) if name != b".." => Ok((dir, name)),
            _ => Err(EmbedError::invalid(
                path,
                &format!("{what} needs a path that ends in a name"),
            )),
        }
    }

    /// The inode `name` names in `dir`, if any (for routing).
    fn entry_ino(&self, dir: Ino, name: &[u8]) -> Option<Ino> {
        self.fs().lookup(dir, name).ok().map(|a| a.ino)
    }

    pub fn unlink(&mut self, path: &Path) -> Result<()> {
        let (dir, name) = self.named(path, "unlink")?;
        let tx = self.route(&[dir, self.entry_ino(dir, name).unwrap_or(0)]);
        (self.fs().unlink(tx, dir, name))
            .map_err(|e| EmbedError::fs(format!("unlinking {}", path.display()), e))
    }

    pub fn mkdir(&mut self, path: &Path, mode: u32) -> Result<()> {
        let (dir, name) = self.named(path, "mkdir")?;
        let tx = self.route(&[dir]);
        let o = self.owner;
        let a = (self.fs().mkdir(tx, dir, name, mode & 0o7777, o))
            .map_err(|e| EmbedError::fs(format!("making directory {}", path.display()), e))?;
        assert!(a.ino != dir, "a new directory is not its parent");
        Ok(())
    }

    pub fn rmdir(&mut self, path: &Path) -> Result<()> {
        let (dir, name) = self.named(path, "rmdir")?;
        let tx = self.route(&[dir, self.entry_ino(dir, name).unwrap_or(0)]);
        (self.fs().rmdir(tx, dir, name))
            .map_err(|e| EmbedError::fs(format!("removing directory {}", path.display()), e))
    }

    /// Renames `from` to `to`, replacing what `to` names (as rename(2)).
    pub fn rename(&mut self, from: &Path, to: &Path) -> Result<()> {
        let (sp, sn) = self.named(from, "rename")?;
        let (dp, dn) = self.named(to, "rename")?;
        let objs = [
            sp,
            dp,
            self.entry_ino(sp, sn).unwrap_or(0),
            self.entry_ino(dp, dn).unwrap_or(0),
        ];
        let tx = self.route(&objs);
        (self.fs().rename(tx, sp, sn, dp, dn, RenameFlags::NONE)).map_err(|e| {
            EmbedError::fs(
                format!("renaming {} to {}", from.display(), to.display()),
                e,
            )
        })
    }

    /// The entries of the directory at `path` (without `.` and `..`), in slot order.
    pub fn readdir(&self, path: &Path) -> Result<Vec<Entry>> {
        let a = self.stat(path)?;
        let fail = |e| EmbedError::fs(format!("reading directory {}", path.display()), e);
        if a.kind != intactfs_pmem::FileType::Dir {
            return Err(fail(FsError::NotDir(String::new())));
        }
        let all = self.fs().readdir(a.ino, 0, usize::MAX).map_err(fail)?;
        Ok(all
            .into_iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .map(|e| Entry {
                name: e.name,
                ino: e.ino,
                kind: e.kind,
            })
            .collect())
    }
}
