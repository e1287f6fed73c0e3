//! An independent reference model of the namespace and file contents (no code shared with
//! the engine), the errors each call must return, and a canonical snapshot of a state.

use intactfs_types::{RenameFlags, XattrMode};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

pub type MIno = u64;
pub const MROOT: MIno = 1;

/// Chunk size of the model's sparse file contents (the model's own choice; any size works).
const CHUNK: u64 = 4096;

/// The largest file the model allows: 12 direct blocks and single-, double- and
/// triple-indirect trees of 512 pointers, 4 KiB blocks (the format-3 limit, stated here
/// independently of the engine's layout code).
pub const MAX_SIZE: u64 = (12 + 512 + 512 * 512 + 512 * 512 * 512 + 512 * 512 * 512 * 512) * 4096;

/// A file's content, sparse: files reach hundreds of GiB with a few chunks written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MData {
    size: u64,
    /// Chunk index → its bytes (absent: zeros).
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl MData {
    pub fn from_bytes(b: &[u8]) -> MData {
        let mut d = MData::default();
        d.write(0, b);
        d
    }

    pub fn len(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let c = pos / CHUNK;
            let cend = ((c + 1) * CHUNK).min(end);
            let chunk = self
                .chunks
                .entry(c)
                .or_insert_with(|| vec![0; CHUNK as usize]);
            chunk[(pos % CHUNK) as usize..(pos % CHUNK + cend - pos) as usize]
                .copy_from_slice(&data[(pos - off) as usize..(cend - off) as usize]);
            pos = cend;
        }
        self.size = self.size.max(end);
    }

    /// Truncates (bytes past `size` read as zeros if it grows again) or extends.
    pub fn resize(&mut self, size: u64) {
        if size < self.size {
            self.chunks.retain(|&c, _| c * CHUNK < size);
            if let Some(last) = self.chunks.get_mut(&(size / CHUNK)) {
                last[(size % CHUNK) as usize..].fill(0);
            }
        }
        self.size = size;
    }

    /// Hash of the size and the chunks that are not all zeros.
    pub fn digest(&self) -> u64 {
        sparse_hash(
            self.size,
            self.chunks
                .iter()
                .filter(|(_, b)| b.iter().any(|&x| x != 0))
                .map(|(&c, b)| (c, &b[..])),
        )
    }
}

/// The content hash the model and the engine's snapshot share: size, then each chunk
/// holding a nonzero byte, in order (a chunk of zeros and a hole are the same content).
pub fn sparse_hash<'a>(size: u64, chunks: impl Iterator<Item = (u64, &'a [u8])>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    size.hash(&mut h);
    for (c, b) in chunks {
        c.hash(&mut h);
        b.hash(&mut h);
    }
    h.finish()
}

/// The chunk size a snapshot of the engine must read in.
pub const SNAP_CHUNK: u64 = CHUNK;

/// What a non-directory that is not a regular file is (the model's own names, not the
/// engine's codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MSpecial {
    /// Its target is the node's `data`.
    Symlink,
    Fifo,
    Socket,
    Char(u32),
    Block(u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MNode {
    pub dir: bool,
    /// None for a regular file or a directory.
    pub special: Option<MSpecial>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub data: MData,
    pub entries: BTreeMap<Vec<u8>, MIno>,
    pub parent: MIno,
    /// Extended attributes: name → value.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// One successful mutating call, with inode numbers resolved when it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MOp {
    Create {
        parent: MIno,
        name: Vec<u8>,
        ino: MIno,
        dir: bool,
        mode: u32,
        /// A symbolic link (with its target) or a special file.
        special: Option<(MSpecial, Vec<u8>)>,
    },
    /// `keep`: the target was an open file, which stays (an orphan) until its last release.
    Remove {
        parent: MIno,
        name: Vec<u8>,
        keep: bool,
    },
    /// `keep`: a replaced target was an open file (it stays, an orphan).
    Rename {
        sp: MIno,
        sn: Vec<u8>,
        dp: MIno,
        dn: Vec<u8>,
        keep: bool,
    },
    /// RENAME_EXCHANGE: the two entries swap their inodes.
    Exchange {
        sp: MIno,
        sn: Vec<u8>,
        dp: MIno,
        dn: Vec<u8>,
    },
    /// A new name for a file (hard link).
    Link {
        ino: MIno,
        parent: MIno,
        name: Vec<u8>,
    },
    Write {
        ino: MIno,
        off: u64,
        data: Vec<u8>,
    },
    SetAttr {
        ino: MIno,
        mode: Option<u32>,
        uid: Option<u32>,
        size: Option<u64>,
    },
    /// setxattr (`value` Some) or removexattr (None).
    SetXattr {
        ino: MIno,
        name: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    /// fallocate of [off, off+len).
    Fallocate {
        ino: MIno,
        off: u64,
        len: u64,
        mode: MFalloc,
    },
}

/// What a fallocate asks for (the model's own names for the Linux modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MFalloc {
    /// Mode 0: the range reads as before (holes as zeros), the size reaches its end.
    Allocate,
    /// FALLOC_FL_KEEP_SIZE: nothing a read sees changes.
    KeepSize,
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: the range reads as zeros, the size stays.
    Punch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MState {
    pub nodes: BTreeMap<MIno, MNode>,
}

impl Default for MState {
    fn default() -> Self {
        MState {
            nodes: BTreeMap::from([(
                MROOT,
                MNode {
                    dir: true,
                    special: None,
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                    data: MData::default(),
                    entries: BTreeMap::new(),
                    parent: MROOT,
                    xattrs: BTreeMap::new(),
                },
            )]),
        }
    }
}

/// A file or directory as a snapshot shows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SNode {
    pub ino: u64,
    pub dir: bool,
    pub special: Option<MSpecial>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A file's names; a directory's 2 + its subdirectories.
    pub nlink: u32,
    pub size: u64,
    /// Content hash (files; a symbolic link's target).
    pub content: u64,
    /// Hash of the extended attributes ([`xattr_digest`]).
    pub xattrs: u64,
}

/// The hash of a set of extended attributes the model and the engine's snapshot share.
pub fn xattr_digest(x: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// Path → node, for every object reachable from the root (times are not compared: the
/// engine stamps them, the model does not predict them).
pub type Snap = BTreeMap<Vec<u8>, SNode>;

pub fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    b.hash(&mut h);
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

fn valid_name(n: &[u8]) -> Result<(), i32> {
    if n.len() > 255 {
        return Err(36);
    }
    if n.is_empty() || n == b"." || n == b".." || n.contains(&b'/') || n.contains(&0) {
        return Err(22);
    }
    Ok(())
}

impl MState {
    pub fn get(&self, ino: MIno) -> Option<&MNode> {
        self.nodes.get(&ino)
    }

    fn dir(&self, ino: MIno) -> Result<&MNode, i32> {
        match self.nodes.get(&ino) {
            None => Err(2),
            Some(n) if !n.dir => Err(20),
            Some(n) => Ok(n),
        }
    }

    /// The errno `create`/`mkdir` must fail with (None: success), `busy` saying which
    /// inodes another transaction owns.
    pub fn check_create(
        &self,
        parent: MIno,
        name: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        valid_name(name)?;
        let p = self.dir(parent)?;
        if busy(parent) {
            return Err(16);
        }
        if p.entries.contains_key(name) {
            return Err(17);
        }
        Ok(())
    }

    /// For unlink (`dir` false) and rmdir: the target on success.
    pub fn check_remove(
        &self,
        parent: MIno,
        name: &[u8],
        dir: bool,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<MIno, i32> {
        let p = self.dir(parent)?;
        if name.len() > 255 {
            return Err(36);
        }
        if busy(parent) {
            return Err(16);
        }
        let &t = p.entries.get(name).ok_or(2)?;
        let tn = &self.nodes[&t];
        match (dir, tn.dir) {
            (false, true) => return Err(21),
            (true, false) => return Err(20),
            _ => {}
        }
        if busy(t) {
            return Err(16);
        }
        if dir && !tn.entries.is_empty() {
            return Err(39);
        }
        Ok(t)
    }

    /// For rename: (source, replaced target) on success; Ok((src, Some(src))) is the no-op.
    pub fn check_rename(
        &self,
        sp: MIno,
        sn: &[u8],
        dp: MIno,
        dn: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, Option<MIno>), i32> {
        let (src, d) = self.rename_source(sp, sn, dp, dn, busy)?;
        let src_dir = self.nodes[&src].dir;
        if src_dir {
            let mut x = dp;
            loop {
                if x == src {
                    return Err(22);
                }
                if x == MROOT {
                    break;
                }
                x = self.nodes[&x].parent;
            }
        }
        match d.entries.get(dn) {
            None => Ok((src, None)),
            Some(&t) if t == src => Ok((src, Some(src))),
            Some(&t) => {
                if busy(t) {
                    return Err(16);
                }
                let tn = &self.nodes[&t];
                match (src_dir, tn.dir) {
                    (true, false) => Err(20),
                    (false, true) => Err(21),
                    (true, true) if !tn.entries.is_empty() => Err(39),
                    _ => Ok((src, Some(t))),
                }
            }
        }
    }

    /// A write of `len` bytes at `off`: EFBIG past [`MAX_SIZE`] (an empty write never).
    pub fn check_write(
        &self,
        ino: MIno,
        (off, len): (u64, u64),
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            None => Err(2),
            Some(n) if n.dir => Err(21),
            Some(n) if n.special.is_some() => Err(22),
            _ if busy(ino) => Err(16),
            _ if len > 0 && off + len > MAX_SIZE => Err(27),
            _ => Ok(()),
        }
    }

    /// symlink (a target of 1 to 4095 bytes) and mknod (not a directory or a link) start
    /// with these, then the checks of a create.
    pub fn check_special(
        &self,
        parent: MIno,
        name: &[u8],
        special: (MSpecial, &[u8]),
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        if special.0 == MSpecial::Symlink && !(1..=4095).contains(&special.1.len()) {
            return Err(22);
        }
        self.check_create(parent, name, busy)
    }

    pub fn check_setattr(
        &self,
        ino: MIno,
        size: Option<u64>,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            None => Err(2),
            _ if busy(ino) => Err(16),
            Some(n) if size.is_some() && n.dir => Err(21),
            Some(n) if size.is_some() && n.special.is_some() => Err(22),
            _ if size.is_some_and(|s| s > MAX_SIZE) => Err(27),
            _ => Ok(()),
        }
    }

    /// fallocate: ENOENT, EISDIR, EINVAL (not a regular file, or length 0), EBUSY, then
    /// EFBIG for an allocation ending past the largest file (a punch there is clipped).
    /// ENOSPC is the engine's to decide.
    pub fn check_fallocate(
        &self,
        ino: MIno,
        (off, len): (u64, u64),
        mode: MFalloc,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            None => Err(2),
            Some(n) if n.dir => Err(21),
            Some(n) if n.special.is_some() => Err(22),
            _ if len == 0 => Err(22),
            _ if busy(ino) => Err(16),
            _ if mode != MFalloc::Punch && off + len > MAX_SIZE => Err(27),
            _ => Ok(()),
        }
    }

    /// setxattr (`value` Some, with its create/replace flags) or removexattr: ENOENT,
    /// EBUSY, then EEXIST / ENODATA by the flags. ENOSPC (a set larger than the engine's
    /// block) is the engine's to decide.
    pub fn check_xattr(
        &self,
        ino: MIno,
        name: &[u8],
        set: Option<XattrMode>,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        let Some(n) = self.nodes.get(&ino) else {
            return Err(2);
        };
        let exists = n.xattrs.contains_key(name);
        match set {
            _ if busy(ino) => Err(16),
            Some(XattrMode::Create | XattrMode::Both) if exists => Err(17),
            Some(XattrMode::Replace | XattrMode::Both) | None if !exists => Err(61),
            _ => Ok(()),
        }
    }

    pub fn apply(&mut self, op: &MOp) {
        match op {
            MOp::Create {
                parent,
                name,
                ino,
                dir,
                mode,
                special,
            } => {
                self.nodes.insert(
                    *ino,
                    MNode {
                        dir: *dir,
                        special: special.as_ref().map(|s| s.0),
                        mode: *mode & 0o7777,
                        uid: 0,
                        gid: 0,
                        data: MData::from_bytes(special.as_ref().map_or(&[][..], |s| &s.1[..])),
                        entries: BTreeMap::new(),
                        parent: *parent,
                        xattrs: BTreeMap::new(),
                    },
                );
                self.nodes
                    .get_mut(parent)
                    .expect("checked")
                    .entries
                    .insert(name.clone(), *ino);
            }
            MOp::Remove { parent, name, keep } => {
                let t = self
                    .nodes
                    .get_mut(parent)
                    .expect("checked")
                    .entries
                    .remove(name)
                    .expect("checked");
                self.drop_if_unnamed(t, *keep);
            }
            MOp::Rename {
                sp,
                sn,
                dp,
                dn,
                keep,
            } => {
                let src = self
                    .nodes
                    .get_mut(sp)
                    .expect("checked")
                    .entries
                    .remove(sn)
                    .expect("checked");
                if let Some(old) = self
                    .nodes
                    .get_mut(dp)
                    .expect("checked")
                    .entries
                    .insert(dn.clone(), src)
                {
                    self.drop_if_unnamed(old, *keep);
                }
                self.nodes.get_mut(&src).expect("exists").parent = *dp;
            }
            MOp::Exchange { sp, sn, dp, dn } => {
                let a = self.nodes[sp].entries[sn];
                let b = self.nodes[dp].entries[dn];
                self.nodes
                    .get_mut(sp)
                    .expect("checked")
                    .entries
                    .insert(sn.clone(), b);
                self.nodes
                    .get_mut(dp)
                    .expect("checked")
                    .entries
                    .insert(dn.clone(), a);
                self.nodes.get_mut(&a).expect("exists").parent = *dp;
                self.nodes.get_mut(&b).expect("exists").parent = *sp;
            }
            MOp::Link { ino, parent, name } => {
                self.nodes
                    .get_mut(parent)
                    .expect("checked")
                    .entries
                    .insert(name.clone(), *ino);
            }
            MOp::Write { data, .. } if data.is_empty() => {}
            MOp::Write { ino, off, data } => {
                let n = self.nodes.get_mut(ino).expect("checked");
                n.data.write(*off, data);
            }
            MOp::SetAttr {
                ino,
                mode,
                uid,
                size,
            } => {
                let n = self.nodes.get_mut(ino).expect("checked");
                if let Some(m) = mode {
                    n.mode = m & 0o7777;
                }
                if let Some(u) = uid {
                    n.uid = *u;
                }
                if let Some(s) = size {
                    n.data.resize(*s);
                }
            }
            MOp::Fallocate {
                ino,
                off,
                len,
                mode,
            } => {
                let d = &mut self.nodes.get_mut(ino).expect("checked").data;
                let end = off + len;
                match mode {
                    MFalloc::Allocate if end > d.len() => d.resize(end),
                    MFalloc::Allocate | MFalloc::KeepSize => {}
                    MFalloc::Punch => {
                        let z = end.min(d.len());
                        if *off < z {
                            d.write(*off, &vec![0u8; (z - off) as usize]);
                        }
                    }
                }
            }
            MOp::SetXattr { ino, name, value } => {
                let n = self.nodes.get_mut(ino).expect("checked");
                match value {
                    Some(v) => n.xattrs.insert(name.clone(), v.clone()),
                    None => n.xattrs.remove(name),
                };
            }
        }
    }

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
                let mut p = path.clone();
                p.push(b'/');
                p.extend_from_slice(name);
                todo.push((p, c));
            }
        }
        out
    }

    /// How many entries name `ino`.
    fn names(&self, ino: MIno) -> u32 {
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

    /// After a name of `ino` went: it goes too when no name is left and it was not open.
    fn drop_if_unnamed(&mut self, ino: MIno, open: bool) {
        if !open && self.names(ino) == 0 {
            self.nodes.remove(&ino);
        }
    }

    /// The checks every rename starts with: the source, and the target directory.
    fn rename_source(
        &self,
        sp: MIno,
        sn: &[u8],
        dp: MIno,
        dn: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, &MNode), i32> {
        valid_name(sn)?;
        valid_name(dn)?;
        let s = self.dir(sp)?;
        let d = self.dir(dp)?;
        if busy(sp) || busy(dp) {
            return Err(16);
        }
        let &src = s.entries.get(sn).ok_or(2)?;
        if busy(src) {
            return Err(16);
        }
        Ok((src, d))
    }

    /// `x` is `dir` or below it.
    fn inside(&self, mut x: MIno, dir: MIno) -> bool {
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

    /// renameat2 with `flags` (1 NOREPLACE, 2 EXCHANGE): (source, other) on success as
    /// [`Self::check_rename`]; for an exchange, other is the entry swapped with.
    pub fn check_rename_flags(
        &self,
        (sp, sn, dp, dn): (MIno, &[u8], MIno, &[u8]),
        flags: RenameFlags,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, Option<MIno>), i32> {
        if flags.noreplace && flags.exchange {
            return Err(22);
        }
        if flags == RenameFlags::NONE {
            return self.check_rename(sp, sn, dp, dn, busy);
        }
        let (src, d) = self.rename_source(sp, sn, dp, dn, busy)?;
        let dst = d.entries.get(dn).copied();
        if flags.noreplace {
            return match dst {
                Some(_) => Err(17),
                None => self.check_rename(sp, sn, dp, dn, busy),
            };
        }
        let dst = dst.ok_or(2)?;
        if dst == src {
            return Ok((src, Some(src)));
        }
        if busy(dst) {
            return Err(16);
        }
        if self.nodes[&src].dir && self.inside(dp, src)
            || self.nodes[&dst].dir && self.inside(sp, dst)
        {
            return Err(22);
        }
        Ok((src, Some(dst)))
    }

    /// The errno `link` must fail with (None: success).
    pub fn check_link(
        &self,
        ino: MIno,
        parent: MIno,
        name: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        valid_name(name)?;
        let p = self.dir(parent)?;
        match self.nodes.get(&ino) {
            None => return Err(2),
            Some(n) if n.dir => return Err(1),
            Some(_) if self.names(ino) == 0 => return Err(2),
            _ => {}
        }
        if busy(parent) || busy(ino) {
            return Err(16);
        }
        if p.entries.contains_key(name) {
            return Err(17);
        }
        Ok(())
    }

    /// Every inode some directory names.
    fn named(&self) -> std::collections::BTreeSet<MIno> {
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

    pub fn files(&self) -> Vec<MIno> {
        self.nodes
            .iter()
            .filter(|(_, n)| !n.dir)
            .map(|(&i, _)| i)
            .collect()
    }
    /// The directories that may take entries: the root and the named ones (not those
    /// removed while open; the engine's ENOENT for them is tests/engine.rs's to check).
    pub fn dirs(&self) -> Vec<MIno> {
        let named = self.named();
        self.nodes
            .iter()
            .filter(|(i, n)| n.dir && (**i == MROOT || named.contains(i)))
            .map(|(&i, _)| i)
            .collect()
    }
}
