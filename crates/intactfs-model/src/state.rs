//! The model's state and how an operation changes it.

use crate::{MData, MFalloc, MIno, MOp, MSpecial, MROOT};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MNode {
    pub dir: bool,
    /// None for a regular file or a directory.
    pub special: Option<MSpecial>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A file's content; a symbolic link's target.
    pub data: MData,
    pub entries: BTreeMap<Vec<u8>, MIno>,
    /// A directory's parent (a file's last one: only directories' are used).
    pub parent: MIno,
    /// Extended attributes: name → value.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl MNode {
    fn new(dir: bool, special: Option<MSpecial>, mode: u32, parent: MIno) -> MNode {
        MNode {
            dir,
            special,
            mode: mode & 0o7777,
            uid: 0,
            gid: 0,
            data: MData::default(),
            entries: BTreeMap::new(),
            parent,
            xattrs: BTreeMap::new(),
        }
    }

    /// A regular file (not a directory, a link or a special file).
    pub fn regular(&self) -> bool {
        !self.dir && self.special.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MState {
    pub nodes: BTreeMap<MIno, MNode>,
    /// The largest file the engine allows (EFBIG past it): each engine's limit, stated by
    /// its simulation independently of the engine's layout code.
    pub max_size: u64,
}

impl Default for MState {
    /// An empty file system without a file-size limit.
    fn default() -> Self {
        MState::with_max_size(u64::MAX)
    }
}

impl MState {
    /// An empty file system (the root directory, mode 0755) whose files reach `max_size`.
    pub fn with_max_size(max_size: u64) -> MState {
        MState {
            nodes: BTreeMap::from([(MROOT, MNode::new(true, None, 0o755, MROOT))]),
            max_size,
        }
    }

    pub fn get(&self, ino: MIno) -> Option<&MNode> {
        self.nodes.get(&ino)
    }

    /// The inode `name` names in directory `dir`.
    pub fn lookup(&self, dir: MIno, name: &[u8]) -> Option<MIno> {
        self.nodes.get(&dir)?.entries.get(name).copied()
    }

    pub fn is_dir(&self, ino: MIno) -> bool {
        self.nodes.get(&ino).is_some_and(|n| n.dir)
    }

    /// The names in directory `dir`, in order (none for anything else).
    pub fn dir_entries(&self, dir: MIno) -> Vec<Vec<u8>> {
        self.nodes
            .get(&dir)
            .map(|n| n.entries.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The size of a file (0 for what the model does not have).
    pub fn file_len(&self, ino: MIno) -> u64 {
        self.nodes.get(&ino).map_or(0, |n| n.data.len())
    }

    /// How many entries name `ino`.
    pub fn names(&self, ino: MIno) -> u32 {
        self.nodes
            .values()
            .map(|n| n.entries.values().filter(|&&c| c == ino).count() as u32)
            .sum()
    }

    /// The link count POSIX shows: a file's names, a directory's 2 + subdirectories (0 once
    /// removed while open).
    pub fn nlink(&self, ino: MIno) -> u32 {
        let n = &self.nodes[&ino];
        if n.dir && ino != MROOT && self.names(ino) == 0 {
            0
        } else if n.dir {
            2 + n.entries.values().filter(|c| self.nodes[c].dir).count() as u32
        } else {
            self.names(ino)
        }
    }

    /// `x` is `dir` or below it.
    pub fn inside(&self, mut x: MIno, dir: MIno) -> bool {
        loop {
            if x == dir {
                return true;
            }
            if x == MROOT {
                return false;
            }
            x = self.nodes[&x].parent;
        }
    }

    /// Every inode some directory names.
    fn named(&self) -> BTreeSet<MIno> {
        self.nodes
            .values()
            .flat_map(|n| n.entries.values().copied())
            .collect()
    }

    /// Files and directories no directory names (unlinked or removed while open).
    pub fn orphans(&self) -> Vec<MIno> {
        let named = self.named();
        self.nodes
            .keys()
            .filter(|&&i| i != MROOT && !named.contains(&i))
            .copied()
            .collect()
    }

    /// Forgets an orphan (its last release freed it).
    pub fn free_orphan(&mut self, ino: MIno) {
        assert!(self.orphans().contains(&ino), "{ino} is not an orphan");
        self.nodes.remove(&ino);
    }

    /// Every non-directory (links and special files included), in inode order.
    pub fn files(&self) -> Vec<MIno> {
        self.nodes
            .iter()
            .filter(|(_, n)| !n.dir)
            .map(|(&i, _)| i)
            .collect()
    }

    /// The regular files, in inode order.
    pub fn regular_files(&self) -> Vec<MIno> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.regular())
            .map(|(&i, _)| i)
            .collect()
    }

    /// The directories that may take entries: the root and the named ones (not those
    /// removed while open), in inode order.
    pub fn dirs(&self) -> Vec<MIno> {
        let named = self.named();
        self.nodes
            .iter()
            .filter(|(i, n)| n.dir && (**i == MROOT || named.contains(i)))
            .map(|(&i, _)| i)
            .collect()
    }

    /// Makes `op`, which the checks ([`crate::check`]) allowed: panics on an operation
    /// they refuse (a simulation's bug, not the engine's).
    pub fn apply(&mut self, op: &MOp) {
        match op {
            MOp::Create {
                parent,
                name,
                ino,
                dir,
                mode,
                special,
            } => self.create(*parent, name, *ino, (*dir, *mode), special.as_ref()),
            MOp::Remove {
                parent, name, keep, ..
            } => {
                let t = self.dir_mut(*parent).remove(name).expect("checked");
                self.drop_if_unnamed(t, *keep);
            }
            MOp::Rename {
                from,
                to,
                flags,
                keep,
            } => self.rename((from.0, &from.1), (to.0, &to.1), flags.exchange, *keep),
            MOp::Link { ino, parent, name } => {
                assert!(
                    self.nodes.contains_key(ino),
                    "link of a missing inode {ino}"
                );
                self.dir_mut(*parent).insert(name.clone(), *ino);
            }
            _ => self.change_file(op),
        }
    }

    fn dir_mut(&mut self, dir: MIno) -> &mut BTreeMap<Vec<u8>, MIno> {
        let n = self.nodes.get_mut(&dir).expect("checked: exists");
        assert!(n.dir, "checked: {dir} is a directory");
        &mut n.entries
    }

    fn create(
        &mut self,
        parent: MIno,
        name: &[u8],
        ino: MIno,
        (dir, mode): (bool, u32),
        special: Option<&(MSpecial, Vec<u8>)>,
    ) {
        let mut n = MNode::new(dir, special.map(|s| s.0), mode, parent);
        n.data = MData::from_bytes(special.map_or(&[][..], |s| &s.1[..]));
        let old = self.nodes.insert(ino, n);
        assert!(old.is_none(), "inode {ino} created twice");
        self.dir_mut(parent).insert(name.to_vec(), ino);
    }

    /// A rename or an exchange; between two names of one inode nothing happens.
    fn rename(
        &mut self,
        (sp, sn): (MIno, &[u8]),
        (dp, dn): (MIno, &[u8]),
        exchange: bool,
        keep: bool,
    ) {
        let src = self.lookup(sp, sn).expect("checked");
        let dst = self.lookup(dp, dn);
        if dst == Some(src) {
            return;
        }
        if exchange {
            let dst = dst.expect("checked: an exchange has a target");
            self.dir_mut(sp).insert(sn.to_vec(), dst);
            self.dir_mut(dp).insert(dn.to_vec(), src);
            self.nodes.get_mut(&dst).expect("exists").parent = sp;
        } else {
            self.dir_mut(sp).remove(sn);
            if let Some(old) = self.dir_mut(dp).insert(dn.to_vec(), src) {
                self.drop_if_unnamed(old, keep);
            }
        }
        self.nodes.get_mut(&src).expect("exists").parent = dp;
    }

    /// Calls on one inode's data and attributes.
    fn change_file(&mut self, op: &MOp) {
        let ino = op.file().expect("a call on a file");
        let n = self.nodes.get_mut(&ino).expect("checked: exists");
        match op {
            MOp::Write { off, data, .. } if !data.is_empty() => n.data.write(*off, data),
            MOp::Write { .. } => {}
            MOp::SetAttr {
                mode,
                uid,
                gid,
                size,
                ..
            } => {
                if let Some(m) = mode {
                    n.mode = m & 0o7777;
                }
                n.uid = uid.unwrap_or(n.uid);
                n.gid = gid.unwrap_or(n.gid);
                if let Some(s) = size {
                    n.data.resize(*s);
                }
            }
            MOp::SetXattr { name, value, .. } => {
                match value {
                    Some(v) => n.xattrs.insert(name.clone(), v.clone()),
                    None => n.xattrs.remove(name),
                };
            }
            MOp::Fallocate { off, len, mode, .. } => match mode {
                MFalloc::Allocate if off + len > n.data.len() => n.data.resize(off + len),
                MFalloc::Allocate | MFalloc::KeepSize => {}
                MFalloc::Punch => n.data.zero(*off, *len),
            },
            _ => unreachable!("not a call on a file: {op:?}"),
        }
    }

    /// After a name of `ino` went: it goes too when no name is left and it was not open.
    fn drop_if_unnamed(&mut self, ino: MIno, open: bool) {
        if !open && self.names(ino) == 0 {
            self.nodes.remove(&ino);
        }
    }
}
