//! The namespace calls of the block engine ([`Namespace`]): lookups, listings, and the
//! changes of names, each logged in the caller's stream.

use super::*;
use intactfs_types::MknodKind;

fn kind_of(k: &NewKind) -> FileType {
    match k {
        NewKind::File => FileType::File,
        NewKind::Dir => FileType::Dir,
        NewKind::Symlink(_) => FileType::Symlink,
        NewKind::Fifo => FileType::Fifo,
        NewKind::Socket => FileType::Socket,
        NewKind::CharDev(_) => FileType::CharDev,
        NewKind::BlockDev(_) => FileType::BlockDev,
    }
}

impl<D: BlockDevice> Fs<D> {
    fn alloc_ino(&mut self) -> Ino {
        self.free_inos.pop_first().unwrap_or(self.live.next_ino)
    }

    /// Makes `name` in `parent`: a file, directory, symbolic link or special file.
    fn create_node(
        &mut self,
        s: StreamId,
        parent: Ino,
        name: &[u8],
        kind: NewKind,
        mode: u32,
        owner: Owner,
    ) -> Result<Attr> {
        self.writable()?;
        self.dir(parent)?;
        intactfs_types::check_name(name)?;
        if self.live.lookup(parent, name).is_some() {
            return Err(FsError::Exists(String::new()));
        }
        if let NewKind::Symlink(t) = &kind {
            if t.is_empty() || t.len() > SYMLINK_MAX {
                return Err(FsError::Invalid(format!(
                    "symlink target of {} bytes",
                    t.len()
                )));
            }
        }
        if kind_of(&kind) == FileType::Dir && self.node(parent)?.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks);
        }
        let target = match &kind {
            NewKind::Symlink(t) => t.len(),
            _ => 0,
        };
        self.meta_room(reserve::create_growth_bytes(name, target))?;
        let ino = self.alloc_ino();
        let time = self.now();
        let op = LogOp::Create {
            parent,
            name: name.to_vec(),
            ino,
            kind,
            mode,
            uid: owner.uid,
            gid: owner.gid,
            time,
        };
        self.log_new_name(s, op, (parent, name), ino)?;
        self.getattr(ino)
    }

    /// Logs `op`, which gives `ino` the name `name` in `parent` (a create or a link), in
    /// stream `s`.
    fn log_new_name(
        &mut self,
        s: StreamId,
        op: LogOp,
        (parent, name): (Ino, &[u8]),
        ino: Ino,
    ) -> Result<()> {
        self.log(
            s,
            op,
            &[Key::Entry(parent, name.to_vec()), Key::Ino(ino)],
            &[Key::Ino(parent)],
        )?;
        self.streams.mark(s, &[Key::Inside(parent)]);
        self.count_call(s);
        Ok(())
    }

    /// O_TMPFILE: a regular file in no directory, open once for the caller (released with
    /// [`FileData::release`] like any open inode), that [`Namespace::link`] may give a name
    /// later. It
    /// is made as a create in `parent` under a fresh hidden name and an unlink of that name,
    /// both in stream `s`'s transaction, so nobody sees the name and no commit keeps it. A
    /// crash before a link frees the file (an orphan), as Linux file systems do.
    pub fn create_tmpfile(
        &mut self,
        s: StreamId,
        parent: Ino,
        mode: u32,
        owner: Owner,
    ) -> Result<Attr> {
        self.writable()?;
        self.dir(parent)?;
        let mut k = 0u64;
        let name = loop {
            let n = format!(".intact-tmpfile.{k}").into_bytes();
            if self.live.lookup(parent, &n).is_none() {
                break n;
            }
            k += 1;
        };
        let a = self.create(s, parent, &name, mode, owner)?;
        self.open(a.ino)?;
        self.unlink(s, parent, &name)?;
        self.tmpfiles.insert(a.ino);
        self.getattr(a.ino)
    }

    fn remove(&mut self, s: StreamId, parent: Ino, name: &[u8], want_dir: bool) -> Result<()> {
        self.writable()?;
        self.dir(parent)?;
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong(name.len()));
        }
        if name == b"." || name == b".." {
            return Err(FsError::Invalid("cannot remove . or ..".into()));
        }
        let target = self
            .live
            .lookup(parent, name)
            .ok_or(FsError::NotFound(String::new()))?;
        let t = self.node(target)?;
        match (want_dir, t.kind == FileType::Dir) {
            (true, false) => return Err(FsError::NotDir(String::new())),
            (false, true) => return Err(FsError::IsDir(String::new())),
            (true, true) if !t.entries().is_some_and(|e| e.is_empty()) => {
                return Err(FsError::NotEmpty(String::new()))
            }
            _ => {}
        }
        let time = self.now();
        let op = LogOp::Unlink {
            parent,
            name: name.to_vec(),
            time,
        };
        let checks = if want_dir {
            vec![Key::Inside(target)]
        } else {
            Vec::new()
        };
        self.log(
            s,
            op,
            &[Key::Entry(parent, name.to_vec()), Key::Ino(target)],
            &checks,
        )?;
        self.streams.mark(s, &[Key::Inside(parent)]);
        self.maybe_free(s, target)?;
        self.count_call(s);
        Ok(())
    }
}

/// What `mknod` of `kind` creates.
fn new_kind(kind: MknodKind) -> NewKind {
    match kind {
        MknodKind::File => NewKind::File,
        MknodKind::Fifo => NewKind::Fifo,
        MknodKind::Socket => NewKind::Socket,
        MknodKind::CharDev(rdev) => NewKind::CharDev(rdev),
        MknodKind::BlockDev(rdev) => NewKind::BlockDev(rdev),
    }
}

/// The caller's context is its stream (ccfs).
impl<D: BlockDevice> Namespace for Fs<D> {
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.usable()?;
        self.dir(parent)?;
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong(name.len()));
        }
        let ino = self
            .live
            .lookup(parent, name)
            .ok_or(FsError::NotFound(String::new()))?;
        self.getattr(ino)
    }

    /// Up to `max` entries after `cookie` (0: from the start), in hash order.
    fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        self.usable()?;
        let entries = self.dir(ino)?.entries().expect("directory body");
        let start = (cookie.saturating_add(1), Vec::new());
        Ok(entries
            .range(start..)
            .take(max)
            .map(|((h, name), &i)| DirEntry {
                name: name.clone(),
                ino: i,
                kind: self.live.get(i).map(|n| n.kind).unwrap_or(FileType::File),
                cookie: *h,
            })
            .collect())
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.usable()?;
        match &self.node(ino)?.body {
            Body::Symlink { target } => Ok(target.clone()),
            _ => Err(FsError::Invalid("not a symbolic link".into())),
        }
    }

    fn parent(&self, dir: Ino) -> Result<Ino> {
        match self.live.get(dir).map(|n| &n.body) {
            Some(Body::Dir { parent, .. }) => Ok(*parent),
            Some(_) => Err(FsError::NotDir(format!("inode {dir}"))),
            None => Err(FsError::NotFound(format!("inode {dir}"))),
        }
    }

    fn create(&mut self, s: StreamId, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        self.create_node(s, p, name, NewKind::File, mode, o)
    }

    fn mkdir(&mut self, s: StreamId, p: Ino, name: &[u8], mode: u32, o: Owner) -> Result<Attr> {
        self.create_node(s, p, name, NewKind::Dir, mode, o)
    }

    fn symlink(&mut self, s: StreamId, p: Ino, name: &[u8], t: &[u8], o: Owner) -> Result<Attr> {
        self.create_node(s, p, name, NewKind::Symlink(t.to_vec()), 0o777, o)
    }

    fn mknod(
        &mut self,
        s: StreamId,
        p: Ino,
        name: &[u8],
        kind: MknodKind,
        mode: u32,
        o: Owner,
    ) -> Result<Attr> {
        self.create_node(s, p, name, new_kind(kind), mode, o)
    }

    fn link(&mut self, s: StreamId, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.writable()?;
        let n = self.node(ino)?;
        if n.kind == FileType::Dir {
            return Err(FsError::NotPermitted("hard links to directories".into()));
        }
        if n.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks);
        }
        if n.nlink == 0 && !self.tmpfiles.contains(&ino) {
            return Err(FsError::NotFound(String::new()));
        }
        self.dir(parent)?;
        intactfs_types::check_name(name)?;
        if self.live.lookup(parent, name).is_some() {
            return Err(FsError::Exists(String::new()));
        }
        self.meta_room(reserve::create_growth_bytes(name, 0))?;
        let time = self.now();
        let op = LogOp::Link {
            parent,
            name: name.to_vec(),
            ino,
            time,
        };
        self.log_new_name(s, op, (parent, name), ino)?;
        self.tmpfiles.remove(&ino);
        self.getattr(ino)
    }

    fn unlink(&mut self, s: StreamId, parent: Ino, name: &[u8]) -> Result<()> {
        self.remove(s, parent, name, false)
    }

    fn rmdir(&mut self, s: StreamId, parent: Ino, name: &[u8]) -> Result<()> {
        self.remove(s, parent, name, true)
    }

    fn rename(
        &mut self,
        s: StreamId,
        sp: Ino,
        sn: &[u8],
        dp: Ino,
        dn: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.writable()?;
        if flags.noreplace && flags.exchange {
            return Err(FsError::Invalid(
                "RENAME_NOREPLACE with RENAME_EXCHANGE".into(),
            ));
        }
        self.dir(sp)?;
        self.dir(dp)?;
        if sn.len() > NAME_MAX || dn.len() > NAME_MAX {
            return Err(FsError::NameTooLong(sn.len().max(dn.len())));
        }
        let src = self
            .live
            .lookup(sp, sn)
            .ok_or(FsError::NotFound(String::new()))?;
        intactfs_types::check_name(dn)?;
        let dst = self.live.lookup(dp, dn);
        let src_dir = self.node(src)?.kind == FileType::Dir;
        if flags.noreplace && dst.is_some() {
            return Err(FsError::Exists(String::new()));
        }
        if flags.exchange && dst.is_none() {
            return Err(FsError::NotFound(String::new()));
        }
        if dst == Some(src) {
            // POSIX: two links to one file, nothing happens (and nothing enters the stream).
            return Ok(());
        }
        if src_dir && self.live.is_ancestor(src, dp) {
            return Err(FsError::Invalid(
                "a directory cannot move into itself".into(),
            ));
        }
        let mut claims = vec![Key::Entry(sp, sn.to_vec()), Key::Entry(dp, dn.to_vec())];
        let mut checks = vec![Key::Ino(dp)];
        if src_dir {
            claims.push(Key::Ino(src));
        }
        if let Some(d) = dst {
            let dn_ = self.node(d)?;
            let dst_dir = dn_.kind == FileType::Dir;
            if flags.exchange {
                if dst_dir && self.live.is_ancestor(d, sp) {
                    return Err(FsError::Invalid(
                        "a directory cannot move into itself".into(),
                    ));
                }
            } else {
                match (src_dir, dst_dir) {
                    (true, false) => return Err(FsError::NotDir(String::new())),
                    (false, true) => return Err(FsError::IsDir(String::new())),
                    (true, true) if !dn_.entries().is_some_and(|e| e.is_empty()) => {
                        return Err(FsError::NotEmpty(String::new()))
                    }
                    (true, true) => checks.push(Key::Inside(d)),
                    _ => {}
                }
            }
            claims.push(Key::Ino(d));
            if flags.exchange && dst_dir && sp != dp {
                claims.push(Key::DirTree);
            }
        }
        if src_dir && sp != dp {
            claims.push(Key::DirTree);
        }
        let time = self.now();
        let op = LogOp::Rename {
            sp,
            sn: sn.to_vec(),
            dp,
            dn: dn.to_vec(),
            exchange: flags.exchange,
            time,
        };
        // A longer name, a wider hash or inode number: the metadata may grow.
        self.meta_room(reserve::growth_bytes(&op))?;
        self.log(s, op, &claims, &checks)?;
        self.streams.mark(s, &[Key::Inside(sp), Key::Inside(dp)]);
        if let (Some(d), false) = (dst, flags.exchange) {
            self.maybe_free(s, d)?;
        }
        self.count_call(s);
        Ok(())
    }
}
