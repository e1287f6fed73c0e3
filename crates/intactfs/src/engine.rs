//! The engine: POSIX operations with streams over a block device.
//!
//! Two copies of the metadata are kept: `live` (what calls see, including every stream's
//! uncommitted work) and `durable` (the checkpoint plus every committed record: what a
//! crash now would recover). A call changes `live` through [`Meta::apply`] and appends the
//! same logical operation to its stream's running transaction; a commit writes the
//! transaction as one journal record and applies it to `durable`. File data waits in a
//! per-inode cache of dirty blocks until its inode's transaction commits; then every dirty
//! block gets a newly allocated device block (allocation at commit), is written in place,
//! and is covered by a checksum in the record, so data is written once and an overwrite
//! never touches a block durable metadata refers to (copy on write).

use crate::alloc::Allocator;
use crate::error::{FsError, Result};
use crate::layout::{
    self, Checkpoint, Delta, Record, Segment, Superblock, CHECKPOINT_SLOTS, JOURNAL_START,
    MAX_CHAIN_EXTENTS, MAX_DELTAS, MAX_TABLE_EXTENTS, REC_MAGIC, SB_MAGIC,
};
use crate::meta::{
    map_block, xattr_fits, Body, Extent, FileType, Ino, Inode, LogOp, Meta, NewKind, Time, BLOCK,
    NAME_MAX, ROOT, SYMLINK_MAX, XATTR_TOTAL_MAX,
};
use crate::recovery::{self, Loaded};
use crate::streams::{Key, StreamFlags, StreamId, Streams};
use intactfs_device::BlockDevice;
use intactfs_types::prelude::*;
use intactfs_types::{Capabilities, XattrMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};

mod commit;
mod durability;
mod files;
mod invariants;
mod io;
mod namespace;
mod regions;
mod reserve;
mod xattr;
pub use io::CommitIo;
pub use regions::{Aborted, REGION_BASE};

/// Largest file size (defined with the metadata limits, where recovery checks it too).
pub use crate::meta::MAX_FILE_SIZE;
use intactfs_types::MAX_LINKS;

pub type Clock = Box<dyn FnMut() -> Time + Send + Sync>;
/// A file's dirty blocks by file block number.
type Blocks = BTreeMap<u64, Box<[u8]>>;

pub struct MkfsOptions {
    /// Journal size in blocks; default: 1/32 of the device, between 64 blocks and 32 MiB.
    pub journal_blocks: Option<u64>,
    pub uuid: u64,
    pub time: Time,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            journal_blocks: None,
            uuid: 0,
            time: now_wall(),
        }
    }
}

pub struct MountOptions {
    /// Commit a stream's group once this many bytes of dirty data wait in memory.
    pub dirty_limit: u64,
    /// Refuse writes in atomic regions once this many bytes of dirty data wait in memory
    /// (a region never commits early, so its data stays in memory until its end).
    pub region_limit: u64,
    /// Checkpoint when the journal is this full (0..1).
    pub checkpoint_fill: f64,
    /// A checkpoint writes a delta (the changed inodes) while the chain's deltas together
    /// stay within this share of the base snapshot's bytes, else a new base; 0: always a
    /// base. (The crash simulation raises it so that its small file systems chain too.)
    pub delta_share: f64,
    /// Recover in memory only; write nothing (fsck, dump).
    pub read_only: bool,
    /// Time source; default: the system clock.
    pub clock: Option<Clock>,
    /// Keep a log of every commit (which streams, how far): simulation and tests.
    pub keep_commit_log: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            dirty_limit: 256 << 20,
            region_limit: 1 << 30,
            checkpoint_fill: 0.75,
            delta_share: 0.5,
            read_only: false,
            clock: None,
            keep_commit_log: false,
        }
    }
}

pub fn now_wall() -> Time {
    Time::now()
}

intactfs_device::counters! {
    /// What the device saw, for benchmarks and tests.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Stats {
        pub data_bytes: u64,
        pub journal_bytes: u64,
        pub snapshot_bytes: u64,
        pub header_bytes: u64,
        pub flushes: u64,
        pub commits: u64,
        /// Commits written without a flush (osync, OptFS §4.4).
        pub optimistic_commits: u64,
        pub checkpoints: u64,
        /// Checkpoints written as a delta segment (the changed inodes) rather than a new base.
        pub delta_checkpoints: u64,
        pub regions_committed: u64,
        pub regions_aborted: u64,
        /// Commits made as one device transaction (transactional flash), and the data blocks
        /// they rewrote in place.
        pub tx_commits: u64,
        pub inplace_blocks: u64,
    }
}

impl Stats {
    pub fn bytes_written(&self) -> u64 {
        self.data_bytes + self.journal_bytes + self.snapshot_bytes + self.header_bytes
    }
}

/// One commit: its sequence number and, for each stream it covered, how many of that
/// stream's mutating calls are now durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    pub seq: u64,
    pub streams: Vec<(StreamId, u64)>,
}

// The API types live in intactfs-types (one vocabulary for every engine).
pub use intactfs_types::{Attr, DirEntry, Owner, RenameFlags, SetAttr, StatFs};

/// What mount found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountReport {
    pub checkpoint_generation: u64,
    pub records_replayed: usize,
    pub stop: String,
    pub orphans_freed: usize,
    /// Why a read-write mount became read-only (no room for the mount's checkpoint).
    pub read_only: Option<String>,
}

pub struct Fs<D: BlockDevice> {
    dev: D,
    sb: Superblock,
    cp: Checkpoint,
    cp_slot: usize,
    live: Meta,
    durable: Meta,
    alloc: Allocator,
    free_inos: BTreeSet<Ino>,
    /// Inode numbers freed by commit `.0`, reusable once it is durable.
    pending_inos: Vec<(u64, Ino)>,
    streams: Streams,
    dirty: HashMap<Ino, BTreeMap<u64, Box<[u8]>>>,
    dirty_blocks: u64,
    /// Preallocation waiting for its commit: inode → block ranges.
    falloc: HashMap<Ino, (Vec<(u64, u64)>, u64)>,
    /// Blocks promised to dirty data and preallocation (so commits never run out).
    reserved: u64,
    /// The next snapshot's size is bounded by these ([`reserve`]): measured at the last
    /// checkpoint, and added since by logged operations.
    meta_base_bytes: u64,
    meta_growth_bytes: u64,
    /// Whether the reserve held at the mount's checkpoint or at a later one: from then on
    /// every state leaves room for the base the next mount may write ([`reserve`]).
    room_promised: bool,
    /// Checkpoints that left the promised reserve short (a bug; `check_invariants` says so).
    room_promise_breaks: u64,
    /// Durable blocks that uncommitted calls (unlink, truncate, replacing rename) have
    /// released: free as soon as those calls commit. `statfs` counts them as free, and a
    /// call short of space commits everything to get them.
    freeing: u64,
    open: HashMap<Ino, u32>,
    jhead: u64,
    next_seq: u64,
    /// OptFS durability: the durable and carried tickets, the unflushed flag and the owed
    /// ticket ([`durability`]).
    tickets: durability::Tickets,
    opts: MountOptions,
    clock: Clock,
    stats: Stats,
    commit_log: Vec<CommitInfo>,
    /// Set when a device write failed mid-commit: memory and disk may disagree.
    poisoned: Option<String>,
    /// Inodes the durable state changed since the last checkpoint: the next delta.
    touched: BTreeSet<Ino>,
    /// The next checkpoint writes a new base (the durable state changed in ways `touched`
    /// does not record: journal replay at mount).
    full_next: bool,
    /// Atomic regions (CFS): open regions, added files, routing ([`regions`]).
    regions: regions::Regions,
    /// What writes set on the live metadata directly (size, mtime, ctime; their data
    /// operations are made at commit), with their real-time position, while uncommitted:
    /// replayed with the logical operations when a region's abort rebuilds `live`.
    wattrs: HashMap<Ino, Vec<(u64, u64, Time)>>,
    /// Commits whose device writes are not known done ([`io`]).
    inflight: io::Inflight,
    /// Commit I/O is left to the caller ([`Self::take_io`]).
    deferred: bool,
    /// The device's shared handle, if it has one: reads through `&self` ([`Self::read_shared`]).
    reader: Option<std::sync::Arc<dyn intactfs_device::SharedIo>>,
    /// Files made by [`Self::create_tmpfile`] and not yet linked: the only inodes without
    /// links that [`Namespace::link`] accepts.
    tmpfiles: BTreeSet<Ino>,
}

/// What a commit waits for before it returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wait {
    /// Its writes issued, not flushed (osync; recovery keeps it only if all of it arrived).
    Written,
    /// Durable; with deferred I/O the caller writes and flushes (and must, before it
    /// reports durability).
    Caller,
    /// Durable when it returns (drains and flushes here).
    Now,
}

/// Writes an empty file system.
pub fn mkfs<D: BlockDevice>(dev: &mut D, opts: &MkfsOptions) -> Result<Superblock> {
    if dev.block_size() != BLOCK {
        return Err(FsError::Invalid(format!(
            "device block size {} (intactfs needs {BLOCK})",
            dev.block_size()
        )));
    }
    let blocks = dev.blocks();
    let journal = opts
        .journal_blocks
        .unwrap_or((blocks / 32).clamp(64, (32 << 20) / BLOCK as u64));
    if blocks < JOURNAL_START + journal + 16 {
        return Err(FsError::Invalid(format!(
            "{blocks} blocks of {BLOCK} bytes is too small for a {journal}-block journal (need at least {} blocks)",
            JOURNAL_START + journal + 16
        )));
    }
    let sb = Superblock {
        version: layout::FORMAT_VERSION,
        block_size: BLOCK as u32,
        blocks,
        journal_start: JOURNAL_START,
        journal_blocks: journal,
        uuid: opts.uuid,
    };
    let meta = Meta::new(opts.time);
    let snap = postcard::to_stdvec(&meta).expect("in-memory serialization");
    let n = snap.len().div_ceil(BLOCK) as u64;
    let at = sb.data_start();
    let mut padded = snap.clone();
    padded.resize(n as usize * BLOCK, 0);
    dev.write_run(at, &padded)?;
    // A stale record at the journal's start could otherwise match epoch 1 of a reused uuid.
    dev.write(JOURNAL_START, &vec![0; BLOCK])?;
    let cp = Checkpoint::new(&sb, 1, vec![(at, n)], &snap, 1);
    dev.write(CHECKPOINT_SLOTS[0], &cp.encode())?;
    dev.write(CHECKPOINT_SLOTS[1], &vec![0; BLOCK])?;
    dev.flush()?;
    // The superblock last: a device without one is not a file system yet.
    dev.write(layout::SUPERBLOCK, &layout::encode(SB_MAGIC, &sb))?;
    dev.flush()?;
    Ok(sb)
}

impl<D: BlockDevice> Fs<D> {
    /// Recovers (replaying the journal) and, unless read-only, writes a fresh checkpoint.
    pub fn mount(mut dev: D, mut opts: MountOptions) -> Result<(Fs<D>, MountReport)> {
        let Loaded {
            sb,
            cp,
            slot,
            mut meta,
            replayed,
            stop,
            journal_head,
            next_seq,
            durable_upto,
        } = recovery::load(&mut dev)?;
        let mut alloc = Allocator::new(sb.data_start(), sb.blocks);
        for (s, l) in cp.meta_runs() {
            if !alloc.take(s, l) {
                return Err(FsError::Corrupt(format!(
                    "snapshot block {s} is used twice"
                )));
            }
        }
        for n in meta.inodes.values() {
            if let Some(ex) = n.extents() {
                for e in ex.values() {
                    if !alloc.take(e.pblk, e.len) {
                        return Err(FsError::Corrupt(format!(
                            "device block {} is used twice",
                            e.pblk
                        )));
                    }
                }
            }
        }
        // Orphans are freed in memory now, but their blocks stay taken until the
        // checkpoint below makes that durable: the journal still maps them.
        let orphans = recovery::orphans(&meta);
        let mut orphan_blocks = Vec::new();
        for &o in &orphans {
            let f = meta
                .apply(&LogOp::Free { ino: o })
                .map_err(|e| FsError::Corrupt(format!("freeing orphan {o}: {e}")))?;
            orphan_blocks.extend(f.extents);
        }
        let free_inos = (ROOT + 1..meta.next_ino)
            .filter(|i| !meta.inodes.contains_key(i))
            .collect();
        let mut report = MountReport {
            checkpoint_generation: cp.generation,
            records_replayed: replayed.len(),
            stop,
            orphans_freed: orphans.len(),
            read_only: None,
        };
        let clock = opts.clock.take_or_default();
        let reader = dev.shared_io();
        let mut fs = Fs {
            dev,
            sb,
            cp,
            cp_slot: slot,
            live: meta.clone(),
            durable: meta,
            alloc,
            free_inos,
            pending_inos: Vec::new(),
            streams: Streams::default(),
            dirty: HashMap::new(),
            dirty_blocks: 0,
            falloc: HashMap::new(),
            reserved: 0,
            meta_base_bytes: 0,
            meta_growth_bytes: 0,
            room_promised: false,
            room_promise_breaks: 0,
            freeing: 0,
            open: HashMap::new(),
            jhead: journal_head,
            next_seq,
            tickets: durability::Tickets::new(durable_upto),
            opts,
            clock,
            stats: Stats::default(),
            commit_log: Vec::new(),
            poisoned: None,
            touched: orphans.iter().copied().collect(),
            full_next: !replayed.is_empty(),
            regions: regions::Regions::default(),
            wattrs: HashMap::new(),
            inflight: io::Inflight::default(),
            deferred: false,
            reader,
            tmpfiles: BTreeSet::new(),
        };
        fs.measure_meta();
        if !fs.opts.read_only {
            report.read_only = fs.mount_checkpoint(orphan_blocks)?;
        }
        Ok((fs, report))
    }

    /// The checkpoint a read-write mount writes (orphans' blocks were freed in memory
    /// only: it makes that durable). With no room for it, nothing is written and the mount
    /// becomes read-only: `Some(why, and what to do)`.
    fn mount_checkpoint(&mut self, orphan_blocks: Vec<(u64, u64)>) -> Result<Option<String>> {
        assert!(!self.opts.read_only && self.poisoned.is_none());
        match self.checkpoint() {
            Ok(()) => {
                for (s, l) in orphan_blocks {
                    self.alloc.release(s, l);
                }
                // An image short of room (made before the reserve kept room for the next
                // base) is served, refusing growth, until a checkpoint finds room again.
                self.room_promised = self.room_held();
                Ok(None)
            }
            // A snapshot that does not fit is refused before any write: the image is
            // served read-only, so its files can be copied out.
            Err(FsError::NoSpace(why)) => {
                assert!(
                    self.poisoned.is_none(),
                    "a refused checkpoint wrote nothing"
                );
                self.opts.read_only = true;
                Ok(Some(format!(
                    "mounted read-only: writing the mount's checkpoint is impossible ({why}; {} blocks free). Files can be read and copied out; nothing can be deleted or changed on this image, since every change needs that checkpoint first. Copy what you need, then make a larger file system",
                    self.alloc.free_blocks()
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// Commits everything, checkpoints, and returns the device.
    pub fn unmount(mut self) -> Result<D> {
        if !self.opts.read_only {
            self.sync()?;
            self.checkpoint()?;
        }
        Ok(self.dev)
    }

    /// Drops everything not committed, as a crash would (the device keeps what it has).
    pub fn into_device(self) -> D {
        self.dev
    }

    pub fn device(&self) -> &D {
        &self.dev
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn commit_log(&self) -> &[CommitInfo] {
        &self.commit_log
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// The committed state: what a crash right now would recover (before orphan cleanup)
    /// once the commits written without a flush (osync) are flushed.
    pub fn durable_meta(&self) -> &Meta {
        &self.durable
    }

    pub fn live_meta(&self) -> &Meta {
        &self.live
    }

    /// Times the stream machinery merged two groups because of related operations.
    pub fn merges(&self) -> u64 {
        self.streams.merges
    }

    fn now(&mut self) -> Time {
        // Bounded, so that a time set to now fits the reserve's headroom (reserve.rs).
        reserve::clamp_now((self.clock)())
    }

    fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(FsError::ReadOnly);
        }
        self.usable()
    }

    /// Every call of a poisoned mount fails (EIO): what it would read or report may hold
    /// changes the device does not.
    fn usable(&self) -> Result<()> {
        if let Some(p) = &self.poisoned {
            return Err(FsError::Corrupt(format!(
                "an earlier failure left this mount inconsistent ({p}); unmount and mount again"
            )));
        }
        Ok(())
    }

    // ----- streams -----

    /// ccfs `setstream(id, flags)` for a caller (a process id in the FUSE layer): its
    /// later calls go to `stream`, with `flags`.
    pub fn setstream(&mut self, caller: u64, stream: StreamId, flags: StreamFlags) {
        self.streams.set_caller(caller, stream);
        self.set_stream_flags(stream, flags);
    }

    /// ccfs `getstream()`: the caller's stream; callers that never set one are in the init
    /// stream.
    pub fn getstream(&self, caller: u64) -> StreamId {
        self.streams.caller_stream(caller)
    }

    pub fn set_stream_flags(&mut self, s: StreamId, flags: StreamFlags) {
        self.streams.stream(s).flags = flags;
    }

    pub fn stream_flags(&mut self, s: StreamId) -> StreamFlags {
        self.streams.stream(s).flags
    }

    /// Commits the caller's stream (with any stream merged into it), ignoring IGNORE_FSYNC.
    pub fn streamsync(&mut self, s: StreamId) -> Result<()> {
        self.writable()?;
        if self.is_region(s) {
            return Ok(());
        }
        let g = self.streams.group(s);
        self.commit_with(&g, Wait::Caller)
    }

    /// Something is not yet committed (what a crash now would lose).
    pub fn has_uncommitted(&self) -> bool {
        self.streams.any_busy() || !self.dirty.is_empty() || !self.falloc.is_empty()
    }

    /// Commits every stream but open atomic regions, as one record, durably.
    pub fn sync(&mut self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        self.writable()?;
        // Open atomic regions stay open (they commit at their end, or never).
        let all: Vec<StreamId> = self.legacy_groups().into_iter().flatten().collect();
        self.commit(&all)?;
        self.flush()?;
        assert!(
            self.freeing == 0 || !self.regions.is_empty(),
            "everything is committed, yet blocks wait to be freed"
        );
        Ok(())
    }

    /// [`Self::sync`] for a caller that writes and flushes itself (deferred I/O: the
    /// periodic commit of the mount). Durable once [`Self::durable_ticket`] reaches the
    /// [`Self::written_ticket`] it returns with.
    pub fn commit_all(&mut self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        self.writable()?;
        let all: Vec<StreamId> = self.legacy_groups().into_iter().flatten().collect();
        self.commit_with(&all, Wait::Caller)
    }

    // ----- reading -----

    fn node(&self, ino: Ino) -> Result<&Inode> {
        self.live.get(ino).ok_or(FsError::NotFound(String::new()))
    }

    fn attr_of(&self, ino: Ino, n: &Inode) -> Attr {
        let d = self.dirty.get(&ino);
        let dirty = d.map(|d| d.len() as u64).unwrap_or(0);
        // Preallocation waiting for its commit counts as allocated (minus blocks already
        // counted as dirty data inside it), as st_blocks does on other file systems.
        let prealloc = self.falloc.get(&ino).map_or(0, |(ranges, res)| {
            let inside: u64 = d.map_or(0, |d| {
                ranges
                    .iter()
                    .map(|&(a, b)| d.range(a..b).count() as u64)
                    .sum()
            });
            res.saturating_sub(inside)
        });
        Attr {
            ino,
            kind: n.kind,
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            nlink: n.nlink,
            size: n.size,
            blocks: (n.blocks() + dirty + prealloc) * (BLOCK as u64 / 512),
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            rdev: match n.body {
                Body::Special { rdev } => rdev,
                _ => 0,
            },
        }
    }

    fn dir(&self, ino: Ino) -> Result<&Inode> {
        let n = self.node(ino)?;
        if n.kind != FileType::Dir {
            return Err(FsError::NotDir(String::new()));
        }
        Ok(n)
    }

    /// Where a block of a file is now: its bytes (dirty cache, a commit in flight, a
    /// hole), or the device block holding it and its checksum.
    fn locate(&self, ino: Ino, lblk: u64) -> Result<std::result::Result<Vec<u8>, (u64, u32)>> {
        if let Some(b) = self.dirty.get(&ino).and_then(|d| d.get(&lblk)) {
            return Ok(Ok(b.to_vec()));
        }
        let ext = self
            .node(ino)?
            .extents()
            .ok_or(FsError::IsDir(String::new()))?;
        Ok(match map_block(ext, lblk) {
            Some((p, Some(crc))) => match self.inflight_block(p) {
                Some(b) => Ok(b.to_vec()),
                None => Err((p, crc)),
            },
            _ => Ok(vec![0; BLOCK]),
        })
    }

    fn checked(ino: Ino, lblk: u64, p: u64, crc: u32, buf: Vec<u8>) -> Result<Vec<u8>> {
        if layout::block_crc(&buf) != crc {
            return Err(FsError::Corrupt(format!(
                "inode {ino} block {lblk} (device block {p}) does not match its checksum"
            )));
        }
        Ok(buf)
    }

    /// Reads a block of a file as it is now: dirty cache, then the device.
    fn file_block(&mut self, ino: Ino, lblk: u64) -> Result<Vec<u8>> {
        match self.locate(ino, lblk)? {
            Ok(b) => Ok(b),
            Err((p, crc)) => {
                let buf = recovery::read_block(&mut self.dev, p)?;
                Self::checked(ino, lblk, p, crc, buf)
            }
        }
    }

    /// [`FileData::read`] through `&self` (several readers at once, none waiting for a
    /// writer's lock), for a device with a shared handle ([`BlockDevice::shared_io`]).
    pub fn read_shared(&self, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        self.usable()?;
        let Some(dev) = self.reader.as_deref() else {
            return Err(FsError::Internal(
                "read_shared on a device without a shared handle".into(),
            ));
        };
        self.read_by(ino, off, len, &mut |fs, lblk| match fs.locate(ino, lblk)? {
            Ok(b) => Ok(b),
            Err((p, crc)) => {
                let mut buf = vec![0; BLOCK];
                dev.read_run(p, &mut buf)?;
                Self::checked(ino, lblk, p, crc, buf)
            }
        })
    }

    /// Whether [`Self::read_shared`] works here.
    pub fn can_read_shared(&self) -> bool {
        self.reader.is_some()
    }

    /// The byte range [off, end) a read of `len` bytes at `off` returns (None: nothing).
    fn span(&self, ino: Ino, off: u64, len: usize) -> Result<Option<(u64, u64)>> {
        let n = self.node(ino)?;
        match n.kind {
            FileType::File => {}
            FileType::Dir => return Err(FsError::IsDir(String::new())),
            _ => return Err(FsError::Invalid("not a regular file".into())),
        }
        if off >= n.size || len == 0 {
            return Ok(None);
        }
        Ok(Some((off, n.size.min(off.saturating_add(len as u64)))))
    }

    /// Assembles a read from its blocks, each from `block(self, file block)` in order.
    fn read_by(
        &self,
        ino: Ino,
        off: u64,
        len: usize,
        block: &mut dyn FnMut(&Self, u64) -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let Some((off, end)) = self.span(ino, off, len)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity((end - off) as usize);
        let mut pos = off;
        while pos < end {
            let lblk = pos / BLOCK as u64;
            let within = (pos % BLOCK as u64) as usize;
            let take = ((BLOCK - within) as u64).min(end - pos) as usize;
            let b = block(self, lblk)?;
            out.extend_from_slice(&b[within..within + take]);
            pos += take as u64;
        }
        Ok(out)
    }

    /// lseek SEEK_DATA (`data`) or SEEK_HOLE from `off`, at block granularity: written and
    /// dirty blocks are data; holes and preallocated blocks are holes (as on ext4). Walks
    /// extents run by run, not block by block. Past the end: `PastEnd` (ENXIO).
    pub fn seek_data(&self, ino: Ino, off: u64, data: bool) -> Result<u64> {
        self.usable()?;
        let n = self.file(ino)?;
        let size = n.size;
        if off >= size {
            return Err(FsError::PastEnd);
        }
        let ext = n.extents().expect("file body");
        let empty = BTreeMap::new();
        let dirty = self.dirty.get(&ino).unwrap_or(&empty);
        let bs = BLOCK as u64;
        // End of the data run starting at block b, or None if b is a hole.
        let run_end = |b: u64| -> Option<u64> {
            if let Some((k, e)) = ext.range(..=b).next_back() {
                if b < k + e.len && e.written() {
                    return Some(k + e.len);
                }
            }
            dirty.contains_key(&b).then_some(b + 1)
        };
        let mut b = off / bs;
        if data {
            loop {
                if run_end(b).is_some() {
                    break;
                }
                // Next candidate: the next dirty block or written extent after b.
                let d = dirty.range(b + 1..).next().map(|(k, _)| *k);
                let e = ext
                    .range(b + 1..)
                    .find(|(_, e)| e.written())
                    .map(|(k, _)| *k);
                match d.into_iter().chain(e).min() {
                    Some(nb) => b = nb,
                    None => return Err(FsError::PastEnd),
                }
                if b * bs >= size {
                    return Err(FsError::PastEnd);
                }
            }
            Ok((b * bs).max(off))
        } else {
            while let Some(end) = run_end(b) {
                b = end;
                if b * bs >= size {
                    return Ok(size);
                }
            }
            Ok((b * bs).max(off).min(size))
        }
    }

    // ----- changing -----

    /// Applies `op` to the live state and logs it in stream `s`'s transaction.
    fn log(&mut self, s: StreamId, op: LogOp, claims: &[Key], checks: &[Key]) -> Result<()> {
        let s = self.route(s, claims, checks)?;
        let freed = self
            .live
            .apply(&op)
            .map_err(|e| FsError::Internal(format!("{op:?}: {e}")))?;
        // Live extents are all committed ones (data is allocated at commit).
        self.freeing += freed.extents.iter().map(|e| e.1).sum::<u64>();
        self.charge_meta(&op);
        self.streams.relate(s, claims, checks);
        self.streams.log(s, op);
        Ok(())
    }

    /// Frees an inode whose last link and last opener are gone.
    fn maybe_free(&mut self, s: StreamId, ino: Ino) -> Result<()> {
        let Some(n) = self.live.get(ino) else {
            return Ok(());
        };
        if n.nlink == 0 && self.open.get(&ino).copied().unwrap_or(0) == 0 {
            self.tmpfiles.remove(&ino);
            self.drop_dirty(ino, 0);
            if let Some((_, r)) = self.falloc.remove(&ino) {
                intactfs_device::counter::release(
                    &mut self.reserved,
                    r,
                    "reserved (preallocation of a freed inode)",
                );
            }
            self.log(s, LogOp::Free { ino }, &[Key::Ino(ino)], &[])?;
        }
        Ok(())
    }

    /// Drops dirty blocks from `from` on, returning their reservation.
    fn drop_dirty(&mut self, ino: Ino, from: u64) {
        if let Some(d) = self.dirty.get_mut(&ino) {
            let gone = d.split_off(&from).len() as u64;
            intactfs_device::counter::release(
                &mut self.dirty_blocks,
                gone,
                "dirty_blocks (drop_dirty)",
            );
            intactfs_device::counter::release(&mut self.reserved, gone, "reserved (drop_dirty)");
            if d.is_empty() {
                self.dirty.remove(&ino);
            }
        }
    }

    fn file(&self, ino: Ino) -> Result<&Inode> {
        let n = self.node(ino)?;
        match n.kind {
            FileType::File => Ok(n),
            FileType::Dir => Err(FsError::IsDir(String::new())),
            _ => Err(FsError::Invalid("not a regular file".into())),
        }
    }

    /// `need` blocks can be reserved; if only uncommitted frees stand in the way, commit
    /// everything first (a full file system must not refuse a write right after an unlink
    /// that `statfs` already counts as free).
    /// `need` is recomputed after such a commit (it may count dirty blocks, which the commit
    /// cleans). `meta`: metadata bytes the call adds, kept room for in the metadata
    /// reserve ([`reserve`]). Returns the number of blocks to reserve.
    fn room_for(&mut self, need: impl Fn(&Self) -> u64, meta: u64) -> Result<u64> {
        let mut n = need(self);
        if !self.fits(n, meta) && (self.freeing > 0 || self.alloc.pending_blocks() > 0) {
            self.commit_groups_for_room()?;
            n = need(self);
        }
        if !self.fits(n, meta) && self.checkpoint_for_room(n, meta)? {
            n = need(self);
        }
        if !self.fits(n, meta) {
            return Err(self.no_room(n, meta));
        }
        Ok(n)
    }

    /// A checkpoint, when one can make room: blocks freed by osync commits whose writers'
    /// checksums recovery may still check (the journal restarts), and the metadata bound's
    /// growth since the last checkpoint, which the reserve holds twice until a checkpoint
    /// measures it ([`reserve`]). Whether it checkpointed; a refusal is not an error here
    /// (the caller's own check says ENOSPC). `more_data`, `more_meta` as for `fits`.
    fn checkpoint_for_room(&mut self, more_data: u64, more_meta: u64) -> Result<bool> {
        if !self.checkpoint_may_make_room(more_data, more_meta) {
            return Ok(false);
        }
        match self.checkpoint() {
            Ok(()) => Ok(true),
            Err(FsError::NoSpace(_)) if self.poisoned.is_none() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Commits every group on its own, durably, so that what their calls free becomes
    /// free: a group refused for want of room (its operations stay pending) does not hold
    /// back the others, which may be the very calls that make room (issue 25).
    fn commit_groups_for_room(&mut self) -> Result<()> {
        self.writable()?;
        for g in self.legacy_groups() {
            match self.commit(&g) {
                Err(FsError::NoSpace(_)) if self.poisoned.is_none() => {}
                r => r?,
            }
        }
        self.flush()
    }

    pub fn truncate(&mut self, s: StreamId, ino: Ino, size: u64) -> Result<()> {
        self.setattr(
            s,
            ino,
            SetAttr {
                size: Some(size),
                ..Default::default()
            },
        )
        .map(|_| ())
    }

    /// `meta`: metadata bytes the setattr around it adds (room is made for both at once).
    fn truncate_inner(&mut self, s: StreamId, ino: Ino, size: u64, meta: u64) -> Result<()> {
        self.file(ino)?;
        // Before the dirty cache changes: a legacy group that owns them commits first.
        let s = self.route(s, &[Key::Ino(ino)], &[])?;
        if size > MAX_FILE_SIZE {
            return Err(FsError::TooBig(String::new()));
        }
        // The tail block it rewrites takes a new block at commit, like a write's.
        self.room_for(|fs| fs.truncate_tail_blocks(ino, size), meta)?;
        let old = self.file(ino)?.size;
        let keep = size.div_ceil(BLOCK as u64);
        if size < old {
            let tail = size % BLOCK as u64;
            let lb = size / BLOCK as u64;
            if tail != 0 {
                // Bytes past the new end must read as zeros if the file grows again.
                let mapped = self.dirty.get(&ino).is_some_and(|d| d.contains_key(&lb))
                    || self
                        .node(ino)?
                        .extents()
                        .and_then(|e| map_block(e, lb))
                        .is_some_and(|(_, c)| c.is_some());
                if mapped {
                    let mut b = self.file_block(ino, lb)?;
                    b[tail as usize..].fill(0);
                    self.put_dirty(ino, lb, b.into_boxed_slice())?;
                }
            }
            self.drop_dirty(ino, keep);
            if let Some((r, res)) = self.falloc.get_mut(&ino) {
                for (a, b) in r.iter_mut() {
                    *b = (*b).min(keep).max(*a);
                }
                r.retain(|(a, b)| a < b);
                let left: u64 = r.iter().map(|(a, b)| b - a).sum();
                if left < *res {
                    intactfs_device::counter::release(
                        &mut self.reserved,
                        *res - left,
                        "reserved (truncated preallocation)",
                    );
                    *res = left;
                }
            }
        }
        let time = self.now();
        self.log(
            s,
            LogOp::SetSize {
                ino,
                size,
                time,
                free_past_end: size < old,
            },
            &[Key::Ino(ino)],
            &[],
        )
    }

    fn put_dirty(&mut self, ino: Ino, lblk: u64, b: Box<[u8]>) -> Result<()> {
        let d = self.dirty.entry(ino).or_default();
        if d.insert(lblk, b).is_none() {
            self.dirty_blocks += 1;
            self.reserved += 1;
        }
        Ok(())
    }

    /// Preallocates [off, off+len); the blocks are allocated when the transaction commits
    /// (reserved now). `keep_size`: FALLOC_FL_KEEP_SIZE.
    pub fn fallocate(
        &mut self,
        s: StreamId,
        ino: Ino,
        off: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<()> {
        self.writable()?;
        if len == 0 {
            return Err(FsError::Invalid("fallocate of length 0".into()));
        }
        let end = off
            .checked_add(len)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(FsError::TooBig(String::new()))?;
        let (b0, b1) = (off / BLOCK as u64, end.div_ceil(BLOCK as u64));
        let size = self.file(ino)?.size;
        // Holes not yet reserved for, run by run (a 1 TiB request must not loop per block).
        let need = self.room_for(
            |fs| {
                let ext = fs
                    .live
                    .get(ino)
                    .and_then(|n| n.extents())
                    .expect("a regular file, checked above");
                let pending = fs
                    .falloc
                    .get(&ino)
                    .map(|p| p.0.as_slice())
                    .unwrap_or_default();
                holes(ext, fs.dirty.get(&ino), b0, b1)
                    .into_iter()
                    .map(|(h, n)| {
                        n - pending
                            .iter()
                            .map(|&(a, b)| b.min(h + n).saturating_sub(a.max(h)))
                            .sum::<u64>()
                            .min(n)
                    })
                    .sum()
            },
            0,
        )?;
        let s = self.route(s, &[Key::Ino(ino)], &[])?;
        if need > 0 {
            self.reserved += need;
            let e = self.falloc.entry(ino).or_default();
            e.0.push((b0, b1));
            e.1 += need;
        }
        self.streams.relate(s, &[Key::Ino(ino)], &[]);
        if !keep_size && end > size {
            let time = self.now();
            self.log(
                s,
                LogOp::SetSize {
                    ino,
                    size: end,
                    time,
                    free_past_end: false,
                },
                &[Key::Ino(ino)],
                &[],
            )?;
        }
        self.count_call(s);
        Ok(())
    }

    /// fallocate FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: [off, off+len) reads as zeros
    /// afterwards, whole blocks inside it are unmapped (freed when the call commits, like a
    /// truncate's), and the size stays. Bytes of the partial blocks at the edges are zeroed
    /// with a write of the block (inside the file's size; past it they read as zeros).
    pub fn punch_hole(&mut self, s: StreamId, ino: Ino, off: u64, len: u64) -> Result<()> {
        self.writable()?;
        if len == 0 {
            return Err(FsError::Invalid("fallocate of length 0".into()));
        }
        let end = off
            .checked_add(len)
            .ok_or(FsError::TooBig(String::new()))?
            .min(MAX_FILE_SIZE);
        let size = self.file(ino)?.size;
        if off >= end {
            return Ok(());
        }
        let s = self.route(s, &[Key::Ino(ino)], &[])?;
        let bs = BLOCK as u64;
        let (full0, full1) = (off.div_ceil(bs), end / bs);
        // The partial blocks at the edges, within the size.
        let mut edges = vec![off / bs];
        if end % bs != 0 && end / bs != off / bs {
            edges.push(end / bs);
        }
        let mut zero = Vec::new();
        for b in edges {
            let (a, z) = (off.max(b * bs), end.min((b + 1) * bs).min(size));
            if (a == b * bs && z == (b + 1) * bs) || a >= z {
                continue; // a whole block (unmapped below) or nothing inside the size
            }
            let mapped = self.dirty.get(&ino).is_some_and(|d| d.contains_key(&b))
                || self
                    .node(ino)?
                    .extents()
                    .and_then(|e| map_block(e, b))
                    .is_some_and(|(_, c)| c.is_some());
            if mapped {
                zero.push((b, a, z));
            }
        }
        // Room for both edges, and for the extent a punch inside one splits off, before
        // anything changes: a call refused for space changes nothing.
        let split_bytes = self.punch_split_bytes(ino, full0, full1);
        self.room_for(
            |fs| {
                zero.iter()
                    .filter(|(b, ..)| !fs.dirty.get(&ino).is_some_and(|d| d.contains_key(b)))
                    .count() as u64
            },
            split_bytes,
        )?;
        for (b, a, z) in zero {
            let mut blk = self.file_block(ino, b)?;
            blk[(a - b * bs) as usize..(z - b * bs) as usize].fill(0);
            self.put_dirty(ino, b, blk.into_boxed_slice())?;
        }
        if full0 < full1 {
            // Dirty blocks inside go; so does preallocation still waiting for its commit.
            if let Some(d) = self.dirty.get_mut(&ino) {
                let keys: Vec<u64> = d.range(full0..full1).map(|(k, _)| *k).collect();
                for k in &keys {
                    d.remove(k);
                }
                let gone = keys.len() as u64;
                intactfs_device::counter::release(
                    &mut self.dirty_blocks,
                    gone,
                    "dirty_blocks (punch)",
                );
                intactfs_device::counter::release(&mut self.reserved, gone, "reserved (punch)");
                if d.is_empty() {
                    self.dirty.remove(&ino);
                }
            }
            if let Some((ranges, _)) = self.falloc.get_mut(&ino) {
                // The reservation stays until the commit (then released whole): only the
                // ranges to allocate shrink.
                *ranges = ranges
                    .iter()
                    .flat_map(|&(a, b)| [(a, b.min(full0)), (a.max(full1), b)])
                    .filter(|(a, b)| a < b)
                    .collect();
            }
        }
        let time = self.now();
        self.log(
            s,
            LogOp::Punch {
                ino,
                lblk: full0,
                len: full1.saturating_sub(full0),
                time,
            },
            &[Key::Ino(ino)],
            &[],
        )?;
        self.meta_growth_bytes += split_bytes;
        self.count_call(s);
        Ok(())
    }

    /// The reserve a commit by checkpoint needs (kept in one small function so that the
    /// metadata-reserve sizing can share it): a new base snapshot of the durable state plus
    /// the commit's record-sized growth, in blocks.
    fn commit_snapshot_blocks(&self, est_blocks: u64) -> Result<u64> {
        let durable_bytes = postcard::experimental::serialized_size(&self.durable)
            .map_err(|e| FsError::Internal(format!("sizing the durable metadata: {e}")))?
            as u64;
        Ok(durable_bytes.div_ceil(BLOCK as u64) + est_blocks + 1)
    }

    fn log_commit(&mut self, seq: u64, streams: Vec<(StreamId, u64)>) {
        if self.opts.keep_commit_log {
            self.commit_log.push(CommitInfo { seq, streams });
        }
    }

    /// Marks the mount unusable: memory and the device may disagree. Every later call
    /// fails with EIO ([`Self::writable`], [`Self::usable`]); the image on the device stays
    /// recoverable (whatever reached it is a prefix of whole commits).
    fn poison(&mut self, why: String) -> FsError {
        if self.poisoned.is_none() {
            self.poisoned = Some(why.clone());
        }
        FsError::Internal(format!(
            "{why}; the mount is poisoned (every later call fails with EIO): unmount it and mount again"
        ))
    }

    /// Why the mount is poisoned, if it is.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Makes the durable metadata the checkpoint's and points the other checkpoint slot at
    /// it; the journal restarts at its first block. Writes a delta (the inodes changed
    /// since the last checkpoint) while the chain stays short and its deltas together stay
    /// under half the base; otherwise a new base.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.writable()?;
        // Nothing unflushed before the snapshot: a failed snapshot write or flush can then
        // only have touched free blocks, and is a refusal rather than a poison.
        let clean = !self.has_unflushed();
        // The snapshot holds every commit so far: their writes go first.
        self.drain()?;
        let delta = if self.full_next || self.cp.deltas.len() >= MAX_DELTAS {
            None
        } else {
            let d = Delta {
                index: self.cp.deltas.len() as u32,
                base_crc: self.cp.snapshot_crc,
                next_ino: self.durable.next_ino,
                inodes: self
                    .touched
                    .iter()
                    .map(|&i| (i, self.durable.inodes.get(&i)))
                    .collect(),
            };
            let bytes = postcard::to_stdvec(&d).expect("in-memory serialization");
            let chain: u64 =
                self.cp.deltas.iter().map(|d| d.bytes).sum::<u64>() + bytes.len() as u64;
            (chain as f64 <= self.opts.delta_share * self.cp.snapshot_bytes as f64
                && !self.base_instead_of_delta(bytes.len() as u64))
            .then_some(bytes)
        };
        let is_delta = delta.is_some();
        let bytes = delta.unwrap_or_else(|| {
            postcard::to_stdvec(&self.durable).expect("in-memory serialization")
        });
        if !is_delta {
            self.assert_snapshot_within_bound(bytes.len() as u64);
        }
        let held = if is_delta {
            self.cp.chain_runs().len()
        } else {
            0
        };
        let runs = match self.write_segment(&bytes, MAX_CHAIN_EXTENTS - held, clean)? {
            Some(runs) => runs,
            // A delta that does not fit: a new base then (no larger than the delta's room
            // in the reserve, see reserve.rs).
            None if is_delta => return self.checkpoint_base(),
            None => {
                return Err(FsError::NoSpace(format!(
                    "no room for a {}-block metadata snapshot",
                    bytes.len().div_ceil(BLOCK)
                )))
            }
        };
        let mut cp = self.next_checkpoint(is_delta, runs.clone(), &bytes);
        if !cp.fits_inline() {
            if let Err(e) = self.add_run_table(&mut cp, clean) {
                // The new segment is referenced by nothing durable: give it back.
                for (s, l) in runs {
                    self.alloc.release(s, l);
                }
                return Err(e);
            }
        }
        self.flip_checkpoint(cp, is_delta, &bytes)
    }

    /// Writes the run table of `cp`'s chain (too many extents for the header) and names it
    /// in `cp`.
    /// `clean` as for [`Self::write_segment`].
    fn add_run_table(&mut self, cp: &mut Checkpoint, clean: bool) -> Result<()> {
        assert!(cp.table.is_none() && !cp.fits_inline());
        let table = layout::encode_table(&cp.run_table());
        let Some(runs) = self.write_segment(&table, MAX_TABLE_EXTENTS, clean)? else {
            return Err(FsError::NoSpace(format!(
                "no room for the run table of a {}-extent metadata snapshot",
                cp.chain_runs().len()
            )));
        };
        cp.table = Some(Segment {
            runs,
            bytes: table.len() as u64,
            crc: layout::snapshot_crc(&table),
        });
        Ok(())
    }

    /// The header of the chain after a checkpoint that wrote `bytes` at `runs` (a delta
    /// appended to the current chain, or a new base); its run table, if it needs one, is
    /// the caller's to add.
    fn next_checkpoint(&self, is_delta: bool, runs: Vec<(u64, u64)>, bytes: &[u8]) -> Checkpoint {
        if is_delta {
            let mut cp = self.cp.clone();
            cp.generation += 1;
            cp.journal_pos = self.sb.journal_start;
            cp.next_seq = self.next_seq;
            cp.durable_upto = self.next_seq - 1;
            cp.deltas.push(Segment {
                runs,
                bytes: bytes.len() as u64,
                crc: layout::snapshot_crc(bytes),
            });
            cp.table = None;
            cp
        } else {
            Checkpoint::new(&self.sb, self.cp.generation + 1, runs, bytes, self.next_seq)
        }
    }

    /// Writes `cp` into the other header slot and makes it the current checkpoint.
    fn flip_checkpoint(&mut self, cp: Checkpoint, is_delta: bool, bytes: &[u8]) -> Result<()> {
        assert!(
            cp.table.is_some() || cp.fits_inline(),
            "a chain of {} extents without a run table",
            cp.chain_runs().len()
        );
        assert!(
            cp.table.is_none() || !cp.fits_inline(),
            "a run table for an inline chain"
        );
        let slot = 1 - self.cp_slot;
        let hdr = cp.encode();
        if hdr.len() != BLOCK {
            return Err(FsError::Internal(format!(
                "checkpoint header of {} bytes",
                hdr.len()
            )));
        }
        if let Err(e) = self
            .dev
            .write(CHECKPOINT_SLOTS[slot], &hdr)
            .and_then(|_| self.dev.flush())
        {
            return Err(self.poison(format!("writing the checkpoint header: {e}")));
        }
        // A new base replaces the whole old chain; a delta extends it. A run table belongs
        // to its header alone.
        if !is_delta {
            for (s, l) in self.cp.meta_runs() {
                self.alloc.release(s, l);
            }
        } else {
            for &(s, l) in self.cp.table.iter().flat_map(|t| t.runs.iter()) {
                self.alloc.release(s, l);
            }
            self.stats.delta_checkpoints += 1;
        }
        self.stats.snapshot_bytes += bytes.len().div_ceil(BLOCK).max(1) as u64 * BLOCK as u64;
        self.stats.header_bytes += BLOCK as u64;
        self.stats.flushes += 2;
        self.stats.checkpoints += 1;
        self.cp = cp;
        self.cp_slot = slot;
        self.touched.clear();
        self.full_next = false;
        self.jhead = self.sb.journal_start;
        // The header flip's flush made every record written before it durable too.
        self.tickets.checkpointed(self.written_ticket());
        self.inflight_reset();
        self.released_all();
        self.measure_meta();
        self.keep_room_promise();
        Ok(())
    }

    /// A checkpoint that writes a new base whatever the chain.
    pub fn checkpoint_base(&mut self) -> Result<()> {
        self.full_next = true;
        self.checkpoint()
    }

    /// Writes `bytes` padded to whole blocks into newly allocated blocks, in at most
    /// `max_runs` extents, and flushes; `None` (nothing written, nothing kept) if they do
    /// not fit. A device error poisons the mount unless the cache held nothing else
    /// (`clean`): then only free blocks were written, and it is a refusal.
    fn write_segment(
        &mut self,
        bytes: &[u8],
        max_runs: usize,
        clean: bool,
    ) -> Result<Option<Vec<(u64, u64)>>> {
        let n = (bytes.len().div_ceil(BLOCK) as u64).max(1);
        let runs = self.alloc.alloc(n);
        let got: u64 = runs.iter().map(|r| r.1).sum();
        if got < n || runs.len() > max_runs {
            for (s, l) in runs {
                self.alloc.release(s, l);
            }
            return Ok(None);
        }
        let mut padded = bytes.to_vec();
        padded.resize(n as usize * BLOCK, 0);
        let mut at = 0;
        let mut failed = None;
        for &(s, l) in &runs {
            let len = l as usize * BLOCK;
            if let Err(e) = self.dev.write_run(s, &padded[at..at + len]) {
                failed = Some(("writing", e));
                break;
            }
            at += len;
        }
        if failed.is_none() {
            failed = self.dev.flush().err().map(|e| ("flushing", e));
        }
        let Some((what, e)) = failed else {
            return Ok(Some(runs));
        };
        if !clean {
            return Err(self.poison(format!("{what} the metadata snapshot: {e}")));
        }
        for (s, l) in runs {
            self.alloc.release(s, l);
        }
        Err(refusal(format!("{what} the metadata snapshot"), e))
    }
}

/// The operation of a setattr's attributes (not its size), changed at `ctime`; `None` when
/// it sets none.
fn setattr_op(ino: Ino, a: &SetAttr, ctime: Time) -> Option<LogOp> {
    let any = a.mode.is_some()
        || a.uid.is_some()
        || a.gid.is_some()
        || a.atime.is_some()
        || a.mtime.is_some();
    any.then_some(LogOp::SetAttr {
        ino,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        atime: a.atime,
        mtime: a.mtime,
        ctime,
    })
}

/// A device error that changed nothing durable, as the caller's error: ENOSPC stays
/// ENOSPC (a thinly provisioned device), anything else is EIO.
fn refusal(what: String, e: intactfs_device::DeviceError) -> FsError {
    match &e {
        intactfs_device::DeviceError::Io { source, .. } if source.raw_os_error() == Some(28) => {
            FsError::NoSpace(format!("{what}: {e}"))
        }
        _ => FsError::Device(e),
    }
}

/// The runs of file blocks in [a, b) that are neither mapped nor dirty: (first, length).
fn holes(
    ext: &BTreeMap<u64, Extent>,
    dirty: Option<&BTreeMap<u64, Box<[u8]>>>,
    a: u64,
    b: u64,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut lb = a;
    while lb < b {
        if map_block(ext, lb).is_some() {
            let (k, e) = ext.range(..=lb).next_back().expect("mapped");
            lb = (k + e.len).min(b);
            continue;
        }
        let end = ext
            .range(lb..)
            .next()
            .map(|(k, _)| *k)
            .unwrap_or(u64::MAX)
            .min(b);
        // Dirty blocks inside the gap split it.
        let start = lb;
        for &d in dirty
            .into_iter()
            .flat_map(|d| d.range(start..end).map(|(k, _)| k))
        {
            if d > lb {
                out.push((lb, d - lb));
            }
            lb = d + 1;
        }
        if end > lb {
            out.push((lb, end - lb));
        }
        lb = end;
    }
    out
}

/// Sorted, overlapping or touching ranges merged.
fn merge_ranges(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in r {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Every seed interface but AD-transactions is here; the caller's context is its stream
/// (ccfs).
impl<D: BlockDevice> EngineBase for Fs<D> {
    type Ctx = StreamId;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: true,
            osync_dsync: true,
            atomic_regions: true,
            ad_transactions: false,
        }
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.usable()?;
        Ok(self.attr_of(ino, self.node(ino)?))
    }

    fn statfs(&self) -> StatFs {
        // As other file systems do, space an unlink released is free now, not at its commit.
        let free = (self.alloc.free_blocks() + self.freeing)
            .saturating_sub(self.reserved + self.meta_reserve());
        StatFs {
            block_size: BLOCK as u64,
            blocks: self.sb.blocks - self.sb.data_start(),
            free_blocks: free,
            // Inodes are allocated on demand: at most one per free block is a fair bound
            // (what `df -i` shows).
            files: self.live.inodes.len() as u64 + free,
            free_files: free,
            name_max: NAME_MAX as u64,
        }
    }
}

trait TakeOrDefault {
    fn take_or_default(&mut self) -> Clock;
}

impl TakeOrDefault for Option<Clock> {
    fn take_or_default(&mut self) -> Clock {
        self.take().unwrap_or_else(|| Box::new(now_wall))
    }
}
