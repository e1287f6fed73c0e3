//! The metadata reserve: free blocks kept for the next metadata snapshot, so that a full
//! file system can always write back (unmount, the checkpoint a full journal needs, the
//! checkpoint of the next mount).
//!
//! Why this is enough: the next checkpoint writes at most a new base snapshot of the
//! durable metadata (a delta that does not fit falls back to a base), plus a run table if
//! free space is split into many pieces. The base's size is bounded from above by
//! `meta_base_bytes` (the larger of the durable and the live metadata's encoded size at the
//! last checkpoint or mount) plus `meta_growth_bytes` (an upper bound of what every
//! operation logged since adds: [`growth_bytes`]) plus [`MAP_BYTES_PER_BLOCK`] for each
//! data block reserved but not yet mapped (its `Map` operation comes at commit). Calls
//! that would make the bound exceed the free blocks are refused with ENOSPC *before* they
//! change anything ([`Fs::meta_room`], [`Fs::room_for`]); calls that only shrink the
//! metadata (unlink, rmdir, removexattr, truncate) are never refused for it.
//! The reserve was sized at the last checkpoint only before issue 25; a namespace that
//! grew after it could leave no room for its own snapshot.
//!
//! Fields that change in place grow too: a `chown` to a large uid widens two varints, a
//! time set to now may take more bytes than the one it replaces. Calls that set them to
//! values of the caller's choosing (setattr) are charged their operation's bytes and can be
//! refused; what the engine sets itself without a room check (times to now, link counts,
//! sizes) is bounded by [`inplace_headroom_bytes`], which the measure adds for every inode.
//! Before this, 3,000 `chown`s on a full file system grew the metadata by 24 KB that no
//! bound counted, and the checkpoint after them left the reserve 14 blocks short
//! (`a_full_fs_keeps_its_room_through_chown_and_punch`); fsstress, which chowns to random
//! ids, broke the promise once that way in the mount test.

use super::Fs;
use crate::error::{FsError, Result};
use crate::layout::MAX_SNAPSHOT_EXTENTS;
use crate::meta::{Inode, LogOp, Meta, Time, BLOCK, MAX_FILE_SIZE};
use intactfs_device::BlockDevice;

/// Upper bound of the snapshot bytes one data block adds once mapped: a one-block `Map`
/// (inode, file block, device block, length, checksum) in the worst, fully fragmented case.
pub(super) const MAP_BYTES_PER_BLOCK: u64 = 48;
/// Per operation, what the snapshot may hold beyond the operation's own bytes: a new
/// inode's fixed fields (times, size, counts) and a directory entry's framing.
const INODE_BYTES: u64 = 128;
const OP_SLACK_BYTES: u64 = 16;
/// Blocks kept beyond the bound: varint fields that grow in place (sizes, times).
const RESERVE_SLACK_BLOCKS: u64 = 16;
/// Upper bound of one run-table entry's encoded bytes (two varints).
const TABLE_BYTES_PER_RUN: u64 = 20;
/// Upper bound of what one directory entry adds beyond its name: the name's hash (≤ 9
/// bytes), its length (≤ 2) and the inode (≤ 10), and a moved directory's parent (≤ 10).
const ENTRY_BYTES: u64 = 32;
/// Upper bound of one extent entry's bytes that a split adds: its file block (≤ 6),
/// device block (≤ 10), length (≤ 6) and checksum count (≤ 3), rounded up.
pub(super) const EXTENT_SPLIT_BYTES: u64 = 32;
/// Latest second the engine's clock gives (the year 2514; later clocks are clamped, as
/// ext4 stops at 2446): a time set to now takes at most [`NOW_TIME_BYTES`].
pub(super) const NOW_SEC_MAX: i64 = (1 << 34) - 1;
/// Widest encoding of a time up to [`NOW_SEC_MAX`]: zigzag seconds (< 2^35: 5 bytes) and
/// nanoseconds (< 10^9: 5 bytes).
const NOW_TIME_BYTES: u64 = 10;
/// Most links an inode can have (`MAX_LINKS` in engine.rs), for the width of its count.
const LINKS_MAX: u64 = 65_000;

/// How many bytes `op` can add to an encoded snapshot of the metadata it is applied to
/// (0 for operations that never make it larger by more than the slack).
pub(super) fn growth_bytes(op: &LogOp) -> u64 {
    let own = || {
        postcard::experimental::serialized_size(op).map_or(BLOCK as u64, |n| n as u64)
            + OP_SLACK_BYTES
    };
    match op {
        LogOp::Create { .. } | LogOp::Link { .. } => own() + INODE_BYTES,
        // A setattr's fields take at most the bytes they take in the operation.
        LogOp::SetXattr { value: Some(_), .. } | LogOp::Map { .. } | LogOp::SetAttr { .. } => own(),
        LogOp::Rename { dn, .. } => dn.len() as u64 + ENTRY_BYTES + OP_SLACK_BYTES,
        _ => 0,
    }
}

/// What a data operation made at commit adds: a `Map` its operation's bytes (budgeted by
/// [`MAP_BYTES_PER_BLOCK`] while its blocks were reserved); the commit's `SetSize` and
/// `SetAttr` only carry what writes set on the live inode, inside its headroom.
pub(super) fn data_growth_bytes(op: &LogOp) -> u64 {
    match op {
        LogOp::Map { .. } => growth_bytes(op),
        _ => 0,
    }
}

/// What a setattr of `a` on `ino` may add: its operation's bytes when it sets a field to a
/// value of the caller's choosing (mode, owner, times); a truncate alone adds nothing
/// beyond the size's headroom.
pub(super) fn setattr_growth_bytes(ino: crate::meta::Ino, a: &crate::engine::SetAttr) -> u64 {
    let widest = Time {
        sec: NOW_SEC_MAX,
        nsec: 999_999_999,
    };
    super::setattr_op(ino, a, widest).map_or(0, |op| growth_bytes(&op))
}

/// Whether a punch of file blocks `[start, end)` leaves a piece of an extent after the hole:
/// that piece becomes an entry of its own (a split) or moves to a wider key (a front trim).
fn punch_moves_a_piece(n: Option<&Inode>, start: u64, end: u64) -> bool {
    let Some(ext) = n.and_then(|n| n.extents()) else {
        return false;
    };
    start < end
        && ext
            .range(..end)
            .next_back()
            .is_some_and(|(&lblk, e)| lblk + e.len > end)
}

/// Bytes of the unsigned LEB128 varint postcard encodes `v` as.
fn varint_bytes(v: u64) -> u64 {
    (u64::from(64 - v.leading_zeros())).div_ceil(7).max(1)
}

/// Bytes of a time's encoding (zigzag seconds, nanoseconds).
fn time_bytes(t: &Time) -> u64 {
    let zigzag = ((t.sec << 1) ^ (t.sec >> 63)) as u64;
    varint_bytes(zigzag) + varint_bytes(u64::from(t.nsec))
}

/// How many bytes `n`'s fields may still grow in place by changes no room check guards:
/// times set to now (at most [`NOW_TIME_BYTES`] each), the link count (at most
/// [`LINKS_MAX`]) and the size (at most `MAX_FILE_SIZE`).
pub(super) fn inplace_headroom_bytes(n: &Inode) -> u64 {
    let times: u64 = [&n.atime, &n.mtime, &n.ctime]
        .into_iter()
        .map(|t| NOW_TIME_BYTES.saturating_sub(time_bytes(t)))
        .sum();
    let links = varint_bytes(LINKS_MAX).saturating_sub(varint_bytes(u64::from(n.nlink)));
    let size = varint_bytes(MAX_FILE_SIZE).saturating_sub(varint_bytes(n.size));
    times + links + size
}

/// The encoded size of `m` once every inode's unguarded fields have grown to their widest.
fn widest_bytes(m: &Meta) -> u64 {
    let bytes = postcard::experimental::serialized_size(m).map_or(u64::MAX / 4, |n| n as u64);
    bytes + m.inodes.values().map(inplace_headroom_bytes).sum::<u64>()
}

/// A time the engine sets itself, clamped to [`NOW_SEC_MAX`] (and a valid nanosecond).
pub(super) fn clamp_now(t: Time) -> Time {
    Time {
        sec: t.sec.min(NOW_SEC_MAX),
        nsec: t.nsec.min(999_999_999),
    }
}

/// Upper bound of what a `create` of `name` (and a symlink's `target`) adds.
pub(super) fn create_growth_bytes(name: &[u8], target: usize) -> u64 {
    // The Create operation holds the name, the target and ~50 bytes of fixed fields.
    name.len() as u64 + target as u64 + 64 + OP_SLACK_BYTES + INODE_BYTES
}

/// Blocks to keep free for a snapshot of at most `bytes` bytes: the snapshot, a quarter
/// more, a run table for the worst case of one block per extent (only a snapshot of more
/// blocks than a header lists extents can need one), and slack.
pub(super) fn reserve_blocks_for(bytes: u64) -> u64 {
    let n = bytes.div_ceil(BLOCK as u64).max(1);
    snapshot_blocks_for(bytes) + n / 4 + RESERVE_SLACK_BLOCKS
}

/// Blocks a base snapshot of at most `bytes` bytes takes: its own and, for the worst case
/// of one block per extent, a run table.
fn snapshot_blocks_for(bytes: u64) -> u64 {
    let n = bytes.div_ceil(BLOCK as u64).max(1);
    let table = if n > MAX_SNAPSHOT_EXTENTS as u64 {
        (n * TABLE_BYTES_PER_RUN).div_ceil(BLOCK as u64) + 1
    } else {
        0
    };
    n + table
}

impl<D: BlockDevice> Fs<D> {
    /// Upper bound of the next base snapshot's bytes, if `more_data` more data blocks were
    /// reserved and operations adding `more_meta` bytes were logged.
    pub(super) fn snapshot_bound_bytes(&self, more_data: u64, more_meta: u64) -> u64 {
        self.meta_base_bytes
            + self.meta_growth_bytes
            + more_meta
            + (self.reserved + more_data) * MAP_BYTES_PER_BLOCK
    }

    /// Blocks kept free now for the next metadata snapshot.
    pub(super) fn meta_reserve(&self) -> u64 {
        self.reserve_for_bound(self.snapshot_bound_bytes(0, 0))
    }

    /// Blocks to keep free while the next base snapshot is at most `bound_bytes`: room to
    /// write it, and room for what the checkpoint after it needs.
    ///
    /// The next base is written while the current chain is held, and becomes the chain
    /// the checkpoint after it is written beside. So the growth since the last checkpoint
    /// needs room twice: once in the base written next, and again in the reserve that
    /// base leaves behind. Before issue 25's last gap the reserve held it once: a commit
    /// by checkpoint of 58 blocks of new extended attributes, written from a 2-block chain
    /// with 107 blocks free (reserve 104), left 51 free beside a 58-block chain, and the
    /// next mount, which writes a base after a crash, fell back to read-only
    /// (fault-injection simulation, seed 302512). With `n` the base's blocks, `c` the
    /// chain's and `x` the reserve a fresh chain needs beyond its base, keeping
    /// `reserve(n) + max(delta room now, n - c + x)` before the checkpoint leaves at least
    /// `reserve(n) + x` after it, when the old chain's `c` blocks come back.
    fn reserve_for_bound(&self, bound_bytes: u64) -> u64 {
        let chain_blocks: u64 = self.cp.meta_runs().iter().map(|r| r.1).sum();
        let rebase_blocks = snapshot_blocks_for(bound_bytes).saturating_sub(chain_blocks)
            + self.fresh_delta_room_blocks(bound_bytes);
        reserve_blocks_for(bound_bytes) + self.delta_room_blocks().max(rebase_blocks)
    }

    /// The delta room ([`Self::delta_room_blocks`]) of a chain that a base of at most
    /// `bound_bytes` bytes has just started.
    fn fresh_delta_room_blocks(&self, bound_bytes: u64) -> u64 {
        let deltas = crate::layout::MAX_DELTAS as u64;
        let share_bytes = (self.opts.delta_share * bound_bytes as f64) as u64;
        let cap_bytes = share_bytes.min(deltas.saturating_mul(bound_bytes));
        cap_bytes.div_ceil(BLOCK as u64) + deltas
    }

    /// Blocks the deltas still allowed before the next base may take. They stay held
    /// until that base replaces the chain, and the base is written while they are held,
    /// so the reserve for the base comes on top of them (without this a delta of large
    /// extended attributes left a clean unmount's image unable to checkpoint again). The
    /// chain's bytes stay under `delta_share` of the base's (`Fs::checkpoint`), plus a
    /// block of rounding per delta.
    fn delta_room_blocks(&self) -> u64 {
        let chain_bytes: u64 = self.cp.deltas.iter().map(|d| d.bytes).sum();
        let deltas_left = crate::layout::MAX_DELTAS.saturating_sub(self.cp.deltas.len()) as u64;
        // A delta holds at most the whole metadata, so a large `delta_share` (tests use
        // one to force long chains) is bounded by the deltas left.
        let share_bytes = (self.opts.delta_share * self.cp.snapshot_bytes as f64) as u64;
        let whole_bytes = deltas_left.saturating_mul(self.snapshot_bound_bytes(0, 0));
        let cap_bytes = share_bytes.saturating_sub(chain_bytes).min(whole_bytes);
        cap_bytes.div_ceil(BLOCK as u64) + deltas_left
    }

    /// Whether `more_data` more data blocks and `more_meta` more metadata bytes leave room
    /// for the next snapshot.
    pub(super) fn fits(&self, more_data: u64, more_meta: u64) -> bool {
        let need = self.reserve_for_bound(self.snapshot_bound_bytes(more_data, more_meta));
        self.alloc.free_blocks() >= self.reserved + more_data + need
    }

    /// Whether a checkpoint may make room for `more_data` data blocks and `more_meta`
    /// metadata bytes: it releases blocks that osync commits freed, and measures the bound
    /// again, which gives back at most the growth's blocks about three times over (in the
    /// base, its quarter and the room for the base after next). A shortfall beyond that
    /// is data, not metadata: no checkpoint (a full file system would write one per call).
    pub(super) fn checkpoint_may_make_room(&self, more_data: u64, more_meta: u64) -> bool {
        if self.alloc.pending_blocks() > 0 {
            return true;
        }
        let need = self.reserved
            + more_data
            + self.reserve_for_bound(self.snapshot_bound_bytes(more_data, more_meta));
        let short_blocks = need.saturating_sub(self.alloc.free_blocks());
        let growth_blocks = self.meta_growth_bytes.div_ceil(BLOCK as u64);
        growth_blocks > 0 && short_blocks <= 3 * growth_blocks + 1
    }

    /// Whether to write a new base rather than a delta of `delta_bytes`: when the delta
    /// would eat into the reserve for a base and a base fits now. A delta's blocks stay
    /// held until the next base replaces the whole chain, and that base is written while
    /// the chain is still held: a 49-block delta of large extended attributes left an
    /// image a read-write mount could not checkpoint (fault-injection simulation, seed
    /// 119). When even a base does not fit, the delta is still better than no checkpoint.
    pub(super) fn base_instead_of_delta(&self, delta_bytes: u64) -> bool {
        let delta_blocks = delta_bytes.div_ceil(BLOCK as u64).max(1);
        let free = self.alloc.free_blocks();
        if free >= self.reserved + delta_blocks + self.meta_reserve() {
            return false;
        }
        let base_bytes =
            postcard::experimental::serialized_size(&self.durable).map_or(u64::MAX, |n| n as u64);
        free >= self.reserved + base_bytes.div_ceil(BLOCK as u64).max(1)
    }

    /// Whether the free blocks cover the data reserved and the metadata reserve.
    pub(super) fn room_held(&self) -> bool {
        self.alloc.free_blocks() >= self.reserved + self.meta_reserve()
    }

    /// After a checkpoint: once the reserve held, every checkpoint leaves it holding
    /// ([`Self::reserve_for_bound`] says why); the first time it holds, the promise starts.
    ///
    /// A break is a bug the simulations report (`check_invariants` counts it). A mount
    /// logs it and goes on rather than aborting: nothing acknowledged is at risk (the
    /// checkpoint is written), calls that grow the metadata get ENOSPC until room comes
    /// back, and at worst the next mount falls back to read-only; an abort would only
    /// add a crash. Seen once in the fsstress mount test (229 free, 1 + 229 kept).
    pub(super) fn keep_room_promise(&mut self) {
        let held = self.room_held();
        if self.room_promised && !held {
            self.room_promise_breaks += 1;
            eprintln!(
                "intactfs: warning: a checkpoint left the metadata reserve short ({} blocks free, {} reserved for written data, {} kept for the next metadata snapshot); new metadata is refused (ENOSPC) until room comes back. Please report this with the daemon's log",
                self.alloc.free_blocks(),
                self.reserved,
                self.meta_reserve()
            );
        }
        self.room_promised = held;
    }

    /// Counts what a logged operation adds to the next snapshot.
    pub(super) fn charge_meta(&mut self, op: &LogOp) {
        self.meta_growth_bytes += growth_bytes(op);
    }

    /// Measures the metadata after a checkpoint (or at mount): the bound restarts from the
    /// encoded sizes of what the next snapshot can hold.
    /// Each inode is counted at the widest its unguarded fields can grow to
    /// ([`inplace_headroom_bytes`]), so that no change of them needs a charge.
    pub(super) fn measure_meta(&mut self) {
        self.meta_base_bytes = widest_bytes(&self.durable).max(widest_bytes(&self.live));
        self.meta_growth_bytes = 0;
    }

    /// What a punch of file blocks `[start, end)` of `ino` adds: an extent entry when it
    /// splits one (in the live state or the durable one, which applies it later).
    pub(super) fn punch_split_bytes(&self, ino: crate::meta::Ino, start: u64, end: u64) -> u64 {
        let moves = |m: &Meta| punch_moves_a_piece(m.get(ino), start, end);
        if moves(&self.live) || moves(&self.durable) {
            EXTENT_SPLIT_BYTES
        } else {
            0
        }
    }

    /// Data blocks a truncate of `ino` to `size` reserves: the block holding the new end,
    /// when it shrinks the file to inside a written block that is not dirty yet (its tail
    /// is zeroed by a rewrite). Reserved without a room check before issue 25's last fix,
    /// which left a fsstress mount's reserve 2 blocks short (266 free, 33 + 235 kept).
    pub(super) fn truncate_tail_blocks(&self, ino: crate::meta::Ino, size: u64) -> u64 {
        let Some(n) = self.live.get(ino) else {
            return 0;
        };
        let (lb, tail) = (size / BLOCK as u64, size % BLOCK as u64);
        let dirty = self.dirty.get(&ino).is_some_and(|d| d.contains_key(&lb));
        let written = n
            .extents()
            .and_then(|e| crate::meta::map_block(e, lb))
            .is_some_and(|(_, c)| c.is_some());
        u64::from(size < n.size && tail != 0 && !dirty && written)
    }

    /// Room for operations adding `bytes` to the metadata (a create, a link, an extended
    /// attribute), else ENOSPC before anything changes.
    pub(super) fn meta_room(&mut self, bytes: u64) -> Result<()> {
        self.room_for(|_| 0, bytes).map(|_| ())
    }

    /// Checks, where a base snapshot of `snap_bytes` was encoded, that the bound held:
    /// the reserve was big enough for it.
    pub(super) fn assert_snapshot_within_bound(&self, snap_bytes: u64) {
        let bound = self.snapshot_bound_bytes(0, 0);
        debug_assert!(
            snap_bytes <= bound + RESERVE_SLACK_BLOCKS * BLOCK as u64,
            "a {snap_bytes}-byte snapshot exceeds the reserve's bound of {bound} bytes"
        );
    }

    /// ENOSPC for a call that needs `data` blocks and `meta` metadata bytes.
    pub(super) fn no_room(&self, data: u64, meta: u64) -> FsError {
        FsError::NoSpace(format!(
            "{data} data blocks and {meta} metadata bytes needed; {} blocks free, {} reserved for written data, {} kept for the next metadata snapshot",
            self.alloc.free_blocks(),
            self.reserved,
            self.meta_reserve()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{mkfs, MkfsOptions, MountOptions, Owner, SetAttr, ROOT};
    use crate::meta::Time;
    use intactfs_device::SimDevice;
    use intactfs_types::prelude::*;

    const O: Owner = Owner { uid: 0, gid: 0 };

    /// An 8 MiB file system holding as many small files as fit (at most `files`, each of
    /// `blocks_each` written blocks), then filled with data up to the reserve,
    /// checkpointed until no more data fits.
    fn full_fs(files: usize, blocks_each: usize) -> (Fs<SimDevice>, Vec<u64>) {
        let mut dev = SimDevice::new(BLOCK, 2048).expect("device");
        mkfs(&mut dev, &MkfsOptions::default()).expect("mkfs");
        let mut fs = Fs::mount(dev, MountOptions::default()).expect("mount").0;
        let mut inos = Vec::new();
        for i in 0..files {
            let name = format!("f{i}");
            match fs.create(0, ROOT, name.as_bytes(), 0o644, O) {
                Ok(a) => inos.push(a.ino),
                Err(_) => break,
            }
            let data = vec![3u8; blocks_each * BLOCK];
            if let Some(&ino) = inos.last().filter(|_| blocks_each > 0) {
                fs.write(0, ino, 0, &data).expect("a small file's data");
            }
        }
        fs.sync().expect("sync");
        let big = fs.create(0, ROOT, b"big", 0o644, O);
        let big = big.expect("big").ino;
        let mut off = 0u64;
        loop {
            let start = off;
            while fs.write(0, big, off, &[7u8; BLOCK]).is_ok() {
                off += BLOCK as u64;
            }
            fs.sync().expect("sync");
            fs.checkpoint().expect("checkpoint");
            if off == start {
                break;
            }
        }
        assert!(
            fs.room_promised && fs.room_held(),
            "filled up to the reserve"
        );
        (fs, inos)
    }

    /// Every call leaves the promise holding, and so does every checkpoint.
    fn promise_kept(fs: &Fs<SimDevice>, after: &str) {
        assert_eq!(
            fs.room_promise_breaks, 0,
            "a checkpoint broke the promise {after}"
        );
        if let Err(e) = fs.check_invariants() {
            panic!("{after}: {e}");
        }
    }

    /// Issue 25's last gap, as fsstress's `chown` to random ids made it: on a file system
    /// full up to the reserve, owners and times set to wide values grow every inode in
    /// place. Before the fix nothing charged that growth and the checkpoint after 3,000
    /// such calls left 99 blocks free against 113 kept. Now each call is charged (and
    /// refused with ENOSPC when no room is left), and the promise holds throughout.
    #[test]
    fn a_full_fs_keeps_its_room_through_chown_and_utimes() {
        let (mut fs, inos) = full_fs(3000, 0);
        assert!(inos.len() > 2000, "only {} files fit", inos.len());
        let wide = Time {
            sec: 1 << 40,
            nsec: 999_999_999,
        };
        let (mut done, mut refused) = (0, 0);
        for (k, &ino) in inos.iter().enumerate() {
            let a = SetAttr {
                uid: Some(0x7fff_ffff),
                gid: Some(0x7fff_ffff),
                mode: Some(0o7777),
                atime: (k % 2 == 0).then_some(wide),
                mtime: (k % 2 == 0).then_some(wide),
                ..Default::default()
            };
            match fs.setattr(0, ino, a) {
                Ok(_) => done += 1,
                Err(FsError::NoSpace(_)) => refused += 1,
                Err(e) => panic!("setattr of inode {ino}: {e}"),
            }
            if k % 64 == 63 {
                promise_kept(&fs, &format!("after setattr {k}"));
                fs.sync().expect("sync");
                promise_kept(&fs, &format!("after sync {k}"));
            }
        }
        fs.sync().expect("sync");
        fs.checkpoint().expect("checkpoint");
        promise_kept(&fs, "after the last checkpoint");
        eprintln!("{done} setattr calls done, {refused} refused for room");
        assert!(done > 0, "no setattr succeeded ({refused} refused)");
    }

    /// A truncate to inside a written block rewrites that block, which takes a new one at
    /// commit. It was reserved without a room check: on a full file system each such
    /// truncate took a block (and its map's bytes) from the metadata reserve, as in the
    /// fsstress mount test's break (266 blocks free, 33 reserved + 235 kept). Now it gets
    /// ENOSPC when no room is left, and the promise holds.
    #[test]
    fn a_full_fs_keeps_its_room_through_truncates_inside_a_block() {
        let (mut fs, inos) = full_fs(200, 2);
        assert_eq!(inos.len(), 200);
        let (mut done, mut refused) = (0, 0);
        for (k, &ino) in inos.iter().enumerate() {
            match fs.truncate(0, ino, BLOCK as u64 + 100) {
                Ok(()) => done += 1,
                Err(FsError::NoSpace(_)) => refused += 1,
                Err(e) => panic!("truncate of inode {ino}: {e}"),
            }
            promise_kept(&fs, &format!("after truncate {k}"));
        }
        fs.sync().expect("sync");
        fs.checkpoint().expect("checkpoint");
        promise_kept(&fs, "after the last checkpoint");
        eprintln!("{done} truncates done, {refused} refused for room");
        assert!(
            refused > 0,
            "the file system was not full: {done} truncates done"
        );
    }
}
