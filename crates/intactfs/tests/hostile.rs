//! Hostile images (issue requirement: "a fuzzer over the on-disk format and the journal:
//! corrupted or truncated images make mount refuse with a clear error and fsck report the
//! damage — never a panic, a hang, or silent data loss").
//!
//! A few realistic base images are built here (files, directories, hard links, symlinks,
//! sparse and preallocated files, an orphan, journal records after a checkpoint, a clean
//! unmount, a small journal that wrapped through several checkpoints). Property tests then
//! damage them, each case checked by the same oracle ([`check_image`]):
//!
//! * nothing panics or hangs: fsck (with and without data verification), dump and mount
//!   run in a separate thread under `catch_unwind` with a time limit;
//! * fsck and mount agree: mount refuses exactly when fsck (without data verification)
//!   reports a problem; a refusal is `FsError::Corrupt` whose message names the damaged
//!   structure (superblock, checkpoint, snapshot, journal, block, inode, ...);
//! * what mount accepts is sound: an invariant check written independently of
//!   `recovery::check_meta` passes on the loaded metadata (a hostile image the engine's
//!   checks let through is a "wrong acceptance"), every directory lists, every entry
//!   resolves, every symlink reads, every file reads in full or fails with `Corrupt`, and
//!   the engine accepts new work (existing files overwritten, extended, truncated and
//!   preallocated, an entry removed, a file and a directory created) that survives
//!   unmount, remount and fsck;
//! * per damage class, the exact outcome where it is determined: damage to structures
//!   nobody reads (the unused checkpoint slot, the stale journal past the replay point,
//!   free blocks, padding after a frame) leaves mount working with the content identical;
//!   damage to a file's data block is reported by the read (`Corrupt`) and by
//!   `fsck(verify_data)`; damage to the superblock or the live snapshot makes mount refuse;
//!   damage to a journal record that later records prove durable makes mount refuse, and
//!   to the last record, replay stops just before it (a crash could have torn it).
//!
//! Byte-level damage only tests the checksums, so the structural classes re-encode decoded
//! superblocks, checkpoint headers, journal records and metadata snapshots with fields
//! changed and valid checksums (`layout::encode`).
//!
//! Cases per class are printed with `-- --nocapture`. Long runs: `INTACTFS_FUZZ_CASES=100000
//! cargo test --release -p intactfs --test hostile -- --nocapture` (the total over all
//! classes, shared in proportion to the defaults; about 2 minutes on two cores; a debug
//! build also checks arithmetic overflow). `INTACTFS_FUZZ_TRACE=1` prints every refusal.

use intactfs::dump::dump;
use intactfs::engine::MAX_FILE_SIZE;
use intactfs::fsck::fsck;
use intactfs::layout::{
    self, Checkpoint, Delta, Record, Segment, Superblock, CHECKPOINT_SLOTS, CP2_MAGIC, CP_MAGIC,
    FORMAT_VERSION, FORMAT_VERSION_MIN, REC_MAGIC, SB_MAGIC,
};
use intactfs::meta::{
    dir_key, name_hash, valid_name, Body, Extent, Inode, LogOp, Meta, SYMLINK_MAX,
};
use intactfs::prelude::*;
use intactfs::recovery::{self, check_meta};
use intactfs::{
    mkfs, FileType, Fs, FsError, Ino, MkfsOptions, MknodKind, MountOptions, NewKind, Owner,
    RenameFlags, Time, BLOCK, INIT_STREAM, ROOT,
};
use intactfs_device::{BlockDevice, DeviceError, SimDevice};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

// ----- base images -----

fn t0() -> Time {
    Time {
        sec: 1_700_000_000,
        nsec: 0,
    }
}

fn mopts() -> MountOptions {
    let mut t = 1_700_000_000i64;
    MountOptions {
        dirty_limit: 1 << 20,
        clock: Some(Box::new(move || {
            t += 1;
            Time { sec: t, nsec: 0 }
        })),
        ..Default::default()
    }
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add((i / 4096) as u8)
        })
        .collect()
}

/// Files, directories, a hard link, a symlink, a sparse file, preallocation past the end,
/// an overwrite, a truncation, a rename, a FIFO and (open and unlinked) an orphan; every
/// step fsynced so the journal holds one record per step.
fn work(fs: &mut Fs<SimDevice>, k: u8) -> Result<(), FsError> {
    let s = INIT_STREAM;
    let o = Owner::default();
    let d = fs.mkdir(s, ROOT, format!("d{k}").as_bytes(), 0o755, o)?.ino;
    let e = fs.mkdir(s, d, b"e", 0o700, o)?.ino;
    let f = fs.create(s, d, b"f", 0o644, o)?.ino;
    fs.write(s, f, 0, &pattern(k, 3 * BLOCK + 100))?;
    fs.fsync(s, f, false)?;
    let gname = format!("g{k}");
    let g = fs.create(s, ROOT, gname.as_bytes(), 0o600, o)?.ino;
    fs.write(s, g, 0, b"hello, hostile world")?;
    fs.link(s, g, e, b"g-link")?;
    fs.symlink(s, e, b"sym", format!("../d{k}/f").as_bytes(), o)?;
    fs.fsync(s, g, false)?;
    let big = fs.create(s, e, b"big", 0o644, o)?.ino;
    fs.write(s, big, 0, &pattern(k.wrapping_add(7), 9 * BLOCK))?;
    fs.write(s, big, 20 * BLOCK as u64, b"sparse tail")?;
    fs.fsync(s, big, false)?;
    fs.truncate(s, f, 5000)?;
    fs.fallocate(s, f, 8 * BLOCK as u64, 2 * BLOCK as u64, true)?;
    fs.rename(
        s,
        ROOT,
        gname.as_bytes(),
        d,
        b"g-moved",
        RenameFlags::default(),
    )?;
    fs.write(s, f, 100, b"overwritten")?;
    fs.fsync(s, f, false)?;
    let tname = format!("tmp{k}");
    let tmp = fs.create(s, ROOT, tname.as_bytes(), 0o644, o)?.ino;
    fs.write(s, tmp, 0, &pattern(k.wrapping_add(3), BLOCK + 1))?;
    fs.open(tmp)?;
    fs.unlink(s, ROOT, tname.as_bytes())?;
    fs.mknod(s, d, b"fifo", MknodKind::Fifo, 0o644, o)?;
    fs.sync()
}

fn fresh(blocks: u64, journal: u64, uuid: u64) -> Fs<SimDevice> {
    let mut dev = SimDevice::new(BLOCK, blocks).unwrap();
    mkfs(
        &mut dev,
        &MkfsOptions {
            journal_blocks: Some(journal),
            uuid,
            time: t0(),
        },
    )
    .unwrap();
    Fs::mount(dev, mopts()).unwrap().0
}

/// The durable content of a device whose engine stopped without unmounting (a crash).
fn crashed(fs: Fs<SimDevice>) -> Vec<u8> {
    fs.into_device().durable().to_vec()
}

fn build_images() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    // Records of the mount's checkpoint epoch only.
    let mut fs = fresh(384, 32, 0xA11CE);
    work(&mut fs, 1).unwrap();
    let journal = crashed(fs);
    out.push(("journal", journal.clone()));
    // A checkpoint in the middle: records after it, the older header in the other slot.
    let mut fs = fresh(384, 32, 0xB0B);
    work(&mut fs, 1).unwrap();
    fs.checkpoint().unwrap();
    work(&mut fs, 2).unwrap();
    out.push(("checkpointed", crashed(fs)));
    // A clean unmount: no live records, the stale journal full of older epochs.
    let mut fs = fresh(384, 32, 0xC1EA);
    work(&mut fs, 1).unwrap();
    work(&mut fs, 2).unwrap();
    out.push(("clean", fs.unmount().unwrap().durable().to_vec()));
    // A small journal: several checkpoints on their own, stale records after the head.
    let mut fs = fresh(256, 8, 0x5A11);
    for k in 1..=3 {
        work(&mut fs, k).unwrap();
    }
    out.push(("wrapped", crashed(fs)));
    // A checkpoint chain: a base holding many files, deltas for small changes after it
    // (one of them freeing an inode), then more work and a crash.
    let mut fs = fresh(384, 32, 0xC4A1);
    let s = INIT_STREAM;
    let o = Owner::default();
    let many = fs.mkdir(s, ROOT, b"many", 0o755, o).unwrap().ino;
    for i in 0..120 {
        fs.create(s, many, format!("file-{i:03}").as_bytes(), 0o644, o)
            .unwrap();
    }
    let w = fs.mkdir(s, ROOT, b"w", 0o755, o).unwrap().ino;
    fs.sync().unwrap();
    fs.checkpoint_base().unwrap();
    for k in 0..3u8 {
        let f = fs
            .create(s, w, format!("c{k}").as_bytes(), 0o644, o)
            .unwrap()
            .ino;
        fs.write(s, f, 0, &pattern(k, 100)).unwrap();
        if k == 1 {
            fs.unlink(s, w, b"c0").unwrap();
        }
        fs.sync().unwrap();
        fs.checkpoint().unwrap();
    }
    work(&mut fs, 1).unwrap();
    out.push(("chained", crashed(fs)));
    // Recovered once (orphan freed, new checkpoint), then more work and a crash.
    let (mut fs, _) = Fs::mount(SimDevice::from_image(BLOCK, journal).unwrap(), mopts()).unwrap();
    work(&mut fs, 3).unwrap();
    out.push(("remounted", crashed(fs)));
    out
}

#[derive(Clone, Debug)]
enum Use {
    /// Byte offset of the block in segment `seg` of the metadata chain (0: the base).
    Snapshot { seg: usize, at: usize },
    /// Written file data (of an orphan: freed at mount).
    Data { ino: Ino, orphan: bool },
    /// Preallocated: reads as zeros whatever the block holds.
    Unwritten,
}

struct Rec {
    pos: u64,
    nb: u64,
    /// Bytes the frame covers (the rest of its blocks is padding).
    frame: usize,
    rec: Record,
}

struct Base {
    name: &'static str,
    img: Vec<u8>,
    sb: Superblock,
    cp: Checkpoint,
    slot: usize,
    /// The checkpoint's snapshot, before replay.
    snap: Meta,
    /// What `recovery::load` returns (after replay, before orphans are freed).
    loaded: Meta,
    next_seq: u64,
    records: Vec<Rec>,
    journal_head: u64,
    sb_frame: usize,
    cp_frame: usize,
    uses: BTreeMap<u64, Use>,
    /// Device blocks replay verifies (checksums in records past every durability claim),
    /// with the index of the first record that maps them.
    verified: BTreeMap<u64, usize>,
    free: Vec<u64>,
    /// After mount: the state and every file's content.
    meta: Meta,
    contents: BTreeMap<Ino, Result<Vec<u8>, String>>,
}

fn frame_of(magic: &[u8; 8], bytes: &[u8]) -> usize {
    layout::framed_len(magic, bytes).unwrap() as usize
}

/// A checkpoint header's frame length, whichever of the two shapes it has.
fn cp_frame_of(bytes: &[u8]) -> usize {
    layout::framed_len(CP2_MAGIC, bytes)
        .or_else(|_| layout::framed_len(CP_MAGIC, bytes))
        .unwrap() as usize
}

fn segment_bytes(img: &[u8], runs: &[(u64, u64)], len: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    for &(s, l) in runs {
        bytes.extend_from_slice(&img[s as usize * BLOCK..(s + l) as usize * BLOCK]);
    }
    bytes.truncate(len as usize);
    bytes
}

/// The checkpoint's metadata: the base with every delta applied in order.
fn snapshot_meta(img: &[u8], cp: &Checkpoint) -> Meta {
    let mut m: Meta =
        postcard::from_bytes(&segment_bytes(img, &cp.snapshot, cp.snapshot_bytes)).unwrap();
    for (k, seg) in cp.deltas.iter().enumerate() {
        let d: Delta<Inode> =
            postcard::from_bytes(&segment_bytes(img, &seg.runs, seg.bytes)).unwrap();
        assert_eq!(d.index as usize, k);
        for (i, n) in d.inodes {
            match n {
                Some(n) => m.inodes.insert(i, n),
                None => m.inodes.remove(&i),
            };
        }
        m.next_ino = d.next_ino;
    }
    m
}

/// The byte length of segment `seg` of the chain (0: the base, k + 1: delta k).
fn seg_len(cp: &Checkpoint, seg: usize) -> usize {
    if seg == 0 {
        cp.snapshot_bytes as usize
    } else {
        cp.deltas[seg - 1].bytes as usize
    }
}

fn analyze(name: &'static str, img: Vec<u8>) -> Base {
    let l = recovery::load(&mut RoDev(&img))
        .unwrap_or_else(|e| panic!("base image {name} does not load: {e}"));
    let mut records = Vec::new();
    let mut pos = l.cp.journal_pos;
    for r in &l.replayed {
        let bytes = layout::encode(REC_MAGIC, r);
        let nb = (bytes.len() / BLOCK) as u64;
        assert_eq!(
            &img[pos as usize * BLOCK..(pos + nb) as usize * BLOCK],
            &bytes[..],
            "{name}: record {} re-encodes differently",
            r.seq
        );
        records.push(Rec {
            pos,
            nb,
            frame: frame_of(REC_MAGIC, &bytes),
            rec: r.clone(),
        });
        pos += nb;
    }
    assert_eq!(pos, l.journal_head);
    let durable = l
        .replayed
        .iter()
        .map(|r| r.durable_upto)
        .chain([l.cp.durable_upto])
        .max()
        .unwrap();
    let mut verified: BTreeMap<u64, usize> = BTreeMap::new();
    for (k, r) in l.replayed.iter().enumerate() {
        if r.seq > durable {
            for op in &r.ops {
                for (b, _) in op.data_blocks() {
                    verified.entry(b).or_insert(k);
                }
            }
        }
    }
    let orphans = recovery::orphans(&l.meta);
    let mut uses = BTreeMap::new();
    let chain = [&l.cp.snapshot]
        .into_iter()
        .chain(l.cp.deltas.iter().map(|d| &d.runs));
    for (seg, runs) in chain.enumerate() {
        let mut at = 0;
        for &(s, n) in runs {
            for b in s..s + n {
                assert!(uses.insert(b, Use::Snapshot { seg, at }).is_none());
                at += BLOCK;
            }
        }
    }
    for (ino, n) in &l.meta.inodes {
        for e in n.extents().into_iter().flat_map(|x| x.values()) {
            for k in 0..e.len {
                let b = e.pblk + k;
                let u = if e.written() {
                    Use::Data {
                        ino: *ino,
                        orphan: orphans.contains(ino),
                    }
                } else {
                    Use::Unwritten
                };
                assert!(uses.insert(b, u).is_none());
            }
        }
    }
    let sb = l.sb.clone();
    let free = (sb.data_start()..sb.blocks)
        .filter(|b| !uses.contains_key(b))
        .collect();
    let (mut fs, _) =
        Fs::mount(SimDevice::from_image(BLOCK, img.clone()).unwrap(), mopts()).unwrap();
    let contents = walk(&mut fs).unwrap();
    assert!(
        contents.values().all(|c| c.is_ok()),
        "{name}: unreadable file in the base image"
    );
    let base = Base {
        name,
        sb_frame: frame_of(SB_MAGIC, &img[..BLOCK]),
        cp_frame: cp_frame_of(&img[CHECKPOINT_SLOTS[l.slot] as usize * BLOCK..]),
        snap: snapshot_meta(&img, &l.cp),
        sb,
        cp: l.cp.clone(),
        slot: l.slot,
        loaded: l.meta.clone(),
        next_seq: l.next_seq,
        records,
        journal_head: l.journal_head,
        uses,
        verified,
        free,
        meta: fs.live_meta().clone(),
        contents,
        img,
    };
    assert!(independent_problems(&base.loaded, &base.sb, &base.cp.meta_runs()).is_empty());
    base
}

fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let v: Vec<Base> = build_images()
            .into_iter()
            .map(|(n, i)| analyze(n, i))
            .collect();
        // The classes below need these shapes.
        let by = |n: &str| v.iter().find(|b| b.name == n).unwrap();
        assert!(
            by("journal").records.len() >= 4
                && by("checkpointed").records.len() >= 4
                && by("remounted").records.len() >= 4
        );
        assert!(by("clean").records.is_empty());
        assert!(by("checkpointed").cp.generation >= 3 && by("wrapped").cp.generation >= 4);
        assert!(v.iter().any(|b| !b.verified.is_empty()));
        assert!(v.iter().any(|b| b
            .uses
            .values()
            .any(|u| matches!(u, Use::Data { orphan: true, .. }))));
        assert!(v
            .iter()
            .any(|b| b.uses.values().any(|u| matches!(u, Use::Unwritten))));
        // Headers of both shapes: a base alone, and a base with delta segments.
        assert!(
            v.iter().any(|b| b.cp.deltas.is_empty()) && v.iter().any(|b| b.cp.deltas.len() >= 2),
            "{:?}",
            v.iter()
                .map(|b| (b.name, b.cp.deltas.len()))
                .collect::<Vec<_>>()
        );
        v
    })
}

// ----- devices -----

/// fsck and dump must not write: a device that refuses writes (a panic is caught and
/// reported as a failure).
struct RoDev<'a>(&'a [u8]);

impl BlockDevice for RoDev<'_> {
    fn block_size(&self) -> usize {
        BLOCK
    }
    fn blocks(&self) -> u64 {
        (self.0.len() / BLOCK) as u64
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        if block >= self.blocks() {
            return Err(DeviceError::OutOfRange {
                block,
                blocks: self.blocks(),
                block_size: BLOCK,
            });
        }
        buf.copy_from_slice(&self.0[block as usize * BLOCK..(block as usize + 1) * BLOCK]);
        Ok(())
    }
    fn write(&mut self, block: u64, _: &[u8]) -> Result<(), DeviceError> {
        panic!("a read-only tool wrote block {block}")
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

// ----- the oracle -----

/// What a damage class implies beyond the generic checks.
#[derive(Clone, Debug)]
enum Expect {
    Any,
    /// Mounts, with the same state and content as the base image.
    Identical,
    /// Mount refuses, naming one of these.
    Refuse(&'static [&'static str]),
    RefuseOrIdentical(&'static [&'static str]),
    /// Mounts with the base's state; reading these files fails with `Corrupt` and
    /// fsck(verify_data) names these device blocks; every other file reads as before.
    DataDamage {
        inos: BTreeSet<Ino>,
        blocks: BTreeSet<u64>,
    },
    /// Mounts; replay stops just before record `k` (the base's snapshot plus records 0..k).
    CutAt(usize),
    /// Mounts with exactly this state (orphans freed) after replaying this many records.
    Exactly(Box<Meta>, usize),
}

impl Expect {
    fn and(self, o: Expect) -> Expect {
        use Expect::*;
        match (self, o) {
            (Identical, x) | (x, Identical) => x,
            (DataDamage { inos: a, blocks: b }, DataDamage { inos: c, blocks: d }) => DataDamage {
                inos: a.union(&c).copied().collect(),
                blocks: b.union(&d).copied().collect(),
            },
            (CutAt(a), CutAt(b)) => CutAt(a.min(b)),
            // Which structure mount names depends on the order it reads them in.
            (Refuse(a), Refuse(b)) => Refuse(if a == b { a } else { NAMED }),
            _ => Any,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Refused,
    Identical,
    Mounted,
}

const NAMED: &[&str] = &[
    "superblock",
    "checkpoint",
    "snapshot",
    "journal",
    "block",
    "inode",
    "directory",
    "orphan",
];
const SB: &[&str] = &["superblock", "intactfs image"];
const CP: &[&str] = &["checkpoint", "snapshot", "journal"];
const SNAP: &[&str] = &["snapshot"];
const JOURNAL: &[&str] = &["journal"];

fn time_limit() -> Duration {
    Duration::from_secs(if cfg!(debug_assertions) { 60 } else { 20 })
}

/// Runs `f` in its own thread: a panic or a hang is a failure with a message.
fn guarded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(time_limit()) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(p)) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("PANIC: {msg}"))
        }
        Err(_) => Err(format!("HANG: no result within {:?}", time_limit())),
    }
}

const READ_CAP: u64 = 1 << 20;

/// Lists every directory, resolves every entry, reads every symlink and every file (a
/// huge sparse one: its first MiB and its last block). A file that fails with `Corrupt`
/// is recorded as such; any other failure is a violation.
fn walk(fs: &mut Fs<SimDevice>) -> Result<BTreeMap<Ino, Result<Vec<u8>, String>>, String> {
    let nodes: Vec<(Ino, FileType, u64, usize)> = fs
        .live_meta()
        .inodes
        .iter()
        .map(|(i, n)| (*i, n.kind, n.size, n.entries().map_or(0, |e| e.len())))
        .collect();
    let mut out = BTreeMap::new();
    for (ino, kind, size, entries) in nodes {
        let a = fs.getattr(ino).map_err(|e| format!("getattr {ino}: {e}"))?;
        if a.kind != kind || a.size != size {
            return Err(format!("getattr {ino}: {a:?}"));
        }
        match kind {
            FileType::Dir => {
                let list = fs
                    .readdir(ino, 0, usize::MAX)
                    .map_err(|e| format!("readdir {ino}: {e}"))?;
                if list.len() != entries {
                    return Err(format!(
                        "readdir {ino}: {} of {entries} entries",
                        list.len()
                    ));
                }
                for e in list {
                    let t = fs.getattr(e.ino).map_err(|er| {
                        format!(
                            "directory {ino}: entry {:?} -> {}: {er}",
                            String::from_utf8_lossy(&e.name),
                            e.ino
                        )
                    })?;
                    if t.kind != e.kind
                        || fs.lookup(ino, &e.name).map(|x| x.ino).ok() != Some(e.ino)
                    {
                        return Err(format!(
                            "directory {ino}: entry {:?} does not resolve to {}",
                            String::from_utf8_lossy(&e.name),
                            e.ino
                        ));
                    }
                }
            }
            FileType::Symlink => {
                let t = fs
                    .readlink(ino)
                    .map_err(|e| format!("readlink {ino}: {e}"))?;
                if t.len() as u64 != size {
                    return Err(format!("symlink {ino}: {} bytes, size {size}", t.len()));
                }
            }
            FileType::File => {
                let r = if size <= READ_CAP {
                    fs.read(ino, 0, size as usize)
                } else {
                    let last = (size - 1) / BLOCK as u64 * BLOCK as u64;
                    fs.read(ino, 0, READ_CAP as usize).and_then(|mut a| {
                        a.extend(fs.read(ino, last, BLOCK)?);
                        Ok(a)
                    })
                };
                match r {
                    Ok(b) => {
                        let want = if size <= READ_CAP {
                            size
                        } else {
                            READ_CAP + (size - 1) % BLOCK as u64 + 1
                        };
                        if b.len() as u64 != want {
                            return Err(format!(
                                "file {ino}: read {} bytes, expected {want}",
                                b.len()
                            ));
                        }
                        out.insert(ino, Ok(b));
                    }
                    Err(FsError::Corrupt(m)) => {
                        out.insert(ino, Err(m));
                    }
                    Err(e) => return Err(format!("reading file {ino}: {e} (not a Corrupt error)")),
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// New work on an accepted image must succeed (or run out of space) and survive unmount,
/// remount and fsck.
fn new_work(mut fs: Fs<SimDevice>) -> Result<(), String> {
    let s = INIT_STREAM;
    let o = Owner::default();
    let data = pattern(99, 2 * BLOCK + 7);
    // Existing (maybe hostile) files: overwrite, extend, truncate, preallocate; then remove
    // an entry of the root.
    let files: Vec<(Ino, u64)> = fs
        .live_meta()
        .inodes
        .iter()
        .filter(|(_, n)| n.kind == FileType::File && n.nlink > 0)
        .map(|(i, n)| (*i, n.size))
        .take(4)
        .collect();
    for (ino, size) in files {
        let r = (|| -> Result<(), FsError> {
            fs.write(s, ino, 0, b"head")?;
            fs.write(
                s,
                ino,
                size.saturating_sub(1).min(MAX_FILE_SIZE - 8),
                b"tail",
            )?;
            fs.truncate(s, ino, size / 2)?;
            fs.fallocate(s, ino, size / 4, 3 * BLOCK as u64, size % 2 == 0)?;
            fs.fsync(s, ino, false)
        })();
        match r {
            // Damaged data under a partial-block write; a full device.
            Ok(()) | Err(FsError::Corrupt(_) | FsError::NoSpace(_)) => {}
            Err(e) => {
                return Err(format!(
                    "changing existing file {ino} on the accepted image: {e}"
                ))
            }
        }
    }
    let first = fs
        .readdir(ROOT, 0, usize::MAX)
        .map_err(|e| e.to_string())?
        .into_iter()
        .next();
    if let Some(e) = first {
        let r = if e.kind == FileType::Dir {
            fs.rmdir(s, ROOT, &e.name)
        } else {
            fs.unlink(s, ROOT, &e.name)
        };
        match r {
            Ok(()) | Err(FsError::NotEmpty(_)) => {}
            Err(er) => {
                return Err(format!(
                    "removing {:?} on the accepted image: {er}",
                    String::from_utf8_lossy(&e.name)
                ))
            }
        }
    }
    let r = (|| -> Result<Ino, FsError> {
        let f = fs.create(s, ROOT, b"zz-hostile-new", 0o644, o)?.ino;
        fs.write(s, f, 0, &data)?;
        fs.fsync(s, f, false)?;
        let d = fs.mkdir(s, ROOT, b"zz-hostile-dir", 0o755, o)?.ino;
        fs.rename(
            s,
            ROOT,
            b"zz-hostile-new",
            d,
            b"moved",
            RenameFlags::default(),
        )?;
        fs.sync()?;
        Ok(f)
    })();
    let f = match r {
        Ok(f) => f,
        Err(FsError::NoSpace(_) | FsError::Exists(_)) => return Ok(()),
        Err(e) => return Err(format!("new work on the accepted image failed: {e}")),
    };
    let dev = match fs.unmount() {
        Ok(d) => d,
        Err(FsError::NoSpace(_)) => return Ok(()),
        Err(e) => return Err(format!("unmount after new work: {e}")),
    };
    let (mut fs, _) =
        Fs::mount(dev, mopts()).map_err(|e| format!("remount after new work: {e}"))?;
    if fs
        .read(f, 0, data.len())
        .map_err(|e| format!("reading the new file after remount: {e}"))?
        != data
    {
        return Err("the new file reads back different after remount".into());
    }
    let mut dev = fs.into_device();
    let r = fsck(&mut dev, false);
    if !r.clean() {
        return Err(format!("fsck after new work and remount: {:?}", r.problems));
    }
    Ok(())
}

/// Mirrors replay on the snapshot for the first `k` records of `base`, frees orphans.
fn after_records(base: &Base, k: usize) -> Meta {
    let mut m = base.snap.clone();
    for r in &base.records[..k] {
        for op in &r.rec.ops {
            m.apply(op).unwrap();
        }
    }
    free_orphans(&mut m);
    m
}

fn free_orphans(m: &mut Meta) {
    for o in recovery::orphans(m) {
        m.apply(&LogOp::Free { ino: o }).unwrap();
    }
}

/// The whole check of one damaged image.
fn check_image(base: &'static Base, img: Vec<u8>, expect: Expect) -> Result<Verdict, String> {
    let plain = fsck(&mut RoDev(&img), false);
    let data = fsck(&mut RoDev(&img), true);
    for p in plain.problems.iter().chain(&data.problems) {
        if p.trim().is_empty() {
            return Err("fsck reported an empty problem".into());
        }
    }
    if !plain.clean() && data.clean() {
        return Err("fsck found problems without data verification and none with it".into());
    }
    let dumped = dump(&mut RoDev(&img), true);
    let loaded = recovery::load(&mut RoDev(&img));
    let dev = SimDevice::from_image(BLOCK, img).map_err(|e| e.to_string())?;
    match Fs::mount(dev, mopts()) {
        Err(e) => {
            if plain.clean() {
                return Err(format!("mount refused ({e}) but fsck is clean"));
            }
            // A format version this build does not read is refused apart (not damage).
            let (FsError::Corrupt(m) | FsError::Unsupported(m)) = &e else {
                return Err(format!("mount refused with {e:?}, not a Corrupt error"));
            };
            if matches!(e, FsError::Unsupported(_)) != plain.unsupported.is_some() {
                return Err(format!(
                    "mount refused with {e:?}; fsck's unsupported format: {:?}",
                    plain.unsupported
                ));
            }
            if std::env::var_os("INTACTFS_FUZZ_TRACE").is_some() {
                eprintln!("refused: {m}");
            }
            if !NAMED.iter().any(|k| m.contains(k)) {
                return Err(format!(
                    "mount refused with a message that names no structure: {m}"
                ));
            }
            if !plain
                .problems
                .iter()
                .chain(&plain.unsupported)
                .any(|p| NAMED.iter().any(|k| p.contains(k)))
            {
                return Err(format!(
                    "fsck problems name no structure: {:?}",
                    plain.problems
                ));
            }
            match expect {
                Expect::Refuse(kw) | Expect::RefuseOrIdentical(kw)
                    if !kw.iter().any(|k| m.contains(k)) =>
                {
                    Err(format!(
                        "mount refused, but the message should name one of {kw:?}: {m}"
                    ))
                }
                Expect::Refuse(_) | Expect::RefuseOrIdentical(_) | Expect::Any => {
                    Ok(Verdict::Refused)
                }
                x => Err(format!("mount refused ({m}); expected {}", describe(&x))),
            }
        }
        Ok((mut fs, report)) => {
            if !plain.clean() {
                return Err(format!(
                    "mount accepted ({report:?}) but fsck reports {:?}",
                    plain.problems
                ));
            }
            if let Err(e) = dumped {
                return Err(format!("mount accepted but dump fails: {e}"));
            }
            let l = loaded.map_err(|e| format!("mount accepted but load fails: {e}"))?;
            let indep = independent_problems(&l.meta, &l.sb, &l.cp.meta_runs());
            if !indep.is_empty() {
                return Err(format!(
                    "WRONG ACCEPTANCE: mount accepted metadata that breaks invariants: {indep:?}"
                ));
            }
            let files = walk(&mut fs)?;
            let meta = fs.live_meta().clone();
            let same = meta == base.meta;
            let verdict = match &expect {
                Expect::Refuse(_) => {
                    return Err(format!("expected refusal, mount accepted: {report:?}"))
                }
                Expect::Identical | Expect::RefuseOrIdentical(_) => {
                    if !same {
                        return Err(format!(
                            "mount accepted a DIFFERENT state (silent loss?): {report:?}"
                        ));
                    }
                    if files != base.contents {
                        return Err(
                            "mount accepted the same metadata but file contents differ".into()
                        );
                    }
                    Verdict::Identical
                }
                Expect::DataDamage { inos, blocks } => {
                    if !same {
                        return Err(format!("data damage changed the mounted state: {report:?}"));
                    }
                    for (ino, c) in &files {
                        match (inos.contains(ino), c) {
                            (true, Err(_)) => {}
                            (true, Ok(_)) => {
                                return Err(format!(
                                    "file {ino} has a damaged data block but reads without error"
                                ))
                            }
                            (false, c) if Some(c) != base.contents.get(ino) => {
                                return Err(format!("file {ino} reads differently"))
                            }
                            _ => {}
                        }
                    }
                    for b in blocks {
                        if !data
                            .problems
                            .iter()
                            .any(|p| p.contains(&format!("device block {b}")))
                        {
                            return Err(format!(
                                "fsck(verify_data) does not report damaged device block {b}: {:?}",
                                data.problems
                            ));
                        }
                    }
                    Verdict::Mounted
                }
                Expect::CutAt(k) => {
                    if report.records_replayed != *k {
                        return Err(format!("replay should stop before record {k}: {report:?}"));
                    }
                    if meta != after_records(base, *k) {
                        return Err(format!(
                            "state after a replay cut at {k} differs from snapshot + {k} records"
                        ));
                    }
                    Verdict::Mounted
                }
                Expect::Exactly(m, k) => {
                    if report.records_replayed != *k || meta != **m {
                        return Err(format!("expected exactly the mirrored state after {k} records; got {report:?}, same state: {}", meta == **m));
                    }
                    Verdict::Mounted
                }
                Expect::Any => {
                    if same && files == base.contents {
                        Verdict::Identical
                    } else {
                        Verdict::Mounted
                    }
                }
            };
            new_work(fs)?;
            Ok(verdict)
        }
    }
}

fn describe(e: &Expect) -> String {
    match e {
        Expect::Exactly(_, k) => format!("exactly a mirrored state after {k} records"),
        x => format!("{x:?}"),
    }
}

// ----- an invariant check written independently of recovery::check_meta -----

/// Everything the engine relies on, checked from scratch: one list per violation.
fn independent_problems(m: &Meta, sb: &Superblock, snapshot: &[(u64, u64)]) -> Vec<String> {
    let mut p = Vec::new();
    let root_ok = m.inodes.get(&ROOT).is_some_and(|r| {
        r.kind == FileType::Dir && matches!(r.body, Body::Dir { parent, .. } if parent == ROOT)
    });
    if !root_ok {
        p.push("root".to_string());
    }
    // Inode numbers below next_ino are handed out; the engine keeps the free ones in a set,
    // so next_ino must be bounded by what the device could ever have held.
    if m.next_ino > sb.blocks * (BLOCK as u64 / 4) + 2 {
        p.push(format!(
            "next_ino {} is absurd for {} blocks",
            m.next_ino, sb.blocks
        ));
    }
    let mut used: Vec<(u64, u64)> = snapshot.to_vec();
    let mut refs: BTreeMap<Ino, Vec<Ino>> = BTreeMap::new();
    for (&ino, n) in &m.inodes {
        if ino == 0 || ino >= m.next_ino {
            p.push(format!("inode number {ino}"));
        }
        if n.mode > 0o7777 {
            p.push(format!("mode of {ino}"));
        }
        match (&n.kind, &n.body) {
            (FileType::Dir, Body::Dir { entries, .. }) => {
                if n.nlink == 0 && !entries.is_empty() && ino != ROOT {
                    p.push(format!("removed directory {ino} has entries"));
                }
                for ((h, name), t) in entries {
                    if !valid_name(name)
                        || *h != name_hash(name)
                        || name.contains(&b'/')
                        || name.is_empty()
                    {
                        p.push(format!("entry name in {ino}"));
                    }
                    if !m.inodes.contains_key(t) {
                        p.push(format!("dangling entry in {ino}"));
                    }
                    refs.entry(*t).or_default().push(ino);
                }
            }
            (FileType::File, Body::File { extents }) => {
                if n.size > MAX_FILE_SIZE {
                    p.push(format!("file {ino} size {}", n.size));
                }
                let mut end = 0;
                for (&l, e) in extents {
                    let Some(le) = l.checked_add(e.len) else {
                        p.push(format!("file {ino}: extent end overflows"));
                        continue;
                    };
                    if e.len == 0
                        || (e.written() && e.crcs.len() as u64 != e.len)
                        || l < end
                        || le > MAX_FILE_SIZE / BLOCK as u64
                    {
                        p.push(format!("file {ino}: extent {l}+{}", e.len));
                    }
                    if e.written() && le > n.size.div_ceil(BLOCK as u64) {
                        p.push(format!("file {ino}: written past size"));
                    }
                    end = le;
                    if e.pblk < sb.data_start()
                        || e.pblk.checked_add(e.len).is_none_or(|x| x > sb.blocks)
                    {
                        p.push(format!("file {ino}: device range"));
                    } else {
                        used.push((e.pblk, e.len));
                    }
                }
            }
            (FileType::Symlink, Body::Symlink { target }) => {
                if target.is_empty() || target.len() > SYMLINK_MAX || n.size != target.len() as u64
                {
                    p.push(format!("symlink {ino}"));
                }
            }
            (
                FileType::Fifo | FileType::Socket | FileType::CharDev | FileType::BlockDev,
                Body::Special { .. },
            ) => {}
            _ => p.push(format!("kind/body of {ino}")),
        }
    }
    for (&ino, n) in &m.inodes {
        let r = refs.get(&ino).map_or(&[][..], |v| v.as_slice());
        if ino == ROOT {
            if !r.is_empty() {
                p.push("entry to root".into());
            }
        } else if let Body::Dir { parent, entries } = &n.body {
            if r.len() > 1 {
                p.push(format!("directory {ino} linked {} times", r.len()));
            }
            if r.len() == 1 && r[0] != *parent {
                p.push(format!("directory {ino} parent"));
            }
            let subdirs = entries
                .values()
                .filter(|t| m.inodes.get(t).is_some_and(|c| c.kind == FileType::Dir))
                .count() as u32;
            let want = if r.is_empty() { 0 } else { 2 + subdirs };
            if n.nlink != want {
                p.push(format!("directory {ino} nlink"));
            }
        } else if n.nlink as usize != r.len() {
            p.push(format!("inode {ino} nlink"));
        }
    }
    if let Some(Body::Dir { entries, .. }) = m.inodes.get(&ROOT).map(|r| &r.body) {
        let subdirs = entries
            .values()
            .filter(|t| m.inodes.get(t).is_some_and(|c| c.kind == FileType::Dir))
            .count() as u32;
        if m.inodes[&ROOT].nlink != 2 + subdirs {
            p.push("root nlink".into());
        }
    }
    let mut seen = BTreeSet::new();
    let mut q = VecDeque::from([ROOT]);
    while let Some(d) = q.pop_front() {
        if !seen.insert(d) {
            p.push(format!("directory cycle through {d}"));
            continue;
        }
        if let Some(e) = m.inodes.get(&d).and_then(|n| n.entries()) {
            q.extend(
                e.values()
                    .filter(|t| m.inodes.get(t).is_some_and(|c| c.kind == FileType::Dir)),
            );
        }
    }
    for (&ino, n) in &m.inodes {
        let reached = seen.contains(&ino)
            || refs
                .get(&ino)
                .is_some_and(|r| r.iter().any(|d| seen.contains(d)));
        if n.nlink > 0 && !reached {
            p.push(format!("inode {ino} unreachable"));
        }
    }
    used.sort();
    for w in used.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            p.push(format!("device block {} used twice", w[1].0));
        }
    }
    p
}

// ----- choices: every decision of a structural mutation, drawn by proptest -----

struct Ch {
    v: Vec<u64>,
    i: usize,
    /// Mostly small numbers from wild(): more operations apply, so more hostile states
    /// get past recovery to the engine.
    tame: bool,
    /// Names made so far (fresh names must not repeat when the choices run out).
    serial: u64,
}

impl Ch {
    fn new(v: Vec<u64>) -> Ch {
        Ch {
            v,
            i: 0,
            tame: false,
            serial: 0,
        }
    }
    /// Exhausted choices are 0: a shrunk case is the simplest one.
    fn next(&mut self) -> u64 {
        let x = self.v.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> Option<T> {
        (!xs.is_empty()).then(|| xs[self.below(xs.len() as u64) as usize])
    }
    /// A number from the edges: 0, 1, MAX, MAX-k, 2^63, 2^32, 2^38 (largest file block), any.
    fn wild(&mut self) -> u64 {
        if self.tame && self.below(10) != 0 {
            return self.below(64);
        }
        match self.below(10) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => u64::MAX - self.below(4),
            4 => 1 << 63,
            5 => 1 << 32,
            6 => (MAX_FILE_SIZE / BLOCK as u64) - self.below(3),
            7 => self.below(64),
            8 => u32::MAX as u64,
            _ => self.next(),
        }
    }
    /// Near `x`: x±k, or wild.
    fn near(&mut self, x: u64) -> u64 {
        match self.below(4) {
            0 => x.saturating_add(1 + self.below(3)),
            1 => x.saturating_sub(1 + self.below(3)),
            2 => x ^ (1 << self.below(64)),
            _ => self.wild(),
        }
    }
}

fn choices() -> impl Strategy<Value = (usize, Vec<u64>)> {
    (0..5usize, prop::collection::vec(any::<u64>(), 0..40))
}

fn put(img: &mut [u8], block: u64, bytes: &[u8]) {
    let at = block as usize * BLOCK;
    let end = (at + bytes.len()).min(img.len());
    if at < end {
        img[at..end].copy_from_slice(&bytes[..end - at]);
    }
}

fn get(img: &[u8], block: u64) -> &[u8] {
    &img[block as usize * BLOCK..(block as usize + 1) * BLOCK]
}

// ----- byte-level damage -----

/// How a block is damaged: bytes XORed (bit flips when the mask has one bit), zeroed,
/// random garbage, or one 512-byte sector torn (zeros or another block's sector).
fn damage_block(c: &mut Ch, img: &mut [u8], b: u64, frame: usize) {
    let at = b as usize * BLOCK;
    match c.below(6) {
        0..=2 => {
            for _ in 0..1 + c.below(4) {
                // Half the edits inside the frame, where the checksum must catch them.
                let off = if c.below(2) == 0 && frame > 0 {
                    c.below(frame as u64)
                } else {
                    c.below(BLOCK as u64)
                } as usize;
                let mask = if c.below(2) == 0 {
                    1u8 << c.below(8)
                } else {
                    (c.below(255) + 1) as u8
                };
                img[at + off] ^= mask;
            }
        }
        3 => img[at..at + BLOCK].fill(0),
        4 => {
            let mut x = c.next() | 1;
            for byte in &mut img[at..at + BLOCK] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
        }
        _ => {
            let s = c.below(8) as usize * 512;
            let src = c.below((img.len() / BLOCK) as u64) as usize * BLOCK + s;
            let sector: Vec<u8> = if c.below(2) == 0 {
                vec![0; 512]
            } else {
                img[src..src + 512].to_vec()
            };
            img[at + s..at + s + 512].copy_from_slice(&sector);
        }
    }
}

/// The expectation for a changed block of `base`, from the bytes that changed.
fn expect_block(base: &Base, b: u64, changed: &[usize]) -> Expect {
    if changed.is_empty() {
        return Expect::Identical;
    }
    let first = changed[0];
    let active = CHECKPOINT_SLOTS[base.slot];
    if b == 0 {
        return if first < base.sb_frame {
            Expect::Refuse(SB)
        } else {
            Expect::Identical
        };
    }
    if b == active {
        return if first < base.cp_frame {
            Expect::RefuseOrIdentical(CP)
        } else {
            Expect::Identical
        };
    }
    if CHECKPOINT_SLOTS.contains(&b) {
        return Expect::Identical;
    }
    if b >= base.sb.journal_start && b < base.sb.journal_end() {
        for (k, r) in base.records.iter().enumerate() {
            if b >= r.pos && b < r.pos + r.nb {
                let off = (b - r.pos) as usize * BLOCK + first;
                if off >= r.frame {
                    return Expect::Identical;
                }
                // A later record says this one was durable: damage, not a torn write.
                return if k + 1 < base.records.len() {
                    Expect::Refuse(JOURNAL)
                } else {
                    Expect::CutAt(k)
                };
            }
        }
        return Expect::Identical;
    }
    if let Some(k) = base.verified.get(&b) {
        return Expect::CutAt(*k);
    }
    match base.uses.get(&b) {
        Some(Use::Snapshot { seg, at }) => {
            if at + first < seg_len(&base.cp, *seg) {
                Expect::Refuse(SNAP)
            } else {
                Expect::Identical
            }
        }
        Some(Use::Data { orphan: true, .. }) => Expect::Identical,
        Some(Use::Data { ino, .. }) => Expect::DataDamage {
            inos: [*ino].into(),
            blocks: [b].into(),
        },
        Some(Use::Unwritten) | None => Expect::Identical,
    }
}

fn expect_diff(base: &Base, img: &[u8]) -> Expect {
    let mut e = Expect::Identical;
    let mut active_header_damaged = false;
    let mut other_blocks_damaged = false;
    for b in 0..(base.img.len() / BLOCK) as u64 {
        let (x, y) = (get(&base.img, b), get(img, b));
        if x != y {
            let changed: Vec<usize> = (0..BLOCK).filter(|&i| x[i] != y[i]).collect();
            if b == CHECKPOINT_SLOTS[base.slot] {
                active_header_damaged |= changed[0] < base.cp_frame;
            } else if !CHECKPOINT_SLOTS.contains(&b) {
                other_blocks_damaged = true;
            }
            e = e.and(expect_block(base, b, &changed));
        }
    }
    // With the active header unreadable, mount falls back to the older one and replays its
    // records again, verifying their data: damage to a block only those records cover
    // (the base's own analysis says nothing of them) may cut the replay there, which is a
    // state the older header allows. The generic checks still hold.
    if active_header_damaged && other_blocks_damaged {
        return Expect::Any;
    }
    e
}

/// The frame length to aim flips at in block `b`.
fn frame_in(base: &Base, b: u64) -> usize {
    if b == 0 {
        return base.sb_frame;
    }
    if CHECKPOINT_SLOTS.contains(&b) {
        return 64;
    }
    for r in &base.records {
        if b >= r.pos && b < r.pos + r.nb {
            return r
                .frame
                .saturating_sub((b - r.pos) as usize * BLOCK)
                .min(BLOCK);
        }
    }
    if let Some(Use::Snapshot { seg, at }) = base.uses.get(&b) {
        return seg_len(&base.cp, *seg).saturating_sub(*at).min(BLOCK);
    }
    BLOCK
}

#[derive(Clone, Copy, Debug)]
enum Region {
    Superblock,
    ActiveSlot,
    UnusedSlot,
    Snapshot,
    LiveRecord,
    JournalTail,
    Data,
    Free,
    Anywhere,
}

fn region_blocks(base: &Base, r: Region) -> Vec<u64> {
    match r {
        Region::Superblock => vec![0],
        Region::ActiveSlot => vec![CHECKPOINT_SLOTS[base.slot]],
        Region::UnusedSlot => vec![CHECKPOINT_SLOTS[1 - base.slot]],
        Region::Snapshot => base
            .uses
            .iter()
            .filter(|(_, u)| matches!(u, Use::Snapshot { .. }))
            .map(|(b, _)| *b)
            .collect(),
        Region::LiveRecord => base
            .records
            .iter()
            .flat_map(|r| r.pos..r.pos + r.nb)
            .collect(),
        Region::JournalTail => (base.journal_head..base.sb.journal_end()).collect(),
        Region::Data => base
            .uses
            .iter()
            .filter(|(_, u)| matches!(u, Use::Data { .. } | Use::Unwritten))
            .map(|(b, _)| *b)
            .collect(),
        Region::Free => base.free.clone(),
        Region::Anywhere => (0..base.sb.blocks).collect(),
    }
}

fn byte_case(regions: &[Region], (bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let mut img = base.img.clone();
    let region = regions[c.below(regions.len() as u64) as usize];
    let n = if matches!(region, Region::Anywhere) {
        1 + c.below(4)
    } else {
        1
    };
    for _ in 0..n {
        let blocks = region_blocks(base, region);
        let Some(b) = c.pick(&blocks) else {
            return Ok(Verdict::Identical);
        };
        let frame = frame_in(base, b);
        damage_block(&mut c, &mut img, b, frame);
    }
    let expect = expect_diff(base, &img);
    let what = format!("{}: {region:?}, expect {}", base.name, describe(&expect));
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

// ----- structurally valid, wrong content -----

fn forged_superblock((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let mut sb = base.sb.clone();
    for _ in 0..1 + c.below(2) {
        match c.below(6) {
            0 => sb.version = c.wild() as u32,
            1 => sb.block_size = [512, 1024, 8192, 0, c.wild() as u32][c.below(5) as usize],
            2 => sb.blocks = c.near(sb.blocks),
            3 => {
                sb.journal_start = if c.below(2) == 0 {
                    c.below(8)
                } else {
                    c.wild()
                }
            }
            4 => sb.journal_blocks = c.near(sb.journal_blocks),
            _ => sb.uuid = c.near(sb.uuid),
        }
    }
    let mut img = base.img.clone();
    put(&mut img, 0, &layout::encode(SB_MAGIC, &sb));
    let expect = if sb == base.sb {
        Expect::Identical
    } else if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&sb.version)
        // Another readable version (version 2 images still mount) may be read as such.
        || sb.block_size != base.sb.block_size
        || sb.blocks > base.sb.blocks
        || sb.journal_start != base.sb.journal_start
    {
        Expect::Refuse(SB)
    } else if sb.uuid != base.sb.uuid
        && sb.journal_blocks == base.sb.journal_blocks
        && sb.blocks == base.sb.blocks
    {
        Expect::Refuse(CP)
    } else {
        Expect::Any
    };
    let what = format!(
        "{}: superblock {sb:?}, expect {}",
        base.name,
        describe(&expect)
    );
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

fn forged_checkpoint((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let mut cp = base.cp.clone();
    let end = base.sb.journal_end();
    for _ in 0..1 + c.below(2) {
        match c.below(9) {
            0 => {
                cp.generation = [
                    0,
                    u64::MAX,
                    u64::MAX - 1,
                    1 << 63,
                    cp.generation.wrapping_add(1),
                    cp.generation.saturating_sub(1),
                    c.wild(),
                ][c.below(7) as usize]
            }
            1 => {
                let (s, l) = cp.snapshot.first().copied().unwrap_or(base.cp.snapshot[0]);
                cp.snapshot = match c.below(10) {
                    0 => Vec::new(),
                    1 => vec![(c.near(s), l)],
                    2 => vec![(s, l.wrapping_add(1 + c.below(3)))],
                    3 => [cp.snapshot.clone(), cp.snapshot.clone()].concat(),
                    4 => vec![(s, l); 200 + c.below(3) as usize],
                    5 => vec![(base.sb.blocks - 1, 2)],
                    6 => vec![(c.below(base.sb.data_start()), 1)],
                    7 => vec![(u64::MAX, 1)],
                    8 => vec![(s, (u64::MAX - s).wrapping_add(1 + c.below(2)))],
                    _ => vec![(base.sb.data_start(), base.sb.blocks - base.sb.data_start())],
                }
            }
            2 => {
                cp.snapshot_bytes = if c.below(2) == 0 {
                    c.near(cp.snapshot_bytes)
                } else {
                    c.wild()
                }
            }
            3 => cp.snapshot_crc ^= 1 << c.below(32),
            4 => {
                cp.journal_pos = [
                    0,
                    1,
                    2,
                    end,
                    end - 1,
                    base.journal_head,
                    cp.journal_pos.wrapping_add(1),
                    c.wild(),
                ][c.below(8) as usize]
            }
            5 => {
                cp.next_seq = [
                    0,
                    1,
                    u64::MAX,
                    u64::MAX - 1,
                    cp.next_seq.wrapping_add(1),
                    cp.next_seq.saturating_sub(1),
                    1 << 63,
                    c.wild(),
                ][c.below(8) as usize]
            }
            6 => {
                cp.durable_upto = [
                    u64::MAX,
                    cp.next_seq,
                    cp.next_seq.wrapping_add(10),
                    0,
                    c.wild(),
                ][c.below(5) as usize]
            }
            7 => forge_deltas(&mut c, &mut cp, base),
            _ => cp.uuid = c.near(cp.uuid),
        }
    }
    let mut img = base.img.clone();
    // Into the active slot, or the unused one with a winning generation.
    let unused = c.below(3) == 0;
    let slot = if unused {
        if cp.generation <= base.cp.generation && c.below(2) == 0 {
            cp.generation = base.cp.generation + 1;
        }
        1 - base.slot
    } else {
        base.slot
    };
    put(&mut img, CHECKPOINT_SLOTS[slot], &cp.encode());
    // The active header unchanged, or a losing one in the other slot: nothing changes.
    let expect = if (!unused && cp == base.cp) || (unused && cp.generation < base.cp.generation) {
        Expect::Identical
    } else if cp.uuid != base.cp.uuid && !unused {
        Expect::RefuseOrIdentical(CP)
    } else if !unused
        && cp.snapshot_crc != base.cp.snapshot_crc
        && (Checkpoint {
            snapshot_crc: base.cp.snapshot_crc,
            ..cp.clone()
        }) == base.cp
    {
        Expect::Refuse(SNAP)
    } else {
        Expect::Any
    };
    let what = format!(
        "{}: checkpoint into slot {slot}: {cp:?}, expect {}",
        base.name,
        describe(&expect)
    );
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

/// Damage to the header's list of delta segments: dropped, reordered, repeated, pointed
/// at the base or at free blocks, wrong lengths or checksums, too many.
fn forge_deltas(c: &mut Ch, cp: &mut Checkpoint, base: &Base) {
    let base_seg = Segment {
        runs: cp.snapshot.clone(),
        bytes: cp.snapshot_bytes,
        crc: cp.snapshot_crc,
    };
    let n = cp.deltas.len();
    match c.below(9) {
        0 => cp.deltas.clear(),
        1 if n > 0 => {
            cp.deltas.pop();
        }
        2 if n > 1 => {
            let (i, j) = (c.below(n as u64) as usize, c.below(n as u64) as usize);
            cp.deltas.swap(i, j);
        }
        3 if n > 0 => {
            let d = cp.deltas[c.below(n as u64) as usize].clone();
            cp.deltas.push(d);
        }
        4 => cp.deltas.push(base_seg),
        5 if n > 0 => {
            let k = c.below(n as u64) as usize;
            cp.deltas[k].runs = match c.below(4) {
                0 => cp.snapshot.clone(),
                1 => base.free.first().map(|&b| vec![(b, 1)]).unwrap_or_default(),
                2 => Vec::new(),
                _ => vec![(c.wild(), 1)],
            };
        }
        6 if n > 0 => {
            let k = c.below(n as u64) as usize;
            cp.deltas[k].bytes = if c.below(2) == 0 {
                c.near(cp.deltas[k].bytes)
            } else {
                c.wild()
            };
        }
        7 if n > 0 => {
            let k = c.below(n as u64) as usize;
            cp.deltas[k].crc ^= 1 << c.below(32);
        }
        _ => {
            let d = cp.deltas.first().cloned().unwrap_or(base_seg);
            cp.deltas = vec![d; 9 + c.below(200) as usize];
        }
    }
}

/// A hostile logical operation, mostly aimed at what exists in `m`.
fn gen_op(c: &mut Ch, m: &Meta, base: &Base, img: &[u8]) -> LogOp {
    let inos: Vec<Ino> = m.inodes.keys().copied().collect();
    let dirs: Vec<Ino> = m
        .inodes
        .iter()
        .filter(|(_, n)| n.kind == FileType::Dir)
        .map(|(i, _)| *i)
        .collect();
    let files: Vec<Ino> = m
        .inodes
        .iter()
        .filter(|(_, n)| n.kind == FileType::File)
        .map(|(i, _)| *i)
        .collect();
    let some_ino = |c: &mut Ch| match c.below(if c.tame { 7 } else { 10 }) {
        0..=5 => c.pick(&inos).unwrap_or(ROOT),
        6 => c.pick(&files).unwrap_or(ROOT),
        7 => m.next_ino.wrapping_add(c.below(3)),
        8 => c.wild(),
        _ => ROOT,
    };
    let some_dir = |c: &mut Ch| match c.below(if c.tame { 6 } else { 8 }) {
        0..=5 => c.pick(&dirs).unwrap_or(ROOT),
        6 => c.pick(&inos).unwrap_or(ROOT),
        _ => c.wild(),
    };
    let name_in = |c: &mut Ch, d: Ino| -> Vec<u8> {
        let names: Vec<Vec<u8>> = m
            .inodes
            .get(&d)
            .and_then(|n| n.entries())
            .map(|e| e.keys().map(|k| k.1.clone()).collect())
            .unwrap_or_default();
        match c.below(10) {
            0..=5 if !names.is_empty() => names[c.below(names.len() as u64) as usize].clone(),
            9 if !c.tame => [&b""[..], b".", b"..", b"a/b", b"nul\0", &[b'n'; 256][..]]
                [c.below(6) as usize]
                .to_vec(),
            _ => format!("h{}", c.below(6)).into_bytes(),
        }
    };
    // Tame: a name not in the directory yet (for creating).
    let fresh = |c: &mut Ch, d: Ino| -> Vec<u8> {
        if c.tame {
            c.serial += 1;
            format!("t{}", c.serial).into_bytes()
        } else {
            name_in(c, d)
        }
    };
    let orphans: Vec<Ino> = m
        .inodes
        .iter()
        .filter(|(i, n)| **i != ROOT && n.nlink == 0)
        .map(|(i, _)| *i)
        .collect();
    let time = |c: &mut Ch| Time {
        sec: 1_700_000_000 + c.below(1000) as i64,
        nsec: c.below(3) as u32,
    };
    match c.below(10) {
        0 => {
            let parent = some_dir(c);
            let name = fresh(c, parent);
            let ino = match c.below(if c.tame { 3 } else { 6 }) {
                0..=2 => m.next_ino,
                3 => c.pick(&inos).unwrap_or(ROOT),
                _ => c.wild(),
            };
            let kind = match c.below(7) {
                0 | 1 => NewKind::File,
                2 | 3 => NewKind::Dir,
                4 => NewKind::Symlink(vec![
                    b's';
                    [1, 0, SYMLINK_MAX, SYMLINK_MAX + 1]
                        [c.below(4) as usize]
                ]),
                5 => NewKind::Fifo,
                _ => NewKind::CharDev(c.next() as u32),
            };
            LogOp::Create {
                parent,
                name,
                ino,
                kind,
                mode: c.wild() as u32,
                uid: 0,
                gid: 0,
                time: time(c),
            }
        }
        1 => {
            let parent = some_dir(c);
            LogOp::Link {
                parent,
                name: fresh(c, parent),
                ino: c
                    .pick(&files)
                    .filter(|_| c.tame)
                    .unwrap_or_else(|| some_ino(c)),
                time: time(c),
            }
        }
        2 => {
            let parent = some_dir(c);
            LogOp::Unlink {
                parent,
                name: name_in(c, parent),
                time: time(c),
            }
        }
        3 => {
            let sp = some_dir(c);
            let sn = name_in(c, sp);
            // Aim at cycles: into the moved directory or below it.
            let src = m.lookup(sp, &sn);
            let below: Vec<Ino> = dirs
                .iter()
                .copied()
                .filter(|d| src.is_some_and(|s| m.is_ancestor(s, *d)))
                .collect();
            let dp = if c.below(3) == 0 {
                c.pick(&below).unwrap_or(ROOT)
            } else {
                some_dir(c)
            };
            let dn = if c.below(2) == 0 {
                fresh(c, dp)
            } else {
                name_in(c, dp)
            };
            LogOp::Rename {
                sp,
                sn,
                dp,
                dn,
                exchange: c.below(3) == 0,
                time: time(c),
            }
        }
        4 => LogOp::SetAttr {
            ino: some_ino(c),
            mode: (c.below(2) == 0).then(|| c.wild() as u32),
            uid: None,
            gid: None,
            atime: None,
            mtime: (c.below(2) == 0).then(|| time(c)),
            ctime: time(c),
        },
        5 => LogOp::SetSize {
            ino: some_ino(c),
            size: if c.below(2) == 0 {
                c.below(20 * BLOCK as u64)
            } else {
                c.wild()
            },
            time: time(c),
            free_past_end: c.below(2) == 0,
        },
        6..=8 => {
            let ino = if c.below(4) == 0 {
                some_ino(c)
            } else {
                c.pick(&files).unwrap_or(ROOT)
            };
            let lblk = if c.below(3) == 0 {
                c.wild()
            } else {
                c.below(24)
            };
            if c.tame && c.below(2) == 0 {
                // A well-formed map of free blocks with their checksums.
                let pblk = c.pick(&base.free).unwrap_or(0);
                let len = (1 + c.below(3)).min(base.sb.blocks - pblk);
                let crcs = if c.below(3) == 0 {
                    Vec::new()
                } else {
                    (0..len)
                        .map(|k| layout::block_crc(get(img, pblk + k)))
                        .collect()
                };
                return LogOp::Map {
                    ino,
                    lblk,
                    pblk,
                    len,
                    crcs,
                };
            }
            let used: Vec<u64> = base.uses.keys().copied().collect();
            let pblk = match c.below(8) {
                0..=3 => c.pick(&base.free).unwrap_or(0),
                4 => c.pick(&used).unwrap_or(0),
                5 => c.below(base.sb.data_start()),
                6 => base.sb.blocks - c.below(3),
                _ => c.wild(),
            };
            let len = if c.below(4) == 0 {
                c.wild()
            } else {
                1 + c.below(4)
            };
            let block_crc = |b: u64| {
                if b < (img.len() / BLOCK) as u64 {
                    layout::block_crc(get(img, b))
                } else {
                    0
                }
            };
            let crcs = match c.below(5) {
                0 => Vec::new(),
                1 => vec![c.next() as u32; len.min(8) as usize],
                2 => (0..len.min(8) + 1)
                    .map(|k| block_crc(pblk.wrapping_add(k)))
                    .collect(),
                _ => (0..len.min(8))
                    .map(|k| block_crc(pblk.wrapping_add(k)))
                    .collect(),
            };
            LogOp::Map {
                ino,
                lblk,
                pblk,
                len,
                crcs,
            }
        }
        _ => LogOp::Free {
            ino: c
                .pick(&orphans)
                .filter(|_| c.tame)
                .unwrap_or_else(|| some_ino(c)),
        },
    }
}

/// Changes one field of `op`, or replaces it.
fn mutate_op(c: &mut Ch, op: &mut LogOp, m: &Meta, base: &Base, img: &[u8]) {
    match op {
        LogOp::Map {
            pblk,
            len,
            crcs,
            lblk,
            ..
        } => match c.below(5) {
            0 => *pblk = c.near(*pblk),
            1 => *len = c.near(*len),
            2 => {
                crcs.pop();
            }
            3 => *lblk = c.near(*lblk),
            _ => crcs.iter_mut().for_each(|x| *x ^= 1),
        },
        LogOp::Create { ino, parent, .. } | LogOp::Link { ino, parent, .. } if c.below(2) == 0 => {
            if c.below(2) == 0 {
                *ino = c.near(*ino)
            } else {
                *parent = c.near(*parent)
            }
        }
        LogOp::SetSize { size, .. } => *size = c.near(*size),
        LogOp::Free { ino } | LogOp::SetAttr { ino, .. } => *ino = c.near(*ino),
        _ => *op = gen_op(c, m, base, img),
    }
}

fn forged_record((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let Some(k) = c.pick(&(0..base.records.len()).collect::<Vec<_>>()) else {
        return forged_checkpoint((bi, c.v));
    };
    let r = &base.records[k];
    let mut rec = r.rec.clone();
    let mut img = base.img.clone();
    for _ in 0..1 + c.below(3) {
        match c.below(10) {
            0 => rec.uuid = c.near(rec.uuid),
            1 => rec.epoch = c.near(rec.epoch),
            2 => rec.seq = c.near(rec.seq),
            3 => {
                rec.durable_upto =
                    [u64::MAX, rec.seq, rec.seq.wrapping_add(1), 0, c.wild()][c.below(5) as usize]
            }
            4 => rec.streams = vec![(c.wild(), c.wild()); c.below(4) as usize],
            5 if !rec.ops.is_empty() => {
                rec.ops.remove(c.below(rec.ops.len() as u64) as usize);
            }
            6 if !rec.ops.is_empty() => {
                let j = c.below(rec.ops.len() as u64) as usize;
                let op = rec.ops[j].clone();
                rec.ops.insert(j, op);
            }
            7 if rec.ops.len() > 1 => {
                let j = c.below(rec.ops.len() as u64 - 1) as usize;
                rec.ops.swap(j, j + 1);
            }
            8 => {
                let j = c.below(rec.ops.len() as u64 + 1) as usize;
                let op = gen_op(&mut c, &base.loaded, base, &img);
                rec.ops.insert(j, op);
            }
            _ if !rec.ops.is_empty() => {
                let j = c.below(rec.ops.len() as u64) as usize;
                let mut op = rec.ops[j].clone();
                mutate_op(&mut c, &mut op, &base.loaded, base, &img);
                rec.ops[j] = op;
            }
            _ => rec.epoch = c.near(rec.epoch),
        }
    }
    let bytes = layout::encode(REC_MAGIC, &rec);
    if r.pos + (bytes.len() / BLOCK) as u64 > base.sb.journal_end() {
        return Ok(Verdict::Identical);
    }
    put(&mut img, r.pos, &bytes);
    let expect = if rec == r.rec {
        Expect::Identical
    } else {
        Expect::Any
    };
    let what = format!(
        "{}: record {k} at block {} forged as {rec:?}",
        base.name, r.pos
    );
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

/// Writes `meta` as a new snapshot into free blocks and a checkpoint header of the next
/// generation into the unused slot, as the engine's checkpoint does (the journal's records
/// become stale).
fn recheckpoint(base: &Base, img: &mut [u8], meta: &Meta, skip: usize) -> Checkpoint {
    let snap = postcard::to_stdvec(meta).unwrap();
    let n = snap.len().div_ceil(BLOCK).max(1);
    let blocks: Vec<u64> = base.free.iter().copied().skip(skip).take(n).collect();
    assert_eq!(blocks.len(), n, "no room for the forged snapshot");
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &b in &blocks {
        match runs.last_mut() {
            Some((s, l)) if *s + *l == b => *l += 1,
            _ => runs.push((b, 1)),
        }
    }
    let mut padded = snap.clone();
    padded.resize(n * BLOCK, 0);
    for (k, &b) in blocks.iter().enumerate() {
        put(img, b, &padded[k * BLOCK..(k + 1) * BLOCK]);
    }
    let cp = Checkpoint::new(&base.sb, base.cp.generation + 1, runs, &snap, base.next_seq);
    put(img, CHECKPOINT_SLOTS[1 - base.slot], &cp.encode());
    cp
}

/// Replay mirrored on `m` for records written after a checkpoint `cp`: the expected outcome.
fn mirror(base: &Base, cp: &Checkpoint, img: &[u8], mut m: Meta, recs: &[Record]) -> Expect {
    let mut replayed = 0;
    'r: for rec in recs {
        for op in &rec.ops {
            if let LogOp::Map { pblk, crcs, .. } = op {
                for (k, crc) in crcs.iter().enumerate() {
                    let b = match pblk.checked_add(k as u64) {
                        Some(b) if b >= base.sb.data_start() && b < base.sb.blocks => b,
                        _ => return Expect::Refuse(JOURNAL),
                    };
                    if layout::block_crc(get(img, b)) != *crc {
                        break 'r;
                    }
                }
            }
        }
        for op in &rec.ops {
            if m.apply(op).is_err() {
                return Expect::Refuse(JOURNAL);
            }
        }
        replayed += 1;
    }
    if !check_meta(&m, &base.sb, &cp.meta_runs()).is_empty() {
        return Expect::Refuse(&["journal", "snapshot"]);
    }
    free_orphans(&mut m);
    Expect::Exactly(Box::new(m), replayed)
}

fn hostile_records((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    c.tame = c.below(2) == 0;
    let mut img = base.img.clone();
    // Start from a fresh checkpoint of the loaded state (its own blocks skipped by the
    // operations' "free block" picks only by chance: a double use is a hostile case too).
    let cp = recheckpoint(base, &mut img, &base.loaded, base.free.len() - 4);
    let mut scratch = base.loaded.clone();
    let mut recs = Vec::new();
    let mut pos = base.sb.journal_start;
    for r in 0..1 + c.below(3) {
        let mut ops = Vec::new();
        for _ in 0..1 + c.below(4) {
            let op = gen_op(&mut c, &scratch, base, &img);
            let _ = scratch.apply(&op);
            ops.push(op);
        }
        let rec = Record {
            uuid: base.sb.uuid,
            epoch: cp.generation,
            seq: cp.next_seq + r,
            durable_upto: cp.durable_upto,
            streams: vec![(INIT_STREAM, 1)],
            ops,
        };
        let bytes = layout::encode(REC_MAGIC, &rec);
        if pos + (bytes.len() / BLOCK) as u64 > base.sb.journal_end() {
            break;
        }
        put(&mut img, pos, &bytes);
        pos += (bytes.len() / BLOCK) as u64;
        recs.push(rec);
    }
    // Whatever follows must not continue the chain.
    if pos < base.sb.journal_end() {
        put(&mut img, pos, &[0; BLOCK]);
    }
    let expect = mirror(base, &cp, &img, base.loaded.clone(), &recs);
    let what = format!(
        "{}: hostile records {recs:?}, expect {}",
        base.name,
        describe(&expect)
    );
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

/// Changes `m`; returns whether the change certainly breaks an invariant.
fn mutate_meta(c: &mut Ch, m: &mut Meta, base: &Base, snap_first: u64) -> bool {
    let inos: Vec<Ino> = m.inodes.keys().copied().filter(|&i| i != ROOT).collect();
    let dirs: Vec<Ino> = m
        .inodes
        .iter()
        .filter(|(i, n)| n.kind == FileType::Dir && **i != ROOT)
        .map(|(i, _)| *i)
        .collect();
    let with_extents: Vec<(Ino, u64)> = m
        .inodes
        .iter()
        .flat_map(|(i, n)| {
            n.extents()
                .into_iter()
                .flat_map(move |e| e.keys().map(move |l| (*i, *l)))
        })
        .collect();
    let linked: Vec<Ino> = inos
        .iter()
        .copied()
        .filter(|i| m.inodes[i].nlink > 0)
        .collect();
    let Some(ino) = c.pick(&inos) else {
        return false;
    };
    if !m.inodes.contains_key(&ROOT) {
        return false;
    }
    let next = m.next_ino;
    match c.below(30) {
        0 => {
            let n = m.inodes.get_mut(&ino).unwrap();
            n.nlink = n.nlink.wrapping_add(1 + c.below(3) as u32);
            true
        }
        1 => {
            let Some(i) = c.pick(&linked) else {
                return false;
            };
            m.inodes.get_mut(&i).unwrap().nlink = 0;
            true
        }
        2 => {
            let d = c.pick(&dirs).unwrap_or(ROOT);
            let t = if c.below(2) == 0 {
                next.wrapping_add(c.below(3))
            } else {
                c.wild()
            };
            if m.inodes.contains_key(&t) {
                return false;
            }
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&d).unwrap().body {
                entries.insert(dir_key(b"dangling"), t);
            }
            true
        }
        3 => {
            let Some(i) = c.pick(&linked) else {
                return false;
            };
            m.inodes.remove(&i);
            true
        }
        4..=6 => {
            let Some((i, l)) = c.pick(&with_extents) else {
                return false;
            };
            let Body::File { extents } = &mut m.inodes.get_mut(&i).unwrap().body else {
                return false;
            };
            let e = extents.get_mut(&l).unwrap();
            e.pblk = match c.below(7) {
                0 => base.sb.blocks - c.below(e.len.min(base.sb.blocks)),
                1 => c.below(base.sb.data_start()),
                2 => u64::MAX - c.below(2),
                3 => snap_first,
                _ => {
                    // Another file's (or this file's other) blocks.
                    let others: Vec<u64> = base
                        .uses
                        .iter()
                        .filter(|(b, u)| {
                            matches!(u, Use::Data { .. } | Use::Unwritten)
                                && !(e.pblk..e.pblk.saturating_add(e.len)).contains(*b)
                        })
                        .map(|(b, _)| *b)
                        .collect();
                    let Some(b) = c.pick(&others) else {
                        return false;
                    };
                    b
                }
            };
            true
        }
        7 => {
            // Overlapping logical ranges within one file.
            let Some((i, l)) = c.pick(&with_extents) else {
                return false;
            };
            let Body::File { extents } = &mut m.inodes.get_mut(&i).unwrap().body else {
                return false;
            };
            let e = extents[&l].clone();
            if e.len < 2 {
                return false;
            }
            let Some(&pb) = base.free.first() else {
                return false;
            };
            extents.insert(
                l.wrapping_add(1),
                Extent {
                    pblk: pb,
                    len: 1,
                    crcs: Vec::new(),
                },
            );
            true
        }
        8 => {
            let Some((i, l)) = c.pick(&with_extents) else {
                return false;
            };
            let Body::File { extents } = &mut m.inodes.get_mut(&i).unwrap().body else {
                return false;
            };
            let e = extents.get_mut(&l).unwrap();
            if !e.written() {
                return false;
            }
            // (Popping the only checksum would make a valid unwritten extent.)
            if c.below(2) == 0 && e.crcs.len() > 1 {
                e.crcs.pop();
            } else {
                e.crcs.push(7);
            }
            true
        }
        9 => {
            // Written blocks past the size.
            let Some((i, l)) = c.pick(&with_extents) else {
                return false;
            };
            let n = m.inodes.get_mut(&i).unwrap();
            if !n.extents().unwrap()[&l].written() {
                return false;
            }
            n.size = l * BLOCK as u64;
            true
        }
        10 | 11 => {
            // An extent moved far out in the file; unwritten, so only its offset is wrong.
            let Some((i, l)) = c.pick(&with_extents) else {
                return false;
            };
            let Body::File { extents } = &mut m.inodes.get_mut(&i).unwrap().body else {
                return false;
            };
            let mut e = extents.remove(&l).unwrap();
            e.crcs.clear();
            let at = [
                u64::MAX - c.below(3),
                u64::MAX - e.len + 1,
                MAX_FILE_SIZE / BLOCK as u64,
                1 << 62,
            ][c.below(4) as usize];
            extents.insert(at, e);
            true
        }
        12 => {
            // A cycle: a directory's entry naming an ancestor or itself.
            let Some(d) = c.pick(&dirs) else { return false };
            let mut anc = vec![d, ROOT];
            let mut x = d;
            while let Some(Body::Dir { parent, .. }) = m.inodes.get(&x).map(|n| &n.body) {
                if *parent == x || anc.len() > 64 {
                    break;
                }
                anc.push(*parent);
                x = *parent;
            }
            let t = c.pick(&anc).unwrap();
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&d).unwrap().body {
                entries.insert(dir_key(b"loop"), t);
            }
            true
        }
        13 => {
            // Two directories naming each other, detached from the root, links consistent.
            let (x, y) = (next, next.wrapping_add(1));
            let dir = |parent: Ino, child: Ino, name: &[u8]| Inode {
                kind: FileType::Dir,
                mode: 0o755,
                uid: 0,
                gid: 0,
                nlink: 3,
                size: 0,
                atime: t0(),
                mtime: t0(),
                ctime: t0(),
                body: Body::Dir {
                    entries: BTreeMap::from([(dir_key(name), child)]),
                    parent,
                },
                xattrs: BTreeMap::new(),
            };
            m.inodes.insert(x, dir(y, y, b"y"));
            m.inodes.insert(y, dir(x, x, b"x"));
            m.next_ino = next.wrapping_add(2);
            true
        }
        14 => {
            match c.below(4) {
                0 => {
                    m.inodes.remove(&ROOT);
                }
                1 => m.inodes.get_mut(&ROOT).unwrap().kind = FileType::File,
                2 => {
                    if let Body::Dir { parent, .. } = &mut m.inodes.get_mut(&ROOT).unwrap().body {
                        *parent = c.pick(&dirs).unwrap_or(7);
                    }
                }
                _ => m.inodes.get_mut(&ROOT).unwrap().nlink ^= 1,
            }
            true
        }
        15 => {
            let max = *m.inodes.keys().last().unwrap();
            m.next_ino = if c.below(2) == 0 {
                max
            } else {
                c.below(max + 1)
            };
            true
        }
        16 => {
            // Entry filed under the wrong hash.
            let d = c.pick(&dirs).unwrap_or(ROOT);
            let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&d).unwrap().body else {
                return false;
            };
            let Some(k) = entries.keys().next().cloned() else {
                return false;
            };
            let t = entries.remove(&k).unwrap();
            entries.insert((k.0 ^ (1 + c.below(1 << 20)), k.1), t);
            true
        }
        17 => {
            // An invalid name (correct hash, links consistent).
            let name = [&b""[..], b".", b"..", b"a/b", b"z\0", &[b'n'; 256][..]]
                [c.below(6) as usize]
                .to_vec();
            let Some(f) = c.pick(
                &linked
                    .iter()
                    .copied()
                    .filter(|i| m.inodes[i].kind != FileType::Dir)
                    .collect::<Vec<_>>(),
            ) else {
                return false;
            };
            m.inodes.get_mut(&f).unwrap().nlink = m.inodes[&f].nlink.wrapping_add(1);
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&ROOT).unwrap().body {
                entries.insert((name_hash(&name), name), f);
            }
            true
        }
        18 => {
            let n = m.inodes.get_mut(&ino).unwrap();
            match (&mut n.body, c.below(3)) {
                (Body::Symlink { target }, 0) => target.clear(),
                (Body::Symlink { target }, 1) => {
                    *target = vec![b'x'; SYMLINK_MAX + 1];
                    n.size = target.len() as u64;
                }
                (Body::Symlink { .. }, _) => n.size = n.size.wrapping_add(1),
                _ => {
                    n.kind = if n.kind == FileType::Symlink {
                        FileType::File
                    } else {
                        FileType::Symlink
                    };
                }
            }
            true
        }
        19 => {
            let n = m.inodes.get_mut(&ino).unwrap();
            n.kind = [
                FileType::File,
                FileType::Dir,
                FileType::Symlink,
                FileType::Fifo,
            ][c.below(4) as usize];
            let ok = matches!(
                (&n.kind, &n.body),
                (FileType::File, Body::File { .. })
                    | (FileType::Dir, Body::Dir { .. })
                    | (FileType::Symlink, Body::Symlink { .. })
                    | (FileType::Fifo, Body::Special { .. })
            );
            !ok
        }
        20 => {
            m.inodes.get_mut(&ino).unwrap().mode |= 0o10000 << c.below(16);
            true
        }
        21 => {
            // A hard link to a directory.
            let Some(d) = c.pick(
                &dirs
                    .iter()
                    .copied()
                    .filter(|d| m.inodes[d].nlink > 0)
                    .collect::<Vec<_>>(),
            ) else {
                return false;
            };
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&ROOT).unwrap().body {
                entries.insert(dir_key(b"dirlink"), d);
            }
            true
        }
        22 => {
            let Some(d) = c.pick(
                &dirs
                    .iter()
                    .copied()
                    .filter(|d| m.inodes[d].nlink > 0)
                    .collect::<Vec<_>>(),
            ) else {
                return false;
            };
            let to = c.pick(&inos).unwrap();
            let Body::Dir { parent, .. } = &mut m.inodes.get_mut(&d).unwrap().body else {
                return false;
            };
            let changed = *parent != to;
            *parent = to;
            changed
        }
        23 => {
            m.next_ino = [u64::MAX, 1 << 40, base.sb.blocks * BLOCK as u64][c.below(3) as usize];
            true
        }
        24 => {
            // A file larger than the engine allows.
            let files: Vec<Ino> = inos
                .iter()
                .copied()
                .filter(|i| m.inodes[i].kind == FileType::File)
                .collect();
            let Some(f) = c.pick(&files) else {
                return false;
            };
            m.inodes.get_mut(&f).unwrap().size = [u64::MAX, MAX_FILE_SIZE + 1][c.below(2) as usize];
            true
        }
        // Benign changes: the state stays valid.
        25 => {
            let n = m.inodes.get_mut(&ino).unwrap();
            n.mode = c.below(0o10000) as u32;
            n.uid = c.next() as u32;
            n.mtime = Time {
                sec: c.next() as i64,
                nsec: c.below(1_000_000_000) as u32,
            };
            false
        }
        26 => {
            // A new empty file in some directory.
            let d = c
                .pick(
                    &dirs
                        .iter()
                        .copied()
                        .filter(|d| m.inodes[d].nlink > 0)
                        .collect::<Vec<_>>(),
                )
                .unwrap_or(ROOT);
            let name = format!("new{}", c.below(100)).into_bytes();
            if m.lookup(d, &name).is_some() {
                return false;
            }
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&d).unwrap().body {
                entries.insert(dir_key(&name), next);
            }
            let mut f = m.inodes[&ROOT].clone();
            f.kind = FileType::File;
            f.nlink = 1;
            f.body = Body::File {
                extents: BTreeMap::new(),
            };
            m.inodes.insert(next, f);
            m.next_ino = next.wrapping_add(1);
            false
        }
        27 => {
            // An orphan: a file's only link removed (mount frees it).
            let one: Vec<(Ino, Vec<u8>, Ino)> = m
                .inodes
                .iter()
                .flat_map(|(d, n)| {
                    n.entries()
                        .into_iter()
                        .flat_map(move |e| e.iter().map(move |(k, t)| (*d, k.1.clone(), *t)))
                })
                .filter(|(_, _, t)| {
                    m.inodes
                        .get(t)
                        .is_some_and(|n| n.kind == FileType::File && n.nlink == 1)
                })
                .collect();
            if one.is_empty() {
                return false;
            }
            let (d, name, t) = one[c.below(one.len() as u64) as usize].clone();
            if let Body::Dir { entries, .. } = &mut m.inodes.get_mut(&d).unwrap().body {
                entries.remove(&dir_key(&name));
            }
            m.inodes.get_mut(&t).unwrap().nlink = 0;
            false
        }
        28 => {
            m.next_ino = m.next_ino.wrapping_add(c.below(1000));
            false
        }
        _ => {
            // A file grows (sparse).
            let files: Vec<Ino> = inos
                .iter()
                .copied()
                .filter(|i| m.inodes[i].kind == FileType::File)
                .collect();
            let Some(f) = c.pick(&files) else {
                return false;
            };
            let n = m.inodes.get_mut(&f).unwrap();
            n.size = n.size.saturating_add(c.below(1 << 30));
            false
        }
    }
}

fn forged_snapshot((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let mut m = base.loaded.clone();
    // The forged snapshot starts at the first free block: mutations may aim at it.
    let mut bad = false;
    let n = 1 + c.below(3);
    for _ in 0..n {
        bad |= mutate_meta(&mut c, &mut m, base, base.free[0]);
    }
    // With several mutations one may undo another's damage (or remove its target).
    let bad = bad && n == 1;
    let mut img = base.img.clone();
    let cp = recheckpoint(base, &mut img, &m, 0);
    let problems = check_meta(&m, &base.sb, &cp.meta_runs());
    let indep = independent_problems(&m, &base.sb, &cp.meta_runs());
    let what = format!("{}: forged snapshot (certainly bad: {bad})", base.name);
    if bad && indep.is_empty() {
        return Err(format!(
            "{what}: the test's own invariant check misses a mutation"
        ));
    }
    if problems.is_empty() && !indep.is_empty() {
        return Err(format!(
            "{what}: WRONG ACCEPTANCE: check_meta passes metadata that breaks {indep:?}"
        ));
    }
    let expect = if problems.is_empty() {
        let mut m = m;
        free_orphans(&mut m);
        Expect::Exactly(Box::new(m), 0)
    } else {
        Expect::Refuse(SNAP)
    };
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

fn truncated((bi, v): (usize, Vec<u64>)) -> Result<Verdict, String> {
    let base = &bases()[bi];
    let mut c = Ch::new(v);
    let blocks = (base.img.len() / BLOCK) as u64;
    let mut img = base.img.clone();
    let expect = if c.below(4) == 0 {
        img.resize(img.len() + (1 + c.below(64) as usize) * BLOCK, 0);
        Expect::Identical
    } else {
        let keep = match c.below(3) {
            0 => blocks - 1 - c.below(8),
            1 => c.below(8),
            _ => c.below(blocks),
        };
        img.truncate(keep as usize * BLOCK);
        Expect::Refuse(SB)
    };
    let what = format!("{}: image of {} blocks", base.name, img.len() / BLOCK);
    guarded(move || check_image(base, img, expect))?.map_err(|e| format!("{what}: {e}"))
}

// ----- running -----

/// The default case counts: 12,200 in all, about 15 s in a debug build on two cores. The
/// total scales with INTACTFS_FUZZ_CASES.
const CLASSES: &[(&str, u32)] = &[
    ("superblock_and_checkpoint_bytes", 1200),
    ("snapshot_bytes", 700),
    ("journal_bytes", 1200),
    ("data_and_free_bytes", 900),
    ("random_blocks_anywhere", 900),
    ("truncated_or_extended", 300),
    ("forged_superblock", 700),
    ("forged_checkpoint", 1200),
    ("forged_record", 1500),
    ("hostile_records", 1800),
    ("forged_snapshot", 1800),
];

fn cases(name: &str) -> u32 {
    let default = CLASSES.iter().find(|c| c.0 == name).unwrap().1;
    match std::env::var("INTACTFS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(total) => {
            let sum: u64 = CLASSES.iter().map(|c| c.1 as u64).sum();
            (total * default as u64 / sum).max(1) as u32
        }
        None => default,
    }
}

fn run_class<S: Strategy>(name: &str, strat: S, f: impl Fn(S::Value) -> Result<Verdict, String>) {
    bases();
    let n = cases(name);
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    });
    let counts = [Cell::new(0u64), Cell::new(0), Cell::new(0)];
    let start = std::time::Instant::now();
    let r = runner.run(&strat, |v| {
        let v = f(v).map_err(TestCaseError::fail)?;
        counts[v as usize].set(counts[v as usize].get() + 1);
        Ok(())
    });
    println!(
        "hostile {name}: {} cases in {:.1} s: {} refused, {} identical, {} mounted with other content",
        counts.iter().map(|c| c.get()).sum::<u64>(),
        start.elapsed().as_secs_f64(),
        counts[0].get(),
        counts[1].get(),
        counts[2].get()
    );
    if let Err(e) = r {
        panic!("hostile {name}: {e}");
    }
}

#[test]
fn superblock_and_checkpoint_bytes() {
    run_class("superblock_and_checkpoint_bytes", choices(), |x| {
        byte_case(
            &[Region::Superblock, Region::ActiveSlot, Region::UnusedSlot],
            x,
        )
    });
}

#[test]
fn snapshot_bytes() {
    run_class("snapshot_bytes", choices(), |x| {
        byte_case(&[Region::Snapshot], x)
    });
}

#[test]
fn journal_bytes() {
    run_class("journal_bytes", choices(), |x| {
        byte_case(
            &[Region::LiveRecord, Region::LiveRecord, Region::JournalTail],
            x,
        )
    });
}

#[test]
fn data_and_free_bytes() {
    run_class("data_and_free_bytes", choices(), |x| {
        byte_case(&[Region::Data, Region::Data, Region::Free], x)
    });
}

#[test]
fn random_blocks_anywhere() {
    run_class("random_blocks_anywhere", choices(), |x| {
        byte_case(&[Region::Anywhere], x)
    });
}

#[test]
fn truncated_or_extended() {
    run_class("truncated_or_extended", choices(), truncated);
}

#[test]
fn forged_superblock_fields() {
    run_class("forged_superblock", choices(), forged_superblock);
}

#[test]
fn forged_checkpoint_fields() {
    run_class("forged_checkpoint", choices(), forged_checkpoint);
}

#[test]
fn forged_journal_records() {
    run_class("forged_record", choices(), forged_record);
}

#[test]
fn hostile_operations_replayed() {
    run_class("hostile_records", choices(), hostile_records);
}

#[test]
fn forged_snapshot_metadata() {
    run_class("forged_snapshot", choices(), forged_snapshot);
}

/// The targeted checks the issue names, once each, on every base image.
#[test]
fn named_damage_outcomes() {
    for base in bases() {
        // A data block of a file: the read and fsck(verify_data) report it.
        let (b, u) = base
            .uses
            .iter()
            .find(|(b, u)| {
                matches!(u, Use::Data { orphan: false, .. }) && !base.verified.contains_key(b)
            })
            .expect("an old data block");
        let mut img = base.img.clone();
        img[*b as usize * BLOCK + 7] ^= 0x20;
        let Use::Data { ino, .. } = u else {
            unreachable!()
        };
        let e = Expect::DataDamage {
            inos: [*ino].into(),
            blocks: [*b].into(),
        };
        assert_eq!(
            guarded(move || check_image(base, img, e)).unwrap(),
            Ok(Verdict::Mounted),
            "{}",
            base.name
        );
        // The unused checkpoint slot and the stale journal: nothing changes.
        let mut img = base.img.clone();
        put(&mut img, CHECKPOINT_SLOTS[1 - base.slot], &[0xA5; BLOCK]);
        for b in base.journal_head..base.sb.journal_end() {
            img[b as usize * BLOCK + 20] ^= 0xFF;
        }
        assert_eq!(
            guarded(move || check_image(base, img, Expect::Identical)).unwrap(),
            Ok(Verdict::Identical),
            "{}",
            base.name
        );
        // The superblock and the live snapshot: mount refuses.
        for b in [0, base.cp.snapshot[0].0] {
            let mut img = base.img.clone();
            img[b as usize * BLOCK + 17] ^= 1;
            let e = expect_diff(base, &img);
            assert!(matches!(e, Expect::Refuse(_)), "{e:?}");
            assert_eq!(
                guarded(move || check_image(base, img, e)).unwrap(),
                Ok(Verdict::Refused),
                "{}",
                base.name
            );
        }
    }
}

/// Found by `random_blocks_anywhere` (the oracle was wrong, not the engine): the active
/// checkpoint header damaged, so mount falls back to the older one and replays its
/// records again, and a block of an orphan's data that one of those records covers
/// damaged too. Replay stops at that record: a state the older header allows. On disk this
/// looks exactly like a damaged older header plus a crash before that record's data was
/// flushed, where cutting is right, so no recovery rule can refuse one and not the other.
#[test]
fn damaged_header_and_data_of_a_replayed_record() {
    let v = vec![
        0,
        16832707005857684882,
        916573579465,
        4782588542154677049,
        7247657056076601677,
        3008493269754598409,
        0,
        0,
        0,
        11331697329887742337,
        0,
    ];
    let verdict = byte_case(&[Region::Anywhere], (2, v)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        verdict,
        Verdict::Mounted,
        "replay stops at the damaged record"
    );
}
