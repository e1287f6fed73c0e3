//! Names: lookup, forget, creating (files, directories, special files, symlinks, links),
//! removing, renaming, and listing directories.

use super::attr::kind;
use super::{errno, Locked, Served, Server, Who};
use fuser::{Errno, FileType as FType, Generation, RenameFlags as FRename};
use intactfs_types::{Attr, Engine, FileType, Ino, MknodKind, Owner, RenameFlags};

pub(crate) const S_IFMT: u32 = 0o170000;
pub(crate) const S_ISGID: u32 = 0o2000;

/// A listed entry: inode, the offset after it, type, name.
pub(crate) type Listed = (Ino, u64, FType, Vec<u8>);

/// What a new inode is, from mknod's mode (None: not a kind mknod makes).
pub(crate) fn node_kind(mode: u32) -> Option<FileType> {
    Some(match mode & S_IFMT {
        0o100000 | 0 => FileType::File,
        0o010000 => FileType::Fifo,
        0o140000 => FileType::Socket,
        0o020000 => FileType::CharDev,
        0o060000 => FileType::BlockDev,
        _ => return None,
    })
}

impl<E: Served> Server<E> {
    pub(crate) fn lookup_call(
        &self,
        parent: Ino,
        name: &[u8],
    ) -> Result<(Attr, Generation), Errno> {
        {
            let st = self.read()?;
            let a = st.fs_ref()?.lookup(parent, name).map_err(|e| errno(&e))?;
            if st.refs.remember_known(a.ino) {
                return Ok((a, st.refs.generation(a.ino)));
            }
        }
        // The kernel's first reference: the engine keeps the inode open (looked up again:
        // the name may have changed between the locks).
        let mut st = self.lock()?;
        let a = st.fs_ref()?.lookup(parent, name).map_err(|e| errno(&e))?;
        st.remember(a.ino);
        Ok((a, st.refs.generation(a.ino)))
    }

    pub(crate) fn forget_call(&self, ino: Ino, n: u64) {
        if let Ok(mut st) = self.lock() {
            st.forget(ino, n);
        }
    }

    /// The owner of a new entry in `parent`: the caller, with the directory's group when
    /// it has the set-group-id bit (as Linux file systems do); and whether it has.
    pub(crate) fn owner(
        st: &Locked<'_, E>,
        who: &Who,
        parent: Ino,
    ) -> Result<(Owner, bool), Errno> {
        let p = st.fs_ref()?.getattr(parent).map_err(|e| errno(&e))?;
        let sgid = p.mode & S_ISGID != 0;
        let gid = if sgid { p.gid } else { who.gid };
        Ok((Owner { uid: who.uid, gid }, sgid))
    }

    /// Creates `name` in `parent`: a directory, regular file or special file.
    pub(crate) fn make(
        &self,
        st: &mut Locked<'_, E>,
        who: &Who,
        (parent, name): (Ino, &[u8]),
        k: FileType,
        (mode, rdev): (u32, u32),
    ) -> Result<(Attr, Generation), Errno> {
        let c = E::ctx(st, who, None, &[parent])?;
        let (owner, sgid) = Self::owner(st, who, parent)?;
        let mut mode = mode & 0o7777;
        if k == FileType::Dir && sgid {
            mode |= S_ISGID;
        }
        let fs = st.fs()?;
        let a = match k {
            FileType::Dir => fs.mkdir(c, parent, name, mode, owner),
            FileType::File => fs.create(c, parent, name, mode, owner),
            _ => MknodKind::new(k, rdev).and_then(|k| fs.mknod(c, parent, name, k, mode, owner)),
        }
        .map_err(|e| errno(&e))?;
        E::changed(st, c, &[a.ino, parent], &[(parent, name)]);
        let g = st.remember_created(a.ino);
        Ok((a, g))
    }

    pub(crate) fn make_call(
        &self,
        who: &Who,
        at: (Ino, &[u8]),
        k: FileType,
        mode_rdev: (u32, u32),
    ) -> Result<(Attr, Generation), Errno> {
        let mut st = self.lock()?;
        self.make(&mut st, who, at, k, mode_rdev)
    }

    pub(crate) fn symlink_call(
        &self,
        who: &Who,
        parent: Ino,
        name: &[u8],
        target: &[u8],
    ) -> Result<(Attr, Generation), Errno> {
        let (mut st, c) = self.begin(who, &[parent])?;
        let (owner, _) = Self::owner(&st, who, parent)?;
        let a = st
            .fs()?
            .symlink(c, parent, name, target, owner)
            .map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[a.ino, parent], &[(parent, name)]);
        let g = st.remember_created(a.ino);
        Ok((a, g))
    }

    pub(crate) fn link_call(
        &self,
        who: &Who,
        ino: Ino,
        parent: Ino,
        name: &[u8],
    ) -> Result<(Attr, Generation), Errno> {
        let (mut st, c) = self.begin(who, &[parent, ino])?;
        let a = st.fs()?.link(c, ino, parent, name).map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[a.ino, parent], &[(parent, name)]);
        st.remember(a.ino);
        Ok((a, st.refs.generation(a.ino)))
    }

    /// unlink (`dir` false) or rmdir.
    pub(crate) fn remove_call(
        &self,
        who: &Who,
        parent: Ino,
        name: &[u8],
        dir: bool,
    ) -> Result<(), Errno> {
        let mut st = self.lock()?;
        let target = st.fs_ref()?.lookup(parent, name).map_or(0, |a| a.ino);
        let c = E::ctx(&st, who, None, &[parent, target])?;
        let fs = st.fs()?;
        if dir {
            fs.rmdir(c, parent, name)
        } else {
            fs.unlink(c, parent, name)
        }
        .map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[parent, target], &[(parent, name)]);
        Ok(())
    }

    pub(crate) fn rename_call(
        &self,
        who: &Who,
        (sp, sn): (Ino, &[u8]),
        (dp, dn): (Ino, &[u8]),
        flags: FRename,
    ) -> Result<(), Errno> {
        if flags.contains(FRename::RENAME_WHITEOUT) {
            return Err(Errno::EINVAL);
        }
        let f = RenameFlags {
            noreplace: flags.contains(FRename::RENAME_NOREPLACE),
            exchange: flags.contains(FRename::RENAME_EXCHANGE),
        };
        let mut st = self.lock()?;
        let fs = st.fs_ref()?;
        let src = fs.lookup(sp, sn).map_or(0, |a| a.ino);
        let dst = fs.lookup(dp, dn).map_or(0, |a| a.ino);
        let objs = [sp, dp, src, dst];
        let c = E::ctx(&st, who, None, &objs)?;
        st.fs()?
            .rename(c, sp, sn, dp, dn, f)
            .map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &objs, &[(sp, sn), (dp, dn)]);
        Ok(())
    }

    /// A directory's entries from `offset` on, with "." and ".." first.
    pub(crate) fn listing(st: &E, ino: Ino, offset: u64) -> Result<Vec<Listed>, Errno> {
        let parent = st.parent(ino).map_err(|e| errno(&e))?;
        dir_entries(st, ino, parent, offset)
    }
}

/// A directory's entries from `offset` on (at most 512 of the engine's): (inode, the offset
/// after it, type, name). Offsets: 1 after ".", 2 after "..", and an entry's cookie + 2
/// after it (the block engine's name hash, the pmem engine's slot + 1: stable while the
/// entry exists, so a listing that spans calls skips and repeats nothing).
pub(crate) fn dir_entries<E: Engine>(
    fs: &E,
    ino: Ino,
    parent: Ino,
    offset: u64,
) -> Result<Vec<Listed>, Errno> {
    let me = fs.getattr(ino).map_err(|e| errno(&e))?;
    if me.kind != FileType::Dir {
        return Err(Errno::ENOTDIR);
    }
    let mut out = Vec::new();
    if offset == 0 {
        out.push((ino, 1, FType::Directory, b".".to_vec()));
    }
    if offset <= 1 {
        out.push((parent, 2, FType::Directory, b"..".to_vec()));
    }
    let cookie = offset.saturating_sub(2);
    for e in fs.readdir(ino, cookie, 512).map_err(|e| errno(&e))? {
        assert!(
            e.cookie > cookie,
            "readdir: cookie {} after {cookie}",
            e.cookie
        );
        out.push((e.ino, e.cookie + 2, kind(e.kind), e.name));
    }
    Ok(out)
}
