//! The block engine's invariants, checked as a whole (issue 25 item 5): what must hold
//! between calls, for the crash simulation to call after every step and for tests.
//!
//! [`Fs::check_invariants`] checks, returning the first violation as
//! [`FsError::Internal`] (never a panic: a violation is an engine bug, reported with what
//! broke):
//! * **metadata**: the durable metadata passes [`recovery::check_meta`] with the
//!   checkpoint's snapshot runs (what mount would accept), and so does the live metadata;
//! * **free space, derived vs counted**: the allocator's count equals its runs, which are
//!   coalesced and inside the data area; free runs, runs waiting for their commit to be
//!   durable, durable extents and the snapshot runs tile the data area exactly (no block
//!   both free and referenced, none lost); every live extent is a durable one (data is
//!   allocated at commit), and `freeing` is what durable holds beyond live;
//! * **reservations**: `dirty_blocks` counts the dirty cache, `reserved` is dirty blocks
//!   plus preallocation promises; dirty and preallocating inodes are live files;
//! * **inode numbers**: free and pending numbers are below `next_ino` and name no inode;
//! * **tickets and positions**: durable ≤ written, `carried` ≤ durable, the checkpoint's
//!   tickets ≤ the engine's, the journal head inside the journal; commits in flight in
//!   ticket order, above the durable ticket, their bytes counted;
//! * **streams**: each stream's pending operations in real-time order, committed calls ≤
//!   calls made; region streams in the region range.
//!
//! A poisoned engine (a device write failed mid-commit) is only checked for what stays
//! true then: its memory may disagree with the media by definition. A read-only mount
//! skips the space tiling: the blocks of orphans it found stay taken, named by nothing.
//!
//! Cost: linear in the metadata (two `check_meta` runs and one sort of every extent), so
//! the simulation's small file systems afford it after every call.

use super::*;
use crate::meta::Inode;

fn violation(s: String) -> FsError {
    FsError::Internal(format!("invariant violated: {s}"))
}

/// Sorted, merged runs: start → end (exclusive).
type Cover = BTreeMap<u64, u64>;

fn file_runs(m: &Meta) -> impl Iterator<Item = (u64, u64, Ino)> + '_ {
    m.inodes.iter().flat_map(|(&i, n): (&Ino, &Inode)| {
        n.extents()
            .into_iter()
            .flat_map(move |e| e.values().map(move |x| (x.pblk, x.len, i)))
    })
}

impl<D: BlockDevice> Fs<D> {
    /// Checks every invariant between calls (see the module documentation); the first
    /// violation is returned as [`FsError::Internal`].
    pub fn check_invariants(&self) -> Result<()> {
        self.check_tickets()?;
        self.check_streams()?;
        if self.poisoned.is_some() {
            return Ok(());
        }
        self.check_metadata()?;
        if !self.opts.read_only {
            // Read-only, orphans' blocks stay taken until a read-write mount checkpoints.
            self.check_space()?;
        }
        self.check_reservations()?;
        self.check_inode_numbers()
    }

    /// Both metadata states pass mount's definition of valid.
    fn check_metadata(&self) -> Result<()> {
        let durable = recovery::check_meta(&self.durable, &self.sb, &self.cp.meta_runs());
        if let Some(p) = durable.first() {
            return Err(violation(format!("durable metadata: {p}")));
        }
        let live = recovery::check_meta(&self.live, &self.sb, &[]);
        if let Some(p) = live.first() {
            return Err(violation(format!("live metadata: {p}")));
        }
        Ok(())
    }

    /// The allocator's runs: counted right, coalesced, in the data area.
    fn check_allocator(&self) -> Result<()> {
        let (lo, hi) = (self.sb.data_start(), self.sb.blocks);
        let mut sum = 0u64;
        let mut prev_end: Option<u64> = None;
        for (s, l) in self.alloc.free_runs() {
            if l == 0 || s < lo || s.saturating_add(l) > hi {
                return Err(violation(format!(
                    "free run {s}+{l} is empty or outside the data area {lo}..{hi}"
                )));
            }
            if prev_end.is_some_and(|e| e >= s) {
                return Err(violation(format!(
                    "free run {s}+{l} touches or overlaps the run before (ending at {prev_end:?})"
                )));
            }
            prev_end = Some(s + l);
            sum += l;
        }
        if sum != self.alloc.free_blocks() {
            return Err(violation(format!(
                "the allocator counts {} free blocks, its runs hold {sum}",
                self.alloc.free_blocks()
            )));
        }
        Ok(())
    }

    /// Free, pending, durable and snapshot runs tile the data area; live ⊆ durable.
    fn check_space(&self) -> Result<()> {
        self.check_allocator()?;
        let mut runs: Vec<(u64, u64, String)> = Vec::new();
        runs.extend(self.alloc.free_runs().map(|(s, l)| (s, l, "free".into())));
        runs.extend(
            self.alloc
                .pending_runs()
                .iter()
                .map(|&(q, s, l)| (s, l, format!("freed by commit {q}"))),
        );
        runs.extend(
            self.cp
                .meta_runs()
                .into_iter()
                .map(|(s, l)| (s, l, "the snapshot".into())),
        );
        let durable_blocks: u64 = file_runs(&self.durable).map(|r| r.1).sum();
        runs.extend(file_runs(&self.durable).map(|(s, l, i)| (s, l, format!("durable inode {i}"))));
        runs.sort_unstable_by_key(|r| r.0);
        let mut at = self.sb.data_start();
        for (s, l, what) in &runs {
            if *s < at {
                return Err(violation(format!(
                    "device block {s} ({what}) is also in the run before, or before the data area"
                )));
            }
            if *s > at {
                return Err(violation(format!(
                    "device blocks {at}..{s} are neither free, pending, referenced nor the snapshot (lost)"
                )));
            }
            at = s.saturating_add(*l);
        }
        if at != self.sb.blocks {
            return Err(violation(format!(
                "the runs end at block {at}, the device has {}",
                self.sb.blocks
            )));
        }
        self.check_live_in_durable(durable_blocks)
    }

    /// Every live extent lies in a durable one; `freeing` is the difference.
    fn check_live_in_durable(&self, durable_blocks: u64) -> Result<()> {
        let mut cover = Cover::new();
        let mut sorted: Vec<(u64, u64)> = file_runs(&self.durable).map(|r| (r.0, r.1)).collect();
        sorted.sort_unstable();
        for (s, l) in sorted {
            match cover.iter_mut().next_back() {
                Some((_, e)) if *e == s => *e = s + l,
                _ => {
                    cover.insert(s, s + l);
                }
            }
        }
        let mut live_blocks = 0u64;
        for (s, l, i) in file_runs(&self.live) {
            let inside = cover
                .range(..=s)
                .next_back()
                .is_some_and(|(_, &e)| s.saturating_add(l) <= e);
            if !inside {
                return Err(violation(format!(
                    "live inode {i} maps device blocks {s}+{l}, which durable metadata does not"
                )));
            }
            live_blocks += l;
        }
        if durable_blocks.checked_sub(live_blocks) != Some(self.freeing) {
            return Err(violation(format!(
                "freeing is {} but durable extents hold {durable_blocks} blocks and live ones {live_blocks}",
                self.freeing
            )));
        }
        Ok(())
    }

    /// Dirty-block and reservation counters equal what they count.
    fn check_reservations(&self) -> Result<()> {
        let dirty: u64 = self.dirty.values().map(|d| d.len() as u64).sum();
        if dirty != self.dirty_blocks {
            return Err(violation(format!(
                "dirty_blocks is {}, the dirty cache holds {dirty}",
                self.dirty_blocks
            )));
        }
        let promised: u64 = self.falloc.values().map(|f| f.1).sum();
        if self.reserved != dirty + promised {
            return Err(violation(format!(
                "reserved is {}, dirty blocks {dirty} + preallocation {promised} = {}",
                self.reserved,
                dirty + promised
            )));
        }
        let not_file = |i: &Ino| self.live.get(*i).is_none_or(|n| n.kind != FileType::File);
        if let Some(i) = self
            .dirty
            .keys()
            .chain(self.falloc.keys())
            .find(|i| not_file(i))
        {
            return Err(violation(format!(
                "inode {i} has dirty blocks or preallocation but is not a live file"
            )));
        }
        self.check_room_promise()
    }

    /// Once promised, the free blocks cover the data reserved and the metadata reserve:
    /// the state on the media leaves room for the base snapshot the next mount may write.
    fn check_room_promise(&self) -> Result<()> {
        if self.room_promise_breaks > 0 {
            return Err(violation(format!(
                "{} checkpoint(s) left the promised metadata reserve short",
                self.room_promise_breaks
            )));
        }
        if !self.room_promised || self.opts.read_only || self.room_held() {
            return Ok(());
        }
        Err(violation(format!(
            "the metadata reserve does not hold: {} blocks free, {} reserved for written data, {} kept for the next metadata snapshot",
            self.alloc.free_blocks(),
            self.reserved,
            self.meta_reserve()
        )))
    }

    /// Free and pending inode numbers: handed out before, naming nothing now.
    fn check_inode_numbers(&self) -> Result<()> {
        let next = self.live.next_ino.min(self.durable.next_ino);
        let pending = self.pending_inos.iter().map(|p| p.1);
        for i in self.free_inos.iter().copied().chain(pending) {
            if i <= ROOT || i >= next {
                return Err(violation(format!(
                    "free inode number {i} is outside 2..{next}"
                )));
            }
            if self.live.get(i).is_some() || self.durable.get(i).is_some() {
                return Err(violation(format!(
                    "inode number {i} is free or pending but names an inode"
                )));
            }
        }
        if let Some(t) = self
            .tmpfiles
            .iter()
            .find(|&&t| self.live.get(t).is_none_or(|n| n.nlink != 0))
        {
            return Err(violation(format!(
                "tmpfile {t} is not a live inode without links"
            )));
        }
        Ok(())
    }

    /// Durable ≤ written; positions inside their areas; commits in flight ordered.
    fn check_tickets(&self) -> Result<()> {
        let (durable, written) = (self.tickets.durable(), self.written_ticket());
        if durable > written || self.tickets.carried() > durable {
            return Err(violation(format!(
                "tickets out of order: carried {} ≤ durable {durable} ≤ written {written} expected",
                self.tickets.carried()
            )));
        }
        if self.cp.next_seq > self.next_seq || self.cp.durable_upto > durable {
            return Err(violation(format!(
                "the checkpoint's tickets (next {}, durable {}) are ahead of the engine's (next {}, durable {durable})",
                self.cp.next_seq, self.cp.durable_upto, self.next_seq
            )));
        }
        if self.jhead < self.sb.journal_start || self.jhead > self.sb.journal_end() {
            return Err(violation(format!(
                "journal head {} outside the journal {}..={}",
                self.jhead,
                self.sb.journal_start,
                self.sb.journal_end()
            )));
        }
        let inflight = self.pending_io(u64::MAX);
        let mut last = durable;
        for c in &inflight {
            if c.seq() <= last || c.seq() > written {
                return Err(violation(format!(
                    "commit {} in flight is not above {last} (durable {durable}) and at most written {written}",
                    c.seq()
                )));
            }
            last = c.seq();
        }
        let bytes: u64 = inflight.iter().map(|c| c.bytes()).sum();
        if bytes != self.inflight_bytes() {
            return Err(violation(format!(
                "inflight bytes {} but the commits in flight write {bytes}",
                self.inflight_bytes()
            )));
        }
        Ok(())
    }

    /// Streams' pending operations in real-time order; call counts ordered.
    fn check_streams(&self) -> Result<()> {
        for (id, st) in &self.streams.streams {
            if st.committed > st.logged {
                return Err(violation(format!(
                    "stream {id}: {} calls committed of {} made",
                    st.committed, st.logged
                )));
            }
            if let Some(w) = st.ops.windows(2).find(|w| w[0].0 >= w[1].0) {
                return Err(violation(format!(
                    "stream {id}: pending operations out of real-time order ({} then {})",
                    w[0].0, w[1].0
                )));
            }
        }
        if let Some(r) = self.regions.ids().find(|&r| r < REGION_BASE) {
            return Err(violation(format!(
                "region stream {r} is below the region range"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use intactfs_device::SimDevice;

    const O: Owner = Owner { uid: 0, gid: 0 };

    /// A mounted engine with a synced file `a` (4 blocks) and a dirty file `b`.
    fn busy() -> (Fs<SimDevice>, Ino) {
        let mut dev = SimDevice::new(BLOCK, 2048).expect("device");
        mkfs(&mut dev, &MkfsOptions::default()).expect("mkfs");
        let mut fs = Fs::mount(dev, MountOptions::default()).expect("mount").0;
        fs.check_invariants().expect("after mount");
        let a = fs.create(0, ROOT, b"a", 0o644, O).expect("a").ino;
        fs.write(0, a, 0, &[1u8; 4 * BLOCK]).expect("write a");
        fs.sync().expect("sync");
        let b = fs.create(0, ROOT, b"b", 0o644, O).expect("b").ino;
        fs.write(0, b, 0, &[2u8; 3 * BLOCK]).expect("write b");
        fs.check_invariants().expect("busy");
        (fs, a)
    }

    fn violated(fs: &Fs<SimDevice>, what: &str) {
        let e = fs
            .check_invariants()
            .expect_err("the corruption must be seen");
        assert!(e.to_string().contains(what), "expected {what:?} in: {e}");
    }

    #[test]
    fn a_busy_engine_holds_them_through_unlink_and_sync() {
        let (mut fs, _) = busy();
        fs.unlink(0, ROOT, b"a").expect("unlink");
        fs.check_invariants().expect("after unlink (freeing > 0)");
        fs.sync().expect("sync");
        fs.check_invariants().expect("after sync");
    }

    #[test]
    fn a_leaked_reservation_is_reported() {
        let (mut fs, _) = busy();
        fs.reserved += 1;
        violated(&fs, "reserved is");
    }

    /// Metadata growth admitted past the free blocks (as a call that skipped the reserve
    /// check would leave): the promise of room for the next mount's base is broken.
    #[test]
    fn a_broken_room_promise_is_reported() {
        let (mut fs, _) = busy();
        assert!(fs.room_promised, "a fresh mount's reserve holds");
        fs.meta_growth_bytes += fs.alloc.free_blocks() * BLOCK as u64;
        violated(&fs, "the metadata reserve does not hold");
    }

    /// A checkpoint that leaves the promised reserve short does not abort the mount; it
    /// is counted, and every later check reports it.
    #[test]
    fn a_checkpoint_breaking_the_promise_is_counted_not_fatal() {
        let (mut fs, _) = busy();
        assert!(fs.room_promised);
        fs.meta_growth_bytes += fs.alloc.free_blocks() * BLOCK as u64;
        fs.keep_room_promise();
        assert_eq!(fs.room_promise_breaks, 1);
        assert!(!fs.room_promised);
        fs.meta_growth_bytes = 0;
        violated(&fs, "left the promised metadata reserve short");
    }

    #[test]
    fn a_miscounted_dirty_block_is_reported() {
        let (mut fs, _) = busy();
        fs.dirty_blocks = fs
            .dirty_blocks
            .checked_sub(1)
            .expect("busy() leaves a dirty block");
        violated(&fs, "dirty_blocks is");
    }

    #[test]
    fn a_referenced_block_that_is_also_free_is_reported() {
        let (mut fs, a) = busy();
        let p = fs
            .durable
            .get(a)
            .and_then(|n| n.extents())
            .expect("a file")
            .values()
            .next()
            .expect("an extent")
            .pblk;
        fs.alloc.release(p, 1);
        violated(&fs, &format!("device block {p}"));
    }

    #[test]
    fn a_lost_block_is_reported() {
        let (mut fs, _) = busy();
        let run = fs.alloc.alloc(1);
        assert_eq!(run.len(), 1);
        violated(&fs, "lost");
    }

    #[test]
    fn tickets_out_of_order_are_reported() {
        let (mut fs, _) = busy();
        let t = fs.written_ticket() + 1;
        fs.tickets.force_durable(t);
        violated(&fs, "tickets out of order");
    }

    #[test]
    fn a_wrong_link_count_is_reported() {
        let (mut fs, a) = busy();
        fs.live.inodes.get_mut(&a).expect("a").nlink += 1;
        violated(&fs, "live metadata: inode");
    }
}
