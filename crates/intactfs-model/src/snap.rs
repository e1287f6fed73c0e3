//! A canonical snapshot of a state, from the model or from an engine, its digest and diff.

use crate::{MData, MIno, MSpecial, MState, MROOT};
use intactfs_types::{ExtAttrs, FileType, Namespace};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// A file or directory as a snapshot shows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SNode {
    /// Its inode number (see [`by_first_path`] for models that number their own).
    pub ino: u64,
    pub dir: bool,
    pub special: Option<MSpecial>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A file's names; a directory's 2 + its subdirectories.
    pub nlink: u32,
    pub size: u64,
    /// Content hash ([`MData::digest`]: files; a symbolic link's target).
    pub content: u64,
    /// Hash of the extended attributes ([`xattr_digest`]).
    pub xattrs: u64,
}

/// Path → node, for every object reachable from the root (the root's path is empty; times
/// are not compared: the engines stamp them, the model does not predict them).
pub type Snap = BTreeMap<Vec<u8>, SNode>;

/// The hash of a set of extended attributes the model and an engine's snapshot share.
pub fn xattr_digest(x: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

pub fn digest(s: &Snap) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// The first few differences between two snapshots, for a failure message.
pub fn diff(got: &Snap, want: &Snap) -> String {
    let mut out = Vec::new();
    for (p, n) in got {
        match want.get(p) {
            None => out.push(format!(
                "{} is there but should not be ({n:?})",
                String::from_utf8_lossy(p)
            )),
            Some(w) if w != n => out.push(format!(
                "{}: got {n:?}, want {w:?}",
                String::from_utf8_lossy(p)
            )),
            _ => {}
        }
    }
    for (p, w) in want {
        if !got.contains_key(p) {
            out.push(format!("{} is missing ({w:?})", String::from_utf8_lossy(p)));
        }
    }
    let n = out.len();
    out.truncate(4);
    format!("{n} differences: {}", out.join("; "))
}

/// The snapshot with each inode numbered by the first path (in path order) that names it:
/// for a simulation whose model numbers inodes its own way, two snapshots then agree when
/// the same paths name the same inode.
pub fn by_first_path(mut s: Snap) -> Snap {
    let mut number: BTreeMap<u64, u64> = BTreeMap::new();
    for n in s.values_mut() {
        let next = number.len() as u64 + 1;
        n.ino = *number.entry(n.ino).or_insert(next);
    }
    s
}

impl MState {
    pub fn snapshot(&self) -> Snap {
        let mut out = Snap::new();
        let mut todo = vec![(Vec::new(), MROOT)];
        while let Some((path, ino)) = todo.pop() {
            let n = &self.nodes[&ino];
            out.insert(
                path.clone(),
                SNode {
                    ino,
                    dir: n.dir,
                    special: n.special,
                    mode: n.mode,
                    uid: n.uid,
                    gid: n.gid,
                    nlink: self.nlink(ino),
                    size: if n.dir { 0 } else { n.data.len() },
                    content: if n.dir { 0 } else { n.data.digest() },
                    xattrs: xattr_digest(&n.xattrs),
                },
            );
            for (name, &c) in &n.entries {
                todo.push((child(&path, name), c));
            }
        }
        out
    }
}

fn child(path: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = path.to_vec();
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

/// The model's name for an engine's file type and device number (None: a regular file or
/// a directory).
fn special_of(kind: FileType, rdev: u32) -> Option<MSpecial> {
    match kind {
        FileType::File | FileType::Dir => None,
        FileType::Symlink => Some(MSpecial::Symlink),
        FileType::Fifo => Some(MSpecial::Fifo),
        FileType::Socket => Some(MSpecial::Socket),
        FileType::CharDev => Some(MSpecial::Char(rdev)),
        FileType::BlockDev => Some(MSpecial::Block(rdev)),
    }
}

/// The state an engine shows: every object reachable from `root`, read through the
/// engine traits; `content` gives a regular file's content hash as [`MData::digest`]
/// computes it (each engine reads its files its own way: whole, or only where data is).
pub fn engine_snapshot<E: Namespace + ExtAttrs>(
    fs: &mut E,
    root: MIno,
    mut content: impl FnMut(&mut E, MIno, u64) -> Result<u64, String>,
) -> Result<Snap, String> {
    let mut out = Snap::new();
    let mut todo: Vec<(Vec<u8>, MIno)> = vec![(Vec::new(), root)];
    while let Some((path, ino)) = todo.pop() {
        let at = || format!("{ino} ({})", String::from_utf8_lossy(&path));
        let a = fs
            .getattr(ino)
            .map_err(|e| format!("getattr {}: {e}", at()))?;
        let dir = a.kind == FileType::Dir;
        let special = special_of(a.kind, a.rdev);
        if special.is_none() && a.rdev != 0 {
            let kind = a.kind;
            return Err(format!(
                "inode {} ({kind:?}) has device number {}",
                at(),
                a.rdev
            ));
        }
        let content = match a.kind {
            FileType::Symlink => link_content(fs, ino, a.size)?,
            FileType::Dir => {
                let entries = (fs.readdir(ino, 0, usize::MAX))
                    .map_err(|e| format!("readdir {}: {e}", at()))?;
                todo.extend(entries.into_iter().map(|e| (child(&path, &e.name), e.ino)));
                0
            }
            FileType::File => content(fs, ino, a.size).map_err(|e| format!("{}: {e}", at()))?,
            _ => MData::default().digest(),
        };
        let xattrs = xattrs_of(fs, ino).map_err(|e| format!("{}: {e}", at()))?;
        let n = SNode {
            ino,
            dir,
            special,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            size: if dir { 0 } else { a.size },
            content,
            xattrs: xattr_digest(&xattrs),
        };
        out.insert(path, n);
    }
    Ok(out)
}

/// A symbolic link's target, hashed as the model hashes file contents (its target is its
/// data); its size must be the target's length.
fn link_content<E: Namespace>(fs: &E, ino: MIno, size: u64) -> Result<u64, String> {
    let t = fs
        .readlink(ino)
        .map_err(|e| format!("readlink {ino}: {e}"))?;
    if t.len() as u64 != size {
        return Err(format!(
            "link {ino} has size {size} but a {}-byte target",
            t.len()
        ));
    }
    Ok(MData::from_bytes(&t).digest())
}

fn xattrs_of<E: ExtAttrs>(fs: &E, ino: MIno) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
    let mut x = BTreeMap::new();
    for k in fs.listxattr(ino).map_err(|e| format!("listxattr: {e}"))? {
        let v = (fs.getxattr(ino, &k))
            .map_err(|e| format!("getxattr {}: {e}", String::from_utf8_lossy(&k)))?;
        x.insert(k, v);
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MOp;
    use intactfs_types::RenameFlags;

    fn create(parent: MIno, name: &[u8], ino: MIno, dir: bool) -> MOp {
        MOp::Create {
            parent,
            name: name.to_vec(),
            ino,
            dir,
            mode: 0o644,
            special: None,
        }
    }

    fn link(ino: MIno, parent: MIno, name: &[u8]) -> MOp {
        let name = name.to_vec();
        MOp::Link { ino, parent, name }
    }

    fn rename(from: (MIno, &[u8]), to: (MIno, &[u8]), flags: RenameFlags) -> MOp {
        let (from, to) = ((from.0, from.1.to_vec()), (to.0, to.1.to_vec()));
        let keep = false;
        MOp::Rename {
            from,
            to,
            flags,
            keep,
        }
    }

    #[test]
    fn hard_links_number_by_their_first_path() {
        let mut m = MState::default();
        m.try_apply(&create(MROOT, b"d", 7, true)).unwrap();
        m.try_apply(&create(7, b"f", 9, false)).unwrap();
        m.try_apply(&link(9, MROOT, b"a")).unwrap();
        let s = by_first_path(m.snapshot());
        assert_eq!(s[&b"/a"[..]].ino, s[&b"/d/f"[..]].ino);
        assert_eq!(s[&b"/a"[..]].nlink, 2);
        assert_ne!(s[&b"/d"[..]].ino, s[&b"/a"[..]].ino);
    }

    #[test]
    fn rename_between_links_of_one_file_changes_nothing() {
        let mut m = MState::default();
        m.try_apply(&create(MROOT, b"f", 5, false)).unwrap();
        m.try_apply(&link(5, MROOT, b"g")).unwrap();
        let before = m.snapshot();
        for flags in [RenameFlags::NONE, RenameFlags::EXCHANGE] {
            m.try_apply(&rename((MROOT, b"f"), (MROOT, b"g"), flags))
                .unwrap();
            assert_eq!(m.snapshot(), before);
        }
    }

    #[test]
    fn a_directory_does_not_move_below_itself() {
        let mut m = MState::default();
        m.try_apply(&create(MROOT, b"d", 2, true)).unwrap();
        m.try_apply(&create(2, b"e", 3, true)).unwrap();
        let op = rename((MROOT, b"d"), (3, b"x"), RenameFlags::NONE);
        assert_eq!(m.try_apply(&op), Err(crate::errno::EINVAL));
    }
}
