//! The errno each call must fail with (Ok: it succeeds), in the order the engines check.
//!
//! `busy` says which inodes another transaction owns (EBUSY: the pmem engine's ownership
//! rule); a simulation without transactions passes [`free`]. ENOSPC is the engine's to
//! decide: the model has no space limit.

use crate::errno::*;
use crate::{MFalloc, MIno, MNode, MOp, MSpecial, MState};
use intactfs_types::{RenameFlags, XattrMode};

/// A rename's two entries: (source directory, name, target directory, name).
pub type Names<'a> = (MIno, &'a [u8], MIno, &'a [u8]);

/// No inode is owned by another transaction.
pub fn free(_: MIno) -> bool {
    false
}

fn valid_name(n: &[u8]) -> Result<(), i32> {
    if n.len() > 255 {
        return Err(ENAMETOOLONG);
    }
    if n.is_empty() || n == b"." || n == b".." || n.contains(&b'/') || n.contains(&0) {
        return Err(EINVAL);
    }
    Ok(())
}

/// The end of [off, off+len): EFBIG past the largest offset.
fn end(off: u64, len: u64) -> Result<u64, i32> {
    off.checked_add(len).ok_or(EFBIG)
}

impl MState {
    fn dir(&self, ino: MIno) -> Result<&MNode, i32> {
        match self.nodes.get(&ino) {
            None => Err(ENOENT),
            Some(n) if !n.dir => Err(ENOTDIR),
            Some(n) => Ok(n),
        }
    }

    /// The checks of `op` as its call makes them (a set of an extended attribute without
    /// flags), then the change: what a simulation that generates calls before knowing
    /// whether they are valid uses.
    pub fn check_op(&self, op: &MOp, busy: &dyn Fn(MIno) -> bool) -> Result<(), i32> {
        match op {
            MOp::Create {
                parent,
                name,
                special: Some((kind, target)),
                ..
            } => self.check_special(*parent, name, (*kind, target), busy),
            MOp::Create { parent, name, .. } => self.check_create(*parent, name, busy),
            MOp::Remove {
                parent, name, dir, ..
            } => self.check_remove(*parent, name, *dir, busy).map(|_| ()),
            MOp::Rename {
                from, to, flags, ..
            } => {
                let names = (from.0, &from.1[..], to.0, &to.1[..]);
                self.check_rename_flags(names, *flags, busy).map(|_| ())
            }
            MOp::Link { ino, parent, name } => self.check_link(*ino, *parent, name, busy),
            MOp::Write { ino, off, data } => {
                self.check_write(*ino, (*off, data.len() as u64), busy)
            }
            MOp::SetAttr { ino, size, .. } => self.check_setattr(*ino, *size, busy),
            MOp::SetXattr { ino, name, value } => {
                let set = value.as_ref().map(|_| XattrMode::Any);
                self.check_xattr(*ino, name, set, busy)
            }
            MOp::Fallocate {
                ino,
                off,
                len,
                mode,
            } => self.check_fallocate(*ino, (*off, *len), *mode, busy),
        }
    }

    /// Makes `op` if its checks allow it; else its errno, the state unchanged.
    pub fn try_apply(&mut self, op: &MOp) -> Result<(), i32> {
        self.check_op(op, &free)?;
        self.apply(op);
        Ok(())
    }

    /// create and mkdir.
    pub fn check_create(
        &self,
        parent: MIno,
        name: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        valid_name(name)?;
        let p = self.dir(parent)?;
        if busy(parent) {
            return Err(EBUSY);
        }
        if p.entries.contains_key(name) {
            return Err(EEXIST);
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
            return Err(ENAMETOOLONG);
        }
        if busy(parent) {
            return Err(EBUSY);
        }
        let &t = p.entries.get(name).ok_or(ENOENT)?;
        let tn = &self.nodes[&t];
        match (dir, tn.dir) {
            (false, true) => return Err(EISDIR),
            (true, false) => return Err(ENOTDIR),
            _ => {}
        }
        if busy(t) {
            return Err(EBUSY);
        }
        if dir && !tn.entries.is_empty() {
            return Err(ENOTEMPTY);
        }
        Ok(t)
    }

    /// For rename: (source, replaced target) on success; Ok((src, Some(src))) is the no-op.
    pub fn check_rename(
        &self,
        names: Names,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, Option<MIno>), i32> {
        let (src, d) = self.rename_source(names, busy)?;
        let (_, _, dp, dn) = names;
        let src_dir = self.nodes[&src].dir;
        if src_dir && self.inside(dp, src) {
            return Err(EINVAL);
        }
        match d.entries.get(dn) {
            None => Ok((src, None)),
            Some(&t) if t == src => Ok((src, Some(src))),
            Some(&t) => {
                if busy(t) {
                    return Err(EBUSY);
                }
                let tn = &self.nodes[&t];
                match (src_dir, tn.dir) {
                    (true, false) => Err(ENOTDIR),
                    (false, true) => Err(EISDIR),
                    (true, true) if !tn.entries.is_empty() => Err(ENOTEMPTY),
                    _ => Ok((src, Some(t))),
                }
            }
        }
    }

    /// The checks every rename starts with: the source, and the target directory.
    fn rename_source(
        &self,
        (sp, sn, dp, dn): Names,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, &MNode), i32> {
        valid_name(sn)?;
        valid_name(dn)?;
        let s = self.dir(sp)?;
        let d = self.dir(dp)?;
        if busy(sp) || busy(dp) {
            return Err(EBUSY);
        }
        let &src = s.entries.get(sn).ok_or(ENOENT)?;
        if busy(src) {
            return Err(EBUSY);
        }
        Ok((src, d))
    }

    /// renameat2 with `flags`: (source, other) on success as [`Self::check_rename`]; for
    /// an exchange, other is the entry swapped with.
    pub fn check_rename_flags(
        &self,
        names: Names,
        flags: RenameFlags,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(MIno, Option<MIno>), i32> {
        if flags.noreplace && flags.exchange {
            return Err(EINVAL);
        }
        if flags == RenameFlags::NONE {
            return self.check_rename(names, busy);
        }
        let (src, d) = self.rename_source(names, busy)?;
        let (sp, _, dp, dn) = names;
        let dst = d.entries.get(dn).copied();
        if flags.noreplace {
            return match dst {
                Some(_) => Err(EEXIST),
                None => self.check_rename(names, busy),
            };
        }
        let dst = dst.ok_or(ENOENT)?;
        if dst == src {
            return Ok((src, Some(src)));
        }
        if busy(dst) {
            return Err(EBUSY);
        }
        if self.nodes[&src].dir && self.inside(dp, src)
            || self.nodes[&dst].dir && self.inside(sp, dst)
        {
            return Err(EINVAL);
        }
        Ok((src, Some(dst)))
    }

    /// link(2).
    pub fn check_link(
        &self,
        ino: MIno,
        parent: MIno,
        name: &[u8],
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        // The name and the directory first, then the inode, then the checks of a create.
        valid_name(name)?;
        self.dir(parent)?;
        match self.nodes.get(&ino) {
            None => return Err(ENOENT),
            Some(n) if n.dir => return Err(EPERM),
            Some(_) if self.names(ino) == 0 => return Err(ENOENT),
            _ if busy(ino) => return Err(EBUSY),
            _ => {}
        }
        self.check_create(parent, name, busy)
    }

    /// A write of `len` bytes at `off`: EFBIG past the largest file (an empty write never).
    pub fn check_write(
        &self,
        ino: MIno,
        (off, len): (u64, u64),
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        self.check_data(ino, busy)?;
        if len > 0 && end(off, len)? > self.max_size {
            return Err(EFBIG);
        }
        Ok(())
    }

    /// A call on a regular file's data: ENOENT, EISDIR, EINVAL (not a regular file), EBUSY.
    fn check_data(&self, ino: MIno, busy: &dyn Fn(MIno) -> bool) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            None => Err(ENOENT),
            Some(n) if n.dir => Err(EISDIR),
            Some(n) if n.special.is_some() => Err(EINVAL),
            _ if busy(ino) => Err(EBUSY),
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
            return Err(EINVAL);
        }
        self.check_create(parent, name, busy)
    }

    /// setattr; with a size, a truncate or an extension of a regular file.
    pub fn check_setattr(
        &self,
        ino: MIno,
        size: Option<u64>,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            None => Err(ENOENT),
            _ if busy(ino) => Err(EBUSY),
            Some(n) if size.is_some() && n.dir => Err(EISDIR),
            Some(n) if size.is_some() && n.special.is_some() => Err(EINVAL),
            _ if size.is_some_and(|s| s > self.max_size) => Err(EFBIG),
            _ => Ok(()),
        }
    }

    /// fallocate: ENOENT, EISDIR, EINVAL (not a regular file, or length 0), EBUSY, then
    /// EFBIG for an allocation ending past the largest file (a punch there is clipped) or
    /// a range past the largest offset.
    pub fn check_fallocate(
        &self,
        ino: MIno,
        (off, len): (u64, u64),
        mode: MFalloc,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        match self.nodes.get(&ino) {
            Some(n) if n.regular() && len == 0 => return Err(EINVAL),
            _ => self.check_data(ino, busy)?,
        }
        if end(off, len)? > self.max_size && mode != MFalloc::Punch {
            return Err(EFBIG);
        }
        Ok(())
    }

    /// setxattr (`set`: Some, with its create/replace flags) or removexattr: ENOENT,
    /// EBUSY, then EEXIST / ENODATA by the flags. ENOSPC (a set larger than the engine's
    /// room) is the engine's to decide.
    pub fn check_xattr(
        &self,
        ino: MIno,
        name: &[u8],
        set: Option<XattrMode>,
        busy: &dyn Fn(MIno) -> bool,
    ) -> Result<(), i32> {
        let Some(n) = self.nodes.get(&ino) else {
            return Err(ENOENT);
        };
        let exists = n.xattrs.contains_key(name);
        match set {
            _ if busy(ino) => Err(EBUSY),
            Some(XattrMode::Create | XattrMode::Both) if exists => Err(EEXIST),
            Some(XattrMode::Replace | XattrMode::Both) | None if !exists => Err(ENODATA),
            _ => Ok(()),
        }
    }
}
