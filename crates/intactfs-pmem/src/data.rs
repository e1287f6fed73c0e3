//! File data: the block map (12 direct pointers, one single- and one double-indirect, each
//! pointer an aligned word), reads through the volatile index, writes into pending blocks
//! (cacheline-granular redo, 002 §III-D), truncation, and the engine's file calls
//! ([`FileData`]: open counts, read, write, setattr, fsync).

use crate::error::{PmemFsError, Result};
use crate::index::Open;
use crate::invariants::release;
use crate::layout::*;
use crate::{Attr, Batch, Ino, PmemFs, SetAttr, TxId};
use intactfs_device::PmemDevice;
use intactfs_types::prelude::*;

/// Where a partial line's newest content is, before a write merges into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineSrc {
    /// A pending block (the open version's own, or the newest committed one holding it).
    Block(u64),
    /// The block the file's pointers name (0, a hole, reads as zeros).
    Home,
}

/// What a truncation does once its metadata batch is applied.
#[derive(Debug, Default)]
pub(crate) struct TruncPlan {
    /// Blocks no longer named (freed when the transaction commits).
    pub freed: Vec<u64>,
    /// Blocks whose open version goes (its pending block is freed at once).
    pub drop_open: Vec<u64>,
    /// Zeros to write from this byte offset to the end of its block.
    pub tail: Option<u64>,
    /// The tail needs a new version (a block and a log entry reserved for it).
    pub tail_new_version: bool,
}

impl<P: PmemDevice> PmemFs<P> {
    /// The pointer word at `off`, refused (Corrupt) unless 0 or a data block.
    pub(crate) fn ptr(&self, off: u64, what: impl FnOnce() -> String) -> Result<u64> {
        let p = self.dev.load_u64(off)?;
        if p != 0 && !self.g.is_data_block(p) {
            return Err(PmemFsError::Corrupt(format!(
                "{} holds block pointer {p}, outside the data area {}..{}",
                what(),
                self.g.data_start,
                self.g.total_blocks
            )));
        }
        Ok(p)
    }

    /// Offset of the pointer word that maps block `lbn` of `ino`; None when an indirect
    /// level is missing (the block is a hole).
    pub(crate) fn ptr_off(&self, ino: Ino, lbn: u64) -> Result<Option<u64>> {
        let base = self.g.inode_off(ino);
        match ptr_path(lbn) {
            None => Err(PmemFsError::TooBig(format!(
                "block {lbn} is beyond the largest file ({MAX_BLOCKS} blocks)"
            ))),
            Some(PtrPath::Direct(i)) => Ok(Some(base + I_DIRECT + i * 8)),
            Some(PtrPath::Tree { root, depth, idx }) => {
                let mut off = base + root;
                for &i in &idx[..depth as usize] {
                    let x = self.ptr(off, || format!("an indirect pointer of inode {ino}"))?;
                    if x == 0 {
                        return Ok(None);
                    }
                    off = x * BLOCK + i * 8;
                }
                Ok(Some(off))
            }
        }
    }

    /// The home block of `lbn` (0: a hole).
    pub(crate) fn home(&self, ino: Ino, lbn: u64) -> Result<u64> {
        match self.ptr_off(ino, lbn)? {
            None => Ok(0),
            Some(off) => self.ptr(off, || format!("block map of inode {ino} (block {lbn})")),
        }
    }

    /// How many indirect blocks on the path to block `lbn` of `ino` are missing (0 for a
    /// direct block or a complete path).
    pub(crate) fn missing_levels(&self, ino: Ino, lbn: u64) -> Result<u64> {
        let Some(PtrPath::Tree { root, depth, idx }) = ptr_path(lbn) else {
            return Ok(0);
        };
        let mut off = self.g.inode_off(ino) + root;
        for (k, &i) in idx[..depth as usize].iter().enumerate() {
            let x = self.ptr(off, || format!("an indirect pointer of inode {ino}"))?;
            if x == 0 {
                return Ok(depth as u64 - k as u64);
            }
            off = x * BLOCK + i * 8;
        }
        Ok(0)
    }

    /// Like [`PmemFs::ptr_off`], allocating missing indirect blocks (for a checkpoint): each
    /// new block is zeroed and persisted before an atomic, persisted pointer store names it.
    /// All missing levels or none: None when fewer blocks are free than levels are missing
    /// (a partial path would name indirect blocks no data needs yet).
    pub(crate) fn ptr_off_alloc(&mut self, ino: Ino, lbn: u64) -> Result<Option<u64>> {
        let base = self.g.inode_off(ino);
        let (root, depth, idx) = match ptr_path(lbn) {
            None => {
                return Err(PmemFsError::TooBig(format!(
                    "block {lbn} is beyond the largest file"
                )))
            }
            Some(PtrPath::Direct(i)) => return Ok(Some(base + I_DIRECT + i * 8)),
            Some(PtrPath::Tree { root, depth, idx }) => (root, depth, idx),
        };
        let missing = self.missing_levels(ino, lbn)?;
        if missing > self.free_blocks.len() as u64 {
            return Ok(None);
        }
        let mut off = base + root;
        for &i in &idx[..depth as usize] {
            let mut x = self.ptr(off, || format!("an indirect pointer of inode {ino}"))?;
            if x == 0 {
                let b = self.free_blocks.pop_first().expect("counted above");
                if crate::mutation::active(crate::mutation::Mutation::IndirectNotPersisted) {
                    self.dev.write(b * BLOCK, &[0u8; BLOCK as usize])?;
                } else {
                    self.zero_block(b)?;
                }
                self.dev.store_u64(off, b)?;
                self.dev.persist(off, 8)?;
                self.stats.indirect_allocs += 1;
                x = b;
            }
            off = x * BLOCK + i * 8;
        }
        Ok(Some(off))
    }

    /// Every block `ino` names: (lbn or None for an indirect or attribute block, block).
    pub(crate) fn mapped_blocks(&self, ino: Ino) -> Result<Vec<(Option<u64>, u64)>> {
        let base = self.g.inode_off(ino);
        let mut out = Vec::new();
        let x = self.xattr_block(ino)?;
        if x != 0 {
            out.push((None, x));
        }
        for i in 0..NDIRECT {
            let p = self.ptr(base + I_DIRECT + i * 8, || {
                format!("inode {ino}'s pointer {i}")
            })?;
            if p != 0 {
                out.push((Some(i), p));
            }
        }
        for (root, depth) in TREES {
            let x = self.ptr(base + root, || {
                format!("an indirect pointer of inode {ino}")
            })?;
            if x != 0 {
                self.walk_tree(ino, x, depth, tree_first_lbn(depth), &mut out)?;
            }
        }
        Ok(out)
    }

    /// The indirect block `x`, `depth` levels above the data, mapping from `first_lbn`:
    /// itself and every block below it.
    fn walk_tree(
        &self,
        ino: Ino,
        x: u64,
        depth: u32,
        first_lbn: u64,
        out: &mut Vec<(Option<u64>, u64)>,
    ) -> Result<()> {
        assert!((1..=MAX_DEPTH).contains(&depth));
        out.push((None, x));
        for j in 0..PTRS_PER_BLOCK {
            let p = self.ptr(x * BLOCK + j * 8, || {
                format!("indirect block {x} of inode {ino}")
            })?;
            if p == 0 {
                continue;
            }
            let lbn = first_lbn + j * span_blocks(depth);
            if depth == 1 {
                out.push((Some(lbn), p));
            } else {
                self.walk_tree(ino, p, depth - 1, lbn, out)?;
            }
        }
        Ok(())
    }

    /// The logical blocks of `ino` below its size that may hold data (a home block or a
    /// version in the index), in order; every other block reads as zeros (SEEK_DATA's
    /// answer, for the simulation's snapshots of sparse files).
    pub fn data_lbns(&self, ino: Ino) -> Result<Vec<u64>> {
        let limit = self.inode(ino)?.size.div_ceil(BLOCK);
        let mut lbns: Vec<u64> = self
            .mapped_blocks(ino)?
            .into_iter()
            .filter_map(|(l, _)| l)
            .chain(self.index.file(ino).map(|(l, _)| l))
            .filter(|&l| l < limit)
            .collect();
        lbns.sort_unstable();
        lbns.dedup();
        Ok(lbns)
    }

    /// SEEK_DATA (`data`) or SEEK_HOLE from byte `off` of `ino`: the first byte at or after
    /// `off` that may hold data (a block [`Self::data_lbns`] names), or that is a hole (the
    /// end of the file counts as one). Block granularity, as the kernel file systems answer.
    pub fn seek_data(&self, ino: Ino, off: u64, data: bool) -> Result<u64> {
        let size = self.inode(ino)?.size;
        if off >= size {
            return Err(PmemFsError::PastEnd);
        }
        let found = seek_in(&self.data_lbns(ino)?, size, off, data);
        if let Ok(at) = found {
            assert!(
                at >= off && at <= size,
                "seek answer {at} outside {off}..={size}"
            );
        }
        found
    }

    /// The blocks `ino` uses (st_blocks): its mapped blocks (data and indirect) and the
    /// blocks written since the last checkpoint that have no home block yet (versions in
    /// the index). Counting home blocks only made a freshly written file report 0 blocks,
    /// which GNU tar reads as "all holes" and archives as zeros.
    pub(crate) fn count_blocks(&self, ino: Ino) -> Result<u64> {
        let mapped = self.mapped_blocks(ino)?;
        let homes: std::collections::BTreeSet<u64> =
            mapped.iter().filter_map(|(lbn, _)| *lbn).collect();
        let pending: std::collections::BTreeSet<u64> = self
            .index
            .file(ino)
            .map(|(lbn, _)| lbn)
            .filter(|lbn| !homes.contains(lbn))
            .collect();
        Ok(mapped.len() as u64 + pending.len() as u64)
    }

    /// One cacheline of block `lbn` as reads see it (with or without the open version).
    pub(crate) fn read_line(
        &self,
        ino: Ino,
        lbn: u64,
        line: u64,
        with_open: bool,
    ) -> Result<[u8; LINE as usize]> {
        let mut buf = [0u8; LINE as usize];
        let src = match self
            .index
            .get(ino, lbn)
            .and_then(|v| v.line_source(line, with_open))
        {
            Some(p) => p,
            None => self.home(ino, lbn)?,
        };
        if src != 0 {
            self.dev.read(src * BLOCK + line * LINE, &mut buf)?;
        }
        Ok(buf)
    }

    fn do_write(&mut self, id: u64, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let mut rec = self.inode(ino)?;
        match rec.kind {
            FileType::File => {}
            FileType::Dir => return Err(PmemFsError::IsDir(format!("inode {ino}"))),
            // A link's target is written once, by symlink; special files hold no data.
            k => return Err(PmemFsError::Invalid(format!("inode {ino} is a {k:?}"))),
        }
        self.check_owner(id, ino)?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or_else(|| {
                PmemFsError::TooBig(format!(
                    "{} bytes at offset {off} end beyond the largest file ({MAX_FILE_SIZE} bytes)",
                    data.len()
                ))
            })?;
        // Blocks without an open version of this transaction need one. check_owner passed,
        // so no other transaction has one here: its own open versions are in `data` (a
        // range of a small set, where a lookup per block cost as much as the write's copy).
        let (b0, b1) = (off / BLOCK, (end - 1) / BLOCK);
        let have = self.txs[&id].data.range((ino, b0)..=(ino, b1)).count() as u64;
        let need = (b1 - b0 + 1)
            .checked_sub(have)
            .expect("at most one open version per block");
        let blocks = self.reserve_versions(id, need)?;
        let mut b = Batch::default();
        let now = self.now();
        rec.size = rec.size.max(end);
        rec.mtime = now;
        rec.ctime = now;
        self.stage_inode(&mut b, ino, &rec)?;
        if let Err(e) = self.apply_meta(id, b) {
            self.unreserve_versions(id, &blocks);
            return Err(e);
        }
        self.claim(id, &[ino]);
        self.put_data(id, ino, off, data, blocks)?;
        Ok(data.len())
    }

    /// [`FileData::read`] through `&self` (the FUSE server's reads without the write lock,
    /// the simulation's snapshots): up to `len` bytes at `off`, fewer at the end of the
    /// file. Sees every change, committed or not (no isolation, as metadata).
    pub fn read_shared(&self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        let rec = self.inode(ino)?;
        if rec.kind == FileType::Dir {
            return Err(PmemFsError::IsDir(format!("inode {ino}")));
        }
        if off >= rec.size {
            return Ok(Vec::new());
        }
        let end = rec.size.min(off.saturating_add(len as u64));
        let mut out = vec![0u8; (end - off) as usize];
        let mut pos = off;
        while pos < end {
            let lbn = pos / BLOCK;
            let bend = ((lbn + 1) * BLOCK).min(end);
            let dst = &mut out[(pos - off) as usize..(bend - off) as usize];
            if self.index.get(ino, lbn).is_some() {
                let mut p = pos;
                while p < bend {
                    let line = (p % BLOCK) / LINE;
                    let lend = (lbn * BLOCK + (line + 1) * LINE).min(bend);
                    let data = self.read_line(ino, lbn, line, true)?;
                    let s = (p % LINE) as usize;
                    dst[(p - pos) as usize..(lend - pos) as usize]
                        .copy_from_slice(&data[s..s + (lend - p) as usize]);
                    p = lend;
                }
            } else {
                let h = self.home(ino, lbn)?;
                if h != 0 {
                    self.dev.read(h * BLOCK + pos % BLOCK, dst)?;
                }
            }
            pos = bend;
        }
        Ok(out)
    }

    /// `setattr` with only a size.
    pub fn truncate(&mut self, tx: Option<TxId>, ino: Ino, size: u64) -> Result<Attr> {
        let size = SetAttr {
            size: Some(size),
            ..Default::default()
        };
        self.setattr(tx, ino, size)
    }

    fn do_setattr(&mut self, id: u64, ino: Ino, sa: &SetAttr) -> Result<Attr> {
        let mut rec = self.inode(ino)?;
        self.check_owner(id, ino)?;
        if let Some(t) = [sa.atime, sa.mtime]
            .into_iter()
            .flatten()
            .find(|t| t.nsec >= 1_000_000_000)
        {
            return Err(PmemFsError::Invalid(format!(
                "time {t:?}: nanoseconds must be below 10^9"
            )));
        }
        if let Some(s) = sa.size {
            if rec.kind == FileType::Dir {
                return Err(PmemFsError::IsDir(format!(
                    "inode {ino}: a directory has no settable size"
                )));
            }
            if rec.kind != FileType::File {
                return Err(PmemFsError::Invalid(format!(
                    "inode {ino}: a {:?} has no settable size",
                    rec.kind
                )));
            }
            if s > MAX_FILE_SIZE {
                return Err(PmemFsError::TooBig(format!(
                    "size {s} is beyond the largest file ({MAX_FILE_SIZE} bytes)"
                )));
            }
        }
        let now = self.now();
        let mut b = Batch::default();
        let mut plan = TruncPlan::default();
        if let Some(s) = sa.size {
            if s != rec.size {
                plan = self.stage_truncate(id, ino, &mut rec, s, &mut b)?;
            }
            // truncate(2) and O_TRUNC mark mtime even when the size stays (as Linux does).
            rec.mtime = now;
        }
        if let Some(m) = sa.mode {
            rec.mode = m & 0o7777;
        }
        if let Some(u) = sa.uid {
            rec.uid = u;
        }
        if let Some(g) = sa.gid {
            rec.gid = g;
        }
        if let Some(t) = sa.atime {
            rec.atime = t;
        }
        if let Some(t) = sa.mtime {
            rec.mtime = t;
        }
        rec.ctime = now;
        self.stage_inode(&mut b, ino, &rec)?;
        let tail_blocks = self.reserve_versions(id, plan.tail_new_version as u64)?;
        if let Err(e) = self.apply_meta(id, b) {
            self.unreserve_versions(id, &tail_blocks);
            return Err(e);
        }
        self.finish_truncate(id, ino, plan, tail_blocks)?;
        self.claim(id, &[ino]);
        self.getattr(ino)
    }

    /// Promises `n` new versions to `id`: `n` pending blocks and `n` log entries.
    pub(crate) fn reserve_versions(&mut self, id: u64, n: u64) -> Result<Vec<u64>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        self.ensure_log(n, "redo entries of this call")?;
        let blocks = self.take_blocks(n, "pending blocks of this call")?;
        if self.log.available() < n {
            self.give_back_blocks(&blocks);
            return Err(PmemFsError::NoSpace(format!(
                "{n} log entries needed for redo entries, {} available",
                self.log.available()
            )));
        }
        self.log.reserved += n;
        self.txs.get_mut(&id).expect("open").reserved += n;
        // Pair of check_invariants' log-space check: a promise the free slots can keep.
        assert!(
            self.log.reserved <= self.log.free.len() as u64,
            "log.reserved {} exceeds the {} free slots after reserving {n}",
            self.log.reserved,
            self.log.free.len()
        );
        Ok(blocks)
    }

    pub(crate) fn unreserve_versions(&mut self, id: u64, blocks: &[u64]) {
        let n = blocks.len() as u64;
        self.give_back_blocks(blocks);
        release(
            &mut self.log.reserved,
            n,
            "log.reserved (unreserve_versions)",
        );
        release(
            &mut self.txs.get_mut(&id).expect("open").reserved,
            n,
            "tx.reserved (unreserve_versions)",
        );
    }

    /// Stores `data` at `off` into `id`'s open versions (new ones take `blocks`, reserved).
    pub(crate) fn put_data(
        &mut self,
        id: u64,
        ino: Ino,
        off: u64,
        data: &[u8],
        mut blocks: Vec<u64>,
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let lbn = pos / BLOCK;
            let bend = ((lbn + 1) * BLOCK).min(end);
            let chunk = &data[(pos - off) as usize..(bend - off) as usize];
            let (open, edges, new) =
                self.open_version(id, ino, lbn, pos % BLOCK, chunk.len() as u64, &mut blocks)?;
            if new {
                self.txs.get_mut(&id).expect("open").data.insert((ino, lbn));
            }
            self.put_block_lines(ino, lbn, open, pos % BLOCK, chunk, edges)?;
            pos = bend;
        }
        if !blocks.is_empty() {
            return Err(PmemFsError::Internal(format!(
                "{} reserved pending blocks unused",
                blocks.len()
            )));
        }
        Ok(())
    }

    /// One index lookup for a write of `len` bytes at byte `at` of block `lbn`: `id`'s open
    /// version of it (made from a reserved block of `blocks` if there is none; true when
    /// made), its bitmap already covering the lines written, and for each partial line at
    /// either end where its newest content is (why: a lookup per line and one more for the
    /// bitmap were 15 % of a transaction's CPU time).
    #[allow(clippy::type_complexity)]
    fn open_version(
        &mut self,
        id: u64,
        ino: Ino,
        lbn: u64,
        at: u64,
        len: u64,
        blocks: &mut Vec<u64>,
    ) -> Result<(Open, [Option<(u64, LineSrc)>; 2], bool)> {
        assert!(
            len > 0 && at + len <= BLOCK,
            "{len} bytes at {at} of block {lbn}"
        );
        let v = self.index.entry(ino, lbn);
        let (mut open, new) = match v.open {
            Some(o) if o.tx == id => (o, false),
            Some(o) => {
                return Err(PmemFsError::Internal(format!(
                "block {lbn} of inode {ino} has an open version of transaction {}, written by {id}",
                o.tx
            )))
            }
            None => {
                let pblk = blocks.pop().ok_or_else(|| {
                    PmemFsError::Internal("fewer pending blocks reserved than needed".into())
                })?;
                (
                    Open {
                        tx: id,
                        pblk,
                        bitmap: 0,
                    },
                    true,
                )
            }
        };
        let end = at + len;
        let (first, last) = (at / LINE, (end - 1) / LINE);
        let mut edges = [None, None];
        for (k, line) in [first, last].into_iter().enumerate() {
            let partial = at.max(line * LINE) != line * LINE
                || end.min((line + 1) * LINE) != (line + 1) * LINE;
            if !partial || (k == 1 && first == last) {
                continue;
            }
            // A partial line starts from its newest content: this version's own, else the
            // newest committed one, else the home block.
            let src = if open.bitmap >> line & 1 == 1 {
                LineSrc::Block(open.pblk)
            } else {
                v.line_source(line, false)
                    .map_or(LineSrc::Home, LineSrc::Block)
            };
            edges[k] = Some((line, src));
        }
        let span = last - first + 1;
        open.bitmap |= if span == 64 {
            u64::MAX
        } else {
            ((1u64 << span) - 1) << first
        };
        v.open = Some(open);
        Ok((open, edges, new))
    }

    /// Writes `chunk` at byte `at` of block `lbn` into its open version `open` (whose
    /// bitmap already covers it): the whole lines it covers in one store (a large write is
    /// mostly whole lines), the partial lines `edges` merged with their newest content.
    fn put_block_lines(
        &mut self,
        ino: Ino,
        lbn: u64,
        open: Open,
        at: u64,
        chunk: &[u8],
        edges: [Option<(u64, LineSrc)>; 2],
    ) -> Result<()> {
        let end = at + chunk.len() as u64;
        assert!(
            end <= BLOCK,
            "a write of {} bytes at {at} crosses block {lbn}",
            chunk.len()
        );
        // Whole lines: from the first line boundary at or after `at` to the last at or
        // before `end`.
        let (w0, w1) = (at.next_multiple_of(LINE), end / LINE * LINE);
        if w0 < w1 {
            let src = &chunk[(w0 - at) as usize..(w1 - at) as usize];
            self.dev.write(open.pblk * BLOCK + w0, src)?;
        }
        for (line, src) in edges.into_iter().flatten() {
            assert!(
                open.bitmap >> line & 1 == 1,
                "line {line} written outside its bitmap"
            );
            let (l0, l1) = (line * LINE, (line + 1) * LINE);
            let (p, q) = (at.max(l0), end.min(l1));
            assert!(p != l0 || q != l1, "line {line} of block {lbn} is whole");
            let from = match src {
                LineSrc::Block(b) => b,
                LineSrc::Home => self.home(ino, lbn)?,
            };
            let mut buf = [0u8; LINE as usize];
            if from != 0 {
                self.dev.read(from * BLOCK + l0, &mut buf)?;
            }
            buf[(p - l0) as usize..(q - l0) as usize]
                .copy_from_slice(&chunk[(p - at) as usize..(q - at) as usize]);
            self.dev.write(open.pblk * BLOCK + l0, &buf)?;
        }
        Ok(())
    }

    /// Plans a size change of `ino` to `new` (stages pointer words to clear in `b`). A
    /// shrink first checkpoints the file's committed versions of the blocks it drops, so no
    /// redo entry ever names a block a committed truncation freed.
    pub(crate) fn stage_truncate(
        &mut self,
        id: u64,
        ino: Ino,
        rec: &mut InodeRec,
        new: u64,
        b: &mut Batch,
    ) -> Result<TruncPlan> {
        let mut plan = TruncPlan::default();
        if new >= rec.size {
            // Bytes past the old size already read as zeros.
            rec.size = new;
            return Ok(plan);
        }
        let cut = new.div_ceil(BLOCK);
        self.checkpoint_file_range(ino, cut..MAX_BLOCKS, "truncate")?;
        plan.drop_open = self
            .index
            .file(ino)
            .filter(|(l, v)| *l >= cut && v.open.is_some_and(|o| o.tx == id))
            .map(|(l, _)| l)
            .collect();
        self.stage_unmap_from(ino, cut, b, &mut plan.freed)?;
        if !new.is_multiple_of(BLOCK) {
            let lbn = new / BLOCK;
            let versions = self.index.get(ino, lbn);
            if self.home(ino, lbn)? != 0 || versions.is_some() {
                plan.tail = Some(new);
                plan.tail_new_version = versions.is_none_or(|v| v.open.is_none());
            }
        }
        rec.size = new;
        Ok(plan)
    }

    /// After the truncation's batch is applied: drop the open versions beyond, zero the tail.
    pub(crate) fn finish_truncate(
        &mut self,
        id: u64,
        ino: Ino,
        plan: TruncPlan,
        tail_blocks: Vec<u64>,
    ) -> Result<()> {
        self.drop_open_versions(id, ino, &plan.drop_open);
        self.txs
            .get_mut(&id)
            .expect("open")
            .freed_blocks
            .extend(plan.freed);
        if let Some(new) = plan.tail {
            let zeros = vec![0u8; (BLOCK - new % BLOCK) as usize];
            self.put_data(id, ino, new, &zeros, tail_blocks)?;
        }
        Ok(())
    }

    /// Stages zeros in every pointer mapping a block at or beyond `cut` (and in pointers to
    /// indirect blocks left empty), collecting the blocks that become free.
    fn stage_unmap_from(
        &self,
        ino: Ino,
        cut: u64,
        b: &mut Batch,
        freed: &mut Vec<u64>,
    ) -> Result<()> {
        let base = self.g.inode_off(ino);
        for i in cut.min(NDIRECT)..NDIRECT {
            let off = base + I_DIRECT + i * 8;
            let p = self.ptr(off, || format!("inode {ino}'s pointer {i}"))?;
            if p != 0 {
                b.put(off, 0);
                freed.push(p);
            }
        }
        for (root, depth) in TREES {
            let x = self.ptr(base + root, || {
                format!("an indirect pointer of inode {ino}")
            })?;
            let first = tree_first_lbn(depth);
            if x == 0 || cut >= first + span_blocks(depth) * PTRS_PER_BLOCK {
                continue;
            }
            if cut <= first {
                b.put(base + root, 0);
                let mut all = Vec::new();
                self.walk_tree(ino, x, depth, first, &mut all)?;
                freed.extend(all.into_iter().map(|(_, p)| p));
            } else {
                self.stage_unmap_below(ino, (x, depth, first), cut, b, freed)?;
            }
        }
        Ok(())
    }

    /// Inside indirect block `x` (`depth` levels above the data, mapping from `first`),
    /// which `cut` falls in: zeros in the pointers wholly at or beyond `cut`, recursing
    /// into the one `cut` falls in (an indirect block left empty stays: its parent still
    /// names it).
    fn stage_unmap_below(
        &self,
        ino: Ino,
        (x, depth, first): (u64, u32, u64),
        cut: u64,
        b: &mut Batch,
        freed: &mut Vec<u64>,
    ) -> Result<()> {
        let span = span_blocks(depth);
        assert!(cut > first && cut < first + span * PTRS_PER_BLOCK);
        for j in (cut - first) / span..PTRS_PER_BLOCK {
            let off = x * BLOCK + j * 8;
            let p = self.ptr(off, || format!("indirect block {x} of inode {ino}"))?;
            let lo = first + j * span;
            if p == 0 {
                continue;
            }
            if cut <= lo {
                b.put(off, 0);
                if depth == 1 {
                    freed.push(p);
                } else {
                    let mut all = Vec::new();
                    self.walk_tree(ino, p, depth - 1, lo, &mut all)?;
                    freed.extend(all.into_iter().map(|(_, q)| q));
                }
            } else if depth > 1 {
                self.stage_unmap_below(ino, (p, depth - 1, lo), cut, b, freed)?;
            }
        }
        Ok(())
    }
}

/// [`PmemFs::seek_data`] over the sorted, distinct data blocks `lbns` of a file of `size`
/// bytes, from byte `off < size`.
fn seek_in(lbns: &[u64], size: u64, off: u64, data: bool) -> Result<u64> {
    assert!(off < size, "seek from {off} of a file of {size} bytes");
    assert!(
        lbns.windows(2).all(|w| w[0] < w[1]),
        "data blocks not sorted"
    );
    let b = off / BLOCK;
    if data {
        let at = match lbns.binary_search(&b) {
            Ok(_) => off,
            Err(i) => lbns.get(i).map_or(size, |l| l * BLOCK),
        };
        return if at >= size {
            Err(PmemFsError::PastEnd)
        } else {
            Ok(at)
        };
    }
    // SEEK_HOLE: the end of the run of data blocks that starts at (or contains) b.
    let Ok(mut i) = lbns.binary_search(&b) else {
        return Ok(off);
    };
    while lbns.get(i + 1) == Some(&(lbns[i] + 1)) {
        i += 1;
    }
    Ok(((lbns[i] + 1) * BLOCK).min(size))
}

/// Open files and their bytes. The caller's context is its open AD-transaction (None: a
/// legacy call, committed before it returns).
impl<P: PmemDevice> FileData for PmemFs<P> {
    /// Counts an open of `ino` (a FUSE open or opendir). ENOENT when `ino` is not in use.
    fn open(&mut self, ino: Ino) -> Result<()> {
        self.inode(ino)?;
        // An orphan waiting to be freed can be opened again (Linux reopens an unlinked
        // file through /proc/PID/fd): its next last release decides again.
        self.zombies.remove(&ino);
        let c = self.opens.entry(ino).or_default();
        *c = c.checked_add(1).ok_or_else(|| {
            PmemFsError::Invalid(format!("inode {ino} is open {} times already", u32::MAX))
        })?;
        Ok(())
    }

    /// Counts a close of `ino`; the last close of an orphan frees it (see
    /// [`crate::orphan`]). A release of an inode that is not open does nothing (as the block
    /// engine's: FUSE may release a handle whose inode an aborted transaction took back).
    fn release(&mut self, _: Option<TxId>, ino: Ino) -> Result<()> {
        let Some(c) = self.opens.get_mut(&ino) else {
            return Ok(());
        };
        // A count of 0 is never stored (it is removed), so this cannot underflow.
        *c = (c.checked_sub(1))
            .unwrap_or_else(|| panic!("open count of inode {ino} is 0 while in the map"));
        if *c > 0 {
            return Ok(());
        }
        self.opens.remove(&ino);
        if !self.is_orphan(ino)? {
            return Ok(());
        }
        if self.owner.contains_key(&ino) {
            self.zombies.insert(ino);
            return Ok(());
        }
        match self.free_orphan(ino) {
            // The close itself succeeded: the free waits for the next transaction end
            // (or the next mount) rather than failing the release.
            Err(PmemFsError::NoSpace(_)) => {
                self.zombies.insert(ino);
                Ok(())
            }
            r => r,
        }
    }

    fn read(&mut self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        self.read_shared(ino, off, len)
    }

    /// Writes `data` at `off` (extending the file as needed).
    fn write(&mut self, tx: Option<TxId>, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        self.mutate(tx, |fs, id| fs.do_write(id, ino, off, data))
    }

    /// Changes attributes; a size is a truncation or extension (extension reads as zeros).
    fn setattr(&mut self, tx: Option<TxId>, ino: Ino, sa: SetAttr) -> Result<Attr> {
        self.mutate(tx, |fs, id| fs.do_setattr(id, ino, &sa))
    }

    /// Every call is durable when it returns (a legacy call commits; a transaction's
    /// changes are durable at its commit): fsync has nothing left to do (002 §III-G).
    fn fsync(&mut self, _: Option<TxId>, ino: Ino, _datasync: bool) -> Result<()> {
        self.inode(ino).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_in_finds_data_and_holes_at_block_granularity() {
        let b = BLOCK;
        // Blocks 1, 2 and 5 hold data in a file of 6.5 blocks.
        let lbns = [1, 2, 5];
        let size = 6 * b + b / 2;
        assert_eq!(seek_in(&lbns, size, 0, true).unwrap(), b);
        assert_eq!(seek_in(&lbns, size, b + 7, true).unwrap(), b + 7);
        assert_eq!(seek_in(&lbns, size, 3 * b, true).unwrap(), 5 * b);
        assert!(matches!(
            seek_in(&lbns, size, 6 * b, true),
            Err(PmemFsError::PastEnd)
        ));
        assert_eq!(seek_in(&lbns, size, 0, false).unwrap(), 0);
        assert_eq!(seek_in(&lbns, size, b, false).unwrap(), 3 * b);
        assert_eq!(seek_in(&lbns, size, 5 * b + 1, false).unwrap(), 6 * b);
        // The last block with data: the hole is the end of the file.
        assert_eq!(seek_in(&[0, 1], 2 * b - 3, 5, false).unwrap(), 2 * b - 3);
        // No data at all.
        assert!(matches!(
            seek_in(&[], 10, 0, true),
            Err(PmemFsError::PastEnd)
        ));
        assert_eq!(seek_in(&[], 10, 3, false).unwrap(), 3);
    }
}
