//! An independent reference model of the namespace and file contents, and the ccfs
//! relatedness rule stated over it. It shares no code with the engine.

use std::collections::BTreeMap;

pub type MIno = u64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MKind {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, MIno>),
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MNode {
    pub kind: MKind,
    pub mode: u32,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// One mutating call, with model inode numbers resolved when it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MOp {
    Create {
        parent: MIno,
        name: Vec<u8>,
        ino: MIno,
        mode: u32,
    },
    Mkdir {
        parent: MIno,
        name: Vec<u8>,
        ino: MIno,
        mode: u32,
    },
    Symlink {
        parent: MIno,
        name: Vec<u8>,
        ino: MIno,
        target: Vec<u8>,
    },
    Write {
        ino: MIno,
        off: u64,
        data: Vec<u8>,
    },
    Truncate {
        ino: MIno,
        size: u64,
    },
    Fallocate {
        ino: MIno,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    /// fallocate PUNCH_HOLE | KEEP_SIZE: [off, off+len) reads as zeros, the size stays.
    Punch {
        ino: MIno,
        off: u64,
        len: u64,
    },
    /// A setattr: the mode, and sometimes owners and times as fsstress's `chown` makes
    /// them (random ids of random width). The model keeps the mode only: owners and times
    /// are there to widen inodes in place, which the engine's metadata reserve must bound
    /// (issue 25); the oracle does not compare them.
    Chmod {
        ino: MIno,
        mode: u32,
        owner: Option<(u32, u32)>,
        /// Seconds and nanoseconds for both atime and mtime.
        times: Option<(i64, u32)>,
    },
    /// Set (`Some`) or remove (`None`) an extended attribute.
    SetXattr {
        ino: MIno,
        name: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    Link {
        ino: MIno,
        parent: MIno,
        name: Vec<u8>,
    },
    Unlink {
        parent: MIno,
        name: Vec<u8>,
    },
    Rmdir {
        parent: MIno,
        name: Vec<u8>,
    },
    Rename {
        sp: MIno,
        sn: Vec<u8>,
        dp: MIno,
        dn: Vec<u8>,
        noreplace: bool,
        exchange: bool,
    },
}

pub const MROOT: MIno = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub nodes: BTreeMap<MIno, MNode>,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            nodes: BTreeMap::from([(
                MROOT,
                MNode {
                    kind: MKind::Dir(BTreeMap::new()),
                    mode: 0o755,
                    xattrs: BTreeMap::new(),
                },
            )]),
        }
    }
}

/// What an operation touches, for the relatedness rule (ccfs §3.5).
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
}

impl Model {
    fn dir(&self, ino: MIno) -> Option<&BTreeMap<Vec<u8>, MIno>> {
        match &self.nodes.get(&ino)?.kind {
            MKind::Dir(e) => Some(e),
            _ => None,
        }
    }

    fn dir_mut(&mut self, ino: MIno) -> &mut BTreeMap<Vec<u8>, MIno> {
        match &mut self.nodes.get_mut(&ino).expect("checked").kind {
            MKind::Dir(e) => e,
            _ => panic!("checked to be a directory"),
        }
    }

    pub fn dir_entries(&self, dir: MIno) -> Vec<Vec<u8>> {
        self.dir(dir)
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn file_len(&self, ino: MIno) -> u64 {
        match self.nodes.get(&ino).map(|n| &n.kind) {
            Some(MKind::File(c)) => c.len() as u64,
            _ => 0,
        }
    }

    pub fn lookup(&self, dir: MIno, name: &[u8]) -> Option<MIno> {
        self.dir(dir)?.get(name).copied()
    }

    fn links(&self, ino: MIno) -> usize {
        self.nodes
            .values()
            .filter_map(|n| {
                if let MKind::Dir(e) = &n.kind {
                    Some(e.values().filter(|&&i| i == ino).count())
                } else {
                    None
                }
            })
            .sum()
    }

    fn is_ancestor(&self, a: MIno, b: MIno) -> bool {
        // Does directory `a` contain `b` (or equal it)?
        if a == b {
            return true;
        }
        self.dir(a).is_some_and(|e| {
            e.values()
                .any(|&c| self.dir(c).is_some() && self.is_ancestor(c, b))
        })
    }

    fn is_file(&self, ino: MIno) -> bool {
        matches!(self.nodes.get(&ino).map(|n| &n.kind), Some(MKind::File(_)))
    }

    /// The relatedness footprint of `op` in the current state (before applying it).
    pub fn touch(&self, op: &MOp) -> Touch {
        let mut t = Touch::default();
        match op {
            MOp::Create {
                parent, name, ino, ..
            }
            | MOp::Symlink {
                parent, name, ino, ..
            } => {
                t.entries.push((*parent, name.clone()));
                t.in_dirs.push(*parent);
                t.inodes.push(*ino);
            }
            MOp::Mkdir {
                parent, name, ino, ..
            } => {
                t.entries.push((*parent, name.clone()));
                t.in_dirs.push(*parent);
                t.creates_dir = Some(*ino);
            }
            MOp::Write { ino, .. }
            | MOp::Truncate { ino, .. }
            | MOp::Fallocate { ino, .. }
            | MOp::Punch { ino, .. }
            | MOp::Chmod { ino, .. }
            | MOp::SetXattr { ino, .. } => t.inodes.push(*ino),
            MOp::Link { parent, name, ino } => {
                t.entries.push((*parent, name.clone()));
                t.in_dirs.push(*parent);
                t.inodes.push(*ino);
            }
            MOp::Unlink { parent, name } => {
                t.entries.push((*parent, name.clone()));
                t.in_dirs.push(*parent);
            }
            MOp::Rmdir { parent, name } => {
                t.entries.push((*parent, name.clone()));
                t.in_dirs.push(*parent);
                t.removes_dir = self.lookup(*parent, name);
            }
            MOp::Rename {
                sp,
                sn,
                dp,
                dn,
                exchange,
                ..
            } => {
                t.entries.push((*sp, sn.clone()));
                t.entries.push((*dp, dn.clone()));
                t.in_dirs.push(*sp);
                t.in_dirs.push(*dp);
                if !exchange {
                    t.removes_dir = self.lookup(*dp, dn).filter(|&d| self.dir(d).is_some());
                }
            }
        }
        t
    }

    /// Applies `op` if POSIX allows it; false (state unchanged) otherwise.
    pub fn apply(&mut self, op: &MOp) -> bool {
        match op {
            MOp::Create {
                parent,
                name,
                ino,
                mode,
            }
            | MOp::Mkdir {
                parent,
                name,
                ino,
                mode,
            } => {
                if self.dir(*parent).is_none()
                    || self.lookup(*parent, name).is_some()
                    || self.nodes.contains_key(ino)
                {
                    return false;
                }
                let kind = if matches!(op, MOp::Mkdir { .. }) {
                    MKind::Dir(BTreeMap::new())
                } else {
                    MKind::File(Vec::new())
                };
                self.nodes.insert(
                    *ino,
                    MNode {
                        kind,
                        mode: *mode,
                        xattrs: BTreeMap::new(),
                    },
                );
                self.dir_mut(*parent).insert(name.clone(), *ino);
            }
            MOp::Symlink {
                parent,
                name,
                ino,
                target,
            } => {
                if self.dir(*parent).is_none()
                    || self.lookup(*parent, name).is_some()
                    || self.nodes.contains_key(ino)
                {
                    return false;
                }
                self.nodes.insert(
                    *ino,
                    MNode {
                        kind: MKind::Symlink(target.clone()),
                        mode: 0o777,
                        xattrs: BTreeMap::new(),
                    },
                );
                self.dir_mut(*parent).insert(name.clone(), *ino);
            }
            MOp::Write { ino, off, data } => {
                let Some(MNode {
                    kind: MKind::File(c),
                    ..
                }) = self.nodes.get_mut(ino)
                else {
                    return false;
                };
                let end = *off as usize + data.len();
                if c.len() < end {
                    c.resize(end, 0);
                }
                c[*off as usize..end].copy_from_slice(data);
            }
            MOp::Truncate { ino, size } => {
                let Some(MNode {
                    kind: MKind::File(c),
                    ..
                }) = self.nodes.get_mut(ino)
                else {
                    return false;
                };
                c.resize(*size as usize, 0);
            }
            MOp::Fallocate {
                ino,
                off,
                len,
                keep_size,
            } => {
                let Some(MNode {
                    kind: MKind::File(c),
                    ..
                }) = self.nodes.get_mut(ino)
                else {
                    return false;
                };
                let end = (off + len) as usize;
                if !keep_size && c.len() < end {
                    c.resize(end, 0);
                }
            }
            MOp::Punch { ino, off, len } => {
                let Some(MNode {
                    kind: MKind::File(c),
                    ..
                }) = self.nodes.get_mut(ino)
                else {
                    return false;
                };
                // A length of 0 is EINVAL, one past the largest offset EFBIG.
                let Some(end) = off.checked_add(*len).filter(|_| *len > 0) else {
                    return false;
                };
                let size = c.len() as u64;
                if *off < size {
                    c[*off as usize..end.min(size) as usize].fill(0);
                }
            }
            MOp::Chmod { ino, mode, .. } => {
                let Some(n) = self.nodes.get_mut(ino) else {
                    return false;
                };
                n.mode = *mode;
            }
            MOp::SetXattr { ino, name, value } => {
                let Some(n) = self.nodes.get_mut(ino) else {
                    return false;
                };
                match value {
                    Some(v) => {
                        n.xattrs.insert(name.clone(), v.clone());
                    }
                    None => {
                        if n.xattrs.remove(name).is_none() {
                            return false;
                        }
                    }
                }
            }
            MOp::Link { ino, parent, name } => {
                if !self.is_file(*ino)
                    || self.dir(*parent).is_none()
                    || self.lookup(*parent, name).is_some()
                {
                    return false;
                }
                self.dir_mut(*parent).insert(name.clone(), *ino);
            }
            MOp::Unlink { parent, name } => {
                let Some(t) = self.lookup(*parent, name) else {
                    return false;
                };
                if self.dir(t).is_some() {
                    return false;
                }
                self.dir_mut(*parent).remove(name);
                if self.links(t) == 0 {
                    self.nodes.remove(&t);
                }
            }
            MOp::Rmdir { parent, name } => {
                let Some(t) = self.lookup(*parent, name) else {
                    return false;
                };
                if !self.dir(t).is_some_and(|e| e.is_empty()) {
                    return false;
                }
                self.dir_mut(*parent).remove(name);
                self.nodes.remove(&t);
            }
            MOp::Rename {
                sp,
                sn,
                dp,
                dn,
                noreplace,
                exchange,
            } => {
                let Some(src) = self.lookup(*sp, sn) else {
                    return false;
                };
                if self.dir(*dp).is_none() {
                    return false;
                }
                let dst = self.lookup(*dp, dn);
                let src_dir = self.dir(src).is_some();
                if (*noreplace && dst.is_some()) || (*exchange && dst.is_none()) {
                    return false;
                }
                if dst == Some(src) {
                    return true;
                }
                if src_dir && self.is_ancestor(src, *dp) {
                    return false;
                }
                if *exchange {
                    let d = dst.expect("checked");
                    if self.dir(d).is_some() && self.is_ancestor(d, *sp) {
                        return false;
                    }
                    self.dir_mut(*sp).insert(sn.clone(), d);
                    self.dir_mut(*dp).insert(dn.clone(), src);
                } else {
                    if let Some(d) = dst {
                        let dst_dir = self.dir(d).is_some();
                        if dst_dir != src_dir
                            || (dst_dir && !self.dir(d).is_some_and(|e| e.is_empty()))
                        {
                            return false;
                        }
                    }
                    self.dir_mut(*sp).remove(sn);
                    self.dir_mut(*dp).insert(dn.clone(), src);
                    if let Some(d) = dst {
                        if self.links(d) == 0 {
                            self.nodes.remove(&d);
                        }
                    }
                }
            }
        }
        true
    }

    /// Canonical view: path → (what, mode, first path of its inode).
    pub fn view(&self) -> View {
        let mut v = View::default();
        let mut first: BTreeMap<MIno, String> = BTreeMap::new();
        let mut stack = vec![(MROOT, String::new())];
        let mut paths = Vec::new();
        while let Some((d, p)) = stack.pop() {
            if let Some(e) = self.dir(d) {
                for (name, &i) in e {
                    let path = format!("{p}/{}", String::from_utf8_lossy(name));
                    paths.push((path.clone(), i));
                    if self.dir(i).is_some() {
                        stack.push((i, path));
                    }
                }
            }
        }
        paths.sort();
        for (path, i) in paths {
            let f = first.entry(i).or_insert_with(|| path.clone()).clone();
            let n = &self.nodes[&i];
            let what = match &n.kind {
                MKind::File(c) => What::File(c.clone()),
                MKind::Dir(_) => What::Dir,
                MKind::Symlink(t) => What::Symlink(t.clone()),
            };
            v.0.insert(path, (what, n.mode, n.xattrs.clone(), f));
        }
        v
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    File(Vec<u8>),
    Dir,
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
/// Path → (what, mode, extended attributes, the path under which the inode was first seen).
pub struct View(pub BTreeMap<String, (What, u32, Xattrs, String)>);

pub type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

impl View {
    /// The first difference, for messages.
    pub fn diff(&self, other: &View) -> String {
        for (p, a) in &self.0 {
            match other.0.get(p) {
                None => return format!("{p} is missing"),
                Some(b) if a != b => {
                    return format!("{p}: expected {}, found {}", short(a), short(b))
                }
                _ => {}
            }
        }
        for p in other.0.keys() {
            if !self.0.contains_key(p) {
                return format!("{p} should not exist");
            }
        }
        "no difference".into()
    }
}

fn short(e: &(What, u32, Xattrs, String)) -> String {
    let w = match &e.0 {
        What::File(c) => format!("file of {} bytes (crc {:08x})", c.len(), crc(c)),
        What::Dir => "directory".into(),
        What::Symlink(t) => format!("symlink to {}", String::from_utf8_lossy(t)),
    };
    let x: Vec<String> =
        e.2.iter()
            .map(|(k, v)| format!("{}={} bytes", String::from_utf8_lossy(k), v.len()))
            .collect();
    format!(
        "{w}, mode {:o}, xattrs [{}], inode first seen at {}",
        e.1,
        x.join(" "),
        e.3
    )
}

fn crc(c: &[u8]) -> u32 {
    c.iter().fold(0u32, |h, &b| h.rotate_left(5) ^ b as u32)
}
