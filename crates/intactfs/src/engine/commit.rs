//! Committing: a group of streams' running transactions becomes one journal record (or,
//! when larger than the journal, one checkpoint).
//!
//! [`Fs::commit_with`] runs the stages in order, each a function of its own:
//! 1. **room** ([`Fs::record_estimate`], [`Fs::commit_room`]): the record's bound, and a
//!    checkpoint or a refusal before anything is taken (the commit failure rule);
//! 2. **take** (`Streams::take_group`): the point of no return;
//! 3. **gather** ([`Fs::gather_files`]): the files whose data or attributes commit with it;
//! 4. **place** ([`Fs::place_file`]): blocks allocated (or rewritten in place on a
//!    transactional device) and their `Map`/`SetSize`/`SetAttr` operations appended;
//! 5. **encode** ([`Fs::encode_record`]): data operations applied to `live`, the record built;
//! 6. **write** ([`Fs::write_record`]): the record placed at the journal head;
//! 7. **publish** ([`Fs::publish`]): the durable state, tickets and statistics advanced, and
//!    the wait the caller asked for (flush, device commit, owed ticket or none).

use super::*;

/// What the stages of one commit hand on: the operations of its record (the taken logical
/// ones, `ops[..logical]`, then the data operations placing adds) and its writes.
struct Draft {
    ops: Vec<LogOp>,
    logical: usize,
    progress: Vec<(StreamId, u64)>,
    /// The device transaction the commit goes through, if any ([`Fs::tx_for_commit`]).
    tx: Option<u64>,
    /// Data written (or to be written) for it, in bytes.
    data_bytes: u64,
    /// Its writes, for whoever performs the commit (without a device transaction).
    cio: io::CommitIo,
}

impl<D: BlockDevice> Fs<D> {
    // ----- committing -----

    /// Commits the running transactions of `members` (one group, or all) as one record,
    /// durably.
    pub(super) fn commit(&mut self, members: &[StreamId]) -> Result<()> {
        self.commit_with(members, Wait::Now)
    }

    /// Commits as one record, and waits for what `wait` says.
    ///
    /// The commit failure rule (issue 25; docs/fs-design.md, "When a commit fails"): every
    /// check that can refuse a commit — room in the journal for its record, room for a
    /// snapshot when it commits by checkpoint — runs before the commit takes its operations
    /// from their streams. A refusal changes nothing durable and leaves them pending, so a
    /// later sync retries them. Once taken, they count as committed: an error after that
    /// cannot be undone and poisons the mount ([`Self::past_no_return`]).
    pub(super) fn commit_with(&mut self, members: &[StreamId], wait: Wait) -> Result<()> {
        self.writable()?;
        let wait = if wait == Wait::Caller && !self.deferred {
            Wait::Now
        } else {
            wait
        };
        let est_blocks = self.record_estimate(members)?;
        // Today's bug of issue 25, on purpose: taken (and counted committed) before the checks.
        let early = crate::mutation::active(crate::mutation::Mutation::TakeBeforeRoom)
            .then(|| self.streams.take_group(members));
        let pending = self.streams.pending(members).0.len();
        if let Err(e) = self.commit_room(est_blocks) {
            assert_eq!(
                self.streams.pending(members).0.len(),
                pending,
                "a refused commit dropped pending operations"
            );
            return Err(e);
        }
        let taken = early.unwrap_or_else(|| self.streams.take_group(members));
        let r = self.commit_taken(taken, wait, est_blocks);
        self.past_no_return(r)
    }

    /// The commit failure rule's second half: an error of a commit that has taken its
    /// operations (memory holds them as committed, the device may hold part of them)
    /// poisons the mount, so that no later call reports anything durable.
    fn past_no_return(&mut self, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => {
                assert!(
                    self.poisoned.is_none(),
                    "a commit succeeded on a poisoned mount"
                );
                Ok(())
            }
            Err(e) if self.poisoned.is_some() => Err(e),
            Err(e) => Err(self.poison(format!("a commit failed past its point of no return: {e}"))),
        }
    }

    /// An upper bound, in journal blocks, on the record a commit of `members` would write,
    /// computed before the commit takes anything: its logical operations as they are; per
    /// dirty block at most one `Map` with its checksum; per preallocated run one `Map`; per
    /// file a `SetSize` and a `SetAttr`; the record's own fields.
    fn record_estimate(&self, members: &[StreamId]) -> Result<u64> {
        let (ops, inos) = self.streams.pending(members);
        let data = |i: &Ino| {
            self.dirty.contains_key(i) || self.falloc.contains_key(i) || self.wattrs.contains_key(i)
        };
        if ops.is_empty() && !inos.iter().any(data) {
            // Nothing to write: no room needed (an fsync of a clean file never refuses).
            return Ok(0);
        }
        let mut logical_bytes = 16u64;
        for op in ops {
            logical_bytes += postcard::experimental::serialized_size(op)
                .map_err(|e| FsError::Internal(format!("sizing operation {op:?}: {e}")))?
                as u64;
        }
        let dirty: u64 = inos
            .iter()
            .map(|i| self.dirty.get(i).map_or(0, |d| d.len() as u64))
            .sum();
        let (ranges, prealloc): (u64, u64) = inos
            .iter()
            .filter_map(|i| self.falloc.get(i))
            .fold((0, 0), |(r, b), f| (r + f.0.len() as u64, b + f.1));
        // A preallocated range takes one Map per free run it lands in.
        let prealloc_maps = ranges + prealloc.min(self.alloc.free_run_count());
        let bytes = logical_bytes
            + 72 * dirty
            + 128 * (inos.len() as u64 + prealloc_maps)
            + 24 * members.len() as u64
            + 4096;
        Ok(bytes.div_ceil(BLOCK as u64) + 1)
    }

    /// Makes room for a commit whose record takes at most `est_blocks` journal blocks,
    /// before the commit takes anything: a checkpoint when the journal is too full for the
    /// record; for a commit larger than the journal (it commits by checkpoint), a check
    /// that the snapshot holding it fits. A refusal (NoSpace) changes nothing durable.
    fn commit_room(&mut self, est_blocks: u64) -> Result<()> {
        if self.jhead + est_blocks <= self.sb.journal_end() {
            return Ok(());
        }
        if est_blocks <= self.sb.journal_blocks {
            self.checkpoint()?;
            assert!(self.jhead + est_blocks <= self.sb.journal_end());
            return Ok(());
        }
        let need = self.commit_snapshot_blocks(est_blocks)?;
        let room = self.alloc.free_blocks().saturating_sub(self.reserved);
        if need > room {
            return Err(FsError::NoSpace(format!(
                "a commit larger than the journal needs a {need}-block metadata snapshot; {room} blocks are free (delete files, or mount with a larger journal)"
            )));
        }
        Ok(())
    }

    /// A commit of operations taken from their streams (past its point of no return): the
    /// stages gather, place, encode, write and publish (module doc).
    fn commit_taken(
        &mut self,
        taken: (Vec<LogOp>, Vec<Key>, Vec<(StreamId, u64)>),
        wait: Wait,
        est_blocks: u64,
    ) -> Result<()> {
        let (ops, keys, progress) = taken;
        let (inos, written) = self.gather_files(&keys);
        let tx = if wait != Wait::Written {
            self.tx_for_commit(&inos, est_blocks)?
        } else {
            None
        };
        let mut d = Draft {
            logical: ops.len(),
            ops,
            progress,
            tx,
            data_bytes: 0,
            cio: io::CommitIo::new(self.next_seq),
        };
        for ino in inos {
            self.place_file(&mut d, ino, written.contains(&ino))?;
            assert!(
                !self.dirty.contains_key(&ino) && !self.falloc.contains_key(&ino),
                "inode {ino} kept dirty blocks or preallocation past its commit"
            );
        }
        assert!(d.ops.len() >= d.logical, "placing dropped taken operations");
        if d.ops.is_empty() {
            return self.commit_nothing(wait, d.progress);
        }
        let (rec, bytes) = self.encode_record(&mut d, est_blocks)?;
        if !self.record_fits(&bytes) {
            // commit_room checkpointed when a record this size might not fit, so this is a
            // commit larger than the journal (commit_room checked its snapshot's room). It
            // commits as a checkpoint: the new snapshot already contains it, and the header
            // flip makes it atomic. Its data first (the checkpoint drains).
            self.enqueue(d.cio)?;
            return self.commit_by_checkpoint(rec, d.logical, d.data_bytes);
        }
        let rec_blocks = self.write_record(&mut d, &rec, bytes)?;
        self.publish(d, rec, rec_blocks, wait)
    }

    /// Gather: the files committed with the taken keys (every write is in its file's group:
    /// committed now, as SetSize/SetAttr from live), and those written since their last
    /// commit, which get their size and mtime recorded even when no dirty block is left (a
    /// hole punched over all of them).
    fn gather_files(&mut self, keys: &[Key]) -> (BTreeSet<Ino>, BTreeSet<Ino>) {
        let mut written = BTreeSet::new();
        for k in keys {
            if let Key::Ino(i) = k {
                if self.wattrs.remove(i).is_some() {
                    written.insert(*i);
                }
            }
        }
        let inos: BTreeSet<Ino> = keys
            .iter()
            .filter_map(|k| match k {
                Key::Ino(i)
                    if self.dirty.contains_key(i)
                        || self.falloc.contains_key(i)
                        || written.contains(i) =>
                {
                    Some(*i)
                }
                _ => None,
            })
            .collect();
        assert!(
            written.is_subset(&inos),
            "a written file is missing from its commit"
        );
        (inos, written)
    }

    /// Place: one file's preallocation, dirty blocks and attributes become operations of
    /// the record (and device writes).
    fn place_file(&mut self, d: &mut Draft, ino: Ino, written: bool) -> Result<()> {
        let Some(node) = self.live.get(ino) else {
            self.drop_dirty(ino, 0);
            self.falloc.remove(&ino);
            return Ok(());
        };
        let (size, mtime, ctime) = (node.size, node.mtime, node.ctime);
        let mut dirty = self.dirty.remove(&ino).unwrap_or_default();
        let had_dirty = !dirty.is_empty() || written;
        if let Some((ranges, reserved_blocks)) = self.falloc.remove(&ino) {
            self.place_prealloc(d, ino, &dirty, ranges, reserved_blocks)?;
        }
        if had_dirty {
            d.ops.push(LogOp::SetSize {
                ino,
                size,
                time: mtime,
                free_past_end: false,
            });
        }
        if !dirty.is_empty() && d.tx.is_some() {
            dirty = self.write_in_place(d, ino, dirty)?;
        }
        if !dirty.is_empty() {
            self.place_fresh(d, ino, dirty)?;
        }
        if had_dirty {
            d.ops.push(LogOp::SetAttr {
                ino,
                mode: None,
                uid: None,
                gid: None,
                atime: None,
                mtime: Some(mtime),
                ctime,
            });
        }
        Ok(())
    }

    /// Blocks for the holes of a file's preallocated ranges that no dirty block fills: one
    /// `Map` per free run.
    fn place_prealloc(
        &mut self,
        d: &mut Draft,
        ino: Ino,
        dirty: &Blocks,
        ranges: Vec<(u64, u64)>,
        reserved_blocks: u64,
    ) -> Result<()> {
        intactfs_device::counter::release(
            &mut self.reserved,
            reserved_blocks,
            "reserved (preallocation at commit)",
        );
        let ext = self
            .live
            .get(ino)
            .and_then(|n| n.extents())
            .expect("a file with preallocation");
        let holes: Vec<(u64, u64)> = merge_ranges(ranges)
            .into_iter()
            .flat_map(|(a, b)| holes(ext, Some(dirty), a, b))
            .collect();
        for (mut lblk, len) in holes {
            let runs = self.alloc.alloc(len);
            let got: u64 = runs.iter().map(|r| r.1).sum();
            if got < len {
                return Err(self.poison(format!("preallocation found {got} of {len} blocks")));
            }
            for (pblk, l) in runs {
                d.ops.push(LogOp::Map {
                    ino,
                    lblk,
                    pblk,
                    len: l,
                    crcs: Vec::new(),
                });
                lblk += l;
            }
        }
        Ok(())
    }

    /// On a transactional device a block the file already has is rewritten where it is,
    /// inside the commit's device transaction (X-FTL): no new block, nothing to free later.
    /// Returns the blocks the file does not have yet (copy on write, [`Self::place_fresh`]).
    fn write_in_place(&mut self, d: &mut Draft, ino: Ino, dirty: Blocks) -> Result<Blocks> {
        let ext = self
            .live
            .get(ino)
            .and_then(|n| n.extents())
            .expect("a file with dirty blocks");
        let (inplace, fresh): (Blocks, Blocks) = dirty
            .into_iter()
            .partition(|(l, _)| map_block(ext, *l).is_some());
        let placed: Vec<(u64, u64, Box<[u8]>)> = inplace
            .into_iter()
            .map(|(l, b)| (l, map_block(ext, l).expect("partitioned").0, b))
            .collect();
        let n = placed.len() as u64;
        intactfs_device::counter::release(
            &mut self.reserved,
            n,
            "reserved (in-place blocks at commit)",
        );
        intactfs_device::counter::release(
            &mut self.dirty_blocks,
            n,
            "dirty_blocks (in-place blocks at commit)",
        );
        self.stats.inplace_blocks += n;
        let mut i = 0;
        while i < placed.len() {
            // One write and one Map per run contiguous in the file and on the device.
            let mut j = i + 1;
            while j < placed.len()
                && placed[j].0 == placed[j - 1].0 + 1
                && placed[j].1 == placed[j - 1].1 + 1
            {
                j += 1;
            }
            let mut buf = Vec::with_capacity((j - i) * BLOCK);
            for (_, _, b) in &placed[i..j] {
                buf.extend_from_slice(b);
            }
            let plain = crate::mutation::active(crate::mutation::Mutation::InplacePlain);
            self.dev_write(if plain { None } else { d.tx }, placed[i].1, &buf)?;
            d.data_bytes += buf.len() as u64;
            let crcs = placed[i..j]
                .iter()
                .map(|(_, _, b)| layout::block_crc(b))
                .collect();
            d.ops.push(LogOp::Map {
                ino,
                lblk: placed[i].0,
                pblk: placed[i].1,
                len: (j - i) as u64,
                crcs,
            });
            i = j;
        }
        Ok(fresh)
    }

    /// Copy on write: newly allocated blocks for a file's dirty blocks, written where they
    /// lie (in the device transaction, or by whoever performs the commit).
    fn place_fresh(&mut self, d: &mut Draft, ino: Ino, dirty: Blocks) -> Result<()> {
        let n = dirty.len() as u64;
        let runs = self.alloc.alloc(n);
        if runs.iter().map(|r| r.1).sum::<u64>() < n {
            return Err(self.poison(format!(
                "allocation at commit found fewer than the {n} reserved blocks"
            )));
        }
        intactfs_device::counter::release(&mut self.reserved, n, "reserved (new blocks at commit)");
        intactfs_device::counter::release(
            &mut self.dirty_blocks,
            n,
            "dirty_blocks (new blocks at commit)",
        );
        let mut blocks = dirty.into_iter();
        for (p, l) in runs {
            let chunk: Vec<(u64, Box<[u8]>)> = blocks.by_ref().take(l as usize).collect();
            assert_eq!(
                chunk.len() as u64,
                l,
                "allocated run longer than the dirty blocks"
            );
            d.data_bytes += l * BLOCK as u64;
            // One Map per stretch contiguous in the file too.
            let mut i = 0;
            while i < chunk.len() {
                let mut j = i + 1;
                while j < chunk.len() && chunk[j].0 == chunk[j - 1].0 + 1 {
                    j += 1;
                }
                let crcs = chunk[i..j]
                    .iter()
                    .map(|(_, b)| layout::block_crc(b))
                    .collect();
                d.ops.push(LogOp::Map {
                    ino,
                    lblk: chunk[i].0,
                    pblk: p + i as u64,
                    len: (j - i) as u64,
                    crcs,
                });
                i = j;
            }
            let bufs: Vec<Box<[u8]>> = chunk.into_iter().map(|(_, b)| b).collect();
            if d.tx.is_some() {
                let buf = bufs.concat();
                self.dev_write(d.tx, p, &buf)?;
            } else {
                // Written where the blocks lie (vectored), by whoever performs the commit.
                d.cio.add_run(p, bufs);
            }
        }
        Ok(())
    }

    /// Calls that changed nothing on disk (e.g. preallocating blocks already allocated)
    /// are as durable as everything before them.
    fn commit_nothing(&mut self, wait: Wait, progress: Vec<(StreamId, u64)>) -> Result<()> {
        if wait == Wait::Now {
            self.flush()?;
        }
        if wait == Wait::Caller {
            self.owe(self.written_ticket());
        }
        if !progress.is_empty() {
            self.log_commit(self.written_ticket(), progress);
        }
        Ok(())
    }

    /// Encode: the data operations placing added are applied to `live`, and the record is
    /// built and encoded (its operations taken from the draft).
    fn encode_record(&mut self, d: &mut Draft, est_blocks: u64) -> Result<(Record, Vec<u8>)> {
        for op in &d.ops[d.logical..] {
            self.live
                .apply(op)
                .map_err(|e| FsError::Internal(format!("data operation {op:?}: {e}")))?;
            // Budgeted while its blocks were reserved (reserve::MAP_BYTES_PER_BLOCK).
            self.meta_growth_bytes += reserve::data_growth_bytes(op);
        }
        let rec = Record {
            uuid: self.sb.uuid,
            epoch: self.cp.generation,
            seq: self.next_seq,
            durable_upto: self.tickets.durable(),
            streams: d.progress.clone(),
            ops: std::mem::take(&mut d.ops),
        };
        let bytes = layout::encode(REC_MAGIC, &rec);
        if d.tx.is_some() && !self.record_fits(&bytes) {
            // tx_for_commit checkpointed for a record of this size or more.
            return Err(self.poison(format!(
                "journal record {} ({} bytes) is larger than estimated",
                rec.seq,
                bytes.len()
            )));
        }
        assert!(
            (bytes.len() / BLOCK) as u64 <= est_blocks,
            "record {} of {} bytes is larger than its estimate of {est_blocks} blocks",
            rec.seq,
            bytes.len()
        );
        Ok((rec, bytes))
    }

    /// Whether an encoded record fits between the journal head and the journal's end.
    fn record_fits(&self, bytes: &[u8]) -> bool {
        self.jhead + (bytes.len() / BLOCK) as u64 <= self.sb.journal_end()
    }

    /// Write: the record at the journal head, in the device transaction or with the
    /// commit's other writes. Returns its length in blocks.
    fn write_record(&mut self, d: &mut Draft, rec: &Record, bytes: Vec<u8>) -> Result<u64> {
        assert_eq!(rec.seq, self.next_seq, "a record out of sequence");
        let rec_blocks = (bytes.len() / BLOCK) as u64;
        match d.tx {
            Some(t) => {
                if let Err(e) = self.dev.tx_write_run(t, self.jhead, &bytes) {
                    return Err(self.poison(format!("writing journal record {}: {e}", rec.seq)));
                }
            }
            None => d.cio.set_record(self.jhead, bytes),
        }
        self.jhead += rec_blocks;
        assert!(
            self.jhead <= self.sb.journal_end(),
            "journal head {} past the journal's end {} after record {}",
            self.jhead,
            self.sb.journal_end(),
            rec.seq
        );
        Ok(rec_blocks)
    }

    /// Publish: the record counts as committed (durable state, sequence, tickets), its
    /// writes go out, and the commit waits for what `wait` says; a full journal then
    /// checkpoints.
    fn publish(&mut self, d: Draft, rec: Record, rec_blocks: u64, wait: Wait) -> Result<()> {
        self.stats.data_bytes += d.data_bytes;
        self.stats.journal_bytes += rec_blocks * BLOCK as u64;
        self.stats.commits += 1;
        self.apply_durable(&rec.ops, d.logical, rec.seq)?;
        self.next_seq = rec.seq + 1;
        self.note_record(rec.seq, rec.durable_upto);
        if d.tx.is_none() {
            self.enqueue(d.cio)?;
        }
        self.wait_for(d.tx, rec.seq, wait)?;
        assert!(
            self.tickets.durable() <= self.written_ticket(),
            "record {} made durable past the written ticket",
            rec.seq
        );
        self.log_commit(rec.seq, d.progress);
        self.checkpoint_if_full()
    }

    /// The wait of a published record `seq`: the device transaction's commit (a flush), an
    /// owed ticket for the caller, a drain and flush here, or none (osync).
    fn wait_for(&mut self, tx: Option<u64>, seq: u64, wait: Wait) -> Result<()> {
        if let Some(t) = tx {
            // The device commits data and record at once, durably (its commit is a flush).
            if let Err(e) = self.dev.tx_commit(t) {
                return Err(self.poison(format!(
                    "committing device transaction of record {seq}: {e}"
                )));
            }
            self.stats.flushes += 1;
            self.stats.tx_commits += 1;
            self.flushed();
        } else if wait == Wait::Caller {
            // The caller writes it and flushes (group commit), outside its lock.
            self.owe(seq);
        } else if wait != Wait::Written {
            // Data and record need no order between them: recovery checks the data CRCs.
            self.drain()?;
            if let Err(e) = self.dev.flush() {
                return Err(self.poison(format!("flushing journal record {seq}: {e}")));
            }
            self.stats.flushes += 1;
            self.flushed();
        } else {
            self.stats.optimistic_commits += 1;
            if crate::mutation::active(crate::mutation::Mutation::EarlyReuse) {
                self.alloc.durable();
            }
        }
        Ok(())
    }

    /// A journal filled past the mount's `checkpoint_fill` checkpoints after the commit.
    fn checkpoint_if_full(&mut self) -> Result<()> {
        let used = self
            .jhead
            .checked_sub(self.sb.journal_start)
            .expect("journal head before the journal");
        if used as f64 >= self.opts.checkpoint_fill * self.sb.journal_blocks as f64 {
            match self.checkpoint() {
                // Refused (nothing changed): the commit is complete without it; the next
                // commit that needs the room checkpoints first, or is refused before it
                // takes anything.
                Err(_) if self.poisoned.is_none() => {}
                r => r?,
            }
        }
        Ok(())
    }

    /// Writes data blocks, in device transaction `tx` if any.
    fn dev_write(&mut self, tx: Option<u64>, block: u64, buf: &[u8]) -> Result<()> {
        let r = match tx {
            Some(t) => self.dev.tx_write_run(t, block, buf),
            None => self.dev.write_run(block, buf),
        };
        r.map_err(|e| self.poison(format!("writing data: {e}")))
    }

    /// Whether this durable commit goes through a device transaction (`Some(its id)`): on a
    /// transactional device, when its data and its record surely fit both the device's
    /// room for open transactions and the journal. The record is estimated from above
    /// before any data is written, and the journal checkpointed first if it is too full:
    /// once data is rewritten in place, the commit cannot fall back to a checkpoint.
    /// Earlier optimistic records are flushed first, so that the new record says they are
    /// durable and recovery no longer checks their data (which an in-place rewrite may
    /// replace).
    fn tx_for_commit(&mut self, inos: &BTreeSet<Ino>, est: u64) -> Result<Option<u64>> {
        if !self.dev.transactional() {
            return Ok(None);
        }
        let dirty: u64 = inos
            .iter()
            .map(|i| self.dirty.get(i).map_or(0, |d| d.len() as u64))
            .sum();
        // `est` (Self::record_estimate) bounds the record from above.
        if est > self.sb.journal_blocks || dirty + est > self.dev.tx_room() {
            return Ok(None);
        }
        // Self::commit_room checkpointed, before the commit took anything, if it did not fit.
        assert!(
            self.jhead + est <= self.sb.journal_end(),
            "journal head {} + {est} blocks past the journal's end {}",
            self.jhead,
            self.sb.journal_end()
        );
        self.flush()?;
        Ok(Some(self.next_seq))
    }

    fn commit_by_checkpoint(&mut self, rec: Record, logical: usize, data_bytes: u64) -> Result<()> {
        self.apply_durable(&rec.ops, logical, rec.seq)?;
        // The checkpoint records `next_seq` as its first sequence number: this transaction
        // takes the sequence number it would have had as a record.
        self.next_seq = rec.seq + 1;
        self.checkpoint()?;
        self.stats.data_bytes += data_bytes;
        self.stats.commits += 1;
        self.log_commit(rec.seq, rec.streams);
        Ok(())
    }

    /// Applies committed operations to the durable state; what they free waits in the
    /// pending lists until [`Self::released`]. The first `logical` operations are calls
    /// logged earlier: what they free was counted in `freeing` then.
    fn apply_durable(&mut self, ops: &[LogOp], logical: usize, seq: u64) -> Result<()> {
        for (k, op) in ops.iter().enumerate() {
            let mut touched = self.durable.touches(op);
            if crate::mutation::active(crate::mutation::Mutation::DeltaMissesData)
                && matches!(op, LogOp::Map { .. } | LogOp::SetSize { .. })
            {
                touched.clear();
            }
            self.touched.extend(touched);
            let freed = self.durable.apply(op).map_err(|e| {
                FsError::Internal(format!(
                    "committed operation {op:?} does not apply to the durable state: {e}"
                ))
            })?;
            for (s, l) in freed.extents {
                self.alloc.defer(seq, s, l);
                if k < logical {
                    intactfs_device::counter::release(
                        &mut self.freeing,
                        l,
                        "freeing (a committed call's frees)",
                    );
                }
            }
            if let Some(i) = freed.ino {
                self.pending_inos.push((seq, i));
            }
        }
        Ok(())
    }
}
