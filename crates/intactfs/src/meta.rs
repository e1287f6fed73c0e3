//! The metadata model and the logical operations that change it.
//!
//! intactfs journals *logical* operations (design brief: create, link, unlink, rename,
//! setattr, extent-map changes), not blocks. [`Meta::apply`] is the one place their meaning
//! is defined: the engine applies each operation to its in-memory state when a call runs
//! and again to the durable state when the transaction commits, and recovery applies the
//! same operations read back from the journal. An operation that does not apply is
//! refused with a reason (at recovery that means damage).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use intactfs_types::{FileType, Ino, Time};
pub const ROOT: Ino = 1;
/// File-system block size; the device's block size must equal it.
pub const BLOCK: usize = 4096;
pub use intactfs_types::SYMLINK_MAX;
/// Largest file size: 2^50 bytes (1 PiB).
pub const MAX_FILE_SIZE: u64 = 1 << 50;

/// `len` consecutive blocks from `pblk`. `crcs` holds one CRC-32C per block of written
/// data; empty means preallocated (unwritten) space that reads as zeros.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub pblk: u64,
    pub len: u64,
    pub crcs: Vec<u32>,
}

impl Extent {
    pub fn written(&self) -> bool {
        !self.crcs.is_empty()
    }
}

/// Directory entries are keyed by (hash of name, name): lookups are O(log n) and the hash
/// is the readdir cookie, stable across mounts.
pub type DirKey = (u64, Vec<u8>);

/// FNV-1a, 64 bits: directory-entry cookies and stream ids from names.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub fn name_hash(name: &[u8]) -> u64 {
    // Top bit cleared and never 0: cookies 1..2^63 (0 means "from the start").
    (fnv1a(name) >> 1).max(1)
}

pub fn dir_key(name: &[u8]) -> DirKey {
    (name_hash(name), name.to_vec())
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Body {
    /// Logical block → extent starting there.
    File {
        extents: BTreeMap<u64, Extent>,
    },
    Dir {
        entries: BTreeMap<DirKey, Ino>,
        parent: Ino,
    },
    Symlink {
        target: Vec<u8>,
    },
    Special {
        rdev: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inode {
    pub kind: FileType,
    /// Permission bits (0o7777).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub body: Body,
    /// Extended attributes: name → value.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub use intactfs_types::{valid_name, valid_xattr_name, NAME_MAX, XATTR_NAME_MAX, XATTR_VALUE_MAX};

/// Most bytes of extended-attribute names and values on one inode (this engine's limit).
pub const XATTR_TOTAL_MAX: usize = 256 * 1024;

/// Bytes of names and values an inode's extended attributes take.
pub fn xattr_bytes(x: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
    x.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Whether setting `name` to a value of `len` bytes keeps the inode within the limits.
pub fn xattr_fits(x: &BTreeMap<Vec<u8>, Vec<u8>>, name: &[u8], len: usize) -> bool {
    let old = x.get(name).map_or(0, |o| name.len() + o.len());
    len <= XATTR_VALUE_MAX && xattr_bytes(x) - old + name.len() + len <= XATTR_TOTAL_MAX
}

impl Inode {
    pub fn extents(&self) -> Option<&BTreeMap<u64, Extent>> {
        match &self.body {
            Body::File { extents } => Some(extents),
            _ => None,
        }
    }
    pub fn entries(&self) -> Option<&BTreeMap<DirKey, Ino>> {
        match &self.body {
            Body::Dir { entries, .. } => Some(entries),
            _ => None,
        }
    }
    /// Blocks allocated to the file.
    pub fn blocks(&self) -> u64 {
        self.extents()
            .map(|e| e.values().map(|x| x.len).sum())
            .unwrap_or(0)
    }
}

/// Everything a snapshot holds. BTreeMaps so that the encoding is deterministic (a crash
/// image drawn from a seed must be the same on every run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub inodes: BTreeMap<Ino, Inode>,
    /// Inode numbers below this have been handed out at some point.
    pub next_ino: Ino,
}

/// What a new inode is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewKind {
    File,
    Dir,
    Symlink(Vec<u8>),
    Fifo,
    Socket,
    CharDev(u32),
    BlockDev(u32),
}

/// One journaled logical operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogOp {
    Create {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        kind: NewKind,
        mode: u32,
        uid: u32,
        gid: u32,
        time: Time,
    },
    Link {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        time: Time,
    },
    /// Removes the entry; the inode stays (as an orphan if it was the last link) until Free.
    Unlink {
        parent: Ino,
        name: Vec<u8>,
        time: Time,
    },
    Rename {
        sp: Ino,
        sn: Vec<u8>,
        dp: Ino,
        dn: Vec<u8>,
        exchange: bool,
        time: Time,
    },
    SetAttr {
        ino: Ino,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<Time>,
        mtime: Option<Time>,
        ctime: Time,
    },
    /// Sets a file's size; when it shrinks, blocks wholly past the new end are freed.
    /// `free_past_end`: also free blocks wholly past the new end. Decided when the call
    /// ran (a truncate that shrank the file as the caller saw it), never from the size at
    /// replay, which may lack uncommitted writes the caller saw.
    SetSize {
        ino: Ino,
        size: u64,
        time: Time,
        free_past_end: bool,
    },
    /// Maps `len` file blocks from `lblk` to device blocks from `pblk` (replacing what was
    /// mapped there). `crcs` empty: preallocated, reads as zeros.
    Map {
        ino: Ino,
        lblk: u64,
        pblk: u64,
        len: u64,
        crcs: Vec<u32>,
    },
    /// Drops an inode with no links left (the last close of an unlinked file).
    Free { ino: Ino },
    /// Sets (`Some`) or removes (`None`) an extended attribute.
    SetXattr {
        ino: Ino,
        name: Vec<u8>,
        value: Option<Vec<u8>>,
        ctime: Time,
    },
    /// FALLOC_FL_PUNCH_HOLE: unmaps (frees) file blocks `lblk..lblk+len`; the size stays.
    /// (Bytes of partial blocks at the edges are zeroed by data written with the call.)
    Punch {
        ino: Ino,
        lblk: u64,
        len: u64,
        time: Time,
    },
}

impl LogOp {
    /// Data blocks this operation says were written, with their checksums.
    pub fn data_blocks(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let (pblk, crcs) = match self {
            LogOp::Map { pblk, crcs, .. } => (*pblk, crcs.as_slice()),
            _ => (0, &[][..]),
        };
        crcs.iter()
            .enumerate()
            .map(move |(k, c)| (pblk + k as u64, *c))
    }
}

/// What applying an operation released: device extents and an inode number. They become
/// reusable only once the operation is durable.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Freed {
    pub extents: Vec<(u64, u64)>,
    pub ino: Option<Ino>,
}

fn later(a: &mut Time, b: Time) {
    // Implicit time updates from unrelated streams may be replayed out of real-time order.
    if b > *a {
        *a = b;
    }
}

impl Meta {
    /// A file system with an empty root directory.
    pub fn new(time: Time) -> Meta {
        let root = Inode {
            kind: FileType::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
            nlink: 2,
            size: 0,
            atime: time,
            mtime: time,
            ctime: time,
            body: Body::Dir {
                entries: BTreeMap::new(),
                parent: ROOT,
            },
            xattrs: BTreeMap::new(),
        };
        Meta {
            inodes: BTreeMap::from([(ROOT, root)]),
            next_ino: ROOT + 1,
        }
    }

    pub fn get(&self, ino: Ino) -> Option<&Inode> {
        self.inodes.get(&ino)
    }

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Option<Ino> {
        self.inodes
            .get(&parent)?
            .entries()?
            .get(&dir_key(name))
            .copied()
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut BTreeMap<DirKey, Ino>, String> {
        match self.inodes.get_mut(&ino).map(|n| &mut n.body) {
            Some(Body::Dir { entries, .. }) => Ok(entries),
            Some(_) => Err(format!("inode {ino} is not a directory")),
            None => Err(format!("directory {ino} does not exist")),
        }
    }

    fn node_mut(&mut self, ino: Ino) -> Result<&mut Inode, String> {
        self.inodes
            .get_mut(&ino)
            .ok_or(format!("inode {ino} does not exist"))
    }

    /// Whether `a` is `b` or one of its ancestors.
    pub fn is_ancestor(&self, a: Ino, mut b: Ino) -> bool {
        for _ in 0..=self.inodes.len() {
            if a == b {
                return true;
            }
            match self.inodes.get(&b).map(|n| &n.body) {
                Some(Body::Dir { parent, .. }) if *parent != b => b = *parent,
                _ => return false,
            }
        }
        false
    }

    fn touch_dir(&mut self, dir: Ino, time: Time) {
        if let Some(d) = self.inodes.get_mut(&dir) {
            later(&mut d.mtime, time);
            later(&mut d.ctime, time);
        }
    }

    /// Every inode `op` may change (or create or free) when applied to this state: what a
    /// delta checkpoint must write. Must cover everything [`Self::apply`] touches.
    pub fn touches(&self, op: &LogOp) -> Vec<Ino> {
        match op {
            LogOp::Create { parent, ino, .. } | LogOp::Link { parent, ino, .. } => {
                vec![*parent, *ino]
            }
            LogOp::Unlink { parent, name, .. } => [Some(*parent), self.lookup(*parent, name)]
                .into_iter()
                .flatten()
                .collect(),
            // A rename changes both directories, the moved inode (its ctime, a directory's
            // parent) and the one it replaces or exchanges with.
            LogOp::Rename { sp, sn, dp, dn, .. } => [
                Some(*sp),
                Some(*dp),
                self.lookup(*sp, sn),
                self.lookup(*dp, dn),
            ]
            .into_iter()
            .flatten()
            .collect(),
            LogOp::SetAttr { ino, .. }
            | LogOp::SetSize { ino, .. }
            | LogOp::Map { ino, .. }
            | LogOp::Free { ino }
            | LogOp::SetXattr { ino, .. }
            | LogOp::Punch { ino, .. } => vec![*ino],
        }
    }

    /// Applies one operation, or says why it cannot apply (the state is then unchanged).
    pub fn apply(&mut self, op: &LogOp) -> Result<Freed, String> {
        match op {
            LogOp::Create { .. } => self.create(op).map(|()| Freed::default()),
            LogOp::Link {
                parent,
                name,
                ino,
                time,
            } => self
                .link(parent, name, ino, time)
                .map(|()| Freed::default()),
            LogOp::Unlink { parent, name, time } => {
                self.unlink(parent, name, time).map(|()| Freed::default())
            }
            LogOp::Rename {
                sp,
                sn,
                dp,
                dn,
                exchange,
                time,
            } => self
                .rename(sp, sn, dp, dn, exchange, time)
                .map(|()| Freed::default()),
            LogOp::SetXattr {
                ino,
                name,
                value,
                ctime,
            } => self
                .set_xattr(ino, name, value, ctime)
                .map(|()| Freed::default()),
            LogOp::SetAttr { .. } => self.set_attr(op).map(|()| Freed::default()),
            LogOp::SetSize {
                ino,
                size,
                time,
                free_past_end,
            } => self.set_size(ino, size, time, free_past_end),
            LogOp::Map {
                ino,
                lblk,
                pblk,
                len,
                crcs,
            } => self.map(ino, lblk, pblk, len, crcs),
            LogOp::Punch {
                ino,
                lblk,
                len,
                time,
            } => self.punch(ino, lblk, len, time),
            LogOp::Free { ino } => self.free(ino),
        }
    }

    /// `op` is a `LogOp::Create` (too many fields for arguments).
    fn create(&mut self, op: &LogOp) -> Result<(), String> {
        let LogOp::Create {
            parent,
            name,
            ino,
            kind,
            mode,
            uid,
            gid,
            time,
        } = op
        else {
            unreachable!("apply passes only Create to create");
        };
        if !valid_name(name) {
            return Err(format!("invalid name {:?}", String::from_utf8_lossy(name)));
        }
        if self.inodes.contains_key(ino) || *ino == 0 {
            return Err(format!("inode {ino} already exists"));
        }
        // Checked before anything changes (a refused operation leaves the state as
        // it was); u64::MAX would overflow next_ino.
        let next_ino = ino
            .checked_add(1)
            .ok_or(format!("inode number {ino} is out of range"))?;
        if let NewKind::Symlink(t) = kind {
            if t.is_empty() || t.len() > SYMLINK_MAX {
                return Err("bad symlink target length".into());
            }
        }
        let is_dir = matches!(kind, NewKind::Dir);
        self.add_entry(*parent, name, *ino)?;
        let (ft, body, size) = match kind {
            NewKind::File => (
                FileType::File,
                Body::File {
                    extents: BTreeMap::new(),
                },
                0,
            ),
            NewKind::Dir => (
                FileType::Dir,
                Body::Dir {
                    entries: BTreeMap::new(),
                    parent: *parent,
                },
                0,
            ),
            NewKind::Symlink(t) => (
                FileType::Symlink,
                Body::Symlink { target: t.clone() },
                t.len() as u64,
            ),
            NewKind::Fifo => (FileType::Fifo, Body::Special { rdev: 0 }, 0),
            NewKind::Socket => (FileType::Socket, Body::Special { rdev: 0 }, 0),
            NewKind::CharDev(r) => (FileType::CharDev, Body::Special { rdev: *r }, 0),
            NewKind::BlockDev(r) => (FileType::BlockDev, Body::Special { rdev: *r }, 0),
        };
        let node = Inode {
            kind: ft,
            mode: mode & 0o7777,
            uid: *uid,
            gid: *gid,
            nlink: if is_dir { 2 } else { 1 },
            size,
            atime: *time,
            mtime: *time,
            ctime: *time,
            body,
            xattrs: BTreeMap::new(),
        };
        self.inodes.insert(*ino, node);
        if is_dir {
            self.node_mut(*parent)?.nlink += 1;
        }
        self.touch_dir(*parent, *time);
        self.next_ino = self.next_ino.max(next_ino);
        Ok(())
    }

    fn link(&mut self, parent: &Ino, name: &[u8], ino: &Ino, time: &Time) -> Result<(), String> {
        if !valid_name(name) {
            return Err("invalid name".into());
        }
        match self.inodes.get(ino) {
            None => return Err(format!("inode {ino} does not exist")),
            Some(n) if n.kind == FileType::Dir => {
                return Err(format!("inode {ino} is a directory"))
            }
            // A file without links is an O_TMPFILE being linked (the engine allows no
            // other); anything else without links is gone.
            Some(n) if n.nlink == 0 && n.kind != FileType::File => {
                return Err(format!("inode {ino} has no links"))
            }
            _ => {}
        }
        self.add_entry(*parent, name, *ino)?;
        let n = self.node_mut(*ino)?;
        n.nlink += 1;
        later(&mut n.ctime, *time);
        self.touch_dir(*parent, *time);
        Ok(())
    }

    fn unlink(&mut self, parent: &Ino, name: &[u8], time: &Time) -> Result<(), String> {
        let target = self.lookup(*parent, name).ok_or(format!(
            "no {:?} in directory {parent}",
            String::from_utf8_lossy(name)
        ))?;
        self.unlink_checks(target)?;
        self.dir_mut(*parent)?.remove(&dir_key(name));
        self.drop_link(*parent, target, *time)?;
        self.touch_dir(*parent, *time);
        Ok(())
    }

    fn rename(
        &mut self,
        sp: &Ino,
        sn: &[u8],
        dp: &Ino,
        dn: &[u8],
        exchange: &bool,
        time: &Time,
    ) -> Result<(), String> {
        if !valid_name(sn) || !valid_name(dn) {
            return Err("invalid name".into());
        }
        let src = self.lookup(*sp, sn).ok_or(format!(
            "no {:?} in directory {sp}",
            String::from_utf8_lossy(sn)
        ))?;
        let dst = self.lookup(*dp, dn);
        self.dir_mut(*dp)?;
        let src_dir = self.inodes[&src].kind == FileType::Dir;
        if src_dir && self.is_ancestor(src, *dp) {
            return Err("a directory cannot move into itself".into());
        }
        if *exchange {
            let dst = dst.ok_or("exchange needs both names")?;
            let dst_dir = self.inodes[&dst].kind == FileType::Dir;
            if dst_dir && self.is_ancestor(dst, *sp) {
                return Err("a directory cannot move into itself".into());
            }
            self.dir_mut(*sp)?.insert(dir_key(sn), dst);
            self.dir_mut(*dp)?.insert(dir_key(dn), src);
            if sp != dp {
                self.reparent(src, *sp, *dp)?;
                self.reparent(dst, *dp, *sp)?;
            }
            for i in [src, dst] {
                later(&mut self.node_mut(i)?.ctime, *time);
            }
        } else {
            if dst == Some(src) {
                return Err("rename onto a link of the same inode is not journaled".into());
            }
            if let Some(d) = dst {
                let dst_dir = self.inodes[&d].kind == FileType::Dir;
                if dst_dir != src_dir {
                    return Err("rename between a directory and a non-directory".into());
                }
                self.unlink_checks(d)?;
                self.dir_mut(*dp)?.remove(&dir_key(dn));
                self.drop_link(*dp, d, *time)?;
            }
            self.dir_mut(*sp)?.remove(&dir_key(sn));
            self.dir_mut(*dp)?.insert(dir_key(dn), src);
            if sp != dp {
                self.reparent(src, *sp, *dp)?;
            }
            later(&mut self.node_mut(src)?.ctime, *time);
        }
        self.touch_dir(*sp, *time);
        self.touch_dir(*dp, *time);
        Ok(())
    }

    fn set_xattr(
        &mut self,
        ino: &Ino,
        name: &[u8],
        value: &Option<Vec<u8>>,
        ctime: &Time,
    ) -> Result<(), String> {
        if !valid_xattr_name(name) {
            return Err(format!(
                "invalid extended attribute name {:?}",
                String::from_utf8_lossy(name)
            ));
        }
        let n = self.node_mut(*ino)?;
        match value {
            Some(v) => {
                if !xattr_fits(&n.xattrs, name, v.len()) {
                    return Err(format!("extended attributes of inode {ino} too large"));
                }
                n.xattrs.insert(name.to_vec(), v.clone());
            }
            None => {
                if n.xattrs.remove(name).is_none() {
                    return Err(format!(
                        "inode {ino} has no extended attribute {:?}",
                        String::from_utf8_lossy(name)
                    ));
                }
            }
        }
        later(&mut n.ctime, *ctime);
        Ok(())
    }

    /// `op` is a `LogOp::SetAttr` (too many fields for arguments).
    fn set_attr(&mut self, op: &LogOp) -> Result<(), String> {
        let LogOp::SetAttr {
            ino,
            mode,
            uid,
            gid,
            atime,
            mtime,
            ctime,
        } = op
        else {
            unreachable!("apply passes only SetAttr to set_attr");
        };
        let n = self.node_mut(*ino)?;
        if let Some(m) = mode {
            n.mode = m & 0o7777;
        }
        if let Some(u) = uid {
            n.uid = *u;
        }
        if let Some(g) = gid {
            n.gid = *g;
        }
        if let Some(a) = atime {
            n.atime = *a;
        }
        if let Some(m) = mtime {
            n.mtime = *m;
        }
        later(&mut n.ctime, *ctime);
        Ok(())
    }

    fn set_size(
        &mut self,
        ino: &Ino,
        size: &u64,
        time: &Time,
        free_past_end: &bool,
    ) -> Result<Freed, String> {
        let mut freed = Freed::default();
        let n = self.node_mut(*ino)?;
        let Body::File { extents } = &mut n.body else {
            return Err(format!("inode {ino} is not a regular file"));
        };
        // Only a shrinking truncate frees blocks: growing keeps preallocation past the end.
        if *free_past_end {
            freed.extents = punch(extents, size.div_ceil(BLOCK as u64), u64::MAX);
        }
        n.size = *size;
        later(&mut n.mtime, *time);
        later(&mut n.ctime, *time);
        Ok(freed)
    }

    fn map(
        &mut self,
        ino: &Ino,
        lblk: &u64,
        pblk: &u64,
        len: &u64,
        crcs: &[u32],
    ) -> Result<Freed, String> {
        let mut freed = Freed::default();
        if *len == 0 || (!crcs.is_empty() && crcs.len() as u64 != *len) {
            return Err(format!("map of {len} blocks with {} checksums", crcs.len()));
        }
        lblk.checked_add(*len)
            .ok_or("map past the largest file offset")?;
        pblk.checked_add(*len)
            .ok_or("map past the largest device block")?;
        let n = self.node_mut(*ino)?;
        let Body::File { extents } = &mut n.body else {
            return Err(format!("inode {ino} is not a regular file"));
        };
        // Mapping blocks to where they already are (an in-place rewrite on a
        // transactional device: new checksums) frees nothing.
        freed.extents = punch(extents, *lblk, lblk + len)
            .into_iter()
            .flat_map(|r| subtract(r, (*pblk, *len)))
            .collect();
        insert_extent(
            extents,
            *lblk,
            Extent {
                pblk: *pblk,
                len: *len,
                crcs: crcs.to_vec(),
            },
        );
        Ok(freed)
    }

    fn punch(&mut self, ino: &Ino, lblk: &u64, len: &u64, time: &Time) -> Result<Freed, String> {
        let mut freed = Freed::default();
        let end = lblk
            .checked_add(*len)
            .ok_or("punch past the largest file offset")?;
        let n = self.node_mut(*ino)?;
        let Body::File { extents } = &mut n.body else {
            return Err(format!("inode {ino} is not a regular file"));
        };
        freed.extents = punch(extents, *lblk, end);
        later(&mut n.mtime, *time);
        later(&mut n.ctime, *time);
        Ok(freed)
    }

    fn free(&mut self, ino: &Ino) -> Result<Freed, String> {
        let mut freed = Freed::default();
        let n = self
            .inodes
            .get(ino)
            .ok_or(format!("inode {ino} does not exist"))?;
        if n.nlink != 0 || *ino == ROOT {
            return Err(format!("inode {ino} still has {} links", n.nlink));
        }
        let n = self.inodes.remove(ino).expect("checked above");
        if let Body::File { extents } = n.body {
            freed.extents = extents.values().map(|e| (e.pblk, e.len)).collect();
        }
        freed.ino = Some(*ino);
        Ok(freed)
    }

    /// Names `ino` as `name` in directory `parent`, refused when the name is taken.
    fn add_entry(&mut self, parent: Ino, name: &[u8], ino: Ino) -> Result<(), String> {
        let entries = self.dir_mut(parent)?;
        if entries.contains_key(&dir_key(name)) {
            return Err(format!(
                "{:?} already exists in directory {parent}",
                String::from_utf8_lossy(name)
            ));
        }
        entries.insert(dir_key(name), ino);
        Ok(())
    }

    fn unlink_checks(&self, target: Ino) -> Result<(), String> {
        let n = self
            .inodes
            .get(&target)
            .ok_or(format!("entry points to missing inode {target}"))?;
        if let Body::Dir { entries, .. } = &n.body {
            if !entries.is_empty() {
                return Err(format!("directory {target} is not empty"));
            }
        }
        Ok(())
    }

    /// One link to `target` from `parent` is gone.
    fn drop_link(&mut self, parent: Ino, target: Ino, time: Time) -> Result<(), String> {
        let n = self.node_mut(target)?;
        if n.kind == FileType::Dir {
            n.nlink = 0;
            later(&mut n.ctime, time);
            let p = self.node_mut(parent)?;
            p.nlink = p.nlink.saturating_sub(1);
        } else {
            n.nlink = n
                .nlink
                .checked_sub(1)
                .ok_or(format!("inode {target} has no links to drop"))?;
            later(&mut n.ctime, time);
        }
        Ok(())
    }

    fn reparent(&mut self, ino: Ino, from: Ino, to: Ino) -> Result<(), String> {
        let n = self.node_mut(ino)?;
        if let Body::Dir { parent, .. } = &mut n.body {
            *parent = to;
            let f = self.node_mut(from)?;
            f.nlink = f
                .nlink
                .checked_sub(1)
                .ok_or(format!("directory {from} has no link to drop for {ino}"))?;
            self.node_mut(to)?.nlink += 1;
        }
        Ok(())
    }
}

/// Removes the mapping of file blocks [start, end); returns the device extents released.
pub fn punch(extents: &mut BTreeMap<u64, Extent>, start: u64, end: u64) -> Vec<(u64, u64)> {
    let mut freed = Vec::new();
    if start >= end {
        return freed;
    }
    // The extent that starts before `start` may reach into the range.
    let first = extents
        .range(..start)
        .next_back()
        .map(|(k, _)| *k)
        .unwrap_or(start);
    let keys: Vec<u64> = extents.range(first..end).map(|(k, _)| *k).collect();
    for k in keys {
        let e = extents.remove(&k).expect("key from the map");
        let (s, t) = (k, k + e.len);
        if t <= start || s >= end {
            extents.insert(k, e);
            continue;
        }
        let cut_s = s.max(start);
        let cut_t = t.min(end);
        freed.push((e.pblk + (cut_s - s), cut_t - cut_s));
        if s < cut_s {
            let n = cut_s - s;
            extents.insert(
                s,
                Extent {
                    pblk: e.pblk,
                    len: n,
                    crcs: slice_crcs(&e.crcs, 0, n),
                },
            );
        }
        if cut_t < t {
            let off = cut_t - s;
            extents.insert(
                cut_t,
                Extent {
                    pblk: e.pblk + off,
                    len: t - cut_t,
                    crcs: slice_crcs(&e.crcs, off, t - cut_t),
                },
            );
        }
    }
    freed
}

/// The parts of device range `r` outside `cut` (both as (start, length)).
fn subtract(r: (u64, u64), cut: (u64, u64)) -> Vec<(u64, u64)> {
    let (s, e) = (r.0, r.0 + r.1);
    let (cs, ce) = (cut.0, cut.0 + cut.1);
    if ce <= s || cs >= e {
        return vec![r];
    }
    let mut out = Vec::new();
    if s < cs {
        out.push((s, cs - s));
    }
    if ce < e {
        out.push((ce, e - ce));
    }
    out
}

fn slice_crcs(crcs: &[u32], off: u64, n: u64) -> Vec<u32> {
    if crcs.is_empty() {
        Vec::new()
    } else {
        crcs[off as usize..(off + n) as usize].to_vec()
    }
}

/// Inserts an extent into a gap, merging with a neighbour that continues it on the device
/// (so appends keep one extent).
fn insert_extent(extents: &mut BTreeMap<u64, Extent>, lblk: u64, e: Extent) {
    let mut e = e;
    let mut start = lblk;
    if let Some((&pk, p)) = extents.range(..lblk).next_back() {
        if pk + p.len == lblk && p.pblk + p.len == e.pblk && p.written() == e.written() {
            let mut p = extents.remove(&pk).expect("key from the map");
            p.len += e.len;
            p.crcs.extend_from_slice(&e.crcs);
            e = p;
            start = pk;
        }
    }
    if let Some(n) = extents.get(&(start + e.len)) {
        if e.pblk + e.len == n.pblk && n.written() == e.written() {
            let n = extents.remove(&(start + e.len)).expect("key from the map");
            e.len += n.len;
            e.crcs.extend_from_slice(&n.crcs);
        }
    }
    extents.insert(start, e);
}

/// The mapping of file block `lblk`: (device block, checksum if written).
pub fn map_block(extents: &BTreeMap<u64, Extent>, lblk: u64) -> Option<(u64, Option<u32>)> {
    let (k, e) = extents.range(..=lblk).next_back()?;
    let off = lblk - k;
    (off < e.len).then(|| (e.pblk + off, e.crcs.get(off as usize).copied()))
}
