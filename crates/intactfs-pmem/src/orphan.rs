//! Open counts and orphans: an unlinked file, or a removed directory, that is still open
//! lives until its last release (POSIX unlink(2) and rmdir(2); SQLite temp files and
//! editors' swap files rely on it, and fstat through a removed directory's descriptor).
//!
//! The contract:
//! * [`FileData::open`](intactfs_types::FileData::open) /
//!   [`FileData::release`](intactfs_types::FileData::release) (in [`crate::data`]) count
//!   opens per inode, in memory only.
//! * Unlinking (or replacing by rename) the last name of an open file, or removing an open
//!   (empty) directory, leaves the inode in use with link count 0 — an *orphan* — instead
//!   of freeing it; reads, writes and setattr keep working on it. An orphan directory
//!   stays empty: it takes no new entry (ENOENT).
//! * The last release of an orphan frees it, in a transaction of its own (a legacy call),
//!   once no open transaction owns it: until the owning transaction ends, its unlink may
//!   still be aborted, which would give the file its name back.
//! * The persistent orphan list is implicit: the inodes in use with link count 0, which
//!   mount already reads when it scans the inode table (recovery step 4). A crash closes
//!   every file, so mount frees each orphan, one legacy transaction each; a crash during
//!   that leaves the rest for the next mount (each free is all-or-nothing).
//!
//! Why this is sound: an orphan's unlink and its free are two transactions, each atomic;
//! between them the inode is named by no directory and counted by no link, which mount
//! accepts only for an inode with link count 0, and for a directory only when it is empty
//! (recovery::scan_metadata), and which the invariants accept only while the inode is open
//! or waiting in `zombies`.

use crate::error::{PmemFsError, Result};
use crate::layout::FileType;
use crate::{Batch, Ino, PmemFs};
use intactfs_device::PmemDevice;

impl<P: PmemDevice> PmemFs<P> {
    /// How many opens of `ino` are not yet released.
    pub fn open_count(&self, ino: Ino) -> u32 {
        self.opens.get(&ino).copied().unwrap_or(0)
    }

    pub(crate) fn is_open(&self, ino: Ino) -> bool {
        self.opens.contains_key(&ino)
    }

    /// In use, link count 0 (a file, or a directory removed while open).
    pub(crate) fn is_orphan(&self, ino: Ino) -> Result<bool> {
        match self.inode(ino) {
            Ok(r) => Ok(r.nlink == 0),
            Err(PmemFsError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Frees the orphans whose last release came while a transaction owned them and that no
    /// transaction owns now (after a commit or abort). One that does not fit in the log now
    /// stays waiting for the next transaction end.
    pub(crate) fn reap_zombies(&mut self) -> Result<()> {
        let ready: Vec<Ino> = self
            .zombies
            .iter()
            .copied()
            .filter(|z| !self.owner.contains_key(z))
            .collect();
        for z in ready {
            self.zombies.remove(&z);
            // An abort may have given it its name back, or taken its create back.
            if self.is_open(z) || !self.is_orphan(z)? {
                continue;
            }
            match self.free_orphan(z) {
                Err(PmemFsError::NoSpace(_)) => {
                    self.zombies.insert(z);
                }
                r => r?,
            }
        }
        Ok(())
    }

    /// Frees the orphans mount found (crash-closed files), one transaction each.
    pub(crate) fn reclaim_orphans(&mut self, orphans: &[Ino]) -> Result<()> {
        for &o in orphans {
            assert!(!self.is_open(o), "orphan {o} is open during mount");
            self.free_orphan(o).map_err(|e| {
                PmemFsError::Corrupt(format!("freeing orphan inode {o} at mount: {e}"))
            })?;
        }
        Ok(())
    }

    pub(crate) fn free_orphan(&mut self, ino: Ino) -> Result<()> {
        self.mutate(None, |fs, id| {
            let rec = fs.inode(ino)?;
            assert!(
                rec.nlink == 0,
                "freeing inode {ino}, which is not an orphan ({rec:?})"
            );
            assert!(
                rec.kind != FileType::Dir || fs.dirs.get(&ino).is_some_and(|d| d.is_empty()),
                "freeing orphan directory {ino}, which has entries or no index"
            );
            fs.check_owner(id, ino)?;
            let mut b = Batch::default();
            fs.stage_drop_inode(ino, &mut b)?;
            fs.apply_meta(id, b)?;
            fs.finish_drop_inode(id, ino)?;
            fs.tmpfiles.remove(&ino);
            fs.claim(id, &[ino]);
            Ok(())
        })
    }
}
