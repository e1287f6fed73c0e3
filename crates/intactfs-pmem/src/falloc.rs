//! fallocate(2): preallocation (mode 0 and FALLOC_FL_KEEP_SIZE) and hole punching
//! (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE), each one undo-logged metadata batch like
//! every other change, so all-or-nothing across a crash and undone by an abort.
//!
//! The contract:
//! * **Allocate** maps every hole of the range (no home block, no version) to a new block of
//!   zeros; mode 0 also grows the size to the range's end. With KEEP_SIZE the blocks may lie
//!   past the end of the file: a regular file may map blocks beyond its size (mount and the
//!   invariants accept it), and they always read as zeros — allocation zeroes them, and
//!   nothing writes past the size without growing it (a shrink zeroes its tail and unmaps
//!   the rest, [`PmemFs::stage_truncate`]) — so a later grow reads zeros there as it must.
//! * **Punch** unmaps the whole blocks inside the range (freed when the call commits, as a
//!   truncation's) and writes zeros into the partial blocks at its edges (within the size).
//!
//! Why allocation is crash-safe: each new block (data or indirect) is zeroed and persisted
//! before any pointer names it; pointer words in blocks that already existed are logged
//! (restoring them unmaps the new blocks again, which mount then counts as free), words
//! inside a new indirect block are fresh (nothing durable names that block until its
//! parent's logged word does). An abort frees the new blocks with the transaction's other
//! new blocks.

use crate::error::{PmemFsError, Result};
use crate::invariants::release;
use crate::layout::*;
use crate::{Batch, Ino, PmemFs, TxId};
use intactfs_device::PmemDevice;
use std::collections::BTreeSet;

/// What a punch does once its metadata batch is applied.
#[derive(Debug, Default)]
struct PunchPlan {
    /// Pointer words to clear and the blocks they name (freed when the transaction
    /// commits).
    unmap: Vec<(u64, u64)>,
    /// Blocks whose open version (this transaction's) goes.
    drop_open: Vec<u64>,
    /// Partial blocks to zero within the size: (byte offset, bytes, needs a new version).
    edges: Vec<(u64, u64, bool)>,
}

impl PunchPlan {
    fn new_versions(&self) -> u64 {
        self.edges.iter().filter(|e| e.2).count() as u64
    }
}

impl<P: PmemDevice> PmemFs<P> {
    /// Preallocates [off, off+len) of `ino` (`keep_size`: FALLOC_FL_KEEP_SIZE, the size
    /// stays). EINVAL for length 0, EFBIG past the largest file, ENOSPC (nothing changed)
    /// when the blocks or the log run short.
    pub fn fallocate(
        &mut self,
        tx: Option<TxId>,
        ino: Ino,
        off: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<()> {
        self.mutate(tx, |fs, id| fs.do_fallocate(id, ino, (off, len), keep_size))
    }

    /// fallocate FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: [off, off+len) reads as zeros
    /// afterwards and the size stays; whole blocks inside it are unmapped.
    pub fn punch_hole(&mut self, tx: Option<TxId>, ino: Ino, off: u64, len: u64) -> Result<()> {
        self.mutate(tx, |fs, id| fs.do_punch(id, ino, off, len))
    }

    /// The checks both calls start with: a regular file, a nonzero length, not another
    /// transaction's. The inode.
    fn falloc_target(&self, id: u64, ino: Ino, len: u64) -> Result<InodeRec> {
        let rec = self.inode(ino)?;
        match rec.kind {
            FileType::File => {}
            FileType::Dir => return Err(PmemFsError::IsDir(format!("inode {ino}"))),
            k => return Err(PmemFsError::Invalid(format!("inode {ino} is a {k:?}"))),
        }
        if len == 0 {
            return Err(PmemFsError::Invalid("fallocate of length 0".into()));
        }
        self.check_owner(id, ino)?;
        Ok(rec)
    }

    fn do_fallocate(
        &mut self,
        id: u64,
        ino: Ino,
        (off, len): (u64, u64),
        keep_size: bool,
    ) -> Result<()> {
        let mut rec = self.falloc_target(id, ino, len)?;
        let end = off
            .checked_add(len)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or_else(|| {
                PmemFsError::TooBig(format!(
                    "fallocate of {len} bytes at {off} ends beyond the largest file ({MAX_FILE_SIZE} bytes)"
                ))
            })?;
        // No committed version of this file may be checkpointed while the batch is staged:
        // a checkpoint could name a new indirect block where the batch names another.
        self.checkpoint_file_range(ino, 0..MAX_BLOCKS, "fallocate")?;
        let holes = self.holes(ino, off / BLOCK, end.div_ceil(BLOCK))?;
        let data = self.take_blocks(holes.len() as u64, "fallocate")?;
        let mut b = Batch::default();
        let mut indirect = Vec::new();
        let staged = self.stage_maps(ino, &holes, &data, &mut b, &mut indirect);
        let now = self.now();
        if !keep_size && end > rec.size {
            rec.size = end;
            rec.mtime = now;
        }
        rec.ctime = now;
        let r = staged
            .and_then(|()| self.stage_inode(&mut b, ino, &rec))
            .and_then(|()| self.apply_meta(id, b));
        if let Err(e) = r {
            self.give_back_blocks(&data);
            self.give_back_blocks(&indirect);
            return Err(e);
        }
        let t = self.txs.get_mut(&id).expect("open");
        t.new_blocks.extend(data.iter().chain(&indirect));
        self.claim(id, &[ino]);
        Ok(())
    }

    /// The blocks in [b0, b1) of `ino` with neither a home block nor a version. ENOSPC first
    /// when they cannot fit the free blocks, even after a checkpoint frees the pending
    /// ones (a huge range is refused without a walk).
    fn holes(&mut self, ino: Ino, b0: u64, b1: u64) -> Result<Vec<u64>> {
        assert!(b0 < b1 && b1 <= MAX_BLOCKS, "block range {b0}..{b1}");
        let mut used = self.used_lbns(ino, b0, b1)?;
        if b1 - b0 - used.len() as u64 > self.free_blocks.len() as u64 {
            self.checkpoint_where(|_, _| true)?;
            self.flush_dead_commits()?;
            used = self.used_lbns(ino, b0, b1)?;
        }
        let want = b1 - b0 - used.len() as u64;
        if want > self.free_blocks.len() as u64 {
            return Err(PmemFsError::NoSpace(format!(
                "fallocate needs {want} blocks, {} free",
                self.free_blocks.len()
            )));
        }
        let holes: Vec<u64> = (b0..b1).filter(|l| !used.contains(l)).collect();
        assert_eq!(holes.len() as u64, want);
        Ok(holes)
    }

    /// The blocks in [b0, b1) of `ino` with a home block or a version.
    fn used_lbns(&self, ino: Ino, b0: u64, b1: u64) -> Result<BTreeSet<u64>> {
        Ok((self.mapped_blocks(ino)?.into_iter())
            .filter_map(|(l, _)| l)
            .chain(self.index.file(ino).map(|(l, _)| l))
            .filter(|l| (b0..b1).contains(l))
            .collect())
    }

    /// Stages pointers mapping each hole to its block of `data` (zeroed here), with the
    /// indirect blocks missing on the way (taken from the free blocks, zeroed, listed in
    /// `indirect`). ENOSPC when no block is left for an indirect one.
    fn stage_maps(
        &mut self,
        ino: Ino,
        holes: &[u64],
        data: &[u64],
        b: &mut Batch,
        indirect: &mut Vec<u64>,
    ) -> Result<()> {
        assert_eq!(holes.len(), data.len());
        let mut fresh: BTreeSet<u64> = BTreeSet::new();
        for (&lbn, &blk) in holes.iter().zip(data) {
            self.zero_falloc_block(blk)?;
            let off = self.stage_path(ino, lbn, b, &mut fresh, indirect)?;
            stage_word(b, &fresh, off, blk);
        }
        Ok(())
    }

    /// The pointer word mapping `lbn`, staging new indirect blocks where the path (as the
    /// batch sees it) has none.
    fn stage_path(
        &mut self,
        ino: Ino,
        lbn: u64,
        b: &mut Batch,
        fresh: &mut BTreeSet<u64>,
        indirect: &mut Vec<u64>,
    ) -> Result<u64> {
        let base = self.g.inode_off(ino);
        let (root, depth, idx) = match ptr_path(lbn) {
            Some(PtrPath::Direct(i)) => return Ok(base + I_DIRECT + i * 8),
            Some(PtrPath::Tree { root, depth, idx }) => (root, depth, idx),
            None => unreachable!("holes() keeps below MAX_BLOCKS"),
        };
        let mut off = base + root;
        for &i in &idx[..depth as usize] {
            let mut x = b.read(&self.dev, off)?;
            if x != 0 && !self.g.is_data_block(x) {
                return Err(PmemFsError::Corrupt(format!(
                    "an indirect pointer of inode {ino} names block {x}, outside the data area"
                )));
            }
            if x == 0 {
                x = self.free_blocks.pop_first().ok_or_else(|| {
                    PmemFsError::NoSpace("no block left for an indirect block".into())
                })?;
                indirect.push(x);
                self.zero_falloc_block(x)?;
                stage_word(b, fresh, off, x);
                fresh.insert(x);
            }
            off = x * BLOCK + i * 8;
        }
        Ok(off)
    }

    /// Zeros a block about to be named, persisted before the batch names it.
    fn zero_falloc_block(&mut self, blk: u64) -> Result<()> {
        if crate::mutation::active(crate::mutation::Mutation::FallocZerosNotPersisted) {
            self.dev.write(blk * BLOCK, &[0u8; BLOCK as usize])?;
            return Ok(());
        }
        self.zero_block(blk)
    }

    fn do_punch(&mut self, id: u64, ino: Ino, off: u64, len: u64) -> Result<()> {
        let mut rec = self.falloc_target(id, ino, len)?;
        let end = off
            .checked_add(len)
            .ok_or_else(|| PmemFsError::TooBig(format!("{len} bytes at {off} overflow")))?
            .min(MAX_FILE_SIZE);
        if off >= end {
            return Ok(());
        }
        let (full0, full1) = (off.div_ceil(BLOCK), end / BLOCK);
        // No redo entry may name a block this call unmaps (as for a truncation).
        self.checkpoint_file_range(ino, full0..full1, "punch hole")?;
        let mut plan = self.plan_punch(id, ino, (off, end), rec.size)?;
        let n = plan.new_versions();
        let checkpoints = self.stats.checkpoints;
        let mut blocks = self.reserve_versions(id, n)?;
        if self.stats.checkpoints != checkpoints {
            // The reservation checkpointed: an edge block may have a new home now.
            plan = self.plan_punch(id, ino, (off, end), rec.size)?;
            if plan.new_versions() != n {
                self.unreserve_versions(id, &blocks);
                return Err(PmemFsError::Internal(format!(
                    "punch of inode {ino}: {} new versions after a checkpoint, {n} reserved",
                    plan.new_versions()
                )));
            }
        }
        let mut b = Batch::default();
        for &(word, _) in &plan.unmap {
            b.put(word, 0);
        }
        let now = self.now();
        rec.mtime = now;
        rec.ctime = now;
        let r = (self.stage_inode(&mut b, ino, &rec)).and_then(|()| self.apply_meta(id, b));
        if let Err(e) = r {
            self.unreserve_versions(id, &blocks);
            return Err(e);
        }
        self.drop_open_versions(id, ino, &plan.drop_open);
        let t = self.txs.get_mut(&id).expect("open");
        t.freed_blocks
            .extend(plan.unmap.iter().map(|&(_, blk)| blk));
        for (at, n, new) in plan.edges {
            let mine = match new {
                true => vec![blocks.pop().expect("reserved above")],
                false => Vec::new(),
            };
            self.put_data(id, ino, at, &vec![0u8; n as usize], mine)?;
        }
        assert!(
            blocks.is_empty(),
            "{} reserved versions unused",
            blocks.len()
        );
        self.claim(id, &[ino]);
        Ok(())
    }

    /// What punching [off, end) of `ino` (of `size` bytes) does.
    fn plan_punch(
        &self,
        id: u64,
        ino: Ino,
        (off, end): (u64, u64),
        size: u64,
    ) -> Result<PunchPlan> {
        assert!(off < end, "empty punch {off}..{end}");
        let (full0, full1) = (off.div_ceil(BLOCK), end / BLOCK);
        let inside = |l: &u64| (full0..full1).contains(l);
        let mut plan = PunchPlan {
            unmap: self.mapped_words(ino, full0, full1)?,
            ..Default::default()
        };
        plan.drop_open = (self.index.file(ino))
            .filter(|(l, v)| inside(l) && v.open.is_some_and(|o| o.tx == id))
            .map(|(l, _)| l)
            .collect();
        let mut edges = vec![off / BLOCK];
        if end % BLOCK != 0 && end / BLOCK != off / BLOCK {
            edges.push(end / BLOCK);
        }
        for lbn in edges {
            let (a, z) = (off.max(lbn * BLOCK), end.min((lbn + 1) * BLOCK).min(size));
            if inside(&lbn) || a >= z {
                continue; // unmapped whole, or nothing inside the size
            }
            let versions = self.index.get(ino, lbn);
            if self.home(ino, lbn)? == 0 && versions.is_none() {
                continue; // a hole reads as zeros already
            }
            let new = versions.is_none_or(|v| v.open.is_none());
            plan.edges.push((a, z - a, new));
        }
        Ok(plan)
    }

    /// The pointer words (offset, block) mapping blocks [full0, full1) of `ino` (indirect
    /// blocks stay, even when left empty: their parents still name them).
    fn mapped_words(&self, ino: Ino, full0: u64, full1: u64) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        for (lbn, blk) in self.mapped_blocks(ino)? {
            let Some(l) = lbn.filter(|l| (full0..full1).contains(l)) else {
                continue;
            };
            let word = self.ptr_off(ino, l)?.ok_or_else(|| {
                PmemFsError::Internal(format!(
                    "block {l} of inode {ino} is mapped without a pointer"
                ))
            })?;
            out.push((word, blk));
        }
        Ok(out)
    }

    /// Drops `id`'s open versions of `lbns` of `ino` (their pending blocks are free at once:
    /// nothing durable names them).
    pub(crate) fn drop_open_versions(&mut self, id: u64, ino: Ino, lbns: &[u64]) {
        for &lbn in lbns {
            if let Some(o) = self.index.entry(ino, lbn).open.take() {
                assert_eq!(
                    o.tx, id,
                    "block {lbn} of inode {ino}: another transaction's version"
                );
                self.free_blocks.insert(o.pblk);
                release(
                    &mut self.log.reserved,
                    1,
                    "log.reserved (dropped open version)",
                );
                let t = self.txs.get_mut(&id).expect("open");
                release(&mut t.reserved, 1, "tx.reserved (dropped open version)");
                t.data.remove(&(ino, lbn));
            }
            self.index.tidy(ino, lbn);
        }
    }
}

/// Stages pointer word `off` := `v`: fresh inside a block this call allocated (nothing
/// durable names it yet), logged otherwise.
fn stage_word(b: &mut Batch, fresh: &BTreeSet<u64>, off: u64, v: u64) {
    if fresh.contains(&(off / BLOCK)) {
        b.put_fresh(off, v);
    } else {
        b.put(off, v);
    }
}
