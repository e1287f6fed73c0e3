//! Logical file-system state: inodes reachable from a root directory.

// InodeId is defined with the operations that name inodes; state applies them (op does not
// depend on state).
pub use crate::op::InodeId;
use crate::op::{Data, LogicalOp};
use crate::sparse::Sparse;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Node {
    File {
        #[serde(skip)]
        data: Sparse,
    },
    Dir {
        entries: BTreeMap<String, InodeId>,
        /// Parent directory (the root is its own parent).
        parent: InodeId,
    },
    Symlink {
        target: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inode {
    pub id: InodeId,
    /// Permission bits and type as read by the snapshot (not changed by logical operations).
    pub mode: u32,
    /// Number of directory entries naming this inode (directories: 1, the root: 0).
    pub nlink: u64,
    #[serde(flatten)]
    pub node: Node,
}

impl Inode {
    pub fn size(&self) -> u64 {
        match &self.node {
            Node::File { data } => data.len(),
            Node::Dir { entries, .. } => entries.len() as u64,
            Node::Symlink { target } => target.len() as u64,
        }
    }
    pub fn is_dir(&self) -> bool {
        matches!(self.node, Node::Dir { .. })
    }
    pub fn kind(&self) -> &'static str {
        match self.node {
            Node::File { .. } => "file",
            Node::Dir { .. } => "directory",
            Node::Symlink { .. } => "symlink",
        }
    }
}

/// Why an operation could not be applied: the operation does not fit the state, which
/// means the trace conversion and the state disagree.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApplyError {
    #[error("inode {0} does not exist")]
    NoInode(InodeId),
    #[error("inode {0} is not a {1}")]
    WrongKind(InodeId, &'static str),
    #[error("directory {0} has no entry {1:?}")]
    NoEntry(InodeId, String),
    #[error("directory {0} already has an entry {1:?}")]
    Exists(InodeId, String),
    #[error("{op}: expected size {expected} of inode {inode}, found {found}")]
    SizeMismatch {
        op: &'static str,
        inode: InodeId,
        expected: u64,
        found: u64,
    },
    #[error("data: {0}")]
    Data(String),
    #[error("directory {0} is not empty")]
    NotEmpty(InodeId),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub inodes: HashMap<InodeId, Inode>,
    pub root: InodeId,
    pub next_id: InodeId,
}

impl State {
    /// A state holding only an empty root directory (inode 1).
    pub fn empty() -> State {
        let mut s = State {
            inodes: HashMap::new(),
            root: 1,
            next_id: 2,
        };
        s.inodes.insert(
            1,
            Inode {
                id: 1,
                mode: 0o40755,
                nlink: 0,
                node: Node::Dir {
                    entries: BTreeMap::new(),
                    parent: 1,
                },
            },
        );
        s
    }

    pub fn alloc_id(&mut self) -> InodeId {
        let id = self.next_id;
        // Readers refuse states whose ids come near the end (bundle::read_state).
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    pub fn get(&self, id: InodeId) -> Result<&Inode, ApplyError> {
        self.inodes.get(&id).ok_or(ApplyError::NoInode(id))
    }
    fn get_mut(&mut self, id: InodeId) -> Result<&mut Inode, ApplyError> {
        self.inodes.get_mut(&id).ok_or(ApplyError::NoInode(id))
    }
    pub fn entries(&self, dir: InodeId) -> Result<&BTreeMap<String, InodeId>, ApplyError> {
        match &self.get(dir)?.node {
            Node::Dir { entries, .. } => Ok(entries),
            _ => Err(ApplyError::WrongKind(dir, "directory")),
        }
    }
    fn entries_mut(&mut self, dir: InodeId) -> Result<&mut BTreeMap<String, InodeId>, ApplyError> {
        match &mut self.get_mut(dir)?.node {
            Node::Dir { entries, .. } => Ok(entries),
            _ => Err(ApplyError::WrongKind(dir, "directory")),
        }
    }
    pub fn lookup(&self, dir: InodeId, name: &str) -> Option<InodeId> {
        self.entries(dir).ok()?.get(name).copied()
    }
    pub fn parent_of(&self, dir: InodeId) -> Option<InodeId> {
        match &self.inodes.get(&dir)?.node {
            Node::Dir { parent, .. } => Some(*parent),
            _ => None,
        }
    }
    /// Path of a directory relative to the root ("" for the root itself).
    pub fn dir_path(&self, dir: InodeId) -> Option<String> {
        let mut parts = Vec::new();
        let mut cur = dir;
        let mut guard = 0;
        while cur != self.root {
            let parent = self.parent_of(cur)?;
            let name = self
                .entries(parent)
                .ok()?
                .iter()
                .find(|(_, &v)| v == cur)?
                .0
                .clone();
            parts.push(name);
            cur = parent;
            guard += 1;
            if guard > 4096 {
                return None;
            }
        }
        parts.reverse();
        Some(parts.join("/"))
    }
    /// `dir/name` as a path relative to the root.
    pub fn join(&self, dir: InodeId, name: &str) -> String {
        match self.dir_path(dir) {
            Some(p) if p.is_empty() => name.to_string(),
            Some(p) => format!("{p}/{name}"),
            None => format!("<detached dir #{dir}>/{name}"),
        }
    }

    /// Makes `id` an empty regular file with no name if it does not exist yet.
    pub fn ensure_file(&mut self, id: InodeId) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.inodes.entry(id) {
            e.insert(Inode {
                id,
                mode: 0o100600,
                nlink: 0,
                node: Node::File {
                    data: Sparse::new(),
                },
            });
            self.next_id = self.next_id.max(id.saturating_add(1));
        }
    }

    /// A regular file's contents, creating an unlinked empty file for an id never seen
    /// (O_TMPFILE files exist before they are linked).
    fn file_data(&mut self, id: InodeId) -> Result<&mut Sparse, ApplyError> {
        self.ensure_file(id);
        match &mut self.get_mut(id)?.node {
            Node::File { data } => Ok(data),
            _ => Err(ApplyError::WrongKind(id, "regular file")),
        }
    }

    fn add_entry(&mut self, dir: InodeId, name: &str, inode: InodeId) -> Result<(), ApplyError> {
        let entries = self.entries_mut(dir)?;
        if entries.contains_key(name) {
            return Err(ApplyError::Exists(dir, name.to_string()));
        }
        entries.insert(name.to_string(), inode);
        let n = &mut self.get_mut(inode)?.nlink;
        *n = n.saturating_add(1);
        Ok(())
    }
    fn remove_entry(&mut self, dir: InodeId, name: &str) -> Result<InodeId, ApplyError> {
        let id = self
            .entries_mut(dir)?
            .remove(name)
            .ok_or_else(|| ApplyError::NoEntry(dir, name.to_string()))?;
        let ino = self.get_mut(id)?;
        ino.nlink = ino.nlink.saturating_sub(1);
        Ok(id)
    }
    fn set_parent(&mut self, id: InodeId, new_parent: InodeId) {
        if let Some(Inode {
            node: Node::Dir { parent, .. },
            ..
        }) = self.inodes.get_mut(&id)
        {
            *parent = new_parent;
        }
    }
    /// Drop inodes that nothing names any more and that are not directories still in use.
    /// Only called by [`State::diff`] users via [`State::reachable`]; apply keeps unlinked
    /// inodes because open file descriptors may still write to them.
    pub fn reachable(&self) -> Vec<(String, InodeId)> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), self.root)];
        // A directory is entered once: a damaged state naming one twice (or inside itself)
        // must not loop.
        let mut entered = std::collections::HashSet::new();
        while let Some((path, id)) = stack.pop() {
            if !entered.insert(id) {
                continue;
            }
            if let Ok(entries) = self.entries(id) {
                for (name, &child) in entries.iter().rev() {
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    };
                    out.push((p.clone(), child));
                    if self.inodes.get(&child).map(|i| i.is_dir()).unwrap_or(false) {
                        stack.push((p, child));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Applies one logical operation. `blob` holds the bytes that `Data::Bytes` refers to.
    pub fn apply(&mut self, op: &LogicalOp, blob: &[u8]) -> Result<(), ApplyError> {
        match op {
            LogicalOp::Overwrite {
                inode,
                offset,
                count,
                data,
            } => {
                let file = self.file_data(*inode)?;
                let end = offset.checked_add(*count).filter(|&e| e <= file.len());
                let Some(end) = end else {
                    return Err(ApplyError::SizeMismatch {
                        op: "overwrite",
                        inode: *inode,
                        expected: offset.saturating_add(*count),
                        found: file.len(),
                    });
                };
                if data.len() < *count {
                    return Err(ApplyError::Data(format!(
                        "overwrite of {count} bytes carries {}",
                        data.len()
                    )));
                }
                write_data(file, *offset, &data.slice(0, *count), blob)?;
                debug_assert!(file.len() >= end);
            }
            LogicalOp::Append {
                inode,
                old_size,
                new_size,
                data,
            } => {
                let file = self.file_data(*inode)?;
                if file.len() != *old_size {
                    return Err(ApplyError::SizeMismatch {
                        op: "append",
                        inode: *inode,
                        expected: *old_size,
                        found: file.len(),
                    });
                }
                if old_size.checked_add(data.len()) != Some(*new_size) {
                    return Err(ApplyError::SizeMismatch {
                        op: "append",
                        inode: *inode,
                        expected: *new_size,
                        found: old_size.saturating_add(data.len()),
                    });
                }
                write_data(file, *old_size, data, blob)?;
            }
            LogicalOp::Truncate {
                inode,
                old_size,
                new_size,
            } => {
                let file = self.file_data(*inode)?;
                if file.len() != *old_size {
                    return Err(ApplyError::SizeMismatch {
                        op: "truncate",
                        inode: *inode,
                        expected: *old_size,
                        found: file.len(),
                    });
                }
                file.set_len(*new_size);
            }
            LogicalOp::Link {
                dir,
                name,
                inode,
                created,
                ..
            } => {
                if *created || !self.inodes.contains_key(inode) {
                    self.file_data(*inode)?;
                }
                self.add_entry(*dir, name, *inode)?;
            }
            LogicalOp::Unlink { dir, name, .. } => {
                let id = self
                    .lookup(*dir, name)
                    .ok_or_else(|| ApplyError::NoEntry(*dir, name.clone()))?;
                if self.get(id)?.is_dir() {
                    return Err(ApplyError::WrongKind(id, "non-directory"));
                }
                self.remove_entry(*dir, name)?;
            }
            LogicalOp::Rename {
                src_dir,
                src_name,
                dst_dir,
                dst_name,
                inode,
                exchange,
                ..
            } => {
                let src = self
                    .lookup(*src_dir, src_name)
                    .ok_or_else(|| ApplyError::NoEntry(*src_dir, src_name.clone()))?;
                if src != *inode {
                    return Err(ApplyError::WrongKind(src, "renamed inode"));
                }
                if *exchange {
                    let dst = self
                        .lookup(*dst_dir, dst_name)
                        .ok_or_else(|| ApplyError::NoEntry(*dst_dir, dst_name.clone()))?;
                    self.entries_mut(*src_dir)?.insert(src_name.clone(), dst);
                    self.entries_mut(*dst_dir)?.insert(dst_name.clone(), src);
                    self.set_parent(dst, *src_dir);
                    self.set_parent(src, *dst_dir);
                } else {
                    if self.lookup(*dst_dir, dst_name) == Some(src) {
                        return Ok(()); // both names already link the same inode: no-op
                    }
                    if let Some(old) = self.lookup(*dst_dir, dst_name) {
                        if self.get(old)?.is_dir() && !self.entries(old)?.is_empty() {
                            return Err(ApplyError::NotEmpty(old));
                        }
                        self.remove_entry(*dst_dir, dst_name)?;
                    }
                    self.remove_entry(*src_dir, src_name)?;
                    self.add_entry(*dst_dir, dst_name, src)?;
                    self.set_parent(src, *dst_dir);
                }
            }
            LogicalOp::Mkdir { dir, name, inode } => {
                self.inodes.insert(
                    *inode,
                    Inode {
                        id: *inode,
                        mode: 0o40755,
                        nlink: 0,
                        node: Node::Dir {
                            entries: BTreeMap::new(),
                            parent: *dir,
                        },
                    },
                );
                self.next_id = self.next_id.max(inode.saturating_add(1));
                self.add_entry(*dir, name, *inode)?;
            }
            LogicalOp::Rmdir { dir, name, .. } => {
                let id = self
                    .lookup(*dir, name)
                    .ok_or_else(|| ApplyError::NoEntry(*dir, name.clone()))?;
                if !self.entries(id)?.is_empty() {
                    return Err(ApplyError::NotEmpty(id));
                }
                self.remove_entry(*dir, name)?;
                self.inodes.remove(&id);
            }
            LogicalOp::Symlink {
                dir,
                name,
                inode,
                target,
            } => {
                self.inodes.insert(
                    *inode,
                    Inode {
                        id: *inode,
                        mode: 0o120777,
                        nlink: 0,
                        node: Node::Symlink {
                            target: target.clone(),
                        },
                    },
                );
                self.next_id = self.next_id.max(inode.saturating_add(1));
                self.add_entry(*dir, name, *inode)?;
            }
            LogicalOp::Sync { .. } | LogicalOp::Output { .. } => {}
        }
        Ok(())
    }

    /// Compares the trees reachable from the roots: names, kinds, sizes, contents, symlink
    /// targets, and link identity (paths naming one inode in `self` name one inode in
    /// `other`). Returns the first difference, naming its path. Modes are not compared:
    /// logical operations do not model attributes.
    pub fn diff(&self, other: &State) -> Option<String> {
        let a = self.reachable();
        let b = other.reachable();
        let bmap: BTreeMap<&str, InodeId> = b.iter().map(|(p, i)| (p.as_str(), *i)).collect();
        let amap: BTreeMap<&str, InodeId> = a.iter().map(|(p, i)| (p.as_str(), *i)).collect();
        // Inode correspondence, established by the first path naming each inode.
        let mut a2b: HashMap<InodeId, (InodeId, &str)> = HashMap::new();
        let mut b2a: HashMap<InodeId, (InodeId, &str)> = HashMap::new();
        let mut all: Vec<&str> = amap.keys().chain(bmap.keys()).copied().collect();
        all.sort();
        all.dedup();
        for path in all {
            let (ia, ib) = match (amap.get(path), bmap.get(path)) {
                (Some(ia), Some(ib)) => (*ia, *ib),
                (Some(_), None) => return Some(format!("{path}: exists in the first state only")),
                (None, Some(_)) => return Some(format!("{path}: exists in the second state only")),
                (None, None) => unreachable!(),
            };
            let (Some(na), Some(nb)) = (self.inodes.get(&ia), other.inodes.get(&ib)) else {
                return Some(format!("{path}: names an inode that does not exist"));
            };
            if na.kind() != nb.kind() {
                return Some(format!(
                    "{path}: {} in the first state, {} in the second",
                    na.kind(),
                    nb.kind()
                ));
            }
            match (&na.node, &nb.node) {
                (Node::File { data: da }, Node::File { data: db }) => {
                    if da.len() != db.len() {
                        return Some(format!(
                            "{path}: size {} in the first state, {} in the second",
                            da.len(),
                            db.len()
                        ));
                    }
                    if let Some(pos) = da.first_difference(db, |_| 0) {
                        let byte = |d: &Sparse| d.byte_at(pos, |_| 0).unwrap_or(0);
                        return Some(format!(
                            "{path}: contents differ at offset {pos} ({:#04x} vs {:#04x})",
                            byte(da),
                            byte(db)
                        ));
                    }
                }
                (Node::Symlink { target: ta }, Node::Symlink { target: tb }) if ta != tb => {
                    return Some(format!(
                        "{path}: symlink target {ta:?} in the first state, {tb:?} in the second"
                    ));
                }
                _ => {}
            }
            if !na.is_dir() {
                match (a2b.get(&ia), b2a.get(&ib)) {
                    (None, None) => {
                        a2b.insert(ia, (ib, path));
                        b2a.insert(ib, (ia, path));
                    }
                    (Some((mapped, first)), _) if *mapped != ib => {
                        return Some(format!("{path}: is a hard link of {first} in the first state but not in the second"));
                    }
                    (_, Some((mapped, first))) if *mapped != ia => {
                        return Some(format!("{path}: is a hard link of {first} in the second state but not in the first"));
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// Writes `data` at `offset` of `file`: zeros without allocating them.
fn write_data(file: &mut Sparse, offset: u64, data: &Data, blob: &[u8]) -> Result<(), ApplyError> {
    match *data {
        Data::Zeros { zeros } => file.write_zeros(offset, zeros),
        Data::Bytes { .. } => {
            let bytes = data.bytes(blob).map_err(ApplyError::Data)?;
            file.write(offset, &bytes)
        }
    }
    .map_err(ApplyError::Data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Data;

    #[test]
    fn create_write_rename_unlink() {
        let mut s = State::empty();
        let blob = b"hello world";
        s.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "a".into(),
                inode: 2,
                link_count: 1,
                created: true,
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Append {
                inode: 2,
                old_size: 0,
                new_size: 5,
                data: Data::Bytes { at: 0, len: 5 },
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Overwrite {
                inode: 2,
                offset: 1,
                count: 2,
                data: Data::Zeros { zeros: 2 },
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "b".into(),
                inode: 2,
                link_count: 2,
                created: false,
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Mkdir {
                dir: 1,
                name: "d".into(),
                inode: 3,
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Rename {
                src_dir: 1,
                src_name: "a".into(),
                dst_dir: 3,
                dst_name: "x".into(),
                inode: 2,
                replaced: None,
                exchange: false,
            },
            blob,
        )
        .unwrap();
        assert_eq!(
            s.reachable()
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>(),
            vec!["b", "d", "d/x"]
        );
        assert_eq!(s.get(2).unwrap().nlink, 2);
        match &s.get(2).unwrap().node {
            Node::File { data } => assert_eq!(data.read(0, 100, |_| 0), b"h\0\0lo"),
            _ => panic!(),
        }
        s.apply(
            &LogicalOp::Unlink {
                dir: 1,
                name: "b".into(),
                inode: 2,
                link_count: 1,
            },
            blob,
        )
        .unwrap();
        assert_eq!(s.get(2).unwrap().nlink, 1);
        assert!(s
            .apply(
                &LogicalOp::Rmdir {
                    dir: 1,
                    name: "d".into(),
                    inode: 3
                },
                blob
            )
            .is_err());
    }

    #[test]
    fn diff_detects_link_identity() {
        let blob = b"";
        let mut a = State::empty();
        a.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "a".into(),
                inode: 2,
                link_count: 1,
                created: true,
            },
            blob,
        )
        .unwrap();
        a.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "b".into(),
                inode: 2,
                link_count: 2,
                created: false,
            },
            blob,
        )
        .unwrap();
        let mut b = State::empty();
        b.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "a".into(),
                inode: 2,
                link_count: 1,
                created: true,
            },
            blob,
        )
        .unwrap();
        b.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "b".into(),
                inode: 3,
                link_count: 1,
                created: true,
            },
            blob,
        )
        .unwrap();
        let d = a.diff(&b).unwrap();
        assert!(d.starts_with("b: is a hard link of a"), "{d}");
        assert_eq!(a.diff(&a.clone()), None);
    }

    #[test]
    fn exchange_swaps() {
        let blob = b"";
        let mut s = State::empty();
        s.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "a".into(),
                inode: 2,
                link_count: 1,
                created: true,
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Mkdir {
                dir: 1,
                name: "b".into(),
                inode: 3,
            },
            blob,
        )
        .unwrap();
        s.apply(
            &LogicalOp::Rename {
                src_dir: 1,
                src_name: "a".into(),
                dst_dir: 1,
                dst_name: "b".into(),
                inode: 2,
                replaced: Some(3),
                exchange: true,
            },
            blob,
        )
        .unwrap();
        assert_eq!(s.lookup(1, "a"), Some(3));
        assert_eq!(s.lookup(1, "b"), Some(2));
    }
}
