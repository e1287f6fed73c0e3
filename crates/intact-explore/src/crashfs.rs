//! A crash state in memory: every inode the workload ever had, the directory entries that
//! made it to disk, file contents as the blocks hold them, and the output printed so far.
//! Cloning is cheap (contents are shared until written), so states are built incrementally
//! from cached ones (thesis §3.5).

use crate::filehash::{visible_hash, WindowCache};
use intact_apm::Micro;
use intact_model::op::{LogicalOp, Op};
use intact_model::state::{InodeId, Node, State};
use intact_model::{Data, Seg, Sparse};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static GENERATION: AtomicU64 = AtomicU64::new(1);
fn next_gen() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// What uninitialised blocks hold when a size change exposes them: a fixed, non-zero,
/// non-text pattern, so checkers can tell it from zeros and from data.
pub fn garbage(offset: u64) -> u8 {
    0x80 | ((offset.wrapping_mul(0x9E37_79B9) >> 13) as u8 & 0x7f)
}

#[derive(Clone, Debug)]
pub enum CNode {
    Absent,
    /// `buf` may extend beyond `size`: blocks written past the end are invisible until a
    /// size change reaches them. Its holes are blocks never written: [`garbage`].
    File {
        buf: Arc<Sparse>,
        size: u64,
        gen: u64,
        mode: u32,
    },
    Dir {
        entries: Arc<BTreeMap<String, InodeId>>,
        mode: u32,
    },
    Symlink {
        target: Arc<str>,
    },
}

#[derive(Clone, Debug)]
pub struct CrashFs {
    nodes: Vec<CNode>,
    root: InodeId,
    pub stdout: Arc<Vec<u8>>,
}

/// How one crash state differs from another of the same universe: see [`CrashFs::delta_from`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// Regular files whose visible contents differ.
    pub files: Vec<FileDelta>,
    /// Directories whose entries differ.
    pub dirs: Vec<DirDelta>,
    /// The whole output, when it differs.
    pub stdout: Option<Vec<u8>>,
}

/// A file's new size and the byte runs (offset, bytes) that differ below it; bytes the base
/// does not have yet read as [`garbage`] before the runs are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDelta {
    pub inode: InodeId,
    pub size: u64,
    pub runs: Vec<(u64, Vec<u8>)>,
}

/// Entries a directory has (name, inode) that the base lacks or names differently, and names
/// the base has that it lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirDelta {
    pub inode: InodeId,
    pub set: Vec<(String, InodeId)>,
    pub remove: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CrashFsError {
    #[error("inode id {0} is too large for a dense table")]
    IdTooLarge(InodeId),
    #[error("micro-operation on inode {0}, which is not a {1}")]
    Kind(InodeId, &'static str),
    #[error("data: {0}")]
    Data(String),
    #[error("materialising {path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// The run outgrew a bound of the explorer's bookkeeping (e.g. state numbers).
    #[error("{0}")]
    Limit(String),
}

pub type StateHash = [u8; 32];

/// What [`CrashFs::hash`] remembers between states: each file version's hash (by its
/// generation) and the hashes of shared chunks ([`WindowCache`]).
#[derive(Default)]
pub struct HashCache {
    files: HashMap<u64, [u8; 32]>,
    windows: WindowCache,
}

/// Bound on remembered file versions (about 50 bytes each); past it they start over.
const MAX_CACHED_FILES: usize = 200_000;

impl HashCache {
    /// Remembered file versions and chunk windows.
    pub fn len(&self) -> (usize, usize) {
        (self.files.len(), self.windows.len())
    }
}

impl CrashFs {
    /// The initial snapshot plus, unlinked, every inode the operations create.
    pub fn universe(initial: &State, ops: &[Op]) -> Result<CrashFs, CrashFsError> {
        let mut fs = CrashFs {
            nodes: Vec::new(),
            root: initial.root,
            stdout: Arc::new(Vec::new()),
        };
        for (id, ino) in &initial.inodes {
            let node = match &ino.node {
                Node::File { data } => CNode::File {
                    buf: Arc::new(holes_as_zeros(data)),
                    size: data.len(),
                    gen: next_gen(),
                    mode: ino.mode,
                },
                Node::Dir { entries, .. } => CNode::Dir {
                    entries: Arc::new(entries.clone()),
                    mode: ino.mode,
                },
                Node::Symlink { target } => CNode::Symlink {
                    target: target.as_str().into(),
                },
            };
            fs.set(*id, node)?;
        }
        for o in ops {
            let (id, node) = match &o.op {
                LogicalOp::Mkdir { inode, .. } => (
                    *inode,
                    CNode::Dir {
                        entries: Arc::new(BTreeMap::new()),
                        mode: 0o40755,
                    },
                ),
                LogicalOp::Symlink { inode, target, .. } => (
                    *inode,
                    CNode::Symlink {
                        target: target.as_str().into(),
                    },
                ),
                LogicalOp::Link { inode, .. }
                | LogicalOp::Overwrite { inode, .. }
                | LogicalOp::Append { inode, .. }
                | LogicalOp::Truncate { inode, .. } => (
                    *inode,
                    CNode::File {
                        buf: Arc::new(Sparse::new()),
                        size: 0,
                        gen: next_gen(),
                        mode: 0o100644,
                    },
                ),
                _ => continue,
            };
            if matches!(fs.nodes.get(id as usize), None | Some(CNode::Absent)) {
                fs.set(id, node)?;
            }
        }
        Ok(fs)
    }

    fn set(&mut self, id: InodeId, node: CNode) -> Result<(), CrashFsError> {
        if id > 50_000_000 {
            return Err(CrashFsError::IdTooLarge(id));
        }
        let i = id as usize;
        if self.nodes.len() <= i {
            self.nodes.resize(i + 1, CNode::Absent);
        }
        self.nodes[i] = node;
        Ok(())
    }

    fn file(&mut self, id: InodeId) -> Result<(&mut Arc<Sparse>, &mut u64), CrashFsError> {
        match self.nodes.get_mut(id as usize) {
            Some(CNode::File { buf, size, gen, .. }) => {
                *gen = next_gen();
                Ok((buf, size))
            }
            _ => Err(CrashFsError::Kind(id, "regular file")),
        }
    }

    fn entries(&mut self, id: InodeId) -> Result<&mut BTreeMap<String, InodeId>, CrashFsError> {
        match self.nodes.get_mut(id as usize) {
            Some(CNode::Dir { entries, .. }) => Ok(Arc::make_mut(entries)),
            _ => Err(CrashFsError::Kind(id, "directory")),
        }
    }

    pub fn apply(&mut self, m: &Micro, blob: &[u8]) -> Result<(), CrashFsError> {
        match m {
            Micro::SetSize { inode, size } => {
                // Blocks the size exposes read as garbage: the holes of `buf` are just that.
                let (_, sz) = self.file(*inode)?;
                *sz = *size;
            }
            Micro::Write {
                inode,
                offset,
                data,
            } => {
                let (buf, _) = self.file(*inode)?;
                let b = Arc::make_mut(buf);
                match *data {
                    Data::Zeros { zeros } => b.write_zeros(*offset, zeros),
                    Data::Bytes { .. } => {
                        let bytes = data.bytes(blob).map_err(CrashFsError::Data)?;
                        b.write(*offset, &bytes)
                    }
                }
                .map_err(CrashFsError::Data)?;
            }
            Micro::ZeroFill { inode, size } => {
                // Holes (never-written blocks, garbage when exposed) below `size` become
                // zeros; written bytes stay. Past the buffer's end: zeros up to `size`.
                let (buf, _) = self.file(*inode)?;
                let b = Arc::make_mut(buf);
                let holes: Vec<(u64, u64)> = b
                    .segments(0, *size)
                    .into_iter()
                    .filter(|(_, _, seg)| *seg == Seg::Hole)
                    .map(|(s, e, _)| (s, e))
                    .collect();
                let tail = (b.len() < *size).then(|| (b.len(), *size));
                for (s, e) in holes.into_iter().chain(tail) {
                    b.write_zeros(s, e - s).map_err(CrashFsError::Data)?;
                }
            }
            Micro::CreateEntry { dir, name, inode } => {
                self.entries(*dir)?.insert(name.clone(), *inode);
            }
            Micro::DeleteEntry { dir, name, inode } => {
                let e = self.entries(*dir)?;
                if e.get(name) == Some(inode) {
                    e.remove(name);
                }
            }
            Micro::Output { data } => {
                let bytes = data.bytes(blob).map_err(CrashFsError::Data)?;
                Arc::make_mut(&mut self.stdout).extend_from_slice(&bytes);
            }
            Micro::Sync { .. } | Micro::Nop => {}
        }
        Ok(())
    }

    /// Walks the tree reachable from the root in name order. Directories reachable twice
    /// (a crash between the two halves of a directory rename) are visited at each name;
    /// a directory inside itself is not entered again.
    fn walk(&self, mut f: impl FnMut(&str, InodeId, &CNode, usize)) {
        fn rec(
            fs: &CrashFs,
            dir: InodeId,
            path: &str,
            depth: usize,
            anc: &mut Vec<InodeId>,
            f: &mut dyn FnMut(&str, InodeId, &CNode, usize),
        ) {
            let Some(CNode::Dir { entries, .. }) = fs.nodes.get(dir as usize) else {
                return;
            };
            for (name, &child) in entries.iter() {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}/{name}")
                };
                let node = fs.nodes.get(child as usize).unwrap_or(&CNode::Absent);
                if matches!(node, CNode::Dir { .. }) && anc.contains(&child) {
                    continue;
                }
                f(&p, child, node, depth);
                if matches!(node, CNode::Dir { .. }) {
                    anc.push(child);
                    rec(fs, child, &p, depth + 1, anc, f);
                    anc.pop();
                }
            }
        }
        let mut anc = vec![self.root];
        rec(self, self.root, "", 0, &mut anc, &mut f);
    }

    /// Content hash of the visible state: names, kinds, contents, link identity, modes of
    /// initial files, and the output. Equal hashes mean the checker sees the same thing.
    pub fn hash(&self, cache: &mut HashCache) -> StateHash {
        if cache.files.len() > MAX_CACHED_FILES {
            cache.files.clear();
        }
        let mut h = blake3::Hasher::new();
        let mut first: HashMap<InodeId, u64> = HashMap::new();
        let mut n = 0u64;
        self.walk(|path, id, node, _| {
            h.update(path.as_bytes());
            h.update(&[0]);
            n += 1;
            match node {
                CNode::File {
                    buf,
                    size,
                    gen,
                    mode,
                } => {
                    if let Some(k) = first.get(&id) {
                        h.update(b"L");
                        h.update(&k.to_le_bytes());
                        return;
                    }
                    first.insert(id, n);
                    let fh = match cache.files.get(gen) {
                        Some(fh) => *fh,
                        None => {
                            let fh = content_hash(buf, *size, &mut cache.windows);
                            cache.files.insert(*gen, fh);
                            fh
                        }
                    };
                    h.update(b"F");
                    h.update(&size.to_le_bytes());
                    h.update(&mode.to_le_bytes());
                    h.update(&fh);
                }
                CNode::Dir { .. } => {
                    h.update(b"D");
                }
                CNode::Symlink { target } => {
                    h.update(b"S");
                    h.update(target.as_bytes());
                }
                CNode::Absent => {
                    h.update(b"?");
                }
            }
        });
        h.update(b"\0OUT");
        h.update(&self.stdout);
        *h.finalize().as_bytes()
    }

    /// Writes the state into `dir` (which must exist and be empty).
    pub fn materialise(&self, dir: &Path) -> Result<(), CrashFsError> {
        let mut first: HashMap<InodeId, std::path::PathBuf> = HashMap::new();
        let mut err = None;
        let mut dir_modes: Vec<(std::path::PathBuf, u32)> = Vec::new();
        self.walk(|rel, id, node, _| {
            if err.is_some() {
                return;
            }
            let p = dir.join(rel);
            let io = |e: std::io::Error| CrashFsError::Io {
                path: p.display().to_string(),
                err: e,
            };
            let r = match node {
                CNode::File {
                    buf, size, mode, ..
                } => {
                    if let Some(orig) = first.get(&id) {
                        std::fs::hard_link(orig, &p).map_err(io)
                    } else {
                        first.insert(id, p.clone());
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(mode & 0o7777 | 0o600)
                            .open(&p)
                            .and_then(|f| write_sparse(&f, buf, *size))
                            .map_err(io)
                    }
                }
                CNode::Dir { mode, .. } => {
                    dir_modes.push((p.clone(), *mode));
                    std::fs::DirBuilder::new()
                        .mode(0o755)
                        .create(&p)
                        .map_err(io)
                }
                CNode::Symlink { target } => std::os::unix::fs::symlink(&**target, &p).map_err(io),
                CNode::Absent => Ok(()),
            };
            if let Err(e) = r {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        set_dir_modes(dir_modes);
        Ok(())
    }

    /// Turns `dir`, which holds exactly `prev` as [`CrashFs::materialise`] (or this function)
    /// wrote it, into this state, writing only what differs (issue 29): entries `prev` has
    /// that this state lacks, or has as another inode or kind, are removed; new ones are
    /// created (a file whose inode is already on disk under a kept name is linked to it);
    /// a kept file whose contents differ is rewritten where they differ, pieces that share
    /// their bytes with `prev` (the same chunk) or hold the same bytes left alone. The
    /// result is what `materialise` would write into an empty directory. `Ok(false)` (with
    /// `dir` untouched) when the states are not of one universe, or (with `dir` part
    /// patched) when a file would need a large range of zeros written: the caller writes
    /// the state whole.
    pub fn patch_dir(&self, prev: &CrashFs, dir: &Path) -> Result<bool, CrashFsError> {
        if self.root != prev.root {
            return Ok(false);
        }
        // Kinds by discriminant; a symlink's target is fixed per inode (the universe).
        fn kind(n: &CNode) -> u8 {
            match n {
                CNode::Absent => 0,
                CNode::File { .. } => 1,
                CNode::Dir { .. } => 2,
                CNode::Symlink { .. } => 3,
            }
        }
        let list = |fs: &CrashFs| {
            let mut v: Vec<(String, InodeId, u8)> = Vec::new();
            fs.walk(|p, id, node, _| v.push((p.to_string(), id, kind(node))));
            v
        };
        let (old, new) = (list(prev), list(self));
        let wanted: HashMap<&str, (InodeId, u8)> = new
            .iter()
            .map(|(p, id, k)| (p.as_str(), (*id, *k)))
            .collect();
        let io = |p: &Path| {
            let path = p.display().to_string();
            move |err: std::io::Error| CrashFsError::Io { path, err }
        };
        // 1. Remove what differs (a directory with everything below it), keep the rest.
        let mut kept: HashSet<&str> = HashSet::new();
        let mut gone: Option<String> = None;
        for (p, id, k) in &old {
            if gone.as_ref().is_some_and(|g| p.starts_with(g.as_str())) {
                continue;
            }
            gone = None;
            if wanted.get(p.as_str()) == Some(&(*id, *k)) {
                kept.insert(p);
                continue;
            }
            let path = dir.join(p);
            match k {
                0 => {}
                2 => {
                    std::fs::remove_dir_all(&path).map_err(io(&path))?;
                    gone = Some(format!("{p}/"));
                }
                _ => std::fs::remove_file(&path).map_err(io(&path))?,
            }
        }
        // 2. Files kept under some name: patched once, through that name.
        let mut carrier: HashMap<InodeId, std::path::PathBuf> = HashMap::new();
        for (p, id, k) in &new {
            if *k == 1 && kept.contains(p.as_str()) && !carrier.contains_key(id) {
                let path = dir.join(p);
                let (Some(was), Some(now)) =
                    (prev.nodes.get(*id as usize), self.nodes.get(*id as usize))
                else {
                    return Ok(false);
                };
                if !patch_file(&path, was, now).map_err(io(&path))? {
                    return Ok(false);
                }
                carrier.insert(*id, path);
            }
        }
        // 3. Create the rest, as materialise does.
        let mut dir_modes: Vec<(std::path::PathBuf, u32)> = Vec::new();
        for (p, id, _) in &new {
            if kept.contains(p.as_str()) {
                continue;
            }
            let path = dir.join(p);
            match self.nodes.get(*id as usize).unwrap_or(&CNode::Absent) {
                CNode::File {
                    buf, size, mode, ..
                } => {
                    if let Some(orig) = carrier.get(id) {
                        std::fs::hard_link(orig, &path).map_err(io(&path))?;
                    } else {
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(mode & 0o7777 | 0o600)
                            .open(&path)
                            .and_then(|f| write_sparse(&f, buf, *size))
                            .map_err(io(&path))?;
                        carrier.insert(*id, path);
                    }
                }
                CNode::Dir { mode, .. } => {
                    std::fs::DirBuilder::new()
                        .mode(0o755)
                        .create(&path)
                        .map_err(io(&path))?;
                    dir_modes.push((path, *mode));
                }
                CNode::Symlink { target } => {
                    std::os::unix::fs::symlink(&**target, &path).map_err(io(&path))?
                }
                CNode::Absent => {}
            }
        }
        set_dir_modes(dir_modes);
        Ok(true)
    }

    /// What turns `base` into `self`, for shipping a state to another machine as "a base state
    /// both sides can build (a prefix of the program) plus this" (`intact check --emit-states`).
    /// Both states must come from the same [`CrashFs::universe`]; `None` when they do not
    /// (different inode kinds or roots). Only what the checker can see is kept: file contents
    /// up to their sizes, directory entries, the output.
    pub fn delta_from(&self, base: &CrashFs) -> Option<Delta> {
        if self.root != base.root {
            return None;
        }
        let mut d = Delta::default();
        for i in 0..self.nodes.len().max(base.nodes.len()) {
            let (a, b) = (
                self.nodes.get(i).unwrap_or(&CNode::Absent),
                base.nodes.get(i).unwrap_or(&CNode::Absent),
            );
            match (a, b) {
                (
                    CNode::File { buf, size, .. },
                    CNode::File {
                        buf: bbuf,
                        size: bsize,
                        ..
                    },
                ) => {
                    if Arc::ptr_eq(buf, bbuf) && size == bsize {
                        continue;
                    }
                    if *size > DENSE_LIMIT_BYTES {
                        return None; // too large to ship as byte runs
                    }
                    let n = *size as usize;
                    let (buf, bbuf) = (visible(buf, *size), visible(bbuf, *size));
                    let old = |k: usize| bbuf[k];
                    let new = |k: usize| buf[k];
                    let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
                    let mut k = 0;
                    let both = n.min(buf.len()).min(bbuf.len());
                    while k < n {
                        if k < both {
                            // Skip equal bytes both buffers hold without per-byte calls.
                            k += buf[k..both]
                                .iter()
                                .zip(&bbuf[k..both])
                                .position(|(x, y)| x != y)
                                .unwrap_or(both - k);
                            if k == both {
                                continue;
                            }
                        } else if new(k) == old(k) {
                            k += 1;
                            continue;
                        }
                        // A run ends after 16 equal bytes in a row (fewer, longer runs).
                        let start = k;
                        let mut end = k + 1;
                        let mut j = k + 1;
                        while j < n && j < end + 16 {
                            if new(j) != old(j) {
                                end = j + 1;
                            }
                            j += 1;
                        }
                        runs.push((start as u64, (start..end).map(new).collect()));
                        k = end;
                    }
                    if runs.is_empty() && size == bsize {
                        continue;
                    }
                    d.files.push(FileDelta {
                        inode: i as InodeId,
                        size: *size,
                        runs,
                    });
                }
                (CNode::Dir { entries, .. }, CNode::Dir { entries: bent, .. }) => {
                    if Arc::ptr_eq(entries, bent) || entries == bent {
                        continue;
                    }
                    let set: Vec<(String, InodeId)> = entries
                        .iter()
                        .filter(|(n, id)| bent.get(*n) != Some(id))
                        .map(|(n, id)| (n.clone(), *id))
                        .collect();
                    let remove: Vec<String> = bent
                        .keys()
                        .filter(|n| !entries.contains_key(*n))
                        .cloned()
                        .collect();
                    d.dirs.push(DirDelta {
                        inode: i as InodeId,
                        set,
                        remove,
                    });
                }
                (CNode::Symlink { target }, CNode::Symlink { target: bt }) if target == bt => {}
                (CNode::Absent, CNode::Absent) => {}
                _ => return None,
            }
        }
        if self.stdout != base.stdout {
            d.stdout = Some(self.stdout.to_vec());
        }
        Some(d)
    }

    /// Applies a [`Delta`] made by [`CrashFs::delta_from`] against this state. An error means
    /// the delta does not belong to this state (the caller should compare hashes anyway).
    pub fn patch(&mut self, d: &Delta) -> Result<(), CrashFsError> {
        for f in &d.files {
            if f.size > 1 << 40 {
                return Err(CrashFsError::Data(format!(
                    "inode {}: size {} is implausible",
                    f.inode, f.size
                )));
            }
            let (buf, size) = self.file(f.inode)?;
            let b = Arc::make_mut(buf);
            let n = f.size;
            for (off, bytes) in &f.runs {
                if off.checked_add(bytes.len() as u64).is_none_or(|e| e > n) {
                    return Err(CrashFsError::Data(format!(
                        "inode {}: run at {off} beyond the size {n}",
                        f.inode
                    )));
                }
                b.write(*off, bytes).map_err(CrashFsError::Data)?;
            }
            *size = f.size;
        }
        for dd in &d.dirs {
            let e = self.entries(dd.inode)?;
            for n in &dd.remove {
                e.remove(n);
            }
            for (n, id) in &dd.set {
                e.insert(n.clone(), *id);
            }
        }
        if let Some(out) = &d.stdout {
            self.stdout = Arc::new(out.clone());
        }
        Ok(())
    }

    /// The visible tree as a logical [`State`] (for tests and the replay oracle).
    pub fn to_state(&self) -> State {
        let mut s = State::empty();
        s.inodes.clear();
        s.root = self.root;
        let mut seen = HashSet::new();
        let mut todo = vec![self.root];
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            let node = match self.nodes.get(id as usize) {
                Some(CNode::File { buf, size, .. }) => Node::File {
                    data: as_seen(buf, *size),
                },
                Some(CNode::Dir { entries, .. }) => {
                    todo.extend(entries.values().copied());
                    Node::Dir {
                        entries: (**entries).clone(),
                        parent: self.root,
                    }
                }
                Some(CNode::Symlink { target }) => Node::Symlink {
                    target: target.to_string(),
                },
                _ => continue,
            };
            s.inodes.insert(
                id,
                intact_model::state::Inode {
                    id,
                    mode: 0,
                    nlink: 0,
                    node,
                },
            );
        }
        s
    }
}

/// Files up to this size are hashed and diffed byte by byte, as they always were; larger
/// ones (sparse files) by their runs.
const DENSE_LIMIT_BYTES: u64 = 64 << 20;

/// Uninitialised ranges up to this size are materialised with the [`garbage`] pattern in
/// full; longer ones get it in their first and last `GARBAGE_EDGE_BYTES` only and stay a
/// hole (zeros) in between, so a crash state of a 1 TiB sparse file costs little disk.
const GARBAGE_FULL_BYTES: u64 = 1 << 20;
const GARBAGE_EDGE_BYTES: u64 = 64 << 10;

/// A model file's contents in a crash state: its holes are real zeros, not garbage.
fn holes_as_zeros(data: &Sparse) -> Sparse {
    let mut out = data.clone();
    for (s, e, seg) in data.segments(0, data.len()) {
        if seg == Seg::Hole {
            out.write_zeros(s, e - s).expect("inside the file");
        }
    }
    out
}

/// The visible bytes below `size` (the caller bounds it), garbage where never written.
fn visible(buf: &Sparse, size: u64) -> Vec<u8> {
    let mut v = buf.read(0, size, garbage);
    let from = v.len() as u64;
    v.extend((from..size).map(garbage));
    v
}

/// The uninitialised parts of `[s, e)` that are materialised as garbage (see
/// [`GARBAGE_FULL_BYTES`]).
fn garbage_ranges(s: u64, e: u64) -> Vec<(u64, u64)> {
    if e - s <= GARBAGE_FULL_BYTES {
        vec![(s, e)]
    } else {
        vec![(s, s + GARBAGE_EDGE_BYTES), (e - GARBAGE_EDGE_BYTES, e)]
    }
}

/// What the checker sees below `size`, as pieces: written runs, and garbage where the
/// blocks were never written (past the buffer too).
fn seen_segments(buf: &Sparse, size: u64) -> Vec<(u64, u64, Seg<'_>)> {
    let mut segs = buf.segments(0, size);
    if buf.len() < size {
        segs.push((buf.len(), size, Seg::Hole));
    }
    segs
}

/// The contents the checker sees, as a model file (holes: zeros; garbage: written).
fn as_seen(buf: &Sparse, size: u64) -> Sparse {
    let mut out = Sparse::new();
    for (s, e, seg) in seen_segments(buf, size) {
        let r = match seg {
            Seg::Bytes(b) => out.write(s, b),
            Seg::Zeros => out.write_zeros(s, e - s),
            Seg::Hole => garbage_ranges(s, e)
                .into_iter()
                .try_for_each(|(a, b)| out.write(a, &(a..b).map(garbage).collect::<Vec<u8>>())),
        };
        r.expect("inside the file");
    }
    out.set_len(size);
    out
}

/// Writes a file's visible contents into a new file, holes as holes.
fn write_sparse(f: &std::fs::File, buf: &Sparse, size: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.set_len(size)?;
    for (s, e, seg) in seen_segments(buf, size) {
        match seg {
            Seg::Bytes(b) => f.write_all_at(b, s)?,
            Seg::Zeros => {} // a hole of a new file reads as zeros
            Seg::Hole => {
                for (a, b) in garbage_ranges(s, e) {
                    let bytes: Vec<u8> = (a..b).map(garbage).collect();
                    f.write_all_at(&bytes, a)?;
                }
            }
        }
    }
    Ok(())
}

/// The hash of a file's visible contents: of its bytes up to [`DENSE_LIMIT_BYTES`] (equal
/// contents, equal hash; `blake3::hash` of them, from cached chunk hashes: [`visible_hash`]), of its pieces beyond, adjacent pieces of one kind taken as one
/// (where [`Sparse`] splits its runs into chunks is no part of the contents).
fn content_hash(buf: &Sparse, size: u64, windows: &mut WindowCache) -> [u8; 32] {
    if size <= DENSE_LIMIT_BYTES {
        return visible_hash(buf, size, garbage, windows);
    }
    let kind = |seg: &Seg<'_>| match seg {
        Seg::Bytes(_) => b"B",
        Seg::Zeros => b"Z",
        Seg::Hole => b"G",
    };
    let segs = seen_segments(buf, size);
    let mut h = blake3::Hasher::new();
    let mut i = 0;
    while i < segs.len() {
        let k = kind(&segs[i].2);
        let j = i + segs[i..].iter().take_while(|s| kind(&s.2) == k).count();
        assert!(j > i && segs[j - 1].1 > segs[i].0, "a non-empty stretch");
        h.update(&segs[i].0.to_le_bytes());
        h.update(&segs[j - 1].1.to_le_bytes());
        h.update(k);
        for (_, _, seg) in &segs[i..j] {
            if let Seg::Bytes(b) = seg {
                h.update(b);
            }
        }
        i = j;
    }
    *h.finalize().as_bytes()
}

/// Directory modes, set last (deepest first) so that read-only directories could be filled.
fn set_dir_modes(dir_modes: Vec<(std::path::PathBuf, u32)>) {
    for (p, mode) in dir_modes.into_iter().rev() {
        if mode & 0o7777 != 0o755 {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(
                &p,
                std::fs::Permissions::from_mode(mode & 0o7777 | 0o700),
            );
        }
    }
}

/// What a file holds on disk once written by [`write_sparse`], piece by piece.
#[derive(Clone, Copy)]
enum Piece<'a> {
    Bytes(&'a [u8]),
    /// Zeros (a hole of the written file).
    Zero,
    /// The [`garbage`] pattern, which depends on the offset only.
    Garbage,
}

/// The pieces [`write_sparse`] writes for a file: its visible segments, an uninitialised
/// one as garbage where [`garbage_ranges`] says, zeros between.
fn pieces(buf: &Sparse, size: u64) -> Vec<(u64, u64, Piece<'_>)> {
    let mut out = Vec::new();
    for (s, e, seg) in seen_segments(buf, size) {
        match seg {
            Seg::Bytes(b) => out.push((s, e, Piece::Bytes(b))),
            Seg::Zeros => out.push((s, e, Piece::Zero)),
            Seg::Hole => {
                let mut at = s;
                for (a, b) in garbage_ranges(s, e) {
                    if a > at {
                        out.push((at, a, Piece::Zero));
                    }
                    out.push((a, b, Piece::Garbage));
                    at = b;
                }
                if e > at {
                    out.push((at, e, Piece::Zero));
                }
            }
        }
    }
    out
}

/// Zero runs longer than this are not written by [`patch_file`] (the state is written whole).
const PATCH_ZEROS_MAX: u64 = 1 << 20;

/// Turns the file at `path`, which holds `was` as [`write_sparse`] wrote it, into `now`:
/// sets its size, then writes the pieces of `now` that differ from `was` below the old
/// size (and those that are not zeros above it). `Ok(false)` when a differing run of zeros
/// is too long to write.
fn patch_file(path: &Path, was: &CNode, now: &CNode) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let (
        CNode::File {
            buf: obuf,
            size: osize,
            ..
        },
        CNode::File {
            buf: nbuf,
            size: nsize,
            ..
        },
    ) = (was, now)
    else {
        return Ok(false);
    };
    if Arc::ptr_eq(obuf, nbuf) && osize == nsize {
        return Ok(true);
    }
    let (old, new) = (pieces(obuf, *osize), pieces(nbuf, *nsize));
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    if osize != nsize {
        f.set_len(*nsize)?;
    }
    let write = |s: u64, e: u64, p: Piece<'_>, base: u64| -> std::io::Result<bool> {
        match p {
            Piece::Bytes(b) => f.write_all_at(&b[(s - base) as usize..(e - base) as usize], s)?,
            Piece::Garbage => f.write_all_at(&(s..e).map(garbage).collect::<Vec<u8>>(), s)?,
            Piece::Zero if s >= *osize => {} // the new size's extension reads as zeros
            Piece::Zero if e - s > PATCH_ZEROS_MAX => return Ok(false),
            Piece::Zero => f.write_all_at(&vec![0u8; (e - s) as usize], s)?,
        }
        Ok(true)
    };
    let mut j = 0; // the first old piece that may overlap
    for &(s, e, p) in &new {
        let mut at = s;
        while at < e {
            // The old piece at `at`, if below the old size.
            while j < old.len() && old[j].1 <= at {
                j += 1;
            }
            let Some(&(os, oe, op)) = old.get(j).filter(|o| o.0 <= at) else {
                // Beyond the old size: written as a fresh file's tail is.
                if !write(at, e, p, s)? {
                    return Ok(false);
                }
                break;
            };
            let end = e.min(oe);
            let same = match (p, op) {
                (Piece::Zero, Piece::Zero) | (Piece::Garbage, Piece::Garbage) => true,
                (Piece::Bytes(a), Piece::Bytes(b)) => {
                    let a = &a[(at - s) as usize..(end - s) as usize];
                    let b = &b[(at - os) as usize..(end - os) as usize];
                    std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b
                }
                _ => false,
            };
            if !same && !write(at, end, p, s)? {
                return Ok(false);
            }
            at = end;
        }
    }
    Ok(true)
}
