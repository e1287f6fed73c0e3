//! The ccfs relatedness rule (ccfs §3.5) the block engine's promise needs, stated over the
//! shared reference model (`intactfs-model`), which shares no code with the engine.

use intactfs_model::{MFalloc, MIno, MOp, MState};

/// What an operation touches, for the relatedness rule.
#[derive(Clone, Debug, Default)]
pub struct Touch {
    /// Regular-file content or explicit attributes changed.
    pub inodes: Vec<MIno>,
    /// Directory entries (dir, name) created, removed or replaced.
    pub entries: Vec<(MIno, Vec<u8>)>,
    /// A directory this operation creates.
    pub creates_dir: Option<MIno>,
    /// Directories this operation adds or changes entries in.
    pub in_dirs: Vec<MIno>,
    /// A directory this operation removes (rmdir, or rename over an empty directory).
    pub removes_dir: Option<MIno>,
}

impl Touch {
    /// Whether `later` is related to `self` (which came first): same regular file or
    /// inode attributes (an inode's creation and links count), same entry name in a
    /// directory, `self` created a directory that `later` changes entries in, or `later`
    /// removes a directory `self` changed entries in (the mirror image of creation).
    pub fn related(&self, later: &Touch) -> bool {
        self.inodes.iter().any(|i| later.inodes.contains(i))
            || self.entries.iter().any(|e| later.entries.contains(e))
            || self.creates_dir.is_some_and(|d| later.in_dirs.contains(&d))
            || later.removes_dir.is_some_and(|d| self.in_dirs.contains(&d))
    }

    /// The relatedness footprint of `op` in the state `model` (before applying it).
    pub fn of(model: &MState, op: &MOp) -> Touch {
        let mut t = Touch::default();
        match op {
            MOp::Create {
                parent,
                name,
                ino,
                dir: true,
                ..
            } => {
                t.name(*parent, name);
                t.creates_dir = Some(*ino);
            }
            MOp::Create {
                parent, name, ino, ..
            }
            | MOp::Link { parent, name, ino } => {
                t.name(*parent, name);
                t.inodes.push(*ino);
            }
            MOp::Remove {
                parent, name, dir, ..
            } => {
                t.name(*parent, name);
                if *dir {
                    t.removes_dir = model.lookup(*parent, name);
                }
            }
            MOp::Rename {
                from, to, flags, ..
            } => {
                t.name(from.0, &from.1);
                t.name(to.0, &to.1);
                if !flags.exchange {
                    t.removes_dir = model.lookup(to.0, &to.1).filter(|&d| model.is_dir(d));
                }
            }
            MOp::Write { ino, .. }
            | MOp::SetAttr { ino, .. }
            | MOp::SetXattr { ino, .. }
            | MOp::Fallocate { ino, .. } => t.inodes.push(*ino),
        }
        t
    }

    /// An entry `name` of `dir` made, removed or replaced.
    fn name(&mut self, dir: MIno, name: &[u8]) {
        self.entries.push((dir, name.to_vec()));
        self.in_dirs.push(dir);
    }
}

/// A hole punch (fallocate PUNCH_HOLE | KEEP_SIZE), which the report counts.
pub fn is_punch(op: &MOp) -> bool {
    matches!(
        op,
        MOp::Fallocate {
            mode: MFalloc::Punch,
            ..
        }
    )
}
