//! The kernel's references to inodes and the open file handles.
//!
//! Every inode the kernel knows (a lookup, create, link or readdirplus entry, until its
//! FORGET) is held open in the engine ([`Engine::open`]): an unlinked file then lives,
//! readable and writable through its descriptors, until the kernel forgets it, and its
//! number is not reused meanwhile. Each inode created during the mount gets a new FUSE
//! generation, so that a number an aborted change freed and a later create reused is
//! never confused with the old file.

use super::{Served, State, ROOT};
use fuser::{FileHandle, Generation};
use intactfs_types::{FileData, Ino};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One inode the kernel holds: how many lookups it counts, and the inode's generation.
#[derive(Clone, Copy, Debug, Default)]
struct Ref {
    count: u64,
    generation: u64,
}

/// Kernel references (behind their own mutex: a lookup of an inode the kernel already
/// holds counts one more under the engine's read lock).
#[derive(Default)]
pub struct Refs {
    map: Mutex<HashMap<Ino, Ref>>,
    next_generation: AtomicU64,
}

impl Refs {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Ino, Ref>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more reference to an inode the kernel holds already; false if it holds none.
    pub fn remember_known(&self, ino: Ino) -> bool {
        if ino == ROOT {
            return true;
        }
        match self.map().get_mut(&ino) {
            Some(r) if r.count > 0 => {
                r.count += 1;
                true
            }
            _ => false,
        }
    }

    /// Counts one reference; true if it is the first.
    fn count(&self, ino: Ino) -> bool {
        let mut m = self.map();
        let r = m.entry(ino).or_default();
        r.count += 1;
        r.count == 1
    }

    /// Drops `n` references; true if none is left (the entry is gone).
    fn drop_refs(&self, ino: Ino, n: u64) -> bool {
        let mut m = self.map();
        let Some(r) = m.get_mut(&ino) else {
            return false;
        };
        assert!(r.count > 0, "inode {ino}: a reference entry with no count");
        r.count = r.count.saturating_sub(n);
        r.count == 0 && m.remove(&ino).is_some()
    }

    pub fn generation(&self, ino: Ino) -> Generation {
        Generation(self.map().get(&ino).map_or(0, |r| r.generation))
    }

    /// `ino` was just created: a new generation (its number may have been used before).
    fn new_generation(&self, ino: Ino) -> Generation {
        let g = self.next_generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.map().entry(ino).or_default().generation = g;
        Generation(g)
    }

    /// How many inodes the kernel holds (for tests and the log).
    pub fn held(&self) -> usize {
        self.map().len()
    }
}

/// An open file handle: the opener's stream (for writes the kernel sends on its own
/// behalf: write-back of shared mappings, pid 0), and whether it was opened for writing.
#[derive(Clone, Copy, Debug)]
struct Handle {
    stream: u64,
    writable: bool,
}

/// Open file handles (own mutex: open, release and flush need only the read lock).
pub struct Handles {
    map: Mutex<HashMap<u64, Handle>>,
    next: AtomicU64,
}

impl Default for Handles {
    fn default() -> Self {
        Handles {
            map: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }
}

impl Handles {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Handle>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn open(&self, stream: u64, writable: bool) -> FileHandle {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        let old = self.map().insert(fh, Handle { stream, writable });
        assert!(old.is_none(), "file handle {fh} handed out twice");
        FileHandle(fh)
    }

    pub fn stream(&self, fh: u64) -> Option<u64> {
        self.map().get(&fh).map(|h| h.stream)
    }

    /// Whether handle `fh` was opened for writing. Every open and create records its
    /// handle, so an unknown one (a directory's, or one already released) is not: control
    /// calls that can undo writes need the right to make them (docs/fs-api.md, "Who may
    /// call what").
    pub fn writable(&self, fh: u64) -> bool {
        self.map().get(&fh).is_some_and(|h| h.writable)
    }

    pub fn close(&self, fh: u64) {
        self.map().remove(&fh);
    }
}

impl<E: Served> State<E> {
    /// The kernel now holds one more reference to `ino`: the first opens it in the engine.
    pub(crate) fn remember(&mut self, ino: Ino) {
        if ino == ROOT || !self.refs.count(ino) {
            return;
        }
        if let Some(fs) = self.fs.as_mut() {
            // The inode was just returned by the engine, so it exists; an open that still
            // fails (a count at its limit) only loses the unlinked-while-open guarantee
            // for this inode: logged, not a reason to stop the mount.
            if let Err(e) = FileData::open(fs, ino) {
                eprintln!("intactfs: opening inode {ino} for the kernel's reference: {e}");
            }
        }
    }

    /// The kernel's first reference to an inode the engine opened for it already.
    pub(crate) fn remember_opened(&mut self, ino: Ino) {
        if !self.refs.count(ino) {
            // Not the first after all: the engine's open was one too many.
            self.release_in_engine(ino);
        }
    }

    /// `ino` was just created: counted as a reference, under a new generation.
    pub(crate) fn remember_created(&mut self, ino: Ino) -> Generation {
        self.remember(ino);
        self.refs.new_generation(ino)
    }

    /// The kernel forgets `n` references to `ino`; the last releases it in the engine
    /// (which frees an unlinked file then).
    pub(crate) fn forget(&mut self, ino: Ino, n: u64) {
        if ino != ROOT && self.refs.drop_refs(ino, n) {
            self.release_in_engine(ino);
        }
    }

    fn release_in_engine(&mut self, ino: Ino) {
        let Some(fs) = self.fs.as_mut() else { return };
        if let Err(e) = FileData::release(fs, E::idle_ctx(), ino) {
            self.failure
                .get_or_insert(format!("releasing inode {ino}: {e}"));
        }
    }
}
