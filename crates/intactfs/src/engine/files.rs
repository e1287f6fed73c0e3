//! The file calls of the block engine ([`FileData`]): open counts, reads, writes,
//! attributes and fsync. Data waits in the dirty cache until its stream commits.

use super::*;

/// The caller's context is its stream (ccfs).
impl<D: BlockDevice> FileData for Fs<D> {
    fn open(&mut self, ino: Ino) -> Result<()> {
        self.node(ino)?;
        *self.open.entry(ino).or_default() += 1;
        Ok(())
    }

    /// The last close of an unlinked file frees it.
    fn release(&mut self, s: StreamId, ino: Ino) -> Result<()> {
        let Some(c) = self.open.get_mut(&ino) else {
            return Ok(());
        };
        // An open count of 0 is never stored (it is removed), so this cannot underflow.
        assert!(
            *c > 0,
            "open count of inode {ino} is 0 while still in the map"
        );
        *c = c.checked_sub(1).expect("open count checked above");
        if *c == 0 {
            self.open.remove(&ino);
            if !self.opts.read_only
                && self.poisoned.is_none()
                && self.live.get(ino).is_some_and(|n| n.nlink == 0)
            {
                // Freed along with the uncommitted unlink, in its stream: a release by
                // another stream (the FUSE layer's forget comes as the init stream) must not
                // merge that stream's work with the unlink's, or one stream's commit refused
                // for want of room would hold back the unlinks that make room (issue 25).
                let s = self.streams.owner_of(&Key::Ino(ino)).unwrap_or(s);
                self.maybe_free(s, ino)?;
            }
        }
        Ok(())
    }

    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        self.usable()?;
        if self.reader.is_some() {
            return self.read_shared(ino, off, len);
        }
        let mut blocks = Vec::new();
        // Without a shared handle: the blocks first (they need `&mut self`), then the bytes.
        let (first, last) = match self.span(ino, off, len)? {
            Some(s) => s,
            None => return Ok(Vec::new()),
        };
        for lblk in first / BLOCK as u64..=(last - 1) / BLOCK as u64 {
            blocks.push(self.file_block(ino, lblk)?);
        }
        let mut it = blocks.into_iter();
        self.read_by(ino, off, len, &mut |_, _| {
            Ok(it.next().expect("one block per block of the span"))
        })
    }

    fn write(&mut self, s: StreamId, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        self.writable()?;
        let size = self.file(ino)?.size;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(FsError::TooBig(String::new()))?;
        let (b0, b1) = (off / BLOCK as u64, (end - 1) / BLOCK as u64);
        let s = self.route(s, &[Key::Ino(ino)], &[])?;
        let in_region = self.is_region(s);
        if in_region && self.dirty_blocks * BLOCK as u64 > self.opts.region_limit {
            return Err(FsError::NoSpace(format!("atomic regions hold more than {} MiB of uncommitted data (mount option region_limit)", self.opts.region_limit >> 20)));
        }
        self.room_for(
            |fs| {
                let have = fs.dirty.get(&ino);
                (b0..=b1)
                    .filter(|b| !have.is_some_and(|d| d.contains_key(b)))
                    .count() as u64
            },
            0,
        )?;
        self.streams.relate(s, &[Key::Ino(ino)], &[]);
        let mut pos = off;
        for lb in b0..=b1 {
            let within = (pos % BLOCK as u64) as usize;
            let take = (BLOCK - within).min((end - pos) as usize);
            let src = &data[(pos - off) as usize..(pos - off) as usize + take];
            if let Some(b) = self.dirty.get_mut(&ino).and_then(|d| d.get_mut(&lb)) {
                b[within..within + take].copy_from_slice(src);
            } else {
                let whole = within == 0 && take == BLOCK;
                let mut b = if whole || lb * BLOCK as u64 >= size {
                    vec![0; BLOCK]
                } else {
                    self.file_block(ino, lb)?
                };
                b[within..within + take].copy_from_slice(src);
                self.put_dirty(ino, lb, b.into_boxed_slice())?;
            }
            pos += take as u64;
        }
        let time = self.now();
        let n = self.live.inodes.get_mut(&ino).expect("checked above");
        n.size = n.size.max(end);
        n.mtime = time;
        n.ctime = time;
        let g = self.streams.tick();
        self.wattrs.entry(ino).or_default().push((g, end, time));
        self.count_call(s);
        if in_region {
            if crate::mutation::active(crate::mutation::Mutation::RegionEarlyPage)
                && self.streams.stream(s).logged == 1
            {
                self.commit(&[s])?;
            }
        } else if self.dirty_blocks * BLOCK as u64 > self.opts.dirty_limit {
            // A region never commits early (no steal): only the writer's own group does.
            // With deferred I/O the caller writes it after answering, and nobody waits
            // for its flush (the durability timeout or the next fsync brings it).
            let g = self.streams.group(s);
            self.commit_with(
                &g,
                if self.deferred {
                    Wait::Written
                } else {
                    Wait::Now
                },
            )?;
        }
        Ok(data.len())
    }

    fn setattr(&mut self, s: StreamId, ino: Ino, a: SetAttr) -> Result<Attr> {
        self.writable()?;
        self.node(ino)?;
        // Values of the caller's choosing may widen the inode: room first, before anything
        // changes (with the truncate's own room, if any).
        let growth = reserve::setattr_growth_bytes(ino, &a);
        if let Some(size) = a.size {
            self.truncate_inner(s, ino, size, growth)?;
        } else {
            self.meta_room(growth)?;
        }
        let ctime = self.now();
        if let Some(op) = setattr_op(ino, &a, ctime) {
            self.log(s, op, &[Key::Ino(ino)], &[])?;
        }
        self.count_call(s);
        self.getattr(ino)
    }

    /// fsync/fdatasync: the caller's stream, and the group holding the file's uncommitted
    /// changes if another. A no-op in an IGNORE_FSYNC stream, an osync in a FSYNC_AS_OSYNC
    /// one.
    fn fsync(&mut self, s: StreamId, ino: Ino, _datasync: bool) -> Result<()> {
        self.usable()?;
        self.node(ino)?;
        let flags = self.streams.stream(s).flags;
        if flags.ignore_fsync || self.opts.read_only {
            return Ok(());
        }
        self.sync_file(s, ino, !flags.fsync_as_osync)
    }
}
